#include "qtransit/gate/boundaries.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "qtransit/gate/codec_check.hpp"
#include "qtransit/kernels/decl_math.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reports/numbers.hpp"

namespace qtransit::gate {
namespace {

bool int_format(const FormatSpec& f) { return f.kind == FormatKind::kSym || f.kind == FormatKind::kAsym; }
bool asym(const FormatSpec& f) { return f.kind == FormatKind::kAsym; }
// qmax of NUMERICS 1.1 / 1.2: the divisor of the scale and the largest code magnitude.
int32_t qmax(const FormatSpec& f) { return asym(f) ? (1 << f.bits) - 1 : (1 << (f.bits - 1)) - 1; }

// The scale the reference derives from a block statistic a (absmax, or hi - lo): max(fl32(a / qmax), 2^-149).
float scale_of(const FormatSpec& f, float a) { return std::max(a / static_cast<float>(qmax(f)), 0x1p-149f); }

double rne(double v) { return std::nearbyint(v); }

float normal(uint64_t seed, uint64_t salt, uint64_t i) {
    return kernels::generate(kernels::Distribution::kNormal, seed, 11, salt * 1000003u + i);
}

// The scale the reference gives a whole block (a format may fix its size) holding `a` and zeros;
// nullopt when it refuses the block.
std::optional<float> reference_scale(const FormatSpec& f, int64_t block, float a) {
    std::vector<float> b(static_cast<size_t>(block), 0.0f);
    b[0] = a;
    Site s;
    const auto q = reference::quantize(f, b, block, Nonfinite::kError, s);
    if (!q || q->scales.empty()) return std::nullopt;
    return q->scales[0];
}

bool accepted(const FormatSpec& f, std::span<const float> x, int64_t block) {
    Site s;
    return static_cast<bool>(reference::quantize(f, x, block, Nonfinite::kError, s));
}

// near-ties: on scales s that are not powers of two, for every code q, inputs x within 64 ulps of
// (q + 1/2) s where rne(fl32(x / s)) differs from rne of the exact quotient (a quotient in binary64
// rounded once), or from rne(fl32(x * fl32(1/s))) (a reciprocal multiply). Blocks carry their absmax
// (asym: lo = 0 and hi) first, so that the block's scale is exactly s.
void near_ties(const FormatSpec& f, int64_t block, uint64_t seed, std::vector<BoundaryCase>& out) {
    if (!int_format(f) || block < (asym(f) ? 3 : 2)) return;
    const int32_t qm = qmax(f);
    const int64_t head = asym(f) ? 2 : 1;
    std::vector<float> x;
    std::vector<float> pending;
    uint64_t salt = 0;
    auto flush_block = [&](float a) {
        // one block: the statistic, then candidates (signs alternating for int<b>)
        std::vector<float> b(static_cast<size_t>(block), 0.0f);
        b[0] = a;
        if (asym(f)) b[1] = 0.0f;
        for (int64_t i = head; i < block; ++i) {
            if (pending.empty()) {
                b[static_cast<size_t>(i)] = 0.0f;
                continue;
            }
            float v = pending.back();
            pending.pop_back();
            if (!asym(f) && (i + static_cast<int64_t>(salt)) % 2) v = -v;
            b[static_cast<size_t>(i)] = v;
        }
        ++salt;
        x.insert(x.end(), b.begin(), b.end());
    };
    for (int e : {-20, -3, 0, 7, 40}) {
        for (int k = 1; k < 24; k += 2) {
            // a = qmax * s for an s with a full mantissa: (q + 1/2) s is then inexact, and the binary32
            // values nearest it give quotients that fl32 rounds onto the tie.
            const uint32_t mant = (static_cast<uint32_t>(k) * 0x9E3779B1u) & 0x7fffffu;
            const float s0 = std::ldexp(1.0f + static_cast<float>(mant) * 0x1p-23f, e);
            const float a = static_cast<float>(qm) * s0;
            const float s = scale_of(f, a);
            if (!std::isfinite(a) || !std::isfinite(s)) continue;
            const float inv = 1.0f / s;
            for (int32_t q = 0; q < qm; ++q) {
                const float t = static_cast<float>((static_cast<double>(q) + 0.5) * static_cast<double>(s));
                float lo = t, hi = t;
                for (int u = 0; u < 64; ++u) {
                    lo = std::nextafter(lo, 0.0f);
                    hi = std::nextafter(hi, FLT_MAX);
                }
                for (float v = lo; v <= hi && v < a; v = std::nextafter(v, FLT_MAX)) {
                    const double exact = rne(static_cast<double>(v) / static_cast<double>(s));
                    const double f32 = rne(static_cast<double>(v / s));
                    const double rec = rne(static_cast<double>(v * inv));
                    if (exact != f32 || rec != f32) pending.push_back(v);
                }
            }
            (void)seed;
            while (!pending.empty()) flush_block(a);
        }
    }
    if (x.empty()) return;
    out.push_back({"near-ties", "inputs x near (q + 1/2) s where fl32(x / s) and the exact quotient round apart", x, block,
                   static_cast<int64_t>(x.size())});
}

// near-ties for a declared format whose scale is not a power of two (fp32-absmax, fp16-absmax, and
// the -mul scales that multiply, whose quotient is fl32(x m)) and whose rounding is to nearest: for
// every midpoint m between two neighbouring element values (the grid, decoded from every code),
// inputs x within 64 ulps of m s where fl32(x / s), or fl32(x * fl32(1 / s)), lies on the other side
// of m than the exact quotient, or on m when the exact quotient is not (a float8 codec that divides
// in binary64, or multiplies by a reciprocal). The side of the exact quotient is the sign of x - m s,
// exact in binary64 (m s has at most 25 + 24 bits); for the scales that multiply, x near m / (the
// block's multiplier), against the format's own side of fl32(x m).
void near_ties_decl(const FormatSpec& f, int64_t block, std::vector<BoundaryCase>& out) {
    if (f.kind != FormatKind::kDecl || !f.decl || block < 2) return;
    const Decl& d = *f.decl;
    const bool mul = multiplies(d.scale);  // v = fl32(x m): the candidates are near midpoint / m
    if (d.offset_min || d.rotated() || (d.scale != ScaleType::kFp32Absmax && d.scale != ScaleType::kFp16Absmax && !mul)) return;
    if (d.rounding != Rounding::kNearestEven && d.rounding != Rounding::kNearestAway && d.rounding != Rounding::kNearestDown) return;
    // The grid: every code's value at scale 1.
    std::vector<int32_t> codes;
    for (int32_t q = f.code_min(); q <= f.code_max(); ++q) codes.push_back(q);
    const float one = 1.0f;
    auto vals = reference::decode(f, codes, std::span<const float>(&one, 1), {}, static_cast<int64_t>(codes.size()));
    std::vector<double> grid;
    for (float v : vals)
        if (std::isfinite(v)) grid.push_back(v);
    std::sort(grid.begin(), grid.end());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    std::vector<float> x, pending;
    for (int e : {-20, -3, 0, 7, 40}) {
        for (int k = 1; k < 24; k += 2) {
            const uint32_t mant = (static_cast<uint32_t>(k) * 0x9E3779B1u) & 0x7fffffu;
            const float a = d.amp * std::ldexp(1.0f + static_cast<float>(mant) * 0x1p-23f, e);
            if (!std::isfinite(a) || a == 0.0f) continue;
            const auto scale = reference_scale(f, block, a);
            if (!scale) continue;
            const float s = *scale;
            if (!(s > 0.0f) || !std::isfinite(s) || std::bit_cast<uint32_t>(s) << 9 == 0) continue;  // a power of two: no near-ties
            const float inv = 1.0f / s;
            const float mb = mul ? kernels::decl_multiplier(d, a) : 0.0f;  // the block's multiplier (FORMATS.md section 2)
            auto side = [](float qv, double m) { return (static_cast<double>(qv) > m) - (static_cast<double>(qv) < m); };
            for (size_t g = 0; g + 1 < grid.size(); ++g) {
                const double m = (grid[g] + grid[g + 1]) / 2;
                const float t = static_cast<float>(mul ? m / static_cast<double>(mb) : m * static_cast<double>(s));
                if (!std::isfinite(t) || std::fabs(t) >= a) continue;
                float lo = t, hi = t;
                for (int u = 0; u < 64; ++u) {
                    lo = std::nextafter(lo, -FLT_MAX);
                    hi = std::nextafter(hi, FLT_MAX);
                }
                for (float v = lo; v <= hi; v = std::nextafter(v, FLT_MAX)) {
                    if (!(std::fabs(v) < a)) continue;
                    if (mul) {
                        // the format's side (fl32(v m)) against a codec that divides by s, multiplies by
                        // fl32(1 / s), or rounds v m (exact in binary64) only once at the end
                        const int own = side(v * mb, m);
                        const double r = static_cast<double>(v) * static_cast<double>(mb) - m;
                        if (side(v / s, m) != own || side(v * inv, m) != own || ((r > 0) - (r < 0)) != own) pending.push_back(v);
                        continue;
                    }
                    const double r = static_cast<double>(v) - m * static_cast<double>(s);  // exact side
                    const int exact = (r > 0) - (r < 0);
                    if (side(v / s, m) != exact || side(v * inv, m) != exact) pending.push_back(v);
                }
            }
            // blocks of the statistic a first (the scale is s), then the candidates
            while (!pending.empty()) {
                std::vector<float> b(static_cast<size_t>(block), 0.0f);
                b[0] = a;
                for (int64_t i = 1; i < block && !pending.empty(); ++i) {
                    b[static_cast<size_t>(i)] = pending.back();
                    pending.pop_back();
                }
                x.insert(x.end(), b.begin(), b.end());
            }
        }
    }
    if (x.empty()) return;
    out.push_back({"near-ties", "inputs x near m s, m a midpoint of the element grid, where fl32(x / s) and the exact quotient fall apart", x,
                   block, static_cast<int64_t>(x.size())});
}

// scale-boundaries: blocks whose statistic puts the scale at its floor 2^-149, around the smallest
// normal, at the largest finite value and on both sides of every exponent change (A 2^k), with
// either sign of the absmax; asym: lo and hi saturating
// separately, FLT_MAX of each sign alone.
void scale_boundaries(const FormatSpec& f, int64_t block, uint64_t seed, std::vector<BoundaryCase>& out) {
    if (f.kind == FormatKind::kQr) return;  // its own: qr_boundaries
    const float tiny = 0x1p-149f;
    const int32_t qm = int_format(f) ? qmax(f) : 127;
    // A: what the scale maps the absmax onto (qmax, or a declared element's amplitude: 448 for e4m3)
    const float amp = f.kind == FormatKind::kDecl && f.decl ? f.decl->amp : static_cast<float>(qm);
    auto around = [](std::vector<float>& stats, float base) {
        for (int u = -2; u <= 2; ++u) {
            float v = base;
            for (int k = 0; k < std::abs(u); ++k) v = std::nextafter(v, u < 0 ? 0.0f : FLT_MAX);
            if (std::isfinite(v) && v > 0.0f) stats.push_back(v);
        }
    };
    // One case per group of statistics, so that a verdict can say which group differs.
    std::vector<std::pair<std::string, std::vector<float>>> groups(4);
    groups[0].first = "blocks whose absmax puts the scale at its floor or below the smallest normal (and exponent changes there)";
    for (int m = 1; m <= 2 * qm + 2; ++m) groups[0].second.push_back(static_cast<float>(m) * tiny);
    groups[1].first = "blocks whose absmax is within 2 ulps of the smallest normal, or of A times it";
    around(groups[1].second, FLT_MIN);
    around(groups[1].second, amp * FLT_MIN);
    groups[2].first = "blocks whose absmax is within 2 ulps of FLT_MAX, or of FLT_MAX / A";
    around(groups[2].second, FLT_MAX);
    around(groups[2].second, FLT_MAX / amp);
    // Where a scale's exponent changes: absmax = A 2^k for every k in binary32's range, for
    // e8m0-floor and -ceil at 2^k itself, for e8m0-even at (2 - 2^-(M+1)) 2^k, with one and two
    // ulps either side. torchao's RCEIL picks an exponent one too small one or two ulps above
    // 448 2^k (docs/FINDINGS.md F1): random blocks came no closer than 56 ulps in 58,008.
    std::vector<float> anchors = {amp};
    if (f.kind == FormatKind::kDecl && f.decl) {
        const ScaleType t = f.decl->scale;
        if ((t == ScaleType::kE8m0Floor || t == ScaleType::kE8m0Ceil) && amp != 1.0f) anchors.push_back(1.0f);
        // even: the next power of two from 2^(E+1) - 2^(E-M-1) up
        // (FBGEMM's even moves one ulp above it: the same two ulps either side hold both)
        if (t == ScaleType::kE8m0Even || t == ScaleType::kE8m0FbgemmEven)
            anchors.push_back(2.0f - std::ldexp(1.0f, -f.decl->man_bits - 1));
    }
    // A change whose scale is a normal number is a rule's own; one whose scale is at or below the
    // smallest normal goes with the floor's group (a codec that mishandles subnormal scales would
    // otherwise hide a rule's mistake in the same case).
    groups[3].first = "blocks whose absmax is within 2 ulps of an exponent change of a normal scale (A 2^k, every k)";
    for (float anchor : anchors)
        for (int k = -149; k <= 127; ++k) {
            const float p = std::ldexp(anchor, k);
            if (!std::isfinite(p) || p == 0.0f) continue;
            std::vector<float> near;
            around(near, p);
            for (float v : near) {  // each by its own scale: an ulp below 2^k can be a scale lower
                const auto s = reference_scale(f, block, v);
                groups[s && *s >= FLT_MIN ? 3 : 0].second.push_back(v);
            }
        }
    // A declared absmax floor (the "-mul" scales): blocks just below it take the floor's scale, just
    // above it their own.
    if (f.kind == FormatKind::kDecl && f.decl && f.decl->amax_floor > 0) {
        groups.emplace_back("blocks whose absmax is within 2 ulps of the declared amax_floor, or is 0", std::vector<float>{});
        around(groups.back().second, f.decl->amax_floor);
        groups.back().second.push_back(0.5f * f.decl->amax_floor);
    }
    // fp32-eps-mul's epsilon: a block's statistic near eps (the multiplier A / (a + eps) about half of
    // A / a), and near 2^24 eps and 2^25 eps (where fl32(a + eps) stops or starts to differ from a).
    if (f.kind == FormatKind::kDecl && f.decl && f.decl->scale == ScaleType::kFp32EpsMul) {
        groups.emplace_back("blocks whose absmax (range, with an offset) is within 2 ulps of amax_eps, 2^24 amax_eps or 2^25 amax_eps",
                            std::vector<float>{});
        for (int k : {0, 24, 25}) around(groups.back().second, std::ldexp(f.decl->amax_eps, k));
    }
    // NVFP4's block scale (e4m3-tensor-amax): s_b = E4M3(fl32(a t)), t = fl32(S_enc fl32(1/A)) from the
    // declared tensor amax. Its changes are where a t crosses a midpoint of two E4M3 values (ties to the
    // even code), 464 (past it, and from 448 up, s_b saturates at 448) and 2^-10 (below it s_b is 0 and the
    // block decodes to zeros): absmax m / t within 2 ulps, each product rounded once.
    if (f.kind == FormatKind::kDecl && f.decl && f.decl->scale == ScaleType::kE4m3TensorAmax) {
        groups.emplace_back("blocks whose absmax times the tensor's block factor is within 2 ulps of an E4M3 midpoint (the block "
                            "scale's rounding), of 464 (its saturation at 448) or of 2^-10 (a zero block scale)",
                            std::vector<float>{});
        auto e4m3 = [](int c) { return c < 8 ? std::ldexp(static_cast<double>(c), -9) : std::ldexp(8.0 + (c & 7), (c >> 3) - 10); };
        const double t = f.decl->t_blk;
        for (int c = 0; c < 126; ++c) around(groups.back().second, static_cast<float>((e4m3(c) + e4m3(c + 1)) / 2 / t));
        around(groups.back().second, static_cast<float>(464.0 / t));
        around(groups.back().second, static_cast<float>(1000.0 / t));
    }
    // A block's other elements past the first kFiller are zeros: what a case tests is the absmax's
    // scale, and a few hundred elements under it test its codes as well as 16,383 would (a block of
    // 128 x 128 filled whole was 52 M elements in these cases, most of a 230 s codec check).
    constexpr int64_t kFiller = 256;
    int64_t salt = 0;
    for (const auto& [what, stats] : groups) {
        std::vector<float> x;
        for (float a : stats) {
            for (float sign : {1.0f, -1.0f}) {
                std::vector<float> b(static_cast<size_t>(block), 0.0f);
                for (int64_t i = 0; i < std::min(block, kFiller); ++i) {
                    // the other elements: fractions of a, and a few ulps of the floor
                    const float r = normal(seed, 77 + static_cast<uint64_t>(salt), static_cast<uint64_t>(i));
                    float v = a * std::min(std::fabs(r) / 3.0f, 1.0f);
                    if (i % 5 == 4) v = std::min(static_cast<float>(i % 7) * tiny, a);  // never above a: a stays the absmax
                    b[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * v;
                }
                b[static_cast<size_t>((salt * 7) % block)] = sign * a;
                ++salt;
                if (accepted(f, b, block)) x.insert(x.end(), b.begin(), b.end());
            }
        }
        if (!x.empty()) out.push_back({"scale-boundaries", what, x, block, static_cast<int64_t>(x.size())});
    }
    if (asym(f) || f.kind == FormatKind::kDecl) {
        // lo and hi saturating separately: each alone, in blocks the reference takes.
        for (float lo_v : {-FLT_MAX, -1.0f, 0.0f})
            for (float hi_v : {FLT_MAX, 1.0f, 0.0f}) {
                std::vector<float> b(static_cast<size_t>(block));
                for (int64_t i = 0; i < block; ++i) b[static_cast<size_t>(i)] = 0.5f * (i % 2 ? lo_v : hi_v) + 0.25f;
                b[0] = lo_v;
                b[static_cast<size_t>(block - 1)] = hi_v;
                if (accepted(f, b, block))
                    out.push_back({"scale-boundaries", "lo " + reports::shortest(lo_v) + " and hi " + reports::shortest(hi_v), b, block, block});
            }
    }
}

// quickreduce-q<b> (docs/FORMATS.md section 11): its boundaries from its definition, in binary16.
// scale-boundaries: groups whose signed extreme m lies within 3 binary16 steps of where the
// reciprocal starts to saturate (either sign: the 2^-24 added to dec makes them differ), of where
// dec leaves the normal range and where it rounds to zero; at 65504 and at the input's overflow
// edge (65519.99 rounds to 65504); the sign rule's ties (+a and -a; |max| a step above or below
// |min|); zero groups (+0, -0, both). near-ties: elements y (and the binary32 midpoints between
// binary16 neighbours, which the input rounding decides) whose product y enc lies within 2 binary16
// steps of a half-integer, where fl16 before rne decides the code (rne of a binary32 product would not).
float f16_step(float y, int k) {  // y moved k binary16 steps (y a binary16 value; k may cross zero)
    int32_t i = static_cast<int32_t>(kernels::f32_to_f16_bits(std::fabs(y))) * (std::signbit(y) ? -1 : 1) + k;
    i = std::clamp(i, -0x7BFF, 0x7BFF);
    const float v = kernels::f16_bits_to_f32(static_cast<uint16_t>(std::abs(i)));
    return i < 0 ? -v : v;
}
void qr_boundaries(const FormatSpec& f, int64_t block, uint64_t seed, std::vector<BoundaryCase>& out) {
    if (f.kind != FormatKind::kQr || block < 3) return;
    const int top = 1 << (f.bits - 1);
    auto dec_of = [&](float m) { return reference::round_to_fp16(-m / static_cast<float>(top)); };  // m / P exact
    auto saturates = [&](float m) {
        // t = fl16(dec + 2^-24): the binary32 sum rounded to binary16 is the correctly rounded sum
        const double t = reference::round_to_fp16(dec_of(m) + 0x1p-24f);
        return t == 0 || std::fabs(1.0 / t) >= 65520.0;
    };
    // A group: its extreme m first, then fractions of it (|v| <= 0.9 |m|: m stays the extreme), with
    // `extra` values in front of them.
    uint64_t salt = 0;
    auto group = [&](float m, const std::vector<float>& extra) {
        std::vector<float> b(static_cast<size_t>(block));
        b[0] = m;
        for (int64_t i = 1; i < block; ++i) {
            const float r = std::clamp(normal(seed, 900 + salt, static_cast<uint64_t>(i)) / 3.0f, -0.9f, 0.9f);
            b[static_cast<size_t>(i)] = m * r;
        }
        for (size_t k = 0; k < extra.size() && k + 1 < b.size(); ++k) b[k + 1] = extra[k];
        ++salt;
        return b;
    };
    auto add_case = [&](const std::string& cls, const std::string& what, const std::vector<std::vector<float>>& groups) {
        std::vector<float> x;
        for (const auto& g : groups)
            if (accepted(f, g, block)) x.insert(x.end(), g.begin(), g.end());
        if (!x.empty()) out.push_back({cls, what, x, block, static_cast<int64_t>(x.size())});
    };
    // Where a property of the extreme changes from one positive binary16 value to the next, for m
    // of either sign: the values within 3 steps of each change.
    auto edges = [&](auto property) {
        std::vector<std::vector<float>> g;
        for (float sign : {1.0f, -1.0f}) {
            bool prev = property(sign * kernels::f16_bits_to_f32(1));
            for (uint16_t k = 2; k <= 0x7BFF; ++k) {
                const bool now = property(sign * kernels::f16_bits_to_f32(k));
                if (now != prev)
                    for (int j = -3; j <= 2; ++j) {
                        const float m = sign * kernels::f16_bits_to_f32(static_cast<uint16_t>(std::clamp<int>(k + j, 1, 0x7BFF)));
                        g.push_back(group(m, {}));
                    }
                prev = now;
            }
        }
        return g;
    };
    add_case("scale-boundaries", "groups whose extreme is within 3 binary16 steps of where the encode factor's reciprocal saturates at 65504",
             edges(saturates));
    add_case("scale-boundaries", "groups whose extreme is within 3 binary16 steps of where dec leaves binary16's normal range",
             edges([&](float m) { return std::fabs(dec_of(m)) >= 0x1p-14f; }));
    {
        auto g = edges([&](float m) { return dec_of(m) != 0.0f; });
        for (float m : {65504.0f, -65504.0f, 65519.99f, -65519.99f, 65503.0f}) g.push_back(group(m, {}));
        add_case("scale-boundaries", "groups whose dec rounds to zero, and the largest extremes (65504, 65519.99 rounding to it)", g);
    }
    {
        std::vector<std::vector<float>> g;
        for (float a : {1.0f, 0.3f, 117.0f, 3e-4f, 6e-5f, 2e-6f}) {
            const float a16 = reference::round_to_fp16(a);
            g.push_back(group(a16, {-a16}));                 // a tie: the negative one is the extreme
            g.push_back(group(-a16, {a16}));
            g.push_back(group(f16_step(a16, 1), {-a16}));    // |max| a step above |min|
            g.push_back(group(-f16_step(a16, 1), {a16}));    // |min| a step above |max|
        }
        std::vector<float> z(static_cast<size_t>(block));
        for (float v : {0.0f, -0.0f}) {
            std::fill(z.begin(), z.end(), v);
            g.push_back(z);
        }
        for (size_t i = 0; i < z.size(); ++i) z[i] = i % 2 ? -0.0f : 0.0f;
        g.push_back(z);
        z[1] = 0x1p-26f;  // rounds to +0 in binary16
        g.push_back(z);
        add_case("scale-boundaries", "the extreme's sign rule: +a and -a, |max| a binary16 step above or below |min|; zero groups", g);
    }
    // near-ties, for a few extremes (one of which saturates for every width).
    std::vector<std::vector<float>> g;
    for (float m : {1.0f, -0.7001953f, 117.0f, -3.0517578e-5f}) {
        const float dec = dec_of(m), enc = reference::quickreduce_enc(dec);
        std::vector<float> pending;
        for (int k = -top; k < top; ++k) {
            const float y0 = reference::round_to_fp16((static_cast<float>(k) + 0.5f) / enc);
            for (int j = -2; j <= 2; ++j) {
                const float y = f16_step(y0, j);
                if (std::fabs(y) < std::fabs(m)) pending.push_back(y);
                const float next = f16_step(y, 1);
                const float mid = y + (next - y) / 2;  // exact: two binary16 values
                if (std::fabs(mid) < std::fabs(m) && std::fabs(next) < std::fabs(m)) pending.push_back(mid);
            }
        }
        for (size_t i = 0; i < pending.size(); i += static_cast<size_t>(block - 1)) {
            std::vector<float> b(static_cast<size_t>(block), 0.0f);
            b[0] = m;
            for (size_t k = 0; k + 1 < b.size() && i + k < pending.size(); ++k) b[k + 1] = pending[i + k];
            g.push_back(b);
        }
    }
    add_case("near-ties", "elements whose binary16 product y enc is within 2 binary16 steps of a half-integer, and the input midpoints beside them", g);
}

// lengths: a last partial block of every length up to 2 blocks + 1 (capped at 129 elements).
void lengths(const FormatSpec& f, int64_t block, uint64_t seed, std::vector<BoundaryCase>& out) {
    const int64_t top = std::min<int64_t>(2 * block + 1, 129);
    for (int64_t len = 1; len <= top; ++len) {
        std::vector<float> x(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = normal(seed, 5000 + static_cast<uint64_t>(len), static_cast<uint64_t>(i));
        if (accepted(f, x, block)) out.push_back({"lengths", "a call of " + std::to_string(len) + " elements", x, block, len});
    }
}

void block_sizes(const FormatSpec& f, uint64_t seed, const std::vector<int64_t>& blocks, std::vector<BoundaryCase>& out) {
    for (int64_t b : blocks) {
        const int64_t n = 2 * b + b / 2 + 1;
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = normal(seed, 9000 + static_cast<uint64_t>(b), static_cast<uint64_t>(i));
        if (accepted(f, x, b)) out.push_back({"block-sizes", "block " + std::to_string(b) + ", " + std::to_string(n) + " elements", x, b, n});
    }
}

const float kCanary = std::bit_cast<float>(0x7fa5a5a5u);  // a signalling NaN no codec writes

// The positions a refusal probe takes in a call of len elements: every one up to kEveryPosition;
// past that (a 128 x 128 tile is a block of 16,384: every position was 262,144 calls, 320 s of a
// Python codec) the first and last 64, five around each block boundary, and 128 spread between,
// which keeps what the probes are for (a SIMD tail, a block's first and last element, a lane
// count) at a few hundred calls.
constexpr int64_t kEveryPosition = 256;
std::vector<int64_t> probe_positions(int64_t len, int64_t block) {
    std::vector<int64_t> pos;
    if (len <= kEveryPosition) {
        for (int64_t i = 0; i < len; ++i) pos.push_back(i);
        return pos;
    }
    for (int64_t i = 0; i < 64; ++i) pos.push_back(i), pos.push_back(len - 1 - i);
    for (int64_t b = block; b < len; b += block)
        for (int64_t d = -2; d <= 2; ++d) pos.push_back(std::clamp<int64_t>(b + d, 0, len - 1));
    const int64_t stride = std::max<int64_t>(1, len / 128);
    for (int64_t i = 0; i < len; i += stride) pos.push_back(i);
    std::sort(pos.begin(), pos.end());
    pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
    return pos;
}

// Refusal probes at the positions of the lengths that matter (the block's neighbourhood and a SIMD
// width's; probe_positions), each alone in one call: the codec must refuse every one.
std::optional<BoundaryFinding> refusal_positions(const kernels::PluginCodec& codec, const FormatSpec& f, int64_t block,
                                                 uint64_t seed, std::vector<ConventionTally>* tallies) {
    std::vector<int64_t> lens;
    for (int64_t l = 1; l <= 17; ++l) lens.push_back(l);
    for (int64_t l : std::initializer_list<int64_t>{31, 32, 33, 63, 64, 65, 127, 128, 129, block - 1, block, block + 1, 2 * block + 1})
        if (l >= 1) lens.push_back(l);
    std::sort(lens.begin(), lens.end());
    lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
    const float inf = std::numeric_limits<float>::infinity();
    const struct {
        const char* name;
        float v;
    } probes[] = {{"NaN", std::numeric_limits<float>::quiet_NaN()}, {"+inf", inf}, {"-inf", -inf}, {"range-overflow", FLT_MAX}};
    for (int64_t len : lens) {
        const auto sz = kernels::sharded_sizes(f, len, block, len);
        std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes));
        std::vector<float> scales(static_cast<size_t>(sz.blocks)), offsets(static_cast<size_t>(sz.offsets));
        for (int64_t pos : probe_positions(len, block))
            for (const auto& p : probes) {
                std::vector<float> x(static_cast<size_t>(len));
                for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = (i % 2 ? -0.5f : 0.75f) + 0.0625f * static_cast<float>(i % 5);
                // a NaN's sign bit at odd positions: a cast that saturates NaN by its sign (nonfinite =
                // "saturate") is told from one that writes every NaN as +largest
                x[static_cast<size_t>(pos)] = std::isnan(p.v) && pos % 2 ? -p.v : p.v;
                if (p.v == FLT_MAX) x[static_cast<size_t>(pos > 0 ? pos - 1 : std::min<int64_t>(1, len - 1))] = -FLT_MAX;
                for (float& e : x) e = kernels::round_to(codec.input_type(), e);
                if (accepted(f, x, block)) continue;  // nothing to refuse (a format without a range limit)
                kernels::CodecOptions opt;
                opt.seed = seed;
                opt.site.tensor = std::string(p.name) + " probe";
                if (!codec.encode(x, block, len, codes, scales, offsets, opt)) continue;
                if (refusal_as_declared(codec, f, x, block, codes, scales, offsets, tallies)) continue;  // poisoned, as declared
                return BoundaryFinding{"lengths", "input class 'lengths': codec '" + codec.name() + "' encoded a call of " +
                                                      std::to_string(len) + " elements (block " + std::to_string(block) +
                                                      ") with " + p.name + " at element " + std::to_string(pos) +
                                                      ", which the reference refuses (NUMERICS section 4)", true};
            }
    }
    return std::nullopt;
}

// memory: every output buffer is followed by poisoned canaries, checked after each call.
std::optional<BoundaryFinding> canaries(const kernels::PluginCodec& codec, const FormatSpec& f, int64_t block, uint64_t seed) {
    std::vector<int64_t> lens = {int64_t{1}, 2, 3, 5, 7, block - 1, block, block + 1, block + 3, 2 * block + 1, 3 * block + block / 2 + 1};
    constexpr size_t kGuard = 16;
    for (int64_t len : lens) {
        if (len < 1) continue;
        std::vector<float> x(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = normal(seed, 7000 + static_cast<uint64_t>(len), static_cast<uint64_t>(i));
        if (!accepted(f, x, block)) continue;
        const auto sz = kernels::sharded_sizes(f, len, block, len);
        std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes) + 4 * kGuard, 0xa5);
        std::vector<float> scales(static_cast<size_t>(sz.blocks) + kGuard, kCanary), offsets(static_cast<size_t>(sz.offsets) + kGuard, kCanary),
            dec(static_cast<size_t>(len) + kGuard, kCanary);
        auto cs = std::span<uint8_t>(codes).first(static_cast<size_t>(sz.code_bytes));
        auto ss = std::span<float>(scales).first(static_cast<size_t>(sz.blocks));
        auto os = std::span<float>(offsets).first(static_cast<size_t>(sz.offsets));
        kernels::CodecOptions opt;
        opt.seed = seed;
        if (!codec.encode(x, block, len, cs, ss, os, opt)) continue;  // a refusal is the other classes' finding
        auto spoiled = [&](const char* what, auto& buf, size_t used) -> std::optional<BoundaryFinding> {
            for (size_t i = used; i < buf.size(); ++i) {
                bool changed;
                if constexpr (std::is_same_v<std::decay_t<decltype(buf[0])>, float>)
                    changed = std::bit_cast<uint32_t>(buf[i]) != std::bit_cast<uint32_t>(kCanary);
                else
                    changed = buf[i] != 0xa5;
                if (changed)
                    return BoundaryFinding{"memory", "input class 'memory': codec '" + codec.name() + "' wrote " + what + " element " +
                                                         std::to_string(i) + ", past the end of its " + std::to_string(used) +
                                                         " (a call of " + std::to_string(len) + " elements, block " + std::to_string(block) + ")", true};
            }
            return std::nullopt;
        };
        if (auto r = spoiled("encode's codes byte", codes, cs.size())) return r;
        if (auto r = spoiled("encode's scales", scales, ss.size())) return r;
        if (auto r = spoiled("encode's offsets", offsets, os.size())) return r;
        if (!codec.decode(block, len, cs, ss, os, std::span<float>(dec).first(static_cast<size_t>(len)))) continue;
        if (auto r = spoiled("decode's output", dec, static_cast<size_t>(len))) return r;
    }
    return std::nullopt;
}

}  // namespace

std::vector<BoundaryCase> boundary_cases(const FormatSpec& format, int64_t block, uint64_t seed,
                                         const std::vector<int64_t>& other_blocks) {
    std::vector<BoundaryCase> out;
    near_ties(format, block, seed, out);
    near_ties_decl(format, block, out);
    scale_boundaries(format, block, seed, out);
    qr_boundaries(format, block, seed, out);
    block_sizes(format, seed, other_blocks, out);
    lengths(format, block, seed, out);
    return out;
}

std::vector<BoundaryClass> tally_boundaries(const kernels::PluginCodec& codec, const FormatSpec& format, int64_t block,
                                            uint64_t seed) {
    std::vector<BoundaryClass> out;
    auto of = [&](const std::string& name) -> BoundaryClass& {
        for (auto& c : out)
            if (c.input_class == name) return c;
        BoundaryClass c;
        c.input_class = name;
        out.push_back(std::move(c));
        return out.back();
    };
    // The refusal probes and the canaries: one case each, found or not.
    for (int which = 0; which < 2; ++which) {
        BoundaryClass& c = of(which == 0 ? "lengths" : "memory");
        const auto r = which == 0 ? refusal_positions(codec, format, block, seed, &c.conventions) : canaries(codec, format, block, seed);
        ++c.cases;
        if (r) {
            ++c.differing_cases;
            c.violation = true;
            if (c.first.empty()) c.first = r->message;
        }
    }
    std::vector<int64_t> others;
    for (int64_t b : std::initializer_list<int64_t>{1, 2, 3, 31, 33, 64, 65, 100, 128, 4096})
        if (b != block && codec.check_block(b)) others.push_back(b);
    for (const auto& k : boundary_cases(format, block, seed, others)) {
        Site site;
        site.tensor = k.input_class + " input";
        auto r = codec_check(&codec, format, k.x, k.block, k.shard, site, seed, kernels::Conformance::kExact);
        if (!r) continue;  // both refuse: not a boundary this format has
        BoundaryClass& c = of(k.input_class);
        ++c.cases;
        c.elements += static_cast<int64_t>(k.x.size());
        add_tallies(c.conventions, r->conventions);
        if (r->exact || r->first_difference.empty()) continue;
        ++c.differing_cases;
        if (c.differing_what.size() < 8) c.differing_what.push_back(k.what);
        c.differing_elements += r->differing_elements;
        c.violation = c.violation || !r->bound_holds;
        if (c.first.empty()) c.first = "input class '" + k.input_class + "' (" + k.what + "): " + r->first_difference;
    }
    std::erase_if(out, [](const BoundaryClass& c) { return c.cases == 0; });
    return out;
}

namespace {
// The classes in the order a verdict names them (issue 52): the element grid's and the scale rule's
// (near-ties, scale-boundaries) first, the others in the order they ran.
std::vector<const BoundaryClass*> by_weight(const std::vector<BoundaryClass>& classes) {
    std::vector<const BoundaryClass*> v;
    for (const auto& c : classes) v.push_back(&c);
    auto rank = [](const BoundaryClass* c) { return c->input_class == "near-ties" ? 0 : c->input_class == "scale-boundaries" ? 1 : 2; };
    std::stable_sort(v.begin(), v.end(), [&](const BoundaryClass* a, const BoundaryClass* b) { return rank(a) < rank(b); });
    return v;
}
}  // namespace

std::optional<BoundaryFinding> first_finding(const std::vector<BoundaryClass>& classes, kernels::Conformance conformance) {
    // Under bounded a difference within the bound does not stop the search: the first violation,
    // else the first difference within the bound.
    const BoundaryClass* within = nullptr;
    for (const BoundaryClass* cp : by_weight(classes)) {
        const BoundaryClass& c = *cp;
        if (c.differing_cases == 0) continue;
        if (c.violation || conformance == kernels::Conformance::kExact) return BoundaryFinding{c.input_class, c.first, c.violation};
        if (!within) within = &c;
    }
    if (within) return BoundaryFinding{within->input_class, within->first, false};
    return std::nullopt;
}

std::string classes_summary(const std::vector<BoundaryClass>& classes) {
    std::string s;
    for (const BoundaryClass* cp : by_weight(classes)) {
        const BoundaryClass& c = *cp;
        if (c.differing_cases == 0) continue;
        s += (s.empty() ? "" : ", ") + c.input_class + " " +
             (c.differing_elements > 0 ? std::to_string(c.differing_elements) + " element" + (c.differing_elements == 1 ? "" : "s") + " in " : "") +
             std::to_string(c.differing_cases) + " of " + std::to_string(c.cases) + " case" + (c.cases == 1 ? "" : "s");
    }
    return s;
}

std::optional<BoundaryFinding> long_call_check(const kernels::PluginCodec& codec, const FormatSpec& format, int64_t block,
                                               uint64_t seed) {
    const int64_t n = (int64_t{1} << 24) + 2 * block + 3;
    std::vector<float> x(static_cast<size_t>(n));
    kernels::generate_span(kernels::Distribution::kNormal, seed, 13, 0, x);
    for (float& v : x) v = kernels::round_to(codec.input_type(), v);
    const auto sz = kernels::sharded_sizes(format, n, block, n);
    std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes));
    std::vector<float> scales(static_cast<size_t>(sz.blocks)), offsets(static_cast<size_t>(sz.offsets)), dec(static_cast<size_t>(n));
    kernels::CodecOptions opt;
    opt.seed = seed;
    opt.site.tensor = "long-tensors input";
    const std::string head = "input class 'long-tensors' (one call of " + std::to_string(n) + " elements, block " + std::to_string(block) + "): ";
    if (auto st = codec.encode(x, block, n, codes, scales, offsets, opt); !st)
        return BoundaryFinding{"long-tensors", head + "codec '" + codec.name() + "' refused it: " + st.error().message};
    if (auto st = codec.decode(block, n, codes, scales, offsets, dec); !st)
        return BoundaryFinding{"long-tensors", head + "codec '" + codec.name() + "' refused to decode it: " + st.error().message};
    // The reference on the first block and on the blocks from 2^24 - 4 blocks to the end: blocks are
    // independent within a shard, so a window that starts on a block boundary quantizes alike.
    const int64_t from = std::max<int64_t>(0, ((int64_t{1} << 24) / block - 4) * block);
    for (int64_t start : {int64_t{0}, from}) {
        const int64_t len = start == 0 ? std::min(block, n) : n - start;
        if (format.kind == FormatKind::kDs && format.fast_math) {
            // ds-int<b>-fm is judged by admissibility (D23), not bits: every step and element of the
            // window one of the admissible results.
            const int64_t block_bytes = (block * format.bits + 7) / 8;
            const auto window_codes = reference::unpack(
                format, std::span<const uint8_t>(codes).subspan(static_cast<size_t>(start / block * block_bytes)), len, block);
            const auto a = reference::check_admissible(
                format, std::span<const float>(x).subspan(static_cast<size_t>(start), static_cast<size_t>(len)), block, window_codes,
                std::span<const float>(scales).subspan(static_cast<size_t>(start / block), static_cast<size_t>((len + block - 1) / block)),
                std::span<const float>(dec).subspan(static_cast<size_t>(start), static_cast<size_t>(len)), start);
            if (!a.holds) return BoundaryFinding{"long-tensors", head + "not an admissible result: " + a.first_text};
            continue;
        }
        Site site;
        site.tensor = "long-tensors input";
        site.index_base = start;
        auto q = reference::quantize(format, std::span<const float>(x).subspan(static_cast<size_t>(start), static_cast<size_t>(len)), block,
                                     Nonfinite::kError, site);
        if (!q) return std::nullopt;
        for (int64_t i = 0; i < len; ++i) {
            const float want = kernels::round_to(codec.output_type(), q->decoded[static_cast<size_t>(i)]);
            const float got = dec[static_cast<size_t>(start + i)];
            if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got))
                return BoundaryFinding{"long-tensors", head + "element " + std::to_string(start + i) + " (block " +
                                                           std::to_string((start + i) / block) + "; input " +
                                                           reports::shortest(x[static_cast<size_t>(start + i)]) + "): codec decodes " +
                                                           reports::shortest(got) + ", reference " + reports::shortest(want) +
                                                           "; scale " + reports::shortest(scales[static_cast<size_t>((start + i) / block)]) +
                                                           " vs reference " + reports::shortest(q->scales[static_cast<size_t>(i / block)])};
        }
    }
    return std::nullopt;
}

}  // namespace qtransit::gate
