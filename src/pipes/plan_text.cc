// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tierflow/blueprint.h"
#include "tierflow/pipe.h"
#include "tierflow/size.h"

namespace tierflow {

namespace {

std::string Gbps(const PipeHop& h) {
  if (!h.calibrated) return "uncalibrated";
  return fmt::format("{:.2f} GB/s expected{}", h.expected_gbps, h.model ? " (a model)" : "");
}

void HopsText(const PipePlan& p, std::string& out, const char* indent) {
  for (std::size_t i = 0; i < p.hops.size(); ++i) {
    const PipeHop& h = p.hops[i];
    out += fmt::format("{}hop {}: {} -> {} by {}: {}\n", indent, i + 1, h.from, h.to,
                       MechanismName(h.mechanism), Gbps(h));
  }
  for (const PipeRejection& r : p.rejected) {
    out += fmt::format("{}rejected {}: {}\n", indent, r.mechanism, r.reason);
  }
}

nlohmann::json HopsJson(const std::vector<PipeHop>& hops) {
  nlohmann::json a = nlohmann::json::array();
  for (const PipeHop& h : hops) {
    a.push_back({{"mechanism", std::string(MechanismName(h.mechanism))},
                 {"from", h.from},
                 {"to", h.to},
                 {"expected_gbps", h.calibrated ? nlohmann::json(h.expected_gbps) : nullptr},
                 {"calibrated", h.calibrated},
                 {"model", h.model}});
  }
  return a;
}

nlohmann::json RejectedJson(const std::vector<PipeRejection>& rs) {
  nlohmann::json a = nlohmann::json::array();
  for (const PipeRejection& r : rs) a.push_back({{"mechanism", r.mechanism}, {"reason", r.reason}});
  return a;
}

}  // namespace

std::string PipePlan::ToText() const {
  std::string out = fmt::format("pipe {} -> {}\n", from, to);
  if (segments.empty()) {
    HopsText(*this, out, "  ");
  } else {
    for (const PipePlan& s : segments) {
      out += fmt::format("  segment {} -> {}:\n", s.from, s.to);
      HopsText(s, out, "    ");
    }
  }
  out += expected_gbps > 0
             ? fmt::format("  expected: {:.2f} GB/s (the slowest hop)\n", expected_gbps)
             : "  expected: unknown (a hop has no calibrated figure)\n";
  out += fmt::format("  knobs: queue depth {}, chunk {}, bandwidth cap {}, staging {}\n",
                     queue_depth, FormatSize(chunk_bytes),
                     bandwidth_cap == 0 ? "none" : FormatSize(bandwidth_cap) + "/s",
                     staging_bytes == 0 ? "none" : FormatSize(staging_bytes));
  for (const std::string& n : notes) out += "  note: " + n + "\n";
  return out;
}

std::string PipePlan::ToJson() const {
  nlohmann::json j{{"from", from},
                   {"to", to},
                   {"hops", HopsJson(hops)},
                   {"rejected", RejectedJson(rejected)},
                   {"expected_gbps", expected_gbps > 0 ? nlohmann::json(expected_gbps) : nullptr},
                   {"queue_depth", queue_depth},
                   {"chunk_bytes", chunk_bytes},
                   {"bandwidth_cap", bandwidth_cap},
                   {"staging_bytes", staging_bytes},
                   {"notes", notes}};
  nlohmann::json segs = nlohmann::json::array();
  for (const PipePlan& s : segments) {
    segs.push_back({{"from", s.from},
                    {"to", s.to},
                    {"hops", HopsJson(s.hops)},
                    {"rejected", RejectedJson(s.rejected)}});
  }
  if (!segments.empty()) {
    j["segments"] = segs;
    nlohmann::json all = nlohmann::json::array();
    for (const PipePlan& s : segments) {
      for (const nlohmann::json& r : RejectedJson(s.rejected)) all.push_back(r);
    }
    j["rejected"] = all;
  }
  return j.dump(2);
}

std::string BlueprintPlan::ToText() const {
  std::string out = fmt::format("blueprint {}\n", name);
  for (const RoleBinding& b : bindings) {
    out += fmt::format("  role {} ({}): {} — {}\n", b.role, b.kind, b.bound_to, b.why);
    for (const PipeRejection& r : b.rejected) {
      out += fmt::format("    rejected {}: {}\n", r.mechanism, r.reason);
    }
  }
  for (const StagePlan& s : stages) {
    out += fmt::format("  stage {}: {} -> {}\n", s.stage, s.from_role, s.to_role);
    std::string plan = s.plan.ToText();
    for (std::size_t at = 0; at < plan.size();) {
      const std::size_t end = plan.find('\n', at);
      out += "    " + plan.substr(at, end - at) + "\n";
      at = end == std::string::npos ? plan.size() : end + 1;
    }
  }
  return out;
}

std::string BlueprintPlan::ToJson() const {
  nlohmann::json roles = nlohmann::json::array();
  for (const RoleBinding& b : bindings) {
    roles.push_back({{"role", b.role},
                     {"kind", b.kind},
                     {"bound_to", b.bound_to},
                     {"why", b.why},
                     {"rejected", RejectedJson(b.rejected)}});
  }
  nlohmann::json st = nlohmann::json::array();
  for (const StagePlan& s : stages) {
    st.push_back({{"stage", s.stage},
                  {"from", s.from_role},
                  {"to", s.to_role},
                  {"plan", nlohmann::json::parse(s.plan.ToJson())}});
  }
  return nlohmann::json{{"name", name}, {"bindings", roles}, {"stages", st}}.dump(2);
}

}  // namespace tierflow
