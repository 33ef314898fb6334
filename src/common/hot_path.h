// Marks the functions of the inline submit+wait path (issue 17: one 4 KiB copy from Submit to
// Wait's return within 70 ns). Each starts on a cache line of its own: otherwise where it
// starts depends on the size of whatever the linker put before it, and changes elsewhere in
// the library moved that path's time by a few nanoseconds (measurements: docs/architecture.md).
#pragma once

#define TIERFLOW_HOT_PATH [[gnu::aligned(64)]]
