// Format declarations in TOML (common/src/decl_toml.cpp, docs/FORMATS.md section 8): every kind of mistake
// is an Error naming its key (and line), every declarable built-in prints as TOML that parses back
// to the same declaration, and a declared copy of int4 encodes exactly like int4.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;
using qt::parse_declaration;

namespace {

constexpr const char* kInt = "name = \"x\"\n[element]\ntype = \"int\"\nbits = 4\n";

// The Error message of parsing `text`, or "" when it parses.
std::string error_of(const std::string& text) {
    auto r = parse_declaration(text, "t.toml");
    return r.ok() ? std::string() : r.error().message;
}

// Expect the message to start with "t.toml:<line>:" and name `key` right after the position.
void expect_names(const std::string& text, const std::string& key, int line, const std::string& what) {
    const std::string m = error_of(text);
    ASSERT_FALSE(m.empty()) << "parsed: " << text;
    EXPECT_EQ(m.rfind("t.toml:" + std::to_string(line) + ":", 0), 0u) << m;
    EXPECT_NE(m.find(": " + key + ": "), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
}

}  // namespace

TEST(DeclToml, AMinimalIntDeclarationTakesTheDefaults) {
    auto f = parse_declaration(kInt, "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->kind, qt::FormatKind::kDecl);
    EXPECT_EQ(f->name(), "x");
    EXPECT_EQ(f->bits, 4);
    const qt::Decl& d = *f->decl;
    EXPECT_EQ(d.scale, qt::ScaleType::kFp32Absmax);
    EXPECT_FALSE(d.offset_min);
    EXPECT_EQ(d.rounding, qt::Rounding::kNearestEven);
    EXPECT_EQ(d.packing, qt::Packing::kLsbFirst);
    EXPECT_EQ(d.fixed_block, 0);
    EXPECT_TRUE(d.is_signed);
    EXPECT_FALSE(d.full_range);
    EXPECT_EQ(d.qmax, 7);
}

TEST(DeclToml, FloatBiasDefaultsToHalfTheExponentRange) {
    auto f = parse_declaration("name = \"my-fp6\"\nblock = 32\nscale = \"e8m0-floor\"\n[element]\ntype = \"float\"\n"
                               "exponent_bits = 3\nmantissa_bits = 2\nspecial = \"none\"\n",
                               "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->decl->bias, 3);
    EXPECT_EQ(f->bits, 6);
    EXPECT_EQ(f->fixed_block(), 32);
    EXPECT_EQ(f->decl->max_finite, 28.0f);
    EXPECT_EQ(f->metadata_bytes(), 1);
}

TEST(DeclToml, EveryKindOfMistakeNamesItsKey) {
    // Syntax: line and column from the TOML parser.
    {
        const std::string m = error_of("name = \"x\"\n[element\ntype = \"int\"\n");
        EXPECT_EQ(m.rfind("t.toml:2:", 0), 0u) << m;
        EXPECT_NE(m.find("TOML syntax error"), std::string::npos) << m;
    }
    // Missing required keys.
    expect_names("[element]\ntype = \"int\"\nbits = 4\n", "name", 1, "is required");
    expect_names("name = \"x\"\n", "element", 1, "is required");
    expect_names("name = \"x\"\n[element]\nbits = 4\n", "element.type", 2, "is required");
    expect_names("name = \"x\"\n[element]\ntype = \"int\"\n", "element.bits", 2, "is required");
    expect_names("name = \"x\"\n[element]\ntype = \"float\"\nmantissa_bits = 2\n", "element.exponent_bits", 2, "is required");
    expect_names("name = \"x\"\n[element]\ntype = \"table\"\n", "element.values", 2, "is required");
    // Unknown keys, at both levels.
    expect_names(std::string("colour = 1\n") + kInt, "colour", 1, "unknown key (known: name, like, block, tile, scale");
    expect_names(std::string(kInt) + "width = 3\n", "element.width", 5, "unknown key for an int element");
    // Keys of another element type.
    expect_names(std::string(kInt) + "values = [1.0, 2.0]\n", "element.values", 5, "does not belong to an int element");
    expect_names("name = \"x\"\n[element]\ntype = \"float\"\nexponent_bits = 2\nmantissa_bits = 1\nsigned = true\n",
                 "element.signed", 6, "does not belong to a float element");
    // Wrong types.
    expect_names("name = 4\n[element]\ntype = \"int\"\nbits = 4\n", "name", 1, "expected a string, got an integer");
    expect_names("name = \"x\"\n[element]\ntype = \"int\"\nbits = \"4\"\n", "element.bits", 4, "expected an integer, got a string");
    expect_names("name = \"x\"\nblock = 32.0\n[element]\ntype = \"int\"\nbits = 4\n", "block", 2, "expected an integer, got a float");
    expect_names("name = \"x\"\nelement = 3\n", "element", 2, "expected a table");
    expect_names(std::string(kInt) + "signed = \"yes\"\n", "element.signed", 5, "expected true or false");
    expect_names("name = \"x\"\n[element]\ntype = \"table\"\nvalues = [\"a\", \"b\"]\n", "element.values[0]", 4, "expected a number");
    // Values out of range.
    expect_names("name = \"x\"\n[element]\ntype = \"int\"\nbits = 9\n", "element.bits", 4, "must be 2..8, got 9");
    expect_names("name = \"x\"\nblock = 0\n[element]\ntype = \"int\"\nbits = 4\n", "block", 2, "must be 1..");
    expect_names(std::string(kInt) + "fraction_bits = 17\n", "element.fraction_bits", 5, "must be 0..16");
    expect_names("name = \"x\"\n[element]\ntype = \"float\"\nexponent_bits = 5\nmantissa_bits = 3\n", "element.mantissa_bits", 5,
                 "exceeds 8");
    expect_names("name = \"x\"\n[element]\ntype = \"float\"\nexponent_bits = 2\nmantissa_bits = 1\nbias = 200\n", "element.bias",
                 6, "below binary32's normal range");
    expect_names("name = \"x\"\n[element]\ntype = \"table\"\nvalues = [0.0, 2.0, 1.0, 3.0]\n", "element.values", 4,
                 "strictly increasing");
    expect_names("name = \"x\"\n[element]\ntype = \"table\"\nvalues = [0.0, 1.0, 2.0]\n", "element.values", 4, "power of two");
    expect_names("name = \"x\"\n[element]\ntype = \"table\"\nvalues = [0.0, 1.0, 2.0, 1e300]\n", "element.values[3]", 4,
                 "not a finite binary32");
    // Unknown enum values list the known ones.
    expect_names("name = \"x\"\nscale = \"fp8\"\n[element]\ntype = \"int\"\nbits = 4\n", "scale", 2,
                 "unknown value 'fp8' (known: fp32-absmax, fp16-absmax, e8m0-floor, e8m0-rceil, e8m0-even, e8m0-ceil, e8m0-fbgemm-even, fp32-amax-mul, "
                 "fp32-amax-mul-rcp, fp32-amax-mul-inv, e8m0-rceil-mul, pow2-rceil-mul, fp32-eps-mul, e4m3-tensor-amax, none)");
    // amax_floor: only on the -mul scales, a finite binary32, and for the two that multiply at least A / FLT_MAX.
    expect_names("name = \"x\"\namax_floor = 1e-4\n[element]\ntype = \"int\"\nbits = 4\n", "amax_floor", 2, "has its own floor");
    expect_names("name = \"x\"\nscale = \"fp32-amax-mul\"\n[element]\ntype = \"float\"\nexponent_bits = 4\nmantissa_bits = 3\n",
                 "amax_floor", 2, "must be at least A / FLT_MAX");
    expect_names("name = \"x\"\nscale = \"pow2-rceil-mul\"\noffset = \"min\"\n[element]\ntype = \"int\"\nbits = 4\nsigned = false\n",
                 "offset", 3, "does not combine with scale 'pow2-rceil-mul'");
    // amax_eps: only on fp32-eps-mul, where it is required (at least max(A / FLT_MAX, A^2 2^-149));
    // decode: mul-add or fma, fma only with an offset.
    expect_names("name = \"x\"\namax_eps = 1e-8\n[element]\ntype = \"int\"\nbits = 4\n", "amax_eps", 2,
                 "is for the scale fp32-eps-mul");
    expect_names("name = \"x\"\nscale = \"fp32-eps-mul\"\noffset = \"min\"\n[element]\ntype = \"int\"\nbits = 8\nsigned = false\n",
                 "amax_eps", 2, "amax_eps must be a finite binary32 of at least");
    // tensor_amax: only on e4m3-tensor-amax (NVFP4), a finite number >= 0, a float element, no offset.
    expect_names("name = \"x\"\ntensor_amax = 6.0\n[element]\ntype = \"int\"\nbits = 4\n", "tensor_amax", 2,
                 "is for the scale e4m3-tensor-amax");
    expect_names("name = \"x\"\nscale = \"e4m3-tensor-amax\"\ntensor_amax = -1.0\n[element]\ntype = \"float\"\nexponent_bits = 2\nmantissa_bits = 1\n",
                 "tensor_amax", 3, "must be a finite number >= 0");
    expect_names("name = \"x\"\nscale = \"e4m3-tensor-amax\"\n[element]\ntype = \"int\"\nbits = 4\n", "scale", 2,
                 "needs a float element");
    expect_names("name = \"x\"\ndecode = \"fused\"\n[element]\ntype = \"int\"\nbits = 4\n", "decode", 2, "(known: mul-add, fma)");
    expect_names("name = \"x\"\ndecode = \"fma\"\n[element]\ntype = \"int\"\nbits = 4\n", "decode", 2, "'fma' is for offset 'min'");
    expect_names("name = \"x\"\nrounding = \"up\"\n[element]\ntype = \"int\"\nbits = 4\n", "rounding", 2,
                 "(known: nearest-even, nearest-away, nearest-down, toward-zero, stochastic)");
    expect_names("name = \"x\"\noffset = \"max\"\n[element]\ntype = \"int\"\nbits = 4\n", "offset", 2, "(known: none, min)");
    expect_names("name = \"x\"\npacking = \"big\"\n[element]\ntype = \"int\"\nbits = 4\n", "packing", 2, "(known: lsb-first, msb-first)");
    expect_names("name = \"x\"\n[element]\ntype = \"complex\"\n", "element.type", 3, "(known: int, float, table)");
    expect_names(std::string(kInt) + "range = \"wide\"\n", "element.range", 5, "(known: restricted, full)");
    expect_names("name = \"x\"\n[element]\ntype = \"float\"\nexponent_bits = 2\nmantissa_bits = 1\nspecial = \"inf\"\n",
                 "element.special", 6, "(known: ieee, nan-only, none)");
    // Rules between keys (finalize()), pointed at the key's line.
    expect_names(std::string(kInt) + "signed = false\n", "element.signed", 5, "need offset = 'min'");
    expect_names("name = \"x\"\nscale = \"none\"\noffset = \"min\"\n[element]\ntype = \"int\"\nbits = 4\n", "offset", 3,
                 "needs a scale");
    expect_names("name = \"x\"\nrounding = \"stochastic\"\n[element]\ntype = \"table\"\nvalues = [-1.0, 0.0, 0.5, 1.0]\n",
                 "rounding", 2, "not defined for a table");
    // Names.
    expect_names("name = \"int4\"\n[element]\ntype = \"int\"\nbits = 4\n", "name", 1, "is a built-in format");
    expect_names("name = \"My Format\"\n[element]\ntype = \"int\"\nbits = 4\n", "name", 1, "is not a format name");
    expect_names("name = \"x.toml\"\n[element]\ntype = \"int\"\nbits = 4\n", "name", 1, "is not a format name");
}

TEST(DeclToml, AmaxFloorParsesPrintsBackAndGoesWithItsScale) {
    // A FlashInfer-style cast at another scale group: the liked format's floor and scale stay.
    auto f = parse_declaration("name = \"fi-512\"\nlike = \"flashinfer-fp8\"\nblock = 512\n", "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->decl->scale, qt::ScaleType::kFp32AmaxMul);
    EXPECT_EQ(f->decl->amax_floor, 1e-12f);
    EXPECT_EQ(f->fixed_block(), 512);
    auto text = qt::declaration_to_toml(*f);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("amax_floor = 1e-12\n"), std::string::npos) << *text;
    // Another scale without a floor of its own drops the liked one; with its own it is kept.
    auto g = parse_declaration("name = \"dee-abs\"\nlike = \"fp8-e4m3-1x128\"\nscale = \"fp32-absmax\"\n", "t.toml");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->decl->amax_floor, 0.0f);
    auto h = parse_declaration("name = \"dee-floor\"\nlike = \"fp8-e4m3-1x128\"\namax_floor = 1e-3\n", "t.toml");
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(h->decl->amax_floor, 1e-3f);
    EXPECT_EQ(h->decl->scale, qt::ScaleType::kFp32AmaxMulRcp);
}

// NVFP4's tensor amax (D58): declared, printed back, kept by a like of the same scale and element,
// dropped (to the default 448 A) by another element or scale; the derived constants follow it.
TEST(DeclToml, TensorAmaxParsesPrintsBackAndGoesWithItsScale) {
    auto f = parse_declaration("name = \"nv6\"\nlike = \"nvfp4\"\ntensor_amax = 6.0\n", "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->decl->tensor_amax, 6.0f);
    EXPECT_EQ(f->decl->t_enc, 448.0f);  // fl32(2688 / 6)
    auto text = qt::declaration_to_toml(*f);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("tensor_amax = 6.0\n"), std::string::npos) << *text;
    auto again = parse_declaration(*text, "again.toml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(qt::same_declaration(*again->decl, *f->decl));
    ASSERT_TRUE(qt::register_format(*f).ok());
    auto kept = parse_declaration("name = \"nv6b\"\nlike = \"nv6\"\nblock = 32\n", "t.toml");
    ASSERT_TRUE(kept.ok()) << kept.error().message;
    EXPECT_EQ(kept->decl->tensor_amax, 6.0f);
    auto e = parse_declaration("name = \"nv-e3m0\"\nlike = \"nvfp4\"\n[element]\ntype = \"float\"\nexponent_bits = 3\nmantissa_bits = 0\n",
                               "t.toml");
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ(e->decl->tensor_amax, 448.0f * e->decl->amp);
    auto g = parse_declaration("name = \"nv-abs\"\nlike = \"nvfp4\"\nscale = \"fp32-absmax\"\n", "t.toml");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_LT(g->decl->tensor_amax, 0.0f);
}

// A tile (FORMATS.md section 8): parsed, its area the block, printed back, kept by a like, dropped by a
// block of its own; every mistake named.
TEST(DeclToml, TileParsesPrintsBackAndNamesItsMistakes) {
    auto f = parse_declaration("name = \"t16\"\ntile = [16, 8]\n[element]\ntype = \"int\"\nbits = 4\n", "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->decl->tile_rows, 16);
    EXPECT_EQ(f->decl->tile_cols, 8);
    EXPECT_EQ(f->fixed_block(), 128);
    auto text = qt::declaration_to_toml(*f);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("tile = [16, 8]\n"), std::string::npos) << *text;
    EXPECT_EQ(text->find("block ="), std::string::npos) << *text;
    auto again = parse_declaration(*text, "again.toml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(qt::same_declaration(*again->decl, *f->decl));
    auto nv = parse_declaration("name = \"nv2\"\nlike = \"nvfp4\"\ntile = [16, 16]\n", "t.toml");  // nvfp4's block 16 gives way
    ASSERT_TRUE(nv.ok()) << nv.error().message;
    EXPECT_EQ(nv->fixed_block(), 256);
    auto rows = parse_declaration("name = \"dg-rows\"\nlike = \"fp8-e4m3-128x128\"\nblock = 128\n", "t.toml");
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    EXPECT_FALSE(rows->tiled());
    EXPECT_EQ(rows->fixed_block(), 128);
    expect_names("name = \"x\"\ntile = [0, 4]\n[element]\ntype = \"int\"\nbits = 4\n", "tile", 2, "two integers 1..2^20");
    expect_names("name = \"x\"\ntile = 16\n[element]\ntype = \"int\"\nbits = 4\n", "tile", 2, "expected [rows, cols]");
    expect_names("name = \"x\"\nblock = 32\ntile = [4, 4]\n[element]\ntype = \"int\"\nbits = 4\n", "block", 2,
                 "a tile of 4 x 4 is a block of 16");
    expect_names("name = \"x\"\ntile = [4, 4]\ntransform = \"hadamard\"\n[element]\ntype = \"int\"\nbits = 4\n", "tile", 2,
                 "does not combine with transform 'hadamard'");
}

TEST(DeclToml, AnUnreadableFileIsNamed) {
    auto r = qt::load_declaration("/nonexistent/fmt.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message.rfind("/nonexistent/fmt.toml: cannot read", 0), 0u) << r.error().message;
}

// parse(show(f)) has the same declaration for every declarable built-in; ds-int<b> and
// quickreduce-q<b> say why not.
TEST(DeclToml, EveryDeclarableBuiltinRoundTrips) {
    int declared = 0;
    for (const auto& f : qt::all_builtin_formats()) {
        auto text = qt::declaration_to_toml(f);
        if (f.kind == qt::FormatKind::kDs || f.kind == qt::FormatKind::kQr) {
            ASSERT_FALSE(text.ok()) << f.name();
            EXPECT_NE(text.error().message.find("hand-written"), std::string::npos);
            continue;
        }
        ASSERT_TRUE(text.ok()) << f.name() << ": " << text.error().message;
        // The built-in's own name is taken: the copy gets another.
        std::string copy = *text;
        const std::string from = "name = \"" + f.name() + "\"";
        ASSERT_NE(copy.find(from), std::string::npos) << copy;
        copy.replace(copy.find(from), from.size(), "name = \"copy-of-" + f.name() + "\"");
        auto back = parse_declaration(copy, f.name() + ".toml");
        ASSERT_TRUE(back.ok()) << f.name() << ": " << back.error().message << "\n" << copy;
        const auto orig = qt::declaration_of(f);
        ASSERT_TRUE(orig.ok());
        EXPECT_TRUE(qt::same_declaration(*orig, *back->decl)) << f.name() << "\n" << copy;
        // Derived fields follow: the same wire layout and code range.
        EXPECT_EQ(back->bits, f.bits) << f.name();
        EXPECT_EQ(back->code_min(), f.code_min()) << f.name();
        EXPECT_EQ(back->code_max(), f.code_max()) << f.name();
        EXPECT_EQ(back->metadata_bytes(), f.metadata_bytes()) << f.name();
        EXPECT_EQ(back->fixed_block(), f.fixed_block()) << f.name();
        if (orig->elem == qt::ElemType::kTable) {
            EXPECT_EQ(std::memcmp(orig->table, back->decl->table, sizeof(float) * 16), 0) << f.name();
        }
        ++declared;
    }
    // ds-int4, ds-int8 and their -fm twins; quickreduce-q4, -q6, -q8
    EXPECT_EQ(declared, static_cast<int>(qt::all_builtin_formats().size()) - 7);
}

// A table whose values need every digit, and a negative zero, print and parse back exactly.
TEST(DeclToml, TableValuesRoundTripBitForBit) {
    const std::string text = "name = \"t4\"\n[element]\ntype = \"table\"\nvalues = [-1.0, -0.0, 0.1, 0.30000001192092896]\n";
    auto f = parse_declaration(text, "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_TRUE(std::signbit(f->decl->table[1]));
    EXPECT_EQ(f->decl->table[2], 0.1f);
    auto shown = qt::declaration_to_toml(*f);
    ASSERT_TRUE(shown.ok());
    auto back = parse_declaration(*shown, "shown.toml");
    ASSERT_TRUE(back.ok()) << back.error().message << "\n" << *shown;
    for (int i = 0; i < 4; ++i)
        EXPECT_EQ(std::bit_cast<uint32_t>(back->decl->table[i]), std::bit_cast<uint32_t>(f->decl->table[i])) << i;
}

// `show int4` under another name is int4, bit for bit: codes, scales and decoded values of the
// production kernel, on every input distribution and several block sizes (odd ones included).
TEST(DeclToml, ADeclaredCopyOfInt4IsInt4BitForBit) {
    for (const char* base : {"int4", "int8", "int3-asym"}) {
        const auto builtin = qt::parse_format(base);
        ASSERT_TRUE(builtin.ok());
        auto text = qt::declaration_to_toml(*builtin);
        ASSERT_TRUE(text.ok());
        std::string copy = *text;
        const std::string from = std::string("name = \"") + base + "\"";
        copy.replace(copy.find(from), from.size(), std::string("name = \"twin-") + base + "\"");
        auto twin = parse_declaration(copy, "twin.toml");
        ASSERT_TRUE(twin.ok()) << twin.error().message;
        ASSERT_EQ(twin->kind, qt::FormatKind::kDecl);
        std::vector<float> x(4099);
        for (auto d : qt::kernels::all_distributions()) {
            qt::kernels::generate_span(d, 7, 0, 0, x);
            for (int64_t block : {32, 7, 64}) {
                auto a = qt::kernels::encode(*builtin, x, block);
                auto b = qt::kernels::encode(*twin, x, block);
                ASSERT_EQ(a.ok(), b.ok()) << base << " " << qt::kernels::to_string(d);
                if (!a.ok()) continue;
                EXPECT_EQ(a->codes, b->codes) << base << " " << qt::kernels::to_string(d) << " block " << block;
                ASSERT_EQ(a->scales.size(), b->scales.size());
                EXPECT_EQ(std::memcmp(a->scales.data(), b->scales.data(), 4 * a->scales.size()), 0) << base;
                ASSERT_EQ(a->offsets.size(), b->offsets.size());
                if (!a->offsets.empty()) {
                    EXPECT_EQ(std::memcmp(a->offsets.data(), b->offsets.data(), 4 * a->offsets.size()), 0);
                }
                EXPECT_EQ(qt::kernels::unpack_codes(*a), qt::kernels::unpack_codes(*b));
                const auto da = qt::kernels::decode(*a), db = qt::kernels::decode(*b);
                EXPECT_EQ(std::memcmp(da.data(), db.data(), 4 * da.size()), 0) << base << " block " << block;
                EXPECT_EQ(a->wire_bytes(), b->wire_bytes());
            }
        }
    }
}

TEST(DeclToml, StochasticTwins) {
    auto int4 = qt::parse_format("int4");
    auto t = qt::apply_rounding(*int4, "stochastic");
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->name(), "int4-sr");
    EXPECT_EQ(qt::apply_rounding(*qt::parse_format("fp8-e4m3"), "stochastic")->name(), "fp8-e4m3-sr");
    EXPECT_EQ(qt::apply_rounding(*int4, "nearest")->name(), "int4");
    for (const char* none : {"nf4", "ds-int4", "int4-asym", "mxfp4"}) {
        auto r = qt::apply_rounding(*qt::parse_format(none), "stochastic");
        ASSERT_FALSE(r.ok()) << none;
        EXPECT_NE(r.error().message.find("int2..int8"), std::string::npos) << r.error().message;
    }
    EXPECT_FALSE(qt::apply_rounding(*int4, "up").ok());
    // A declared float format: its twin is a registered copy NAME-sr with rounding stochastic.
    auto mine = parse_declaration("name = \"sr-test-e3m2\"\n[element]\ntype = \"float\"\nexponent_bits = 3\nmantissa_bits = 2\n",
                                  "t.toml");
    ASSERT_TRUE(mine.ok());
    auto twin = qt::stochastic_twin(*mine);
    ASSERT_TRUE(twin.ok()) << twin.error().message;
    EXPECT_EQ(twin->name(), "sr-test-e3m2-sr");
    EXPECT_EQ(twin->decl->rounding, qt::Rounding::kStochastic);
    EXPECT_EQ(twin->decl->exp_bits, 3);
    EXPECT_TRUE(qt::parse_format("sr-test-e3m2-sr").ok());
    EXPECT_TRUE(qt::stochastic_twin(*mine).ok());  // again: found, not registered twice
}

// [conventions] and like (FORMATS.md section 10): a library's choices at the extremes, declared
// on top of a built-in without restating it; every mistake named by its key.
TEST(DeclToml, ConventionsOnALikedFormatParseAndPrintBack) {
    const std::string text =
        "name = \"lib-mx\"\nlike = \"mxfp8-e4m3\"\n[conventions]\nnonfinite = \"poison\"\ndivide_floor = 1.1754944e-38\n"
        "divide_floor_by = 1.0\n";
    auto f = parse_declaration(text, "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->name(), "lib-mx");
    EXPECT_EQ(f->fixed_block(), 32);  // mxfp8-e4m3's, kept
    const auto& c = f->decl->conventions;
    EXPECT_EQ(c.nonfinite, qt::NonfiniteRule::kPoison);
    EXPECT_EQ(c.divide_floor, 0x1p-126f);
    EXPECT_EQ(c.divide_floor_by, 1.0f);
    EXPECT_EQ(c.scale_floor, qt::ScaleFloorRule::kFormat);
    auto text2 = qt::declaration_to_toml(*f);
    ASSERT_TRUE(text2.ok());
    EXPECT_NE(text2->find("[conventions]\nnonfinite = \"poison\"\ndivide_floor = 1.1754944e-38\ndivide_floor_by = 1.0\n"), std::string::npos) << *text2;
    auto back = parse_declaration(*text2, "back.toml");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(back->decl->conventions == c);
    // A built-in prints no [conventions]: its rules are the format's.
    auto builtin = qt::declaration_to_toml(*qt::parse_format("fp8-e4m3"));
    ASSERT_TRUE(builtin.ok());
    EXPECT_EQ(builtin->find("[conventions]"), std::string::npos);
}

TEST(DeclToml, ConventionsOfEveryKindAndAnElementReplacingTheLikedOne) {
    auto f = parse_declaration("name = \"lib-fp8\"\nlike = \"fp8-e4m3\"\n[conventions]\nscale_floor = \"none\"\nzero_scale = \"ieee\"\n"
                               "overflow = \"nonfinite\"\nelement_subnormals = \"flush\"\nscale_subnormals = \"flush\"\n",
                               "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    const auto& c = f->decl->conventions;
    EXPECT_EQ(c.scale_floor, qt::ScaleFloorRule::kNone);
    EXPECT_TRUE(c.zero_scale_ieee && c.overflow_nonfinite && c.flush_element_subnormals && c.flush_scale_subnormals);
    auto v = parse_declaration("name = \"floored\"\nlike = \"int8\"\n[conventions]\nscale_floor = 1e-12\n", "t.toml");
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v->decl->conventions.scale_floor_value, 1e-12f);
    // An [element] replaces the liked element whole (no exponent bits left over from fp8).
    auto g = parse_declaration("name = \"as-int\"\nlike = \"fp8-e4m3\"\n[element]\ntype = \"int\"\nbits = 6\n", "t.toml");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->decl->elem, qt::ElemType::kInt);
    EXPECT_EQ(g->bits, 6);
    EXPECT_EQ(g->decl->scale, qt::ScaleType::kFp32Absmax);
}

TEST(DeclToml, ZeroSignIsAConventionOfEveryFormatAndRewritesNothing) {
    // zero_sign = "any" relaxes only the codec check's comparison of zeros: it is taken where the
    // block-rewriting conventions are refused (offset 'min', a rotation, a multiplying scale), and
    // any() (the rules convention_block applies) stays false.
    for (const char* like : {"int4-asym", "int4-had", "fbgemm-int8-rowwise", "fbgemm-mx4", "fp8-e4m3"}) {
        auto f = parse_declaration(std::string("name = \"zs-") + like + "\"\nlike = \"" + like + "\"\n[conventions]\nzero_sign = \"any\"\n", "t.toml");
        ASSERT_TRUE(f.ok()) << like << ": " << f.error().message;
        const auto& c = f->decl->conventions;
        EXPECT_TRUE(c.zero_sign_any && c.declared() && !c.any()) << like;
        auto text = qt::declaration_to_toml(*f);
        ASSERT_TRUE(text.ok());
        EXPECT_NE(text->find("[conventions]\nzero_sign = \"any\"\n"), std::string::npos) << *text;
        auto back = parse_declaration(*text, "back.toml");
        ASSERT_TRUE(back.ok()) << back.error().message;
        EXPECT_TRUE(back->decl->conventions == c);
    }
    expect_names("name = \"x\"\nlike = \"int4\"\n[conventions]\nzero_sign = \"positive\"\n", "conventions.zero_sign", 4,
                 "unknown value 'positive' (known: format, any)");
}

TEST(DeclToml, NonfiniteSaturateOnlyWithoutAScale) {
    auto f = parse_declaration("name = \"hfp8-sat\"\nlike = \"fbgemm-fp8\"\n[conventions]\nnonfinite = \"saturate\"\n", "t.toml");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->decl->conventions.nonfinite, qt::NonfiniteRule::kSaturate);
    auto text = qt::declaration_to_toml(*f);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("[conventions]\nnonfinite = \"saturate\"\n"), std::string::npos) << *text;
    expect_names("name = \"x\"\nlike = \"fp8-e4m3\"\n[conventions]\nnonfinite = \"saturate\"\n", "conventions.nonfinite", 4,
                 "'saturate' is for formats without a scale (scale 'none'); scale 'fp32-absmax'");
    expect_names("name = \"x\"\nlike = \"fbgemm-fp8\"\n[conventions]\nnonfinite = \"saturate\"\noverflow = \"nonfinite\"\n",
                 "conventions.nonfinite", 4, "contradicts overflow");
}

TEST(DeclToml, EveryConventionMistakeNamesItsKey) {
    const std::string head = "name = \"x\"\nlike = \"mxfp8-e4m3\"\n[conventions]\n";
    expect_names(head + "flush = true\n", "conventions.flush", 4, "unknown convention (known: nonfinite, scale_floor");
    expect_names(head + "nonfinite = \"nan\"\n", "conventions.nonfinite", 4, "unknown value 'nan' (known: refuse, poison, propagate, saturate)");
    expect_names(head + "scale_floor = \"none\"\n", "conventions.scale_floor", 4, "is for fp32-absmax and fp16-absmax scales");
    expect_names(head + "zero_scale = \"ieee\"\n", "conventions.zero_scale", 4, "never 0");
    expect_names(head + "divide_floor = -1.0\n", "conventions.divide_floor", 4, "must be positive");
    expect_names(head + "divide_floor_by = 1.0\n", "conventions.divide_floor_by", 4, "needs divide_floor");
    expect_names("name = \"x\"\nlike = \"mxfp4\"\n[conventions]\noverflow = \"nonfinite\"\n", "conventions.overflow", 4,
                 "needs a float element with an inf or NaN code");
    expect_names("name = \"x\"\nlike = \"int4\"\n[conventions]\nelement_subnormals = \"flush\"\n", "conventions.element_subnormals", 4,
                 "is for float elements");
    expect_names("name = \"x\"\nlike = \"int4-had\"\n[conventions]\nnonfinite = \"poison\"\n", "conventions", 3, "a rotated format");
    expect_names("name = \"x\"\nlike = \"int4-asym\"\n[conventions]\nnonfinite = \"poison\"\n", "conventions", 3, "offset 'min'");
    expect_names("name = \"x\"\nlike = \"int4-sr\"\n[conventions]\nnonfinite = \"poison\"\n", "conventions", 3, "stochastic");
    expect_names("name = \"x\"\nconventions = 3\n[element]\ntype = \"int\"\nbits = 4\n", "conventions", 2, "expected a table");
    expect_names("name = \"x\"\nlike = \"no-such-format\"\n", "like", 2, "unknown format 'no-such-format'");
    expect_names("name = \"x\"\nlike = \"ds-int8\"\n", "like", 2, "ds-int8");
    expect_names("name = \"x\"\n", "element", 1, "or like = ");
}
