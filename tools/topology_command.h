// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <ostream>
#include <string>

#include "tierflow/status.h"

namespace tierflow::tools {

struct TopologyCommandOptions {
  std::string xml;          // empty: this system
  std::string tier_config;  // extra override file
  std::string tiers;        // extra inline overrides "8-15=hbm"
  std::string sysfs_root;   // empty: /sys (DSA devices)
  std::string dev_root;     // empty: beside sysfs_root, or /dev
  bool json = false;
};

Status RunTopologyCommand(const TopologyCommandOptions& options, std::ostream& out);

}  // namespace tierflow::tools
