// Writing cache lines back to memory from the CPU: what a DSA cache-flush descriptor does,
// for the CPU engine and the DSA engine's CPU fallback.
#pragma once

#include <cstddef>

namespace tierflow {

// Writes back every cache line of [p, p+n) and, unless `keep`, evicts it. Uses CLWB (keep) or
// CLFLUSHOPT where the CPU has them, CLFLUSH otherwise; fenced before return.
void FlushCacheLines(const void* p, std::size_t n, bool keep);

// "clwb", "clflushopt" or "clflush": what FlushCacheLines uses here for `keep`.
const char* CacheFlushInstruction(bool keep);

}  // namespace tierflow
