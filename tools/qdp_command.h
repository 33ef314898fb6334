// SPDX-License-Identifier: Apache-2.0
// `tierflow qdp`: the query-driven prefetching experiment (Fürst thesis ch. 6) as a table like
// Table 6.2 or JSON, optionally refereed by DuckDB and plotted like Figures 6.1/6.2.
#pragma once

#include <ostream>
#include <string>

#include "qdp/qdp.h"

namespace tierflow::tools {

struct QdpCommandOptions {
  bool json = false;
  bool progress = false;  // a status line on stderr when it is a terminal
  // Time the same query in DuckDB (tools/qdp_duckdb.py in the project's venv) on the same
  // column files with the all-DRAM run's thread count; its sum must equal ours.
  bool compare_duckdb = false;
  int duckdb_iterations = 0;  // 0: as many as the pipeline's
  std::string plot_path;      // per-pipeline times as a PNG (bench/plot_qdp.py)
};

Status RunQdpCommand(qdp::Config config, const QdpCommandOptions& options, std::ostream& out);

}  // namespace tierflow::tools
