/* nvfp4_codec.c: an NVFP4 codec written from docs/FORMATS.md section 2 and docs/PLUGIN.md ("Two-level
 * scales", "2-D blocks") alone, as a third party would wrap Transformer Engine's recipe, using no
 * qtransit code but the ABI header.
 *
 *   T = args->tensor_amax (the tensor's amax, handed in: a call is a shard, not the tensor).
 *   S_enc = 1 if T == 0, else min(fl32(2688 / T), FLT_MAX) (1 if that is 0); S_dec = fl32(1 / S_enc).
 *   Block of 16 (NV_TILED: a 16 x 16 tile, 256 values in tile order): a = max |x|;
 *   s_b = E4M3 satfinite(fl32(a fl32(S_enc fl32(1/6)))), written to scales[j] as its value;
 *   r = min(fl32(1 / fl32(s_b S_dec)), FLT_MAX); y = fl32(x r); code = sign(y) << 3 | E2M1 index of
 *   |y| (nearest, ties to the even index, saturating at 6).
 *   Decode: fl32(value(code) fl32(fl32(s_b T) fl32(1/2688))).
 *
 * NV_MUT 1: the codec takes T from its own call (the shard's amax), not args->tensor_amax.
 * NV_MUT 2: decode by fl32(s_b fl32(T / 2688)), torchao's order of the two roundings.
 * NV_MUT 3: scales[j] is the decode factor instead of s_b. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qtransit/codec_plugin.h"

#ifndef NV_MUT
#define NV_MUT 0
#endif
#ifndef NV_TILED
#define NV_TILED 0
#endif
#define BLOCK (NV_TILED ? 256 : 16)

static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* The value of the non-negative E4M3 (fn) byte b, 0..0x7E. */
static float e4m3_value(int b) {
    const int e = b >> 3, m = b & 7;
    return e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
}

/* E4M3 satfinite of v >= 0 (or +inf): nearest, ties to the even byte; above 448, 448. */
static float e4m3_sat(float v) {
    if (!(v < 448.0f)) return 448.0f;
    int lo = 0;
    while (lo < 0x7E && e4m3_value(lo + 1) <= v) ++lo;
    if (e4m3_value(lo) == v) return v;
    const double a = e4m3_value(lo), b = e4m3_value(lo + 1), mid = (a + b) / 2;  /* exact in binary64 */
    if ((double)v < mid) return (float)a;
    if ((double)v > mid) return (float)b;
    return (float)((lo & 1) ? b : a);
}

/* E2M1 index of |y| (nearest, ties to the even index, saturating at 6). */
static int e2m1_index(float y) {
    const double m = fabs((double)y);
    if (!(m < 6.0)) return 7;
    int i = 0;
    while (i < 7 && (double)kE2m1[i + 1] <= m) ++i;
    if (i == 7 || (double)kE2m1[i] == m) return i;
    const double mid = ((double)kE2m1[i] + (double)kE2m1[i + 1]) / 2;
    if (m < mid) return i;
    if (m > mid) return i + 1;
    return (i & 1) ? i + 1 : i;
}

static int fail(char* err, size_t n, const char* m) {
    if (err && n) snprintf(err, n, "%s", m);
    return 1;
}

static int has_amax(uint32_t struct_size, size_t offset) { return struct_size >= offset + sizeof(float); }

static int encode(void* state, const qtransit_encode_args* a, char* err, size_t n) {
    (void)state;
    if (!has_amax(a->struct_size, offsetof(qtransit_encode_args, tensor_amax)))
        return fail(err, n, "qtransit passed no tensor_amax (an older qtransit)");
    const float* x = (const float*)a->x;
    for (int64_t i = 0; i < a->elements; ++i)
        if (!isfinite(x[i])) return fail(err, n, "non-finite input");
    float t = a->tensor_amax;
#if NV_MUT == 1
    t = 0.0f;
    for (int64_t i = 0; i < a->elements; ++i) t = fmaxf(t, fabsf(x[i]));
#endif
    volatile float six = 6.0f, one = 1.0f;
    float s_enc = 1.0f;
    if (t != 0.0f) {
        s_enc = 2688.0f / t;
        if (s_enc > FLT_MAX) s_enc = FLT_MAX;
        if (s_enc == 0.0f) s_enc = 1.0f;
    }
    const float s_dec = one / s_enc;
    const float c = s_enc * (one / six);
    int64_t j = 0;
    for (int64_t s0 = 0; s0 < a->elements; s0 += a->shard) {
        for (int64_t b0 = s0; b0 < s0 + a->shard; b0 += a->block, ++j) {
            const int64_t len = (s0 + a->shard - b0) < a->block ? (s0 + a->shard - b0) : a->block;
            float amax = 0.0f;
            for (int64_t i = 0; i < len; ++i) amax = fmaxf(amax, fabsf(x[b0 + i]));
            const float sb = e4m3_sat(amax * c);
            float r = one / (sb * s_dec);
            if (r > FLT_MAX) r = FLT_MAX;
            for (int64_t i = 0; i < len; ++i) {
                const float y = x[b0 + i] * r;
                a->codes[b0 + i] = (uint8_t)((signbit(y) ? 8 : 0) | e2m1_index(y));
            }
#if NV_MUT == 3
            a->scales[j] = (sb * t) * (one / 2688.0f);
#else
            a->scales[j] = sb;
#endif
        }
    }
    return 0;
}

static int decode(void* state, const qtransit_decode_args* a, char* err, size_t n) {
    (void)state;
    if (!has_amax(a->struct_size, offsetof(qtransit_decode_args, tensor_amax)))
        return fail(err, n, "qtransit passed no tensor_amax (an older qtransit)");
    const float t = a->tensor_amax;
    volatile float k = 2688.0f, one = 1.0f;
    float* out = (float*)a->out;
    int64_t j = 0;
    for (int64_t s0 = 0; s0 < a->elements; s0 += a->shard) {
        for (int64_t b0 = s0; b0 < s0 + a->shard; b0 += a->block, ++j) {
            const int64_t len = (s0 + a->shard - b0) < a->block ? (s0 + a->shard - b0) : a->block;
#if NV_MUT == 2
            const float f = a->scales[j] * (t / k);
#else
            const float f = (a->scales[j] * t) * (one / k);
#endif
            for (int64_t i = 0; i < len; ++i) {
                const uint8_t q = a->codes[b0 + i];
                const float v = kE2m1[q & 7] * f;
                out[b0 + i] = (q & 8) ? -v : v;
            }
        }
    }
    return 0;
}

static const qtransit_codec_v1_t kCodec = {
    .abi_version = QTRANSIT_CODEC_ABI_VERSION,
    .struct_size = sizeof(qtransit_codec_v1_t),
    .name = NV_TILED ? "test-nvfp4-2d" : "test-nvfp4",
    .format = NV_TILED ? "nvfp4-2d" : "nvfp4",
    .format_toml = NULL,
    .device = QTRANSIT_DEVICE_CPU,
    .packing = QTRANSIT_PACKING_BYTE_PER_CODE,
    .input_type = QTRANSIT_BINARY32,
    .output_type = QTRANSIT_BINARY32,
    .scale_layout = QTRANSIT_SCALES_IN_ORDER,
    .scale_row_blocks = 0,
    .block_min = BLOCK,
    .block_max = BLOCK,
    .block_multiple = 1,
    .thread_safe = 1,
    .state = NULL,
    .encode = encode,
    .decode = decode,
    .reduce_requantize = NULL,
};

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    (void)err;
    (void)err_len;
    return &kCodec;
}
