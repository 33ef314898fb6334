// SPDX-License-Identifier: Apache-2.0
// Blueprints: roles bound to concrete locators on the machine found, stages connected.
#include "tierflow/blueprint.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/own_file.h"
#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/buffer.h"
#include "tierflow/size.h"

namespace tierflow {

enum class RoleKind { kMemory, kFile, kTiered, kGiven };

struct Blueprint::Role {
  std::string name;
  RoleKind kind = RoleKind::kMemory;
  AbstractMemory memory;
  FileMode mode = FileMode::kRead;
  TieredOptions tiered;
};

struct Blueprint::StageDecl {
  std::string name, from, to;
  PipeOptions options;
};

struct PlanInstance::State {
  std::map<std::string, Locator, std::less<>> locators;
  std::map<std::string, Pipe, std::less<>> pipes;
  BlueprintPlan plan;
};

namespace {

using Role = Blueprint::Role;
using StageDecl = Blueprint::StageDecl;

const char* KindName(RoleKind k) {
  switch (k) {
    case RoleKind::kMemory:
      return "memory";
    case RoleKind::kFile:
      return "file";
    case RoleKind::kTiered:
      return "tiered";
    case RoleKind::kGiven:
      return "given";
  }
  return "?";
}

// What Instantiate builds; on failure the files it created are removed.
struct Binder {
  PipeRuntime& rt;
  const PipeRuntime::Impl& impl;
  const std::vector<std::shared_ptr<const Role>>& roles;
  const std::vector<std::shared_ptr<const StageDecl>>& stages;
  const Blueprint::Bindings& b;
  PlanInstance::State st;
  bool done = false;

  ~Binder() {
    if (!done) RemoveCreated();
  }
  void RemoveCreated() {
    for (const auto& [name, l] : st.locators) {
      const detail::LocatorImpl* f = detail::LocatorAccess::Get(l);
      if (f->created) RemoveIfStill(f->file->fd, f->path);
    }
  }
  const Role* Find(std::string_view name) const {
    for (const auto& r : roles) {
      if (r->name == name) return r.get();
    }
    return nullptr;
  }
  Status Check() const;
  Status CheckBindings() const;
  Status BindOthers();
  Status BindMemory(const Role& r);
  Status Connect();
};

Status Binder::Check() const {
  std::set<std::string> seen;
  for (const auto& r : roles) {
    if (!seen.insert(r->name).second) {
      return Status::InvalidArgument(
          fmt::format("role '{}' is declared twice: give each role one name", r->name));
    }
    if (r->kind == RoleKind::kMemory && r->memory.bytes == 0) {
      return Status::InvalidArgument(
          fmt::format("memory role '{}' needs bytes: AbstractMemory::bytes", r->name));
    }
  }
  std::set<std::string> names;
  for (const auto& s : stages) {
    if (!names.insert(s->name).second) {
      return Status::InvalidArgument(fmt::format("stage '{}' is declared twice", s->name));
    }
    for (const std::string& end : {s->from, s->to}) {
      if (Find(end) == nullptr) {
        return Status::InvalidArgument(
            fmt::format("stage '{}' names role '{}', which is not declared: declare it "
                        "(Blueprint::Memory, File, Tiered, Given) or fix the name",
                        s->name, end));
      }
    }
    if (s->from == s->to) {
      return Status::InvalidArgument(fmt::format(
          "stage '{}' goes from role '{}' to itself: a stage joins two roles", s->name, s->from));
    }
  }
  return CheckBindings();
}

// Bindings for roles that are none of that kind first (a misspelt name), then roles unbound.
Status Binder::CheckBindings() const {
  auto check = [&](const auto& map, RoleKind kind, const char* field) -> Status {
    for (const auto& [name, value] : map) {
      const Role* r = Find(name);
      if (r == nullptr || r->kind != kind) {
        return Status::InvalidArgument(
            fmt::format("Bindings::{} binds '{}', which is not a {} role of the blueprint: "
                        "check the name",
                        field, name, KindName(kind)));
      }
    }
    return Status::Ok();
  };
  if (Status s = check(b.files, RoleKind::kFile, "files"); !s.ok()) return s;
  if (Status s = check(b.given, RoleKind::kGiven, "given"); !s.ok()) return s;
  for (const auto& r : roles) {
    const bool file = r->kind == RoleKind::kFile, given = r->kind == RoleKind::kGiven;
    if ((file && !b.files.contains(r->name)) || (given && !b.given.contains(r->name))) {
      return Status::InvalidArgument(
          fmt::format("{} role '{}' is not bound: give it in Bindings::{}", KindName(r->kind),
                      r->name, file ? "files" : "given"));
    }
  }
  return Status::Ok();
}

Status Prefixed(const std::string& what, const Status& s) {
  return Status(s.code(), fmt::format("{}: {}", what, s.message()));
}

// Files and given locators, then tiered areas: what needs no choosing.
Status Binder::BindOthers() {
  for (RoleKind pass : {RoleKind::kGiven, RoleKind::kFile, RoleKind::kTiered}) {
    for (const auto& r : roles) {
      if (r->kind != pass) continue;
      Result<Locator> l = Status::Internal("unbound");
      std::string why;
      if (pass == RoleKind::kGiven) {
        l = b.given.at(r->name);
        if (!l->valid()) l = Status::InvalidArgument("the given locator names nothing");
        why = "given by the program";
      } else if (pass == RoleKind::kFile) {
        const Blueprint::FileBinding& f = b.files.at(r->name);
        l = rt.File(f.path, f.offset, f.length, r->mode);
        why = fmt::format("bound to {} ({})", f.path, FileModeName(r->mode));
      } else {
        l = rt.Tiered(r->tiered);
        why = "a tiered area: extents placed by occupancy";
      }
      if (!l.ok()) return Prefixed(fmt::format("role '{}'", r->name), l.status());
      st.plan.bindings.push_back({r->name, KindName(pass), l->name(), why, {}});
      st.locators.emplace(r->name, *l);
    }
  }
  return Status::Ok();
}

// The candidates of a memory role: a node of each tier, in preference order.
struct Candidate {
  TierKind tier = TierKind::kDram;
  int node = -1;
  std::string label;
  double gbps = 0;    // the slowest of its stages whose other end is bound (0: no figure)
  std::string stage;  // that stage
};

std::vector<TierKind> CandidateTiers(const Topology& t, const AbstractMemory& m) {
  if (!m.tiers.empty()) return m.tiers;
  return detail::TiersPresent(t, {TierKind::kDram, TierKind::kHbm, TierKind::kCxl});
}

// Why `node` cannot hold `bytes` ("" when it can).
std::string TooSmall(const PipeRuntime& rt, const NumaNode& node, std::uint64_t bytes) {
  if (!rt.topology().is_this_system()) {
    return node.capacity_bytes >= bytes
               ? ""
               : fmt::format("capacity {}, needs {}", FormatSize(node.capacity_bytes),
                             FormatSize(bytes));
  }
  Result<NodeMemory> m = QueryNodeMemory(node.os_index);
  if (!m.ok()) return m.status().message();
  return m->free_bytes >= bytes
             ? ""
             : fmt::format("{} free, needs {}", FormatSize(m->free_bytes), FormatSize(bytes));
}

// Memory of `c` standing in for the role in plans (nothing is allocated).
Locator Probe(const PipeRuntime::Impl& rt, const Candidate& c, std::uint64_t bytes) {
  auto impl = std::make_shared<detail::LocatorImpl>();
  impl->kind = LocatorKind::kMemory;
  impl->tier = c.tier;
  impl->node = c.node;
  impl->capacity = bytes;
  impl->alignment = 4096;
  impl->modelled = !rt.topology.is_this_system();
  impl->mechanisms = rt.MemoryMechanisms();
  impl->name = c.label;
  return detail::LocatorAccess::Make(std::move(impl));
}

// Scores `c` by the plans of the role's stages whose other end is bound. Errors: a stage
// that cannot be planned with it.
Status Score(const Binder& b, const Role& r, Candidate& c) {
  const Locator probe = Probe(b.impl, c, r.memory.bytes);
  c.gbps = 1e30;
  bool any = false;
  for (const auto& s : b.stages) {
    const bool from = s->from == r.name;
    if (!from && s->to != r.name) continue;
    auto other = b.st.locators.find(from ? s->to : s->from);
    if (other == b.st.locators.end()) continue;
    Result<PipePlan> p = from ? b.rt.Plan(probe, other->second, s->options)
                              : b.rt.Plan(other->second, probe, s->options);
    if (!p.ok())
      return Status(p.status().code(),
                    fmt::format("stage '{}': {}", s->name, p.status().message()));
    any = true;
    if (p->expected_gbps < c.gbps) {
      c.gbps = p->expected_gbps;
      c.stage = s->name;
    }
  }
  if (!any) c.gbps = 0;
  return Status::Ok();
}

}  // namespace

Status Binder::BindMemory(const Role& r) {
  const Topology& t = rt.topology();
  std::vector<Candidate> ok;
  RoleBinding rb{r.name, "memory", "", "", {}};
  for (TierKind k : CandidateTiers(t, r.memory)) {
    Result<const NumaNode*> n = detail::TierNode(t, k, r.memory.near_node);
    if (!n.ok()) {
      rb.rejected.push_back({std::string(TierKindName(k)), n.status().message()});
      continue;
    }
    Candidate c{k, (*n)->os_index, fmt::format("{}:{}", TierKindName(k), (*n)->os_index), 0, ""};
    std::string why = TooSmall(rt, **n, r.memory.bytes);
    if (why.empty()) {
      if (Status s = Score(*this, r, c); !s.ok()) why = s.message();
    }
    if (!why.empty()) {
      rb.rejected.push_back({c.label, why});
      continue;
    }
    ok.push_back(c);
  }
  if (ok.empty()) {
    std::vector<std::string> reasons;
    for (const PipeRejection& x : rb.rejected) reasons.push_back(x.mechanism + ": " + x.reason);
    return Status::OutOfMemory(
        fmt::format("role '{}': no memory tier can hold {} ({}): free memory, lower the size, or "
                    "name other tiers in AbstractMemory::tiers",
                    r.name, FormatSize(r.memory.bytes), fmt::join(reasons, "; ")));
  }
  const bool calibrated =
      std::all_of(ok.begin(), ok.end(), [](const Candidate& c) { return c.gbps > 0; });
  std::size_t best = 0;
  for (std::size_t i = 1; calibrated && i < ok.size(); ++i) {
    if (ok[i].gbps > ok[best].gbps) best = i;
  }
  for (std::size_t i = 0; i < ok.size(); ++i) {
    if (i == best) continue;
    rb.rejected.push_back(
        {ok[i].label, calibrated
                          ? fmt::format("plans {:.2f} GB/s (stage '{}'), below {}'s {:.2f} GB/s",
                                        ok[i].gbps, ok[i].stage, ok[best].label, ok[best].gbps)
                          : fmt::format("after {} in preference order (no calibrated figure "
                                        "for every candidate)",
                                        ok[best].label)});
  }
  Result<Locator> l = rt.Memory(ok[best].tier, r.memory.near_node, r.memory.bytes);
  if (!l.ok()) return Prefixed(fmt::format("role '{}'", r.name), l.status());
  rb.bound_to = l->name();
  rb.why = calibrated ? fmt::format("the fastest candidate that fits: stage '{}' plans {:.2f} GB/s",
                                    ok[best].stage, ok[best].gbps)
                      : "the first candidate that fits, in preference order";
  st.plan.bindings.push_back(std::move(rb));
  st.locators.emplace(r.name, *l);
  return Status::Ok();
}

Status Binder::Connect() {
  for (const auto& s : stages) {
    Result<Pipe> p = rt.Connect(st.locators.at(s->from), st.locators.at(s->to), s->options);
    if (!p.ok()) return Prefixed(fmt::format("stage '{}'", s->name), p.status());
    st.plan.stages.push_back({s->name, s->from, s->to, p->plan()});
    st.pipes.emplace(s->name, *p);
  }
  return Status::Ok();
}

Blueprint::Blueprint(std::string name) : name_(std::move(name)) {}

namespace {

std::shared_ptr<Role> NewRole(std::string name, RoleKind kind) {
  auto r = std::make_shared<Role>();
  r->name = std::move(name);
  r->kind = kind;
  return r;
}

}  // namespace

Blueprint& Blueprint::Memory(std::string role, AbstractMemory needs) {
  auto r = NewRole(std::move(role), RoleKind::kMemory);
  r->memory = std::move(needs);
  roles_.push_back(std::move(r));
  return *this;
}

Blueprint& Blueprint::File(std::string role, FileMode mode) {
  auto r = NewRole(std::move(role), RoleKind::kFile);
  r->mode = mode;
  roles_.push_back(std::move(r));
  return *this;
}

Blueprint& Blueprint::Tiered(std::string role, TieredOptions options) {
  auto r = NewRole(std::move(role), RoleKind::kTiered);
  r->tiered = std::move(options);
  roles_.push_back(std::move(r));
  return *this;
}

Blueprint& Blueprint::Given(std::string role) {
  roles_.push_back(NewRole(std::move(role), RoleKind::kGiven));
  return *this;
}

Blueprint& Blueprint::Stage(std::string stage, std::string from_role, std::string to_role,
                            PipeOptions options) {
  stages_.push_back(std::make_shared<StageDecl>(
      StageDecl{std::move(stage), std::move(from_role), std::move(to_role), std::move(options)}));
  return *this;
}

Result<PlanInstance> Blueprint::Instantiate(PipeRuntime& rt, const Bindings& bindings) const {
  Binder binder{rt, *rt.impl_, roles_, stages_, bindings, {}};
  binder.st.plan.name = name_;
  if (Status s = binder.Check(); !s.ok()) return Prefixed("blueprint " + name_, s);
  if (Status s = binder.BindOthers(); !s.ok()) return s;
  for (const auto& r : roles_) {
    if (r->kind != RoleKind::kMemory) continue;
    if (Status s = binder.BindMemory(*r); !s.ok()) return s;
  }
  if (Status s = binder.Connect(); !s.ok()) return s;
  // Bindings in the order the roles were declared.
  std::vector<RoleBinding> ordered;
  for (const auto& r : roles_) {
    for (const RoleBinding& rb : binder.st.plan.bindings) {
      if (rb.role == r->name) ordered.push_back(rb);
    }
  }
  binder.st.plan.bindings = std::move(ordered);
  binder.done = true;
  return PlanInstance(std::make_shared<const PlanInstance::State>(std::move(binder.st)));
}

namespace {

template <typename Map>
std::string Names(const Map& m) {
  std::vector<std::string> out;
  for (const auto& [name, value] : m) out.push_back("'" + name + "'");
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

Result<Locator> PlanInstance::locator(std::string_view role) const {
  if (!state_) return Status::InvalidArgument("the plan instance is empty: Blueprint::Instantiate");
  auto it = state_->locators.find(role);
  if (it == state_->locators.end()) {
    return Status::NotFound(fmt::format("no role '{}' in blueprint {}: it has {}", role,
                                        state_->plan.name, Names(state_->locators)));
  }
  return it->second;
}

Result<Pipe> PlanInstance::pipe(std::string_view stage) const {
  if (!state_) return Status::InvalidArgument("the plan instance is empty: Blueprint::Instantiate");
  auto it = state_->pipes.find(stage);
  if (it == state_->pipes.end()) {
    return Status::NotFound(fmt::format("no stage '{}' in blueprint {}: it has {}", stage,
                                        state_->plan.name, Names(state_->pipes)));
  }
  return it->second;
}

const BlueprintPlan& PlanInstance::Explain() const {
  static const BlueprintPlan kEmpty;
  return state_ ? state_->plan : kEmpty;
}

}  // namespace tierflow
