// Rotated formats in the reference (docs/FORMATS.md section 9): each block is negated by its signs,
// transformed (hadamard.hpp's binary32 transform, from the recursive definition), quantized by the
// element type (decl.cpp, which ignores the transform), and decoded back: dequantized, transformed,
// multiplied by 2^-L and negated by the same signs.
//
// The per-element bound, derived. A block of n = 2^L elements x, signs D = diag(d) (d_i = +-1, or
// all +1), H the unnormalized transform (entries +-1, H H = n I). Encode computes y = fl(H D x);
// the element type turns y into yh with |yh_j - y_j| <= E(y_j) (FORMATS.md section 6 at the block's
// scale); decode computes w = fl(H yh) and x'_i = d_i fl(2^-L w_i). With y* = H D x exactly,
// x = 2^-L D H y*, so
//   x'_i - x_i = d_i [ (fl(2^-L w_i) - 2^-L w_i) + 2^-L (w_i - (H yh)_i) + 2^-L (H (yh - y))_i
//                      + 2^-L (H (y - y*))_i ]
// and, since |H_ij| = 1,
//   |x'_i - x_i| <= |fl(2^-L w_i) - 2^-L w_i| + 2^-L ( |w_i - (H yh)_i| + sum_j E(y_j) + |(H (y - y*))_i| ).
// The reference evaluates this exactly: (H yh) and (H (y - y*)) with Eigen over integers
// (hadamard.hpp), every other term in Exact. The checker's double bound (checker.cpp) replaces the
// two transform rounding terms by their a-priori worst case: each output of fl(H v) is a sum of the
// +-v_j, each through L roundings of relative error at most u, so
//   |fl(H v) - H v|_i <= ((1 + u)^L - 1) sum_j |v_j| <= gamma_L sum_j |v_j|,  gamma_L = L u / (1 - L u),
// and the normalization rounds only below 2^-126 (half a subnormal spacing, 2^-150). Hence
//   |x'_i - x_i| <= 2^-L [ sum_j E(y_j) + gamma_L sum_j |yh_j| ] + gamma_L sum_j |x_j| + 2^-150,
// with sum_j |yh_j| <= sum_j (|y_j| + E(y_j)). The bound is the same for every element of the block.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "binary32.hpp"
#include "decl_internal.hpp"
#include "qtransit/reference/hadamard.hpp"

namespace qtransit::reference {

using detail::kFltMax, detail::mul32;

namespace detail {

Result<Quantized> quantize_rotated(const FormatSpec& f, std::span<const float> x, int64_t block, Nonfinite policy,
                                   const Site& site, const StochasticKey& key) {
    if (auto st = f.check_block(block); !st) return st.error();
    const int64_t n = static_cast<int64_t>(x.size());
    if (auto st = f.check_tensor(n, block); !st) return st.error();
    const bool signs = f.decl->random_signs;
    std::vector<float> y(x.begin(), x.end());
    for (int64_t start = 0; start < n; start += block) {
        const int64_t len = std::min(block, n - start);
        const auto xb = x.subspan(static_cast<size_t>(start), static_cast<size_t>(len));
        const std::span<float> yb(y.data() + start, static_cast<size_t>(len));
        bool finite = true;
        for (float v : xb) finite = finite && std::fabs(v) <= kFltMax;
        if (!finite) {
            if (policy == Nonfinite::kError) {  // the element type names the value, at its own index
                Site at = site;
                at.index_base += start;
                auto q = quantize_decl(f, xb, block, policy, at, key);
                if (!q.ok()) return q.error();
            }
            std::fill(yb.begin(), yb.end(), std::numeric_limits<float>::quiet_NaN());  // poisoned
            continue;
        }
        rotate_forward(yb, signs, key.seed, site.index_base + start);
        const Status within = check_rotation_limit(yb, site, start, f.name());
        if (within.ok()) continue;
        if (policy == Nonfinite::kError) return within.error();
        std::fill(yb.begin(), yb.end(), std::numeric_limits<float>::quiet_NaN());
    }
    auto q = quantize_decl(f, y, block, policy, site, key);
    if (!q.ok()) return q.error();
    q->sign_seed = key.seed;
    q->sign_first = site.index_base;
    for (int64_t k = 0, start = 0; start < n; ++k, start += block) {
        if (q->poisoned[static_cast<size_t>(k)]) continue;
        const int64_t len = std::min(block, n - start);
        rotate_inverse(std::span<float>(q->decoded.data() + start, static_cast<size_t>(len)), signs, key.seed,
                       site.index_base + start);
    }
    return q;
}

std::vector<float> decode_rotated(const FormatSpec& f, std::span<const int32_t> codes, std::span<const float> scales,
                                  std::span<const float> offsets, int64_t block, uint64_t seed, int64_t first) {
    std::vector<float> out = decode_decl(f, codes, scales, offsets, block);
    const int64_t n = static_cast<int64_t>(out.size());
    for (int64_t k = 0, start = 0; start < n; ++k, start += block) {
        if (static_cast<size_t>(k) >= scales.size() || std::isnan(scales[static_cast<size_t>(k)])) continue;
        const int64_t len = std::min(block, n - start);
        rotate_inverse(std::span<float>(out.data() + start, static_cast<size_t>(len)), f.decl->random_signs, seed, first + start);
    }
    return out;
}

}  // namespace detail

std::vector<Exact> rotated_block_bounds(const Quantized& q, std::span<const float> x, int64_t k) {
    const Decl& d = *q.format.decl;
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t start = k * q.block, len = std::min(q.block, n - start);
    const int l = block_log2(len);
    const Exact inv = Exact::pow2(-l);
    const float s = q.scales[static_cast<size_t>(k)];
    const bool signs = d.random_signs;
    // y = fl(H D x), as encode computed it; yh = what the element type decoded the codes to.
    std::vector<float> y(x.begin() + start, x.begin() + start + len);
    if (signs) negate_by_signs(y, q.sign_seed, q.sign_first + start);
    const std::vector<float> dxv(y);
    hadamard_fl32(y);
    const std::vector<float> yhv = detail::decode_decl(
        q.format, std::span<const int32_t>(q.codes.data() + start, static_cast<size_t>(len)), std::span<const float>(&s, 1),
        {}, len);
    // y* = H D x exactly, and y - y*.
    std::vector<Exact::Int> dx(static_cast<size_t>(len)), dy(static_cast<size_t>(len)), yh(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
        dx[static_cast<size_t>(i)] = Exact::fixed149(dxv[static_cast<size_t>(i)]);
        yh[static_cast<size_t>(i)] = Exact::fixed149(yhv[static_cast<size_t>(i)]);
    }
    const std::vector<Exact::Int> ystar = hadamard_exact_fixed(dx);
    for (int64_t j = 0; j < len; ++j)
        dy[static_cast<size_t>(j)] = Exact::fixed149(y[static_cast<size_t>(j)]) - ystar[static_cast<size_t>(j)];
    const std::vector<Exact::Int> h_dy = hadamard_exact_fixed(dy);
    const std::vector<Exact::Int> h_yh = hadamard_exact_fixed(yh);
    // sum_j E(y_j), the element type's bound at the block's scale.
    Exact sum_e;
    for (int64_t j = 0; j < len; ++j) sum_e += detail::decl_element_bound(d, y[static_cast<size_t>(j)], s, 0.0f);
    // w = fl(H yh), before the normalization.
    std::vector<float> w(yhv);
    hadamard_fl32(w);
    std::vector<Exact> out(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
        const size_t u = static_cast<size_t>(i);
        const Exact wi(w[u]);
        const Exact norm = (Exact(mul32(w[u], std::ldexp(1.0f, -l))) - wi * inv).abs();
        const Exact back = (wi - Exact::scaled(h_yh[u], -149)).abs();
        const Exact fwd = Exact::scaled(h_dy[u], -149).abs();
        out[u] = norm + inv * (back + sum_e + fwd);
    }
    return out;
}

}  // namespace qtransit::reference
