// SPDX-License-Identifier: Apache-2.0
// Python helpers of the CLI: plots through matplotlib, the DuckDB referee of `tierflow qdp`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tierflow/status.h"

namespace tierflow::bench {

// Runs the helper `script` (a file name: plot_copy.py, plot_qdp.py, qdp_duckdb.py) with `args`
// and returns what it printed on stdout (its stderr goes to ours). The scripts lie beside the
// executable: <dir>/share/tierflow in the build tree, <dir>/../share/tierflow once installed.
// The interpreter is $TIERFLOW_PYTHON, else the project's venv beside the build tree
// (<dir>/../.venv, made by `make setup`), else python3 from PATH. `needs` names what it must
// provide, for the errors. Errors: no script, no interpreter, the script failed (it says why:
// the scripts report missing modules themselves).
Result<std::string> RunPythonScript(const std::string& script, const std::vector<std::string>& args,
                                    std::string_view needs);
// Whether the interpreter RunPythonScript uses imports every module in `modules` (a Python
// import list, e.g. "duckdb, numpy"), checked before a long run rather than after it. Errors:
// no interpreter, or a module missing (the message says how to get it).
Status CheckPythonModules(std::string_view modules);
// Where the helper `script` (a file name) lies, as RunPythonScript finds it.
Result<std::string> HelperScript(const std::string& script);
// Runs the plotting `script` with the results as JSON to write `png_path`.
Status Plot(const std::string& script, const nlohmann::json& results, const std::string& png_path);

}  // namespace tierflow::bench
