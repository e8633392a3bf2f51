// The rotation's reference (hadamard.hpp). Its exact half uses Eigen over Boost.Multiprecision
// integers (boost/multiprecision/eigen.hpp makes them Eigen scalars): the matrices are small (a
// block), and exactness matters here, not speed.
#include "qtransit/reference/hadamard.hpp"

#include <Eigen/Dense>
#include <boost/multiprecision/cpp_int.hpp>
#include <boost/multiprecision/eigen.hpp>
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "binary32.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/common/shortest.hpp"

namespace qtransit::reference {

namespace {
// Integers without expression templates: Eigen's own expressions take their place.
using BigInt = boost::multiprecision::number<boost::multiprecision::cpp_int_backend<>, boost::multiprecision::et_off>;
using BigMatrix = Eigen::Matrix<BigInt, Eigen::Dynamic, Eigen::Dynamic>;
using BigVector = Eigen::Matrix<BigInt, Eigen::Dynamic, 1>;

bool power_of_two(int64_t n) { return n >= 1 && (n & (n - 1)) == 0; }

// H_n by Sylvester's construction: H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]].
BigMatrix sylvester(int64_t n) {
    BigMatrix h(1, 1);
    h(0, 0) = 1;
    for (int64_t m = 1; m < n; m *= 2) {
        BigMatrix g(2 * m, 2 * m);
        g.topLeftCorner(m, m) = h;
        g.topRightCorner(m, m) = h;
        g.bottomLeftCorner(m, m) = h;
        g.bottomRightCorner(m, m) = -h;
        h = std::move(g);
    }
    return h;
}
}  // namespace

namespace {
// The four words that hold the signs of elements 128 w .. 128 w + 127 (FORMATS.md section 9): Philox4x32-10,
// key (lo32(seed), hi32(seed)), counter (lo32(first), hi32(first), w, 5).
Philox4x32 sign_words(uint64_t seed, int64_t first, uint64_t w) {
    const uint64_t g = static_cast<uint64_t>(first);
    Philox4x32 ctr{};
    ctr.v[0] = static_cast<uint32_t>(g & 0xFFFFFFFFu);
    ctr.v[1] = static_cast<uint32_t>(g >> 32);
    ctr.v[2] = static_cast<uint32_t>(w);
    ctr.v[3] = 5;
    return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}
bool bit_of(const Philox4x32& w, uint64_t i) { return ((w.v[(i / 32) % 4] >> (i % 32)) & 1u) != 0; }
}  // namespace

bool hadamard_negated(uint64_t seed, int64_t first, int64_t i) {
    const uint64_t u = static_cast<uint64_t>(i);
    return bit_of(sign_words(seed, first, u / 128), u);
}

void negate_by_signs(std::span<float> v, uint64_t seed, int64_t first) {
    Philox4x32 w{};
    for (size_t i = 0; i < v.size(); ++i) {
        if (i % 128 == 0) w = sign_words(seed, first, i / 128);
        if (bit_of(w, i)) v[i] = -v[i];
    }
}

void hadamard_fl32(std::span<float> v) {
    const size_t n = v.size();
    assert(power_of_two(static_cast<int64_t>(n)));
    if (n <= 1) return;
    const size_t h = n / 2;
    hadamard_fl32(v.first(h));
    hadamard_fl32(v.subspan(h));
    for (size_t i = 0; i < h; ++i) {
        const float a = v[i], b = v[h + i];
        // fl32(a + b): the C++ float addition, IEEE binary32 to nearest even, as paths.cpp's sums
        // (-ffp-contract=off, no fast math).
        v[i] = a + b;
        v[h + i] = a - b;
    }
}

void rotate_forward(std::span<float> v, bool signs, uint64_t seed, int64_t first) {
    if (signs) negate_by_signs(v, seed, first);
    hadamard_fl32(v);
}

int block_log2(int64_t n) {
    int l = 0;
    while ((int64_t{1} << l) < n) ++l;
    return l;
}

double rotation_limit(int64_t n) {
    return std::ldexp(static_cast<double>(std::numeric_limits<float>::max()), -(block_log2(n) + 2));
}

Status check_rotation_limit(std::span<const float> y, const Site& site, int64_t start, const std::string& format) {
    const double limit = rotation_limit(static_cast<int64_t>(y.size()));
    double top = 0;
    for (float v : y) top = std::max(top, std::isnan(v) ? std::numeric_limits<double>::infinity() : std::fabs(static_cast<double>(v)));
    if (top <= limit) return Status::Ok();
    return make_error(ErrorCode::kRangeOverflow,
                      describe(site, start) + ": block of " + std::to_string(y.size()) + " elements: its Hadamard "
                      "transform reaches " + shortest(static_cast<float>(std::min(top, 3.4e38))) + ", past " +
                      shortest(static_cast<float>(limit)) + " = FLT_MAX 2^-(log2 block + 2) (" + format + ")");
}

void rotate_inverse(std::span<float> v, bool signs, uint64_t seed, int64_t first) {
    hadamard_fl32(v);
    const float inv = std::ldexp(1.0f, -block_log2(static_cast<int64_t>(v.size())));
    for (size_t i = 0; i < v.size(); ++i) v[i] = detail::mul32(v[i], inv);
    if (signs) negate_by_signs(v, seed, first);
}

std::vector<Exact::Int> hadamard_exact_fixed(std::span<const Exact::Int> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    assert(power_of_two(n));
    BigVector x(n);
    for (int64_t i = 0; i < n; ++i) x(i) = BigInt(v[static_cast<size_t>(i)]);
    // lazyProduct, not operator*: Boost 1.74's own operator templates, found by argument-dependent
    // lookup, fail to compile against Eigen 3.4 expressions (is_byte_container).
    const BigVector y = sylvester(n).lazyProduct(x);
    std::vector<Exact::Int> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = Exact::Int(y(i));
    return out;
}

std::vector<Exact> hadamard_exact(std::span<const float> v) {
    std::vector<Exact::Int> fixed(v.size());
    for (size_t i = 0; i < v.size(); ++i) fixed[i] = Exact::fixed149(v[i]);
    const std::vector<Exact::Int> y = hadamard_exact_fixed(fixed);
    std::vector<Exact> out;
    out.reserve(y.size());
    for (const auto& m : y) out.push_back(Exact::scaled(m, -149));
    return out;
}

bool hadamard_orthogonal(int64_t n) {
    if (!power_of_two(n)) return false;
    const BigMatrix h = sylvester(n);
    const BigMatrix p = h.transpose().lazyProduct(h);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
            if (p(i, j) != BigInt(i == j ? n : 0)) return false;
    return true;
}

}  // namespace qtransit::reference
