// SPDX-License-Identifier: Apache-2.0
// The pipe planner: which mechanisms move data between two locators, through which staging
// memory, and why the alternatives lost. Private to the pipes component.
#pragma once

#include <vector>

#include "pipes/locator_impl.h"
#include "pipes/runtime_impl.h"
#include "tierflow/pipe.h"

namespace tierflow::detail {

// How data moves between two leaf locators (no spill chains): one hop, or two through staging
// DRAM on staging_node.
struct Route {
  const LocatorImpl* src = nullptr;
  const LocatorImpl* dst = nullptr;
  std::vector<Mechanism> mechanisms;
  std::vector<Engine*> engines;  // one per hop
  int staging_node = -1;         // two hops: where the staging memory is
  // One file end and one memory end: a chunk whose file offset and memory address disagree on
  // O_DIRECT alignment is bounced through aligned staging memory (then copied by the CPU).
  bool may_bounce = false;
  int bounce_node = -1;
};

struct PipeRoutes {
  PipePlan plan;              // what Explain shows
  std::vector<Route> routes;  // one per (source member, destination member) pair
};

// Errors: no mechanism can serve a pair (the message gives each reason), a destination that
// cannot be written, an override that no hop can use.
Result<PipeRoutes> PlanPipe(const PipeRuntime::Impl& rt, const Locator& from, const Locator& to,
                            const PipeOptions& options);

}  // namespace tierflow::detail
