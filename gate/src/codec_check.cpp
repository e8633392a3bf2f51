#include "qtransit/common/bits.hpp"
#include "qtransit/gate/codec_check.hpp"

#include "qtransit/common/tiles.hpp"
#include "qtransit/gate/boundaries.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "code_boundaries.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reports/numbers.hpp"

namespace qtransit::gate {
namespace {

int64_t ordered(float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i >= 0 ? i : -static_cast<int64_t>(i & 0x7fffffff);
}

std::string show(float v) {
    if (kernels::is_unwritten(v)) return "unwritten";
    if (std::isnan(v)) return "NaN";
    return reports::shortest(v);
}

// The reference over every shard, concatenated in qtransit's layout.
struct RefOut {
    std::vector<float> scales, offsets, decoded;
    std::vector<int32_t> codes;
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> poisoned;
    std::vector<reference::Quantized> per_shard;
};

Result<RefOut> reference_sharded(const FormatSpec& f, std::span<const float> x, int64_t block, int64_t shard,
                                 const Site& site, uint64_t seed) {
    RefOut r;
    reference::StochasticKey key;
    key.seed = seed;
    for (int64_t s = 0; s * shard < static_cast<int64_t>(x.size()); ++s) {
        Site ss = site;
        ss.index_base = site.index_base + s * shard;
        auto q = reference::quantize(f, x.subspan(static_cast<size_t>(s * shard), static_cast<size_t>(shard)), block,
                                     Nonfinite::kError, ss, key);
        if (!q) return q.error();
        r.scales.insert(r.scales.end(), q->scales.begin(), q->scales.end());
        r.offsets.insert(r.offsets.end(), q->offsets.begin(), q->offsets.end());
        r.decoded.insert(r.decoded.end(), q->decoded.begin(), q->decoded.end());
        r.codes.insert(r.codes.end(), q->codes.begin(), q->codes.end());
        const auto b = reference::pack(f, q->codes, block);
        r.bytes.insert(r.bytes.end(), b.begin(), b.end());
        r.per_shard.push_back(std::move(*q));
    }
    return r;
}

}  // namespace

// Whether a decoded value is what a convention block wants for element i (its value rounded to the
// codec's output type, a zero of either sign, NaN, inf or NaN, or anything).
static bool as_wanted(const reference::ConventionBlock& cb, size_t i, float got, kernels::ValueType out) {
    using Want = reference::ConventionBlock::Want;
    switch (cb.want[i]) {
        case Want::kValue: return same_bits(got, kernels::round_to(out, cb.value[i]));
        case Want::kZero: return got == 0;
        case Want::kNaN: return std::isnan(got);
        case Want::kNonfinite: return !std::isfinite(got);
        case Want::kAny: return true;
    }
    return false;
}

void add_tallies(std::vector<ConventionTally>& into, const std::vector<ConventionTally>& from) {
    for (const auto& t : from) {
        auto it = std::find_if(into.begin(), into.end(), [&](const ConventionTally& x) { return x.convention == t.convention; });
        if (it == into.end()) {
            into.push_back(t);
            continue;
        }
        it->blocks += t.blocks;
        it->elements += t.elements;
        if (it->first.empty()) it->first = t.first;
    }
}

void tally_applied(std::vector<ConventionTally>& into, const Decl& d, uint32_t applied, int64_t elements, const std::string& example) {
    for (uint32_t bit = 1; bit <= reference::kConvAll; bit <<= 1)
        if (applied & bit)
            add_tallies(into, {{reference::convention_key(bit), reference::convention_rule(d, bit), 1, elements, example}});
}

std::string tallies_summary(const std::vector<ConventionTally>& t) {
    std::string s;
    for (const auto& x : t)
        s += (s.empty() ? "" : "; ") + x.convention + " = " + x.rule + " in " + std::to_string(x.blocks) + " block" +
             (x.blocks == 1 ? "" : "s") + " (" + std::to_string(x.elements) + " differing elements)";
    return s;
}

bool refusal_as_declared(const kernels::PluginCodec& codec, const FormatSpec& format, std::span<const float> x, int64_t block,
                         std::span<const uint8_t> codes, std::span<const float> scales, std::span<const float> offsets,
                         std::vector<ConventionTally>* tallies) {
    if (format.kind != FormatKind::kDecl || !format.decl || !format.decl->conventions.any()) return false;
    const int64_t len = static_cast<int64_t>(x.size());
    std::vector<float> dec(x.size(), 0.0f);
    if (!codec.decode(block, len, codes, scales, offsets, dec)) return false;
    std::vector<ConventionTally> found;
    for (int64_t first = 0, j = 0; first < len; first += block, ++j) {
        const int64_t n = std::min(block, len - first);
        const auto xb = x.subspan(static_cast<size_t>(first), static_cast<size_t>(n));
        const auto cb = reference::convention_block(format, xb);
        if (!cb.applied) {
            // A block the format quantizes must come out as the format's.
            auto q = reference::quantize(format, xb, block);
            if (!q) return false;
            for (int64_t i = 0; i < n; ++i)
                if (!same_bits(dec[static_cast<size_t>(first + i)], kernels::round_to(codec.output_type(), q->decoded[static_cast<size_t>(i)])))
                    return false;
            continue;
        }
        for (int64_t i = 0; i < n; ++i) {
            if (!as_wanted(cb, static_cast<size_t>(i), dec[static_cast<size_t>(first + i)], codec.output_type())) return false;
        }
        std::string where;
        for (int64_t i = 0; i < n && where.empty(); ++i)
            if (!std::isfinite(xb[static_cast<size_t>(i)])) where = "element " + std::to_string(first + i) + " = " + show(xb[static_cast<size_t>(i)]);
        tally_applied(found, *format.decl, cb.applied, n,
                      "a call of " + std::to_string(len) + " elements with " + where + ": encoded, and block " + std::to_string(j) +
                          " decodes as nonfinite = \"" + reference::convention_rule(*format.decl, reference::kConvNonfinite) + "\" gives");
    }
    if (tallies) add_tallies(*tallies, found);
    return true;
}

kernels::CodecOptions shard_options(const Site& site, uint64_t seed, int64_t s, int64_t shard) {
    kernels::CodecOptions opt;
    opt.seed = seed;
    opt.site = site;
    opt.site.index_base = site.index_base + s * shard;
    return opt;
}

namespace {

// qtransit's own CPU kernel over every shard.
Status builtin_sharded(const FormatSpec& f, std::span<const float> x, int64_t block, int64_t shard, const Site& site,
                       uint64_t seed, kernels::EncodedTensor& enc, std::vector<float>& decoded) {
    const auto one = kernels::encoded_sizes(f, shard, block);
    const int64_t shards = static_cast<int64_t>(x.size()) / shard;
    decoded.assign(x.size(), 0.0f);
    for (int64_t s = 0; s < shards; ++s) {
        kernels::CodecOptions opt = shard_options(site, seed, s, shard);
        opt.threads = 1;
        auto codes = std::span<uint8_t>(enc.codes).subspan(static_cast<size_t>(s * one.code_bytes), static_cast<size_t>(one.code_bytes));
        auto scales = std::span<float>(enc.scales).subspan(static_cast<size_t>(s * one.blocks), static_cast<size_t>(one.blocks));
        auto offs = std::span<float>(enc.offsets).subspan(static_cast<size_t>(s * one.offsets), static_cast<size_t>(one.offsets));
        if (auto st = kernels::encode_into(f, x.subspan(static_cast<size_t>(s * shard), static_cast<size_t>(shard)), block, codes,
                                           scales, offs, opt);
            !st)
            return st;
        kernels::decode_into(f, block, codes, scales, offs,
                             std::span<float>(decoded).subspan(static_cast<size_t>(s * shard), static_cast<size_t>(shard)), 1,
                             kernels::sign_key(opt));
    }
    return Status::Ok();
}

// Everything after the kernel ran: c.encoded and c.decoded (the kernel's, or a run's) against the
// reference, bit for bit and against the format's bound (see codec_check's comment); sets every
// comparison field of c, and c.conforms under c.conformance. `who` names the kernel in messages.
class Judge {
public:
    Judge(CodecCheck& c, const RefOut& r, const FormatSpec& format, const std::vector<float>& x, const Site& site, kernels::ValueType out,
          const char* who_word, bool codes_given, bool meta_given)
        : c_(c), r_(r), format_(format), x_(x), site_(site), out_(out), who_word_(who_word), codes_given_(codes_given),
          meta_given_(meta_given), n_(c.elements), block_(c.block), shard_(c.shard) {}

    void run() {
        c_.ulp_histogram.assign(8, 0);
        unpack_codes();
        rdec_ = r_.decoded;
        for (float& v : rdec_) v = kernels::round_to(out_, v);
        compare_metadata();
        explain_by_conventions();
        explain_zero_signs();
        compare_elements();
        if (format_.kind == FormatKind::kDs && format_.fast_math) judge_admissible();
        bound_check(c_.decoded, r_.decoded, "decoded");
        wire_bound_check();
        c_.ulp_histogram[0] += n_ - c_.differing_elements;  // equal decoded values (a differing code alone counts as 0 ulps)
        c_.conforms = c_.conformance == kernels::Conformance::kExact ? c_.exact : c_.bound_holds;
    }

private:
    void unpack_codes();
    void compare_metadata();
    void explain_by_conventions();
    void explain_zero_signs();
    void compare_elements();
    void judge_admissible();
    void bound_check(const std::vector<float>& values, const std::vector<float>& unrounded, const char* what);
    void wire_bound_check();
    std::string block_text(int64_t j) const;
    std::string convention_example(int64_t j, int64_t at) const;

    CodecCheck& c_;
    const RefOut& r_;
    const FormatSpec& format_;
    const std::vector<float>& x_;
    const Site& site_;
    const kernels::ValueType out_;
    const char* who_word_;
    const bool codes_given_, meta_given_;
    const int64_t n_, block_, shard_;
    std::vector<float> rdec_;                                  // the reference's decoded values, in the codec's output type
    std::vector<int64_t> block_of_;                            // per element: its block
    std::vector<int64_t> block_first_, block_len_, block_byte_;  // per block: first element, length, first wire byte
    std::vector<uint8_t> meta_differs_;                        // per block: its scale (or offset) differs
    std::vector<uint32_t> explained_;                          // per block: the conventions that explain it (0: none)
};

// Codes in qtransit's layout, block by block over the shards.
void Judge::unpack_codes() {
    c_.codes.assign(static_cast<size_t>(n_), 0);
    block_of_.assign(static_cast<size_t>(n_), 0);
    int64_t byte = 0, j = 0;
    for (int64_t s = 0; s < n_ / shard_; ++s)
        for (int64_t b = 0; b * block_ < shard_; ++b, ++j) {
            const int64_t len = std::min(block_, shard_ - b * block_), first = s * shard_ + b * block_;
            block_first_.push_back(first);
            block_len_.push_back(len);
            block_byte_.push_back(byte);
            for (int64_t i = 0; i < len; ++i) {
                c_.codes[static_cast<size_t>(first + i)] = kernels::unpack_code(format_, c_.encoded.codes.data() + byte, i);
                block_of_[static_cast<size_t>(first + i)] = j;
            }
            byte += format_.code_bytes(len);
        }
}

// Blocks whose metadata differs.
void Judge::compare_metadata() {
    const int64_t nb = kernels::sharded_sizes(format_, n_, block_, shard_).blocks;
    meta_differs_.assign(static_cast<size_t>(nb), 0);
    for (int64_t j = 0; j < nb; ++j) {
        const bool ds = !same_bits(c_.encoded.scales[static_cast<size_t>(j)], r_.scales[static_cast<size_t>(j)]);
        const bool dof = format_.has_offset() && !same_bits(c_.encoded.offsets[static_cast<size_t>(j)], r_.offsets[static_cast<size_t>(j)]);
        meta_differs_[static_cast<size_t>(j)] = ds || dof;
        c_.differing_scale_blocks += ds || dof;
    }
}

// Blocks a declared convention explains (FORMATS.md section 10): the codec wrote exactly what the
// library's rule gives there. Left out of every comparison after this and tallied apart.
void Judge::explain_by_conventions() {
    const int64_t nb = static_cast<int64_t>(meta_differs_.size());
    explained_.assign(static_cast<size_t>(nb), 0);
    if (!(format_.kind == FormatKind::kDecl && format_.decl && format_.decl->conventions.any())) return;
    std::vector<int64_t> differing_in(static_cast<size_t>(nb), 0);
    for (int64_t i = 0; i < n_; ++i) {
        const size_t k = static_cast<size_t>(i);
        if (c_.codes[k] != r_.codes[k] || !same_bits(c_.decoded[k], rdec_[k])) ++differing_in[static_cast<size_t>(block_of_[k])];
    }
    for (int64_t j = 0; j < nb; ++j) {
        const size_t jj = static_cast<size_t>(j);
        if (!differing_in[jj] && !meta_differs_[jj]) continue;
        const int64_t first = block_first_[jj], len = block_len_[jj];
        const auto cb = reference::convention_block(format_, std::span<const float>(x_).subspan(static_cast<size_t>(first), static_cast<size_t>(len)));
        if (!cb.applied) continue;
        bool holds = !meta_given_ || cb.any_scale || same_bits(c_.encoded.scales[jj], cb.scale);
        int64_t at = -1;  // the first element whose difference it explains
        for (int64_t i = 0; i < len && holds; ++i) {
            const size_t k = static_cast<size_t>(first + i);
            const float got = c_.decoded[k];
            holds = as_wanted(cb, static_cast<size_t>(i), got, out_);
            if (at < 0 && (c_.codes[k] != r_.codes[k] || !same_bits(got, rdec_[k]))) at = first + i;
        }
        if (!holds) continue;
        explained_[jj] = cb.applied;
        const std::string example = convention_example(j, at) + (at >= 0 ? "; " : "") + "scale " + show(c_.encoded.scales[jj]) +
                                    ", the format's " + show(r_.scales[jj]);
        tally_applied(c_.conventions, *format_.decl, cb.applied, differing_in[jj], example);
    }
    for (int64_t j = 0; j < nb; ++j)
        if (explained_[static_cast<size_t>(j)] && meta_differs_[static_cast<size_t>(j)]) {
            meta_differs_[static_cast<size_t>(j)] = 0;
            --c_.differing_scale_blocks;
        }
}

// zero_sign = "any" (FORMATS.md section 10): a block whose every difference from the format is the
// sign of a zero (a decoded value, the scale or the offset the other zero; a code that decodes to
// the other zero) is the library's convention, tallied apart as the others are.
void Judge::explain_zero_signs() {
    if (!(format_.kind == FormatKind::kDecl && format_.decl && format_.decl->conventions.zero_sign_any)) return;
    auto zeros = [](float a, float b) { return a == 0.0f && b == 0.0f; };  // both zeros, of either sign
    auto as_numbers = [&](float a, float b) { return same_bits(a, b) || zeros(a, b); };
    for (size_t j = 0; j < explained_.size(); ++j) {
        if (explained_[j]) continue;
        if (meta_given_ && meta_differs_[j] &&
            !(as_numbers(c_.encoded.scales[j], r_.scales[j]) && (!format_.has_offset() || as_numbers(c_.encoded.offsets[j], r_.offsets[j]))))
            continue;
        const int64_t first = block_first_[j], len = block_len_[j];
        int64_t at = -1, differing = 0;
        bool holds = true;
        for (int64_t i = 0; i < len && holds; ++i) {
            const size_t k = static_cast<size_t>(first + i);
            if (c_.codes[k] == r_.codes[k] && same_bits(c_.decoded[k], rdec_[k])) continue;
            holds = zeros(c_.decoded[k], rdec_[k]);
            ++differing;
            if (at < 0) at = first + i;
        }
        if (!holds || (differing == 0 && !meta_differs_[j])) continue;
        explained_[j] = reference::kConvZeroSign;
        if (meta_differs_[j]) {
            meta_differs_[j] = 0;
            --c_.differing_scale_blocks;
        }
        const std::string example = convention_example(static_cast<int64_t>(j), at) + (at >= 0 ? "" : block_text(static_cast<int64_t>(j)));
        tally_applied(c_.conventions, *format_.decl, reference::kConvZeroSign, differing, example);
    }
}

// A convention mismatch's example: the block and its elements, and its first differing element `at`
// (-1: none) with what it decodes to against the format.
std::string Judge::convention_example(int64_t j, int64_t at) const {
    const size_t jj = static_cast<size_t>(j);
    const int64_t first = block_first_[jj], len = block_len_[jj];
    std::string t = "block " + std::to_string(j) + " (elements " + std::to_string(site_.index_base + first) + ".." +
                    std::to_string(site_.index_base + first + len - 1) + "): ";
    if (at >= 0)
        t += "element " + std::to_string(site_.index_base + at) + " (input " + show(x_[static_cast<size_t>(at)]) + ") decodes " +
             show(c_.decoded[static_cast<size_t>(at)]) + ", the format's reference " + show(rdec_[static_cast<size_t>(at)]);
    return t;
}

std::string Judge::block_text(int64_t j) const {
    if (!meta_given_) {  // a run that gave no scales (or offsets): only the reference's are known
        std::string t = "reference scale " + show(r_.scales[static_cast<size_t>(j)]);
        if (format_.has_offset()) t += ", offset " + show(r_.offsets[static_cast<size_t>(j)]);
        return t;
    }
    std::string t = "scale " + show(c_.encoded.scales[static_cast<size_t>(j)]) + " vs reference " + show(r_.scales[static_cast<size_t>(j)]);
    if (format_.has_offset())
        t += ", offset " + show(c_.encoded.offsets[static_cast<size_t>(j)]) + " vs " + show(r_.offsets[static_cast<size_t>(j)]);
    return t;
}

// Element by element (then block metadata, then wire bytes): the differences, their ulps, the first.
void Judge::compare_elements() {
    for (int64_t i = 0; i < n_; ++i) {
        const size_t k = static_cast<size_t>(i);
        if (explained_[static_cast<size_t>(block_of_[k])]) continue;
        const bool differs = c_.codes[k] != r_.codes[k] || !same_bits(c_.decoded[k], rdec_[k]);
        if (!differs) continue;
        ++c_.differing_elements;
        const int64_t j = block_of_[k];
        if (meta_differs_[static_cast<size_t>(j)]) ++c_.elements_in_differing_blocks;
        if (std::isfinite(c_.decoded[k]) && std::isfinite(rdec_[k])) {
            const int64_t u = std::llabs(ordered(c_.decoded[k]) - ordered(rdec_[k]));
            c_.max_ulps = std::max<int64_t>(c_.max_ulps, u);
            ++c_.ulp_histogram[u == 0 ? 0 : u == 1 ? 1 : u == 2 ? 2 : u <= 4 ? 3 : u <= 16 ? 4 : u <= 256 ? 5 : 6];
        } else if (!same_bits(c_.decoded[k], rdec_[k])) {
            ++c_.ulp_histogram[7];
        }
        if (c_.first_difference.empty()) {
            c_.first_differing = i;
            const int64_t s = i / shard_, in_shard = i % shard_;
            c_.first_difference = "element " + std::to_string(site_.index_base + i) + " (shard " + std::to_string(s) + ", block " +
                                  std::to_string(j) + ", element " + std::to_string(in_shard % block_) + " of it; input " + show(x_[k]) +
                                  "): " + who_word_ + " decodes " + show(c_.decoded[k]) +
                                  (codes_given_ ? " (code " + std::to_string(c_.codes[k]) + ")" : "") + ", reference " + show(rdec_[k]) +
                                  " (code " + std::to_string(r_.codes[k]) + "); " + block_text(j);
        }
    }
    if (c_.first_difference.empty() && c_.differing_scale_blocks)
        for (size_t j = 0; j < meta_differs_.size(); ++j)
            if (meta_differs_[j]) {
                c_.first_difference = "block " + std::to_string(j) + ": " + block_text(static_cast<int64_t>(j)) +
                                      " (every code and decoded value equal)";
                break;
            }
    auto byte_explained = [&](size_t b) {
        const auto it = std::upper_bound(block_byte_.begin(), block_byte_.end(), static_cast<int64_t>(b));
        return it != block_byte_.begin() && explained_[static_cast<size_t>(it - block_byte_.begin() - 1)] != 0;
    };
    if (c_.first_difference.empty())
        for (size_t b = 0; b < r_.bytes.size() && b < c_.encoded.codes.size(); ++b)
            if (r_.bytes[b] != c_.encoded.codes[b] && !byte_explained(b)) {
                c_.first_difference = "wire byte " + std::to_string(b) + ": " + std::to_string(c_.encoded.codes[b]) + " vs reference " +
                                      std::to_string(r_.bytes[b]) + " (the codes unpack equal: padding bits differ)";
                break;
            }
    c_.exact = c_.first_difference.empty();
}

// D23: a fast-math build may pick any admissible scale and step, so exact conformance asks for one
// of the admissible results on every element, not for the IEEE bits.
void Judge::judge_admissible() {
    const auto one = kernels::sharded_sizes(format_, shard_, block_, shard_);  // one shard's
    c_.admissible_model = true;
    c_.first_difference.clear();
    for (int64_t s = 0; s < n_ / shard_; ++s) {
        const size_t at = static_cast<size_t>(s * shard_), len = static_cast<size_t>(shard_);
        const auto a = reference::check_admissible(
            format_, std::span<const float>(x_).subspan(at, len), block_, std::span<const int32_t>(c_.codes).subspan(at, len),
            std::span<const float>(c_.encoded.scales).subspan(static_cast<size_t>(s * one.blocks), static_cast<size_t>(one.blocks)),
            std::span<const float>(c_.decoded).subspan(at, len), site_.index_base + static_cast<int64_t>(at));
        c_.inadmissible_elements += a.inadmissible_elements;
        c_.inadmissible_steps += a.inadmissible_steps;
        if (!a.holds && c_.first_difference.empty()) c_.first_difference = "not an admissible result (shard " + std::to_string(s) + "): " + a.first_text;
    }
    c_.exact = c_.first_difference.empty();
}

// The bound, per shard, with the reference's block statistics, on two sets of values: the kernel's
// decoded values, and what a receiver decoding the kernel's wire form (codes, scales, offsets) by
// the format's definition gets (wire_bound_check). The second is what another rank holds: a codec
// whose codes mean something else (another nibble order, sign-magnitude) fails it even when it
// decodes its own codes back to the right values.
//
// A codec whose output type is bfloat16 or binary16 (a plugin's output_type, check_codec's dtype)
// returns values rounded to it: that rounding is the type's, not the format's error, and the
// format's bound does not cover it. Where a value is exactly the rounding of the binary32 value it
// stands for (`unrounded`: the reference's decoded value, or the format's decode of the codec's
// wire form), the bound is checked on that value; anywhere else on the value itself.
void Judge::bound_check(const std::vector<float>& values, const std::vector<float>& unrounded, const char* what) {
    for (size_t s = 0; s < r_.per_shard.size(); ++s) {
        reference::Quantized q = r_.per_shard[s];
        const size_t base = s * static_cast<size_t>(shard_);
        for (size_t i = 0; i < q.decoded.size(); ++i) {
            const float v = values[base + i];
            const size_t j = i / static_cast<size_t>(block_);
            const bool poisoned = j < q.poisoned.size() && q.poisoned[j];
            // A block a convention explains keeps the reference's values: the library's rule has no
            // bound of the format's to meet.
            if (explained_[static_cast<size_t>(block_of_[base + i])]) continue;
            if (!poisoned && !std::isfinite(v)) {
                if (c_.bound_holds) {
                    c_.first_violation = static_cast<int64_t>(base + i);
                    c_.violation = std::string(what) + " element " + std::to_string(site_.index_base + static_cast<int64_t>(base + i)) +
                                   " is " + show(v) + " (input " + show(x_[base + i]) + ")";
                }
                c_.bound_holds = false;
                // q.decoded[i] keeps the reference's value: the exact check needs finite values.
            } else {
                const float u = unrounded[base + i];
                q.decoded[i] = out_ != kernels::ValueType::kBinary32 && same_bits(v, kernels::round_to(out_, u)) ? u : v;
            }
        }
        const auto bc = reference::check_bounds(q, std::span<const float>(x_).subspan(base, q.decoded.size()));
        c_.max_error_to_bound = std::max(c_.max_error_to_bound, bc.max_error_to_bound);
        if (!bc.holds) {
            if (c_.bound_holds) {
                c_.first_violation = static_cast<int64_t>(base) + bc.first_violation;
                const size_t k = base + static_cast<size_t>(bc.first_violation);
                c_.violation = std::string(what) + " element " + std::to_string(site_.index_base + static_cast<int64_t>(k)) + " is " +
                               show(values[k]) + " for input " + show(x_[k]) + ", past the format's bound (the reference decodes " +
                               show(rdec_[k]) + ")";
            }
            c_.bound_holds = false;
        }
    }
}

// The codes and metadata decoded by the format's definition, under the bound.
void Judge::wire_bound_check() {
    const auto one = kernels::sharded_sizes(format_, shard_, block_, shard_);  // one shard's
    std::vector<float> wire(static_cast<size_t>(n_)), wire32(static_cast<size_t>(n_));
    for (int64_t s = 0; s < n_ / shard_; ++s) {
        const auto codes = std::span<const int32_t>(c_.codes).subspan(static_cast<size_t>(s * shard_), static_cast<size_t>(shard_));
        const auto scales = std::span<const float>(c_.encoded.scales).subspan(static_cast<size_t>(s * one.blocks), static_cast<size_t>(one.blocks));
        const auto offs = std::span<const float>(c_.encoded.offsets).subspan(static_cast<size_t>(s * one.offsets), static_cast<size_t>(one.offsets));
        // A rotated format's signs: the key the reference drew this shard's with (FORMATS.md section 9).
        const auto& ref_shard = r_.per_shard[static_cast<size_t>(s)];
        const auto d = reference::decode(format_, codes, scales, offs, block_, ref_shard.sign_seed, ref_shard.sign_first);
        for (int64_t i = 0; i < shard_; ++i) {
            wire32[static_cast<size_t>(s * shard_ + i)] = d[static_cast<size_t>(i)];
            wire[static_cast<size_t>(s * shard_ + i)] = kernels::round_to(out_, d[static_cast<size_t>(i)]);
        }
    }
    bound_check(wire, wire32, "wire-decoded");
}

void judge(CodecCheck& c, const RefOut& r, const FormatSpec& format, const std::vector<float>& x, const Site& site,
           kernels::ValueType out, const char* who_word, bool codes_given = true, bool meta_given = true) {
    Judge(c, r, format, x, site, out, who_word, codes_given, meta_given).run();
}

// The largest |x_i - decoded_i| over the finite decoded values (x: the input as the caller gave it).
double largest_error(std::span<const float> decoded, std::span<const float> x) {
    double m = 0;
    for (size_t i = 0; i < decoded.size() && i < x.size(); ++i)
        if (std::isfinite(decoded[i])) m = std::max(m, std::fabs(static_cast<double>(decoded[i]) - static_cast<double>(x[i])));
    return m;
}

// Whether x, in shards of `shard`, is edge_tensor(format, block, seed) (the gate's, conforms()'s).
std::optional<EdgeTensor> as_edge_tensor(const FormatSpec& format, std::span<const float> x, int64_t block, int64_t shard, uint64_t seed) {
    const int64_t tail = block >= 3 ? block / 2 + 1 : (block == 2 ? 1 : 0);
    if (block < 1 || shard != 3 * block + tail) return std::nullopt;
    EdgeTensor e = edge_tensor(format, block, seed);
    if (e.shard == shard && e.x.size() == x.size() &&
        std::equal(x.begin(), x.end(), e.x.begin(), [](float a, float b) { return same_bits(a, b); }))
        return e;
    return std::nullopt;
}

}  // namespace

Result<CodecCheck> codec_check(const kernels::PluginCodec* codec, const FormatSpec& format, std::span<const float> x_in,
                               int64_t block, int64_t shard, const Site& site, uint64_t seed,
                               kernels::Conformance conformance) {
    const int64_t n = static_cast<int64_t>(x_in.size());
    if (shard <= 0) shard = n;
    if (n == 0 || n % shard)
        return make_error(ErrorCode::kInvalidArgument, "a kernel check needs a shard length that divides the " + std::to_string(n) + " elements");
    const kernels::ValueType in = codec ? codec->input_type() : kernels::ValueType::kBinary32;
    const kernels::ValueType out = codec ? codec->output_type() : kernels::ValueType::kBinary32;
    std::vector<float> x(x_in.begin(), x_in.end());
    for (float& v : x) v = kernels::round_to(in, v);
    // A finite input the cast to the codec's input type makes infinite is the input's problem, named
    // as that (the reference would call it "inf is not finite", a value the user never gave).
    if (in != kernels::ValueType::kBinary32)
        for (int64_t i = 0; i < n; ++i)
            if (std::isfinite(x_in[static_cast<size_t>(i)]) && !std::isfinite(x[static_cast<size_t>(i)])) {
                return make_error(ErrorCode::kRangeOverflow, describe(site, i) + ": value " + show(x_in[static_cast<size_t>(i)]) +
                                                                 " overflows " + kernels::to_string(in) +
                                                                 ", the codec's input type (the cast before it is called)");
            }

    CodecCheck c;
    c.conformance = conformance;
    c.elements = n;
    c.block = block;
    c.shard = shard;
    const std::string who = codec ? "codec '" + codec->name() + "'" : "the kernel";
    auto ref = reference_sharded(format, x, block, shard, site, seed);

    const auto sz = kernels::sharded_sizes(format, n, block, shard);
    c.encoded.format = format;
    c.encoded.block = block;
    c.encoded.elements = n;
    c.encoded.codes.assign(static_cast<size_t>(sz.code_bytes), 0);
    c.encoded.scales.assign(static_cast<size_t>(sz.blocks), 0.0f);
    c.encoded.offsets.assign(static_cast<size_t>(sz.offsets), 0.0f);
    Status st;
    if (codec) {
        kernels::CodecOptions opt;
        opt.seed = seed;
        opt.site = site;
        // The T the reference quantizes under (format's: declared, or resolved for a tensor).
        if (format.takes_tensor_amax()) opt.tensor_amax = format.decl->tensor_amax;
        st = codec->encode(x, block, shard, c.encoded.codes, c.encoded.scales, c.encoded.offsets, opt);
        if (st) {
            c.decoded.assign(x.size(), 0.0f);
            st = codec->decode(block, shard, c.encoded.codes, c.encoded.scales, c.encoded.offsets, c.decoded, opt.tensor_amax);
        }
    } else {
        st = builtin_sharded(format, x, block, shard, site, seed, c.encoded, c.decoded);
    }
    if (!st || !ref) {
        if (!st && !ref) return ref.error();  // both refuse: a bad input, said by the reference
        c.first_difference = !st ? who + (kernels::is_contract_breach(st.error()) ? " broke its contract on an input the reference quantizes: "
                                                                                   : " refused an input the reference quantizes: ") +
                                       st.error().message
                                 : who + " encoded an input the reference refuses: " + ref.error().message;
        c.refusal = c.first_difference;
        c.violation = c.first_difference;
        c.exact = false;
        c.bound_holds = false;
        c.conforms = false;
        return c;
    }
    judge(c, *ref, format, x, site, out, codec ? "codec" : "kernel");
    c.max_abs_error = largest_error(c.decoded, x_in);
    const auto edge = as_edge_tensor(format, x_in, block, shard, seed);
    // Which input class found the first difference (issue 47): a boundary input names itself.
    if (edge && c.first_differing >= 0)
        c.first_difference += " [input class: " + edge_input_class(*edge, c.first_differing) + "]";
    if (codec && edge) {
        if (std::string probe = refusal_probe(*codec, format, block, seed, &c.conventions); !probe.empty()) {
            if (c.first_difference.empty()) c.first_difference = probe;
            if (c.violation.empty()) c.violation = probe;
            if (c.first_violation < 0) c.first_violation = 0;
            c.exact = false;
            c.bound_holds = false;
            c.conforms = false;
        }
        if (!c.first_difference.empty()) c.input_class = c.first_differing >= 0 ? edge_input_class(*edge, c.first_differing) : "edge-tensor";
        // The generated boundary inputs (boundaries.hpp), once per format with the edge cases. Every
        // class runs, whatever the edge tensor found, so that the verdict can name each class that
        // differs (issue 52); the first finding replaces an empty first difference, or under
        // bounded conformance one within the bound when the hunt found a violation.
        const bool bounded = c.conformance == kernels::Conformance::kBounded;
        c.boundary_classes = tally_boundaries(*codec, format, block, seed);
        for (const auto& k : c.boundary_classes) add_tallies(c.conventions, k.conventions);
        if (c.first_difference.empty() || (bounded && c.bound_holds)) {
            auto h = first_finding(c.boundary_classes, c.conformance);
            if (h && (c.first_difference.empty() || h->violation)) {
                c.input_class = h->input_class;
                c.first_difference = h->message;
                c.exact = false;
                if (h->violation) {
                    c.violation = h->message;
                    if (c.first_violation < 0) c.first_violation = 0;
                    c.bound_holds = false;
                }
                c.conforms = c.conformance == kernels::Conformance::kExact ? c.exact : c.bound_holds;
            }
        }
        if (const std::string all = classes_summary(c.boundary_classes); !all.empty() && !c.first_difference.empty())
            c.first_difference += "; the boundary inputs differ in: " + all;
    }
    return c;
}

std::string refusal_probe(const kernels::PluginCodec& codec, const FormatSpec& format, int64_t block, uint64_t seed,
                          std::vector<ConventionTally>* tallies) {
    const int64_t len = std::max<int64_t>(block, 1);
    const float inf = std::numeric_limits<float>::infinity();
    // Unremarkable finite values of both signs, with one or two elements replaced.
    auto base = [&] {
        std::vector<float> v(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * (0.25f + 0.125f * static_cast<float>(i % 7));
        return v;
    };
    struct Probe {
        std::string what;
        std::vector<float> x;
    };
    std::vector<Probe> probes;
    {
        auto v = base();
        v[static_cast<size_t>(len / 2)] = std::numeric_limits<float>::quiet_NaN();
        probes.push_back({"NaN", std::move(v)});
        v = base();
        v[static_cast<size_t>(len - 1)] = inf;
        probes.push_back({"+inf", std::move(v)});
        v = base();
        v[0] = -inf;
        probes.push_back({"-inf", std::move(v)});
        // A range overflow, where the format has a range limit: the first candidate the reference
        // refuses as one (asym: hi - lo overflows; ds: beyond binary16).
        std::vector<std::vector<float>> overflow;
        v = base();
        v[0] = -FLT_MAX;
        v[static_cast<size_t>(len - 1)] = FLT_MAX;
        overflow.push_back(v);
        v = base();
        v[static_cast<size_t>(len - 1)] = 70000.0f;
        overflow.push_back(v);
        for (auto& o : overflow) {
            Site s;
            auto q = reference::quantize(format, o, block, Nonfinite::kError, s);
            if (!q && q.error().code == ErrorCode::kRangeOverflow) {
                probes.push_back({"range-overflow", std::move(o)});
                break;
            }
        }
    }
    const auto sz = kernels::sharded_sizes(format, len, block, len);
    for (auto& p : probes) {
        for (float& e : p.x) e = kernels::round_to(codec.input_type(), e);
        Site site;
        site.tensor = p.what + " probe";
        auto ref = reference::quantize(format, p.x, block, Nonfinite::kError, site);
        if (ref) continue;  // nothing to refuse after the cast
        std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes), 0);
        std::vector<float> scales(static_cast<size_t>(sz.blocks), 0.0f), offsets(static_cast<size_t>(sz.offsets), 0.0f);
        kernels::CodecOptions opt;
        opt.seed = seed;
        opt.site = site;
        if (!codec.encode(p.x, block, len, codes, scales, offsets, opt)) continue;  // refused, as it must
        if (refusal_as_declared(codec, format, p.x, block, codes, scales, offsets, tallies)) continue;  // poisoned, as declared
        std::string where;
        for (int64_t i = 0; i < len; ++i) {
            const float e = p.x[static_cast<size_t>(i)];
            if (!std::isfinite(e) || std::fabs(e) >= 65504.0f)
                where += (where.empty() ? "" : " and ") + ("element " + std::to_string(i) + " = " + show(e));
        }
        return "codec '" + codec.name() + "' encoded a block the reference refuses: the " + p.what + " probe, one block of " +
               std::to_string(len) + " elements with " + where + " (" +
               (ref.error().code == ErrorCode::kRangeOverflow ? "a range overflow" : "not finite") +
               "); a codec must refuse non-finite input and range overflow before writing anything (NUMERICS section 4)";
    }
    return "";
}

Result<CodecCheck> run_check(const FormatSpec& format, std::span<const float> x_in, int64_t block, int64_t shard,
                             const RunQuantization& run, kernels::Conformance conformance) {
    const int64_t n = static_cast<int64_t>(x_in.size());
    if (shard <= 0) shard = n;
    auto bad = [](const std::string& what) { return make_error(ErrorCode::kBadFile, what); };
    if (n == 0) return bad("the input has no elements");
    if (n % shard) return make_error(ErrorCode::kInvalidArgument, "--shard " + std::to_string(shard) + " does not divide the " + std::to_string(n) + " elements");
    const std::vector<float> x(x_in.begin(), x_in.end());
    Site site;
    site.tensor = "the input";
    auto ref = reference_sharded(format, x, block, shard, site, 0);
    if (!ref) return ref.error();
    const RefOut& r = *ref;
    const auto sz = kernels::sharded_sizes(format, n, block, shard);
    auto count = [](size_t got, int64_t want, const std::string& what, const std::string& unit) -> Status {
        if (static_cast<int64_t>(got) == want) return Status::Ok();
        return make_error(ErrorCode::kBadFile, what + " holds " + std::to_string(got) + " " + unit + ", but " + std::to_string(want) +
                                                   " are expected for this input, format and block (shard)");
    };
    if (auto st = count(run.decoded.size(), n, "decoded", "values"); !st) return st.error();
    CodecCheck c;
    c.conformance = conformance;
    c.elements = n;
    c.block = block;
    c.shard = shard;
    c.decoded = run.decoded;
    c.encoded.format = format;
    c.encoded.block = block;
    c.encoded.elements = n;
    if (run.has_wire) {
        if (auto st = count(run.wire_codes.size(), sz.code_bytes, "codes", "bytes"); !st) return st.error();
        c.encoded.codes = run.wire_codes;
    } else if (run.has_codes) {
        if (auto st = count(run.codes.size(), n, "codes", "codes"); !st) return st.error();
        // Packed per shard and block; a value that is not a code of the format does not survive the
        // packing, and is named.
        for (int64_t s = 0; s < n / shard; ++s) {
            const auto part = std::span<const int32_t>(run.codes).subspan(static_cast<size_t>(s * shard), static_cast<size_t>(shard));
            const auto b = reference::pack(format, part, block);
            const auto back = reference::unpack(format, b, shard, block);
            for (int64_t i = 0; i < shard; ++i)
                if (back[static_cast<size_t>(i)] != part[static_cast<size_t>(i)])
                    return bad("codes[" + std::to_string(s * shard + i) + "] = " + std::to_string(part[static_cast<size_t>(i)]) +
                               " is not a code of " + format.name());
            c.encoded.codes.insert(c.encoded.codes.end(), b.begin(), b.end());
        }
    } else {
        c.encoded.codes = r.bytes;  // not given: the reference's, so that only what was given is compared
    }
    if (run.has_scales) {
        if (auto st = count(run.scales.size(), sz.blocks, "scales", "values"); !st) return st.error();
        c.encoded.scales = run.scales;
    } else {
        c.encoded.scales = r.scales;
    }
    if (run.has_offsets) {
        if (!format.has_offset()) return make_error(ErrorCode::kInvalidArgument, "offsets given, but " + format.name() + " has none");
        if (auto st = count(run.offsets.size(), sz.offsets, "offsets", "values"); !st) return st.error();
        c.encoded.offsets = run.offsets;
    } else {
        c.encoded.offsets = r.offsets;
    }
    judge(c, r, format, x, site, kernels::ValueType::kBinary32, "the run", run.has_wire || run.has_codes,
          run.has_scales || run.has_offsets);
    c.max_abs_error = largest_error(c.decoded, x);
    // The worst element: the largest |x - decoded| / E(x), with the reference's block statistics.
    for (size_t s = 0; s < r.per_shard.size(); ++s) {
        const auto& q = r.per_shard[s];
        const size_t base = s * static_cast<size_t>(shard);
        for (size_t i = 0; i < q.decoded.size(); ++i) {
            const size_t k = base + i;
            const size_t j = i / static_cast<size_t>(block);
            if ((j < q.poisoned.size() && q.poisoned[j]) || !std::isfinite(c.decoded[k])) continue;
            const double err = std::fabs(static_cast<double>(c.decoded[k]) - static_cast<double>(x[k]));
            const double e = reference::element_bound(q, std::span<const float>(x).subspan(base, q.decoded.size()), static_cast<int64_t>(i)).to_double();
            const double ratio = e > 0 ? err / e : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
            if (c.worst_element < 0 || ratio > c.worst_ratio) {
                c.worst_element = static_cast<int64_t>(k);
                c.worst_ratio = ratio;
                c.worst_error = err;
                c.worst_bound = e;
                c.worst_input = x[k];
                c.worst_decoded = c.decoded[k];
            }
        }
    }
    return c;
}

// ---- the edge tensor ------------------------------------------------------------------------------
namespace {

// One block's values of length len, recipe r (see edge_tensor's comment).
std::vector<float> recipe(const FormatSpec& f, int r, int64_t len, uint64_t seed, int64_t salt) {
    std::vector<float> v(static_cast<size_t>(len));
    const int b = f.bits;
    const int32_t qmax = f.kind == FormatKind::kAsym ? (1 << b) - 1 : (1 << (std::min(b, 8) - 1)) - 1;
    auto ties = [&](float s, float sign) {
        // Element 0 holds the largest magnitude qmax * s; the others sit on exact ties (k + 1/2) s.
        // Element 1 (asym: 2) is the tie 1/2 s, so that a block of two (asym: three) has one.
        const int64_t first_tie = f.kind == FormatKind::kAsym ? 2 : 1;
        for (int64_t i = 0; i < len; ++i) {
            const int32_t k = static_cast<int32_t>(((i - first_tie) % std::max(qmax, 1) + std::max(qmax, 1)) % std::max(qmax, 1));
            float t = (static_cast<float>(k) + 0.5f) * s;
            if (f.kind != FormatKind::kAsym && (i % 3 == 1)) t = -t;
            v[static_cast<size_t>(i)] = sign * t;
        }
        if (f.kind == FormatKind::kAsym) {
            v[0] = 0.0f;
            if (len > 1) v[1] = sign * static_cast<float>(qmax) * s;  // lo, hi = 0, ±qmax s: s exact
        } else {
            v[0] = sign * static_cast<float>(qmax) * s;
        }
    };
    switch (r) {
        case 0: {  // ties on a power-of-two scale
            if (f.kind == FormatKind::kDs) {
                // a = 4: scale = fl32(2^b / 8), a power of two; x = (k + 1/2) / scale are exact ties
                // of x * scale, and exact in binary16.
                const float scale = static_cast<float>(1 << b) / 8.0f;
                for (int64_t i = 0; i < len; ++i)
                    v[static_cast<size_t>(i)] = (static_cast<float>(i % (1 << (b - 1))) + 0.5f) / scale * (i % 2 ? -1.0f : 1.0f);
                v[0] = 4.0f;
            } else {
                ties(0.125f, 1.0f);
            }
            break;
        }
        case 1: ties(3.0f * 0.0625f, 1.0f); break;   // ties on the scale 3/16: x / s exact, x * fl32(1/s) not
        case 2: ties(3.0f * 0.0625f, -1.0f); break;  // the same with a negative absmax
        case 3: {  // subnormal block, negative absmax: s = max(fl32(a / qmax), 2^-149) loses bits
            // int8: a = 300 ulps, s = 2 ulps, -300 / s = -150 is clamped; 4 bits: a = 10, s = 1 ulp.
            const int wide[] = {-300, 3, 7, -5, 1, 2, -9, 4, -1, 6, -150, 100, 77, -151, 13, -2};
            const int narrow[] = {-10, 3, 7, -5, 1, 2, -9, 4, -1, 6, -8, 5, 9, -7, 8, -2};
            const int* ulps = b > 4 ? wide : narrow;
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = static_cast<float>(ulps[i % 16]) * 0x1p-149f;
            break;
        }
        case 4: {  // subnormals under a small normal absmax: they quantize to nonzero codes
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(1 + i % 5) * 0x1p-128f;
            v[0] = 0x1p-124f;
            break;
        }
        case 5:  // ±0
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = i % 2 ? -0.0f : 0.0f;
            break;
        case 6:  // constant
            for (auto& e : v) e = -1.25f;
            break;
        case 7: {  // the largest magnitude last
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = 0.001f * static_cast<float>(1 + i) * (i % 2 ? -1.0f : 1.0f);
            v[static_cast<size_t>(len - 1)] = -3.5f;
            break;
        }
        case 8:  // one-signed, away from 0 (a zero entering the statistics moves lo)
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = 2.0f + 0.0625f * static_cast<float>(i % 9);
            break;
        case 9:
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = -2.0f - 0.0625f * static_cast<float>(i % 9);
            break;
        case 10: {  // FLT_MAX
            for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 5) * 1e37f * (i % 2 ? -1.0f : 1.0f);
            v[0] = FLT_MAX;
            break;
        }
        default: {  // random normal values
            for (int64_t i = 0; i < len; ++i)
                v[static_cast<size_t>(i)] = kernels::generate(kernels::Distribution::kNormal, seed, 7,
                                                              static_cast<uint64_t>(salt * 65536 + i));
            break;
        }
    }
    return v;
}

}  // namespace

EdgeTensor edge_tensor(const FormatSpec& f, int64_t block, uint64_t seed) {
    EdgeTensor t;
    const int64_t tail = block >= 3 ? block / 2 + 1 : (block == 2 ? 1 : 0);
    t.shard = 3 * block + tail;
    constexpr int kRecipes = 14;  // 11 fixed ones, 3 random
    // Each block slot takes the next recipe the reference accepts; short blocks (the shards' last)
    // cycle over the ones that tell a short block apart.
    const int shorts[] = {8, 9, 0, 3, 7, 1};
    int next = 0, next_short = 0;
    int64_t salt = 0;
    while (next < kRecipes || (tail > 0 && next_short < 6)) {
        for (int64_t b = 0; b * block < t.shard; ++b) {
            const int64_t len = std::min(block, t.shard - b * block);
            const bool short_block = len < block;
            std::vector<float> v;
            for (int tries = 0; tries < kRecipes; ++tries) {
                const int r = short_block ? shorts[next_short++ % 6] : (next++ % kRecipes);
                v = recipe(f, r, len, seed, ++salt);
                Site s;
                if (reference::quantize(f, v, block, Nonfinite::kError, s)) break;
                v.clear();
            }
            if (v.empty()) v.assign(static_cast<size_t>(len), 0.0f);
            t.x.insert(t.x.end(), v.begin(), v.end());
        }
    }
    // Then the code boundaries (code_boundaries.hpp), in whole shards: each block the set's anchors, then
    // the next boundary values; a block the reference would not take (it cannot happen by
    // construction, but a declared format may surprise) holds the anchor alone.
    const auto sets = boundary_blocks(f, block);
    if (!sets.empty()) t.boundary_from = static_cast<int64_t>(t.x.size());
    for (const auto& set : sets) {
        size_t next = 0;
        while (next < set.values.size()) {
            for (int64_t b = 0; b * block < t.shard; ++b) {
                const int64_t len = std::min(block, t.shard - b * block);
                std::vector<float> v(static_cast<size_t>(len), set.anchors[0]);
                if (len > static_cast<int64_t>(set.anchors.size())) {
                    std::copy(set.anchors.begin(), set.anchors.end(), v.begin());
                    for (size_t k = set.anchors.size(); k < v.size() && next < set.values.size(); ++k) v[k] = set.values[next++];
                    Site s;
                    if (!reference::quantize(f, v, block, Nonfinite::kError, s)) v.assign(v.size(), set.anchors[0]);
                }
                t.x.insert(t.x.end(), v.begin(), v.end());
            }
        }
    }
    return t;
}

std::string edge_input_class(const EdgeTensor& e, int64_t i) {
    return e.boundary_from >= 0 && i >= e.boundary_from ? "code-boundaries" : "edge-tensor";
}

Status tile_order_run(const FormatSpec& format, std::span<const int64_t> shape, int64_t shard, std::vector<float>& x,
                      RunQuantization& run) {
    if (!format.tiled()) return Status::Ok();
    auto grid = tile_grid(format, shape);
    if (!grid) return grid.error();
    if (shard != 0) return make_error(ErrorCode::kInvalidArgument, "shard is for 1-D blocks; " + format.name() + " quantizes tiles");
    x = to_tile_order<float>(x, *grid);
    run.decoded = to_tile_order<float>(run.decoded, *grid);
    if (run.has_codes) run.codes = to_tile_order<int32_t>(run.codes, *grid);
    return Status::Ok();
}

}  // namespace qtransit::gate
