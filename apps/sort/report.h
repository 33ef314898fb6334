// SPDX-License-Identifier: Apache-2.0
// The sort's report as JSON: the keys of `tierflow sort --json` (docs/usage.md), shared by the
// CLI and the Python package's tierflow.sort.
#pragma once

#include <nlohmann/json.hpp>

#include "sort/sort.h"

namespace tierflow::extsort {

// records, bytes, sort_ms, floor_ms, vs_floor (null without a floor), verified,
// temp_peak_bytes, rss_peak_bytes, memory_bytes, runs, run_bytes, generate_ms, verify_ms,
// floor_phases and sort_phases ([{name, ms}]), stale_removed, and warnings when there are any.
nlohmann::json ReportJson(const Report& r);

}  // namespace tierflow::extsort
