// What the CPU running us can do, probed once per process: the one AVX-512 probe that the kernels'
// and the reference's SIMD paths both dispatch on (issue 48: it was written twice).
#pragma once

namespace qtransit {

// AVX-512 F, BW, DQ and VL, all four (what every AVX-512 path of qtransit uses); false off x86-64.
bool cpu_avx512();

}  // namespace qtransit
