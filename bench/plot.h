// Plots through matplotlib in the project's venv (made by scripts/setup.sh).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tierflow/status.h"

namespace tierflow::bench {

// Runs bench/<script> with the results as JSON to write `png_path`. The interpreter is
// $TIERFLOW_PYTHON or the venv of the source tree.
Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path);

}  // namespace tierflow::bench
