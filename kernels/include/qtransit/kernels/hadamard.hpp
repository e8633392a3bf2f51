// The rotation of a rotated format (docs/FORMATS.md section 9), defined once for the CPU and CUDA
// backends: the optional random diagonal of +-1, the butterflies of the fast Walsh-Hadamard
// transform in binary32, and the power-of-two normalization of the inverse. The CPU runs the stages
// one after the other on one block; the device runs the butterflies of a stage in parallel. Each
// butterfly is the same two binary32 operations in both, and the stages come in the same order
// (h = 1, 2, 4, ..., n/2), so the two agree bit for bit. The reference (reference/src/hadamard.cpp)
// writes the transform from its recursive definition instead, and is compared with this one.
#pragma once

#include <cstdint>

#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/block_math.hpp"

// The per-block functions below are called from the CPU backend's multiversioned loops: inlined
// there, so that each version compiles them for its own instruction set (decl_math.hpp's
// QT_HD_BLOCK habit); on the device QT_HD inlines.
#if defined(__CUDACC__)
#define QT_HD_ROT QT_HD
#else
#define QT_HD_ROT inline __attribute__((always_inline))
#endif

namespace qtransit::kernels {

// What the random signs of a block are keyed by: the run's seed and the index of the block's first
// element in the tensor being quantized (the `index_base` stochastic rounding uses, plus the
// block's start).
struct SignKey {
    uint64_t seed = 0;
    int64_t first = 0;
};
inline constexpr uint32_t kTagSigns = 5;

// The sign words of elements 128 w .. 128 w + 127 (hadamard_sign's, four at a time).
QT_HD_ROT Philox4x32 hadamard_sign_words(const SignKey& k, int64_t w) {
    const uint64_t g = static_cast<uint64_t>(k.first);
    return philox4x32_10(Philox4x32{{static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), static_cast<uint32_t>(w), kTagSigns}},
                         static_cast<uint32_t>(k.seed), static_cast<uint32_t>(k.seed >> 32));
}

// Whether element i of the block is negated: bit (i mod 32) of word (i / 32) mod 4 of
// Philox4x32-10 with key (lo32(seed), hi32(seed)) and counter (lo32(first), hi32(first), i / 128, 5).
QT_HD bool hadamard_sign(const SignKey& k, int64_t i) {
    return (hadamard_sign_words(k, i >> 7).v[(i >> 5) & 3] >> (i & 31)) & 1u;
}

// Butterfly p (0 <= p < n/2) of the stage of stride h: elements j and j + h, j = (p / h) 2h + p mod h,
// become fl32(a + b) and fl32(a - b).
QT_HD void hadamard_butterfly(float* v, int64_t h, int64_t p) {
    const int64_t j = (p / h) * 2 * h + p % h;
    const float a = v[j], b = v[j + h];
    v[j] = add_rn(a, b);
    v[j + h] = sub_rn(a, b);
}

// log2 n of a power of two n >= 1.
QT_HD_ROT int hadamard_log2(int64_t n) {
    int l = 0;
    while ((int64_t{1} << l) < n) ++l;
    return l;
}

// The largest rotated magnitude a block of n = 2^L elements may reach: FLT_MAX 2^-(L+2). A decoded
// magnitude is at most twice the block's rotated absmax (every scale type keeps vmax s <= 2a), so no
// butterfly of the inverse passes 2^L 2 FLT_MAX 2^-(L+2) = FLT_MAX / 2: an encodable block always
// decodes to finite values.
QT_HD_ROT float hadamard_limit(int64_t n) {
    const int l = hadamard_log2(n) + 2;
    return mul_rn(kFltMax, bits_f32(static_cast<uint32_t>(127 - l) << 23));
}

// Negate the elements whose sign bit is set: one generator call per 128 elements.
QT_HD_ROT void hadamard_apply_signs(float* v, int64_t n, const SignKey& k) {
    for (int64_t i0 = 0; i0 < n; i0 += 128) {
        const Philox4x32 r = hadamard_sign_words(k, i0 >> 7);
        const int64_t m = n - i0 < 128 ? n - i0 : 128;
        for (int64_t i = 0; i < m; ++i) {
            const uint32_t neg = (r.v[i >> 5] >> (i & 31)) & 1u;
            v[i0 + i] = bits_f32(f32_bits(v[i0 + i]) ^ (neg << 31));
        }
    }
}

// Every stage, in order: stage h takes the pairs (j, j + h) of each run of 2h elements; the loops
// visit the butterflies hadamard_butterfly numbers p = 0 .. n/2 - 1, without dividing.
// N > 0: the same loops with the length known at compile time (unrolled, vectorized); N = 0: n.
// N > 0 unrolls the stages themselves too (hadamard_stage_t): with the stride a constant, the
// compiler sees that v[j] and v[j + H] are distinct and vectorizes the strides of 4 and up.
template <int N, int H>
QT_HD_ROT void hadamard_stage_t(float* v) {
    for (int64_t j0 = 0; j0 < N; j0 += 2 * H)
        for (int64_t j = j0; j < j0 + H; ++j) {
            const float a = v[j], b = v[j + H];
            v[j] = add_rn(a, b);
            v[j + H] = sub_rn(a, b);
        }
    if constexpr (2 * H < N) hadamard_stage_t<N, 2 * H>(v);
}
template <int N>
QT_HD_ROT void hadamard_stages_t(float* v, int64_t n_run) {
    if constexpr (N > 1) {
        hadamard_stage_t<N, 1>(v);
    } else {
        const int64_t n = n_run;
        for (int64_t h = 1; h < n; h *= 2)
            for (int64_t j0 = 0; j0 < n; j0 += 2 * h)
                for (int64_t j = j0; j < j0 + h; ++j) {
                    const float a = v[j], b = v[j + h];
                    v[j] = add_rn(a, b);
                    v[j + h] = sub_rn(a, b);
                }
    }
}
QT_HD_ROT void hadamard_stages(float* v, int64_t n) {
    switch (n) {
        case 16: return hadamard_stages_t<16>(v, n);
        case 32: return hadamard_stages_t<32>(v, n);
        case 64: return hadamard_stages_t<64>(v, n);
        case 128: return hadamard_stages_t<128>(v, n);
        default: return hadamard_stages_t<0>(v, n);
    }
}

// Encode's rotation of one block in place: negate by the signs (when `signs`), then every stage.
QT_HD_ROT void hadamard_forward(float* v, int64_t n, bool signs, const SignKey& k) {
    if (signs) hadamard_apply_signs(v, n, k);
    hadamard_stages(v, n);
}

// The normalization and signs of the inverse, element i, after the stages: v_i 2^-L (exact but for
// a result below 2^-126), then the sign.
QT_HD float hadamard_finish(float v, int64_t n, int64_t i, bool signs, const SignKey& k) {
    const float r = mul_rn(v, bits_f32(static_cast<uint32_t>(127 - hadamard_log2(n)) << 23));
    return (signs && hadamard_sign(k, i)) ? -r : r;
}

// Decode's rotation back of one block in place: every stage, then the normalization and signs.
QT_HD_ROT void hadamard_inverse(float* v, int64_t n, bool signs, const SignKey& k) {
    hadamard_stages(v, n);
    const float inv = bits_f32(static_cast<uint32_t>(127 - hadamard_log2(n)) << 23);
    for (int64_t i = 0; i < n; ++i) v[i] = mul_rn(v[i], inv);
    if (signs) hadamard_apply_signs(v, n, k);
}

}  // namespace qtransit::kernels
