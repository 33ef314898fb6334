// `tierflow qdp`: the query-driven prefetching experiment (Fürst thesis ch. 6) as a table like
// Table 6.2, or JSON.
#pragma once

#include <ostream>

#include "tierflow/qdp.h"

namespace tierflow::tools {

Status RunQdpCommand(const QdpConfig& config, bool json, std::ostream& out);

}  // namespace tierflow::tools
