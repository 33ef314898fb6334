// SPDX-License-Identifier: Apache-2.0
// What libtierflow.so exports: the library is built with hidden visibility, and only the
// declarations marked TIERFLOW_EXPORT (the public API in these headers) are visible to
// programs that link it. Internal symbols stay internal, so they can change without breaking
// programs built against an earlier version.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TIERFLOW_EXPORT [[gnu::visibility("default")]]
#else
#define TIERFLOW_EXPORT
#endif
