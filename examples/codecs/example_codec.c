/* example_codec.c: a codec plugin for qtransit's plugin ABI (qtransit/codec_plugin.h), written as a
 * third party would write one: from the format's specification (NUMERICS.md 1.1, 1.2, 1.4 and
 * DECISIONS.md D1, D2, D5, D8), using no qtransit code but the ABI header. It is also the seed of a
 * zoo of mutants: each MUTANT != 0 is one real mistake that quantization kernels make, and the
 * qtransit gate is expected to tell every one of them from the correct codec.
 *
 * Configuration (compile-time macros; CMakeLists.txt builds every pair):
 *   EXAMPLE_FORMAT   8: int8, 4: int4, 41: int4-asym
 *   MUTANT           0: correct, 1..13 and 15..20: the mistakes listed at MUTANT_SLUG below
 *   variants of the correct codec (MUTANT 0), each numerically identical to it once qtransit undoes
 *   the declared layout:
 *   EXAMPLE_BF16_INPUT      int8, reads bfloat16 input             ("example-int8-bf16in")
 *   EXAMPLE_BYTE_CODES      int4, one int8_t per code              ("example-int4-bytes")
 *   EXAMPLE_HIGH_NIBBLE     int4, element 2j in the high nibble    ("example-int4-hinib")
 *   EXAMPLE_SWIZZLED        int8, scales in the 128x4 swizzled layout ("example-int8-swizzled")
 *   EXAMPLE_NOT_THREAD_SAFE int4, thread_safe = 0, and it checks qtransit keeps that promise
 *                           ("example-int4-serial")
 *
 * Arithmetic is binary32 round-to-nearest-even: compile with -ffp-contract=off -fno-fast-math (so
 * that a*b+c is never fused: only mutant 4 asks for fmaf), and never change the rounding mode
 * (nearbyintf rounds to nearest even under the default mode).
 *
 * Semantics, per block x[0..len) (blocks of `block` elements restarting at every `shard`):
 *   int<b>:      qmax = 2^(b-1)-1, a = max|x|; a == 0: s = 0, codes 0 (decode +0);
 *                else s = max(fl32(a/qmax), 2^-149), q = clamp(rne(fl32(x/s)), -qmax, qmax),
 *                decode sat(fl32(q*s)).
 *   int<b>-asym: lo = min x, hi = max x (IEEE totalOrder for zeros: -0 < +0, D2); hi == lo: s = 0,
 *                codes 0, decode lo exactly (a -0 stays -0); else r = fl32(hi-lo), inf: refused
 *                (range overflow); s = max(fl32(r/(2^b-1)), 2^-149),
 *                q = clamp(rne(fl32(fl32(x-lo)/s)), 0, 2^b-1), decode sat(fl32(sat(fl32(q*s))+lo)).
 *   sat(v) clamps to [-FLT_MAX, FLT_MAX] (D1: an int8 block of FLT_MAX would otherwise decode to
 *   inf). Errors name the lowest offending element (D5, D8) and are found before anything is
 *   written.
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep */

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qtransit/codec_plugin.h"

/* ---- configuration ------------------------------------------------------------------------- */

#ifndef EXAMPLE_FORMAT
#define EXAMPLE_FORMAT 4
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#if EXAMPLE_FORMAT == 8
#define BITS 8
#define ASYM 0
#define FORMAT_NAME "int8"
#elif EXAMPLE_FORMAT == 4
#define BITS 4
#define ASYM 0
#define FORMAT_NAME "int4"
#elif EXAMPLE_FORMAT == 41
#define BITS 4
#define ASYM 1
#define FORMAT_NAME "int4-asym"
#else
#error "EXAMPLE_FORMAT must be 8 (int8), 4 (int4) or 41 (int4-asym)"
#endif

#if defined(EXAMPLE_BF16_INPUT) + defined(EXAMPLE_BYTE_CODES) + defined(EXAMPLE_HIGH_NIBBLE) + \
        defined(EXAMPLE_SWIZZLED) + defined(EXAMPLE_NOT_THREAD_SAFE) > 1
#error "at most one EXAMPLE_ variant at a time"
#endif
#if defined(EXAMPLE_BF16_INPUT) || defined(EXAMPLE_BYTE_CODES) || defined(EXAMPLE_HIGH_NIBBLE) || \
    defined(EXAMPLE_SWIZZLED) || defined(EXAMPLE_NOT_THREAD_SAFE)
#if MUTANT != 0
#error "the EXAMPLE_ variants are variants of the correct codec (MUTANT 0)"
#endif
#endif
#if (defined(EXAMPLE_BF16_INPUT) || defined(EXAMPLE_SWIZZLED)) && EXAMPLE_FORMAT != 8
#error "EXAMPLE_BF16_INPUT and EXAMPLE_SWIZZLED are int8 variants"
#endif
#if (defined(EXAMPLE_BYTE_CODES) || defined(EXAMPLE_HIGH_NIBBLE) || defined(EXAMPLE_NOT_THREAD_SAFE)) && \
    EXAMPLE_FORMAT != 4
#error "EXAMPLE_BYTE_CODES, EXAMPLE_HIGH_NIBBLE and EXAMPLE_NOT_THREAD_SAFE are int4 variants"
#endif

/* The mutants, and the formats each applies to (a mutant that cannot exist for a format, such as a
 * nibble order for int8, is refused at compile time). A first input on which each differs from
 * the correct codec (elements = shard = block unless said; "codes" are the packed bytes):
 *   1 trunc        int4 [7, .5, 1.5, 2.5]: codes 7 0 2 2 -> 7 0 1 2 (int8 [127, .5, 1.5, 2.5],
 *                  asym [0, 15, .5, 1.5, 2.5])
 *   2 ties-away    the same blocks: 7 0 2 2 -> 7 1 2 3
 *   3 recip        int4 [49, 45.5]: s = 7, 45.5/7 = 6.5 -> 6, 45.5 * fl32(1/7) = 6.5000005 -> 7;
 *                  int8 [9, 4.5]: 63 -> 64; asym [0, 9, 4.5]: 7 -> 8; and [2^-149] (asym
 *                  [0, 2^-149]): 1/s overflows to inf, code 1 -> qmax
 *   4 fma-decode   asym [-4, 1, -1.6666666]: s = fl32(5/15), hi decodes to 1 -> 1 + 2^-23
 *   5 full-range   int4 [-8 * 2^-149]: s = 2^-149, code -7 -> -8 (int8 [-128 * 2^-149])
 *   6 nibble-order int4 [1, 7]: byte 0x71 -> 0x17 (decoded values equal)
 *   7 whole-tensor int4 elements 4, shard 2, block 4, [1, 2, 7, 7]: scales 2/7, 1 -> one scale 1
 *   8 zero-pad     asym elements 5, shard 5, block 3, [0, 15, 1, 5, 6]: short block [5, 6] gets
 *                  lo 0 instead of 5; int4: EQUIVALENT (see block_stats)
 *   9 ftz          int4 [2^-149]: code 1 -> block of zeros (asym [0, 2^-149])
 *  10 fp16-absmax  int4 [0.7]: s = 0.7/7 -> fl16(0.7)/7; [65520] refused (asym [0, 0.7])
 *  11 skip-last    int4 [1, 7]: codes 1 7 -> 7 7 (asym [0, 15]: a constant block)
 *  12 fp16-decode  int4 [0.7]: decodes to 0.7 -> fl16(0.7) = 0.7001953125 (asym [0, 0.7])
 *  13 sign-magn.   int4 [-1, 7]: byte 0x7F -> 0x79 (decoded values equal) */
#if MUTANT == 0
#elif MUTANT == 1
#define MUTANT_SLUG "trunc"               /* truncf instead of rne */
#elif MUTANT == 2
#define MUTANT_SLUG "ties-away"           /* roundf: ties away from zero */
#elif MUTANT == 3
#define MUTANT_SLUG "recip"               /* x * (1/s) instead of x / s */
#elif MUTANT == 4
#define MUTANT_SLUG "fma-decode"          /* fmaf(q, s, lo) in the asym decode */
#if !ASYM
#error "mutant 4 (fma-decode) applies to int4-asym only"
#endif
#elif MUTANT == 5
#define MUTANT_SLUG "full-range"          /* clamp to [-2^(b-1), 2^(b-1)-1] */
#if ASYM
#error "mutant 5 (full-range) applies to int8 and int4 only"
#endif
#elif MUTANT == 6
#define MUTANT_SLUG "nibble-order"        /* element 2j in the high nibble, PACKING_FORMAT declared */
#if BITS != 4
#error "mutant 6 (nibble-order) applies to int4 and int4-asym only"
#endif
#elif MUTANT == 7
#define MUTANT_SLUG "whole-tensor-blocks" /* blocks do not restart at shards */
#elif MUTANT == 8
#define MUTANT_SLUG "zero-pad"            /* short last block padded with zeros in its statistics */
#if BITS != 4
#error "mutant 8 (zero-pad) applies to int4 and int4-asym only"
#endif
#elif MUTANT == 9
#define MUTANT_SLUG "ftz"                 /* subnormal inputs read as zero */
#elif MUTANT == 10
#define MUTANT_SLUG "fp16-absmax"         /* absmax (asym: range) rounded to binary16 */
#elif MUTANT == 11
#define MUTANT_SLUG "skip-last"           /* statistics loop skips the block's last element */
#elif MUTANT == 12
#define MUTANT_SLUG "fp16-decode"         /* decoded values rounded to binary16 */
#elif MUTANT == 13
#define MUTANT_SLUG "sign-magnitude"      /* sign-magnitude codes instead of two's complement */
#if ASYM
#error "mutant 13 (sign-magnitude) applies to int8 and int4 only"
#endif
#elif MUTANT == 15
#define MUTANT_SLUG "f64-quotient"        /* rint((double)x / s): the quotient in binary64 */
#elif MUTANT == 16
#define MUTANT_SLUG "no-scale-floor"      /* s = a / qmax without max(., 2^-149) */
#elif MUTANT == 17
#define MUTANT_SLUG "simd-tail"           /* the finite check runs 8 at a time and forgets the remainder */
#elif MUTANT == 18
#define MUTANT_SLUG "float-index"         /* decode finds an element's block as (float)i / block */
#elif MUTANT == 19
#define MUTANT_SLUG "decode-overrun"      /* decode writes codes in pairs: one float past an odd block */
#elif MUTANT == 20
#define MUTANT_SLUG "warp-absmax"         /* statistics over the first 64 elements of a block only */
#else
#error "MUTANT must be 0..13 or 15..20"
#endif

#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

#define STR2(x) #x
#define STR(x) STR2(x)

#if MUTANT != 0
#if MUTANT < 10
#define CODEC_NAME "mutant0" STR(MUTANT) "-" MUTANT_SLUG "-" FORMAT_NAME
#else
#define CODEC_NAME "mutant" STR(MUTANT) "-" MUTANT_SLUG "-" FORMAT_NAME
#endif
#elif defined(EXAMPLE_BF16_INPUT)
#define CODEC_NAME "example-int8-bf16in"
#elif defined(EXAMPLE_BYTE_CODES)
#define CODEC_NAME "example-int4-bytes"
#elif defined(EXAMPLE_HIGH_NIBBLE)
#define CODEC_NAME "example-int4-hinib"
#elif defined(EXAMPLE_SWIZZLED)
#define CODEC_NAME "example-int8-swizzled"
#elif defined(EXAMPLE_NOT_THREAD_SAFE)
#define CODEC_NAME "example-int4-serial"
#else
#define CODEC_NAME "example-" FORMAT_NAME
#endif

#if defined(EXAMPLE_BYTE_CODES)
#define PACKING QTRANSIT_PACKING_BYTE_PER_CODE
#elif defined(EXAMPLE_HIGH_NIBBLE)
#define PACKING QTRANSIT_PACKING_HIGH_NIBBLE_FIRST
#else
#define PACKING QTRANSIT_PACKING_FORMAT /* mutant 6 declares it too, and breaks it */
#endif

/* Does the code of element 2j go into the high nibble? */
#if defined(EXAMPLE_HIGH_NIBBLE) || MUTANT == 6
#define EVEN_HIGH 1
#else
#define EVEN_HIGH 0
#endif

#if defined(EXAMPLE_BYTE_CODES)
#define CODE_BITS 8 /* int4 codes, one int8_t each */
#else
#define CODE_BITS BITS
#endif

#if ASYM
#define QMIN 0
#define QMAX ((1 << BITS) - 1)
#elif MUTANT == 5
#define QMIN (-(1 << (BITS - 1)))
#define QMAX ((1 << (BITS - 1)) - 1)
#else
#define QMIN (-((1 << (BITS - 1)) - 1))
#define QMAX ((1 << (BITS - 1)) - 1)
#endif
/* The divisor of the scale: qmax (int<b>) or 2^b - 1 (asym); mutant 5 keeps it (only its clamp
 * is wrong). */
#if ASYM
#define LEVELS ((float)((1 << BITS) - 1))
#else
#define LEVELS ((float)((1 << (BITS - 1)) - 1))
#endif

#ifndef SWZ_ROW_BLOCKS
#define SWZ_ROW_BLOCKS 4 /* EXAMPLE_SWIZZLED: blocks per row of the scale matrix */
#endif

/* ---- small helpers -------------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void set_err(char* err, size_t err_len, const char* fmt, ...) {
    if (err == NULL || err_len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}
/* A fixed message, and the nonzero return of an argument error. */
#define FAIL0(msg) (set_err(err, err_len, "%s", msg), 1)

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fl16(f): f rounded to the nearest binary16 (ties to even, subnormals kept, overflow to inf),
 * returned as the binary32 that holds it exactly. Used by mutants 10 and 12 only. */
MAYBE_UNUSED static float round_to_binary16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = u & 0x80000000u;
    uint32_t mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u) return f;                                /* inf, NaN */
    if (mag >= 0x477ff000u) return f32_from_bits(sign | 0x7f800000u); /* >= 65520: overflow */
    uint32_t e = mag >> 23;                                          /* biased exponent */
    uint32_t sig = e ? ((mag & 0x7fffffu) | 0x800000u) : (mag & 0x7fffffu);
    int exp2 = e ? (int)e - 150 : -149;    /* f = sig * 2^exp2 */
    int drop = -24 - exp2;                 /* the half's quantum is 2^-24 below 2^-14 ... */
    if (drop < 13) drop = 13;              /* ... and 11 significant bits above */
    if (drop > 25) return f32_from_bits(sign); /* < 2^-25: rounds to zero */
    uint32_t half = 1u << (drop - 1);
    uint32_t keep = sig >> drop;
    uint32_t rest = sig & ((1u << drop) - 1u);
    if (rest > half || (rest == half && (keep & 1u))) keep += 1u;
    float r = ldexpf((float)keep, exp2 + drop); /* exact: keep has at most 12 bits */
    return sign ? -r : r;
}

static float sat(float v) {
    /* D1: a decoded value approximates a finite input, so it is kept finite. */
    if (v > FLT_MAX) return FLT_MAX;
    if (v < -FLT_MAX) return -FLT_MAX;
    return v;
}

/* The input value i, as encode sees it. */
static float load_x(const void* x, int64_t i) {
    float v;
#if defined(EXAMPLE_BF16_INPUT)
    uint16_t h;
    memcpy(&h, (const unsigned char*)x + 2 * i, sizeof h);
    v = f32_from_bits((uint32_t)h << 16); /* exact widening */
#else
    memcpy(&v, (const unsigned char*)x + 4 * i, sizeof v);
#endif
#if MUTANT == 9
    /* MUTANT 9: the input is read by a unit that flushes subnormals to zero. */
    if (fpclassify(v) == FP_SUBNORMAL) v = copysignf(0.0f, v);
#endif
    return v;
}

/* rne: the nearest integer, ties to even (the default rounding mode is never changed). */
static float round_code(float v) {
#if MUTANT == 1
    return truncf(v); /* MUTANT 1: truncation */
#elif MUTANT == 2
    return roundf(v); /* MUTANT 2: ties away from zero */
#else
    return nearbyintf(v);
#endif
}

static int32_t clamp_code(float r) {
    /* fminf/fmaxf: an infinite quotient (mutant 11's skipped element, mutant 3's 1/s overflow)
     * clamps; a NaN (mutant 3: 0 * inf) takes the bound, as a GPU's min/max would. */
    float c = fminf(fmaxf(r, (float)QMIN), (float)QMAX);
    return (int32_t)c;
}

/* totalOrder on finite values, for zeros: -0 < +0 (D2). */
MAYBE_UNUSED static int less_total(float a, float b) {
    if (a < b) return 1;
    return a == b && signbit(a) && !signbit(b);
}

/* ---- block layout --------------------------------------------------------------------------- */

static int64_t code_bytes(int64_t len) { return (len * CODE_BITS + 7) / 8; }

/* The number of blocks and of code bytes of a call (the correct layout: qtransit's buffers). */
static void layout_size(int64_t elements, int64_t block, int64_t shard, int64_t* blocks, int64_t* bytes) {
    int64_t per = (shard + block - 1) / block;
    int64_t last = shard - (per - 1) * block;
    *blocks = (elements / shard) * per;
    *bytes = (elements / shard) * ((per - 1) * code_bytes(block) + code_bytes(last));
}

/* Where block j's scale (and offset) lies. */
static int64_t scale_index(int64_t j) {
#if defined(EXAMPLE_SWIZZLED)
    /* The blocks form a matrix of SWZ_ROW_BLOCKS (= 4) columns: one 128x4 tile per 128 rows, tiles
     * row-major (one tile per tile row here), and inside a tile (r, c) at
     * (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4. */
    int64_t r = j / SWZ_ROW_BLOCKS, c = j % SWZ_ROW_BLOCKS;
    int64_t tiles_per_row = (SWZ_ROW_BLOCKS + 3) / 4;
    int64_t tile = (r / 128) * tiles_per_row + c / 4;
    return tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
#else
    return j;
#endif
}

/* ---- one block's statistics ----------------------------------------------------------------- */

typedef struct {
    float s;  /* scale */
    float lo; /* asym offset */
} block_params;

/* What is wrong with a block: 0 none, 1 a non-finite element (*bad: its index), 2 range overflow
 * (asym), 3 a binary16 overflow (mutant 10). */
static int block_stats(const void* x, int64_t start, int64_t len, int64_t block, block_params* p,
                       int64_t* bad, float* v1, float* v2) {
    (void)v2;
    p->s = 0.0f;
    p->lo = 0.0f;
#if MUTANT != 17
    for (int64_t i = 0; i < len; ++i) {
        float v = load_x(x, start + i);
        if (!isfinite(v)) {
            *bad = start + i;
            *v1 = v;
            return 1;
        }
    }
#endif
    (void)block;
    /* The statistics loop: MUTANT 11 stops one element short. */
#if MUTANT == 11
    const int64_t stat_len = len - 1;
#elif MUTANT == 20
    /* MUTANT 20: one reduction over 64 lanes, no loop over the rest of a longer block. */
    const int64_t stat_len = len < 64 ? len : 64;
#else
    const int64_t stat_len = len;
#endif
#if !ASYM
    float a = 0.0f;
    for (int64_t i = 0; i < stat_len; ++i) {
        float m = fabsf(load_x(x, start + i));
        if (m > a) a = m;
    }
#if MUTANT == 8
    /* MUTANT 8: a short block is padded with zeros that enter its absmax. EQUIVALENT for int<b>:
     * the padding is |0| = 0 and a starts at 0, so no zero can ever raise the absmax; the codes of
     * the real elements, the scale and the decode are therefore those of the correct codec for
     * every input (and the padded codes are not written). */
    if (len < block) {
        float m = fabsf(0.0f);
        if (m > a) a = m;
    }
#endif
#if MUTANT == 10
    /* MUTANT 10: the absmax is kept in binary16. */
    {
        float a16 = round_to_binary16(a);
        if (isinf(a16)) {
            *bad = start;
            *v1 = a;
            *v2 = a16;
            return 3;
        }
        a = a16;
    }
#endif
    p->lo = 0.0f;
    if (a == 0.0f) {
        p->s = 0.0f;
    } else {
        float s = a / LEVELS;
#if MUTANT == 16
        p->s = s; /* MUTANT 16: no floor at 2^-149 */
#else
        p->s = s > 0x1p-149f ? s : 0x1p-149f;
#endif
    }
#else /* ASYM */
    float lo = load_x(x, start), hi = lo;
    for (int64_t i = 0; i < stat_len; ++i) {
        float v = load_x(x, start + i);
        if (less_total(v, lo)) lo = v;
        if (less_total(hi, v)) hi = v;
    }
#if MUTANT == 8
    /* MUTANT 8: a short block is padded with zeros that enter its lo and hi. */
    if (len < block) {
        if (less_total(0.0f, lo)) lo = 0.0f;
        if (less_total(hi, 0.0f)) hi = 0.0f;
    }
#endif
    p->lo = lo;
    if (hi == lo) {
        p->s = 0.0f;
    } else {
        float r = hi - lo;
        if (isinf(r)) {
            *bad = start;
            *v1 = lo;
            *v2 = hi;
            return 2;
        }
#if MUTANT == 10
        /* MUTANT 10: the range is kept in binary16. */
        {
            float r16 = round_to_binary16(r);
            if (isinf(r16)) {
                *bad = start;
                *v1 = r;
                *v2 = r16;
                return 3;
            }
            r = r16;
        }
#endif
        float s = r / LEVELS;
#if MUTANT == 16
        p->s = s; /* MUTANT 16: no floor at 2^-149 */
#else
        p->s = s > 0x1p-149f ? s : 0x1p-149f;
#endif
    }
#endif
    return 0;
}

/* The code of value v in a block with parameters p (p->s != 0). */
static int32_t quantize(float v, const block_params* p, float inv) {
    (void)inv;
    (void)p;
#if !ASYM
#if MUTANT == 3
    return clamp_code(round_code(v * inv)); /* MUTANT 3: reciprocal multiply */
#elif MUTANT == 15
    return clamp_code((float)rint((double)v / (double)p->s)); /* MUTANT 15: binary64 quotient */
#elif defined(EXAMPLE_QUOTIENT_F64)
    /* A test's variant (properties/plugin/mutated_codec.c): the quotient in binary64, rounded once. */
    return clamp_code((float)nearbyint((double)v / (double)p->s));
#else
    return clamp_code(round_code(v / p->s));
#endif
#else
    float d = v - p->lo;
#if MUTANT == 3
    return clamp_code(round_code(d * inv)); /* MUTANT 3: reciprocal multiply */
#elif MUTANT == 15
    return clamp_code((float)rint((double)d / (double)p->s)); /* MUTANT 15: binary64 quotient */
#else
    return clamp_code(round_code(d / p->s));
#endif
#endif
}

static float dequantize(int32_t q, float s, float lo) {
    float out;
#if !ASYM
    (void)lo;
    out = sat((float)q * s);
#else
    if (s == 0.0f) {
        out = lo; /* constant block: lo exactly (D2: a -0 stays -0) */
    } else {
#if MUTANT == 4
        out = sat(fmaf((float)q, s, lo)); /* MUTANT 4: fused multiply-add */
#else
        float m = sat((float)q * s);
        out = sat(m + lo);
#endif
    }
#endif
#if MUTANT == 12
    out = round_to_binary16(out); /* MUTANT 12: decoded through binary16 */
#endif
    return out;
}

/* ---- packing -------------------------------------------------------------------------------- */

static unsigned code_field(int32_t q) {
#if MUTANT == 13
    /* MUTANT 13: sign-magnitude, the field's top bit is the sign. */
    if (q < 0) return (1u << (BITS - 1)) | (unsigned)(-q);
    return (unsigned)q;
#elif CODE_BITS == 8
    return (unsigned)q & 0xffu; /* two's complement (asym: unsigned) */
#else
    return (unsigned)q & 0xfu;
#endif
}

static int32_t field_code(unsigned f) {
#if ASYM
    return (int32_t)f;
#elif MUTANT == 13
    const unsigned sign = 1u << (BITS - 1);
    return (f & sign) ? -(int32_t)(f & (sign - 1u)) : (int32_t)f;
#elif CODE_BITS == 8
    return (int32_t)(int8_t)(uint8_t)f;
#else
    return (int32_t)(f ^ 8u) - 8; /* sign-extend the nibble */
#endif
}

/* Element i of a block whose codes start at byte `base`; bytes at or past `limit` are outside
 * qtransit's buffer (only mutant 7's layout can reach them) and are neither written nor read. */
static void put_code(uint8_t* codes, int64_t base, int64_t i, int64_t limit, int32_t q) {
    unsigned f = code_field(q);
#if CODE_BITS == 8
    if (base + i < limit) codes[base + i] = (uint8_t)f;
#else
    int64_t at = base + i / 2;
    if (at >= limit) return;
    int high = (int)((i & 1) ^ EVEN_HIGH);
    if (high)
        codes[at] = (uint8_t)((codes[at] & 0x0fu) | (f << 4));
    else
        codes[at] = (uint8_t)((codes[at] & 0xf0u) | f);
#endif
}

static int32_t get_code(const uint8_t* codes, int64_t base, int64_t i, int64_t limit) {
#if CODE_BITS == 8
    return base + i < limit ? field_code(codes[base + i]) : 0;
#else
    int64_t at = base + i / 2;
    if (at >= limit) return 0;
    int high = (int)((i & 1) ^ EVEN_HIGH);
    return field_code(high ? (unsigned)(codes[at] >> 4) : (unsigned)(codes[at] & 0x0fu));
#endif
}

/* ---- the calling-concurrently check of the serial variant ------------------------------------ */

#if defined(EXAMPLE_NOT_THREAD_SAFE)
#include <stdatomic.h>
#include <time.h>
static atomic_int g_in_flight;

static int serial_enter(char* err, size_t err_len) {
    if (atomic_fetch_add(&g_in_flight, 1) != 0) {
        atomic_fetch_sub(&g_in_flight, 1);
        return FAIL0(CODEC_NAME " called concurrently although thread_safe = 0");
    }
    struct timespec ts = {0, 50000}; /* 50 us: a broken promise would very likely overlap */
    nanosleep(&ts, NULL);
    return 0;
}
static void serial_leave(void) { atomic_fetch_sub(&g_in_flight, 1); }
#define ENTER()                                    \
    do {                                           \
        if (serial_enter(err, err_len)) return 1;  \
    } while (0)
#define LEAVE() serial_leave()
#else
#define ENTER() ((void)0)
#define LEAVE() ((void)0)
#endif

/* ---- the block walk ------------------------------------------------------------------------- */

/* The block walk visits every block in order: global index j, first element, length, first code
 * byte. The correct layout restarts at every shard; MUTANT 7 lays its blocks over the whole call.
 * Its layout has no more blocks (so scales) than the correct one, but with 4-bit codes and an odd
 * block it can need more code bytes (block 3, shard 2: blocks of 3 and 1 take 2 + 1 bytes where two
 * shards of 2 take 1 + 1): it writes and reads only inside qtransit's buffer (n_bytes), a code past
 * the end is dropped and decodes as 0. */
#if MUTANT == 7
#define LAYOUT_SHARD(elements, shard) (elements)
#else
#define LAYOUT_SHARD(elements, shard) (shard)
#endif

static int check_common(int64_t elements, int64_t block, int64_t shard, char* err, size_t err_len) {
    if (elements < 0) return FAIL0(CODEC_NAME ": elements < 0");
    if (block < 1) return FAIL0(CODEC_NAME ": block < 1");
    if (shard < 1) return FAIL0(CODEC_NAME ": shard < 1");
    if (elements % shard != 0) return FAIL0(CODEC_NAME ": elements is not a multiple of shard");
    return 0;
}

static int encode_impl(const qtransit_encode_args* args, char* err, size_t err_len) {
    if (args == NULL) return FAIL0(CODEC_NAME ": encode args is NULL");
    if (args->struct_size < sizeof(qtransit_encode_args))
        return FAIL0(CODEC_NAME ": encode args struct_size too small");
    const int64_t n = args->elements, B = args->block, S = args->shard;
    if (n == 0) return 0;
    if (check_common(n, B, S, err, err_len)) return 1;
    if (args->x == NULL || args->codes == NULL || args->scales == NULL)
        return FAIL0(CODEC_NAME ": encode: x, codes or scales is NULL");
#if ASYM
    if (args->offsets == NULL) return FAIL0(CODEC_NAME ": encode: offsets is NULL (int4-asym stores lo)");
#endif
    int64_t n_blocks, n_bytes;
    layout_size(n, B, S, &n_blocks, &n_bytes);
    (void)n_blocks;
    const int64_t LS = LAYOUT_SHARD(n, S);

#if MUTANT == 17
    /* MUTANT 17: the finite check, 8 lanes at a time; the last n % 8 elements are never looked at. */
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        int bad = 0;
        for (int k = 0; k < 8; ++k) bad |= !isfinite(load_x(args->x, i + k));
        if (bad) {
            set_err(err, err_len, CODEC_NAME ": non-finite input near element %lld", (long long)(args->index_base + i));
            return 2;
        }
    }
#endif
    /* Pass 1: refuse the call before anything is written; the first offending block in order
     * names the lowest offending element (D5, D8). */
    {
        int64_t j = 0;
        for (int64_t sh = 0; sh < n; sh += LS)
            for (int64_t b0 = 0; b0 < LS; b0 += B, ++j) {
                int64_t len = LS - b0 < B ? LS - b0 : B;
                block_params p;
                int64_t bad = 0;
                float v1 = 0, v2 = 0;
                int what = block_stats(args->x, sh + b0, len, B, &p, &bad, &v1, &v2);
                if (what == 1) {
                    set_err(err, err_len, CODEC_NAME ": non-finite input at element %lld (%g)",
                            (long long)(args->index_base + bad), (double)v1);
                    return 2;
                }
                if (what == 2) {
                    set_err(err, err_len,
                            CODEC_NAME ": range overflow in block %lld (element %lld): hi - lo overflows binary32 (lo %g, hi %g)",
                            (long long)j, (long long)(args->index_base + bad), (double)v1, (double)v2);
                    return 3;
                }
                if (what == 3) {
                    set_err(err, err_len,
                            CODEC_NAME ": range overflow in block %lld (element %lld): %s %g overflows binary16 (%g)",
                            (long long)j, (long long)(args->index_base + bad), ASYM ? "the range" : "the absmax",
                            (double)v1, (double)v2);
                    return 3;
                }
            }
    }

    /* Pass 2: codes, scales, offsets. */
    int64_t j = 0, byte = 0;
    for (int64_t sh = 0; sh < n; sh += LS)
        for (int64_t b0 = 0; b0 < LS; b0 += B, ++j) {
            int64_t len = LS - b0 < B ? LS - b0 : B;
            int64_t start = sh + b0;
            block_params p;
            int64_t bad;
            float v1, v2;
            block_stats(args->x, start, len, B, &p, &bad, &v1, &v2);
            args->scales[scale_index(j)] = p.s;
#if ASYM
            args->offsets[scale_index(j)] = p.lo;
#endif
            int64_t nb = code_bytes(len);
            for (int64_t k = 0; k < nb && byte + k < n_bytes; ++k) args->codes[byte + k] = 0;
            if (p.s != 0.0f) {
                const float inv = 1.0f / p.s; /* used by mutant 3 only */
                for (int64_t i = 0; i < len; ++i)
                    put_code(args->codes, byte, i, n_bytes, quantize(load_x(args->x, start + i), &p, inv));
            }
            byte += nb;
        }
    return 0;
}

static int decode_impl(const qtransit_decode_args* args, char* err, size_t err_len) {
    if (args == NULL) return FAIL0(CODEC_NAME ": decode args is NULL");
    if (args->struct_size < sizeof(qtransit_decode_args))
        return FAIL0(CODEC_NAME ": decode args struct_size too small");
    const int64_t n = args->elements, B = args->block, S = args->shard;
    if (n == 0) return 0;
    if (check_common(n, B, S, err, err_len)) return 1;
    if (args->codes == NULL || args->scales == NULL || args->out == NULL)
        return FAIL0(CODEC_NAME ": decode: codes, scales or out is NULL");
#if ASYM
    if (args->offsets == NULL) return FAIL0(CODEC_NAME ": decode: offsets is NULL (int4-asym stores lo)");
#endif
    int64_t n_blocks, n_bytes;
    layout_size(n, B, S, &n_blocks, &n_bytes);
    const int64_t LS = LAYOUT_SHARD(n, S);
    unsigned char* out = (unsigned char*)args->out;
    int64_t j = 0, byte = 0;
    for (int64_t sh = 0; sh < n; sh += LS)
        for (int64_t b0 = 0; b0 < LS; b0 += B, ++j) {
            int64_t len = LS - b0 < B ? LS - b0 : B;
            int64_t start = sh + b0;
            float s = args->scales[scale_index(j)];
#if ASYM
            float lo = args->offsets[scale_index(j)];
#else
            float lo = 0.0f;
#endif
#if MUTANT == 19
            /* MUTANT 19: decoded in pairs of codes (a byte of int4): an odd block writes its pad too. */
            for (int64_t i = 0; i < len; i += 2) {
                float v0 = dequantize(get_code(args->codes, byte, i, n_bytes), s, lo);
                float v1 = dequantize(get_code(args->codes, byte, i + 1, n_bytes), s, lo);
                memcpy(out + 4 * (start + i), &v0, sizeof v0);
                memcpy(out + 4 * (start + i + 1), &v1, sizeof v1);
            }
#else
            for (int64_t i = 0; i < len; ++i) {
                int32_t q = get_code(args->codes, byte, i, n_bytes);
#if MUTANT == 18
                /* MUTANT 18: the element's block from its index in binary32. */
                {
                    int64_t jf = (int64_t)((float)(b0 + i) / (float)B);
                    s = args->scales[scale_index(j - b0 / B + jf)];
#if ASYM
                    lo = args->offsets[scale_index(j - b0 / B + jf)];
#endif
                }
#endif
                float v = dequantize(q, s, lo);
                memcpy(out + 4 * (start + i), &v, sizeof v);
            }
#endif
            byte += code_bytes(len);
        }
    return 0;
}

static int example_encode(void* state, const qtransit_encode_args* args, char* err, size_t err_len) {
    (void)state;
    ENTER();
    int rc = encode_impl(args, err, err_len);
    LEAVE();
    return rc;
}

static int example_decode(void* state, const qtransit_decode_args* args, char* err, size_t err_len) {
    (void)state;
    ENTER();
    int rc = decode_impl(args, err, err_len);
    LEAVE();
    return rc;
}

static const qtransit_codec_v1_t g_codec = {
    QTRANSIT_CODEC_ABI_VERSION,
    sizeof(qtransit_codec_v1_t),
    CODEC_NAME,
    FORMAT_NAME,
    NULL, /* format_toml: a built-in format */
    QTRANSIT_DEVICE_CPU,
    PACKING,
#if defined(EXAMPLE_BF16_INPUT)
    QTRANSIT_BFLOAT16,
#else
    QTRANSIT_BINARY32,
#endif
    QTRANSIT_BINARY32,
#if defined(EXAMPLE_SWIZZLED)
    QTRANSIT_SCALES_SWIZZLED_128X4,
    SWZ_ROW_BLOCKS,
#else
    QTRANSIT_SCALES_IN_ORDER,
    0,
#endif
    1, /* block_min */
    0, /* block_max: no limit */
    1, /* block_multiple: any */
#if defined(EXAMPLE_NOT_THREAD_SAFE)
    0,
#else
    1,
#endif
    NULL, /* state */
    example_encode,
    example_decode,
    NULL, /* reduce_requantize */
};

const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    (void)err;
    (void)err_len;
    return &g_codec;
}
