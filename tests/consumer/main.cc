// SPDX-License-Identifier: Apache-2.0
// Copies a buffer through an installed tierflow; exit status 0 when the bytes arrived.
#include <cstdio>
#include <cstring>
#include <vector>

#include <tierflow/cpu_engine.h>
#include <tierflow/topology.h>
#include <tierflow/version.h>

int main() {
  // The library linked is the release whose headers were compiled against.
  if (std::strcmp(tierflow::Version(), TIERFLOW_VERSION_STRING) != 0 ||
      tierflow::VersionMajor() != TIERFLOW_VERSION_MAJOR) {
    return std::printf("library %s, headers %s\n", tierflow::Version(), TIERFLOW_VERSION_STRING), 1;
  }
  tierflow::Result<tierflow::Topology> topo = tierflow::Topology::Discover();
  if (!topo.ok()) return std::printf("%s\n", topo.status().ToString().c_str()), 1;
  tierflow::CpuEngineOptions options;
  options.node = topo->nodes().front().os_index;
  auto engine = tierflow::CpuEngine::Create(*topo, options);
  if (!engine.ok()) return std::printf("%s\n", engine.status().ToString().c_str()), 1;
  std::vector<char> src(1 << 20, 'x'), dst(1 << 20);
  auto handle = (*engine)->Submit(tierflow::Operation::Copy(dst.data(), src.data(), src.size()));
  if (!handle.ok() || !handle->Wait().ok() || dst != src) return 1;
  std::printf("consumer: copied %zu bytes with tierflow\n", dst.size());
  return 0;
}
