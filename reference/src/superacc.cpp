// Neal's small superaccumulator (see superacc.hpp): the parts off the hot path.
#include "qtransit/reference/superacc.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace qtransit::reference {

namespace {
using u128 = unsigned __int128;
constexpr int64_t kLow32 = 0xFFFFFFFFLL;

// Every chunk of c[0..n) but the top one into [0, 2^32), its excess carried up: the normalized
// form of SuperAcc and DoubleAcc (the top chunk holds the sign).
void propagate_carries(int64_t* c, int n) {
    for (int i = 0; i + 1 < n; ++i) {
        const int64_t carry = c[i] >> 32;  // floor division by 2^32
        c[i] &= kLow32;                    // c[i] - carry * 2^32, in [0, 2^32)
        c[i + 1] += carry;
    }
}
}  // namespace

void SuperAcc::normalize() const {
    propagate_carries(c_.data(), kChunks);
    pending_ = 0;
}

namespace {
// v = m * 2^e with m odd (or v == 0: m = 0), read from the bits (no libm on the hot path). False for
// a NaN or an infinity.
bool odd_decompose(double v, uint64_t& m, int& e) {
    const uint64_t b = std::bit_cast<uint64_t>(v);
    const int ef = static_cast<int>((b >> 52) & 0x7FF);
    if (ef == 0x7FF) return false;
    m = b & ((uint64_t{1} << 52) - 1);
    if (ef == 0) {
        e = -1074;  // a subnormal double: m * 2^-1074
    } else {
        m |= uint64_t{1} << 52;
        e = ef - 1075;
    }
    if (m == 0) return true;
    const int tz = std::countr_zero(m);
    m >>= tz;
    e += tz;
    return true;
}
}  // namespace

bool SuperAcc::representable(double v) {
    uint64_t m = 0;
    int e = 0;
    if (!odd_decompose(v, m, e)) return false;
    if (m == 0) return true;
    // A multiple of 2^-149 below 2^200 in magnitude: the odd mantissa's weight is on the grid, and
    // its top bit (at e + bit_width(m) - 1) is below 200.
    return e >= kLsbExp && e + static_cast<int>(std::bit_width(m)) - 1 < 200;
}

bool SuperAcc::add(double v) {
    uint64_t m = 0;
    int e = 0;
    if (!odd_decompose(v, m, e)) return false;
    if (m == 0) return true;
    if (e < kLsbExp || e + static_cast<int>(std::bit_width(m)) - 1 >= 200) return false;
    const int p = e - kLsbExp;
    const int idx = p >> 5;
    const u128 full = static_cast<u128>(m) << (p & 31);  // < 2^84
    const int64_t pieces[3] = {static_cast<int64_t>(full & kLow32), static_cast<int64_t>((full >> 32) & kLow32),
                               static_cast<int64_t>(full >> 64)};
    for (int k = 0; k < 3; ++k) {
        if (pieces[k] == 0) continue;
        assert(idx + k < kChunks);  // |v| < 2^200: its top bit is at position <= 348, chunk 10
        c_[idx + k] += v < 0 ? -pieces[k] : pieces[k];
    }
    if (++pending_ >= kMaxPending) normalize();
    return true;
}

void SuperAcc::add(const SuperAcc& o) {
    normalize();
    o.normalize();
    for (int i = 0; i < kChunks; ++i) c_[i] += o.c_[i];
    pending_ = 1;  // every chunk below the top is now < 2 * 2^32
    nonfinite_ = nonfinite_ || o.nonfinite_;
}

void SuperAcc::sub(const SuperAcc& o) {
    normalize();
    o.normalize();
    for (int i = 0; i < kChunks; ++i) c_[i] -= o.c_[i];
    pending_ = 1;
    nonfinite_ = nonfinite_ || o.nonfinite_;
}

void SuperAcc::negate() {
    for (auto& c : c_) c = -c;  // magnitudes unchanged: the invariant still holds
}

int SuperAcc::sign() const {
    normalize();
    const int64_t top = c_[kChunks - 1];
    if (top != 0) return top > 0 ? 1 : -1;
    for (int i = kChunks - 2; i >= 0; --i)
        if (c_[i] != 0) return 1;  // the lower chunks are non-negative after normalize()
    return 0;
}

int SuperAcc::compare(const SuperAcc& o) const {
    SuperAcc t = *this;
    t.sub(o);
    return t.sign();
}

int SuperAcc::compare(double d) const {
    assert(!std::isnan(d));
    if (std::isnan(d)) return 0;
    if (std::isinf(d)) return d > 0 ? -1 : 1;
    if (std::fabs(d) >= 0x1p200) {  // rare: beyond the fast path, compare exactly with Boost
        const Exact diff = to_exact() - Exact(d);
        return diff.sign();
    }
    SuperAcc t = *this;
    if (t.add(-d)) return t.sign();
    // d is not on the 2^-149 grid: g = the grid point just below d (exact: power-of-two scalings
    // and floor of a double are exact), g < d < g + 2^-149, and *this is on the grid, so
    // *this > d iff *this > g, and *this <= g implies *this < d.
    const double g = std::ldexp(std::floor(std::ldexp(d, 149)), -149);
    const bool ok = t.add(-g);
    assert(ok);
    (void)ok;
    const int s = t.sign();
    return s > 0 ? 1 : -1;
}

int SuperAcc::compare_abs(double d) const {
    if (sign() >= 0) return compare(d);
    SuperAcc t = *this;
    t.negate();
    return t.compare(d);
}

namespace {
// The magnitude of non-negative 32-bit chunks c[0..t] (c[t] != 0, chunk i of weight 2^(32 i + lsb_exp)),
// rounded to the nearest double, ties to even: the top three chunks hold the 53 bits and the
// rounding bit, anything below is sticky. Below 2^-1022 the result has binary64's subnormal
// spacing; at or past 2^1024 after rounding it is inf.
double round_chunks(const int64_t* c, int t, int lsb_exp) {
    u128 m = 0;
    for (int k = t; k >= t - 2 && k >= 0; --k) m = (m << 32) | static_cast<u128>(c[k]);
    const int low = t - 2 >= 0 ? t - 2 : 0;
    const int base = 32 * low + lsb_exp;
    bool sticky = false;
    for (int k = 0; k < low; ++k) sticky = sticky || c[k] != 0;
    const uint64_t hi64 = static_cast<uint64_t>(m >> 64);
    const int nbits = hi64 != 0 ? 128 - std::countl_zero(hi64) : 64 - std::countl_zero(static_cast<uint64_t>(m));
    const int lsb = std::max(base + nbits - 53, -1074);  // the result's last bit
    const int shift = lsb - base;
    if (shift <= 0) {  // <= 53 bits and nothing below them (t < 2): exact
        const double k = static_cast<double>(static_cast<uint64_t>(m));
        return base >= -1022 ? k * pow2_double(base) : std::ldexp(k, base);
    }
    uint64_t kept = static_cast<uint64_t>(m >> shift);
    const u128 rest = m & ((static_cast<u128>(1) << shift) - 1);
    const u128 half = static_cast<u128>(1) << (shift - 1);
    if (rest > half || (rest == half && (sticky || (kept & 1u)))) ++kept;  // <= 2^53: exact as a double
    // an exact power-of-two scaling, inf past DBL_MAX (the rounded value is 2^1024 or more)
    return lsb >= -1022 && lsb <= 1023 ? static_cast<double>(kept) * pow2_double(lsb)
                                       : std::ldexp(static_cast<double>(kept), lsb);
}
}  // namespace

double SuperAcc::to_double() const {
    if (nonfinite_) return std::numeric_limits<double>::quiet_NaN();
    const int s = sign();  // normalizes
    if (s == 0) return 0.0;
    SuperAcc mag = *this;
    if (s < 0) {
        mag.negate();
        mag.normalize();
    }
    const auto& c = mag.c_;  // every chunk non-negative now, the lower ones below 2^32
    int t = kChunks - 1;
    while (c[t] == 0) --t;
    const double r = round_chunks(c.data(), t, kLsbExp);  // base >= -149: a normal double
    return s < 0 ? -r : r;
}

Exact SuperAcc::to_exact() const {
    Exact r;
    for (int i = 0; i < kChunks; ++i)
        if (c_[i] != 0) r += Exact::from_int(c_[i]) * Exact::pow2(32 * i + kLsbExp);
    return r;
}

void DoubleAcc::normalize() const {
    propagate_carries(c_.data(), kChunks);
    pending_ = 0;
}

namespace {

// A double as DoubleAcc adds it: its significand m, its least bit's position p (2^-1074 is position
// 0: a subnormal's; a normal's, at 2^(ef - 1075), is ef - 1) and its sign; or what else it is.
enum class Term { kFinite, kZero, kNaN, kPosInf, kNegInf };
Term decode(double v, uint64_t& m, int& p, bool& neg) {
    const uint64_t b = std::bit_cast<uint64_t>(v);
    const int ef = static_cast<int>((b >> 52) & 0x7FF);
    m = b & ((uint64_t{1} << 52) - 1);
    neg = (b >> 63) != 0;
    p = 0;
    if (ef == 0x7FF) return m != 0 ? Term::kNaN : neg ? Term::kNegInf : Term::kPosInf;
    if (ef != 0) m |= uint64_t{1} << 52;
    p = ef != 0 ? ef - 1 : 0;
    return m != 0 ? Term::kFinite : Term::kZero;
}

}  // namespace

void DoubleAcc::add(double v) {
    uint64_t m;
    int p;
    bool neg;
    const Term t = decode(v, m, p, neg);
    if (t != Term::kFinite) {
        nan_ = nan_ || t == Term::kNaN;
        pos_inf_ = pos_inf_ || t == Term::kPosInf;
        neg_inf_ = neg_inf_ || t == Term::kNegInf;
        return;
    }
    const int idx = p >> 5;  // <= 63: the top piece lands in chunk 65 at most
    const u128 full = static_cast<u128>(m) << (p & 31);  // < 2^84
    const int64_t pieces[3] = {static_cast<int64_t>(full & kLow32), static_cast<int64_t>((full >> 32) & kLow32),
                               static_cast<int64_t>(full >> 64)};
    for (int k = 0; k < 3; ++k) c_[idx + k] += neg ? -pieces[k] : pieces[k];
    if (++pending_ >= kMaxPending) normalize();
}

void DoubleAcc::add_times(double v, int64_t n) {
    constexpr int64_t kMaxTimes = (int64_t{1} << 31) - 1;  // m * n < 2^84, shifted below 2^115: four chunks
    for (; n > kMaxTimes; n -= kMaxTimes) add_times(v, kMaxTimes);
    if (n <= 0) return;
    uint64_t m;
    int p;
    bool neg;
    if (decode(v, m, p, neg) != Term::kFinite) {  // add's flags: n infinities are one, n NaNs one
        add(v);
        return;
    }
    const int idx = p >> 5;  // <= 63: the top piece lands in chunk 66 at most
    const u128 full = (static_cast<u128>(m) * static_cast<uint64_t>(n)) << (p & 31);
    const int64_t pieces[4] = {static_cast<int64_t>(full & kLow32), static_cast<int64_t>((full >> 32) & kLow32),
                               static_cast<int64_t>((full >> 64) & kLow32), static_cast<int64_t>(full >> 96)};
    for (int k = 0; k < 4; ++k) c_[idx + k] += neg ? -pieces[k] : pieces[k];
    if (++pending_ >= kMaxPending) normalize();  // each piece below 2^32, as add's
}

void DoubleAcc::add(const DoubleAcc& o) {
    normalize();
    o.normalize();
    for (int i = 0; i < kChunks; ++i) c_[i] += o.c_[i];
    pending_ = 2;  // every chunk below the top is now < 2 * 2^32
    pos_inf_ = pos_inf_ || o.pos_inf_;
    neg_inf_ = neg_inf_ || o.neg_inf_;
    nan_ = nan_ || o.nan_;
}

double DoubleAcc::to_double() const {
    if (nan_ || (pos_inf_ && neg_inf_)) return std::numeric_limits<double>::quiet_NaN();
    if (pos_inf_) return std::numeric_limits<double>::infinity();
    if (neg_inf_) return -std::numeric_limits<double>::infinity();
    normalize();
    // The sign: the top chunk's, or + when only the lower (now non-negative) chunks are non-zero.
    int t = kChunks - 1;
    while (t >= 0 && c_[t] == 0) --t;
    if (t < 0) return 0.0;
    const bool neg = c_[kChunks - 1] < 0;
    std::array<int64_t, kChunks> c = c_;
    if (neg) {  // the magnitude, normalized
        for (auto& x : c) x = -x;
        propagate_carries(c.data(), kChunks);
        t = kChunks - 1;
        while (c[t] == 0) --t;
    }
    // Every chunk is in [0, 2^32) now: fewer than 2^30 terms below 2^1024 stay below chunk 67.
    const double r = round_chunks(c.data(), t, kLsbExp);
    return neg ? -r : r;
}

std::vector<double> DoubleAcc::to_words() const {
    normalize();
    std::vector<double> w(kWords);
    for (int i = 0; i < kChunks; ++i) w[static_cast<size_t>(i)] = static_cast<double>(c_[i]);  // |c| < 2^53: exact
    w[kChunks] = pos_inf_ ? 1 : 0;
    w[kChunks + 1] = neg_inf_ ? 1 : 0;
    w[kChunks + 2] = nan_ ? 1 : 0;
    return w;
}

DoubleAcc DoubleAcc::from_words(const double* w) {
    DoubleAcc a;
    for (int i = 0; i < kChunks; ++i) a.c_[i] = static_cast<int64_t>(w[i]);
    a.pending_ = 1;
    a.pos_inf_ = w[kChunks] != 0;
    a.neg_inf_ = w[kChunks + 1] != 0;
    a.nan_ = w[kChunks + 2] != 0;
    return a;
}

}  // namespace qtransit::reference
