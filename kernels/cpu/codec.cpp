// CPU backend of the quantizer. The hot loops are straight element-wise loops over one block that
// call the shared block arithmetic; GCC vectorizes them, and on x86-64 each hot function is built
// three times (x86-64-v4 = AVX-512, x86-64-v3 = AVX2, baseline) with the best one chosen at load
// time (target_clones), so a binary built here runs on any x86-64 machine at full width.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "qtransit/common/cpu.hpp"
#include "qtransit/common/shortest.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/decl_math.hpp"
#include "qtransit/kernels/hadamard.hpp"
#include "decl_fast.hpp"
#include "hadamard_avx512.hpp"

#if defined(__x86_64__) && !defined(QT_UNDER_ASAN)
#define QT_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
// What a CPU with AVX-512 never runs (it takes the *_avx512 functions): no x86-64-v4 clone to compile.
#define QT_MULTIVERSION_NO512 __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define QT_MULTIVERSION
#define QT_MULTIVERSION_NO512
#endif
// The declared formats' fast loops on a CPU with AVX-512 (see encode_decl_fast_avx512).
#if defined(__x86_64__)
#if defined(__clang__)
#define QT_AVX512_WIDE __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,fma,bmi,bmi2,lzcnt,popcnt,f16c")))
#else
#define QT_AVX512_WIDE __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif
#endif
// Helpers of a multiversioned function are forced inline so that each version compiles them for
// its own instruction set (and no per-block call goes through the load-time dispatch).
#define QT_INLINE inline __attribute__((always_inline))
#define QT_NOINLINE __attribute__((noinline))

namespace qtransit::kernels {
namespace {

// Below this many elements a tensor is encoded on one thread: spawning costs more than it saves.
constexpr int64_t kParallelThreshold = int64_t{1} << 18;

int pick_threads(int requested, int64_t elements) {
    if (requested > 0) return requested;
    if (elements < kParallelThreshold) return 1;
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Runs fn(t, first_block, last_block) over [0, blocks) split into `threads` contiguous ranges,
// t = 0.. the index of the range.
template <class Fn>
void parallel_blocks(int64_t blocks, int threads, Fn&& fn) {
    threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(blocks, 1)));
    if (threads <= 1) {
        fn(0, int64_t{0}, blocks);
        return;
    }
    std::vector<std::thread> pool;
    const int64_t per = (blocks + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
        const int64_t b0 = t * per, b1 = std::min(blocks, b0 + per);
        if (b0 >= b1) break;
        pool.emplace_back([&fn, t, b0, b1] { fn(t, b0, b1); });
    }
    for (auto& th : pool) th.join();
}

// Block statistics in one pass, as integer reductions (they vectorize; float min/max with NaN and
// signed zeros would not): the largest |x| as bits (>= kInfBits means a NaN or inf is present)
// and, for asym, the totalOrder keys of the minimum and maximum.
struct Stats {
    uint32_t absmax_bits = 0;
    uint32_t kmin = 0xffffffffu, kmax = 0;
};

QT_INLINE Stats block_stats(const float* x, int64_t len, bool want_range) {
    uint32_t amax = 0;
    const auto* u = reinterpret_cast<const uint32_t*>(x);
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, u[i] & 0x7fffffffu);
    Stats s;
    s.absmax_bits = amax;
    if (want_range) {
        uint32_t kmin = 0xffffffffu, kmax = 0;
        for (int64_t i = 0; i < len; ++i) {
            const uint32_t k = (u[i] & 0x80000000u) ? ~u[i] : (u[i] | 0x80000000u);
            kmin = std::min(kmin, k);
            kmax = std::max(kmax, k);
        }
        s.kmin = kmin;
        s.kmax = kmax;
    }
    return s;
}

// Quantize one block to integer codes (scale already decided, block not poisoned).
QT_INLINE void quantize_sym(const float* x, int64_t len, float s, int32_t qmax, int32_t* q) {
    for (int64_t i = 0; i < len; ++i) q[i] = sym_code(x[i], s, qmax);
}
QT_INLINE void quantize_asym(const float* x, int64_t len, float lo, float s, int32_t levels, int32_t* q) {
    for (int64_t i = 0; i < len; ++i) q[i] = asym_code(x[i], lo, s, levels);
}
QT_INLINE void quantize_ds(const float* x, int64_t len, float scale, int32_t cmin, int32_t cmax, int32_t* q) {
    for (int64_t i = 0; i < len; ++i) q[i] = ds_code(x[i], scale, cmin, cmax);
}
QT_INLINE void quantize_qr(const float* x, int64_t len, float enc, int bits, int32_t* q) {
    for (int64_t i = 0; i < len; ++i) q[i] = qr_code(x[i], enc, bits);
}
// int4 fast path for a full default block: codes as bytes, then pairs merged eight bytes at a
// time: with b_k < 16, byte k of (w | w >> 4) is b_k | b_{k+1} << 4, and the even bytes of that
// are the packed pairs (element 2j in the low nibble).
QT_INLINE void quantize_sym4(const float* x, float s, uint8_t* out) {
    uint8_t nib[kDefaultBlock];
    for (int64_t i = 0; i < kDefaultBlock; ++i) nib[i] = static_cast<uint8_t>(sym_code(x[i], s, 7) & 0xF);
    for (int64_t k = 0; k < kDefaultBlock / 8; ++k) {
        uint64_t w;
        std::memcpy(&w, nib + 8 * k, 8);
        const uint64_t t = w | (w >> 4);
        const uint32_t packed = static_cast<uint32_t>((t & 0xFFu) | ((t >> 8) & 0xFF00u) | ((t >> 16) & 0xFF0000u) |
                                                      ((t >> 24) & 0xFF000000u));
        std::memcpy(out + 4 * k, &packed, 4);
    }
}
// int8 fast path: quantize straight into bytes.
QT_INLINE void quantize_sym8(const float* x, int64_t len, float s, uint8_t* out) {
    for (int64_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(sym_code(x[i], s, 127));
}

QT_INLINE void pack_block(Kind kind, int bits, const int32_t* q, int64_t len, uint8_t* out) {
    if (bits == 8) {
        for (int64_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(q[i]);
    } else if (bits == 4) {
        // Nibbles first, then pairs read as little-endian 16-bit words: contiguous loads that
        // vectorize, where indexing q[2j] and q[2j+1] would need strided gathers.
        uint8_t nib[kDefaultBlock + 1];
        const bool ds = kind == Kind::kDs;  // ds-int4: even element in the high nibble
        for (int64_t i0 = 0; i0 < len; i0 += kDefaultBlock) {
            const int64_t m = std::min<int64_t>(kDefaultBlock, len - i0);
            for (int64_t i = 0; i < m; ++i) nib[i] = static_cast<uint8_t>(q[i0 + i] & 0xF);
            if (m & 1) nib[m] = 0;  // the pad nibble
            const int64_t bytes = (m + 1) / 2;
            for (int64_t j = 0; j < bytes; ++j) {
                uint16_t w;
                std::memcpy(&w, nib + 2 * j, 2);
                out[i0 / 2 + j] = static_cast<uint8_t>(ds ? (((w << 4) & 0xF0) | (w >> 8)) : ((w & 0x0F) | ((w >> 4) & 0xF0)));
            }
        }
    } else {
        const int64_t nbytes = (len * bits + 7) / 8;
        std::memset(out, 0, static_cast<size_t>(nbytes));
        const uint32_t mask = (1u << bits) - 1u;
        for (int64_t i = 0; i < len; ++i) {
            const int64_t bit = i * bits;
            const uint32_t v = (static_cast<uint32_t>(q[i]) & mask) << (bit & 7);
            out[bit >> 3] = static_cast<uint8_t>(out[bit >> 3] | (v & 0xFFu));
            if ((bit & 7) + bits > 8) out[(bit >> 3) + 1] = static_cast<uint8_t>(out[(bit >> 3) + 1] | (v >> 8));
        }
    }
}


struct EncodeJob {
    Kind kind;
    int bits;
    const FormatSpec& format;
    const float* x;
    int64_t n, block, block_bytes;
    uint8_t* codes;
    float* scales;
    float* offsets;
    bool error_policy;
    RoundKey key{};  // declared formats: stochastic rounding's key (index_base: element 0 of x)
};

// What pass 1 decided for a block.
struct BlockPlan {
    float scale;   // s, or Δ for ds
    float lo;      // asym offset
    float dscale;  // ds: the multiplier 2^b / 2a; qr: enc
    uint8_t state; // kQuantize, kAllZero, kPoisoned
};
enum : uint8_t { kQuantize = 0, kAllZero = 1, kPoisoned = 2 };

QT_INLINE BlockPlan plan_block(Kind kind, int bits, const float* xb, int64_t len) {
    // The default block size gets a compile-time length, so its loops unroll completely.
    const bool range = kind == Kind::kAsym || kind == Kind::kQr;
    const Stats st = len == kDefaultBlock ? block_stats(xb, kDefaultBlock, range) : block_stats(xb, len, range);
    BlockPlan p{0.0f, 0.0f, 0.0f, kQuantize};
    if (st.absmax_bits >= kInfBits) {
        p.state = kPoisoned;
    } else if (kind == Kind::kSym) {
        p.scale = sym_scale(bits_f32(st.absmax_bits), bits);
        if (p.scale == 0.0f) p.state = kAllZero;
    } else if (kind == Kind::kAsym) {
        p.lo = from_order_key(st.kmin);
        p.scale = asym_scale(p.lo, from_order_key(st.kmax), bits);
        if (f32_bits(p.scale) == kInfBits) p.state = kPoisoned;
        else if (p.scale == 0.0f) p.state = kAllZero;  // constant block: decodes to lo
    } else if (kind == Kind::kQr) {
        // fl16 is monotone: the binary16 extremes are the rounded binary32 ones. Never kAllZero: a
        // zero's code is the bias, 2^(b-1).
        if (f32_bits(ds_absmax(bits_f32(st.absmax_bits))) == kInfBits) {
            p.state = kPoisoned;  // NaN, inf, or a value that overflows binary16 (|x| >= 65520)
        } else {
            const float m = qr_extreme(round_f16(from_order_key(st.kmin)), round_f16(from_order_key(st.kmax)));
            p.scale = qr_dec(m, bits);
            p.dscale = qr_enc(p.scale);
        }
    } else {
        const float a16 = ds_absmax(bits_f32(st.absmax_bits));
        if (f32_bits(a16) == kInfBits) {
            p.state = kPoisoned;
        } else {
            p.scale = ds_step(a16, bits);
            // fp16 absmax 0: step 1, codes 0 (the multiplier would be infinite)
            if (a16 == 0.0f) p.state = kAllZero;
            else p.dscale = ds_scale(a16, bits);
        }
    }
    return p;
}

// Encode blocks [b0, b1). Returns the first block refused under the `error` policy, or -1.
// Two passes over chunks of blocks that stay in L1: first every block's statistics and scale, then
// every block's codes. Blocks of a chunk are then independent work, so the scalar scale division
// of one block overlaps the vector work of the others instead of sitting on the critical path.
QT_MULTIVERSION int64_t encode_range(const EncodeJob& job, int64_t b0, int64_t b1, int32_t* q) {
    const Kind kind = job.kind;
    const int bits = job.bits;
    const float nan = bits_f32(kQuietNanBits);
    constexpr int64_t kChunkElements = 4096;
    const int64_t chunk = std::clamp<int64_t>(kChunkElements / job.block, 1, 256);
    BlockPlan plan[256];
    for (int64_t c0 = b0; c0 < b1; c0 += chunk) {
        const int64_t c1 = std::min(b1, c0 + chunk);
        for (int64_t j = c0; j < c1; ++j) {
            const int64_t first = j * job.block;
            // Pass 1 is the first touch of the input: ask for the data 8 KiB ahead (one 64-byte line
            // per 16 elements), which the hardware prefetcher alone does not keep up with here.
            for (int64_t ahead = first + 2048; ahead < std::min(first + 2048 + job.block, job.n); ahead += 16)
                __builtin_prefetch(job.x + ahead);
            BlockPlan& p = plan[j - c0];
            p = plan_block(kind, bits, job.x + first, std::min(job.block, job.n - first));
            if (p.state == kPoisoned) {
                if (job.error_policy) return j;  // blocks run in increasing order: the range's lowest
                p.scale = nan;
                p.lo = nan;
            }
            job.scales[j] = p.scale;
            if (kind == Kind::kAsym) job.offsets[j] = p.lo;
        }
        for (int64_t j = c0; j < c1; ++j) {
            const BlockPlan& p = plan[j - c0];
            const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
            const float* xb = job.x + first;
            uint8_t* out = job.codes + j * job.block_bytes;
            if (p.state != kQuantize) {  // poisoned, zero or constant block: every code 0
                std::memset(out, 0, static_cast<size_t>(job.format.code_bytes(len)));
                continue;
            }
            if (kind == Kind::kSym && bits == 8) {
                if (len == kDefaultBlock) quantize_sym8(xb, kDefaultBlock, p.scale, out);
                else quantize_sym8(xb, len, p.scale, out);
            } else if (kind == Kind::kSym && bits == 4 && len == kDefaultBlock) {
                quantize_sym4(xb, p.scale, out);
            } else {
                if (kind == Kind::kSym) {
                    quantize_sym(xb, len, p.scale, sym_qmax(bits), q);
                } else if (kind == Kind::kAsym) {
                    quantize_asym(xb, len, p.lo, p.scale, asym_levels(bits), q);
                } else if (kind == Kind::kQr) {
                    quantize_qr(xb, len, p.dscale, bits, q);
                } else {
                    quantize_ds(xb, len, p.dscale, job.format.code_min(), job.format.code_max(), q);
                }
                pack_block(kind, bits, q, len, out);
            }
        }
    }
    return -1;
}

// One step of a block's codes: the codes of x[0..m) (m <= fast::kStep) at factor f (a product when
// as_mul, else a quotient; kMul and kTies as encode_decl_fast's below; w: stochastic rounding's
// words, or none), packed into out, the block's codes from element i0 (a multiple of kStep) on.
// encode_decl_fast and the fused rotated encode both code their blocks with it.
template <ElemType E, Rounding R, bool kTies, bool kAvx>
QT_INLINE void code_step(const Decl& d, const fast::EncodePlan& fp, const float* x, int64_t m, bool as_mul, float f,
                         const uint32_t* w, int32_t* q, uint8_t* c, uint8_t* out) {
    if (m == fast::kStep) {
        if (as_mul) fast::codes_step<E, R, true, kTies, fast::kStep, kAvx>(fp, x, m, f, w, q);
        else fast::codes_step<E, R, false, kTies, fast::kStep, kAvx>(fp, x, m, f, w, q);
    } else {
        std::memset(q, 0, sizeof(int32_t) * fast::kStep);
        if (as_mul) fast::codes_step<E, R, true, kTies, 0, kAvx>(fp, x, m, f, w, q);
        else fast::codes_step<E, R, false, kTies, 0, kAvx>(fp, x, m, f, w, q);
    }
#if defined(__x86_64__)
    if constexpr (kAvx) {
        if (m == fast::kStep && fast::pack_q_avx512(d.bits, d.packing == Packing::kLsbFirst, q, out)) return;
    }
#endif
    fast::narrow_step(q, c);
    if (m == fast::kStep) fast::pack_step<fast::kStep>(d, c, m, out);
    else fast::pack_step<0>(d, c, m, out);
}

// Declared formats without an offset (every built-in but int<b>-asym's declaration): the layout of
// encode_range (chunks of blocks that stay in L1; statistics and scales of a chunk first, with the
// input prefetched, then its codes) around the fast element loops of decl_fast.hpp. E, R: the
// element type and rounding; kMul: the quotient as a product with the exact reciprocal (e8m0 and
// `none` scales); kTies: a table whose ties round up somewhere; kAvx: compiled for AVX-512
// (encode_decl_fast_avx512), with the AVX-512 helpers of decl_fast.hpp. Returns as
// encode_decl_range.
// What the element loops apply to a block of scale s and absmax bits a: the block's multiplier m (the
// scales that multiply), the exact reciprocal 1 / s to multiply by (kMul: power-of-two and `none`
// scales), or s to divide by (1 for s == 0: v is x itself, a zero).
template <bool kMul>
QT_INLINE float block_factor(const Decl& d, const fast::EncodePlan& fp, float s, uint32_t amax_bits) {
    if (fp.amax_mul) return decl_multiplier(d, bits_f32(amax_bits));
    return kMul ? div_rn(1.0f, s) : (s == 0.0f ? 1.0f : s);
}

// decl_plan for a chunk with a non-finite or overflowing block (rare), out of line: inlined, its
// scale switch was compiled into every instantiation of encode_decl_fast.
QT_NOINLINE BlockState plan_rare(const Decl& d, uint32_t amax_bits, float* s, float* lo) {
    float m = 0.0f;  // the element loops take the multiplier from block_factor
    return decl_plan(d, amax_bits, 0.0f, 0.0f, s, lo, &m);
}

template <ElemType E, Rounding R, bool kMul, bool kTies, bool kAvx>
QT_INLINE int64_t encode_decl_fast(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0, int64_t b1) {
    const Decl& d = *job.format.decl;
    const float nan = bits_f32(kQuietNanBits);
    constexpr int64_t kChunkElements = 4096;
    const int64_t chunk = std::clamp<int64_t>(kChunkElements / job.block, 1, 256);
    float scale[256], factor[256];
    uint32_t amax[256];
    bool poisoned[256];
    alignas(64) int32_t q[fast::kStep];
    alignas(64) uint8_t c[fast::kStep];
    alignas(64) uint32_t rb[fast::kStep];
    // Stochastic rounding: a chunk's random words in one call (or, for a chunk of one block longer
    // than this, 32 at a time).
    alignas(64) uint32_t rb_chunk[R == Rounding::kStochastic ? kChunkElements : 1];
    for (int64_t c0 = b0; c0 < b1; c0 += chunk) {
        const int64_t c1 = std::min(b1, c0 + chunk);
        const int64_t chunk_first = c0 * job.block, chunk_n = std::min(c1 * job.block, job.n) - chunk_first;
        const bool whole_chunk_words = chunk_n <= kChunkElements;
        int64_t words_end = chunk_first;  // stochastic rounding: words drawn for [chunk_first, words_end)
        // Pass 1: every block's absmax, then all their scales in one loop (decl_scale_t), and the
        // factor the element loop applies: 1/s (exact, kMul), s, or 1 for s == 0 (v = x, a zero).
        // Stochastic rounding draws the block's words here too: arithmetic that overlaps the wait
        // for the input, which this pass is the first to touch.
        for (int64_t j = c0; j < c1; ++j) {
            const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
            for (int64_t ahead = first + 2048; ahead < std::min(first + 2048 + job.block, job.n); ahead += 16)
                __builtin_prefetch(job.x + ahead);  // 8 KiB ahead, as encode_range
            const Stats st = len == kDefaultBlock ? block_stats(job.x + first, kDefaultBlock, false)
                                                  : block_stats(job.x + first, len, false);
            amax[j - c0] = st.absmax_bits;
            if constexpr (R == Rounding::kStochastic) {
                // the words of this and the next blocks, whole blocks of at least 256 elements at
                // a time: a call's fixed cost spread over enough of them
                if (whole_chunk_words && first >= words_end) {
                    const int64_t blocks = std::max<int64_t>(1, (256 + job.block - 1) / job.block);
                    const int64_t end = std::min(chunk_first + chunk_n, first + blocks * job.block);
                    RoundKey key = job.key;
                    key.index_base += first;
                    fast::round_words(key, end - first, rb_chunk + (first - chunk_first));
                    words_end = end;
                }
            }
        }
        if (fast::chunk_scales(d, amax, c1 - c0, scale)) {
            for (int64_t j = c0; j < c1; ++j) poisoned[j - c0] = false;
        } else {  // some block is not finite or overflows: decide block by block, in order
            for (int64_t j = c0; j < c1; ++j) {
                float s = 0.0f, lo = 0.0f;
                const BlockState state = plan_rare(d, amax[j - c0], &s, &lo);
                poisoned[j - c0] = state != BlockState::kQuantize;
                if (state != BlockState::kQuantize) {
                    if (job.error_policy) return j;  // blocks run in increasing order: the range's lowest
                    if (decl_poison_code(d) < 0) return -2 - j;
                    s = d.scale != ScaleType::kNone ? nan : 1.0f;
                }
                scale[j - c0] = s;
            }
        }
        for (int64_t k = 0; k < c1 - c0; ++k) factor[k] = block_factor<kMul>(d, fp, scale[k], amax[k]);
        std::memcpy(job.scales + c0, scale, static_cast<size_t>(c1 - c0) * sizeof(float));
        for (int64_t j = c0; j < c1; ++j) {
            const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
            const float* xb = job.x + first;
            uint8_t* out = job.codes + j * job.block_bytes;
            if (poisoned[j - c0]) {
                const int32_t pc = decl_poison_code(d);
                std::memset(out, 0, static_cast<size_t>(job.format.code_bytes(len)));
                for (int64_t i = 0; i < len; ++i) decl_pack_one(d, out, i, pc);
                continue;
            }
            // s == 0 (an all-zero block under an absmax scale): v is x itself, a zero of x's sign.
            const bool as_mul = kMul || scale[j - c0] == 0.0f;
            const float f = factor[j - c0];
            for (int64_t i0 = 0; i0 < len; i0 += fast::kStep) {
                const int64_t m = std::min(fast::kStep, len - i0);
                const uint32_t* w = rb;
                if constexpr (R == Rounding::kStochastic) {
                    if (whole_chunk_words) {
                        w = rb_chunk + (first + i0 - chunk_first);
                    } else {
                        RoundKey key = job.key;
                        key.index_base += first + i0;
                        fast::round_words(key, m, rb);
                    }
                }
                code_step<E, R, kTies, kAvx>(d, fp, xb + i0, m, as_mul, f, w, q, c, out + i0 * d.bits / 8);
            }
        }
    }
    return -1;
}

#if defined(__x86_64__)
// Each AVX-512 instantiation of encode_decl_fast is a function of its own, compiled for AVX-512 and
// called once per range. Inlined all into one function (encode_decl_fast_avx512), they made that
// function the build's slowest part: the compilers' passes that grow faster than a function's size
// (clang's domain reassignment and register allocation) took most of codec.cpp's three minutes.
template <ElemType E, Rounding R, bool kMul, bool kTies>
QT_AVX512_WIDE QT_NOINLINE int64_t encode_decl_fast_512(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0,
                                                        int64_t b1) {
    return encode_decl_fast<E, R, kMul, kTies, true>(job, fp, b0, b1);
}
#endif
template <ElemType E, Rounding R, bool kMul, bool kTies, bool kAvx>
QT_INLINE int64_t encode_decl_fast_one(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0, int64_t b1) {
#if defined(__x86_64__)
    if constexpr (kAvx) return encode_decl_fast_512<E, R, kMul, kTies>(job, fp, b0, b1);
    else
#endif
        return encode_decl_fast<E, R, kMul, kTies, kAvx>(job, fp, b0, b1);
}

// Calls encode_decl_fast for d's element type, rounding and scale: one dispatch per range. Plain
// switches, no lambdas: a lambda is a function of its own, compiled for the baseline target unless
// the compiler chooses to inline it into each of encode_decl_range's target clones.
template <ElemType E, bool kTies, bool kAvx>
QT_INLINE int64_t encode_decl_fast_r(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0, int64_t b1) {
#define QT_FAST_CASE(R)                                                                               \
    case R:                                                                                           \
        return fp.mul ? encode_decl_fast_one<E, R, true, kTies, kAvx>(job, fp, b0, b1)                \
                      : encode_decl_fast_one<E, R, false, kTies, kAvx>(job, fp, b0, b1);
    if constexpr (E == ElemType::kTable) {  // the rounding is in the plan's ties
        constexpr Rounding R = Rounding::kNearestEven;
        return fp.mul ? encode_decl_fast_one<E, R, true, kTies, kAvx>(job, fp, b0, b1)
                      : encode_decl_fast_one<E, R, false, kTies, kAvx>(job, fp, b0, b1);
    } else {
        switch (job.format.decl->rounding) {
            QT_FAST_CASE(Rounding::kNearestEven)
            QT_FAST_CASE(Rounding::kNearestAway)
            QT_FAST_CASE(Rounding::kNearestDown)
            QT_FAST_CASE(Rounding::kTowardZero)
            QT_FAST_CASE(Rounding::kStochastic)
        }
    }
#undef QT_FAST_CASE
    return -1;
}
template <bool kAvx>
QT_INLINE int64_t encode_decl_fast_any(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0, int64_t b1) {
    switch (job.format.decl->elem) {
        case ElemType::kFloat: return encode_decl_fast_r<ElemType::kFloat, false, kAvx>(job, fp, b0, b1);
        case ElemType::kInt: return encode_decl_fast_r<ElemType::kInt, false, kAvx>(job, fp, b0, b1);
        default:
            return fp.tp.ties ? encode_decl_fast_r<ElemType::kTable, true, kAvx>(job, fp, b0, b1)
                              : encode_decl_fast_r<ElemType::kTable, false, kAvx>(job, fp, b0, b1);
    }
}

#if defined(__x86_64__)
// The fast loops once more for a CPU with AVX-512, as one function compiled for it with 512-bit
// vectors preferred (GCC's x86-64-v4 tuning prefers 256, and target_clones cannot say otherwise):
// a block of 32 is then two registers wide, and the AVX-512 helpers of decl_fast.hpp (kAvx) are
// used. Chosen at run time (fast::have_avx512()).
bool fused_plain_applies(const EncodeJob& job);
bool encode_plain_fused_avx512(const EncodeJob& job, const fast::EncodePlan& fp, int64_t c0, int64_t c1);
QT_AVX512_WIDE int64_t encode_decl_fast_avx512(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0,
                                               int64_t b1) {
    if (!fused_plain_applies(job)) return encode_decl_fast_any<true>(job, fp, b0, b1);
    // Chunks of 4,096 elements: each in one pass (encode_fused) when its blocks are all full and
    // plain, else by encode_decl_fast, which refuses or poisons as before. Blocks go in increasing
    // order, so the first refusal found is the range's lowest.
    const int64_t per = std::max<int64_t>(8, 4096 / job.block);
    for (int64_t c0 = b0; c0 < b1; c0 += per) {
        const int64_t c1 = std::min(b1, c0 + per);
        if (c1 * job.block <= job.n && encode_plain_fused_avx512(job, fp, c0, c1)) continue;
        if (const int64_t r = encode_decl_fast_any<true>(job, fp, c0, c1); r != -1) return r;
    }
    return -1;
}
#endif

// The fast loops on a CPU without AVX-512 (or not x86-64).
QT_MULTIVERSION_NO512 int64_t encode_decl_fast_baseline(const EncodeJob& job, const fast::EncodePlan& fp, int64_t b0,
                                                        int64_t b1) {
    return encode_decl_fast_any<false>(job, fp, b0, b1);
}

// The low bytes of n int32 codes (8-bit codes): restrict, so that the byte stores, which may alias
// anything, do not keep the loop scalar.
QT_INLINE void narrow_codes(const int32_t* __restrict q, int64_t n, uint8_t* __restrict out) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(q[i]);
}

// Declared formats (docs/FORMATS.md): the fast loops above where they apply (no offset, tables of
// at most 16 values), else the generic element-wise arithmetic of decl_math.hpp, one block at a
// time. Returns the first block refused under the `error` policy, or -1; -2 - j when block j is
// poisoned under `propagate` but the format cannot mark it (scale `none`, no NaN code).
QT_MULTIVERSION int64_t encode_decl_range(const EncodeJob& job, int64_t b0, int64_t b1, int32_t* q) {
    const Decl& d = *job.format.decl;
    if (const fast::EncodePlan fp = fast::encode_plan(d); fp.fast) {
#if defined(__x86_64__)
        if (fast::have_avx512()) return encode_decl_fast_avx512(job, fp, b0, b1);
#endif
        return encode_decl_fast_baseline(job, fp, b0, b1);
    }
    const float nan = bits_f32(kQuietNanBits);
    for (int64_t j = b0; j < b1; ++j) {
        const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
        const float* xb = job.x + first;
        uint8_t* out = job.codes + j * job.block_bytes;
        // the default block's length at compile time: its statistics loop unrolls (as encode_range's)
        const Stats st = len == kDefaultBlock ? block_stats(xb, kDefaultBlock, d.offset_min) : block_stats(xb, len, d.offset_min);
        float s = 0.0f, lo = 0.0f, m = 0.0f;
        const BlockState state = decl_plan(d, st.absmax_bits, from_order_key(st.kmin), from_order_key(st.kmax), &s, &lo, &m);
        std::memset(out, 0, static_cast<size_t>(job.format.code_bytes(len)));
        if (state != BlockState::kQuantize) {
            if (job.error_policy) return j;
            const int32_t pc = decl_poison_code(d);
            if (pc < 0) return -2 - j;
            if (d.scale != ScaleType::kNone) job.scales[j] = nan;
            else job.scales[j] = 1.0f;
            if (d.offset_min) job.offsets[j] = nan;
            for (int64_t i = 0; i < len; ++i) decl_pack_one(d, out, i, pc);
            continue;
        }
        job.scales[j] = s;
        if (d.offset_min) job.offsets[j] = lo;
        RoundKey key = job.key;
        key.index_base += first;
        if (s != 0.0f && d.offset_min && multiplies(d.scale) && d.elem == ElemType::kInt && d.rounding == Rounding::kNearestEven &&
            d.bits == 8) {
            // fp32-eps-mul with an offset (FBGEMM's row-wise INT8): decl_code_t's arithmetic for this case
            // with its per-element tests taken once per block (decl_code_t itself in this loop stays
            // scalar: 0.11 of memcpy), in this function's body (a lambda's loop is not compiled for the
            // clone's target), into int32 codes (a byte store may alias the input, which would keep the
            // loop scalar), then narrowed: loops that vectorize.
            const IntGrid g = int_grid(d);
            for (int64_t i = 0; i < len; ++i) q[i] = int_code<Rounding::kNearestEven>(g, mul_rn(sub_rn(xb[i], lo), m), 0u);
            narrow_codes(q, len, out);
            continue;
        }
        with_decl_kind(d, [&]<ElemType E, Rounding R>() {
            if constexpr (R == Rounding::kStochastic) {
                for (int64_t i = 0; i < len; ++i) q[i] = decl_code_t<E, R>(d, xb[i], s, lo, m, round_bits(key, i));
            } else {
                for (int64_t i = 0; i < len; ++i) q[i] = decl_code_t<E, R>(d, xb[i], s, lo, m, 0u);
            }
        });
        if (d.bits == 8) {
            for (int64_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(q[i]);
        } else if (d.packing == Packing::kLsbFirst) {
            pack_block(Kind::kSym, d.bits, q, len, out);  // NUMERICS 1.4's layout, the canonical packer
        } else if (d.bits == 4) {
            pack_block(Kind::kDs, 4, q, len, out);  // the even element in the high nibble, as ds-int4
        } else {
            for (int64_t i = 0; i < len; ++i) decl_pack_one(d, out, i, q[i]);
        }
    }
    return -1;
}

}  // namespace

// What went wrong in a block, found by a scalar rescan (rare path).
Error describe_block_error(const FormatSpec& f, const float* x, int64_t len, int64_t first, const Site& site) {
    for (int64_t i = 0; i < len; ++i) {
        if (!(std::abs(x[i]) <= kFltMax)) {
            return make_error(ErrorCode::kNonFinite,
                              describe(site, first + i) + ": value " + shortest(x[i]) +
                                  " is not finite (policy 'error' refuses NaN and inf; "
                                  "policy 'propagate' poisons the block instead: qtransit quantize --nonfinite propagate)");
        }
    }
    if (f.kind == FormatKind::kDs || f.kind == FormatKind::kQr) {
        for (int64_t i = 0; i < len; ++i)
            if (std::abs(x[i]) >= 65520.0f)
                return make_error(ErrorCode::kRangeOverflow,
                                  describe(site, first + i) + ": value " + shortest(x[i]) + " overflows binary16 (" +
                                      f.name() + " rounds its input to fp16 first; largest finite is 65504)");
    }
    if (f.rotated()) {
        double sum = 0;
        for (int64_t i = 0; i < len; ++i) sum += std::abs(static_cast<double>(x[i]));
        return make_error(ErrorCode::kRangeOverflow,
                          describe(site, first) + ": block of " + std::to_string(len) + " elements whose magnitudes sum to " +
                              shortest(static_cast<float>(std::min(sum, 3.4e38))) + (sum > 3.4e38 ? " or more" : "") +
                              ": its Hadamard transform passes " + shortest(hadamard_limit(len)) +
                              " (FLT_MAX / 2^(log2 block + 2), what decoding it back needs), or its scale overflows (" +
                              f.name() + " rotates every block before it scales it)");
    }
    if (f.kind == FormatKind::kDecl) {
        const Decl& d = *f.decl;
        float amax = 0.0f;
        for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::abs(x[i]));
        if (d.scale == ScaleType::kE4m3TensorAmax)  // NVFP4 (D58): fl32(s_b T) past FLT_MAX, as TE's dequantize
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, first) + ": block of " + std::to_string(len) + " elements with absmax " + shortest(amax) +
                                  " has E4M3 scale " + shortest(nvfp4_block_scale(d, amax)) + ", and its decode factor fl32(s_b T) with the "
                                  "tensor amax T = " + shortest(d.tensor_amax) + " overflows binary32 (" + f.name() +
                                  ": a tensor amax above FLT_MAX / 448 can)");
        if (!d.offset_min) {
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, first) + ": block of " + std::to_string(len) + " elements with absmax " +
                                  shortest(amax) + " needs a scale absmax / " + shortest(d.amp) + " that overflows " +
                                  (d.scale == ScaleType::kFp16Absmax ? "binary16" : "binary32") + " (" + f.name() + ")");
        }
    }
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < len; ++i) {
        if (order_key(x[i]) < order_key(lo)) lo = x[i];
        if (order_key(x[i]) > order_key(hi)) hi = x[i];
    }
    return make_error(ErrorCode::kRangeOverflow,
                      describe(site, first) + ": block of " + std::to_string(len) + " elements has range hi - lo = " +
                          shortest(hi) + " - " + shortest(lo) + " that overflows binary32 (" + f.name() + ")");
}

namespace {
RoundKey round_key(const CodecOptions& o) {
    RoundKey k;
    k.seed = o.seed;
    k.rank_word = o.site.rank < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(o.site.rank);
    k.hop = o.hop;
    k.index_base = o.site.index_base;
    return k;
}
}  // namespace
Error unmarkable_poison_error(const FormatSpec& f, int64_t first, const Site& site) {
    return make_error(ErrorCode::kNonFinite,
                      describe(site, first) + ": the block is not finite and " + f.name() +
                          " cannot mark a poisoned block (scale 'none' and no NaN code); use --nonfinite error");
}

Status refusal_of_flag(const FormatSpec& f, uint64_t flag, const float* x, int64_t n, int64_t block,
                       const CodecOptions& options) {
    if (flag == ~uint64_t{0}) return Status::Ok();
    if (block < 1 || flag >= static_cast<uint64_t>((n + block - 1) / block))
        return make_error(ErrorCode::kInternal, "internal error: a device encode refused block " + std::to_string(flag) +
                                                    " of a tensor of " + std::to_string(n) + " elements in blocks of " +
                                                    std::to_string(block));
    const int64_t first = static_cast<int64_t>(flag) * block;
    if (options.policy != Nonfinite::kError) return unmarkable_poison_error(f, first, options.site);
    return describe_block_error(f, x + first, std::min(block, n - first), first, options.site);
}

int32_t unpack_code(const FormatSpec& f, const uint8_t* block_bytes, int64_t i) {
    if (f.kind == FormatKind::kDecl) return decl_unpack(*f.decl, block_bytes, i);
    return unpack_one(kind_of(f), f.bits, block_bytes, i);
}

QT_MULTIVERSION void unpack_block_codes(const FormatSpec& f, const uint8_t* block_bytes, int64_t n, int32_t* out) {
    if (f.kind == FormatKind::kDecl) {
        for (int64_t i = 0; i < n; ++i) out[i] = decl_unpack(*f.decl, block_bytes, i);
        return;
    }
    const Kind k = kind_of(f);
    const int bits = f.bits;
    switch (k) {  // one loop per kind (unpack_one's tests of kind out of the loop)
        case Kind::kSym:
            for (int64_t i = 0; i < n; ++i) out[i] = unpack_one(Kind::kSym, bits, block_bytes, i);
            break;
        case Kind::kAsym:
            for (int64_t i = 0; i < n; ++i) out[i] = unpack_one(Kind::kAsym, bits, block_bytes, i);
            break;
        default:
            for (int64_t i = 0; i < n; ++i) out[i] = unpack_one(k, bits, block_bytes, i);
            break;
    }
}

Status validate_block(int64_t block) {
    if (block < 1)
        return make_error(ErrorCode::kInvalidArgument,
                          "block size must be a positive integer, got " + std::to_string(block));
    if (block > kMaxBlock)
        return make_error(ErrorCode::kInvalidArgument,
                          "block size " + std::to_string(block) + " is past the limit of 2^30 = " + std::to_string(kMaxBlock));
    return Status::Ok();
}

EncodedSizes encoded_sizes(const FormatSpec& format, int64_t elements, int64_t block) {
    EncodedSizes s;
    if (block < 1 || elements <= 0) return s;
    s.blocks = (elements + block - 1) / block;
    const int64_t full = elements / block, tail = elements % block;
    s.code_bytes = full * format.code_bytes(block) + (tail ? format.code_bytes(tail) : 0);
    s.offsets = format.has_offset() ? s.blocks : 0;
    return s;
}

EncodedTensor sized_encoded(const FormatSpec& format, int64_t elements, int64_t block) {
    EncodedTensor t;
    t.format = format;
    t.block = block;
    t.elements = elements;
    const EncodedSizes sz = encoded_sizes(format, elements, block);
    t.codes.resize(static_cast<size_t>(sz.code_bytes));
    t.scales.resize(static_cast<size_t>(sz.blocks));
    t.offsets.resize(static_cast<size_t>(sz.offsets));
    return t;
}

namespace {
// encode_into's output buffers against encoded_sizes().
Status check_output_sizes(const EncodedSizes& sz, std::span<uint8_t> codes, std::span<float> scales, std::span<float> offsets) {
    if (static_cast<int64_t>(codes.size()) != sz.code_bytes || static_cast<int64_t>(scales.size()) != sz.blocks ||
        static_cast<int64_t>(offsets.size()) != sz.offsets)
        return make_error(ErrorCode::kInvalidArgument, "encode_into: output buffers do not match encoded_sizes()");
    return Status::Ok();
}

std::atomic<bool> g_declared_twins{true};

// int<b> for b = 2, 3, 5, 6 and 7, with AVX-512: its declaration (declaration_of) as a declared
// format of the same name, which computes the same bits (scales, codes, poisoned blocks, decoded
// values: DeclKernel.IntDeclarationsReproduceTheHandWrittenKernels, and
// Kernels.HandWrittenIntEqualsItsDeclaredTwin under both policies), run by the declared kernels'
// register steps. The hand-written loops of those widths, one element at a time, measured 0.25
// to 0.35 of memcpy on one thread. nullptr: the format's own kernels (int4 and int8 have
// hand-written AVX-512 ones).
const FormatSpec* declared_twin(const FormatSpec& f) {
#if defined(__x86_64__)
    if (f.kind != FormatKind::kSym || f.bits < 2 || f.bits > 7 || f.bits == 4 || !fast::have_avx512() ||
        !g_declared_twins.load(std::memory_order_relaxed))
        return nullptr;
    static const std::array<FormatSpec, 8> twins = [] {
        std::array<FormatSpec, 8> t{};
        for (int b : {2, 3, 5, 6, 7}) {
            const FormatSpec hand(FormatKind::kSym, b);
            const Result<Decl> d = declaration_of(hand);
            if (d.ok()) t[static_cast<size_t>(b)] = make_declared(hand.name(), *d);
        }
        return t;
    }();
    const FormatSpec& t = twins[static_cast<size_t>(f.bits)];
    return t.kind == FormatKind::kDecl ? &t : nullptr;
#else
    (void)f;
    return nullptr;
#endif
}

Status encode_into_plain(const FormatSpec& hand, std::span<const float> x, int64_t block, std::span<uint8_t> codes,
                         std::span<float> scales, std::span<float> offsets, const CodecOptions& options) {
    // The kernels run `format`; errors name `hand`, the caller's (the same message for a twin).
    const FormatSpec* twin = declared_twin(hand);
    const FormatSpec& format = twin != nullptr ? *twin : hand;
    const int64_t n = static_cast<int64_t>(x.size());
    const EncodedSizes sz = encoded_sizes(format, n, block);
    if (auto st = check_output_sizes(sz, codes, scales, offsets); !st) return st;

    const Kind kind = kind_of(format);
    const int bits = format.bits;
    const int64_t block_bytes = format.code_bytes(block);
    const bool error_policy = options.policy == Nonfinite::kError;
    const int threads = pick_threads(options.threads, n);
    std::vector<int64_t> first_bad(static_cast<size_t>(std::max(threads, 1)), -1);

    EncodeJob job{kind, bits, format, x.data(), n, block, block_bytes, codes.data(), scales.data(),
                  offsets.data(), error_policy};
    job.key = round_key(options);
    parallel_blocks(sz.blocks, threads, [&](int t, int64_t b0, int64_t b1) {
        if (kind == Kind::kDecl) {
            std::vector<int32_t> q(static_cast<size_t>(std::min(block, n)));
            first_bad[static_cast<size_t>(t)] = encode_decl_range(job, b0, b1, q.data());
            return;
        }
        std::vector<int32_t> q(static_cast<size_t>(std::min(block, n)));
        first_bad[static_cast<size_t>(t)] = encode_range(job, b0, b1, q.data());
    });

    int64_t worst = -1;
    for (int64_t b : first_bad) {
        if (b < -1) b = -2 - b;  // unmarkable poison: reported as the block's error
        if (b >= 0 && (worst < 0 || b < worst)) worst = b;
    }
    if (worst >= 0) {
        if (kind == Kind::kDecl && !error_policy)
            return unmarkable_poison_error(hand, worst * block, options.site);
        const int64_t first = worst * block;
        return describe_block_error(hand, x.data() + first, std::min(block, n - first), first, options.site);
    }
    return Status::Ok();
}

Status encode_block_plain(const FormatSpec& format, const float* x, int64_t len, uint8_t* codes, float* scale,
                          float* offset, const CodecOptions& options) {
    thread_local std::vector<int32_t> q;
    if (static_cast<int64_t>(q.size()) < len) q.resize(static_cast<size_t>(len));
    float lo = 0.0f;
    EncodeJob job{kind_of(format), format.bits, format, x, len, len, format.code_bytes(len), codes, scale,
                  format.has_offset() ? offset : &lo, options.policy == Nonfinite::kError};
    if (job.kind == Kind::kDecl) {
        job.key = round_key(options);
        const int64_t r = encode_decl_range(job, 0, 1, q.data());
        if (r == 0) return describe_block_error(format, x, len, 0, options.site);
        if (r < -1) return unmarkable_poison_error(format, 0, options.site);
        return Status::Ok();
    }
    if (encode_range(job, 0, 1, q.data()) >= 0) return describe_block_error(format, x, len, 0, options.site);
    return Status::Ok();
}

// rotate_range's loops (below), one block at a time; *overflow is only ever lowered from -1.
QT_INLINE void rotate_range_scalar(const FormatSpec& format, const float* x, int64_t n, int64_t block,
                                   const CodecOptions& options, int64_t b0, int64_t b1, float* out, int64_t* overflow) {
    const bool signs = format.decl->random_signs;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t j = b0; j < b1; ++j) {
        const int64_t first = j * block, len = std::min(block, n - first);
        float* v = out + (first - b0 * block);
        const float* in = x + first;
        int bad = 0;  // branch-free tests: the loops vectorize
        for (int64_t i = 0; i < len; ++i) {
            v[i] = in[i];
            bad |= std::abs(in[i]) <= kFltMax ? 0 : 1;
        }
        if (bad) {
            if (options.policy == Nonfinite::kPropagate) std::fill(v, v + len, nan);
            continue;
        }
        hadamard_forward(v, len, signs, SignKey{options.seed, options.site.index_base + first});
        const float limit = hadamard_limit(len);
        int over = 0;
        for (int64_t i = 0; i < len; ++i) over |= std::abs(v[i]) <= limit ? 0 : 1;
        if (!over) continue;
        if (options.policy == Nonfinite::kPropagate) std::fill(v, v + len, nan);
        else if (*overflow < 0) *overflow = first;
    }
}

#if defined(__x86_64__)
// Calls f with std::integral_constant<int, R> for a block of 16 R elements that the AVX-512 rotation
// takes (16, 32, 64, 128); false for any other block.
template <class F>
bool with_rotation_registers(int64_t block, F&& f) {
    switch (block) {
        case 16: f(std::integral_constant<int, 1>{}); return true;
        case 32: f(std::integral_constant<int, 2>{}); return true;
        case 64: f(std::integral_constant<int, 4>{}); return true;
        case 128: f(std::integral_constant<int, 8>{}); return true;
        default: return false;
    }
}

// rotate_range's full blocks [b0, b1) of 16 R elements on a CPU with AVX-512, eight at a time.
template <int R>
QT_AVX512_ROT void rotate_full_avx512(const float* x, bool signs, const CodecOptions& options, int64_t b0, int64_t b1,
                                      float* out, int64_t* overflow) {
    constexpr int64_t block = 16 * R;
    const bool propagate = options.policy == Nonfinite::kPropagate;
    for (int64_t j = b0; j < b1; j += 8) {
        const int count = static_cast<int>(std::min<int64_t>(8, b1 - j));
        const int64_t first = j * block;
        const unsigned over = fast::rotate8_avx512<R>(x + first, out + (first - b0 * block), count, signs, propagate,
                                                      options.seed, options.site.index_base + first);
        if (over && !propagate && *overflow < 0) *overflow = first + static_cast<int64_t>(__builtin_ctz(over)) * block;
    }
}

// unrotate_blocks' full blocks [b0, b1) of 16 R elements on a CPU with AVX-512, eight at a time.
template <int R>
QT_AVX512_ROT void unrotate_full_avx512(float* out, const float* scales, bool signs, const SignKey& key, int64_t b0,
                                        int64_t b1) {
    constexpr int64_t block = 16 * R;
    for (int64_t j = b0; j < b1; j += 8)
        fast::unrotate8_avx512<R>(out + j * block, scales + j, static_cast<int>(std::min<int64_t>(8, b1 - j)), signs,
                                  key.seed, key.first + j * block);
}

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's _mm512_reduce_max_epu32 starts from an undefined register (as in decl_fast.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Tests only (codec.hpp): false sends encode through the unfused paths.
std::atomic<bool> g_fused_encode{true};

// Encode fused with the declared formats' fast loops (issue 16), on a CPU with AVX-512: the full
// blocks [c0, c1) of 16 R elements of x, eight at a time, each loaded into registers once, its
// absmax taken there, then the eight scales in one call (chunk_scales) and the codes with
// encode_decl_fast's own element and packing steps.
// - kRot (a rotated format): each block is rotated in the registers (rotate8_avx512's loads,
//   checks, signs and butterflies) and stored to a 4 KiB buffer on the stack, which the codes read:
//   the same bits as rotate_range then encode_blocks_from, one pass over x instead of a rotation
//   into a buffer and two more passes over it.
// - !kRot (a plain one): the codes read the eight blocks again from x, now in L1, and stochastic
//   rounding draws the eight blocks' words (round_words) between the loads and the codes: one pass
//   over x where encode_decl_fast makes two over 16 KiB chunks (its statistics, then its codes), so
//   the arithmetic overlaps the loads of the next blocks.
// false, with the chunk maybe partly written, when a block is not plain (a non-finite value, a
// rotation past hadamard_limit, a scale that overflows): the caller encodes the chunk again the
// unfused way, which refuses or poisons it as before.
template <ElemType E, Rounding R, bool kMul, int Rr, bool kRot>
QT_AVX512_WIDE bool encode_fused(const EncodeJob& job, const fast::EncodePlan& fp, bool signs, uint64_t seed,
                                 int64_t index_base, int64_t c0, int64_t c1) {
    static_assert(!(kRot && R == Rounding::kStochastic) && E != ElemType::kTable);
    constexpr int64_t block = 16 * Rr;
    const Decl& d = *job.format.decl;
    const __m512i limit_bits = _mm512_set1_epi32(static_cast<int>(f32_bits(hadamard_limit(block))));
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    __m512i mk[8];
    alignas(64) float y[kRot ? 8 * block : 1];
    alignas(64) uint32_t rw[R == Rounding::kStochastic ? 8 * block : 1];
    fast::RoundKeys512 rk;  // stochastic rounding's keys, made once for every batch of words
    if constexpr (R == Rounding::kStochastic) rk = fast::round_keys512(job.key);
    alignas(64) int32_t q[fast::kStep];
    alignas(64) uint8_t c[fast::kStep];
    const bool lsb = d.packing == Packing::kLsbFirst;
    const fast::IntRegs ig = fast::int_regs(fp.ig);
    const fast::FloatRegs fg = fast::float_regs(fp.fg);
    uint32_t amax[8];
    float scale[8];
    for (int64_t j0 = c0; j0 < c1; j0 += 8) {
        const int count = static_cast<int>(std::min<int64_t>(8, c1 - j0));
        const int64_t first0 = j0 * block;
        uint32_t words[4][8];
        if (kRot && signs) fast::sign_words8_avx512(seed, index_base + first0, block, words);
        for (int k = 0; k < count; ++k) {
            __m512 v[Rr];
            const float* xb = job.x + first0 + k * block;
            for (int r = 0; r < Rr; ++r) v[r] = _mm512_loadu_ps(xb + 16 * r);
            for (int r = 0; r < Rr; ++r) __builtin_prefetch(xb + 2048 + 16 * r);  // 8 KiB ahead, as encode_decl_fast
            if (!fast::all_within<Rr>(v, kFltMax)) return false;
            if constexpr (kRot) {
                if (signs) fast::apply_signs_regs<Rr>(v, words, k);
                fast::fwht_regs<Rr>(v);
            }
            // lane-wise |v| as bits: |v| <= limit exactly when its bits are <= the limit's (a NaN's
            // are above)
            __m512i m = _mm512_and_si512(_mm512_castps_si512(v[0]), magnitude);
            for (int r = 1; r < Rr; ++r) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_castps_si512(v[r]), magnitude));
            if (kRot && _mm512_cmpgt_epu32_mask(m, limit_bits)) return false;
            mk[k] = m;
            if constexpr (kRot)
                for (int r = 0; r < Rr; ++r) _mm512_store_ps(y + k * block + 16 * r, v[r]);
        }
        for (int k = count; k < 8; ++k) mk[k] = _mm512_setzero_si512();
        // The eight blocks' absmax bits: the lane maxima of mk[0..8) reduced together (halves of
        // pairs, then quarters, then lanes), amax[k] from mk[k].
        __m512i a[4], b[2];
        for (int t = 0; t < 4; ++t)  // lanes 0-7: mk[2t]'s halves' maxima, 8-15: mk[2t + 1]'s
            a[t] = _mm512_max_epu32(_mm512_shuffle_i32x4(mk[2 * t], mk[2 * t + 1], 0x44),
                                    _mm512_shuffle_i32x4(mk[2 * t], mk[2 * t + 1], 0xEE));
        for (int t = 0; t < 2; ++t)  // four lanes per block: mk[4t], mk[4t + 1], mk[4t + 2], mk[4t + 3]
            b[t] = _mm512_max_epu32(_mm512_shuffle_i32x4(a[2 * t], a[2 * t + 1], 0x88),
                                    _mm512_shuffle_i32x4(a[2 * t], a[2 * t + 1], 0xDD));
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        const __m512i c2 = _mm512_max_epu32(_mm512_permutex2var_epi32(b[0], even, b[1]),
                                            _mm512_permutex2var_epi32(b[0], odd, b[1]));  // two lanes per block
        const __m512i c1 = _mm512_max_epu32(_mm512_permutexvar_epi32(even, c2), _mm512_permutexvar_epi32(odd, c2));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(amax), _mm512_castsi512_si256(c1));
        float fac[8];  // the blocks' multipliers, for the blocks of 16 below
        if (d.scale == ScaleType::kE4m3TensorAmax) {  // every value finite (all_within); a decode factor can overflow
            __m512 sv, mv;
            fast::nvfp4_scales_avx512(d, c1, sv, mv);
            if (_mm512_mask_cmpeq_epi32_mask(0xFF, _mm512_castps_si512(sv), _mm512_set1_epi32(static_cast<int>(kInfBits))))
                return false;  // the unfused loops refuse or poison it
            _mm256_storeu_ps(scale, _mm512_castps512_ps256(sv));
            _mm256_storeu_ps(fac, _mm512_castps512_ps256(mv));
        } else if (!fast::chunk_scales(d, amax, count, scale)) {
            return false;
        }
        std::memcpy(job.scales + j0, scale, static_cast<size_t>(count) * sizeof(float));
        if constexpr (R == Rounding::kStochastic)  // the words of the eight blocks' elements
            fast::round_words_keyed(rk, job.key.index_base + first0, count * block, rw);
        if constexpr (E != ElemType::kTable && Rr == 2) {
            // A block of 32 int or float elements is one step: its codes computed and packed in registers
            // (int_codes16_avx512 or float_codes16_avx512, then pack_regs_avx512), never staged in
            // memory: in cache, 7-9% off the int -sr encodes, 13% off fp8-e4m3-sr, 22% off fp8-e4m3
            // and the MX formats (bench/RESULTS.md, 2026-12-04). The msb-first widths the register
            // packer does not take go through the byte packer, as code_step's.
            for (int k = 0; k < count; ++k) {
                const float s = scale[k];
                // as below: s == 0 makes v the value itself (x / 1)
                const __m512 f = _mm512_set1_ps(block_factor<kMul>(d, fp, s, amax[k]));
                const float* yb = kRot ? y + k * block : job.x + first0 + k * block;
                uint8_t* out = job.codes + (j0 + k) * job.block_bytes;
                __m512i qr[2];
                for (int r = 0; r < 2; ++r) {
                    const __m512 xv = _mm512_loadu_ps(yb + 16 * r);
                    const __m512 v = kMul ? _mm512_mul_ps(xv, f) : _mm512_div_ps(xv, f);
                    const uint32_t* w = R == Rounding::kStochastic ? rw + k * block + 16 * r : nullptr;
                    if constexpr (E == ElemType::kInt) qr[r] = fast::int_codes16_avx512<R>(ig, v, w);
                    else qr[r] = fast::float_codes16_avx512<R>(fg, v, w);
                }
                if (fast::pack_regs_avx512(d.bits, lsb, qr[0], qr[1], out)) continue;
                _mm512_store_si512(q, qr[0]);
                _mm512_store_si512(q + 16, qr[1]);
                fast::narrow_step(q, c);
                fast::pack_step<fast::kStep>(d, c, fast::kStep, out);
            }
            continue;
        }
        // Blocks of 16 (NVFP4's; any declared format at --block 16) two at a time, the same way: a block's
        // codes fill whole bytes (16 b bits), so two neighbours' packed codes are the 32 codes packed
        // together. NVFP4's multipliers came with its scales (fast::nvfp4_scales_avx512).
        int k_done = 0;
        if constexpr (E != ElemType::kTable && Rr == 1) {
            if (d.scale != ScaleType::kE4m3TensorAmax)
                for (int k = 0; k < count; ++k) fac[k] = block_factor<kMul>(d, fp, scale[k], amax[k]);
            for (; k_done + 1 < count; k_done += 2) {
                __m512i qr[2];
                for (int r = 0; r < 2; ++r) {
                    const int k = k_done + r;
                    const __m512 f = _mm512_set1_ps(fac[k]);  // s == 0 (not kMul): 1, v = x itself
                    const __m512 xv = _mm512_loadu_ps(kRot ? y + k * block : job.x + first0 + k * block);
                    const __m512 v = kMul ? _mm512_mul_ps(xv, f) : _mm512_div_ps(xv, f);
                    const uint32_t* w = R == Rounding::kStochastic ? rw + k * block : nullptr;
                    if constexpr (E == ElemType::kInt) qr[r] = fast::int_codes16_avx512<R>(ig, v, w);
                    else qr[r] = fast::float_codes16_avx512<R>(fg, v, w);
                }
                uint8_t* out = job.codes + (j0 + k_done) * job.block_bytes;
                if (fast::pack_regs_avx512(d.bits, lsb, qr[0], qr[1], out)) continue;
                _mm512_store_si512(q, qr[0]);
                _mm512_store_si512(q + 16, qr[1]);
                fast::narrow_step(q, c);
                fast::pack_step<fast::kStep>(d, c, fast::kStep, out);
            }
        }
        for (int k = k_done; k < count; ++k) {
            // as encode_decl_fast: s == 0 (an all-zero block) makes v the value itself
            const float s = scale[k];
            const bool as_mul = kMul || s == 0.0f;
            const float f = block_factor<kMul>(d, fp, s, amax[k]);
            const float* yb = kRot ? y + k * block : job.x + first0 + k * block;
            uint8_t* out = job.codes + (j0 + k) * job.block_bytes;
            for (int64_t i0 = 0; i0 < block; i0 += fast::kStep)  // a block of 16: half a step
                code_step<E, R, false, true>(d, fp, yb + i0, std::min<int64_t>(block, fast::kStep), as_mul, f,
                                             R == Rounding::kStochastic ? rw + k * block + i0 : nullptr, q, c,
                                             out + i0 * d.bits / 8);
        }
    }
    return true;
}

template <ElemType E, Rounding R, bool kMul, bool kRot>
QT_AVX512_WIDE bool encode_fused_regs(const EncodeJob& job, const fast::EncodePlan& fp, bool signs, uint64_t seed,
                                      int64_t index_base, int64_t c0, int64_t c1) {
    switch (job.block) {
        case 16: return encode_fused<E, R, kMul, 1, kRot>(job, fp, signs, seed, index_base, c0, c1);
        case 32: return encode_fused<E, R, kMul, 2, kRot>(job, fp, signs, seed, index_base, c0, c1);
        case 64: return encode_fused<E, R, kMul, 4, kRot>(job, fp, signs, seed, index_base, c0, c1);
        case 128: return encode_fused<E, R, kMul, 8, kRot>(job, fp, signs, seed, index_base, c0, c1);
        default: return false;
    }
}
template <ElemType E, bool kRot>
QT_AVX512_WIDE bool encode_fused_e(const EncodeJob& job, const fast::EncodePlan& fp, bool signs, uint64_t seed,
                                   int64_t index_base, int64_t c0, int64_t c1) {
#define QT_FUSED_CASE(R)                                                                                    \
    case R:                                                                                                 \
        return fp.mul ? encode_fused_regs<E, R, true, kRot>(job, fp, signs, seed, index_base, c0, c1)      \
                      : encode_fused_regs<E, R, false, kRot>(job, fp, signs, seed, index_base, c0, c1);
    switch (job.format.decl->rounding) {
        QT_FUSED_CASE(Rounding::kNearestEven)
        QT_FUSED_CASE(Rounding::kNearestAway)
        QT_FUSED_CASE(Rounding::kNearestDown)
        QT_FUSED_CASE(Rounding::kTowardZero)
        case Rounding::kStochastic:  // a rotated format's stochastic rounding: the unfused path
            if constexpr (kRot) return false;
            else return fp.mul ? encode_fused_regs<E, Rounding::kStochastic, true, false>(job, fp, signs, seed, index_base, c0, c1)
                               : encode_fused_regs<E, Rounding::kStochastic, false, false>(job, fp, signs, seed, index_base, c0, c1);
    }
#undef QT_FUSED_CASE
    return false;
}

// Whether encode_rotated_fused_avx512 takes a rotated format's blocks: AVX-512, blocks of 16 to 128
// elements, a format of the fast loops with int or float elements and a rounding that draws no
// random words.
// The shapes encode_fused takes (both of its callers): blocks of 16 to 128 elements (one to eight
// registers), int or float elements, unless a test turned it off.
bool fused_shape(int64_t block, ElemType e) {
    if (!g_fused_encode.load(std::memory_order_relaxed)) return false;
    if (block != 16 && block != 32 && block != 64 && block != 128) return false;
    return e == ElemType::kInt || e == ElemType::kFloat;
}
bool fused_rotation_applies(const FormatSpec& format, int64_t block) {
    if (!fast::have_avx512()) return false;
    const Decl& d = *format.decl;
    if (!fused_shape(block, d.elem)) return false;
    return d.rounding != Rounding::kStochastic && fast::encode_plan(d).fast;
}

// The full blocks [c0, c1) of a rotated tensor, rotated and encoded in one pass (job.x: the caller's
// values, job.codes and job.scales: the whole tensor's), compiled for AVX-512 with 512-bit vectors
// as encode_decl_fast_avx512. Returns as encode_fused.
QT_AVX512_WIDE bool encode_rotated_fused_avx512(const EncodeJob& job, const fast::EncodePlan& fp, uint64_t seed,
                                                int64_t index_base, int64_t c0, int64_t c1) {
    const bool signs = job.format.decl->random_signs;
    if (job.format.decl->elem == ElemType::kInt)
        return encode_fused_e<ElemType::kInt, true>(job, fp, signs, seed, index_base, c0, c1);
    return encode_fused_e<ElemType::kFloat, true>(job, fp, signs, seed, index_base, c0, c1);
}
// Whether encode_decl_fast_avx512 sends a plain declared format's blocks through encode_fused: blocks
// of 16 to 128 elements, int or float elements (encode_decl_fast_avx512 is called only for a format
// of the fast loops, on a CPU with AVX-512).
bool fused_plain_applies(const EncodeJob& job) { return fused_shape(job.block, job.format.decl->elem); }

// The full blocks [c0, c1) of a plain declared format in one pass. Returns as encode_fused.
QT_AVX512_WIDE bool encode_plain_fused_avx512(const EncodeJob& job, const fast::EncodePlan& fp, int64_t c0, int64_t c1) {
    if (job.format.decl->elem == ElemType::kInt) return encode_fused_e<ElemType::kInt, false>(job, fp, false, 0, 0, c0, c1);
    return encode_fused_e<ElemType::kFloat, false>(job, fp, false, 0, 0, c0, c1);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// A rotated format's blocks [b0, b1), rotated (FORMATS.md section 9): out[i] is element b0 block + i
// of x, each block (the last one maybe short) negated by its signs and transformed. A block with a
// non-finite value stays as it is under `error` (encode names it from x) and becomes NaN under
// `propagate` (poisoned); one whose rotation passes hadamard_limit is refused under `error` (the
// index of its first element in the tensor in *overflow, the lowest of the range) and poisoned
// under `propagate`.
// Compiled for AVX-512, AVX2 and baseline x86-64 (the butterflies and the checks are plain loops
// over a block; every version computes the same fl32 adds and subtracts); on a CPU with AVX-512 the
// full blocks of 16 to 128 elements go through hadamard_avx512.hpp's registers instead.
QT_MULTIVERSION void rotate_range(const FormatSpec& format, const float* x, int64_t n, int64_t block, const CodecOptions& options,
                                  int64_t b0, int64_t b1, float* out, int64_t* overflow) {
    *overflow = -1;
#if defined(__x86_64__)
    if (fast::have_avx512()) {
        const int64_t full_end = std::clamp(n / block, b0, b1);  // a short last block is left to the loops below
        const bool signs = format.decl->random_signs;
        if (with_rotation_registers(block, [&](auto r) {
                rotate_full_avx512<decltype(r)::value>(x, signs, options, b0, full_end, out, overflow);
            })) {
            rotate_range_scalar(format, x, n, block, options, full_end, b1, out + (full_end - b0) * block, overflow);
            return;
        }
    }
#endif
    rotate_range_scalar(format, x, n, block, options, b0, b1, out, overflow);
}

// The whole tensor rotated into y (rotate_range over every block).
void rotate_blocks(const FormatSpec& format, std::span<const float> x, int64_t block, const CodecOptions& options,
                   std::vector<float>& y, int64_t* overflow) {
    const int64_t n = static_cast<int64_t>(x.size());
    y.resize(x.size());
    rotate_range(format, x.data(), n, block, options, 0, (n + block - 1) / block, y.data(), overflow);
}

// Blocks [c0, c1) of a tensor of n elements encoded from xs, which holds exactly their values (rotated
// ones), into the tensor's codes, scales and offsets. Returns as encode_range and encode_decl_range
// do, with the blocks numbered in the whole tensor.
int64_t encode_blocks_from(const FormatSpec& format, const float* xs, int64_t n, int64_t block, int64_t c0, int64_t c1,
                           uint8_t* codes, float* scales, float* offsets, const CodecOptions& options, int32_t* q) {
    const int64_t first = c0 * block, block_bytes = format.code_bytes(block);
    EncodeJob job{kind_of(format), format.bits, format, xs, std::min(c1 * block, n) - first, block, block_bytes,
                  codes + c0 * block_bytes, scales + c0, format.has_offset() ? offsets + c0 : offsets,
                  options.policy == Nonfinite::kError};
    CodecOptions here = options;
    here.site.index_base += first;
    job.key = round_key(here);
    const int64_t r = job.kind == Kind::kDecl ? encode_decl_range(job, 0, c1 - c0, q) : encode_range(job, 0, c1 - c0, q);
    if (r >= 0) return r + c0;
    if (r < -1) return -2 - (-2 - r + c0);
    return -1;
}

// How many blocks a thread rotates before it encodes them (or decodes before it rotates them
// back): 4,096 elements (16 KiB), so that the rotated values are read again from L1 instead of from
// memory; one block when a block is larger.
constexpr int64_t kRotateChunkElements = 4096;
int64_t rotate_chunk_blocks(int64_t block) { return std::max<int64_t>(1, kRotateChunkElements / block); }
}  // namespace

void set_declared_twins(bool on) { g_declared_twins.store(on, std::memory_order_relaxed); }

void set_fused_encode(bool on) {
#if defined(__x86_64__)
    g_fused_encode.store(on, std::memory_order_relaxed);
#else
    (void)on;
#endif
}

Status encode_into(const FormatSpec& format, std::span<const float> x, int64_t block, std::span<uint8_t> codes,
                   std::span<float> scales, std::span<float> offsets, const CodecOptions& options) {
    if (auto st = format.check_block(block); !st) return st;
    if (!format.rotated()) return encode_into_plain(format, x, block, codes, scales, offsets, options);
    const int64_t n = static_cast<int64_t>(x.size());
    if (auto st = format.check_tensor(n, block); !st) return st;
    const EncodedSizes sz = encoded_sizes(format, n, block);
    if (auto st = check_output_sizes(sz, codes, scales, offsets); !st) return st;
    // Each thread rotates its blocks a chunk at a time and encodes the chunk while it is in cache. A
    // chunk that cannot be encoded (a refused or unmarkable block) stops the thread; the whole tensor
    // is then encoded again below, which finds the first such block of the tensor and says why.
    const int threads = pick_threads(options.threads, n);
    std::vector<char> stopped(static_cast<size_t>(std::max(threads, 1)), 0);
    parallel_blocks(sz.blocks, threads, [&](int t, int64_t b0, int64_t b1) {
        const int64_t per = rotate_chunk_blocks(block);
        std::vector<float> buf(static_cast<size_t>(std::min(per * block, n)));
        std::vector<int32_t> q(static_cast<size_t>(std::min(block, n)));
#if defined(__x86_64__)
        const bool fused = fused_rotation_applies(format, block);
        const fast::EncodePlan fp = fused ? fast::encode_plan(*format.decl) : fast::EncodePlan{};
        EncodeJob job{Kind::kDecl, format.bits, format, x.data(), n, block, format.code_bytes(block), codes.data(),
                      scales.data(), offsets.data(), options.policy == Nonfinite::kError};
#endif
        for (int64_t c0 = b0; c0 < b1; c0 += per) {
            const int64_t c1 = std::min(b1, c0 + per);
#if defined(__x86_64__)
            // every block of the chunk full and plain: rotated and encoded in one pass
            if (fused && c1 * block <= n &&
                encode_rotated_fused_avx512(job, fp, options.seed, options.site.index_base, c0, c1))
                continue;
#endif
            int64_t overflow = -1;
            rotate_range(format, x.data(), n, block, options, c0, c1, buf.data(), &overflow);
            if (overflow >= 0 || encode_blocks_from(format, buf.data(), n, block, c0, c1, codes.data(), scales.data(),
                                                    offsets.data(), options, q.data()) != -1) {
                stopped[static_cast<size_t>(t)] = 1;
                return;
            }
        }
    });
    if (std::find(stopped.begin(), stopped.end(), 1) == stopped.end()) return Status::Ok();

    thread_local std::vector<float> y;
    int64_t overflow = -1;
    rotate_blocks(format, x, block, options, y, &overflow);
    Status st = encode_into_plain(format, y, block, codes, scales, offsets, options);
    if (st && overflow < 0) return Status::Ok();
    // The first refused block, described from the values the caller gave: a non-finite value, a
    // rotation past the limit, or a rotated block whose scale overflows.
    thread_local std::vector<uint8_t> scratch;
    for (int64_t b0 = 0; b0 < n; b0 += block) {
        const int64_t len = std::min(block, n - b0);
        bool bad = overflow == b0;
        for (int64_t i = 0; i < len && !bad; ++i) bad = !(std::abs(x[static_cast<size_t>(b0 + i)]) <= kFltMax);
        if (!bad) {
            scratch.assign(static_cast<size_t>(format.code_bytes(len)), 0);
            float s0 = 0, o0 = 0;
            CodecOptions one = options;
            one.site.index_base += b0;
            bad = !encode_block_plain(format, y.data() + b0, len, scratch.data(), &s0, &o0, one);
        }
        if (bad) return describe_block_error(format, x.data() + b0, len, b0, options.site);
    }
    return st;
}

Status encode_block(const FormatSpec& format, const float* x, int64_t len, uint8_t* codes, float* scale,
                    float* offset, const CodecOptions& options) {
    if (len <= 0) return validate_block(len);
    if (!format.rotated()) return encode_block_plain(format, x, len, codes, scale, offset, options);
    if (auto st = format.check_block_length(len); !st) return st;
    thread_local std::vector<float> y;
    int64_t overflow = -1;
    rotate_blocks(format, std::span<const float>(x, static_cast<size_t>(len)), len, options, y, &overflow);
    if (overflow >= 0) return describe_block_error(format, x, len, 0, options.site);
    if (auto st = encode_block_plain(format, y.data(), len, codes, scale, offset, options); !st)
        return describe_block_error(format, x, len, 0, options.site);
    return Status::Ok();
}

Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options) {
    if (auto st = format.check_block(block); !st) return st.error();
    EncodedTensor t = sized_encoded(format, static_cast<int64_t>(x.size()), block);
    if (auto st = encode_into(format, x, block, t.codes, t.scales, t.offsets, options); !st) return st.error();
    t.key = sign_key(options);
    return t;
}

namespace {

QT_INLINE void decode_sym8(const uint8_t* in, int64_t len, float s, float* out) {
    for (int64_t i = 0; i < len; ++i) out[i] = sym_decode(static_cast<int8_t>(in[i]), s);
}
// Canonical int4: unpack into sign-extended bytes first (contiguous, vectorizes), then convert.
QT_INLINE void decode_sym4(const uint8_t* in, int64_t len, float s, float* out) {
    int8_t c[kDefaultBlock + 1];
    for (int64_t i0 = 0; i0 < len; i0 += kDefaultBlock) {
        const int64_t m = std::min<int64_t>(kDefaultBlock, len - i0);
        const int64_t bytes = (m + 1) / 2;
        for (int64_t j = 0; j < bytes; ++j) {
            const uint8_t b = in[i0 / 2 + j];
            const uint16_t w = static_cast<uint16_t>((b & 0x0F) | ((b & 0xF0) << 4));
            std::memcpy(c + 2 * j, &w, 2);
        }
        for (int64_t i = 0; i < m; ++i) c[i] = static_cast<int8_t>(static_cast<int8_t>(c[i] << 4) >> 4);
        for (int64_t i = 0; i < m; ++i) out[i0 + i] = sym_decode(c[i], s);
    }
}
// decode_one of every code, its tests on the scale and the kind taken once per block (one loop per
// kind: the switch inside decode_one kept every element's loop from being unswitched).
QT_INLINE void decode_generic(Kind kind, int bits, const uint8_t* in, int64_t len, float scale, float lo, float* out) {
    if (scale != scale) {  // a poisoned block: quiet NaNs, as decode_one returns them
        for (int64_t i = 0; i < len; ++i) out[i] = bits_f32(kQuietNanBits);
        return;
    }
    switch (kind) {
        case Kind::kSym:
            for (int64_t i = 0; i < len; ++i) out[i] = sym_decode(unpack_one(Kind::kSym, bits, in, i), scale);
            break;
        case Kind::kAsym:
            for (int64_t i = 0; i < len; ++i) out[i] = asym_decode(unpack_one(Kind::kAsym, bits, in, i), scale, lo);
            break;
        case Kind::kDs:
            if (bits == 8)
                for (int64_t i = 0; i < len; ++i) out[i] = ds_decode(unpack_one(Kind::kDs, 8, in, i), scale);
            else
                for (int64_t i = 0; i < len; ++i) out[i] = ds_decode(unpack_one(Kind::kDs, bits, in, i), scale);
            break;
        case Kind::kQr:  // (a width of 8 or 4 bits unpacks and decodes in vector loops)
            if (bits == 8)
                for (int64_t i = 0; i < len; ++i) out[i] = qr_decode(unpack_one(Kind::kQr, 8, in, i), scale, 8);
            else if (bits == 4)
                for (int64_t i = 0; i < len; ++i) out[i] = qr_decode(unpack_one(Kind::kQr, 4, in, i), scale, 4);
            else
                for (int64_t i = 0; i < len; ++i) out[i] = qr_decode(unpack_one(Kind::kQr, bits, in, i), scale, bits);
            break;
        default:
            for (int64_t i = 0; i < len; ++i) out[i] = decode_one(kind, unpack_one(kind, bits, in, i), scale, lo, bits);
            break;
    }
}

struct DecodeJob {
    const Decl* decl;  // declared formats only
    Kind kind;
    int bits;
    int64_t n, block, block_bytes;
    const uint8_t* codes;
    const float* scales;
    const float* offsets;
    float* out;
};

// Declared formats without an offset, a step of 32 codes at a time. A full step of a block that
// is not poisoned goes straight from the wire to the output in one loop: 8-bit codes (values by
// raw_value's arithmetic, or decode8_avx512), and with AVX-512 4-bit codes and every lsb-first
// width (unpacked, valued and scaled in registers, decode_step_avx512). Any other step (a short
// one, a poisoned block's, another width, or without AVX-512) is staged: unpacked into bytes with
// the others of a chunk of up to 8, their values computed or looked up in one loop over the chunk
// (wide vectors), then scaled step by step. kAvx: compiled for AVX-512 (decode_decl_fast_avx512).
struct DecodeStep {
    float* o;
    int64_t m;
    float s;
};
// The staged steps: their values in one loop, then each scaled into its place. (A function, not
// a lambda: a lambda would be compiled for the baseline target unless inlined.)
template <fast::DecodePlan::Mode M, bool kAvx>
QT_INLINE void decode_flush(const fast::DecodePlan& p, const uint8_t* c, const DecodeStep* steps, int ns, float* v) {
    const float qnan = bits_f32(kQuietNanBits);
    fast::raw_values<M, kAvx>(p, c, ns * fast::kStep, v);
    for (int k = 0; k < ns; ++k) {
        const DecodeStep& st = steps[k];
        if (st.s != st.s) {  // a poisoned block (D4)
            for (int64_t i = 0; i < st.m; ++i) st.o[i] = qnan;
        } else if (st.m == fast::kStep) {
            fast::scale_step<fast::kStep>(v + k * fast::kStep, st.m, st.s, st.o);
        } else {
            fast::scale_step<0>(v + k * fast::kStep, st.m, st.s, st.o);
        }
    }
}
template <fast::DecodePlan::Mode M, bool kAvx>
QT_INLINE void decode_decl_fast(const DecodeJob& job, const fast::DecodePlan& p, int64_t b0, int64_t b1) {
    const Decl& d = *job.decl;
    const bool lsb = d.packing == Packing::kLsbFirst;
    constexpr int kChunkSteps = 8;
    alignas(64) uint8_t c[kChunkSteps * fast::kStep];
    alignas(64) float v[kChunkSteps * fast::kStep];
    DecodeStep steps[kChunkSteps];
    int ns = 0;  // steps staged in c
    for (int64_t j = b0; j < b1; ++j) {
        const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
        const uint8_t* in = job.codes + j * job.block_bytes;
        const float s = job.scales[j];
        float* o = job.out + first;
        for (int64_t i0 = 0; i0 < len; i0 += fast::kStep) {
            const int64_t m = std::min(fast::kStep, len - i0);
            if (m == fast::kStep && s == s) {
                if (d.bits == 8) {
#if defined(__x86_64__)
                    if (!kAvx || !fast::decode8_avx512(p, in + i0, s, o + i0))
#endif
                        fast::decode8_step<M>(p, in + i0, s, o + i0);
                    continue;
                }
#if defined(__x86_64__)
                if constexpr (kAvx) {
                    if (fast::decode_step_avx512(p, lsb, in + i0 * d.bits / 8, s, o + i0))
                        continue;
                }
#endif
            }
            uint8_t* cs = c + ns * fast::kStep;
            if (m == fast::kStep) {
                fast::unpack_step<fast::kStep>(d, in, i0, m, cs);
            } else {
                std::memset(cs, 0, fast::kStep);
                fast::unpack_step<0>(d, in, i0, m, cs);
            }
            steps[ns++] = {o + i0, m, s};
            if (ns == kChunkSteps) {
                decode_flush<M, kAvx>(p, c, steps, ns, v);
                ns = 0;
            }
        }
    }
    if (ns > 0) decode_flush<M, kAvx>(p, c, steps, ns, v);
}

template <bool kAvx>
QT_INLINE void decode_decl_fast_any(const DecodeJob& job, const fast::DecodePlan& p, int64_t b0, int64_t b1) {
    switch (p.mode) {
        case fast::DecodePlan::kFloat: decode_decl_fast<fast::DecodePlan::kFloat, kAvx>(job, p, b0, b1); return;
        case fast::DecodePlan::kInt: decode_decl_fast<fast::DecodePlan::kInt, kAvx>(job, p, b0, b1); return;
        default: decode_decl_fast<fast::DecodePlan::kLookup, kAvx>(job, p, b0, b1); return;
    }
}
#if defined(__x86_64__)
QT_AVX512_WIDE void decode_decl_fast_avx512(const DecodeJob& job, const fast::DecodePlan& p, int64_t b0, int64_t b1) {
    decode_decl_fast_any<true>(job, p, b0, b1);
}
#endif

QT_MULTIVERSION_NO512 void decode_decl_fast_baseline(const DecodeJob& job, const fast::DecodePlan& p, int64_t b0, int64_t b1) {
    decode_decl_fast_any<false>(job, p, b0, b1);
}

QT_MULTIVERSION void decode_decl_range(const DecodeJob& job, int64_t b0, int64_t b1) {
    const Decl& d = *job.decl;
    if (!d.offset_min) {
#if defined(__x86_64__)
        // The lookup tables of 4- and 6-bit codes cost 2^bits decl_value calls: worth it for a
        // tensor, not for the one block of decode_block (every hop of a collective).
        if (fast::have_avx512())
            return decode_decl_fast_avx512(job, fast::decode_plan(d, (b1 - b0) * job.block >= 1024), b0, b1);
#endif
        return decode_decl_fast_baseline(job, fast::decode_plan(d, false), b0, b1);
    }
    // Every code's element value, once: decoding is then a lookup and a multiply.
    float value[256];
    const int32_t mask = (1 << d.bits) - 1;
    for (int32_t c = 0; c <= mask; ++c)
        value[c] = decl_value(d, d.elem == ElemType::kInt && d.is_signed ? sign_extend(static_cast<uint32_t>(c), d.bits) : c);
    for (int64_t j = b0; j < b1; ++j) {
        const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
        const uint8_t* in = job.codes + j * job.block_bytes;
        const float s = job.scales[j], lo = d.offset_min ? job.offsets[j] : 0.0f;
        float* o = job.out + first;
        if (d.bits == 8 && d.elem == ElemType::kInt && s == s && lo == lo && s != 0.0f) {
            // decl_decode_value with its per-block tests taken once (an int value is never NaN): a
            // straight loop that vectorizes.
            for (int64_t i = 0; i < len; ++i) o[i] = decl_offset_value(d, value[in[i]], s, lo);
        } else if (d.bits == 8) {
            for (int64_t i = 0; i < len; ++i) o[i] = decl_decode_value(d, value[in[i]], s, lo);
        } else if (d.bits == 4) {  // nibbles: element 2j low (lsb-first) or high (msb-first)
            const int lo_shift = d.packing == Packing::kLsbFirst ? 0 : 4, hi_shift = 4 - lo_shift;
            for (int64_t i = 0; i < len; ++i) {
                const uint8_t b = in[i >> 1];
                o[i] = decl_decode_value(d, value[(b >> ((i & 1) ? hi_shift : lo_shift)) & 0xF], s, lo);
            }
        } else {
            for (int64_t i = 0; i < len; ++i) o[i] = decl_decode_value(d, value[decl_unpack(d, in, i) & mask], s, lo);
        }
    }
}

QT_MULTIVERSION void decode_range(const DecodeJob& job, int64_t b0, int64_t b1) {
    const Kind kind = job.kind;
    if (kind == Kind::kDecl) {
        decode_decl_range(job, b0, b1);
        return;
    }
    for (int64_t j = b0; j < b1; ++j) {
        const int64_t first = j * job.block, len = std::min(job.block, job.n - first);
        const uint8_t* in = job.codes + j * job.block_bytes;
        const float s = job.scales[j];
        float* o = job.out + first;
        if (s == s && kind == Kind::kSym && job.bits == 8) {
            if (len == kDefaultBlock) decode_sym8(in, kDefaultBlock, s, o);
            else decode_sym8(in, len, s, o);
        } else if (s == s && kind == Kind::kSym && job.bits == 4) {
            if (len == kDefaultBlock) decode_sym4(in, kDefaultBlock, s, o);
            else decode_sym4(in, len, s, o);
        } else {
            decode_generic(kind, job.bits, in, len, s, kind == Kind::kAsym ? job.offsets[j] : 0.0f, o);
        }
    }
}

}  // namespace

namespace {
// A rotated format's blocks rotated back in place (FORMATS.md section 9), but for poisoned ones
// (NaN scale), which keep their quiet NaNs.
QT_MULTIVERSION void unrotate_blocks(const FormatSpec& format, int64_t block, const float* scales, float* out, int64_t n,
                                     int64_t b_first, int64_t b_last, const SignKey& key) {
    const bool signs = format.decl->random_signs;
#if defined(__x86_64__)
    if (fast::have_avx512()) {
        const int64_t full_end = std::clamp(n / block, b_first, b_last);  // a short last block: the loop below
        if (with_rotation_registers(block, [&](auto r) {
                unrotate_full_avx512<decltype(r)::value>(out, scales, signs, key, b_first, full_end);
            }))
            b_first = full_end;
    }
#endif
    for (int64_t j = b_first; j < b_last; ++j) {
        if (scales[j] != scales[j]) continue;
        const int64_t b0 = j * block, len = std::min(block, n - b0);
        hadamard_inverse(out + b0, len, signs, SignKey{key.seed, key.first + b0});
    }
}
}  // namespace

void decode_into(const FormatSpec& format, int64_t block, std::span<const uint8_t> codes,
                 std::span<const float> scales, std::span<const float> offsets, std::span<float> out, int threads,
                 const SignKey& key) {
    const int64_t n = static_cast<int64_t>(out.size());
    if (block < 1 || n == 0) return;
    if (const FormatSpec* twin = declared_twin(format)) return decode_into(*twin, block, codes, scales, offsets, out, threads, key);
    const DecodeJob job{format.decl.get(), kind_of(format), format.bits, n, block, format.code_bytes(block), codes.data(),
                        scales.data(), offsets.data(), out.data()};
    const bool rotated = format.rotated();
    parallel_blocks((n + block - 1) / block, pick_threads(threads, n), [&](int, int64_t b0, int64_t b1) {
        if (!rotated) return decode_range(job, b0, b1);
        // A chunk at a time, rotated back while its decoded values are in cache.
        const int64_t per = rotate_chunk_blocks(block);
        for (int64_t c0 = b0; c0 < b1; c0 += per) {
            const int64_t c1 = std::min(b1, c0 + per);
            decode_range(job, c0, c1);
            unrotate_blocks(format, block, scales.data(), out.data(), n, c0, c1, key);
        }
    });
}

void decode_block(const FormatSpec& format, const uint8_t* codes, int64_t len, float scale, float offset, float* out,
                  const SignKey& key) {
    if (len <= 0) return;
    const DecodeJob job{format.decl.get(), kind_of(format), format.bits, len, len, format.code_bytes(len), codes, &scale,
                        &offset, out};
    decode_range(job, 0, 1);
    if (format.rotated()) unrotate_blocks(format, len, &scale, out, len, 0, 1, key);
}

std::vector<float> decode(const EncodedTensor& t, int threads) {
    std::vector<float> out(static_cast<size_t>(t.elements));
    decode_into(t.format, t.block, t.codes, t.scales, t.offsets, out, threads, t.key);
    return out;
}

std::vector<int32_t> unpack_codes(const EncodedTensor& t) {
    std::vector<int32_t> q(static_cast<size_t>(t.elements));
    const int64_t block_bytes = t.format.code_bytes(t.block);
    for (int64_t i = 0; i < t.elements; ++i) {
        const int64_t j = i / t.block;
        q[static_cast<size_t>(i)] = unpack_code(t.format, t.codes.data() + j * block_bytes, i - j * t.block);
    }
    return q;
}

}  // namespace qtransit::kernels
