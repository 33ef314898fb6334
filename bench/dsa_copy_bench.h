// SPDX-License-Identifier: Apache-2.0
// `tierflow bench copy --engine dsa` and `--engine dsa-model`: the DSA experiments of the
// Fürst thesis §3.2 on this machine's DSAs, or on device models laid out like a real machine:
//   submission  copy throughput by submission method and size          (Fig. 3.4)
//   threads     several threads submitting to one shared WQ            (Fig. 3.5)
//   placement   copy policies x destination node, and their scaling    (Fig. 3.6, 3.7)
//   cpu         the same copies on the CPU engine and glibc memcpy     (Fig. 3.8)
// On a model every number is the model's (software copies), and the output says so.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/copy_bench.h"

namespace tierflow::bench {

struct DsaCopyBenchConfig {
  std::vector<std::string> experiments = {"submission", "threads", "placement", "cpu"};
  // Where the DSA inventory is read (hardware), or whose layout the models copy (dsa-model;
  // empty: one model DSA per node with CPUs of the topology).
  std::string sysfs_root;
  std::string dev_root;
  std::string xml;  // dsa-model: the topology to place by (an hwloc XML), e.g. a Xeon Max
  // Which of the shared options the user gave (otherwise each experiment uses the thesis'
  // values: its sizes, 1/2/12 threads, every policy, every node as destination).
  bool sizes_given = false;
  bool nodes_given = false;
  bool policies_given = false;
  bool submitters_given = false;
};

Status RunDsaCopyBench(const CopyBenchConfig& config, const DsaCopyBenchConfig& dsa,
                       std::ostream& out);

}  // namespace tierflow::bench
