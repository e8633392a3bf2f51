// What the CPU running us can do, probed once per process: the one AVX-512 probe that the kernels'
// and the reference's SIMD paths both dispatch on (issue 48: it was written twice).
#pragma once

// QT_UNDER_ASAN: this translation unit is compiled with AddressSanitizer (GCC says so with
// __SANITIZE_ADDRESS__, clang with __has_feature). The multiversioned loops are built once there:
// a sanitizer build checks the code, not its speed, and each clone is compiled and instrumented anew.
#if defined(__SANITIZE_ADDRESS__)
#define QT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QT_UNDER_ASAN 1
#endif
#endif

namespace qtransit {

// AVX-512 F, BW, DQ and VL, all four (what every AVX-512 path of qtransit uses); false off x86-64.
bool cpu_avx512();

}  // namespace qtransit
