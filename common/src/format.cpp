#include "qtransit/common/format.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <memory>
#include <mutex>
#include <string>

namespace qtransit {

std::string printable(std::string_view s, size_t max) {
    std::string out;
    for (size_t i = 0; i < s.size() && out.size() < max; ++i) {
        const unsigned char ch = static_cast<unsigned char>(s[i]);
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch < 0x20 || ch == 0x7f) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[ch >> 4];
            out += hex[ch & 15];
        } else {
            out += static_cast<char>(ch);
        }
        if (out.size() >= max && i + 1 < s.size()) out += "... (" + std::to_string(s.size() - i - 1) + " more bytes)";
    }
    return out;
}

std::string one_line(const std::string& message) {
    // A name the user gave (a file, a format, a TOML key) may hold a newline, a control character or
    // a megabyte: escaped and cut around the middle, so that the message stays one readable line.
    constexpr size_t kMax = 1000;
    std::string out = printable(message, std::string::npos);
    if (out.size() > kMax) {
        const size_t cut = out.size() - kMax;
        out = out.substr(0, kMax / 2) + " [... " + std::to_string(cut) + " bytes cut ...] " + out.substr(out.size() - kMax / 2);
    }
    return out;
}

std::string describe(const Site& site, int64_t local_index) {
    std::string s = "tensor '" + site.tensor + "'";
    if (site.rank >= 0) s += " rank " + std::to_string(site.rank);
    s += " element " + std::to_string(site.index_base + local_index);
    return s;
}

std::string FormatSpec::name() const {
    const std::string b = std::to_string(bits);
    switch (kind) {
        case FormatKind::kSym: return "int" + b;
        case FormatKind::kAsym: return "int" + b + "-asym";
        case FormatKind::kDs: return "ds-int" + b + (fast_math ? "-fm" : "");
        case FormatKind::kDecl: return decl_name;
        case FormatKind::kQr: return "quickreduce-q" + b;
    }
    return "?";
}

int32_t FormatSpec::code_min() const {
    switch (kind) {
        case FormatKind::kSym: return -((1 << (bits - 1)) - 1);
        case FormatKind::kAsym: return 0;
        case FormatKind::kDs: return -(1 << (bits - 1));
        case FormatKind::kDecl: return decl->code_min();
        case FormatKind::kQr: return 0;
    }
    return 0;
}

int32_t FormatSpec::code_max() const {
    switch (kind) {
        case FormatKind::kSym: return (1 << (bits - 1)) - 1;
        case FormatKind::kAsym: return (1 << bits) - 1;
        case FormatKind::kDs: return (1 << (bits - 1)) - 1;
        case FormatKind::kDecl: return decl->code_max();
        case FormatKind::kQr: return (1 << bits) - 1;
    }
    return 0;
}

int FormatSpec::scale_bytes() const {
    return kind == FormatKind::kDecl ? decl->scale_bytes() : kind == FormatKind::kQr ? 2 : 4;
}
int FormatSpec::metadata_bytes() const {
    if (kind == FormatKind::kDecl) return decl->metadata_bytes();
    if (kind == FormatKind::kQr) return 2;
    return kind == FormatKind::kAsym ? 8 : 4;
}

int64_t FormatSpec::wire_bytes(int64_t elements, int64_t block) const {
    if (elements <= 0 || block <= 0) return 0;
    const int64_t full = elements / block, tail = elements % block;
    int64_t bytes = full * (code_bytes(block) + metadata_bytes());
    if (tail) bytes += code_bytes(tail) + metadata_bytes();
    return bytes;
}

Status FormatSpec::check_block(int64_t block) const {
    if (block < 1)
        return make_error(ErrorCode::kInvalidArgument, "block size must be a positive integer, got " + std::to_string(block));
    if (block > kMaxBlock)
        return make_error(ErrorCode::kInvalidArgument,
                          "block size " + std::to_string(block) + " is past the limit of 2^30 = " + std::to_string(kMaxBlock));
    if (fixed_block() != 0 && block != fixed_block())
        return make_error(ErrorCode::kInvalidArgument, name() + " has fixed blocks of " + std::to_string(fixed_block()) +
                                                           " elements; got block size " + std::to_string(block));
    return check_block_length(block);
}

Status FormatSpec::check_block_length(int64_t len) const {
    if (!rotated() || len < 1 || std::has_single_bit(static_cast<uint64_t>(len))) return Status::Ok();
    return make_error(ErrorCode::kInvalidArgument,
                      name() + " rotates every block by a Hadamard transform, so a block's length must be a power of "
                               "two; got a block of " + std::to_string(len) + " elements");
}

const FormatSpec& FormatSpec::rotation_twin() const {
    if (!rotated()) return *this;
    static std::mutex mu;
    // Keyed by the declaration, which the cache keeps alive (no other declaration can take its address).
    static std::vector<std::pair<std::shared_ptr<const Decl>, std::unique_ptr<FormatSpec>>> twins;
    std::lock_guard lock(mu);
    for (const auto& [d, f] : twins)
        if (d == decl) return *f;
    Decl d = *decl;
    d.transform = Transform::kNone;
    d.random_signs = false;
    twins.emplace_back(decl, std::make_unique<FormatSpec>(make_declared(name() + "@rotated", d)));
    return *twins.back().second;
}

Status FormatSpec::check_tensor(int64_t elements, int64_t block) const {
    if (!rotated() || block < 1 || elements % block == 0) return Status::Ok();
    if (auto st = check_block_length(elements % block); !st)
        return make_error(ErrorCode::kInvalidArgument,
                          st.error().message + " (the last block of " + std::to_string(elements) +
                              " elements in blocks of " + std::to_string(block) +
                              "; choose a length that is a multiple of the block)");
    return Status::Ok();
}

// ---- metadata on the wire ---------------------------------------------------------------------------
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// A binary16-representable binary32 value (or NaN) to its binary16 bits; exact.
uint16_t to_half_exact(float v) {
    const uint32_t u = bits_of(v);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    if (v != v) return 0x7E00u;
    const float a = std::fabs(v);
    if (a == 0.0f) return sign;
    if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7C00u);
    int e = 0;
    const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
    if (e - 1 >= -14) {                  // normal: a = 1.f 2^(e-1)
        const uint32_t frac = static_cast<uint32_t>(std::ldexp(m * 2.0f - 1.0f, 10));
        return static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | frac);
    }
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::ldexp(a, 24)));  // subnormal: a = k 2^-24
}
float from_half(uint16_t h) {
    const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
    const int e = (h >> 10) & 0x1F;
    const int f = h & 0x3FF;
    if (e == 0x1F) return f ? float_of(0x7FC00000u) : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(static_cast<float>(f), -24);
    return sign * std::ldexp(static_cast<float>(1024 + f), e - 25);
}

// e4m3-tensor-amax (NVFP4): the value of a non-negative E4M3 byte b (0..0x7E), and the decode factor
// a block of that scale has under the tensor amax T: fl32(fl32(s_b T) fl32(1 / (448 A))), binary32
// products as the kernels compute them (FORMATS.md section 2).
float e4m3_value(int b) {
    const int e = b >> 3, m = b & 7;
    return e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
}
float nvfp4_factor_of_value(const Decl& d, float sb) { return (sb * d.tensor_amax) * d.t_rcp_k; }
float nvfp4_factor(const Decl& d, int b) { return nvfp4_factor_of_value(d, e4m3_value(b)); }
// The E4M3 byte whose decode factor is `scale` (the smallest one, where a tiny T makes two equal);
// 0x7F (E4M3's NaN) for a NaN scale: a poisoned block.
// 0x7F too for a number that is no byte's factor.
uint8_t nvfp4_byte_or_nan(const Decl& d, float scale) {
    if (scale != scale) return 0x7F;
    int lo = 0, hi = 0x7E;  // the factor does not decrease with b: the first b whose factor is >= scale
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (nvfp4_factor(d, mid) < scale) lo = mid + 1;
        else hi = mid;
    }
    return nvfp4_factor(d, lo) == scale ? static_cast<uint8_t>(lo) : uint8_t{0x7F};
}
uint8_t nvfp4_byte(const Decl& d, float scale) {
    const uint8_t b = nvfp4_byte_or_nan(d, scale);
    assert(b != 0x7F || scale != scale);
    return b;
}

}  // namespace

float nvfp4_factor_of(const FormatSpec& f, float sb) {
    assert(f.takes_tensor_amax());
    return sb != sb ? sb : nvfp4_factor_of_value(*f.decl, sb);
}

float nvfp4_block_scale_of(const FormatSpec& f, float factor) {
    assert(f.takes_tensor_amax());
    if (factor != factor) return factor;
    const uint8_t b = nvfp4_byte_or_nan(*f.decl, factor);
    return b == 0x7F ? std::numeric_limits<float>::quiet_NaN() : e4m3_value(b);
}

bool is_e4m3_scale_value(float v) {
    if (!(v >= 0.0f && v <= 448.0f) || std::signbit(v)) return false;
    for (int b = 0; b < 0x7F; ++b)
        if (e4m3_value(b) == v) return true;
    return false;
}

int FormatSpec::tensor_bytes() const {
    return kind == FormatKind::kDecl && decl->scale == ScaleType::kE4m3TensorAmax ? 4 : 0;
}

bool FormatSpec::takes_tensor_amax() const { return tensor_bytes() != 0; }

FormatSpec FormatSpec::with_tensor_amax(float t) const {
    if (!takes_tensor_amax()) return *this;
    assert(t >= 0 && std::isfinite(t));
    auto d = std::make_shared<Decl>(*decl);
    set_tensor_amax(*d, t);
    FormatSpec f = *this;
    f.decl = std::move(d);
    return f;
}

FormatSpec FormatSpec::for_tensor(std::span<const float> x) const {
    if (!takes_tensor_amax()) return *this;
    float t = 0;
    for (float v : x)
        if (std::isfinite(v)) t = std::max(t, std::fabs(v));
    return with_tensor_amax(t);
}

void write_metadata(const FormatSpec& f, float scale, float offset, uint8_t* out) {
    int n = 4;
    if (f.kind == FormatKind::kDecl) {
        switch (f.decl->scale) {
            case ScaleType::kFp32Absmax:
            case ScaleType::kFp32AmaxMul:
            case ScaleType::kFp32AmaxMulRcp:
            case ScaleType::kFp32AmaxMulInv:
            case ScaleType::kFp32EpsMul:
            case ScaleType::kPow2RceilMul: std::memcpy(out, &scale, 4); break;
            case ScaleType::kFp16Absmax: {
                const uint16_t h = to_half_exact(scale);
                std::memcpy(out, &h, 2);
                break;
            }
            case ScaleType::kE8m0Floor:
            case ScaleType::kE8m0Rceil:
            case ScaleType::kE8m0Even:
            case ScaleType::kE8m0Ceil:
            case ScaleType::kE8m0FbgemmEven:
            case ScaleType::kE8m0RceilMul: {
                if (scale != scale) {
                    out[0] = 0xFF;
                } else {
                    int e = 0;
                    std::frexp(scale, &e);  // scale = 2^(e-1)
                    assert(std::ldexp(1.0f, e - 1) == scale && e - 1 >= -127 && e - 1 <= 127);
                    out[0] = static_cast<uint8_t>(e - 1 + 127);
                }
                break;
            }
            case ScaleType::kE4m3TensorAmax: out[0] = nvfp4_byte(*f.decl, scale); break;
            case ScaleType::kNone: break;
        }
        n = f.decl->scale_bytes();
    } else if (f.kind == FormatKind::kQr) {
        const uint16_t h = to_half_exact(scale);  // dec, a binary16 value (NaN: a poisoned block)
        std::memcpy(out, &h, 2);
        n = 2;
    } else {
        std::memcpy(out, &scale, 4);
    }
    if (f.has_offset()) std::memcpy(out + n, &offset, 4);
}

void read_metadata(const FormatSpec& f, const uint8_t* in, float* scale, float* offset) {
    int n = 4;
    if (f.kind == FormatKind::kDecl) {
        switch (f.decl->scale) {
            case ScaleType::kFp32Absmax:
            case ScaleType::kFp32AmaxMul:
            case ScaleType::kFp32AmaxMulRcp:
            case ScaleType::kFp32AmaxMulInv:
            case ScaleType::kFp32EpsMul:
            case ScaleType::kPow2RceilMul: std::memcpy(scale, in, 4); break;
            case ScaleType::kFp16Absmax: {
                uint16_t h;
                std::memcpy(&h, in, 2);
                *scale = from_half(h);
                break;
            }
            case ScaleType::kE8m0Floor:
            case ScaleType::kE8m0Rceil:
            case ScaleType::kE8m0Even:
            case ScaleType::kE8m0Ceil:
            case ScaleType::kE8m0FbgemmEven:
            case ScaleType::kE8m0RceilMul:
                *scale = in[0] == 0xFF ? float_of(0x7FC00000u) : std::ldexp(1.0f, static_cast<int>(in[0]) - 127);
                break;
            case ScaleType::kE4m3TensorAmax:
                *scale = (in[0] & 0x7F) == 0x7F ? float_of(0x7FC00000u) : nvfp4_factor(*f.decl, in[0] & 0x7F);
                break;
            case ScaleType::kNone: *scale = 1.0f; break;
        }
        n = f.decl->scale_bytes();
    } else if (f.kind == FormatKind::kQr) {
        uint16_t h;
        std::memcpy(&h, in, 2);
        *scale = from_half(h);
        n = 2;
    } else {
        std::memcpy(scale, in, 4);
    }
    if (f.has_offset()) std::memcpy(offset, in + n, 4);
    else *offset = 0.0f;
}

// ---- declarations ---------------------------------------------------------------------------------
namespace {

Decl int_decl(int bits, bool asym) {
    Decl d;
    d.elem = ElemType::kInt;
    d.bits = bits;
    d.is_signed = !asym;
    d.offset_min = asym;
    d.scale = ScaleType::kFp32Absmax;
    return d;
}

Decl float_decl(int e, int m, int bias, FloatSpecial special, ScaleType scale, int block) {
    Decl d;
    d.elem = ElemType::kFloat;
    d.exp_bits = e;
    d.man_bits = m;
    d.bias = bias;
    d.special = special;
    d.scale = scale;
    d.fixed_block = block;
    return d;
}

// The QLoRA NormalFloat4 values as bitsandbytes stores them (binary32).
constexpr float kNf4[16] = {-1.0f,
                            -0.6961928009986877f,
                            -0.5250730514526367f,
                            -0.39491748809814453f,
                            -0.28444138169288635f,
                            -0.18477343022823334f,
                            -0.09105003625154495f,
                            0.0f,
                            0.07958029955625534f,
                            0.16093020141124725f,
                            0.24611230194568634f,
                            0.33791524171829224f,
                            0.44070982933044434f,
                            0.5626170039176941f,
                            0.7229568362236023f,
                            1.0f};

FormatSpec declared(std::string name, Decl d) {
    const Status st = finalize(d);
    assert(st.ok());
    (void)st;
    return make_declared(std::move(name), d);
}

struct Registry {
    std::mutex mu;
    std::vector<FormatSpec> user;
};
Registry& registry() {
    static Registry r;
    return r;
}

}  // namespace

FormatSpec make_declared(std::string name, const Decl& d) {
    FormatSpec f;
    f.kind = FormatKind::kDecl;
    f.bits = d.bits;
    f.decl = std::make_shared<const Decl>(d);
    f.decl_name = std::move(name);
    return f;
}

Result<Decl> declaration_of(const FormatSpec& f) {
    switch (f.kind) {
        case FormatKind::kDecl: return *f.decl;
        case FormatKind::kSym:
        case FormatKind::kAsym: {
            Decl d = int_decl(f.bits, f.kind == FormatKind::kAsym);
            if (auto st = finalize(d); !st) return st.error();
            return d;
        }
        case FormatKind::kDs: break;
        case FormatKind::kQr:
            return make_error(ErrorCode::kInvalidArgument,
                              f.name() + " has no declaration: it rounds its input to binary16, takes the group's "
                                         "signed extreme, encodes with a binary16 reciprocal of its negative scale "
                                         "and decodes in binary16 (docs/FORMATS.md section 11), none of which a "
                                         "declaration expresses; it is hand-written");
    }
    return make_error(ErrorCode::kInvalidArgument,
                      f.name() + " has no declaration: it rounds its input to binary16 first, multiplies by a "
                                 "reciprocal scale 2^b / 2a, stores the step 1/scale and decodes to binary16 "
                                 "(NUMERICS 1.3), none of which a declaration expresses; it is hand-written");
}

const std::vector<FormatSpec>& builtin_formats() {
    static const std::vector<FormatSpec> all = [] {
        std::vector<FormatSpec> v;
        for (int b = 2; b <= 8; ++b) v.push_back({FormatKind::kSym, b});
        for (int b = 2; b <= 8; ++b) v.push_back({FormatKind::kAsym, b});
        v.push_back({FormatKind::kDs, 4});
        v.push_back({FormatKind::kDs, 8});
        return v;
    }();
    return all;
}

const std::vector<FormatSpec>& all_builtin_formats() {
    static const std::vector<FormatSpec> all = [] {
        std::vector<FormatSpec> v = builtin_formats();
        for (int b : {4, 8}) {
            FormatSpec fm(FormatKind::kDs, b);
            fm.fast_math = true;
            v.push_back(fm);
        }
        const Decl e4m3 = float_decl(4, 3, 7, FloatSpecial::kNanOnly, ScaleType::kFp32Absmax, 0);
        const Decl e5m2 = float_decl(5, 2, 15, FloatSpecial::kIeee, ScaleType::kFp32Absmax, 0);
        v.push_back(declared("fp8-e4m3", e4m3));
        v.push_back(declared("fp8-e5m2", e5m2));
        struct Mx {
            const char* name;
            Decl d;
        };
        Decl mxint8 = int_decl(8, false);
        mxint8.fraction_bits = 6;
        const Mx mx[] = {
            {"mxfp8-e4m3", float_decl(4, 3, 7, FloatSpecial::kNanOnly, ScaleType::kE8m0Floor, 32)},
            {"mxfp8-e5m2", float_decl(5, 2, 15, FloatSpecial::kIeee, ScaleType::kE8m0Floor, 32)},
            {"mxfp6-e3m2", float_decl(3, 2, 3, FloatSpecial::kNone, ScaleType::kE8m0Floor, 32)},
            {"mxfp6-e2m3", float_decl(2, 3, 1, FloatSpecial::kNone, ScaleType::kE8m0Floor, 32)},
            {"mxfp4", float_decl(2, 1, 1, FloatSpecial::kNone, ScaleType::kE8m0Floor, 32)},
            {"mxint8", [&] {
                 Decl d = mxint8;
                 d.scale = ScaleType::kE8m0Floor;
                 d.fixed_block = 32;
                 return d;
             }()},
        };
        for (const Mx& m : mx) v.push_back(declared(m.name, m.d));
        for (const Mx& m : mx) {
            Decl d = m.d;
            d.scale = ScaleType::kE8m0Rceil;
            v.push_back(declared(std::string(m.name) + "-rceil", d));
        }
        Decl nf4;
        nf4.elem = ElemType::kTable;
        nf4.table_size = 16;
        for (int i = 0; i < 16; ++i) nf4.table[i] = kNf4[i];
        nf4.rounding = Rounding::kNearestDown;
        nf4.packing = Packing::kMsbFirst;
        v.push_back(declared("nf4", nf4));
        for (int b = 2; b <= 8; ++b) {
            Decl d = int_decl(b, false);
            d.rounding = Rounding::kStochastic;
            v.push_back(declared("int" + std::to_string(b) + "-sr", d));
        }
        for (auto [name, d] : {std::pair{"fp8-e4m3-sr", e4m3}, std::pair{"fp8-e5m2-sr", e5m2}}) {
            d.rounding = Rounding::kStochastic;
            v.push_back(declared(name, d));
        }
        // FP8 casts with a floored absmax and a reciprocal product (FORMATS.md section 2; docs/SOURCES.md
        // sections 3 and 4): DeepEP's low-latency dispatch, one scale per 128 values (1x128 rows of a
        // [tokens, hidden] tensor, hidden a multiple of 128), without and with round_scale (binary32
        // or UE8M0 powers of two); FlashInfer's quantized_all_reduce, one scale per 256 (its default).
        for (auto [name, scale, floor, block] :
             {std::tuple{"fp8-e4m3-1x128", ScaleType::kFp32AmaxMulRcp, 1e-4f, 128},
              std::tuple{"fp8-e4m3-1x128-pow2", ScaleType::kPow2RceilMul, 1e-4f, 128},
              std::tuple{"fp8-e4m3-1x128-ue8m0", ScaleType::kE8m0RceilMul, 1e-4f, 128},
              std::tuple{"flashinfer-fp8", ScaleType::kFp32AmaxMul, 1e-12f, 256},
              // torchao's float8 cast (hp_tensor_and_scale_to_float8 with amax_to_scale): m = 448 /
              // max(amax, 1e-12), codes sat(fl32(x m)), decoded as a GEMM scales them, by fl32(1 / m).
              // Any block: a row's length is torchao's row-wise scaling; FSDP2's tensor-wise scale is
              // the path's `scales = "per-tensor"` (docs/PATHS.md, D50).
              std::tuple{"torchao-fp8-e4m3", ScaleType::kFp32AmaxMulInv, 1e-12f, 0}}) {
            Decl d = float_decl(4, 3, 7, FloatSpecial::kNanOnly, scale, block);
            d.amax_floor = floor;
            v.push_back(declared(name, d));
        }
        // FBGEMM's hfp8, TorchRec's FP8 communication codec (docs/SOURCES.md section 6.3): E4M3 with bias
        // 15 and no scale, the top exponent unused (largest 0.9375), values past it clamped, gradual
        // underflow at 2^-17, round to nearest even: the ieee special's grid.
        v.push_back(declared("fbgemm-fp8", float_decl(4, 3, 15, FloatSpecial::kIeee, ScaleType::kNone, 0)));
        // FBGEMM's MX4, TorchRec's MX4 communication codec (fp32_to_mx4 with rounding "even", the Triton
        // kernel: docs/SOURCES.md section 6.2): E2M1 in groups of 32, the shared exponent pre-rounded on
        // the absmax's bits (e8m0-fbgemm-even), elements rounded half away from zero, saturating at 6.
        {
            Decl d = float_decl(2, 1, 1, FloatSpecial::kNone, ScaleType::kE8m0FbgemmEven, 32);
            d.rounding = Rounding::kNearestAway;
            v.push_back(declared("fbgemm-mx4", d));
        }
        // FBGEMM's fused 8-bit row-wise, TorchRec's INT8 communication codec on a GPU
        // (quantize_fused_8bit_rowwise.cu: docs/SOURCES.md section 6.1): codes 0..255 from the row's
        // minimum, s = fl32(range / 255), each element's code rne(fl32(fl32(x - min) m)) with
        // m = fl32(255 / fl32(range + 1e-20)), decoded in one fused multiply-add. Any block (a row:
        // TorchRec's row_dim, 32 by default).
        {
            Decl d = int_decl(8, true);
            d.scale = ScaleType::kFp32EpsMul;
            d.amax_eps = 1e-20f;
            d.decode_fma = true;
            v.push_back(declared("fbgemm-int8-rowwise", d));
        }
        // Rotated int<b> (FORMATS.md section 9): -had the plain Walsh-Hadamard transform, -rht the
        // randomized one (QuaRot, SDP4Bit).
        for (int b : {4, 8})
            for (bool random : {false, true}) {
                Decl d = int_decl(b, false);
                d.transform = Transform::kHadamard;
                d.random_signs = random;
                v.push_back(declared("int" + std::to_string(b) + (random ? "-rht" : "-had"), d));
            }
        // NVFP4 (Transformer Engine's NVFP4BlockScaling, 1-D: docs/SOURCES.md section 5): E2M1 in blocks of
        // 16, an E4M3 scale per block under the binary32 amax T of the tensor (FORMATS.md section 2). The
        // declaration's T is 2688 (a tensor scale of 1); quantize takes the amax of the tensor it is given.
        v.push_back(declared("nvfp4", float_decl(2, 1, 1, FloatSpecial::kNone, ScaleType::kE4m3TensorAmax, 16)));
        // TE's NVFP4 for gradients rounds the elements stochastically (cvt.rs on sm_100, its own random
        // bits): here the keyed rounding of FORMATS.md section 4 on the same scales, so its bounds and
        // unbiasedness are checked, not TE's random stream.
        {
            Decl d = float_decl(2, 1, 1, FloatSpecial::kNone, ScaleType::kE4m3TensorAmax, 16);
            d.rounding = Rounding::kStochastic;
            v.push_back(declared("nvfp4-sr", d));
        }
        // 2-D blocks (FORMATS.md section 8, `tile`): TE's NVFP4 for weights, one E4M3 scale per 16x16 tile
        // (docs/SOURCES.md 5.5); DeepGEMM's per_block_cast_to_fp8 for 128x128 weight tiles (DeepSeek-V3's
        // weights: s = fl32(max(amax, 1e-4) / 448), the elements times fl32(448 / max(amax, 1e-4))), and its
        // use_ue8m0 form (the scale rounded up to a power of two).
        {
            Decl d = float_decl(2, 1, 1, FloatSpecial::kNone, ScaleType::kE4m3TensorAmax, 0);
            d.tile_rows = d.tile_cols = 16;
            v.push_back(declared("nvfp4-2d", d));
            for (auto [name, scale] : {std::pair{"fp8-e4m3-128x128", ScaleType::kFp32AmaxMul},
                                       std::pair{"fp8-e4m3-128x128-ue8m0", ScaleType::kE8m0RceilMul}}) {
                Decl t = float_decl(4, 3, 7, FloatSpecial::kNanOnly, scale, 0);
                t.amax_floor = 1e-4f;
                t.tile_rows = t.tile_cols = 128;
                v.push_back(declared(name, t));
            }
        }
        // QuickReduce's INT4, INT6 and INT8 codecs (vLLM's and SGLang's quick all-reduce on ROCm:
        // docs/SOURCES.md section 2, FORMATS.md section 11), groups of 32 by default.
        for (int b : {4, 6, 8}) v.push_back({FormatKind::kQr, b});
        return v;
    }();
    return all;
}

Status register_format(const FormatSpec& f) {
    if (parse_format(f.name()).ok())
        return make_error(ErrorCode::kInvalidArgument, "format '" + f.name() + "' is already defined (built-in or "
                                                       "declared twice); give the declaration another name");
    auto& r = registry();
    std::lock_guard lock(r.mu);
    r.user.push_back(f);
    return Status::Ok();
}

std::vector<std::string> known_format_list() {
    std::vector<std::string> names;
    for (const auto& f : all_builtin_formats()) names.push_back(f.name());
    auto& r = registry();
    std::lock_guard lock(r.mu);
    for (const auto& f : r.user) names.push_back(f.name());
    return names;
}

std::string known_format_names() {
    std::string s;
    for (const auto& n : known_format_list()) s += (s.empty() ? "" : ", ") + n;
    return s;
}

Result<FormatSpec> parse_format(std::string_view name) {
    for (const auto& f : all_builtin_formats())
        if (f.name() == name) return f;
    {
        auto& r = registry();
        std::lock_guard lock(r.mu);
        for (const auto& f : r.user)
            if (f.name() == name) return f;
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown format '" + printable(name) + "'; known formats: " + known_format_names());
}

Result<Nonfinite> parse_nonfinite(std::string_view name) {
    if (name == "error") return Nonfinite::kError;
    if (name == "propagate") return Nonfinite::kPropagate;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown non-finite policy '" + std::string(name) + "'; known policies: error, propagate");
}

const char* to_string(Nonfinite policy) { return policy == Nonfinite::kError ? "error" : "propagate"; }

}  // namespace qtransit
