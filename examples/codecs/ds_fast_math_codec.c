/* A DeepSpeed-style ds-int<b> codec whose scale and step come out of approximate arithmetic, as
 * DeepSpeed's ZeRO++ quantizer does when its op builder compiles it with --use_fast_math
 * (div.full for the scale, rcp.approx for the step): the codec of the formats ds-int4-fm and
 * ds-int8-fm (docs/DECISIONS.md D23). A CPU has no div.full, so the approximation is emulated,
 * deterministically: block j's scale is the IEEE quotient moved by (j mod 5) - 2 representable
 * values (+2 only when that stays in the quotient's binade, else +1: 2 ulp either way), and its
 * step is the IEEE reciprocal of that scale moved by ((j / 5) mod 3) - 1 values. Every block thus
 * takes one of the admissible scales and steps, and qtransit must accept it under exact
 * conformance for the -fm format, and flag it for ds-int<b>.
 *
 * Configuration: DS_BITS (4 or 8); DS_MUTANT 0 (the codec above) or 1 (the step 8 representable
 * values below the reciprocal: past rcp.approx's 1 ulp, which the admissible check must catch).
 *
 * The rest is DeepSpeed's recipe (NUMERICS.md 1.3): the input rounded to binary16, a = absmax,
 * scale = 2^b / 2a, codes clamp(rne(fl16(x) scale), -2^(b-1), 2^(b-1) - 1), the step stored,
 * decode fl16(q step); an all-zero block has step 1 and codes 0; int4 packs element 2j in the high
 * nibble. Built like every example codec: -ffp-contract=off, no fast math of its own. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qtransit/codec_plugin.h"

#ifndef DS_BITS
#define DS_BITS 4
#endif
#ifndef DS_MUTANT
#define DS_MUTANT 0
#endif
#if DS_BITS != 4 && DS_BITS != 8
#error "DS_BITS must be 4 or 8"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#if DS_MUTANT == 0
#define CODEC_NAME "ds-fast-math-int" STR(DS_BITS)
#elif DS_MUTANT == 1
#define CODEC_NAME "mutant14-step-8ulp-ds-int" STR(DS_BITS) "-fm"
#else
#error "DS_MUTANT must be 0 or 1"
#endif

static const int32_t kCmin = -(1 << (DS_BITS - 1)), kCmax = (1 << (DS_BITS - 1)) - 1;

static void set_err(char* err, size_t err_len, const char* fmt, ...) {
    if (!err || err_len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Binary16 rounding, ties to even, overflow to infinity (the caller refuses that). The spacing q
 * at |v| is a power of two, so |v| / q is exact and nearbyintf rounds it to nearest even. */
static float round_f16(float v) {
    const float a = fabsf(v);
    if (a == 0.0f || !isfinite(a)) return v;
    int e = 0;
    (void)frexpf(a, &e); /* a in [2^(e-1), 2^e) */
    const int be = e - 1 < -14 ? -14 : e - 1;
    const float q = ldexpf(1.0f, be - 10);
    float r = nearbyintf(a / q) * q;
    if (r >= 65520.0f) r = INFINITY;
    return copysignf(r, v);
}

static float step_values(float v, int n) { /* n representable values up (n > 0) or down */
    for (; n > 0; --n) v = nextafterf(v, INFINITY);
    for (; n < 0; ++n) v = nextafterf(v, 0.0f);
    return v;
}

static int64_t code_bytes(int64_t len) { return (len * DS_BITS + 7) / 8; }

static void put_code(uint8_t* codes, int64_t i, int32_t q) {
#if DS_BITS == 8
    codes[i] = (uint8_t)(int8_t)q;
#else
    const uint8_t nib = (uint8_t)(q & 0xF);
    if (i & 1) codes[i >> 1] = (uint8_t)((codes[i >> 1] & 0xF0u) | nib);
    else codes[i >> 1] = (uint8_t)((codes[i >> 1] & 0x0Fu) | (nib << 4)); /* element 2j high */
#endif
}

static int32_t get_code(const uint8_t* codes, int64_t i) {
#if DS_BITS == 8
    return (int8_t)codes[i];
#else
    const uint8_t byte = codes[i >> 1];
    const int32_t nib = (i & 1) ? (byte & 0xF) : (byte >> 4);
    return nib >= 8 ? nib - 16 : nib;
#endif
}

static int check_sizes(int64_t elements, int64_t block, int64_t shard, char* err, size_t err_len) {
    if (block < 1 || shard < 1 || elements < 0 || elements % shard != 0) {
        set_err(err, err_len, "bad sizes: elements %lld, block %lld, shard %lld", (long long)elements, (long long)block,
                (long long)shard);
        return 1;
    }
    return 0;
}

static int ds_encode(void* state, const qtransit_encode_args* args, char* err, size_t err_len) {
    (void)state;
    if (check_sizes(args->elements, args->block, args->shard, err, err_len)) return 1;
    const float* x = (const float*)args->x;
    for (int64_t i = 0; i < args->elements; ++i)
        if (!isfinite(round_f16(x[i]))) {
            set_err(err, err_len, "element %lld (%g) is not finite in binary16", (long long)(args->index_base + i), (double)x[i]);
            return 1;
        }
    int64_t byte = 0, j = 0;
    for (int64_t s0 = 0; s0 < args->elements; s0 += args->shard)
        for (int64_t b0 = s0; b0 < s0 + args->shard; b0 += args->block, ++j) {
            const int64_t len = b0 + args->block <= s0 + args->shard ? args->block : s0 + args->shard - b0;
            uint8_t* codes = args->codes + byte;
            memset(codes, 0, (size_t)code_bytes(len));
            float a = 0.0f;
            for (int64_t i = 0; i < len; ++i) a = fmaxf(a, fabsf(round_f16(x[b0 + i])));
            float scale = 0.0f, step = 1.0f;
            if (a != 0.0f) {
                const float s_ieee = (float)(1 << DS_BITS) / (2.0f * a);
                int ds = (int)(j % 5) - 2;
                if (ds == 2 && ilogbf(step_values(s_ieee, 2)) != ilogbf(s_ieee)) ds = 1;
                scale = step_values(s_ieee, ds);
                const int dt = DS_MUTANT == 1 ? -8 : (int)((j / 5) % 3) - 1;
                step = step_values(1.0f / scale, dt);
            }
            args->scales[j] = step;
            for (int64_t i = 0; i < len; ++i) {
                int32_t q = 0;
                if (a != 0.0f) {
                    const float r = nearbyintf(round_f16(x[b0 + i]) * scale);
                    q = r < (float)kCmin ? kCmin : r > (float)kCmax ? kCmax : (int32_t)r;
                }
                put_code(codes, i, q);
            }
            byte += code_bytes(len);
        }
    return 0;
}

static int ds_decode(void* state, const qtransit_decode_args* args, char* err, size_t err_len) {
    (void)state;
    if (check_sizes(args->elements, args->block, args->shard, err, err_len)) return 1;
    float* out = (float*)args->out;
    int64_t byte = 0, j = 0;
    for (int64_t s0 = 0; s0 < args->elements; s0 += args->shard)
        for (int64_t b0 = s0; b0 < s0 + args->shard; b0 += args->block, ++j) {
            const int64_t len = b0 + args->block <= s0 + args->shard ? args->block : s0 + args->shard - b0;
            const float step = args->scales[j];
            for (int64_t i = 0; i < len; ++i)
                out[b0 + i] = round_f16((float)get_code(args->codes + byte, i) * step);
            byte += code_bytes(len);
        }
    return 0;
}

static const qtransit_codec_v1_t g_codec = {
    QTRANSIT_CODEC_ABI_VERSION,
    sizeof(qtransit_codec_v1_t),
    CODEC_NAME,
    "ds-int" STR(DS_BITS) "-fm",
    NULL, /* format_toml: a built-in format */
    QTRANSIT_DEVICE_CPU,
    QTRANSIT_PACKING_FORMAT,
    QTRANSIT_BINARY32,
    QTRANSIT_BINARY32,
    QTRANSIT_SCALES_IN_ORDER,
    0,
    1, /* block_min */
    0, /* block_max: no limit */
    1, /* block_multiple: any */
    1, /* thread_safe: no state */
    NULL,
    ds_encode,
    ds_decode,
    NULL, /* reduce_requantize */
};

const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    (void)err;
    (void)err_len;
    return &g_codec;
}
