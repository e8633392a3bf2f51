// Exact dyadic rationals m * 2^e (see exact.hpp). Normal form: m odd, or m == 0 with e == 0, so
// that equal values have equal representations and comparisons can look at magnitudes first.
//
// Speed matters a little (check_bounds runs this per element): the hot paths avoid temporaries
// where they can (equal exponents add directly; comparisons decide on sign and bit position before
// aligning anything), and small values stay in cpp_int's inline limbs without allocating.
#include "qtransit/reference/exact.hpp"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace qtransit::reference {

namespace {

using Int = Exact::Int;
using boost::multiprecision::limb_type;
constexpr int kLimbBits = static_cast<int>(sizeof(limb_type) * 8);

// Index of the most significant set bit of |m| (m != 0), read from the limbs (no temporaries).
int64_t mag_msb(const Int& m) {
    const auto& b = m.backend();
    const std::size_t n = b.size();
    const limb_type top = b.limbs()[n - 1];
    return static_cast<int64_t>(n - 1) * kLimbBits + (kLimbBits - 1 - std::countl_zero(top));
}

// Index of the least significant set bit of |m| (m != 0).
int64_t mag_lsb(const Int& m) {
    const auto& b = m.backend();
    const limb_type* l = b.limbs();
    for (std::size_t i = 0;; ++i)
        if (l[i] != 0) return static_cast<int64_t>(i) * kLimbBits + std::countr_zero(l[i]);
}

bool mag_bit(const Int& m, int64_t i) {
    const auto& b = m.backend();
    const std::size_t limb = static_cast<std::size_t>(i / kLimbBits);
    if (i < 0 || limb >= b.size()) return false;
    return (b.limbs()[limb] >> (i % kLimbBits)) & 1u;
}

// Round |m| * 2^e (m != 0) to the nearest double, ties to even, with gradual underflow and
// overflow to infinity. Returns the magnitude.
double mag_to_double(const Int& m, int64_t e) {
    const int64_t top = mag_msb(m);          // |m| in [2^top, 2^(top+1))
    const int64_t exp2 = top + e;            // floor(log2 |value|)
    if (exp2 > 1023) return std::numeric_limits<double>::infinity();
    if (exp2 < -1076) return 0.0;            // below half the smallest subnormal
    // Bits of precision available at this magnitude: 53 for normal doubles, fewer below 2^-1022.
    const int64_t p = exp2 >= -1022 ? 53 : 53 - (-1022 - exp2);
    const int64_t nbits = top + 1;
    const int64_t shift = nbits - p;         // low bits of |m| that do not fit
    if (shift <= 0) {
        // |m| has at most p <= 53 bits: exact.
        const uint64_t v = static_cast<uint64_t>(boost::multiprecision::abs(m));
        return std::ldexp(static_cast<double>(v), static_cast<int>(e));
    }
    uint64_t kept = 0;
    if (shift < nbits) kept = static_cast<uint64_t>(boost::multiprecision::abs(m) >> shift);
    const bool half = mag_bit(m, shift - 1);
    const bool sticky = shift - 1 > 0 && mag_lsb(m) < shift - 1;
    if (half && (sticky || (kept & 1u))) ++kept;  // kept <= 2^p: exact in a double
    return std::ldexp(static_cast<double>(kept), static_cast<int>(e + shift));
}

}  // namespace

Exact::Exact(double v) {
    assert(std::isfinite(v) && "Exact: only finite values are representable");
    if (!std::isfinite(v) || v == 0) return;  // non-finite: documented precondition; yields 0
    int exp = 0;
    const double mant = std::frexp(v, &exp);                       // v = mant * 2^exp, |mant| in [0.5, 1)
    int64_t mi = static_cast<int64_t>(std::ldexp(mant, 53));      // exact: 53 significant bits
    int64_t e = static_cast<int64_t>(exp) - 53;
    const int tz = std::countr_zero(static_cast<uint64_t>(mi < 0 ? -mi : mi));
    mi >>= tz;  // exact: only zero bits go (arithmetic shift keeps the sign)
    e += tz;
    m_ = mi;
    e_ = e;
}

Exact::Exact(float v) : Exact(static_cast<double>(v)) {}

Exact Exact::from_int(int64_t v) {
    Exact r;
    r.m_ = v;
    r.e_ = 0;
    r.normalize();
    return r;
}

Exact Exact::scaled(Int m, int64_t e) {
    Exact r;
    r.m_ = std::move(m);
    r.e_ = e;
    r.normalize();
    return r;
}

Exact::Int Exact::fixed149(float v) {
    assert(std::isfinite(v));
    if (!std::isfinite(v) || v == 0) return Int(0);
    int exp = 0;
    const float mant = std::frexp(v, &exp);  // v = mant 2^exp, |mant| in [0.5, 1)
    const int64_t mi = static_cast<int64_t>(std::ldexp(mant, 24));  // exact: 24 significant bits
    const int64_t shift = static_cast<int64_t>(exp) - 24 + 149;  // >= -23: a subnormal's low bits are zero
    if (shift < 0) return Int(mi >> -shift);
    Int m = mi;
    return m << static_cast<unsigned>(shift);
}

Exact Exact::pow2(int e) {
    Exact r;
    r.m_ = 1;
    r.e_ = e;
    return r;
}

void Exact::normalize() {
    if (m_.is_zero()) {
        e_ = 0;
        return;
    }
    const int64_t k = mag_lsb(m_);
    if (k > 0) {
        m_ >>= static_cast<unsigned>(k);  // only zero bits go
        e_ += k;
    }
}

Exact Exact::operator+(const Exact& o) const {
    if (o.m_.is_zero()) return *this;
    if (m_.is_zero()) return o;
    Exact r;
    if (e_ == o.e_) {
        // Fast path: same exponent, one addition.
        r.m_ = m_ + o.m_;
        r.e_ = e_;
    } else if (e_ > o.e_) {
        r.m_ = m_;
        r.m_ <<= static_cast<unsigned>(e_ - o.e_);
        r.m_ += o.m_;
        r.e_ = o.e_;
    } else {
        r.m_ = o.m_;
        r.m_ <<= static_cast<unsigned>(o.e_ - e_);
        r.m_ += m_;
        r.e_ = e_;
    }
    r.normalize();
    return r;
}

Exact Exact::operator-() const {
    Exact r = *this;
    r.m_ = -r.m_;
    return r;
}

Exact Exact::operator-(const Exact& o) const { return *this + (-o); }

Exact Exact::operator*(const Exact& o) const {
    Exact r;
    if (m_.is_zero() || o.m_.is_zero()) return r;
    r.m_ = m_ * o.m_;  // odd * odd is odd: already normal
    r.e_ = e_ + o.e_;
    return r;
}

Exact Exact::abs() const {
    Exact r = *this;
    if (r.m_.sign() < 0) r.m_ = -r.m_;
    return r;
}

int Exact::sign() const { return m_.sign(); }

int Exact::cmp(const Exact& o) const {
    const int sa = m_.sign(), sb = o.m_.sign();
    if (sa != sb) return sa < sb ? -1 : 1;
    if (sa == 0) return 0;
    // Same sign, both non-zero: compare magnitudes, then apply the sign.
    const int64_t ta = mag_msb(m_) + e_, tb = mag_msb(o.m_) + o.e_;
    int mag = 0;
    if (ta != tb) {
        mag = ta < tb ? -1 : 1;
    } else if (e_ == o.e_) {
        mag = m_.compare(o.m_) * sa;  // same sign: compare() on signed values, undo the sign
        mag = mag < 0 ? -1 : (mag > 0 ? 1 : 0);
    } else if (e_ > o.e_) {
        Int a = m_;
        a <<= static_cast<unsigned>(e_ - o.e_);
        const int c = a.compare(o.m_) * sa;
        mag = c < 0 ? -1 : (c > 0 ? 1 : 0);
    } else {
        Int b = o.m_;
        b <<= static_cast<unsigned>(o.e_ - e_);
        const int c = m_.compare(b) * sa;
        mag = c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    return sa > 0 ? mag : -mag;
}

int64_t Exact::ilogb() const {
    assert(!m_.is_zero());
    return mag_msb(m_) + e_;
}

double Exact::to_double() const {
    if (m_.is_zero()) return 0.0;
    const double mag = mag_to_double(m_, e_);
    return m_.sign() < 0 ? -mag : mag;
}

double Exact::ratio(const Exact& a, const Exact& b) {
    assert(!b.m_.is_zero());
    if (a.m_.is_zero()) return 0.0;
    if (b.m_.is_zero()) return a.sign() > 0 ? std::numeric_limits<double>::infinity()
                                            : -std::numeric_limits<double>::infinity();
    // |a.m| * 2^k / |b.m| with k chosen so that the integer quotient has at least 64 bits; a
    // non-zero remainder becomes a sticky bit below them, so rounding the result to 53 bits is
    // correct (the quotient carries > 2 guard bits).
    Int na = boost::multiprecision::abs(a.m_), nb = boost::multiprecision::abs(b.m_);
    int64_t k = mag_msb(nb) - mag_msb(na) + 66;
    if (k < 0) k = 0;
    na <<= static_cast<unsigned>(k);
    Int rem;
    Int quo;
    boost::multiprecision::divide_qr(na, nb, quo, rem);
    quo <<= 1;
    if (!rem.is_zero()) quo += 1;
    const double mag = mag_to_double(quo, a.e_ - b.e_ - k - 1);
    return a.m_.sign() * b.m_.sign() < 0 ? -mag : mag;
}

std::string Exact::to_string() const {
    if (m_.is_zero()) return "0";
    return m_.str() + "*2^" + std::to_string(e_);
}

}  // namespace qtransit::reference
