// SPDX-License-Identifier: Apache-2.0
#include "tierflow/version.h"

namespace tierflow {

const char* Version() { return TIERFLOW_VERSION_STRING; }
int VersionMajor() { return TIERFLOW_VERSION_MAJOR; }
int VersionMinor() { return TIERFLOW_VERSION_MINOR; }
int VersionPatch() { return TIERFLOW_VERSION_PATCH; }

}  // namespace tierflow
