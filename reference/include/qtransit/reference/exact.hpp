// Exact dyadic rationals: m * 2^e with an arbitrary-precision integer m (Boost.Multiprecision).
// Every binary32 and binary16 value, and every sum, difference and product of them, is exact here,
// so errors and bounds are compared with no rounding at all (NUMERICS.md section 6).
#pragma once

#include <boost/multiprecision/cpp_int.hpp>
#include <cstdint>
#include <string>

namespace qtransit::reference {

class Exact {
public:
    using Int = boost::multiprecision::cpp_int;

    Exact() = default;                      // 0
    explicit Exact(float v);                // exact; v must be finite (asserted; a release build gives 0)
    explicit Exact(double v);               // exact; v must be finite (asserted; a release build gives 0)
    static Exact from_int(int64_t v);
    static Exact pow2(int e);               // 2^e, any e
    static Exact scaled(Int m, int64_t e);  // m 2^e
    // v 2^149 as an integer: exact for every finite binary32 v (the reference's exact matrices work
    // on these, reference/src/hadamard.cpp).
    static Int fixed149(float v);

    Exact operator+(const Exact& o) const;
    Exact operator-(const Exact& o) const;
    Exact operator*(const Exact& o) const;  // exact: the product of dyadics is dyadic
    Exact operator-() const;
    Exact& operator+=(const Exact& o) { return *this = *this + o; }
    Exact& operator-=(const Exact& o) { return *this = *this - o; }
    Exact abs() const;
    int sign() const;                       // -1, 0, 1
    int64_t ilogb() const;                  // floor(log2 |x|); x must be non-zero

    friend bool operator==(const Exact& a, const Exact& b) { return a.cmp(b) == 0; }
    friend bool operator<(const Exact& a, const Exact& b) { return a.cmp(b) < 0; }
    friend bool operator<=(const Exact& a, const Exact& b) { return a.cmp(b) <= 0; }
    friend bool operator>(const Exact& a, const Exact& b) { return a.cmp(b) > 0; }
    friend bool operator>=(const Exact& a, const Exact& b) { return a.cmp(b) >= 0; }

    double to_double() const;               // nearest double (for reporting only, never for checks)
    // a / b as a double, for ratios such as |error| / bound in reports (b != 0).
    static double ratio(const Exact& a, const Exact& b);
    std::string to_string() const;          // "m*2^e", for failure messages

private:
    int cmp(const Exact& o) const;
    void normalize();                       // m odd or zero (zero has e = 0)
    Int m_ = 0;
    int64_t e_ = 0;
};

}  // namespace qtransit::reference
