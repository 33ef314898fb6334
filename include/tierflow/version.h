// SPDX-License-Identifier: Apache-2.0
// tierflow's version. The macros are the version of the headers a program was compiled
// against; Version() and its parts are that of the library it runs with (they differ when a
// program built against one release runs with another's shared library). CMake's package
// version, pkg-config's and the shared library's SONAME are taken from these macros.
#pragma once

#include "tierflow/export.h"

#define TIERFLOW_VERSION_MAJOR 0
#define TIERFLOW_VERSION_MINOR 1
#define TIERFLOW_VERSION_PATCH 0
#define TIERFLOW_VERSION_STRING "0.1.0"

namespace tierflow {

// The library's version, "MAJOR.MINOR.PATCH". Thread-safe.
TIERFLOW_EXPORT const char* Version();
TIERFLOW_EXPORT int VersionMajor();
TIERFLOW_EXPORT int VersionMinor();
TIERFLOW_EXPORT int VersionPatch();

}  // namespace tierflow
