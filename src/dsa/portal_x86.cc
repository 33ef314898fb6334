// SPDX-License-Identifier: Apache-2.0
// The two submission instructions. Compiled with -menqcmd -mmovdir64b; called only after
// CPUID reported them (DsaCpuFeatures), so the rest of the library runs on any x86-64.
#include <immintrin.h>

namespace tierflow::dsa {

bool Enqcmd(void* portal, const void* desc) { return _enqcmd(portal, desc) == 0; }
void Movdir64b(void* portal, const void* desc) { _movdir64b(portal, desc); }
void StoreFence() { _mm_sfence(); }

}  // namespace tierflow::dsa
