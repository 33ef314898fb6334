// SPDX-License-Identifier: Apache-2.0
// The extension module under the `tierflow` package (python/tierflow/__init__.py): a thin face
// of the C++ library's public API (docs/python.md).
#include "common.h"
#include "tierflow/version.h"

NB_MODULE(_tierflow, m) {
  using namespace tierflow::python;
  m.doc() = "tierflow's C++ library, bound with nanobind.";
  BindErrors(m);
  BindTopology(m);
  BindBuffers(m);
  BindOperations(m);
  BindHandles(m);
  BindEngines(m);
  BindFiles(m);
  BindCache(m);
  BindPipes(m);
  BindSort(m);
  BindCoherence(m);
  m.attr("__version__") = tierflow::Version();
}
