// An exact accumulator of binary32 values: Neal's "small superaccumulator" (R. M. Neal, "Fast
// exact summation using small and large superaccumulators", 2015), the anchor NUMERICS.md section 6
// names for large simulations.
//
// Representation: a fixed-point number sum_i c_[i] * 2^(32 i - 149), i = 0..kChunks-1, with signed
// 64-bit chunks that each carry 32 bits of significance, so that carries can be deferred: an add
// touches two chunks with no carry propagation, and the 32 spare bits of every chunk absorb up to
// 2^30 adds before the carries must be propagated (normalize(), done automatically). The LSB 2^-149
// is the smallest binary32 subnormal, so every finite binary32 value is an integer multiple of it;
// the 12 chunks reach 2^(384 - 149) = 2^235, enough for 2^31 summands of magnitude up to
// 2^128 (2^159), with room for merging many accumulators.
//
// Doubles: a double is accepted exactly when it is a multiple of 2^-149 of magnitude below 2^200
// (add(double) says whether it was); compare(double) is exact for every double, whatever its bits.
//
// to_double() is correctly rounded (round to nearest, ties to even). sign() and compare() are exact.
#pragma once

#include <array>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qtransit/reference/exact.hpp"

namespace qtransit::reference {

// 2^e as a double, exactly, for -1022 <= e <= 1023 (a normal power of two, built from its bits).
inline double pow2_double(int e) { return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52); }

class SuperAcc {
public:
    static constexpr int kChunks = 12;
    static constexpr int kLsbExp = -149;  // weight of bit 0 of chunk 0

    SuperAcc() = default;
    explicit SuperAcc(float v) { add(v); }

    // Exact add of a finite binary32 value (a few ns: two integer adds, no branches on the value).
    // A NaN or inf is not added; it sets a sticky flag (nonfinite()) and to_double() then returns NaN.
    void add(float v) {
        const uint32_t b = std::bit_cast<uint32_t>(v);
        const uint32_t ef = (b >> 23) & 0xFFu;
        if (ef == 0xFFu) [[unlikely]] {
            nonfinite_ = true;
            return;
        }
        int64_t m = static_cast<int64_t>((b & 0x7FFFFFu) | (ef != 0 ? 0x800000u : 0u));
        // A subnormal has its LSB at 2^-149 (position 0); a normal number with exponent field ef
        // has its LSB at 2^(ef - 150), position ef - 1.
        const uint32_t p = ef - (ef != 0 ? 1u : 0u);
        if (b >> 31) m = -m;
        const int64_t full = m * (int64_t{1} << (p & 31u));  // |full| < 2^55
        const uint32_t idx = p >> 5;                          // <= 7
        c_[idx] += full & 0xFFFFFFFFLL;                       // low 32 bits, in [0, 2^32)
        c_[idx + 1] += full >> 32;                            // the rest (floor), |.| <= 2^23
        if (++pending_ >= kMaxPending) [[unlikely]] normalize();
    }
    void sub(float v) { add(-v); }

    // Exact add of a double that is a multiple of 2^-149 with |v| < 2^200. Returns false (and adds
    // nothing) for any other double.
    bool add(double v);
    static bool representable(double v);

    void add(const SuperAcc& o);
    void sub(const SuperAcc& o);
    void negate();
    void clear() { *this = SuperAcc(); }

    int sign() const;                      // -1, 0, 1 (exact)
    int compare(const SuperAcc& o) const;  // sign of *this - o (exact)
    int compare(double d) const;           // sign of *this - d (exact; d must not be NaN: asserted)
    int compare_abs(double d) const;       // sign of |*this| - d (exact)
    bool is_zero() const { return sign() == 0; }
    bool nonfinite() const { return nonfinite_; }

    double to_double() const;  // correctly rounded, ties to even (NaN if a non-finite was added)
    Exact to_exact() const;    // exact (for cross-checks)

private:
    static constexpr int32_t kMaxPending = 1 << 30;
    void normalize() const;  // propagate carries: chunks 0..kChunks-2 in [0, 2^32), the top one signed
    // Invariant: |c_[i]| < (pending_ + 1) * 2^32 for every chunk but the top one (which after
    // normalize holds the whole value's sign and its top bits, far below 2^62 in any real use).
    mutable std::array<int64_t, kChunks> c_{};
    mutable int32_t pending_ = 0;
    bool nonfinite_ = false;
};

// An exact accumulator of doubles, for sums whose bits must not depend on the order of their terms:
// the checker's sums of squared errors and targets, which it adds per output row and merges across
// threads and processes (D34). SuperAcc's construction over binary64's whole range: 32-bit chunks
// in signed 64-bit words from 2^-1074 (the smallest subnormal) up, carries deferred, 68 chunks
// (2^-1074 .. 2^1102) so that 2^30 terms of any finite magnitude fit (an add_times term is at most
// 2^31 times one: 2^1055 at most, and 2^30 of them still fit). Off the hot path: two adds
// per output row, one rounding when a caller reads the sum.
class DoubleAcc {
public:
    static constexpr int kChunks = 68;
    static constexpr size_t kWords = kChunks + 3;  // to_words()'s length

    // Exact for a finite v; an infinity or NaN is remembered and decides to_double() as an IEEE sum
    // of the terms would (inf, -inf, or NaN for a NaN or both infinities).
    void add(double v);
    // add(v), n times (n <= 0: nothing), as one term: v's significand times n, exactly. The checker
    // adds a gather's identical rows so (every rank holds the same value against the same target).
    void add_times(double v, int64_t n);
    void add(const DoubleAcc& o);
    double to_double() const;  // the exact sum, correctly rounded (ties to even); +-inf past DBL_MAX

    // The accumulator as kWords doubles, each exact (the normalized chunks: below 2^32 but the top
    // one, which stays far below 2^53; then the three flags as 0 or 1), and back: how the sums of
    // other processes travel (--backend mpi).
    std::vector<double> to_words() const;
    static DoubleAcc from_words(const double* w);

private:
    static constexpr int kLsbExp = -1074;
    static constexpr int32_t kMaxPending = 1 << 30;
    void normalize() const;  // as SuperAcc's
    mutable std::array<int64_t, kChunks> c_{};
    mutable int32_t pending_ = 0;
    bool pos_inf_ = false, neg_inf_ = false, nan_ = false;
};

}  // namespace qtransit::reference
