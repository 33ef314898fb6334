// SPDX-License-Identifier: Apache-2.0
// Marks the functions of the inline submit+wait path (issue 17: one 4 KiB copy from Submit to
// Wait's return within 70 ns). Each starts on a cache line of its own, and all of them (with the
// recoverable copy kernels) go to one section, which the linker lays out as a block before the
// rest of the code: otherwise where each starts depends on the size of whatever the linker put
// before it, and changes elsewhere in the library moved that path's time by a few nanoseconds,
// even with every function on a cache line (measurements: docs/architecture.md).
#pragma once

#define TIERFLOW_HOT_SECTION ".text.hot.tierflow"
#define TIERFLOW_HOT_PATH [[gnu::aligned(64), gnu::section(TIERFLOW_HOT_SECTION)]]
