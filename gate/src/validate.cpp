// The engine of `qtransit formats validate FILE.toml`: a declared format checked the way the built-in ones are.
// (a) every generic property (docs/FORMATS.md section 6) on a few thousand blocks of the project's
// input distributions and some edge blocks: the bound in exact arithmetic, kernel = reference bit
// for bit, codes in range, monotone within a block, pack/unpack, odd symmetry, idempotence,
// power-of-two scale equivariance and, for stochastic rounding, replay and an unbiased mean error.
// A property the section-6 table does not promise for this element/scale type is measured and
// reported as "not promised" (a skipped verdict), never as a failure. (b) every path through the
// gate's machinery (run_gate) on the declared format next to a few built-ins, with the same
// reports as `qtransit check` plus a comparison table (error after k = 1 and 2 quantizations,
// bits per element).
#include <algorithm>
#include <limits>
#include <bit>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "qtransit/common/bits.hpp"
#include "qtransit/reports/numbers.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/gate/codec_check.hpp"

#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/gate/verify.hpp"

namespace qtransit::gate {
namespace {

using reports::Verdict;
using reports::VerdictStatus;

using reports::g4;
using reports::g4_cell;

// A value in a property's message: its shortest round-trip form, so that two values the message
// calls different never print alike ("decoded 0.7467 > 0.7467"), and NaN said as NaN.
std::string num(float v) { return std::isnan(v) ? "NaN" : reports::shortest(v); }
std::string num(double v) { return std::isnan(v) ? "NaN" : reports::shortest(v); }

// One property's tally over every block it was evaluated on.
struct Prop {
    Prop(std::string n, std::string w) : name(std::move(n)), what(std::move(w)) {}
    std::string name;          // "odd-symmetry"
    std::string what;          // what it says, for the message
    bool promised = true;
    std::string why_not;       // when not promised: docs/FORMATS.md section 6's reason
    int64_t checked = 0, failed = 0, skipped = 0;
    std::string first_failure, skip_reason;
    void fail(const std::string& m) {
        ++failed;
        if (first_failure.empty()) first_failure = m;
    }
    void skip(const std::string& why) {
        ++skipped;
        if (skip_reason.empty()) skip_reason = why;
    }
    Verdict verdict(const std::string& format) const {
        Verdict v;
        v.name = "property/" + format + "/" + name;
        v.category = "property";
        std::string counts = std::to_string(checked) + " block(s) or case(s) checked" +
                             (skipped ? ", " + std::to_string(skipped) + " outside its premise (" + skip_reason + ")" : "");
        if (checked == 0 && failed == 0) {
            v.status = VerdictStatus::kSkip;
            v.message = promised ? what + ": nothing to check (" + counts + ")" : "not promised (" + why_not + "); not measured";
        } else if (!promised) {
            v.status = VerdictStatus::kSkip;
            v.message = "not promised (" + why_not + "); measured: " +
                        (failed ? std::to_string(failed) + " failure(s) over " + std::to_string(checked) + ", e.g. " + first_failure
                                : "holds on all " + counts);
        } else if (failed) {
            v.status = VerdictStatus::kFail;
            v.message = what + ": " + std::to_string(failed) + " failure(s) over " + std::to_string(checked) + " block(s) or case(s); first: " + first_failure;
        } else {
            v.status = VerdictStatus::kPass;
            v.message = what + ": holds on " + counts;
        }
        v.value = static_cast<double>(failed);
        return v;
    }
};

struct Tensor {
    std::string label;
    std::vector<float> x;
};

// The inputs: every distribution (nblocks blocks each), then edge blocks (zeros, a constant, one
// spike among zeros, tiny and huge magnitudes, exact grid values), then the format's generated
// boundary blocks (gate/boundaries.hpp: near-ties and scale boundaries, derived from the
// declaration), so that every property, the kernel's bits first, meets them too.
std::vector<Tensor> inputs(const FormatSpec& f, int64_t block, int64_t nblocks, uint64_t seed) {
    std::vector<Tensor> out;
    uint32_t rank = 0;
    for (auto d : kernels::all_distributions()) {
        Tensor t{kernels::to_string(d), std::vector<float>(static_cast<size_t>(block * nblocks))};
        kernels::generate_span(d, seed, rank++, 0, t.x);
        out.push_back(std::move(t));
    }
    const size_t n = static_cast<size_t>(block);
    Tensor edge{"edge blocks", {}};
    auto add = [&](auto gen) {
        for (size_t i = 0; i < n; ++i) edge.x.push_back(gen(i));
    };
    add([](size_t) { return 0.0f; });
    add([](size_t i) { return i % 2 ? -0.0f : 0.0f; });
    add([](size_t) { return 3.25f; });
    add([](size_t) { return -1.5f; });
    add([](size_t i) { return i == 3 ? 1000.0f : 0.0f; });
    add([](size_t i) { return i == 0 ? -7.0f : 1e-3f * static_cast<float>(i); });
    add([](size_t i) { return std::ldexp(static_cast<float>(i % 7) - 3.0f, -140); });  // subnormal inputs
    add([](size_t i) { return std::ldexp(static_cast<float>(i % 5) + 1.0f, 100); });
    add([n](size_t i) { return static_cast<float>(static_cast<int>(i) - static_cast<int>(n / 2)) * 0.25f; });
    out.push_back(std::move(edge));
    for (auto& c : boundary_cases(f, block, seed, {}))
        if (c.block == block && c.shard == static_cast<int64_t>(c.x.size()) && (c.input_class == "near-ties" || c.input_class == "scale-boundaries"))
            out.push_back(Tensor{c.input_class + " blocks", std::move(c.x)});
    return out;
}

// A block's scale is "normal" for the premises of idempotence and equivariance.
bool normal_scale(const Decl& d, float s) {
    if (s == 0) return true;
    if (!(s >= FLT_MIN) || !std::isfinite(s)) return false;
    switch (d.scale) {
        case ScaleType::kFp16Absmax: return s >= std::ldexp(1.0f, -14) && s <= 32768.0f;
        case ScaleType::kE8m0Floor:
        case ScaleType::kE8m0Rceil:
        case ScaleType::kE8m0Even:
        case ScaleType::kE8m0Ceil: return s > std::ldexp(1.0f, -127) && s < std::ldexp(1.0f, 127);
        case ScaleType::kE8m0FbgemmEven: return s > std::ldexp(1.0f, -127) && s < std::ldexp(1.0f, 125);
        // fp32-eps-mul: the statistic A s far enough above eps that fl32(a + eps) is a (then m s is 1 within
        // a few u), and inside the normal range
        case ScaleType::kFp32EpsMul:
            return static_cast<double>(s) * d.amp > 0x1p26 * static_cast<double>(d.amax_eps) && s >= std::ldexp(1.0f, -125) &&
                   s < std::ldexp(1.0f, 126);
        // the "-mul" scales: above twice the floor's scale (a block at the floor keeps it when scaled)
        // and inside the normal range
        case ScaleType::kFp32AmaxMul:
        case ScaleType::kFp32AmaxMulRcp:
        case ScaleType::kFp32AmaxMulInv:
        case ScaleType::kE8m0RceilMul:
        case ScaleType::kPow2RceilMul:
            return s > 4.0f * d.amax_floor / d.amp && s >= std::ldexp(1.0f, -125) && s < std::ldexp(1.0f, 126);
        default: return true;
    }
}

// The properties of section 6 for one declaration, with what the table promises.
struct Props {
    Prop bound{"bound", "|x - x̂| <= E(x) in exact arithmetic (reference::check_bounds)"};
    Prop kernel{"kernel-vs-reference", "the CPU kernel's scales, offsets, packed bytes, codes and decoded values equal the reference's bit for bit"};
    Prop range{"codes-in-range", "every code in code_min..code_max"};
    Prop monotone{"monotone", "x_i <= x_j implies x̂_i <= x̂_j (and q_i <= q_j for int and table codes) within a block"};
    Prop pack{"pack-unpack", "unpack(pack(codes)) == codes (reference pack, kernel unpack) over random codes and block lengths"};
    Prop odd{"odd-symmetry", "q(-x) = -q(x): the decoded values negate"};
    Prop idem{"idempotence", "requantizing the decoded values gives the same scale and codes"};
    Prop equi{"scale-equivariance", "scaling a block by 2^k scales s by 2^k and keeps the codes"};
    Prop unbiased{"stochastic-unbiased", "stochastic rounding replays with the same key, and its mean error over many keys is within 5 sigma of 0"};

    explicit Props(const Decl& d) {
        if (d.elem == ElemType::kTable) {
            odd.promised = false;
            odd.why_not = "a table need not be symmetric";
        } else if (d.rounding == Rounding::kNearestDown) {
            odd.promised = false;
            odd.why_not = "nearest-down breaks ties toward -inf, so a tie and its negation round apart";
        } else if (d.offset_min) {
            odd.promised = false;
            odd.why_not = "offset min puts the grid at the block's minimum, which negation moves to the other end";
        }
        if (d.rounding == Rounding::kStochastic) {
            monotone.promised = false;
            monotone.why_not = "stochastic rounding draws every element's rounding independently";
        }
        if (d.scale == ScaleType::kNone) {
            equi.promised = false;
            equi.why_not = "scale none: nothing carries the factor 2^k";
        }
        if (d.scale == ScaleType::kE4m3TensorAmax) {
            equi.promised = false;
            equi.why_not = "e4m3-tensor-amax: the tensor amax stays as declared, and the E4M3 block scale saturates at 448 and "
                           "loses bits below 2^-6";
        }
        if (d.elem == ElemType::kTable) {
            idem.promised = false;
            idem.why_not = "a table's grid is not uniform: the rounded absmax moves the scale";
        } else if (d.scale == ScaleType::kE8m0Ceil) {
            idem.promised = false;
            idem.why_not = "e8m0-ceil: an absmax just above 2^E rounds down onto 2^E (a grid value), and requantizing then "
                           "picks the scale half as large";
        } else if (multiplies(d.scale)) {
            idem.promised = false;
            idem.why_not = std::string(to_string(d.scale)) + ": the multiplier A / a and the stored scale are rounded apart, so a "
                           "decoded absmax need not map back onto the same codes";
        } else if (d.scale == ScaleType::kE8m0RceilMul || d.scale == ScaleType::kPow2RceilMul) {
            idem.promised = false;
            idem.why_not = std::string(to_string(d.scale)) + ": as under e8m0-rceil, a decoded absmax can round onto A 2^(e-1) "
                           "(a grid value), and requantizing then picks 2^(e-1); and fl32(a fl32(1/A)) need not be a / A";
        } else if (d.elem == ElemType::kFloat && !is_e8m0(d.scale)) {
            idem.promised = false;
            idem.why_not = "a float grid is not uniform: the rounded absmax moves an absmax scale";
        } else if (d.scale == ScaleType::kE8m0Rceil && (d.elem == ElemType::kFloat || d.rounding == Rounding::kTowardZero)) {
            idem.promised = false;
            idem.why_not = "e8m0-rceil: an absmax just above A 2^(e-1) can round down onto A 2^(e-1) (a grid value), and "
                           "requantizing then picks the scale 2^(e-1)";
        } else if (d.elem == ElemType::kInt && d.rounding == Rounding::kTowardZero && d.scale != ScaleType::kE8m0Floor) {
            idem.promised = false;
            idem.why_not = "toward-zero: a decoded value r s that binary32 rounds below r s requantizes one step down";
        } else if (d.elem == ElemType::kInt && d.offset_min) {
            idem.promised = false;
            idem.why_not = "offset min: the decoded maximum lo + qmax s is rounded, so the requantized step can move by an ulp";
        }
        if (d.rotated()) {  // FORMATS.md section 9
            monotone.promised = false;
            monotone.why_not = "a Hadamard rotation mixes the block: every decoded value depends on every element";
            idem.promised = false;
            idem.why_not = "the rotation back is rounded, so the decoded block is off the element grid";
        }
        if (d.rounding != Rounding::kStochastic) {
            unbiased.promised = false;
            unbiased.why_not = "only stochastic rounding is unbiased";
        }
    }
    std::vector<const Prop*> all() const { return {&bound, &kernel, &range, &monotone, &pack, &odd, &idem, &equi, &unbiased}; }
};

// The kernel under test: qtransit's (codec null) or a user's codec plugin.
Result<kernels::EncodedTensor> encode(const kernels::PluginCodec* codec, const FormatSpec& f, std::span<const float> x,
                                      int64_t block, uint64_t seed = 0) {
    kernels::CodecOptions o;
    o.seed = seed;
    if (!codec) return kernels::encode(f, x, block, o);
    const int64_t n = static_cast<int64_t>(x.size());
    if (n == 0) return make_error(ErrorCode::kInvalidArgument, "no elements");
    kernels::EncodedTensor t = kernels::sized_encoded(f, n, block);
    if (auto st = codec->encode(x, block, n, t.codes, t.scales, t.offsets, o); !st) return st.error();
    return t;
}

std::vector<float> decode(const kernels::PluginCodec* codec, const kernels::EncodedTensor& t) {
    if (!codec) return kernels::decode(t);
    std::vector<float> out(static_cast<size_t>(t.elements));
    if (!codec->decode(t.block, t.elements, t.codes, t.scales, t.offsets, out)) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    return out;
}

Result<CodecCheck> qcheck(const kernels::PluginCodec* codec, const FormatSpec& f, std::span<const float> x, int64_t block,
                          Nonfinite policy, const Site& site = {}, uint64_t seed = 0) {
    if (!codec) return quantize_and_check(f, x, block, policy, site, seed);
    return codec_check(codec, f, x, block, static_cast<int64_t>(x.size()), site, seed, kernels::Conformance::kExact);
}

// One input set of check_properties: the kernel's (or codec's) encoding of x, its codes and decoded
// values, and what the properties of one set need of the format.
struct PropInput {
    const kernels::PluginCodec* codec;
    const FormatSpec& f;
    const Decl& d;
    int64_t block;
    const std::string& label;
    std::span<const float> x;
    int64_t nb;                          // blocks
    const kernels::EncodedTensor& enc;
    const std::vector<int32_t>& codes;
    const std::vector<float>& dec;

    void check_range_monotone(Props& p) const;  // codes in range; decoded values monotone in x
    void check_odd(Props& p) const;             // -x decodes to minus what x decodes to
    void check_idempotent(Props& p) const;      // the decoded values requantize to the same codes
    void check_equivariant(Props& p) const;     // x 2^k quantizes to the same codes, scale times 2^k
};

// Codes in range; monotone: sort the block by x, then decoded (and int/table codes) must not decrease.
void PropInput::check_range_monotone(Props& p) const {
    const bool int_codes = d.elem != ElemType::kFloat;  // codes ordered like values (int two's complement, table index)
    for (int64_t j = 0; j < nb; ++j) {
        const size_t lo = static_cast<size_t>(j * block), hi = std::min(x.size(), lo + static_cast<size_t>(block));
        // codes in range
        ++p.range.checked;
        for (size_t i = lo; i < hi; ++i)
            if (codes[i] < f.code_min() || codes[i] > f.code_max()) {
                p.range.fail(label + " element " + std::to_string(i) + ": code " + std::to_string(codes[i]));
                break;
            }
        // monotone: sort the block by x, then decoded (and int/table codes) must not decrease
        std::vector<size_t> idx(hi - lo);
        std::iota(idx.begin(), idx.end(), lo);
        std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
        ++p.monotone.checked;
        for (size_t k = 1; k < idx.size(); ++k) {
            const size_t a = idx[k - 1], b = idx[k];
            if (dec[a] > dec[b] || (int_codes && codes[a] > codes[b])) {
                p.monotone.fail(label + ": x " + num(x[a]) + " <= " + num(x[b]) + " but decoded " + num(dec[a]) + " > " + num(dec[b]));
                break;
            }
        }
    }
}

// Odd symmetry: -x decodes to minus what x decodes to.
void PropInput::check_odd(Props& p) const {
    std::vector<float> neg(x.begin(), x.end());
    for (float& v : neg) v = -v;
    if (auto en = encode(codec, f, neg, block); en) {
        const auto dn = decode(codec, *en);
        for (int64_t j = 0; j < nb; ++j) {
            ++p.odd.checked;
            const size_t lo = static_cast<size_t>(j * block), hi = std::min(x.size(), lo + static_cast<size_t>(block));
            for (size_t i = lo; i < hi; ++i)
                if (!(dn[i] == -dec[i])) {
                    p.odd.fail(label + " element " + std::to_string(i) + ": x " + num(x[i]) + " decodes to " + num(dec[i]) +
                               ", -x to " + num(dn[i]));
                    break;
                }
        }
    }
}

// Idempotence: requantize the decoded values, block by block.
void PropInput::check_idempotent(Props& p) const {
    const auto& scales = enc.scales;
    if (auto e2 = encode(codec, f, dec, block); e2) {
        const auto c2 = kernels::unpack_codes(*e2);
        for (int64_t j = 0; j < nb; ++j) {
            const float s = scales[static_cast<size_t>(j)];
            const size_t lo = static_cast<size_t>(j * block), hi = std::min(x.size(), lo + static_cast<size_t>(block));
            if (!normal_scale(d, s)) {
                p.idem.skip("a subnormal or clamped scale");
                continue;
            }
            if (d.elem == ElemType::kFloat && d.scale_bytes() == 1) {  // e8m0 "unless saturated": |x| beyond vmax s
                bool sat = false;
                for (size_t i = lo; i < hi; ++i) sat = sat || std::fabs(static_cast<double>(x[i])) > static_cast<double>(d.vmax) * s;
                if (sat) {
                    p.idem.skip("a saturated block");
                    continue;
                }
            }
            ++p.idem.checked;
            if (!same_bits(e2->scales[static_cast<size_t>(j)], s)) {
                p.idem.fail(label + " block " + std::to_string(j) + ": scale " + num(s) + " requantizes to " + num(e2->scales[static_cast<size_t>(j)]));
                continue;
            }
            for (size_t i = lo; i < hi; ++i)
                if (c2[i] != codes[i]) {
                    p.idem.fail(label + " element " + std::to_string(i) + ": code " + std::to_string(codes[i]) + " requantizes to " +
                                std::to_string(c2[i]));
                    break;
                }
        }
    }
}

// Power-of-two scale equivariance, k = +3 and -5.
void PropInput::check_equivariant(Props& p) const {
    const auto& scales = enc.scales;
    for (int k : {3, -5}) {
        std::vector<float> y(x.begin(), x.end());
        for (float& v : y) v = std::ldexp(v, k);
        auto ey = encode(codec, f, y, block);
        if (!ey) continue;
        const auto cy = kernels::unpack_codes(*ey);
        const auto dy = decode(codec, *ey);
        for (int64_t j = 0; j < nb; ++j) {
            const size_t lo = static_cast<size_t>(j * block), hi = std::min(x.size(), lo + static_cast<size_t>(block));
            const float sx = scales[static_cast<size_t>(j)], sy = ey->scales[static_cast<size_t>(j)];
            bool premise = normal_scale(d, sx) && normal_scale(d, sy);
            for (size_t i = lo; i < hi && premise; ++i)
                premise = (x[i] == 0 || (std::fabs(x[i]) >= FLT_MIN && std::fabs(y[i]) >= FLT_MIN)) &&
                          (dec[i] == 0 || (std::fabs(dec[i]) >= FLT_MIN && std::fabs(std::ldexp(dec[i], k)) >= FLT_MIN &&
                                           std::fabs(dec[i]) < FLT_MAX)) &&
                          std::isfinite(y[i]);  // scaled into the subnormals it rounds twice; FLT_MAX may be a saturated val s (D1)
            if (!premise) {
                p.equi.skip("values or scales outside the normal range");
                continue;
            }
            ++p.equi.checked;
            if (d.scale != ScaleType::kNone && !(sy == std::ldexp(sx, k))) {
                p.equi.fail(label + " block " + std::to_string(j) + " x2^" + std::to_string(k) + ": scale " + num(sx) + " -> " + num(sy));
                continue;
            }
            for (size_t i = lo; i < hi; ++i)
                if (cy[i] != codes[i] || !(dy[i] == std::ldexp(dec[i], k))) {
                    p.equi.fail(label + " element " + std::to_string(i) + " x2^" + std::to_string(k) + ": code " +
                                std::to_string(codes[i]) + " -> " + std::to_string(cy[i]));
                    break;
                }
        }
    }
}

// Pack -> unpack over random codes and block lengths (reference pack, kernel unpack).
void check_pack(const FormatSpec& f, uint64_t seed, bool quick, Props& p) {
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<uint32_t>(state >> 33);
    };
    for (int c = 0; c < (quick ? 50 : 400); ++c) {
        const int64_t len = 1 + next() % 97, blk = f.fixed_block() ? f.fixed_block() : 1 + next() % 70;
        std::vector<int32_t> codes(static_cast<size_t>(len));
        const uint32_t span = static_cast<uint32_t>(f.code_max() - f.code_min() + 1);
        for (auto& q : codes) q = f.code_min() + static_cast<int32_t>(next() % span);
        const auto bytes = reference::pack(f, codes, blk);
        ++p.pack.checked;
        if (static_cast<int64_t>(bytes.size()) != f.wire_bytes(len, blk) - f.metadata_bytes() * ((len + blk - 1) / blk)) {
            p.pack.fail("length " + std::to_string(len) + " block " + std::to_string(blk) + ": " + std::to_string(bytes.size()) + " bytes");
            continue;
        }
        if (reference::unpack(f, bytes, len, blk) != codes) {
            p.pack.fail("length " + std::to_string(len) + " block " + std::to_string(blk) + ": the reference's unpack differs");
            continue;
        }
        for (int64_t i = 0; i < len; ++i) {
            const int64_t b = i / blk;
            const int32_t got = kernels::unpack_code(f, bytes.data() + b * f.code_bytes(blk), i % blk);
            if (got != codes[static_cast<size_t>(i)]) {
                p.pack.fail("length " + std::to_string(len) + " block " + std::to_string(blk) + " element " + std::to_string(i) +
                            ": kernel unpacks " + std::to_string(got) + ", packed " + std::to_string(codes[static_cast<size_t>(i)]));
                break;
            }
        }
    }
}

// Stochastic rounding: replay, bound on every key's output, mean error over many keys.
void check_stochastic(const kernels::PluginCodec* codec, const FormatSpec& f, const Decl& d, int64_t block, uint64_t seed, bool quick,
                      Props& p, std::vector<std::string>& notes) {
    const int keys = quick ? 24 : 200;
    std::vector<float> x(static_cast<size_t>(block * (quick ? 16 : 64)));
    for (int di = 0; di < 2; ++di) {
        const auto dist = di == 0 ? kernels::Distribution::kNormal : kernels::Distribution::kUniform;
        kernels::generate_span(dist, seed, 100 + static_cast<uint32_t>(di), 0, x);
        double sum = 0, sum2 = 0;
        int64_t n = 0;
        for (int key = 0; key < keys; ++key) {
            auto e = encode(codec, f, x, block, seed * 1000003ull + static_cast<uint64_t>(key) + 1);
            if (!e) {
                p.unbiased.fail(std::string(kernels::to_string(dist)) + ": " + e.error().message);
                break;
            }
            const auto dx = decode(codec, *e);
            if (key < 2) {  // the same key replays bit for bit, and the reference agrees at that key
                const uint64_t k = seed * 1000003ull + static_cast<uint64_t>(key) + 1;
                auto again = encode(codec, f, x, block, k);
                if (!again || again->codes != e->codes) p.unbiased.fail("the same key gave different codes");
                auto qc = qcheck(codec, f, x, block, Nonfinite::kError, {}, k);
                ++p.kernel.checked;
                ++p.bound.checked;
                if (!qc) p.kernel.fail("stochastic key " + std::to_string(k) + ": " + qc.error().message);
                else if (!qc->exact) p.kernel.fail("stochastic key " + std::to_string(k) + ": " + qc->first_difference);
                else if (!qc->bound_holds) p.bound.fail("stochastic key " + std::to_string(k) + ": an element exceeds its bound");
            }
            for (size_t i = 0; i < x.size(); ++i) {
                const float s = e->scales[i / static_cast<size_t>(block)];
                if (std::fabs(static_cast<double>(x[i])) > static_cast<double>(d.vmax) * s) continue;  // saturated: biased by design
                const double err = static_cast<double>(dx[i]) - static_cast<double>(x[i]);
                sum += err;
                sum2 += err * err;
                ++n;
            }
        }
        ++p.unbiased.checked;
        const double z = sum2 > 0 ? sum / std::sqrt(sum2) : 0.0;
        const std::string m = std::string(kernels::to_string(dist)) + ": mean error " + g4(n ? sum / static_cast<double>(n) : 0) +
                              " against RMS " + g4(n ? std::sqrt(sum2 / static_cast<double>(n)) : 0) + " over " + std::to_string(keys) +
                              " keys x " + std::to_string(x.size()) + " elements: z = " + g4(z);
        if (!(std::fabs(z) <= 5.0)) p.unbiased.fail(m + " (|z| > 5)");
        else notes.push_back("stochastic rounding, " + m);
    }
}

void check_properties(const kernels::PluginCodec* codec, const FormatSpec& f, const Decl& d, int64_t block, uint64_t seed, bool quick,
                      Props& p, std::vector<std::string>& notes) {
    const int64_t nblocks = quick ? 40 : 500;
    int64_t refused = 0;
    for (const auto& t : inputs(f, block, nblocks, seed)) {
        const std::span<const float> x(t.x);
        const int64_t nb = (static_cast<int64_t>(x.size()) + block - 1) / block;
        Site site;
        site.tensor = t.label;
        // The kernel's output is what every other property is measured on; the reference checks it.
        auto enc = encode(codec, f, x, block);
        auto qc = qcheck(codec, f, x, block, Nonfinite::kError, site);
        p.kernel.checked += nb;
        p.bound.checked += nb;
        if (!enc) {
            if (!qc && (enc.error().code == ErrorCode::kRangeOverflow || enc.error().code == ErrorCode::kNonFinite)) {
                ++refused;  // both refused the same input: the specified outcome
                continue;
            }
            p.kernel.fail(t.label + ": the kernel refused: " + enc.error().message);
            continue;
        }
        if (!qc) {
            p.kernel.fail(t.label + ": " + qc.error().message);
            p.bound.fail(t.label + ": not evaluated: " + qc.error().message);
        } else {
            if (!qc->exact) p.kernel.fail(t.label + ": " + qc->first_difference);
            if (!qc->bound_holds) {
                // A NaN decoded value is past every bound; max_error_to_bound covers the finite ones only.
                const int64_t v = qc->first_violation;
                const bool nan = v >= 0 && static_cast<size_t>(v) < qc->decoded.size() && std::isnan(qc->decoded[static_cast<size_t>(v)]);
                p.bound.fail(t.label + ": element " + std::to_string(v) +
                             (nan ? " decodes to NaN (input " + num(x[static_cast<size_t>(v)]) + "), past any bound"
                                  : " exceeds its bound (error/bound " + num(qc->max_error_to_bound) + ")"));
            }
        }
        const auto codes = kernels::unpack_codes(*enc);
        const auto dec = decode(codec, *enc);
        const PropInput in{codec, f, d, block, t.label, x, nb, *enc, codes, dec};
        in.check_range_monotone(p);
        in.check_odd(p);
        in.check_idempotent(p);
        in.check_equivariant(p);
    }
    if (refused) notes.push_back(std::to_string(refused) + " input set(s) refused by both kernel and reference (range overflow): the specified outcome");
    check_pack(f, seed, quick, p);
    if (d.rounding == Rounding::kStochastic) check_stochastic(codec, f, d, block, seed, quick, p, notes);
}

// The formats the declared one is placed against: a few built-ins that allow its block size.
std::vector<FormatSpec> neighbours(const FormatSpec& f, int64_t block) {
    std::vector<FormatSpec> out{f};
    for (const char* n : {"int4", "int8", "fp8-e4m3", "mxfp4", "nf4"}) {
        auto b = parse_format(n);
        if (b && b->check_block(block).ok() && b->name() != f.name()) out.push_back(*b);
    }
    return out;
}

std::vector<reports::FormatComparison::Row> comparison(const reports::GateResult& r, int64_t block) {
    std::vector<reports::FormatComparison::Row> rows;
    const std::string dist = r.dists.empty() ? "" : r.dists.front();
    for (const auto& name : r.formats) {
        reports::FormatComparison::Row row;
        row.format = name;
        if (auto f = parse_format(name)) row.bits = 8.0 * static_cast<double>(f->wire_bytes(block, block)) / static_cast<double>(block);
        int64_t n1 = 0, n2 = 0;
        for (const auto& x : r.runs) {
            if (x.format != name) continue;
            row.holds = row.holds && x.bound_holds;
            if (x.dist != dist || !x.quantized || x.shape == PathShape::kAllGather) continue;
            if (x.k_max == 1 && x.ranks >= n1) n1 = x.ranks, row.k1 = x.rel_rms_error;
            if (x.k_max == 2 && x.ranks >= n2) n2 = x.ranks, row.k2 = x.rel_rms_error;
            if (x.k_max > row.kmax) row.kmax = x.k_max, row.kmax_err = x.rel_rms_error;
        }
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

Result<FormatValidation> validate_format(const FormatSpec& f, const std::string& file, const ValidateOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    const kernels::PluginCodec* codec = o.codec.get();
    if (codec && !(codec->format() == f))
        return make_error(ErrorCode::kInvalidArgument, "the codec " + codec->name() + " implements " + codec->format().name() + ", not " + f.name());
    // The properties read the declaration; int<b> and int<b>-asym have one that reproduces them.
    Decl decl;
    if (f.decl) {
        decl = *f.decl;
    } else if (codec) {
        auto d = declaration_of(f);
        if (!d) return make_error(ErrorCode::kInvalidArgument, "formats validate --codec: " + d.error().message + " (check --codec runs every path on it)");
        decl = *d;
    } else {
        return make_error(ErrorCode::kInvalidArgument, f.name() + ": formats validate takes a declared format");
    }
    const int64_t block = f.fixed_block() ? f.fixed_block() : kDefaultBlock;
    if (codec)
        if (auto st = codec->check_block(block); !st)
            return make_error(ErrorCode::kInvalidArgument, "formats validate runs blocks of " + std::to_string(block) + ": " + st.error().message);
    FormatValidation v;
    v.format = f;
    v.file = file;

    // (a) the properties
    Props props(decl);
    std::vector<std::string> notes;
    check_properties(codec, f, decl, block, o.seed, o.quick, props, notes);
    const double t_props = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // (b) every path, next to the built-ins
    GateConfig cfg;
    cfg.source = "formats validate " + file;
    cfg.formats = neighbours(f, block);
    for (const auto& p : all_paths()) cfg.paths.push_back(p.kind);
    cfg.dists = o.quick ? std::vector{kernels::Distribution::kNormal}
                        : std::vector{kernels::Distribution::kNormal, kernels::Distribution::kHeavy};
    cfg.ranks = o.quick ? std::vector<int64_t>{8, 16} : std::vector<int64_t>{8, 32, 128};
    cfg.tree_ranks = cfg.ranks;
    cfg.tree_ranks_derived = false;
    cfg.ranks_per_node = kDefaultRanksPerNode;
    cfg.elements = o.quick ? 256 : 4096;
    cfg.block = block;
    cfg.seed = o.seed;
    cfg.codec = o.codec;  // run on the codec's format only; the neighbours keep qtransit's kernels
    auto res = run_gate(cfg, o.gate);
    if (!res) return res.error();

    for (const Prop* p : props.all()) {
        auto verdict = p->verdict(f.name());
        res->verdicts.push_back(verdict);
        const char* outcome = verdict.status == VerdictStatus::kPass   ? "holds"
                              : verdict.status == VerdictStatus::kFail ? "FAILS"
                              : p->promised                            ? "not run"
                                                                       : "not promised";
        v.properties.push_back({p->name, outcome, std::move(verdict)});
    }
    std::string others;
    for (size_t i = 1; i < cfg.formats.size(); ++i) others += (i > 1 ? ", " : "") + cfg.formats[i].name();
    res->notes.push_back("formats validate: " + f.name() + " declared in " + file + ", placed against " + others +
                         "; properties of docs/FORMATS.md section 6 on " + std::to_string(o.quick ? 40 : 500) +
                         " blocks per input distribution plus edge blocks and the generated near-tie and scale-boundary blocks (" + g4(t_props) + " s); a property the format does not "
                         "promise is reported as skipped, with what was measured.");
    for (auto& n : notes) res->notes.push_back(std::move(n));
    res->wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res->format_comparison = reports::FormatComparison{f.name(), file, res->dists.empty() ? "" : res->dists.front(), comparison(*res, block)};
    v.result = std::move(*res);
    return v;
}

std::vector<std::pair<std::string, std::string>> validation_reports(const FormatValidation& v) {
    auto decl_text = declaration_to_toml(v.format);
    return {{"report.json", reports::to_json(v.result).dump(2) + "\n"},
            {"report.md", reports::to_markdown(v.result)},
            {"junit.xml", reports::to_junit(v.result)},
            {"report.html", reports::to_html(v.result)},
            {"declaration.toml", decl_text ? *decl_text : ""}};
}

std::string validation_text(const FormatValidation& v) {
    const std::string& declared = v.format.name();
    std::string o = reports::summary_text(v.result) + "\nproperties of " + declared + " (docs/FORMATS.md section 6):\n";
    char line[512];
    for (const auto& p : v.properties) {
        std::snprintf(line, sizeof line, "  %-22s %-13s ", p.name.c_str(), p.outcome.c_str());
        o += line + p.verdict.message + "\n";
    }
    std::snprintf(line, sizeof line, "\n%-18s %12s %11s %11s %9s %11s %7s\n", "format", "bits/elem", "err k=1", "err k=2", "largest k",
                  "err there", "bounds");
    o += line;
    const reports::FormatComparison& fc = *v.result.format_comparison;
    for (const auto& r : fc.rows) {
        std::snprintf(line, sizeof line, "%-18s %12.3f %11s %11s %9d %11s %7s\n", (r.format + (r.format == declared ? " *" : "")).c_str(),
                      r.bits, g4_cell(r.k1).c_str(), g4_cell(r.k2).c_str(), r.kmax, g4_cell(r.kmax_err).c_str(), r.holds ? "hold" : "FAIL");
        o += line;
    }
    return o + "(* declared; relative RMS error of the reduce-scatter on " + fc.dist + " inputs)\n";
}

}  // namespace qtransit::gate
