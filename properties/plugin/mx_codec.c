/* mx_codec.c: an mxfp8-e4m3-rceil codec written from docs/FORMATS.md (sections 1-5) alone, as a third
 * party would write one, using no qtransit code but the ABI header; and the mistake torchao's eager
 * to_mx made with the RCEIL rule (issue 52), as MX_MUT 1.
 *
 *   E4M3 (fn): bias 7, 3 mantissa bits, no inf, NaN = S.1111.111, largest finite 448 = A, emin -6.
 *   Scale (e8m0-rceil): a = max|x|; a == 0: e = -127; else the smallest integer e with a <= 448 2^e,
 *   found exactly from a's bits (no rounded division), clamped to [-127, 127]; s = 2^e.
 *   Element: v = fl32(x / s); round |v| to the E4M3 grid, nearest-even, saturating at 448.
 *   Decode: sat(fl32(val * s)), sat clamping to +-FLT_MAX.
 *
 *   MX_MUT 1 (torchao eager RCEIL): e = ceil(log2f(fl32(a / 448))), the quotient and the log2 both
 *   rounded in binary32. A few ulps above 448 2^k the quotient rounds onto or next to 2^k and log2f
 *   rounds to k: the exponent comes out one too small and the block's largest element saturates.
 *   Random blocks almost never land there (issue 52: none of 58,008 came within 8 ulps).
 *
 * MX_FP8_ABSMAX 1: the same elements as fp8-e4m3 (fp32-absmax: s = max(fl32(a / 448), 2^-149); a == 0:
 * s = 0 and zeros of the input's signs), any block.
 *   MX_MUT 2: the quotient x / s kept in binary64 and rounded onto the E4M3 grid once. It differs only
 *   where fl32(x / s) lands on, or crosses, a midpoint of the grid that the exact quotient does not. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qtransit/codec_plugin.h"

#ifndef MX_MUT
#define MX_MUT 0
#endif
#ifndef MX_FP8_ABSMAX
#define MX_FP8_ABSMAX 0
#endif

/* What the descriptor says: the format and its blocks, and the codec's name (each mutant its own). */
#if MX_FP8_ABSMAX
#define CODEC_FORMAT "fp8-e4m3"
#define CODEC_BLOCK_MIN 1
#define CODEC_BLOCK_MAX 0 /* any */
#define CODEC_NAME (MX_MUT == 2 ? "acme-fp8-f64-quotient" : "acme-fp8")
#else
#define CODEC_FORMAT "mxfp8-e4m3-rceil"
#define CODEC_BLOCK_MIN 32
#define CODEC_BLOCK_MAX 32
#define CODEC_NAME (MX_MUT == 1 ? "acme-mxfp8-rceil-log2f" : "acme-mxfp8-rceil")
#endif

static int fail(char* err, size_t len, const char* msg) {
    if (err && len) snprintf(err, len, "%s", msg);
    return 1;
}

/* The block's scale exponent. */
static int scale_exponent(float a) {
    if (a == 0.0f) return -127;
#if MX_MUT == 1
    const float q = a / 448.0f;
    int e = q > 0.0f ? (int)ceilf(log2f(q)) : -127;
#else
    /* a = m 2^E with m in [0.5, 1); 448 = 0.875 2^9: a <= 448 2^e iff m 2^(E - 9 - e) <= 0.875. */
    int E;
    const float m = frexpf(a, &E);
    int e = E - 9 + (m > 0.875f ? 1 : 0);
#endif
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return e;
}

/* |v| rounded onto the E4M3 grid (nearest-even, saturating), as its 7-bit magnitude code. v is a
 * binary32 quotient widened (exact), or the binary64 quotient of MX_MUT 2. */
static uint8_t e4m3_magnitude(double v) {
    if (v == 0.0) return 0;
    int E;
    frexp(v, &E); /* v = m 2^E, m in [0.5, 1): floor(log2 v) = E - 1 */
    int e = E - 1;
    if (e < -6) e = -6;
    const int k = e - 3;
    const double t = ldexp(v, -k); /* exact */
    const double r = nearbyint(t);
    double mag = ldexp(r, k);
    if (mag > 448.0) mag = 448.0;
    if (mag < 0x1p-6) return (uint8_t)(mag / 0x1p-9); /* subnormal: 0.mmm 2^-6 */
    int me;
    frexp(mag, &me);
    const int ex = me - 1;                                   /* floor(log2 mag) */
    const int mant = (int)(mag / ldexp(1.0, ex - 3)) - 8;     /* 1.mmm */
    return (uint8_t)(((ex + 7) << 3) | mant);
}

static float e4m3_value(uint8_t c) {
    const int ex = (c >> 3) & 15, mant = c & 7;
    const float mag = ex == 0 ? ldexpf((float)mant, -9) : ldexpf((float)(8 + mant), ex - 7 - 3);
    return (c & 0x80) ? -mag : mag;
}

static int encode(void* state, const qtransit_encode_args* a, char* err, size_t err_len) {
    (void)state;
    if (a->struct_size < sizeof *a) return fail(err, err_len, "encode args too small");
    const float* x = (const float*)a->x;
    for (int64_t i = 0; i < a->elements; ++i)
        if (!isfinite(x[i])) return fail(err, err_len, "a NaN or infinity in the input");
    int64_t j = 0;
    for (int64_t s0 = 0; s0 < a->elements; s0 += a->shard)
        for (int64_t b0 = s0; b0 < s0 + a->shard; b0 += a->block, ++j) {
            const int64_t len = (s0 + a->shard - b0) < a->block ? (s0 + a->shard - b0) : a->block;
            float amax = 0.0f;
            for (int64_t i = 0; i < len; ++i)
                if (fabsf(x[b0 + i]) > amax) amax = fabsf(x[b0 + i]);
#if MX_FP8_ABSMAX
            float s = amax / 448.0f;
            if (amax != 0.0f && s < 0x1p-149f) s = 0x1p-149f;
#else
            const float s = ldexpf(1.0f, scale_exponent(amax));
#endif
            a->scales[j] = s;
            for (int64_t i = 0; i < len; ++i) {
                if (s == 0.0f) { /* an all-zero block: zeros of the input's signs */
                    a->codes[b0 + i] = (uint8_t)(signbit(x[b0 + i]) ? 0x80 : 0);
                    continue;
                }
#if MX_MUT == 2
                const double v = (double)x[b0 + i] / (double)s;
#else
                const double v = (double)(x[b0 + i] / s);
#endif
                a->codes[b0 + i] = (uint8_t)((signbit(v) ? 0x80 : 0) | e4m3_magnitude(fabs(v)));
            }
        }
    return 0;
}

static int decode(void* state, const qtransit_decode_args* a, char* err, size_t err_len) {
    (void)state;
    if (a->struct_size < sizeof *a) return fail(err, err_len, "decode args too small");
    float* out = (float*)a->out;
    int64_t j = 0;
    for (int64_t s0 = 0; s0 < a->elements; s0 += a->shard)
        for (int64_t b0 = s0; b0 < s0 + a->shard; b0 += a->block, ++j) {
            const int64_t len = (s0 + a->shard - b0) < a->block ? (s0 + a->shard - b0) : a->block;
            for (int64_t i = 0; i < len; ++i) {
                const float v = e4m3_value(a->codes[b0 + i]) * a->scales[j];
                out[b0 + i] = isinf(v) ? copysignf(FLT_MAX, v) : v;
            }
        }
    return 0;
}

static const qtransit_codec_v1_t kCodec = {
    .abi_version = QTRANSIT_CODEC_ABI_VERSION,
    .struct_size = sizeof(qtransit_codec_v1_t),
    .name = CODEC_NAME,
    .format = CODEC_FORMAT,
    .block_min = CODEC_BLOCK_MIN,
    .block_max = CODEC_BLOCK_MAX,
    .device = QTRANSIT_DEVICE_CPU,
    .packing = QTRANSIT_PACKING_FORMAT,
    .input_type = QTRANSIT_BINARY32,
    .output_type = QTRANSIT_BINARY32,
    .scale_layout = QTRANSIT_SCALES_IN_ORDER,
    .block_multiple = 1,
    .thread_safe = 1,
    .encode = encode,
    .decode = decode,
};

__attribute__((visibility("default"))) const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    (void)err;
    (void)err_len;
    return &kCodec;
}
