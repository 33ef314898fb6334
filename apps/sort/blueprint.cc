// SPDX-License-Identifier: Apache-2.0
// The sort as a blueprint (Data Pipes' Fig. 7a): the arena, the input, the runs and the
// output are roles bound on the machine found; generating, reading the input, writing and
// reading the runs and writing the output are its stages.
#include "sort/context.h"
#include "sort/plan.h"
#include "sort/temp_files.h"

namespace tierflow::extsort {

namespace {

Blueprint SortBlueprint(const Config& config, std::uint64_t arena_bytes) {
  const bool generating = config.generate_bytes > 0;
  const PipeOptions o = FilePipeOptions();
  AbstractMemory arena;
  arena.bytes = arena_bytes;  // every memory tier a candidate: the fastest that fits wins
  Blueprint bp("tierflow sort");
  bp.Memory("arena", arena)
      .File("input", generating ? FileMode::kCreate : FileMode::kRead)
      .File("runs", FileMode::kCreate)
      .File("output", FileMode::kCreate);
  if (generating) bp.Stage("generate", "arena", "input", o);
  bp.Stage("read input", "input", "arena", o)
      .Stage("write runs", "arena", "runs", o)
      .Stage("read runs", "runs", "arena", o)
      .Stage("write output", "arena", "output", o);
  return bp;
}

void Untrack(const Context& c) {
  ForgetTempFile(c.config.runs);
  ForgetTempFile(c.partial);
  if (c.config.generate_bytes > 0) ForgetTempFile(c.config.input);
}

}  // namespace

Result<Locator> FileFor(Context& c, const char* role, const std::string& path, std::uint64_t length,
                        FileMode mode) {
  return c.planned ? c.plan.locator(role) : c.rt->File(path, 0, length, mode);
}

Result<Pipe> PipeFor(Context& c, const char* stage, const Locator& from, const Locator& to) {
  return c.planned ? c.plan.pipe(stage) : c.rt->Connect(from, to, FilePipeOptions());
}

Status PlanSort(Context& c) {
  if (Status s = CreateRuntime(c); !s.ok()) return s;
  const std::uint64_t bytes = c.records * c.record;
  Blueprint::Bindings b;
  b.files["input"] = {c.config.input, 0, bytes};
  b.files["runs"] = {c.config.runs, 0, bytes};
  b.files["output"] = {c.partial, 0, bytes};
  // Tracked before they exist, so that a signal while they are made removes them.
  TrackTempFile(c.config.runs);
  TrackTempFile(c.partial);
  if (c.config.generate_bytes > 0) TrackTempFile(c.config.input);
  Result<PlanInstance> plan =
      SortBlueprint(c.config, ArenaBytes(c.config.memory_bytes)).Instantiate(*c.rt, b);
  if (!plan.ok()) {
    Untrack(c);  // what the instantiation made, it removed itself
    return plan.status();
  }
  c.plan = std::move(*plan);
  c.planned = true;
  c.arena = *c.plan.locator("arena");
  c.report.plan = c.plan.Explain();
  return Status::Ok();
}

}  // namespace tierflow::extsort
