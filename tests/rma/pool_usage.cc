// SPDX-License-Identifier: Apache-2.0
// Prints how many bytes of a pool (rma/pool.h) no live process holds, for the scripts that
// check what a killed job leaves in it.
//
//   pool_usage PATH LEASE_MS
#include <cstdio>
#include <cstdlib>

#include "rma/pool.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pool_usage PATH LEASE_MS\n");
    return 2;
  }
  tierflow::rma::PoolOptions options;
  options.lease_ms = std::strtoull(argv[2], nullptr, 10);
  auto pool = tierflow::rma::Pool::Open(argv[1], options);
  if (!pool.ok()) {
    std::fprintf(stderr, "pool_usage: %s\n", pool.status().message().c_str());
    return 1;
  }
  std::printf(
      "free %llu of %llu\n", static_cast<unsigned long long>((*pool)->FreeBytes()),
      static_cast<unsigned long long>((*pool)->size() - tierflow::rma::Pool::kMetadataBytes));
  return 0;
}
