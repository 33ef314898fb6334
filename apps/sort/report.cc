// SPDX-License-Identifier: Apache-2.0
#include "sort/report.h"

namespace tierflow::extsort {

nlohmann::json ReportJson(const Report& r) {
  nlohmann::json j{{"records", r.records},
                   {"bytes", r.bytes},
                   {"sort_ms", r.sort_ms},
                   {"floor_ms", r.floor_ms},
                   {"vs_floor", r.floor_ms > 0 ? nlohmann::json(r.sort_ms / r.floor_ms) : nullptr},
                   {"verified", r.verified},
                   {"temp_peak_bytes", r.temp_peak_bytes},
                   {"rss_peak_bytes", r.rss_peak_bytes},
                   {"memory_bytes", r.memory_bytes},
                   {"runs", r.runs},
                   {"run_bytes", r.run_bytes},
                   {"generate_ms", r.generate_ms},
                   {"verify_ms", r.verify_ms}};
  for (const auto& [key, phases] :
       {std::pair{"floor_phases", &r.floor_phases}, std::pair{"sort_phases", &r.sort_phases}}) {
    nlohmann::json a = nlohmann::json::array();
    for (const PhaseTime& p : *phases) a.push_back({{"name", p.name}, {"ms", p.ms}});
    j[key] = a;
  }
  j["stale_removed"] = r.stale_removed;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  if (!r.plan.name.empty()) j["blueprint"] = nlohmann::json::parse(r.plan.ToJson());
  return j;
}

}  // namespace tierflow::extsort
