// SPDX-License-Identifier: Apache-2.0
// Blueprints (Data Pipes, Vogel et al., principle 2 and Fig. 7a): a data-movement plan declared
// once as roles (abstract locators: "the run buffer", "the spill tier", "the output file") and
// named stages (abstract pipes between roles), then instantiated at run time on the machine
// found: the runtime binds each role to a concrete locator and connects each stage.
//
//   AbstractMemory arena;
//   arena.bytes = 1 << 30;                            // the fastest memory tier that fits
//   Blueprint bp("sort");
//   bp.Memory("arena", arena)
//     .File("input", FileMode::kRead)
//     .File("runs", FileMode::kCreate)
//     .Stage("read input", "input", "arena")
//     .Stage("write runs", "arena", "runs");
//   Blueprint::Bindings b;
//   b.files["input"] = {"/data/in"};
//   b.files["runs"] = {"/ssd/runs", 0, 4ull << 30};
//   PlanInstance plan = *bp.Instantiate(*rt, b);
//   std::cout << plan.Explain().ToText();             // every binding, hop and rejection
//   Pipe in = *plan.pipe("read input");
//
// Binding: a file role to the path bound at instantiation (declared with its FileMode, as
// PipeRuntime::File); a given role to the program's own locator; a tiered role to an area
// made from its TieredOptions (PipeRuntime::Tiered); a memory role to one node of its
// candidate tiers (every memory tier of the topology, or AbstractMemory::tiers), each on the
// node nearest near_node: a candidate is rejected when it has less free memory than the role
// needs (for memory standing in for an absent node: less capacity), and among the rest the one
// whose stages plan the highest calibrated bandwidth (the slowest of its stages whose other end
// is bound) wins; without figures for every candidate, the first in preference order (DRAM,
// HBM, CXL). Files and given roles are bound first, then tiered areas, then memory roles in
// the order declared.
//
// Thread-safety: a Blueprint is a value, built on one thread; Instantiate may run from several
// threads at once on one blueprint. A PlanInstance is immutable and shares its locators and
// pipes (copies refer to the same ones); its pipes are thread-safe as every pipe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tierflow/export.h"
#include "tierflow/locator.h"
#include "tierflow/pipe.h"
#include "tierflow/pipe_runtime.h"
#include "tierflow/status.h"

namespace tierflow {

// What a memory role needs.
struct AbstractMemory {
  std::uint64_t bytes = 0;      // required, above 0
  std::vector<TierKind> tiers;  // candidates in preference order; empty: every memory tier
  int near_node = -1;           // each candidate on its node nearest this (-1: node 0's)
};

// How one role was bound, and what was not chosen.
struct RoleBinding {
  std::string role;
  std::string kind;      // "memory", "file", "tiered", "given"
  std::string bound_to;  // the concrete locator's name
  std::string why;       // e.g. "the fastest candidate that fits: stage 'load' plans 6.50 GB/s"
  std::vector<PipeRejection> rejected;  // candidates not taken (memory roles)
};

struct TIERFLOW_EXPORT BlueprintPlan {
  std::string name;
  std::vector<RoleBinding> bindings;  // in the order the roles were declared
  struct StagePlan {
    std::string stage, from_role, to_role;
    PipePlan plan;
  };
  std::vector<StagePlan> stages;  // in the order declared
  std::string ToText() const;
  // {"name","bindings":[{"role","kind","bound_to","why","rejected":[...]}],
  //  "stages":[{"stage","from","to","plan":{PipePlan::ToJson}}]}
  std::string ToJson() const;
};

class PlanInstance;

class TIERFLOW_EXPORT Blueprint {
 public:
  explicit Blueprint(std::string name);

  // Roles. Mistakes (a role declared twice, a memory role of 0 bytes) are reported by
  // Instantiate, naming the role.
  Blueprint& Memory(std::string role, AbstractMemory needs);
  Blueprint& File(std::string role, FileMode mode);
  Blueprint& Tiered(std::string role, TieredOptions options);
  Blueprint& Given(std::string role);
  // A stage: a pipe from one role to another with these options. Mistakes (a stage declared
  // twice, a role that is not declared, a stage from a role to itself) are reported by
  // Instantiate.
  Blueprint& Stage(std::string stage, std::string from_role, std::string to_role,
                   PipeOptions options = {});

  // What the program binds at instantiation.
  struct FileBinding {
    std::string path;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;  // 0: to the end (reading); required for files created
  };
  struct Bindings {
    std::map<std::string, FileBinding> files;  // every file role
    std::map<std::string, Locator> given;      // every given role
  };

  // Binds every role and connects every stage on `rt`, which must outlive the instance.
  // Errors: the mistakes above; a file or given role left unbound, or a binding for a role
  // that is none of that kind; a memory role no candidate can hold (each candidate's reason);
  // the errors of PipeRuntime::File, Tiered, Memory and Connect, prefixed with the role or
  // stage. Nothing bound is kept on error: the files it created are removed (only those: each
  // is checked by device and inode before).
  Result<PlanInstance> Instantiate(PipeRuntime& rt, const Bindings& bindings) const;

  const std::string& name() const { return name_; }

  struct Role;
  struct StageDecl;

 private:
  std::string name_;
  std::vector<std::shared_ptr<const Role>> roles_;
  std::vector<std::shared_ptr<const StageDecl>> stages_;
};

class TIERFLOW_EXPORT PlanInstance {
 public:
  PlanInstance() = default;
  // The locator bound to `role`. Errors: no such role (the message lists them).
  Result<Locator> locator(std::string_view role) const;
  // The pipe of `stage`. Errors: no such stage (the message lists them).
  Result<Pipe> pipe(std::string_view stage) const;
  // The instantiated plan as a whole: every role's binding, every stage's plan.
  const BlueprintPlan& Explain() const;

  struct State;

 private:
  friend class Blueprint;
  explicit PlanInstance(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace tierflow
