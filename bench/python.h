// Python helpers of the CLI, run with the project's venv (made by scripts/setup.sh): plots
// through matplotlib, the DuckDB referee of `tierflow qdp`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tierflow/status.h"

namespace tierflow::bench {

// Runs the source tree's `script` (a path relative to it) with `args` under $TIERFLOW_PYTHON or
// the venv's python3 and returns what it printed on stdout (its stderr goes to ours). `needs`
// names what the interpreter must provide, for the error when it is missing. Errors: no
// interpreter, the script failed (its exit status).
Result<std::string> RunPythonScript(const std::string& script, const std::vector<std::string>& args,
                                    std::string_view needs);

// Runs bench/<script> with the results as JSON to write `png_path`.
Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path);

}  // namespace tierflow::bench
