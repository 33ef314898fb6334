// SPDX-License-Identifier: Apache-2.0
// A copy into the fastest memory tier near this thread's node, done by the CPU engine.
//
//   build/examples/tiered_copy [BYTES]
//
// On a machine with HBM (a Xeon Max) the destination is the HBM node next to node 0; elsewhere
// tierflow falls back to DRAM and says so. Every step returns a Status or Result whose message
// names the problem and the fix.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tierflow/buffer.h"
#include "tierflow/cpu_engine.h"
#include "tierflow/topology.h"

int Fail(const tierflow::Status& s) {
  std::fprintf(stderr, "tiered_copy: %s\n", s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  const std::size_t size = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{64} << 20;
  tierflow::Result<tierflow::Topology> topo = tierflow::Topology::Discover();
  if (!topo.ok()) return Fail(topo.status());

  // The source in DRAM of node 0, the destination on the HBM node nearest to it, if any.
  tierflow::Result<tierflow::Buffer> src = tierflow::Buffer::OnNode(0, size);
  if (!src.ok()) return Fail(src.status());
  tierflow::Result<tierflow::Buffer> dst =
      tierflow::Buffer::OnTier(*topo, tierflow::TierKind::kHbm, /*near_node=*/0, size);
  if (!dst.ok()) {
    std::printf("no HBM here (%s): copying to DRAM instead\n", dst.status().message().c_str());
    dst = tierflow::Buffer::OnNode(0, size);
    if (!dst.ok()) return Fail(dst.status());
  }
  std::memset(src->data(), 0x5a, size);

  // The CPU engine of node 0; the copy is cut into pieces its workers share.
  tierflow::Result<std::unique_ptr<tierflow::CpuEngine>> engine =
      tierflow::CpuEngine::Create(*topo, {.node = 0});
  if (!engine.ok()) return Fail(engine.status());
  tierflow::Result<tierflow::Handle> h =
      (*engine)->Submit(tierflow::Operation::Copy(dst->data(), src->data(), size));
  if (!h.ok()) return Fail(h.status());
  // ... the thread is free here; Wait() blocks (or helps) until the copy is done.
  if (tierflow::Status s = h->Wait(); !s.ok()) return Fail(s);

  const bool same = std::memcmp(dst->data(), src->data(), size) == 0;
  std::printf("copied %zu bytes from node %d to node %d (%s) with the %s kernels: %s\n", size,
              src->node(), dst->node(),
              tierflow::TierKindName(topo->node(dst->node())->kind).data(),
              tierflow::CpuIsaName((*engine)->isa()).data(), same ? "equal" : "DIFFERENT");
  return same ? 0 : 1;
}
