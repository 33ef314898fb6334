// SPDX-License-Identifier: Apache-2.0
#include "pipes/planner.h"

#include "pipes/tiered.h"

#include <algorithm>

#include <fmt/format.h>

namespace tierflow::detail {

namespace {

// A way to serve one pair: one hop, or two through staging DRAM.
struct Candidate {
  std::vector<Mechanism> mechanisms;
  int staging_node = -1;
  std::vector<PipeHop> hops;
  double gbps = 0;  // the slowest hop; 0 when a hop is uncalibrated
  bool calibrated = true;
  std::string label;
};

Engine* EngineFor(const PipeRuntime::Impl& rt, Mechanism m) {
  switch (m) {
    case Mechanism::kCpu:
      return rt.cpu;
    case Mechanism::kDsa:
      return rt.dsa;
    default:
      return rt.uring.get();
  }
}

bool IsModel(const PipeRuntime::Impl& rt, Mechanism m) {
  return m == Mechanism::kDsa && rt.dsa && rt.dsa->capabilities().is_model;
}

int DramNear(const Topology& t, int node) {
  if (node < 0) node = t.nodes().empty() ? 0 : t.nodes().front().os_index;
  Result<const NumaNode*> n = t.NearestOfKind(node, TierKind::kDram);
  return n.ok() ? (*n)->os_index : node;
}

// The memory mechanisms available, most preferred first (hardware DSA, CPU, the DSA model).
std::vector<Mechanism> MemoryMechanisms(const PipeRuntime::Impl& rt) {
  std::vector<Mechanism> out;
  if (rt.dsa && !rt.dsa->capabilities().is_model) out.push_back(Mechanism::kDsa);
  out.push_back(Mechanism::kCpu);
  if (rt.dsa && rt.dsa->capabilities().is_model) out.push_back(Mechanism::kDsa);
  return out;
}

PipeHop MakeHop(const PipeRuntime::Impl& rt, const Calibration& cal, Mechanism m,
                const std::string& from, const std::string& to, const std::string& from_name,
                const std::string& to_name) {
  PipeHop h;
  h.mechanism = m;
  h.from = from_name;
  h.to = to_name;
  h.model = IsModel(rt, m);
  if (std::optional<CalibrationEntry> e = cal.Find(m, from, to)) {
    h.expected_gbps = e->gbps;
    h.calibrated = true;
  }
  return h;
}

void Finish(Candidate& c) {
  c.gbps = 1e30;
  for (const PipeHop& h : c.hops) {
    c.calibrated = c.calibrated && h.calibrated;
    c.gbps = std::min(c.gbps, h.expected_gbps);
  }
  if (!c.calibrated) c.gbps = 0;
  for (std::size_t i = 0; i < c.mechanisms.size(); ++i) {
    if (i != 0) c.label.push_back('>');
    c.label.append(MechanismName(c.mechanisms[i]));
  }
  if (c.staging_node >= 0) c.label += fmt::format(" via staging dram:{}", c.staging_node);
}

// The direct mechanism between a pair of ends, or none.
std::optional<Mechanism> DirectIo(const LocatorImpl& s, const LocatorImpl& d) {
  if (s.is_file() && d.is_file()) return Mechanism::kCopyFileRange;
  if (s.is_file()) return Mechanism::kUringRead;
  if (d.is_file()) return Mechanism::kUringWrite;
  return std::nullopt;
}

struct PairContext {
  const PipeRuntime::Impl& rt;
  const Calibration& cal;
  const LocatorImpl& s;
  const LocatorImpl& d;
};

Candidate Direct(const PairContext& p, std::vector<Mechanism> ms) {
  Candidate c;
  c.mechanisms = std::move(ms);
  c.hops.push_back(
      MakeHop(p.rt, p.cal, c.mechanisms[0], p.s.Endpoint(), p.d.Endpoint(), p.s.name, p.d.name));
  Finish(c);
  return c;
}

// s -> staging DRAM -> d, the first hop `a`, the second `b`.
Candidate Staged(const PairContext& p, Mechanism a, Mechanism b, int node) {
  Candidate c;
  c.mechanisms = {a, b};
  c.staging_node = node;
  const std::string mid = CalibrationEndpoint(TierKind::kDram, node);
  const std::string mid_name = "staging:" + mid;
  c.hops.push_back(MakeHop(p.rt, p.cal, a, p.s.Endpoint(), mid, p.s.name, mid_name));
  c.hops.push_back(MakeHop(p.rt, p.cal, b, mid, p.d.Endpoint(), mid_name, p.d.name));
  Finish(c);
  return c;
}

std::vector<Candidate> Candidates(const PairContext& p, bool force_staging) {
  std::vector<Candidate> out;
  const Topology& t = p.rt.topology;
  const std::optional<Mechanism> io = DirectIo(p.s, p.d);
  const std::vector<Mechanism> mem = MemoryMechanisms(p.rt);
  if (!force_staging) {
    if (io) out.push_back(Direct(p, {*io}));
    if (!io) {
      for (Mechanism m : mem) out.push_back(Direct(p, {m}));
    }
  }
  // Staging pays where a memory end is not DRAM (file -> DRAM -> HBM), and file to file.
  if (p.s.is_file() && p.d.is_file()) {
    out.push_back(Staged(p, Mechanism::kUringRead, Mechanism::kUringWrite, DramNear(t, -1)));
  } else if (p.s.is_file() && (p.d.tier != TierKind::kDram || force_staging)) {
    for (Mechanism m : mem)
      out.push_back(Staged(p, Mechanism::kUringRead, m, DramNear(t, p.d.node)));
  } else if (p.d.is_file() && (p.s.tier != TierKind::kDram || force_staging)) {
    for (Mechanism m : mem)
      out.push_back(Staged(p, m, Mechanism::kUringWrite, DramNear(t, p.s.node)));
  }
  return out;
}

// Reasons for the mechanisms that cannot serve a pair at all.
std::vector<PipeRejection> Unreachable(const PipeRuntime::Impl& rt, const LocatorImpl& s,
                                       const LocatorImpl& d) {
  std::vector<PipeRejection> out;
  auto reject = [&](Mechanism m, std::string why) {
    out.push_back({std::string(MechanismName(m)), std::move(why)});
  };
  if (s.is_file() || d.is_file()) {
    const char* end = s.is_file() && d.is_file() ? "both ends are files"
                      : s.is_file()              ? "the source is a file"
                                                 : "the destination is a file";
    reject(Mechanism::kCpu, fmt::format("copies memory to memory only; {}", end));
    if (rt.dsa) reject(Mechanism::kDsa, fmt::format("copies memory to memory only; {}", end));
  }
  if (!rt.dsa) reject(Mechanism::kDsa, rt.dsa_note);
  if (!s.is_file()) reject(Mechanism::kUringRead, "reads files; the source is memory");
  if (!d.is_file()) reject(Mechanism::kUringWrite, "writes files; the destination is memory");
  if (!(s.is_file() && d.is_file())) {
    reject(Mechanism::kCopyFileRange, "copies file to file; one end is memory");
  }
  return out;
}

bool Better(const Candidate& a, const Candidate& b) {
  if (a.calibrated && b.calibrated) return a.gbps > b.gbps * 1.0001;
  return false;  // uncalibrated: keep the earlier (preferred) one
}

std::string WhyLost(const Candidate& lost, const Candidate& won) {
  if (lost.calibrated && won.calibrated) {
    return fmt::format("calibrated {:.2f} GB/s, below the chosen {:.2f} GB/s", lost.gbps, won.gbps);
  }
  return fmt::format(
      "no calibrated figure to prefer it; {} comes first by preference (direct "
      "before staged; DSA hardware, then CPU, then the DSA model)",
      won.label);
}

// Chooses among the candidates of one pair. Errors: none left after the override.
Result<Candidate> Choose(std::vector<Candidate> all, const PipeOptions& o,
                         std::vector<PipeRejection>& rejected) {
  std::vector<Candidate> ok;
  for (Candidate& c : all) {
    if (o.mechanism &&
        std::find(c.mechanisms.begin(), c.mechanisms.end(), *o.mechanism) == c.mechanisms.end()) {
      rejected.push_back({c.label, fmt::format("the mechanism override asks for {}",
                                               MechanismName(*o.mechanism))});
      continue;
    }
    ok.push_back(std::move(c));
  }
  if (ok.empty()) {
    std::string reasons;
    for (const PipeRejection& r : rejected)
      reasons += fmt::format("\n  {}: {}", r.mechanism, r.reason);
    return Status::Unsupported(fmt::format("no way to move the data{}", reasons));
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < ok.size(); ++i) {
    if (Better(ok[i], ok[best])) best = i;
  }
  for (std::size_t i = 0; i < ok.size(); ++i) {
    if (i != best) rejected.push_back({ok[i].label, WhyLost(ok[i], ok[best])});
  }
  return ok[best];
}

Status CheckEnds(const Locator& from, const Locator& to, const PipeOptions& o) {
  if (!from.valid() || !to.valid()) {
    return Status::InvalidArgument(
        "a pipe needs two declared locators (PipeRuntime::Node, Memory, File, "
        "...)");
  }
  for (const Locator* l : {&from, &to}) {
    if (LocatorAccess::Get(*l)->stage) {
      return Status::InvalidArgument(
          fmt::format("{} is a stage of a tiered area, not a locator of its own: connect the "
                      "area, and it places the data on its stages",
                      l->name()));
    }
  }
  for (const LocatorImpl* d : Leaves(to)) {
    if (!d->writable) {
      return Status::InvalidArgument(fmt::format(
          "the destination {} was declared for reading (FileMode::kRead): declare it with "
          "kCreate, kReplace or kModify to write it",
          d->name));
    }
  }
  if (o.staging.valid() && o.staging.kind() != LocatorKind::kStaging &&
      o.staging.kind() != LocatorKind::kMemory) {
    return Status::InvalidArgument(
        fmt::format("staging {} is not memory: declare it with "
                    "PipeRuntime::Staging",
                    o.staging.name()));
  }
  return Status::Ok();
}

Route RouteOf(const PipeRuntime::Impl& rt, const LocatorImpl& s, const LocatorImpl& d,
              const Candidate& c) {
  Route r;
  r.src = &s;
  r.dst = &d;
  r.mechanisms = c.mechanisms;
  for (Mechanism m : c.mechanisms) r.engines.push_back(EngineFor(rt, m));
  r.staging_node = c.staging_node;
  const bool one_file = s.is_file() != d.is_file();
  const LocatorImpl& file = s.is_file() ? s : d;
  r.may_bounce = c.mechanisms.size() == 1 && one_file && file.direct_alignment != 0;
  r.bounce_node = DramNear(rt.topology, s.is_file() ? d.node : s.node);
  return r;
}

void SetKnobs(bool has_file, const PipeOptions& o, PipePlan& p) {
  p.queue_depth = o.queue_depth != 0 ? o.queue_depth : has_file ? 8 : 4;
  p.chunk_bytes = o.chunk_bytes != 0 ? o.chunk_bytes : has_file ? (1u << 20) : (4u << 20);
  p.bandwidth_cap = o.bandwidth_cap;
}

// Plans one (source leaf, destination leaf) pair into `plan` and `routes`.
Status PlanPair(const PipeRuntime::Impl& rt, const Calibration& cal, const LocatorImpl& s,
                const LocatorImpl& d, const PipeOptions& o, PipePlan& plan,
                std::vector<Route>& routes) {
  PairContext ctx{rt, cal, s, d};
  plan.from = s.name;
  plan.to = d.name;
  plan.rejected = Unreachable(rt, s, d);
  if (o.mechanism && ((s.mechanisms | d.mechanisms) & MechanismBit(*o.mechanism)) == 0) {
    return Status::Unsupported(fmt::format("mechanism {} cannot reach {} or {}",
                                           MechanismName(*o.mechanism), s.name, d.name));
  }
  Result<Candidate> c = Choose(Candidates(ctx, o.force_staging), o, plan.rejected);
  if (!c.ok()) {
    return Status(c.status().code(),
                  fmt::format("{} -> {}: {}", s.name, d.name, c.status().message()));
  }
  plan.hops = c->hops;
  plan.expected_gbps = c->gbps;
  routes.push_back(RouteOf(rt, s, d, *c));
  return Status::Ok();
}

void AddNotes(const PipeRuntime::Impl& rt, const Locator& from, const Locator& to, PipePlan& p) {
  p.notes.push_back(rt.calibration_note);
  if (from.modelled() || to.modelled()) {
    p.notes.push_back(
        fmt::format("memory of nodes absent here ({}) stands in on this machine's "
                    "memory: placement is modelled, transfers are real",
                    rt.topology.source()));
  }
  if (rt.dsa && rt.dsa->capabilities().is_model) p.notes.push_back(rt.dsa_note);
  for (const Locator* l : {&from, &to}) {
    if (const TieredArea* area = LocatorAccess::Get(*l)->tiered.get())
      p.notes.push_back(area->note);
  }
  for (const Locator* l : {&from, &to}) {
    if (l->is_file() && LocatorAccess::Get(*l)->direct_alignment == 0) {
      p.notes.push_back(
          fmt::format("{}: the file system refuses O_DIRECT; I/O goes through the "
                      "page cache",
                      l->path()));
    }
  }
}

}  // namespace

Result<PipeRoutes> PlanPipe(const PipeRuntime::Impl& rt, const Locator& from, const Locator& to,
                            const PipeOptions& o) {
  if (Status s = CheckEnds(from, to, o); !s.ok()) return s;
  const Calibration cal = rt.CalibrationCopy();
  PipeRoutes bp;
  PipePlan& plan = bp.plan;
  plan.from = from.name();
  plan.to = to.name();
  const auto chain = [](const Locator& l) {
    return l.kind() == LocatorKind::kSpill || l.kind() == LocatorKind::kTiered;
  };
  const bool spill = chain(from) || chain(to);
  bool has_file = false;
  plan.expected_gbps = 1e30;
  bool calibrated = true;
  for (const LocatorImpl* s : Leaves(from)) {
    for (const LocatorImpl* d : Leaves(to)) {
      has_file = has_file || s->is_file() || d->is_file();
      PipePlan seg;
      if (Status st = PlanPair(rt, cal, *s, *d, o, seg, bp.routes); !st.ok()) return st;
      calibrated = calibrated && seg.expected_gbps > 0;
      plan.expected_gbps = std::min(plan.expected_gbps, seg.expected_gbps);
      if (!spill) {
        plan.hops = seg.hops;
        plan.rejected = seg.rejected;
      } else {
        plan.hops.insert(plan.hops.end(), seg.hops.begin(), seg.hops.end());
        plan.segments.push_back(std::move(seg));
      }
    }
  }
  if (!calibrated) plan.expected_gbps = 0;
  SetKnobs(has_file, o, plan);
  AddNotes(rt, from, to, plan);
  return bp;
}

}  // namespace tierflow::detail
