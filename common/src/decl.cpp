#include "qtransit/common/decl.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace qtransit {

const char* to_string(ElemType t) {
    switch (t) {
        case ElemType::kInt: return "int";
        case ElemType::kFloat: return "float";
        case ElemType::kTable: return "table";
    }
    return "?";
}
const char* to_string(FloatSpecial s) {
    switch (s) {
        case FloatSpecial::kIeee: return "ieee";
        case FloatSpecial::kNanOnly: return "nan-only";
        case FloatSpecial::kNone: return "none";
    }
    return "?";
}
const char* to_string(NonfiniteRule r) {
    switch (r) {
        case NonfiniteRule::kRefuse: return "refuse";
        case NonfiniteRule::kPoison: return "poison";
        case NonfiniteRule::kPropagate: return "propagate";
        case NonfiniteRule::kSaturate: return "saturate";
    }
    return "?";
}

const char* to_string(ScaleType s) {
    switch (s) {
        case ScaleType::kFp32Absmax: return "fp32-absmax";
        case ScaleType::kFp16Absmax: return "fp16-absmax";
        case ScaleType::kE8m0Floor: return "e8m0-floor";
        case ScaleType::kE8m0Rceil: return "e8m0-rceil";
        case ScaleType::kE8m0Even: return "e8m0-even";
        case ScaleType::kE8m0Ceil: return "e8m0-ceil";
        case ScaleType::kE8m0FbgemmEven: return "e8m0-fbgemm-even";
        case ScaleType::kFp32EpsMul: return "fp32-eps-mul";
        case ScaleType::kNone: return "none";
        case ScaleType::kFp32AmaxMul: return "fp32-amax-mul";
        case ScaleType::kFp32AmaxMulRcp: return "fp32-amax-mul-rcp";
        case ScaleType::kE8m0RceilMul: return "e8m0-rceil-mul";
        case ScaleType::kPow2RceilMul: return "pow2-rceil-mul";
        case ScaleType::kFp32AmaxMulInv: return "fp32-amax-mul-inv";
        case ScaleType::kE4m3TensorAmax: return "e4m3-tensor-amax";
    }
    return "?";
}
const char* to_string(Rounding r) {
    switch (r) {
        case Rounding::kNearestEven: return "nearest-even";
        case Rounding::kNearestAway: return "nearest-away";
        case Rounding::kNearestDown: return "nearest-down";
        case Rounding::kTowardZero: return "toward-zero";
        case Rounding::kStochastic: return "stochastic";
    }
    return "?";
}
const char* to_string(Packing p) { return p == Packing::kLsbFirst ? "lsb-first" : "msb-first"; }
const char* to_string(Transform t) { return t == Transform::kHadamard ? "hadamard" : "none"; }

int Decl::scale_bytes() const {
    switch (scale) {
        case ScaleType::kFp32Absmax: return 4;
        case ScaleType::kFp16Absmax: return 2;
        case ScaleType::kE8m0Floor:
        case ScaleType::kE8m0Rceil:
        case ScaleType::kE8m0Even:
        case ScaleType::kE8m0Ceil:
        case ScaleType::kE8m0FbgemmEven:
        case ScaleType::kE8m0RceilMul:
        case ScaleType::kE4m3TensorAmax: return 1;  // the tensor's T: 4 bytes once per tensor (FormatSpec::tensor_bytes)
        case ScaleType::kNone: return 0;
        case ScaleType::kFp32AmaxMul:
        case ScaleType::kFp32AmaxMulRcp:
        case ScaleType::kFp32AmaxMulInv:
        case ScaleType::kFp32EpsMul:
        case ScaleType::kPow2RceilMul: return 4;
    }
    return 4;
}
int Decl::metadata_bytes() const { return scale_bytes() + (offset_min ? 4 : 0); }

int32_t Decl::code_min() const { return elem == ElemType::kInt ? qmin : 0; }
int32_t Decl::code_max() const { return elem == ElemType::kInt ? qmax : (1 << bits) - 1; }

namespace {

Status bad(const std::string& key, const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument, key + ": " + what);
}

// floor(log2 v) for a finite v > 0.
int32_t floor_log2(double v) {
    int e = 0;
    std::frexp(v, &e);  // v = m 2^e, m in [0.5, 1)
    return e - 1;
}

bool exact_float(double v) { return static_cast<double>(static_cast<float>(v)) == v; }

}  // namespace

void set_tensor_amax(Decl& d, float t) {
    d.tensor_amax = t;
    const float k = 448.0f * d.amp;  // exact: A has at most 8 significant bits
    float enc = t == 0 ? 1.0f : std::min(k / t, std::numeric_limits<float>::max());
    if (enc == 0) enc = 1.0f;
    d.t_enc = enc;
    d.t_dec = 1.0f / enc;
    d.t_blk = enc * d.amp_rcp;
    d.t_rcp_k = 1.0f / k;
}

Status finalize(Decl& d) {
    if (d.fixed_block < 0) return bad("block", "must be a positive integer (or absent for any block size)");
    if (d.tile_rows != 0 || d.tile_cols != 0) {
        if (d.tile_rows < 1 || d.tile_cols < 1 || static_cast<int64_t>(d.tile_rows) * d.tile_cols > (1 << 20))
            return bad("tile", "must be [rows, cols], two positive integers whose product is at most 2^20");
        const int32_t area = d.tile_rows * d.tile_cols;
        if (d.fixed_block != 0 && d.fixed_block != area)
            return bad("block", "is " + std::to_string(d.fixed_block) + ", but a tile of " + std::to_string(d.tile_rows) + " x " +
                                    std::to_string(d.tile_cols) + " is a block of " + std::to_string(area) + " (leave block out)");
        d.fixed_block = area;
        if (d.rotated()) return bad("tile", "a tile does not combine with transform 'hadamard' yet");
    }
    if (d.random_signs && !d.rotated()) return bad("signs", "'random' signs need transform = 'hadamard'");
    if (d.rotated() && d.fixed_block && !std::has_single_bit(static_cast<unsigned>(d.fixed_block)))
        return bad("block", "transform 'hadamard' rotates each block, whose length must be a power of two; got " +
                                std::to_string(d.fixed_block));
    // A rotated block without a scale has no place to mark a poisoned block (a NaN under `propagate`):
    // its NaN codes would go through the rotation back as arithmetic. No rotated format goes without one.
    if (d.rotated() && d.scale == ScaleType::kNone)
        return bad("transform", "'hadamard' needs a scale (scale 'none' has no way to mark a poisoned block through the "
                                "rotation back)");
    if (d.rotated() && d.offset_min)
        return bad("offset", "'min' does not combine with transform 'hadamard' (a rotated block is centred: use "
                             "offset 'none')");
    if (d.scale == ScaleType::kNone && d.offset_min)
        return bad("offset", "'min' needs a scale (scale = 'none' leaves no room for the offset's step)");
    if (d.scale == ScaleType::kE8m0Even && d.elem != ElemType::kFloat)
        return bad("scale", "'e8m0-even' rounds the absmax at the element's mantissa width (torchao's EVEN): it needs a float element");
    if (d.scale == ScaleType::kE8m0FbgemmEven && d.elem != ElemType::kFloat)
        return bad("scale", "'e8m0-fbgemm-even' rounds the absmax at the element's mantissa width (FBGEMM's MX4 'even'): it needs a float element");
    switch (d.elem) {
        case ElemType::kInt: {
            if (d.bits < 2 || d.bits > 8) return bad("element.bits", "must be 2..8, got " + std::to_string(d.bits));
            if (d.fraction_bits < 0 || d.fraction_bits > 16)
                return bad("element.fraction_bits", "must be 0..16, got " + std::to_string(d.fraction_bits));
            if (!d.is_signed && d.full_range)
                return bad("element.range", "'full' is for signed elements (unsigned codes always use 0..2^bits-1)");
            if (!d.is_signed && !d.offset_min)
                return bad("element.signed", "unsigned elements cannot hold negative values: they need offset = 'min'");
            if (d.is_signed) {
                d.qmax = (1 << (d.bits - 1)) - 1;
                d.qmin = d.full_range ? -(1 << (d.bits - 1)) : -d.qmax;
            } else {
                d.qmin = 0;
                d.qmax = (1 << d.bits) - 1;
            }
            const double unit = std::ldexp(1.0, -d.fraction_bits);
            d.vmax = static_cast<float>(d.qmax * unit);
            d.vmin = static_cast<float>(d.qmin * unit);
            d.amp = d.vmax;  // full range: the extra negative code is reached by rounding only
            break;
        }
        case ElemType::kFloat: {
            const int e = d.exp_bits, m = d.man_bits;
            if (e < 1 || m < 0) return bad("element.exponent_bits", "needs exponent_bits >= 1 and mantissa_bits >= 0");
            if (1 + e + m > 8)
                return bad("element.mantissa_bits", "1 + exponent_bits + mantissa_bits = " + std::to_string(1 + e + m) +
                                                        " exceeds 8 (codes are at most one byte)");
            if (1 + e + m < 2) return bad("element.exponent_bits", "a float element needs at least 2 bits");
            d.bits = 1 + e + m;
            if (d.special == FloatSpecial::kIeee && e < 2)
                return bad("element.special", "'ieee' needs exponent_bits >= 2 (one exponent is reserved for inf/NaN)");
            if (d.special == FloatSpecial::kNanOnly && m < 1)
                return bad("element.special", "'nan-only' needs mantissa_bits >= 1 (the all-ones code is NaN)");
            const int top = (1 << e) - 1;  // the all-ones exponent field
            double maxv = 0;
            switch (d.special) {
                case FloatSpecial::kIeee: maxv = (2.0 - std::ldexp(1.0, -m)) * std::ldexp(1.0, top - 1 - d.bias); break;
                case FloatSpecial::kNanOnly: maxv = (2.0 - std::ldexp(1.0, 1 - m)) * std::ldexp(1.0, top - d.bias); break;
                case FloatSpecial::kNone: maxv = (2.0 - std::ldexp(1.0, -m)) * std::ldexp(1.0, top - d.bias); break;
            }
            d.emin = 1 - d.bias;
            if (d.emin - m < -126)
                return bad("element.bias", "bias " + std::to_string(d.bias) + " puts the smallest subnormal at 2^" +
                                               std::to_string(d.emin - m) + ", below binary32's normal range (2^-126)");
            if (!(maxv <= std::numeric_limits<float>::max()))
                return bad("element.bias", "bias " + std::to_string(d.bias) + " puts the largest value above FLT_MAX");
            d.max_finite = static_cast<float>(maxv);
            d.vmax = d.max_finite;
            d.vmin = -d.max_finite;
            d.amp = d.max_finite;
            break;
        }
        case ElemType::kTable: {
            const int n = d.table_size;
            // Codes are 2..8 bits: 4, 8, ..., 256 values.
            if (n < 4 || n > kMaxTable || !std::has_single_bit(static_cast<unsigned>(n)))
                return bad("element.values", "needs 4, 8, 16, 32, 64, 128 or 256 values (a power of two; codes of 2 to 8 bits), got " +
                                                 std::to_string(n));
            d.bits = std::countr_zero(static_cast<unsigned>(n));
            for (int i = 0; i < n; ++i) {
                if (!std::isfinite(d.table[i]))
                    return bad("element.values", "value " + std::to_string(i) + " is not finite");
                if (i > 0 && !(d.table[i - 1] < d.table[i]))
                    return bad("element.values", "values must be strictly increasing (value " + std::to_string(i) +
                                                     " is not above value " + std::to_string(i - 1) + ")");
            }
            for (int i = 0; i + 1 < n; ++i) {
                const double a = d.table[i], b = d.table[i + 1], s = a + b;
                if (s - a != b || s - b != a || !exact_float(a) || !exact_float(b))
                    return bad("element.values", "the midpoint of values " + std::to_string(i) + " and " +
                                                     std::to_string(i + 1) + " is not exact in binary64 (their magnitudes "
                                                     "are too far apart)");
                d.mid[i] = s / 2;
            }
            if (d.rounding == Rounding::kTowardZero || d.rounding == Rounding::kStochastic)
                return bad("rounding", std::string("'") + to_string(d.rounding) +
                                           "' is not defined for a table (use nearest-even, nearest-away or nearest-down)");
            d.vmin = d.table[0];
            d.vmax = d.table[n - 1];
            d.amp = std::max(std::fabs(d.vmin), std::fabs(d.vmax));
            if (d.vmax <= 0) return bad("element.values", "the table has no positive value");
            break;
        }
        default: return bad("element.type", "unknown element type");
    }
    if (!(d.amp > 0)) return bad("element", "the element type has no non-zero value");
    d.emax_elem = floor_log2(d.amp);
    d.amp_rcp = 1.0f / d.amp;  // binary32 division, RNE
    if (!takes_amax_floor(d.scale) && d.amax_floor != 0)
        return bad("amax_floor", std::string("is for the scales fp32-amax-mul, fp32-amax-mul-rcp, fp32-amax-mul-inv, e8m0-rceil-mul and pow2-rceil-mul; scale '") +
                                     to_string(d.scale) + "' has its own floor (a library's: [conventions] scale_floor)");
    if (!(d.amax_floor >= 0) || !std::isfinite(d.amax_floor))
        return bad("amax_floor", "must be a finite binary32 value >= 0");
    if (takes_amax_floor(d.scale)) {
        const std::string name = to_string(d.scale);
        if (d.offset_min) return bad("offset", "'min' does not combine with scale '" + name + "' (it scales the absmax)");
        if (d.rotated()) return bad("transform", "'hadamard' does not combine with scale '" + name + "' yet");
        if (d.conventions.any()) return bad("conventions", "scale '" + name + "' takes no conventions (they are defined for x / s)");
        // m = fl32(A / a) must be finite for every block: a >= amax_floor >= A / FLT_MAX.
        const double least = static_cast<double>(d.amp) / static_cast<double>(std::numeric_limits<float>::max());
        if (multiplies(d.scale) && !(static_cast<double>(d.amax_floor) >= least))
            return bad("amax_floor", "scale '" + name + "' multiplies each element by A / max(absmax, amax_floor), which must be finite: "
                                     "amax_floor must be at least A / FLT_MAX = " + std::to_string(least) +
                                     " (DeepEP floors the absmax at 1e-4, FlashInfer and torchao at 1e-12)");
    }
    if (d.scale != ScaleType::kFp32EpsMul && d.amax_eps != 0)
        return bad("amax_eps", std::string("is for the scale fp32-eps-mul; scale '") + to_string(d.scale) + "' adds nothing to its statistic");
    if (d.scale == ScaleType::kFp32EpsMul) {
        // m = fl32(A / fl32(a + eps)) finite for every block (eps >= A / FLT_MAX), and a block whose
        // scale fl32(a / A) is 0 (a <= A 2^-150) has every |w m| < 1/2, so its codes are 0 whichever
        // way they are computed (eps >= A^2 2^-149).
        const double A = d.amp;
        const double least = std::max(A / static_cast<double>(std::numeric_limits<float>::max()), A * A * 0x1p-149);
        if (!(static_cast<double>(d.amax_eps) >= least) || !std::isfinite(d.amax_eps))
            return bad("amax_eps", "scale 'fp32-eps-mul' multiplies by A / (a + amax_eps): amax_eps must be a finite binary32 of at "
                                   "least max(A / FLT_MAX, A^2 2^-149) = " + std::to_string(least) +
                                   " (FBGEMM's row-wise INT8 adds 1e-20 on GPUs, 1e-8 on CPUs)");
        // An int element: a block whose scale is 0 then has every code 0 however it is computed (|v| < 1/2),
        // where a float element's subnormals could tell the multiplier's codes from the zero scale's.
        if (d.elem != ElemType::kInt)
            return bad("scale", "'fp32-eps-mul' is FBGEMM's row-wise integer codec: it needs an int element");
        if (d.rotated()) return bad("transform", "'hadamard' does not combine with scale 'fp32-eps-mul' yet");
        if (d.conventions.any()) return bad("conventions", "scale 'fp32-eps-mul' takes no conventions (they are defined for x / s)");
    }
    if (d.scale != ScaleType::kE4m3TensorAmax && d.tensor_amax >= 0)
        return bad("tensor_amax", std::string("is for the scale e4m3-tensor-amax (NVFP4's second level); scale '") + to_string(d.scale) +
                                      "' has no tensor scale");
    if (d.scale == ScaleType::kE4m3TensorAmax) {
        // NVFP4 (Transformer Engine, docs/SOURCES.md section 5): K = 448 A, S_enc = fl32(K / T) capped at
        // FLT_MAX (1 for T = 0), S_dec = fl32(1 / S_enc), the block factor fl32(S_enc fl32(1/A)), fl32(1/K).
        if (d.tensor_amax < 0) d.tensor_amax = 448.0f * d.amp;
        if (!std::isfinite(d.tensor_amax))
            return bad("tensor_amax", "must be a finite binary32 value >= 0 (the amax of the tensor the blocks belong to)");
        if (d.offset_min) return bad("offset", "'min' does not combine with scale 'e4m3-tensor-amax' (it scales the absmax)");
        if (d.elem != ElemType::kFloat)
            return bad("scale", "'e4m3-tensor-amax' is NVFP4's two-level scale: it needs a float element");
        if (d.rotated()) return bad("transform", "'hadamard' does not combine with scale 'e4m3-tensor-amax' yet");
        if (d.conventions.any())
            return bad("conventions", "scale 'e4m3-tensor-amax' takes no conventions (they are defined for x / s)");
        set_tensor_amax(d, d.tensor_amax);
    }
    if (d.decode_fma && !d.offset_min)
        return bad("decode", "'fma' is for offset 'min' (sat(fl32(val s + lo)) in one rounding); without an offset the decode "
                             "is one rounding already");
    // Conventions (FORMATS.md section 10): each only where the format has the quantity it changes.
    const Conventions& c = d.conventions;
    if (c.any() && d.rotated())
        return bad("conventions", "a rotated format (transform 'hadamard') takes no conventions: the rotation spreads an "
                                  "extreme over the block, so no convention describes one element");
    if (c.any() && d.offset_min)
        return bad("conventions", "a format with offset 'min' takes no conventions (they are defined for x / s)");
    if (c.any() && d.rounding == Rounding::kStochastic)
        return bad("conventions", "a stochastic format takes no conventions (a convention's block is compared bit for bit)");
    const bool absmax = d.scale == ScaleType::kFp32Absmax || d.scale == ScaleType::kFp16Absmax;
    if (c.scale_floor != ScaleFloorRule::kFormat && !absmax)
        return bad("conventions.scale_floor", std::string("is for fp32-absmax and fp16-absmax scales; scale '") + to_string(d.scale) +
                                                  "' has its own floor");
    if (c.scale_floor == ScaleFloorRule::kValue && !(c.scale_floor_value > 0 && std::isfinite(c.scale_floor_value)))
        return bad("conventions.scale_floor", "must be a positive finite binary32 value, \"none\" or \"format\"");
    if (c.flush_scale_subnormals && d.scale != ScaleType::kFp32Absmax)
        return bad("conventions.scale_subnormals", "'flush' is for fp32-absmax scales (the only ones that can be binary32 subnormals "
                                                   "below their floor)");
    if (c.zero_scale_ieee && !absmax)
        return bad("conventions.zero_scale", std::string("'ieee' is for fp32-absmax and fp16-absmax scales (scale '") + to_string(d.scale) +
                                                 "' is never 0)");
    if (c.divide_floor < 0 || !std::isfinite(c.divide_floor))
        return bad("conventions.divide_floor", "must be a positive finite binary32 value (or 0: none)");
    if (c.divide_floor_by != 0 && !(c.divide_floor > 0))
        return bad("conventions.divide_floor_by", "needs divide_floor (the scale below which the library divides by it)");
    if (c.divide_floor_by < 0 || !std::isfinite(c.divide_floor_by))
        return bad("conventions.divide_floor_by", "must be a positive finite binary32 value");
    if (c.nonfinite == NonfiniteRule::kSaturate && d.scale != ScaleType::kNone)
        return bad("conventions.nonfinite", std::string("'saturate' is for formats without a scale (scale 'none'); scale '") +
                                                to_string(d.scale) + "' would take its block's scale from an infinite absmax");
    if (c.nonfinite == NonfiniteRule::kSaturate && c.overflow_nonfinite)
        return bad("conventions.nonfinite", "'saturate' contradicts overflow = \"nonfinite\" (a library's cast either saturates or not)");
    if (c.overflow_nonfinite && !(d.elem == ElemType::kFloat && d.special != FloatSpecial::kNone))
        return bad("conventions.overflow", "'nonfinite' needs a float element with an inf or NaN code (special 'ieee' or "
                                           "'nan-only'): other elements have no code to overflow to");
    if (c.flush_element_subnormals && d.elem != ElemType::kFloat)
        return bad("conventions.element_subnormals", "'flush' is for float elements (the only ones with subnormals)");
    return Status::Ok();
}

}  // namespace qtransit
