// CUDA backend of the quantizer and of the composite steps (gpu.hpp), with the block arithmetic of
// block_math.hpp, so that every result equals the CPU backend's bit for bit (the device build uses
// --fmad=false and the _rn intrinsics; nothing is contracted or reassociated).
//
// Work unit: a thread takes 8 consecutive elements of a quantization block. 8 codes of b bits are
// exactly b bytes, so each thread owns whole output bytes for every width 2..8 (no atomics, no
// read-modify-write across threads), and its 8 inputs are two 16-byte loads when the block start is
// 16-byte aligned (a scalar tail otherwise, and for the last short piece of a block).
//   - encode (and the swizzled stage-1 encode, and the fused reduce-requantize, which only differ
//     in where the 8 values come from): a group of T = 1..32 lanes of one warp per quantization
//     block (T the smallest power of two covering the block in 8-element pieces, at most 32), the
//     block statistics reduced with shuffles inside the group; blocks longer than 32 x 8 x 16
//     elements go to a kernel with one CTA of 256 threads per block (shuffles, then shared memory),
//     any length. Both loop over blocks grid-stride: no size limit, never a silent no-launch.
//   - decode and decode-add: one thread per 8-element piece, grid-stride.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/cuda_check.hpp"
#include "qtransit/kernels/decl_math.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/hadamard.hpp"

namespace qtransit::kernels::gpu {
namespace {

constexpr int kPiece = 8;              // elements per thread step
constexpr int kCtaThreads = 256;       // threads of the one-CTA-per-block encode
constexpr int kGroupMaxIters = 16;     // a warp group loops at most this often over its block
constexpr int kReduceBatch = 8;        // fused reduce: inputs whose loads are in flight together (G = 8: all)

struct Fmt {
    Kind kind;
    int bits;
    int32_t qmax, levels, cmin, cmax;
    bool range;           // the block's lo/hi are needed (int<b>-asym, a declared offset `min`)
    bool msb;             // declared msb-first packing (ds-int4's nibble order is handled by kind)
    bool sgn;             // codes are two's complement
    bool stochastic;
    const Decl* decl;     // declared formats: the declaration in device memory
    RoundKey key;         // declared formats: stochastic rounding's key
};

// Device copies of declarations, one per (device, declaration), kept for the process's life (a
// run uses a handful of formats; the copy is a few KiB).
Result<const Decl*> device_decl(const FormatSpec& f) {
    static std::mutex mu;
    static std::vector<std::pair<std::pair<int, const Decl*>, const Decl*>> cache;
    int dev = 0;
    QT_CUDA_CHECK(cudaGetDevice(&dev));
    std::lock_guard lock(mu);
    for (const auto& [k, v] : cache)
        if (k.first == dev && k.second == f.decl.get()) return v;
    Decl* d = nullptr;
    QT_CUDA_CHECK(cudaMalloc(&d, sizeof(Decl)));
    QT_CUDA_CHECK(cudaMemcpy(d, f.decl.get(), sizeof(Decl), cudaMemcpyHostToDevice));
    cache.push_back({{dev, f.decl.get()}, d});
    return static_cast<const Decl*>(d);
}

Result<Fmt> fmt_of(const FormatSpec& f, const CodecOptions& o = {}) {
    Fmt r{kind_of(f), f.bits, sym_qmax(f.bits), asym_levels(f.bits), -(1 << (f.bits - 1)), (1 << (f.bits - 1)) - 1,
          f.has_offset(), false, f.kind != FormatKind::kAsym && f.kind != FormatKind::kQr, false, nullptr, RoundKey{}};
    if (f.kind == FormatKind::kDecl) {
        auto d = device_decl(f);
        if (!d) return d.error();
        r.decl = *d;
        r.msb = f.decl->packing == Packing::kMsbFirst;
        r.sgn = f.decl->signed_codes();
        r.stochastic = f.decl->rounding == Rounding::kStochastic;
        r.key.seed = o.seed;
        r.key.rank_word = o.site.rank < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(o.site.rank);
        r.key.hop = o.hop;
        r.key.index_base = o.site.index_base;
    }
    return r;
}

// What a block's statistics decide (the CPU's plan_block, same functions, same order).
enum : int { kQuantize = 0, kAllZero = 1, kPoisoned = 2 };
struct Plan {
    float scale, lo, dscale;  // dscale: ds's multiplier, or a declared scale's that multiplies (decl_plan's m)
    int state;
    int32_t poison_code;  // declared formats: the code of every element of a poisoned block
};
__device__ Plan plan_of(const Fmt& f, uint32_t amax, uint32_t kmin, uint32_t kmax) {
    Plan p{0.0f, 0.0f, 0.0f, kQuantize, 0};
    if (f.kind == Kind::kDecl) {
        const Decl& d = *f.decl;
        if (decl_plan(d, amax, from_order_key(kmin), from_order_key(kmax), &p.scale, &p.lo, &p.dscale) != BlockState::kQuantize) {
            p.state = kPoisoned;
            p.poison_code = decl_poison_code(d);
            p.scale = d.scale == ScaleType::kNone ? 1.0f : bits_f32(kQuietNanBits);
            p.lo = bits_f32(kQuietNanBits);
        }
        return p;
    }
    if (amax >= kInfBits) {
        p.state = kPoisoned;
    } else if (f.kind == Kind::kSym) {
        p.scale = sym_scale(bits_f32(amax), f.bits);
        if (p.scale == 0.0f) p.state = kAllZero;
    } else if (f.kind == Kind::kAsym) {
        p.lo = from_order_key(kmin);
        p.scale = asym_scale(p.lo, from_order_key(kmax), f.bits);
        if (f32_bits(p.scale) == kInfBits) p.state = kPoisoned;
        else if (p.scale == 0.0f) p.state = kAllZero;
    } else if (f.kind == Kind::kQr) {  // the CPU's plan_block: never kAllZero (a zero's code is the bias)
        if (f32_bits(ds_absmax(bits_f32(amax))) == kInfBits) {
            p.state = kPoisoned;
        } else {
            p.scale = qr_dec(qr_extreme(round_f16(from_order_key(kmin)), round_f16(from_order_key(kmax))), f.bits);
            p.dscale = qr_enc(p.scale);
        }
    } else {
        const float a16 = ds_absmax(bits_f32(amax));
        if (f32_bits(a16) == kInfBits) {
            p.state = kPoisoned;
        } else {
            p.scale = ds_step(a16, f.bits);
            if (a16 == 0.0f) p.state = kAllZero;
            else p.dscale = ds_scale(a16, f.bits);
        }
    }
    if (p.state == kPoisoned) {
        p.scale = bits_f32(kQuietNanBits);
        p.lo = bits_f32(kQuietNanBits);
    }
    return p;
}

__device__ __forceinline__ int32_t code_of(const Fmt& f, const Plan& p, float x, int64_t index) {
    if (f.kind == Kind::kDecl)
        return decl_code(*f.decl, x, p.scale, p.lo, p.dscale, f.stochastic ? round_bits(f.key, index) : 0u);
    if (f.kind == Kind::kSym) return sym_code(x, p.scale, f.qmax);
    if (f.kind == Kind::kAsym) return asym_code(x, p.lo, p.scale, f.levels);
    if (f.kind == Kind::kQr) return qr_code(x, p.dscale, f.bits);
    return ds_code(x, p.dscale, f.cmin, f.cmax);
}

// 8 codes as an MSB-first bit stream of 8 * bits bits, returned in the little-endian byte order
// store_bytes writes (so the first byte in memory holds the stream's first 8 bits).
__device__ __forceinline__ uint64_t msb_stream(int bits, const int32_t (&q)[kPiece]) {
    const uint64_t mask = (1ull << bits) - 1ull;
    uint64_t be = 0;
#pragma unroll
    for (int k = 0; k < kPiece; ++k) be = (be << bits) | (static_cast<uint64_t>(static_cast<uint32_t>(q[k])) & mask);
    uint64_t le = 0;
    for (int b = 0; b < bits; ++b) le |= ((be >> (8 * (bits - 1 - b))) & 0xFFu) << (8 * b);
    return le;
}
// The value of a code, for every kind.
__device__ __forceinline__ float decode_code(const Fmt& f, int32_t q, float s, float lo) {
    if (f.kind == Kind::kDecl) return decl_decode(*f.decl, q, s, lo);
    return decode_one(f.kind, q, s, lo, f.bits);
}

// 8 codes as one LSB-first bit stream of 8 * bits bits (canonical int4 and int8 are that stream;
// ds-int4 puts the even element in the high nibble, so its nibbles are swapped afterwards).
__device__ __forceinline__ uint64_t pack8(const Fmt& f, const int32_t (&q)[kPiece]) {
    const uint64_t mask = (1ull << f.bits) - 1ull;
    uint64_t v = 0;
#pragma unroll
    for (int k = 0; k < kPiece; ++k) v |= (static_cast<uint64_t>(static_cast<uint32_t>(q[k])) & mask) << (k * f.bits);
    if ((f.kind == Kind::kDs || f.msb) && f.bits == 4) v = ((v & 0x0F0F0F0F0F0F0F0Full) << 4) | ((v >> 4) & 0x0F0F0F0F0F0F0F0Full);
    else if (f.msb && f.bits != 8) v = msb_stream(f.bits, q);
    return v;
}
__device__ __forceinline__ void unpack8(const Fmt& f, uint64_t v, int32_t (&q)[kPiece]) {
    if (f.msb && f.bits != 8 && f.bits != 4) {
        // the piece's b bytes, first byte first, as one big-endian number of 8b bits
        uint64_t be = 0;
        for (int b = 0; b < f.bits; ++b) be = (be << 8) | ((v >> (8 * b)) & 0xFFu);
        const uint64_t mask = (1ull << f.bits) - 1ull;
#pragma unroll
        for (int k = 0; k < kPiece; ++k) {
            const uint32_t raw = static_cast<uint32_t>((be >> ((kPiece - 1 - k) * f.bits)) & mask);
            q[k] = f.sgn ? sign_extend(raw, f.bits) : static_cast<int32_t>(raw);
        }
        return;
    }
    if ((f.kind == Kind::kDs || f.msb) && f.bits == 4) v = ((v & 0x0F0F0F0F0F0F0F0Full) << 4) | ((v >> 4) & 0x0F0F0F0F0F0F0F0Full);
    const uint64_t mask = (1ull << f.bits) - 1ull;
#pragma unroll
    for (int k = 0; k < kPiece; ++k) {
        const uint32_t raw = static_cast<uint32_t>((v >> (k * f.bits)) & mask);
        q[k] = f.sgn ? sign_extend(raw, f.bits) : static_cast<int32_t>(raw);
    }
}

// nbytes (1..8) little-endian bytes: one wide access when the address allows it.
__device__ __forceinline__ void store_bytes(uint8_t* dst, uint64_t v, int nbytes) {
    const auto a = reinterpret_cast<uintptr_t>(dst);
    if (nbytes == 8 && (a & 7) == 0) {
        *reinterpret_cast<uint64_t*>(dst) = v;
    } else if (nbytes == 4 && (a & 3) == 0) {
        *reinterpret_cast<uint32_t*>(dst) = static_cast<uint32_t>(v);
    } else if (nbytes == 2 && (a & 1) == 0) {
        *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(v);
    } else {
        for (int b = 0; b < nbytes; ++b) dst[b] = static_cast<uint8_t>(v >> (8 * b));
    }
}
__device__ __forceinline__ uint64_t load_bytes(const uint8_t* src, int nbytes) {
    const auto a = reinterpret_cast<uintptr_t>(src);
    if (nbytes == 8 && (a & 7) == 0) return *reinterpret_cast<const uint64_t*>(src);
    if (nbytes == 4 && (a & 3) == 0) return *reinterpret_cast<const uint32_t*>(src);
    if (nbytes == 2 && (a & 1) == 0) return *reinterpret_cast<const uint16_t*>(src);
    uint64_t v = 0;
    for (int b = 0; b < nbytes; ++b) v |= static_cast<uint64_t>(src[b]) << (8 * b);
    return v;
}
// Elements left in the piece that starts `rem` elements before the end of its block: 0..8.
__device__ __forceinline__ int piece_count(int64_t rem) {
    return rem <= 0 ? 0 : (rem >= kPiece ? kPiece : static_cast<int>(rem));
}
__device__ __forceinline__ void load8(const float* p, int cnt, float (&v)[kPiece]) {
    if (cnt == kPiece && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(p));
        const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
#pragma unroll
        for (int k = 0; k < kPiece; ++k) v[k] = k < cnt ? p[k] : 0.0f;
    }
}
__device__ __forceinline__ void store8(float* p, int cnt, const float (&v)[kPiece]) {
    if (cnt == kPiece && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
        reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
        for (int k = 0; k < kPiece; ++k)
            if (k < cnt) p[k] = v[k];
    }
}

// Where output block j of an encode lives and which inputs it reads: a plain tensor (swz_g == 0),
// or the stage-1 swizzle (slot k = l' nodes + m holds chunk l' + G m).
struct Layout {
    int64_t n_blocks;      // output blocks
    int64_t chunk_elems;   // S (the whole tensor when plain)
    int64_t chunk_blocks;  // blocks per chunk
    int64_t chunk_code_bytes;
    int64_t swz_g, swz_nodes;
    int64_t block, block_bytes;
    __host__ __device__ void map(int64_t j, int64_t& first, int64_t& len, int64_t& code_off) const {
        if (swz_g == 0) {
            first = j * block;
            len = chunk_elems - first < block ? chunk_elems - first : block;
            code_off = j * block_bytes;
            return;
        }
        const int64_t k = j / chunk_blocks, b = j - k * chunk_blocks;
        const int64_t lp = k / swz_nodes, m = k - lp * swz_nodes;
        const int64_t chunk = lp + swz_g * m;
        const int64_t in_chunk = b * block;
        first = chunk * chunk_elems + in_chunk;
        len = chunk_elems - in_chunk < block ? chunk_elems - in_chunk : block;
        code_off = k * chunk_code_bytes + b * block_bytes;
    }
};

// Sources of the values an encode quantizes: (output block j, element e0 of the block, tensor
// index `first` of that element, count) -> up to 8 values.
struct ArraySource {
    const float* x;
    __device__ __forceinline__ void load(const Fmt&, int64_t, int64_t, int64_t first, int cnt,
                                         float (&v)[kPiece]) const {
        load8(x + first, cnt, v);
    }
};
// The fused stage 2: the values are the sum of G decoded inputs, left to right.
struct ReduceInputs {
    const uint8_t* codes[kMaxReduceInputs];
    const float* scales[kMaxReduceInputs];
    const float* offsets[kMaxReduceInputs];
};
struct ReduceSource {
    ReduceInputs in;
    int count;
    Accum accum;
    int64_t block_bytes;
    __device__ __forceinline__ void load(const Fmt& f, int64_t j, int64_t e0, int64_t, int cnt,
                                         float (&v)[kPiece]) const {
        const int nbytes = (cnt * f.bits + 7) / 8;
        const int64_t off = j * block_bytes + (e0 / kPiece) * f.bits;
        // The loads of kReduceBatch inputs are issued together before the first of them is used:
        // with one input's load at a time (count is a run-time value, so the loop was not unrolled)
        // each thread waited out G memory latencies in a row, and the fused kernel moved 0.06-0.11 of
        // a copy's bytes per second on the H200 (RESULTS.md, 2026-12-04). The adds keep their order,
        // input 0 first, so the sums keep their bits.
        for (int g0 = 0; g0 < count; g0 += kReduceBatch) {
            uint64_t raw[kReduceBatch];
            float s[kReduceBatch], lo[kReduceBatch];
#pragma unroll
            for (int b = 0; b < kReduceBatch; ++b) {
                const int g = g0 + b;
                raw[b] = 0;
                s[b] = 0.0f;
                lo[b] = 0.0f;
                if (g < count) {
                    raw[b] = load_bytes(in.codes[g] + off, nbytes);
                    s[b] = in.scales[g][j];
                    if (f.range) lo[b] = in.offsets[g][j];
                }
            }
#pragma unroll
            for (int b = 0; b < kReduceBatch; ++b) {
                const int g = g0 + b;
                if (g >= count) break;
                int32_t q[kPiece];
                unpack8(f, raw[b], q);
#pragma unroll
                for (int k = 0; k < kPiece; ++k) {
                    const float d = decode_code(f, q[k], s[b], lo[b]);
                    v[k] = g == 0 ? accum_first(d, accum) : accum_add(v[k], d, accum);
                }
            }
        }
    }
};

struct EncodeOut {
    uint8_t* codes;
    float* scales;
    float* offsets;
    bool error_policy;
    unsigned long long* first_bad;  // lowest refused block (error policy)
};

// The block's minimum and maximum: an offset's (f.range) or quickreduce-q<b>'s signed extreme.
__device__ __forceinline__ bool needs_minmax(const Fmt& f) { return f.range || f.kind == Kind::kQr; }
__device__ __forceinline__ void accumulate_stats(const Fmt& f, const float (&v)[kPiece], int cnt, uint32_t& amax,
                                                 uint32_t& kmin, uint32_t& kmax) {
#pragma unroll
    for (int k = 0; k < kPiece; ++k) {
        if (k < cnt) {
            amax = max(amax, f32_bits(v[k]) & 0x7fffffffu);
            if (needs_minmax(f)) {
                const uint32_t key = order_key(v[k]);
                kmin = min(kmin, key);
                kmax = max(kmax, key);
            }
        }
    }
}

__device__ __forceinline__ void write_piece(const Fmt& f, const Plan& p, const float (&v)[kPiece], int cnt,
                                            int64_t index, uint8_t* dst) {
    int32_t q[kPiece];
#pragma unroll
    for (int k = 0; k < kPiece; ++k)
        q[k] = k >= cnt ? 0 : (p.state == kQuantize ? code_of(f, p, v[k], index + k) : p.poison_code);
    store_bytes(dst, pack8(f, q), (cnt * f.bits + 7) / 8);
}

__device__ __forceinline__ void write_meta(const Fmt& f, const Plan& p, int64_t j, const EncodeOut& o) {
    o.scales[j] = p.scale;
    if (f.range) o.offsets[j] = p.lo;
    if (p.state == kPoisoned && (o.error_policy || p.poison_code < 0)) atomicMin(o.first_bad, static_cast<unsigned long long>(j));
}

// A group of `group` lanes (a power of two <= 32) per quantization block; `iters` pieces per lane
// cover the longest block. When one piece per lane covers it, the values stay in registers between
// the statistics and the codes; otherwise the second pass reads (or recomputes) them again.
// kKind >= 0 fixes the format's kind at compile time (a copy of `fmt` whose kind is a constant), so
// the other kinds' branches and the declared formats' out-of-line calls fold away: the generic
// kernel (kKind = -1) needed 48 registers and a 56-byte stack frame with 112 bytes of spill stores
// for every format (ptxas -v, 2026-12-05), which int8 and int4 paid for in their hot loop. The same
// functions run in the same order either way, so the codes keep their bits.
template <class Src, int kKind>
__global__ void __launch_bounds__(256) encode_group_kernel(Fmt fmt, Src src, Layout L, int group, int iters,
                                                           EncodeOut o) {
    Fmt f = fmt;
    if (kKind >= 0) f.kind = static_cast<Kind>(kKind);
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const int gl = lane & (group - 1);
    const int groups_per_warp = 32 / group;
    const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
    // The loop bound is the same for every lane of a warp, so the shuffles see the whole warp.
    for (int64_t jb = warp * groups_per_warp; jb < L.n_blocks; jb += warps * groups_per_warp) {
        const int64_t j = jb + lane / group;
        const bool active = j < L.n_blocks;
        int64_t first = 0, len = 0, coff = 0;
        if (active) L.map(j, first, len, coff);
        uint32_t amax = 0, kmin = 0xffffffffu, kmax = 0;
        float v[kPiece];
#pragma unroll
        for (int k = 0; k < kPiece; ++k) v[k] = 0.0f;
        for (int it = 0; it < iters; ++it) {
            const int64_t e0 = (static_cast<int64_t>(it) * group + gl) * kPiece;
            const int cnt = piece_count(len - e0);
            if (cnt > 0) {
                src.load(f, j, e0, first + e0, cnt, v);
                accumulate_stats(f, v, cnt, amax, kmin, kmax);
            }
        }
        // f.range is the same for the whole grid, so every lane takes the same branch; a symmetric
        // format needs no min and max (a third of the shuffles it did before).
        for (int off = group >> 1; off > 0; off >>= 1) {
            amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
            if (needs_minmax(f)) {
                kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, off));
                kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, off));
            }
        }
        if (!active) continue;
        const Plan p = plan_of(f, amax, kmin, kmax);
        if (gl == 0) write_meta(f, p, j, o);
        for (int it = 0; it < iters; ++it) {
            const int64_t e0 = (static_cast<int64_t>(it) * group + gl) * kPiece;
            const int cnt = piece_count(len - e0);
            if (cnt <= 0) continue;
            if (iters > 1 && p.state == kQuantize) src.load(f, j, e0, first + e0, cnt, v);
            write_piece(f, p, v, cnt, first + e0, o.codes + coff + (e0 / kPiece) * f.bits);
        }
    }
}

// One CTA per quantization block, for blocks of any length (2^20 elements and beyond).
template <class Src>
__global__ void __launch_bounds__(kCtaThreads) encode_cta_kernel(Fmt f, Src src, Layout L, EncodeOut o) {
    __shared__ uint32_t s_amax[kCtaThreads / 32], s_kmin[kCtaThreads / 32], s_kmax[kCtaThreads / 32];
    const int t = static_cast<int>(threadIdx.x), lane = t & 31, w = t >> 5;
    for (int64_t j = blockIdx.x; j < L.n_blocks; j += gridDim.x) {
        int64_t first, len, coff;
        L.map(j, first, len, coff);
        uint32_t amax = 0, kmin = 0xffffffffu, kmax = 0;
        float v[kPiece];
        for (int64_t e0 = static_cast<int64_t>(t) * kPiece; e0 < len; e0 += static_cast<int64_t>(kCtaThreads) * kPiece) {
            const int cnt = piece_count(len - e0);
            src.load(f, j, e0, first + e0, cnt, v);
            accumulate_stats(f, v, cnt, amax, kmin, kmax);
        }
        for (int off = 16; off > 0; off >>= 1) {
            amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
            kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, off));
            kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, off));
        }
        if (lane == 0) {
            s_amax[w] = amax;
            s_kmin[w] = kmin;
            s_kmax[w] = kmax;
        }
        __syncthreads();
        amax = s_amax[0];
        kmin = s_kmin[0];
        kmax = s_kmax[0];
        for (int k = 1; k < kCtaThreads / 32; ++k) {
            amax = max(amax, s_amax[k]);
            kmin = min(kmin, s_kmin[k]);
            kmax = max(kmax, s_kmax[k]);
        }
        __syncthreads();  // the next block's statistics reuse the shared slots
        const Plan p = plan_of(f, amax, kmin, kmax);
        if (t == 0) write_meta(f, p, j, o);
        for (int64_t e0 = static_cast<int64_t>(t) * kPiece; e0 < len; e0 += static_cast<int64_t>(kCtaThreads) * kPiece) {
            const int cnt = piece_count(len - e0);
            if (p.state == kQuantize) src.load(f, j, e0, first + e0, cnt, v);
            write_piece(f, p, v, cnt, first + e0, o.codes + coff + (e0 / kPiece) * f.bits);
        }
    }
}

// Decode (own == nullptr) or decode-and-add of a plain encoded tensor, one thread per piece.
__global__ void __launch_bounds__(256) decode_kernel(Fmt f, int64_t n, int64_t block, int64_t block_bytes,
                                                     int64_t pieces_per_block, int ppb_shift,
                                                     const uint8_t* __restrict__ codes,
                                                     const float* __restrict__ scales,
                                                     const float* __restrict__ offsets, const float* own,
                                                     Accum accum, float* out) {
    const int64_t blocks = (n + block - 1) / block;
    const int64_t pieces = blocks * pieces_per_block;
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < pieces;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t j = ppb_shift >= 0 ? (c >> ppb_shift) : c / pieces_per_block;
        const int64_t e0 = (c - j * pieces_per_block) * kPiece;
        const int64_t first = j * block;
        const int64_t len = min(block, n - first);
        if (e0 >= len) continue;
        const int cnt = piece_count(len - e0);
        int32_t q[kPiece];
        unpack8(f, load_bytes(codes + j * block_bytes + (e0 / kPiece) * f.bits, (cnt * f.bits + 7) / 8), q);
        const float s = scales[j];
        const float lo = f.range ? offsets[j] : 0.0f;
        float v[kPiece];
#pragma unroll
        for (int k = 0; k < kPiece; ++k) v[k] = decode_code(f, q[k], s, lo);
        if (own) {
            float w[kPiece];
            load8(own + first + e0, cnt, w);
#pragma unroll
            for (int k = 0; k < kPiece; ++k) v[k] = accum_add(accum_first(v[k], accum), w[k], accum);
        }
        store8(out + first + e0, cnt, v);
    }
}

int sm_count() {
    static std::once_flag once;
    static int sms = 132;
    std::call_once(once, [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0)
            sms = v;
    });
    return sms;
}
// Grid-stride loops: enough CTAs to fill the GPU several times over; never zero.
int grid_for(int64_t threads_wanted, int threads_per_cta) {
    const int64_t want = (threads_wanted + threads_per_cta - 1) / threads_per_cta;
    return static_cast<int>(std::clamp<int64_t>(want, 1, int64_t{sm_count()} * 32));
}
int pow2_at_least(int64_t v) {
    int p = 1;
    while (p < v && p < 32) p <<= 1;
    return p;
}
int log2_exact(int64_t v) {
    if (v <= 0 || (v & (v - 1)) != 0) return -1;
    int s = 0;
    while ((int64_t{1} << s) < v) ++s;
    return s;
}

// Whether an encode under these options tracks its refused blocks in a flag word: the `error`
// policy, and a declared format that cannot mark a poisoned block (it refuses it under `propagate`).
bool tracks_refusals(const FormatSpec& format, const CodecOptions& options) {
    return options.policy == Nonfinite::kError || (format.kind == FormatKind::kDecl && decl_poison_code(*format.decl) < 0);
}

// Queue the encode of `L` from `src` on `stream`; d_bad (null: not tracked) receives the lowest
// refused block by atomicMin, so it must hold ~0 before.
template <class Src>
Status queue_encode(const FormatSpec& format, const Src& src, const Layout& L, DeviceEncodedOut out,
                    const CodecOptions& options, cudaStream_t stream, unsigned long long* d_bad, const char* name_group,
                    const char* name_cta) {
    auto fr = fmt_of(format, options);
    if (!fr) return fr.error();
    const Fmt f = *fr;
    const EncodeOut o{out.codes, out.scales, out.offsets, options.policy == Nonfinite::kError, d_bad};
    const int64_t pieces = (L.block + kPiece - 1) / kPiece;
    const int group = pow2_at_least(pieces);
    const int64_t iters = (pieces + group - 1) / group;
    if (iters <= kGroupMaxIters) {
        const int64_t groups_per_warp = 32 / group;
        const int64_t warps = (L.n_blocks + groups_per_warp - 1) / groups_per_warp;
        const int grid = grid_for(warps * 32, 256);
        const int it = static_cast<int>(iters);
        // int<b> (the formats of qgZ and qwZ) gets an instance of its own; every other kind shares the
        // generic one. An instance per kind made codec.cu.o 7.3 MB instead of 2.1 and the GPU
        // bundle 66 MiB, over the device tool's 64.
        if (f.kind == Kind::kSym)
            encode_group_kernel<Src, static_cast<int>(Kind::kSym)><<<grid, 256, 0, stream>>>(f, src, L, group, it, o);
        else
            encode_group_kernel<Src, -1><<<grid, 256, 0, stream>>>(f, src, L, group, it, o);
        QT_CUDA_LAUNCH_CHECK(name_group);
    } else {
        encode_cta_kernel<Src><<<grid_for(L.n_blocks * kCtaThreads, kCtaThreads), kCtaThreads, 0, stream>>>(f, src, L, o);
        QT_CUDA_LAUNCH_CHECK(name_cta);
    }
    return Status::Ok();
}

// Launch the encode of `L` from `src`, then turn a refused block into the CPU's Error (the caller
// supplies how to get the refused block's values back on the host).
template <class Src, class Describe>
Status launch_encode(const FormatSpec& format, const Src& src, const Layout& L, DeviceEncodedOut out,
                     const CodecOptions& options, cudaStream_t stream, const char* name_group, const char* name_cta,
                     Describe&& describe) {
    if (L.n_blocks == 0) return Status::Ok();
    const bool track = tracks_refusals(format, options);
    unsigned long long* d_bad = nullptr;
    if (track) {
        QT_CUDA_CHECK(cudaMallocAsync(&d_bad, sizeof(unsigned long long), stream));
        QT_CUDA_CHECK(cudaMemsetAsync(d_bad, 0xff, sizeof(unsigned long long), stream));
    }
    if (auto st = queue_encode(format, src, L, out, options, stream, d_bad, name_group, name_cta); !st) {
        if (d_bad) cudaFreeAsync(d_bad, stream);
        return st;
    }
    if (!track) return Status::Ok();
    unsigned long long bad = 0;
    QT_CUDA_CHECK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
    QT_CUDA_CHECK(cudaFreeAsync(d_bad, stream));
    QT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bad != ~0ull) {
        if (options.policy != Nonfinite::kError) return unmarkable_poison_error(format, static_cast<int64_t>(bad) * L.block, options.site);
        return describe(static_cast<int64_t>(bad));
    }
    return Status::Ok();
}

Layout plain_layout(const FormatSpec& format, int64_t n, int64_t block) {
    return Layout{(n + block - 1) / block, n, (n + block - 1) / block, 0, 0, 1, block, format.code_bytes(block)};
}

// The values of one refused block, copied back, for the CPU's message.
Status describe_from_device(const FormatSpec& format, const float* d_x, int64_t first, int64_t len,
                            const Site& site) {
    std::vector<float> values(static_cast<size_t>(len));
    QT_CUDA_CHECK(cudaMemcpy(values.data(), d_x + first, sizeof(float) * values.size(), cudaMemcpyDeviceToHost));
    return describe_block_error(format, values.data(), len, first, site);
}

// ---- rotated formats (FORMATS.md section 9; the arithmetic is hadamard.hpp's) ----------------------
// Blocks of `block` (the last one short, a power of two too); every kernel grid-strides.
struct RotLayout {
    int64_t n, block;
    bool signs;
    SignKey key;  // key.first: the index of element 0
    __device__ int64_t len_of(int64_t b) const { return n - b * block < block ? n - b * block : block; }
};

// Signs (encode: before the stages).
__global__ void rot_signs_kernel(RotLayout L, float* v) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < L.n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = i / L.block, j = i - b * L.block;
        if (hadamard_sign(SignKey{L.key.seed, L.key.first + b * L.block}, j)) v[i] = -v[i];
    }
}
// One stage of stride h: butterfly p of block b (a block shorter than 2h has no butterfly here).
// Decode passes the scales: a poisoned block (NaN scale) keeps its quiet NaNs, as on the CPU.
__global__ void rot_stage_kernel(RotLayout L, float* v, int64_t h, const float* scales) {
    const int64_t half = L.block / 2, pairs = ((L.n + L.block - 1) / L.block) * half;
    for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < pairs; t += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = t / half, p = t - b * half, len = L.len_of(b);
        if (scales && scales[b] != scales[b]) continue;
        if (h < len && p < len / 2) hadamard_butterfly(v + b * L.block, h, p);
    }
}
// Encode: flag the blocks whose rotation passes the limit (or is not finite).
__global__ void rot_check_kernel(RotLayout L, const float* v, uint8_t* flags) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < L.n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = i / L.block;
        if (!(fabsf(v[i]) <= hadamard_limit(L.len_of(b)))) flags[b] = 1;
    }
}
// Encode under `propagate`: a flagged block becomes NaN (poisoned).
__global__ void rot_poison_kernel(RotLayout L, float* v, const uint8_t* flags) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < L.n; i += int64_t{gridDim.x} * blockDim.x)
        if (flags[i / L.block]) v[i] = bits_f32(kQuietNanBits);
}
// Decode: normalization and signs, after the stages; a poisoned block (NaN scale) is left as it is.
__global__ void rot_finish_kernel(RotLayout L, float* v, const float* scales) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < L.n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = i / L.block;
        if (scales[b] != scales[b]) continue;
        v[i] = hadamard_finish(v[i], L.len_of(b), i - b * L.block, L.signs, SignKey{L.key.seed, L.key.first + b * L.block});
    }
}

Status rot_stages(const RotLayout& L, float* v, cudaStream_t stream, const float* scales = nullptr) {
    for (int64_t h = 1; h < L.block; h *= 2) {
        rot_stage_kernel<<<grid_for(((L.n + L.block - 1) / L.block) * (L.block / 2), 256), 256, 0, stream>>>(L, v, h, scales);
        QT_CUDA_LAUNCH_CHECK("qtransit::rot_stage_kernel");
    }
    return Status::Ok();
}

}  // namespace

Status encode_device(const FormatSpec& format, const float* d_x, int64_t n, int64_t block, uint8_t* d_codes,
                     float* d_scales, float* d_offsets, const CodecOptions& options, void* stream_ptr) {
    if (auto st = format.check_block(block); !st) return st;
    if (n == 0) return Status::Ok();
    if (auto st = format.check_tensor(n, block); !st) return st;
    const Layout L = plain_layout(format, n, block);
    const float* src = d_x;
    float* d_y = nullptr;
    const auto stream = static_cast<cudaStream_t>(stream_ptr);
    if (format.rotated()) {
        // Rotate a copy (the caller's x stays as it is), then encode the copy: FORMATS.md section 9.
        const RotLayout R{n, block, format.decl->random_signs, sign_key(options)};
        const int64_t blocks = (n + block - 1) / block;
        uint8_t* d_flags = nullptr;
        QT_CUDA_CHECK(cudaMallocAsync(&d_y, sizeof(float) * static_cast<size_t>(n), stream));
        QT_CUDA_CHECK(cudaMallocAsync(&d_flags, static_cast<size_t>(blocks), stream));
        QT_CUDA_CHECK(cudaMemsetAsync(d_flags, 0, static_cast<size_t>(blocks), stream));
        QT_CUDA_CHECK(cudaMemcpyAsync(d_y, d_x, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, stream));
        if (R.signs) {
            rot_signs_kernel<<<grid_for(n, 256), 256, 0, stream>>>(R, d_y);
            QT_CUDA_LAUNCH_CHECK("qtransit::rot_signs_kernel");
        }
        if (auto st = rot_stages(R, d_y, stream); !st) return st;
        rot_check_kernel<<<grid_for(n, 256), 256, 0, stream>>>(R, d_y, d_flags);
        QT_CUDA_LAUNCH_CHECK("qtransit::rot_check_kernel");
        std::vector<uint8_t> flags(static_cast<size_t>(blocks));
        QT_CUDA_CHECK(cudaMemcpyAsync(flags.data(), d_flags, flags.size(), cudaMemcpyDeviceToHost, stream));
        QT_CUDA_CHECK(cudaStreamSynchronize(stream));
        const auto first_flag = std::find(flags.begin(), flags.end(), uint8_t{1});
        if (first_flag != flags.end()) {
            if (options.policy == Nonfinite::kError) {
                // Refused before any output is written; the block is described from the caller's x.
                cudaFreeAsync(d_flags, stream);
                cudaFreeAsync(d_y, stream);
                const int64_t first = (first_flag - flags.begin()) * block;
                return describe_from_device(format, d_x, first, std::min(block, n - first), options.site);
            }
            rot_poison_kernel<<<grid_for(n, 256), 256, 0, stream>>>(R, d_y, d_flags);
            QT_CUDA_LAUNCH_CHECK("qtransit::rot_poison_kernel");
        }
        QT_CUDA_CHECK(cudaFreeAsync(d_flags, stream));
        src = d_y;
    }
    Status st = launch_encode(format, ArraySource{src}, L, DeviceEncodedOut{d_codes, d_scales, d_offsets}, options,
                         stream, "qtransit::encode_group_kernel",
                         "qtransit::encode_cta_kernel", [&](int64_t bad) {
                             const int64_t first = bad * block;
                             return describe_from_device(format, d_x, first, std::min(block, n - first), options.site);
                         });
    if (d_y) {
        if (auto fst = cuda_status(cudaFreeAsync(d_y, stream), "cudaFreeAsync(d_y)", __FILE__, __LINE__); !fst && st) st = fst;
    }
    return st;
}

Status encode_device_queued(const FormatSpec& format, const float* d_x, int64_t n, int64_t block, uint8_t* d_codes,
                            float* d_scales, float* d_offsets, const CodecOptions& options, unsigned long long* d_flag,
                            void* stream_ptr) {
    if (auto st = format.check_block(block); !st) return st;
    if (format.rotated())
        return make_error(ErrorCode::kInvalidArgument, format.name() + " is a rotated format: encode_device_queued does not rotate (encode_device does)");
    if (!d_flag) return make_error(ErrorCode::kInvalidArgument, "encode_device_queued: no flag word");
    const auto stream = static_cast<cudaStream_t>(stream_ptr);
    QT_CUDA_CHECK(cudaMemsetAsync(d_flag, 0xff, sizeof(unsigned long long), stream));
    if (n == 0) return Status::Ok();
    if (auto st = format.check_tensor(n, block); !st) return st;
    return queue_encode(format, ArraySource{d_x}, plain_layout(format, n, block), DeviceEncodedOut{d_codes, d_scales, d_offsets},
                        options, stream, tracks_refusals(format, options) ? d_flag : nullptr,
                        "qtransit::encode_group_kernel (queued)", "qtransit::encode_cta_kernel (queued)");
}

Status encode_swizzled_device(const FormatSpec& format, const SwizzleLayout& sl, const float* d_x, int64_t block,
                              DeviceEncodedOut out, const CodecOptions& options, void* stream_ptr) {
    if (auto st = format.check_block(block); !st) return st;
    if (format.rotated())
        return make_error(ErrorCode::kInvalidArgument, format.name() + " is a rotated format: the fused steps do not rotate (encode and decode do)");
    if (sl.ranks < 1 || sl.ranks_per_node < 1 || sl.ranks % sl.ranks_per_node != 0 ||
        sl.chunk_elements * sl.ranks != sl.elements)
        return make_error(ErrorCode::kInvalidArgument, "encode_swizzled_device: the layout is not one of swizzle_layout()");
    if (sl.chunk_elements == 0) return Status::Ok();
    const Layout L{sl.total_blocks(), sl.chunk_elements, sl.chunk_blocks, sl.chunk_code_bytes, sl.ranks_per_node,
                   sl.nodes(), block, format.code_bytes(block)};
    return launch_encode(format, ArraySource{d_x}, L, out, options, static_cast<cudaStream_t>(stream_ptr),
                         "qtransit::encode_group_kernel (swizzled)", "qtransit::encode_cta_kernel (swizzled)",
                         [&](int64_t bad) {
                             int64_t first, len, coff;
                             L.map(bad, first, len, coff);
                             return describe_from_device(format, d_x, first, len, options.site);
                         });
}

Status reduce_requantize_device(const FormatSpec& format, int64_t block, std::span<const DeviceEncoded> inputs,
                                int64_t n, Accum accum, DeviceEncodedOut out, const CodecOptions& options,
                                void* stream_ptr) {
    if (auto st = format.check_block(block); !st) return st;
    if (format.rotated())
        return make_error(ErrorCode::kInvalidArgument, format.name() + " is a rotated format: the fused steps do not rotate (encode and decode do)");
    if (inputs.empty() || inputs.size() > static_cast<size_t>(kMaxReduceInputs))
        return make_error(ErrorCode::kInvalidArgument, "reduce_requantize_device: between 1 and " +
                                                           std::to_string(kMaxReduceInputs) + " inputs, got " +
                                                           std::to_string(inputs.size()));
    if (n == 0) return Status::Ok();
    ReduceSource src{};
    src.count = static_cast<int>(inputs.size());
    src.accum = accum;
    src.block_bytes = format.code_bytes(block);
    for (size_t g = 0; g < inputs.size(); ++g) {
        src.in.codes[g] = inputs[g].codes;
        src.in.scales[g] = inputs[g].scales;
        src.in.offsets[g] = inputs[g].offsets;
    }
    const Layout L = plain_layout(format, n, block);
    auto stream = static_cast<cudaStream_t>(stream_ptr);
    return launch_encode(format, src, L, out, options, stream, "qtransit::encode_group_kernel (reduce)",
                         "qtransit::encode_cta_kernel (reduce)", [&](int64_t bad) -> Status {
                             // Rebuild the refused block's sum on the host with the same arithmetic.
                             const int64_t first = bad * block, len = std::min(block, n - first);
                             const int64_t cb = format.code_bytes(len);
                             std::vector<float> sum(static_cast<size_t>(len)), term(static_cast<size_t>(len));
                             std::vector<uint8_t> codes(static_cast<size_t>(cb));
                             for (size_t g = 0; g < inputs.size(); ++g) {
                                 float s = 0, lo = 0;
                                 QT_CUDA_CHECK(cudaMemcpy(codes.data(), inputs[g].codes + bad * src.block_bytes,
                                                          codes.size(), cudaMemcpyDeviceToHost));
                                 QT_CUDA_CHECK(cudaMemcpy(&s, inputs[g].scales + bad, sizeof s, cudaMemcpyDeviceToHost));
                                 if (format.has_offset())
                                     QT_CUDA_CHECK(cudaMemcpy(&lo, inputs[g].offsets + bad, sizeof lo, cudaMemcpyDeviceToHost));
                                 decode_block(format, codes.data(), len, s, lo, term.data());
                                 for (size_t i = 0; i < sum.size(); ++i)
                                     sum[i] = g == 0 ? accum_first(term[i], accum) : accum_add(sum[i], term[i], accum);
                             }
                             Site site = options.site;
                             if (site.tensor == "input") site.tensor = "reduced sum";
                             return describe_block_error(format, sum.data(), len, first, site);
                         });
}

namespace {
Status launch_decode(const FormatSpec& format, int64_t block, DeviceEncoded in, const float* d_own, float* d_out,
                     int64_t n, Accum accum, cudaStream_t stream, const char* name) {
    const int64_t ppb = (block + kPiece - 1) / kPiece;
    const int64_t pieces = ((n + block - 1) / block) * ppb;
    auto f = fmt_of(format);
    if (!f) return f.error();
    decode_kernel<<<grid_for(pieces, 256), 256, 0, stream>>>(*f, n, block, format.code_bytes(block), ppb,
                                                             log2_exact(ppb), in.codes, in.scales, in.offsets, d_own,
                                                             accum, d_out);
    QT_CUDA_LAUNCH_CHECK(name);
    return Status::Ok();
}
}  // namespace

Status decode_device(const FormatSpec& format, int64_t block, const uint8_t* d_codes, const float* d_scales,
                     const float* d_offsets, float* d_out, int64_t n, void* stream_ptr, const SignKey& key) {
    if (auto st = format.check_block(block); !st) return st;
    if (n == 0) return Status::Ok();
    const auto stream = static_cast<cudaStream_t>(stream_ptr);
    if (auto st = launch_decode(format, block, DeviceEncoded{d_codes, d_scales, d_offsets}, nullptr, d_out, n, Accum::kFp32,
                                stream, "qtransit::decode_kernel");
        !st)
        return st;
    if (!format.rotated()) return Status::Ok();
    const RotLayout R{n, block, format.decl->random_signs, key};
    if (auto st = rot_stages(R, d_out, stream, d_scales); !st) return st;
    rot_finish_kernel<<<grid_for(n, 256), 256, 0, stream>>>(R, d_out, d_scales);
    QT_CUDA_LAUNCH_CHECK("qtransit::rot_finish_kernel");
    return Status::Ok();
}

Status decode_add_device(const FormatSpec& format, int64_t block, DeviceEncoded in, const float* d_own, float* d_out,
                         int64_t n, Accum accum, void* stream_ptr) {
    if (auto st = format.check_block(block); !st) return st;
    if (format.rotated())
        return make_error(ErrorCode::kInvalidArgument, format.name() + " is a rotated format: the fused steps do not rotate (encode and decode do)");
    if (n == 0) return Status::Ok();
    if (!d_own) return make_error(ErrorCode::kInvalidArgument, "decode_add_device: no own values");
    return launch_decode(format, block, in, d_own, d_out, n, accum, static_cast<cudaStream_t>(stream_ptr),
                         "qtransit::decode_kernel (decode-add)");
}

// ---- device memory --------------------------------------------------------------------------------
Result<void*> device_alloc(size_t bytes) {
    void* p = nullptr;
    QT_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    return p;
}
void device_free(void* p) {
    if (p) cudaFree(p);
}
Status copy_to_device(void* d_dst, const void* src, size_t bytes) {
    if (bytes) QT_CUDA_CHECK(cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice));
    return Status::Ok();
}
Status copy_to_host(void* dst, const void* d_src, size_t bytes) {
    if (bytes) QT_CUDA_CHECK(cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost));
    return Status::Ok();
}
Status device_fill(void* d_dst, int byte, size_t bytes) {
    if (bytes) QT_CUDA_CHECK(cudaMemset(d_dst, byte, bytes));
    return Status::Ok();
}
Status device_synchronize() {
    QT_CUDA_CHECK(cudaDeviceSynchronize());
    return Status::Ok();
}

namespace {
// Device buffers freed on every path out.
template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
    ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
    Status alloc(size_t count) {
        QT_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T)));
        return Status::Ok();
    }
    template <class V>
    Status upload(const V& v) {
        if (auto st = alloc(v.size()); !st) return st;
        if (!v.empty()) QT_CUDA_CHECK(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
        return Status::Ok();
    }
};
struct DeviceTensor {
    DeviceBuffer<uint8_t> codes;
    DeviceBuffer<float> scales, offsets;
    Status upload(const EncodedTensor& t) {
        if (auto st = codes.upload(t.codes); !st) return st;
        if (auto st = scales.upload(t.scales); !st) return st;
        return offsets.upload(t.offsets);
    }
    DeviceEncoded view() const { return {codes.ptr, scales.ptr, offsets.ptr}; }
};
}  // namespace

Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options) {
    if (auto st = format.check_block(block); !st) return st.error();
    EncodedTensor t = sized_encoded(format, static_cast<int64_t>(x.size()), block);
    DeviceBuffer<float> dx, ds, doff;
    DeviceBuffer<uint8_t> dc;
    if (auto st = dx.upload(x); !st) return st.error();
    if (auto st = dc.alloc(t.codes.size()); !st) return st.error();
    if (auto st = ds.alloc(t.scales.size()); !st) return st.error();
    if (auto st = doff.alloc(t.offsets.size()); !st) return st.error();
    if (auto st = encode_device(format, dx.ptr, t.elements, block, dc.ptr, ds.ptr, doff.ptr, options); !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(t.codes.data(), dc.ptr, t.codes.size(), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.scales.data(), ds.ptr, t.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.offsets.data(), doff.ptr, t.offsets.size() * sizeof(float), cudaMemcpyDeviceToHost));
    t.key = sign_key(options);
    return t;
}

Result<std::vector<float>> decode(const EncodedTensor& t) {
    std::vector<float> out(static_cast<size_t>(t.elements));
    DeviceTensor dt;
    DeviceBuffer<float> dout;
    if (auto st = dt.upload(t); !st) return st.error();
    if (auto st = dout.alloc(out.size()); !st) return st.error();
    if (auto st = decode_device(t.format, t.block, dt.codes.ptr, dt.scales.ptr, dt.offsets.ptr, dout.ptr, t.elements,
                                nullptr, t.key);
        !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(out.data(), dout.ptr, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

Result<EncodedTensor> reduce_requantize(std::span<const EncodedTensor> inputs, Accum accum,
                                        const CodecOptions& options) {
    if (inputs.empty()) return make_error(ErrorCode::kInvalidArgument, "reduce: no inputs");
    const EncodedTensor& a = inputs.front();
    for (const auto& t : inputs)
        if (t.format.name() != a.format.name() || t.block != a.block || t.elements != a.elements)
            return make_error(ErrorCode::kInvalidArgument, "reduce: inputs differ in format, block or length");
    std::vector<DeviceTensor> din(inputs.size());
    std::vector<DeviceEncoded> views;
    for (size_t g = 0; g < inputs.size(); ++g) {
        if (auto st = din[g].upload(inputs[g]); !st) return st.error();
        views.push_back(din[g].view());
    }
    EncodedTensor t = sized_encoded(a.format, a.elements, a.block);
    DeviceTensor dout;
    if (auto st = dout.codes.alloc(t.codes.size()); !st) return st.error();
    if (auto st = dout.scales.alloc(t.scales.size()); !st) return st.error();
    if (auto st = dout.offsets.alloc(t.offsets.size()); !st) return st.error();
    if (auto st = reduce_requantize_device(a.format, a.block, views, a.elements, accum,
                                           DeviceEncodedOut{dout.codes.ptr, dout.scales.ptr, dout.offsets.ptr}, options);
        !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(t.codes.data(), dout.codes.ptr, t.codes.size(), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.scales.data(), dout.scales.ptr, t.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.offsets.data(), dout.offsets.ptr, t.offsets.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return t;
}

Result<std::vector<float>> decode_add(const EncodedTensor& in, std::span<const float> own, Accum accum) {
    if (static_cast<int64_t>(own.size()) != in.elements)
        return make_error(ErrorCode::kInvalidArgument, "decode_add: own must have the tensor's length");
    std::vector<float> out(static_cast<size_t>(in.elements));
    DeviceTensor dt;
    DeviceBuffer<float> down, dout;
    if (auto st = dt.upload(in); !st) return st.error();
    if (auto st = down.upload(own); !st) return st.error();
    if (auto st = dout.alloc(out.size()); !st) return st.error();
    if (auto st = decode_add_device(in.format, in.block, dt.view(), down.ptr, dout.ptr, in.elements, accum); !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(out.data(), dout.ptr, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

}  // namespace qtransit::kernels::gpu
