// The codec plugin ABI from qtransit's side: the loader's refusals (one line each, naming the
// library and what is wrong), a codec's own errors coming back, the example codecs conforming bit
// for bit in every declared layout, a mutant's first difference, and the threading promise of
// docs/PLUGIN.md: a thread_safe codec is called from many threads at once and gives the same bits;
// a codec with thread_safe = 0 is never entered twice at once (its detector provably can fire).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "qtransit/codec_plugin.h"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/testing/blocks.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/testing/conforms.hpp"

namespace qtransit {
namespace {

using kernels::PluginCodec;

std::string codec_lib(const std::string& name) { return std::string(QT_CODEC_DIR) + "/libqt_codec_" + name + ".so"; }
std::string bad_lib(int n) { return std::string(QT_BAD_CODEC_DIR) + "/libqt_bad_codec_" + std::to_string(n) + ".so"; }

std::shared_ptr<const PluginCodec> load_ok(const std::string& path) {
    auto c = PluginCodec::load(path);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    return c.ok() ? *c : nullptr;
}

TEST(PluginLoad, RefusesEachBrokenDeclarationWithOneLine) {
    const std::vector<std::pair<int, std::string>> cases = {
        {1, "implements codec ABI version 2; this qtransit reads version 1"},
        {2, "its qtransit_codec_v1_t is 16 bytes"},
        {3, "int9"},
        {4, "its encode entry point is NULL"},
        {5, "exports no function qtransit_codec_v1"},
        {6, "returned NULL: no licence for this machine"},
        {7, "packing high-nibble-first is for 4-bit codes; int8 has 8"},
        {8, "block_max 16 is below block_min 64"},
        {9, "exactly one of `format`"},
        {10, "bits"},
        {11, "its name must be 1 to 64 characters"},
        {14, "qtransit_codec_v1 is exported as data (an object), not as a function"},
        {15, "its format_toml is longer than a declaration may be (16 MiB)"},
    };
    for (const auto& [n, want] : cases) {
        auto c = PluginCodec::load(bad_lib(n));
        ASSERT_FALSE(c.ok()) << "BAD=" << n << " was accepted";
        EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
        EXPECT_NE(c.error().message.find(want), std::string::npos) << "BAD=" << n << ": " << c.error().message;
        EXPECT_NE(c.error().message.find(bad_lib(n)), std::string::npos) << "names the library: " << c.error().message;
        EXPECT_EQ(c.error().message.find('\n'), std::string::npos) << "one line: " << c.error().message;
    }
}

TEST(PluginLoad, RefusesWhatIsNotAPlugin) {
    auto missing = PluginCodec::load("/nonexistent/libnothing.so");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("no such file"), std::string::npos) << missing.error().message;
    const auto text = std::filesystem::temp_directory_path() / "qt_not_a_plugin.so";
    std::ofstream(text) << "not an ELF file\n";
    auto junk = PluginCodec::load(text.string());
    ASSERT_FALSE(junk.ok());
    EXPECT_NE(junk.error().message.find("cannot be loaded"), std::string::npos) << junk.error().message;
    std::filesystem::remove(text);
}

TEST(PluginLoad, DeclaredFormatAndBlockConstraints) {
    auto decl = load_ok(bad_lib(13));
    ASSERT_TRUE(decl);
    EXPECT_EQ(decl->format().name(), "plugin-int4");
    EXPECT_EQ(decl->format().kind, FormatKind::kDecl);
    auto mult = load_ok(bad_lib(12));
    ASSERT_TRUE(mult);
    auto st = mult->check_block(32);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("multiples of 64"), std::string::npos) << st.error().message;
    EXPECT_TRUE(mult->check_block(128).ok());
}

// A codec's name names its verdicts beside the formats': a format's name (a built-in one, or a
// declared one that is not the codec's own format) is refused at load.
TEST(PluginLoad, RefusesAFormatsNameAsTheCodecsName) {
    auto decl = load_ok(bad_lib(13));  // registers plugin-int4
    ASSERT_TRUE(decl);
    qtransit_codec_v1_t d{};
    d.abi_version = QTRANSIT_CODEC_ABI_VERSION;
    d.struct_size = sizeof d;
    d.format = "int4";
    d.block_min = 1;
    d.block_multiple = 1;
    d.thread_safe = 1;
    d.encode = [](void*, const qtransit_encode_args*, char*, size_t) { return 1; };
    d.decode = [](void*, const qtransit_decode_args*, char*, size_t) { return 1; };
    for (const char* name : {"int8", "int4", "mxfp4", "int8-asym"}) {
        d.name = name;
        auto c = PluginCodec::from_descriptor(&d, "lib.so");
        ASSERT_FALSE(c.ok()) << name;
        EXPECT_NE(c.error().message.find("codec name '" + std::string(name) + "' is a built-in format's name: name the codec something else"),
                  std::string::npos)
            << c.error().message;
    }
    d.name = "plugin-int4";
    auto c = PluginCodec::from_descriptor(&d, "lib.so");
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find("is the name of the declared format plugin-int4, not of its own format int4"), std::string::npos)
        << c.error().message;
    d.name = "int4-acme";
    EXPECT_TRUE(PluginCodec::from_descriptor(&d, "lib.so").ok());
}

// A swizzled codec with a wide scale matrix (65536 blocks per row): a one-block call hands over the
// tiles its block falls in, not 128 x 65536 floats filled with NaN, so the paths' one-block calls
// stay cheap (they took about 10 ms each), and the bits are the reference's.
TEST(PluginCall, AWideSwizzledMatrixCostsOnlyTheTilesACallTouches) {
    auto c = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_swizzled_wide.so");
    ASSERT_TRUE(c);
    std::vector<float> x(32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.37f - 5.0f;
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 5000; ++k) {
        uint8_t codes[32];
        float scale = 0, out[32];
        ASSERT_TRUE(c->encode_block(x.data(), 32, 32, codes, &scale, nullptr, {}).ok());
        ASSERT_TRUE(c->decode_block(codes, 32, 32, scale, 0, out).ok());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 2.0) << "5000 one-block encode+decode calls (about 15 s when each filled the whole matrix)";
    // More blocks than a row, and rows past the first row tile: still the reference's bits.
    for (const int64_t n : {int64_t{32} * 5, int64_t{32} * 65537}) {
        std::vector<float> big(static_cast<size_t>(n));
        kernels::generate_span(kernels::Distribution::kNormal, 3, 0, 0, big);
        const auto r = testing::conforms(*c, big, {.block = 32});
        EXPECT_TRUE(r.exact) << n << ": " << r;
    }
}

TEST(PluginCall, ACodecsOwnErrorComesBackWithItsMessage) {
    auto c = load_ok(bad_lib(0));
    ASSERT_TRUE(c);
    std::vector<float> x(40, 1.0f);
    auto t = kernels::sized_encoded(c->format(), 40, 32);
    auto st = c->encode(x, 32, 40, t.codes, t.scales, t.offsets, {});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kCodec);
    EXPECT_NE(st.error().message.find("codec 'bad-codec' encode failed: this codec refuses everything"), std::string::npos)
        << st.error().message;
}

TEST(ExampleCodecs, ConformBitForBitInEveryDeclaredLayout) {
    for (const char* name : {"example-int8", "example-int4", "example-int4-asym", "example-int8-bf16in", "example-int4-bytes",
                             "example-int4-hinib", "example-int8-swizzled", "example-int4-serial"}) {
        auto c = load_ok(codec_lib(name));
        ASSERT_TRUE(c) << name;
        for (int64_t block : {1, 7, 32, 64}) {
            testing::ConformOptions o;
            o.block = block;
            const auto r = testing::conforms(*c, o);
            EXPECT_TRUE(r.ok) << name << " block " << block << ": " << r;
            EXPECT_TRUE(r.exact) << name << " block " << block << ": " << r;
            EXPECT_GT(r.elements, 6 * 4096) << name;
        }
    }
}

TEST(ExampleCodecs, AMutantIsNamedAtItsFirstDifference) {
    auto c = load_ok(codec_lib("mutant02-ties-away-int4"));
    ASSERT_TRUE(c);
    const auto r = testing::conforms(*c);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.first_difference.find("element "), std::string::npos) << r;
    EXPECT_NE(r.first_difference.find("(code "), std::string::npos) << r;
    EXPECT_NE(r.first_difference.find("reference"), std::string::npos) << r;
}

// conforms(codec) runs the generated boundary inputs too (issue 47): torchao's eager RCEIL in an MX
// codec passes six distributions and the edge cases, and fails on a scale-boundary block, named; the
// exact codec of the same file passes. boundary_inputs() hands the cases out one by one.
TEST(ExampleCodecs, ConformsHuntsTheBoundariesAndHandsThemOut) {
    auto bad = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_mutated_mx-rceil-log2f.so");
    ASSERT_TRUE(bad);
    const auto r = testing::conforms(*bad);
    EXPECT_FALSE(r.ok) << r;
    EXPECT_NE(r.message.find("input class 'scale-boundaries'"), std::string::npos) << r;
    auto good = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_mutated_mx-rceil.so");
    ASSERT_TRUE(good);
    const auto g = testing::conforms(*good);
    EXPECT_TRUE(g.ok) << g;
    EXPECT_NE(g.message.find("generated boundary inputs"), std::string::npos) << g;

    auto c = load_ok(codec_lib("example-int8"));
    ASSERT_TRUE(c);
    const auto cases = testing::boundary_inputs(*c, 32);
    std::set<std::string> classes;
    for (const auto& k : cases) {
        classes.insert(k.input_class);
        const auto one = testing::conforms(*c, k.x, {.block = k.block, .shard = k.shard});
        EXPECT_TRUE(one.ok) << k.input_class << " (" << k.what << "): " << one;
    }
    EXPECT_EQ(classes, (std::set<std::string>{"near-ties", "scale-boundaries", "block-sizes", "lengths"}));
    // f64-quotient differs on a near-tie case, and only there.
    auto f64 = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_mutated_f64-quotient.so");
    ASSERT_TRUE(f64);
    std::set<std::string> failing;
    for (const auto& k : testing::boundary_inputs(*f64, 32))
        if (!testing::conforms(*f64, k.x, {.block = k.block, .shard = k.shard}).ok) failing.insert(k.input_class);
    EXPECT_EQ(failing, (std::set<std::string>{"near-ties"}));
}

// The long call (2^24 + 2 blocks + 3 elements in one call) of a ds-int<b>-fm codec is judged by
// admissibility (D23), as its other checks are: the correct fast-math codec passes, and one whose
// stored step is 8 ulps off is named there. It used to be skipped for these formats.
// ---- two-level scales and 2-D tiles (docs/PLUGIN.md) ----------------------------------------------

std::vector<float> normal_values(size_t n, float sigma, uint64_t seed) {
    std::vector<float> x(n);
    kernels::generate_span(kernels::Distribution::kNormal, seed, 0, 0, x);
    for (float& v : x) v *= sigma;
    return x;
}

// nvfp4_codec.c, written from FORMATS.md: handed T, it conforms under the declared T (the edge cases
// and boundary inputs), under each tensor's own amax (the six distributions) and under any T given.
TEST(PluginTwoLevel, AnNvfp4CodecIsHandedTAndConformsUnderEveryT) {
    auto c = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4.so");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->format().name(), "nvfp4");
    const auto all = testing::conforms(*c, {.block = 16});
    EXPECT_TRUE(all.ok && all.exact) << all;
    const auto x = normal_values(1000, 37.0f, 5);
    for (float t : {0.0f, 1e-30f, 3.3f, 2688.0f, 1e20f}) {
        const auto r = testing::conforms(*c, x, {.block = 16, .shard = 200, .tensor_amax = t});
        EXPECT_TRUE(r.ok && r.exact) << "T = " << t << ": " << r;
    }
    // What the codec stores is s_b (E4M3 values); qtransit's scales are the decode factors under T.
    const FormatSpec f = c->format().with_tensor_amax(100.0f);
    auto t = kernels::sized_encoded(f, 32, 16);
    kernels::CodecOptions opt;
    opt.tensor_amax = 100.0f;
    ASSERT_TRUE(c->encode(std::span<const float>(x).first(32), 16, 32, t.codes, t.scales, t.offsets, opt).ok());
    for (float factor : t.scales) EXPECT_TRUE(is_e4m3_scale_value(nvfp4_block_scale_of(f, factor))) << factor;
}

TEST(PluginTwoLevel, EachNvfp4MistakeIsNamed) {
    const auto x = normal_values(4096, 3.0f, 9);
    // A codec that takes T from its own call: under the declared T (2688) its scales differ.
    auto own = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4-own-amax.so");
    ASSERT_TRUE(own);
    const auto r1 = testing::conforms(*own, x, {.block = 16, .tensor_amax = 2688.0f});
    EXPECT_FALSE(r1.ok) << r1;
    // torchao's decode factor fl32(s_b fl32(T / 2688)): equal at T = 2688 (T / 2688 = 1), not under a
    // tensor's own amax.
    auto tao = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4-torchao-decode.so");
    ASSERT_TRUE(tao);
    const auto r2 = testing::conforms(*tao, x, {.block = 16, .tensor_amax = 2688.0f});
    EXPECT_TRUE(r2.ok) << r2;
    const auto r3 = testing::conforms(*tao, x, {.block = 16});
    EXPECT_FALSE(r3.ok) << r3;
    EXPECT_NE(r3.first_difference.find("codec decodes"), std::string::npos) << r3.first_difference;
    // Decode factors written where s_b belongs: refused at once, by name.
    auto fac = load_ok(std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4-factor-scales.so");
    ASSERT_TRUE(fac);
    const auto r4 = testing::conforms(*fac, x, {.block = 16});
    EXPECT_FALSE(r4.ok);
    EXPECT_NE(r4.message.find("which is not a non-negative E4M3 value"), std::string::npos) << r4;
}

// `quantize --codec` with a tiled format: the tensor goes to the codec in tile order and its codes
// and decoded values come back in the tensor's order; every file it writes is the one qtransit's own
// kernel writes, byte for byte (a 48 x 64 tensor: 3 x 4 tiles, so that tile order is not row order).
TEST(PluginTwoLevel, QuantizeHandsATiledCodecItsTilesAndWritesWhatTheKernelWrites) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("qt-tiled-codec-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto x = normal_values(48 * 64, 2.0f, 11);
    const std::vector<int64_t> shape{48, 64};
    ASSERT_TRUE(kernels::write_npy((dir / "x.npy").string(), x, shape).ok());
    auto run = [&](const std::string& codec, const std::string& out) {
        gate::QuantizeRequest q;
        q.format = "nvfp4-2d";
        q.in = (dir / "x.npy").string();
        q.codec = codec;
        q.out_dir = (dir / out).string();
        return gate::quantize(q);
    };
    auto own = run("", "kernel");
    ASSERT_TRUE(own.ok()) << own.error().message;
    EXPECT_TRUE(own->passed);
    auto by_codec = run(std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4-2d.so", "codec");
    ASSERT_TRUE(by_codec.ok()) << by_codec.error().message;
    EXPECT_TRUE(by_codec->passed) << (by_codec->complaints.empty() ? "" : by_codec->complaints[0]);
    EXPECT_NE(by_codec->out.find("codec = reference yes, bit for bit"), std::string::npos) << by_codec->out;
    auto bytes = [](const fs::path& p) {
        std::ifstream f(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    for (const char* name : {"decoded.npy", "scales.npy", "codes.bin"})
        EXPECT_EQ(bytes(dir / "codec" / name), bytes(dir / "kernel" / name)) << name;
    // A tensor amax is the tensor's own, for a codec as for the kernel: the torchao-decode mistake
    // that T = 2688 hides shows on a tensor.
    gate::QuantizeRequest q;
    q.in = (dir / "x.npy").string();
    q.codec = std::string(QT_BAD_CODEC_DIR) + "/libqt_nvfp4-torchao-decode.so";
    q.no_hunt = true;
    auto tao = gate::quantize(q);
    ASSERT_TRUE(tao.ok()) << tao.error().message;
    EXPECT_FALSE(tao->passed);
    fs::remove_all(dir);
}

TEST(ExampleCodecs, TheLongCallOfADsFastMathCodecIsJudgedByAdmissibility) {
    auto good = load_ok(codec_lib("ds-fast-math-int4"));
    ASSERT_TRUE(good);
    EXPECT_FALSE(qtransit::gate::long_call_check(*good, good->format(), 32, 1).has_value());
    auto bad = load_ok(codec_lib("mutant14-step-8ulp-ds-int4-fm"));
    ASSERT_TRUE(bad);
    const auto f = qtransit::gate::long_call_check(*bad, bad->format(), 32, 1);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->input_class, "long-tensors");
    EXPECT_NE(f->message.find("not an admissible result: element "), std::string::npos) << f->message;
}

// Many threads at once through one thread_safe codec: each thread's bits equal a lone call's.
TEST(PluginThreads, AThreadSafeCodecRunsOnManyThreadsAtOnce) {
    auto c = load_ok(codec_lib("example-int4-asym"));
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->thread_safe());
    constexpr int kThreads = 8;
    constexpr int64_t kN = 1 << 14;
    std::vector<std::vector<float>> x(kThreads, std::vector<float>(kN));
    std::vector<kernels::EncodedTensor> alone, together;
    for (int t = 0; t < kThreads; ++t) {
        kernels::generate_span(kernels::Distribution::kNormal, 3, static_cast<uint32_t>(t), 0, x[t]);
        alone.push_back(kernels::sized_encoded(c->format(), kN, 32));
        ASSERT_TRUE(c->encode(x[t], 32, kN, alone[t].codes, alone[t].scales, alone[t].offsets, {}).ok());
        together.push_back(kernels::sized_encoded(c->format(), kN, 32));
    }
    std::atomic<int> failures{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            for (int rep = 0; rep < 20; ++rep)
                if (!c->encode(x[t], 32, kN, together[t].codes, together[t].scales, together[t].offsets, {}).ok()) ++failures;
        });
    go = true;
    for (auto& th : pool) th.join();
    EXPECT_EQ(failures.load(), 0);
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(together[t].codes, alone[t].codes) << "thread " << t;
        EXPECT_EQ(0, std::memcmp(together[t].scales.data(), alone[t].scales.data(), alone[t].scales.size() * 4)) << t;
    }
}

// thread_safe = 0: the serial codec fails any call that overlaps another. Called raw (bypassing
// qtransit) from two threads its detector fires; through PluginCodec it never does.
TEST(PluginThreads, ACodecThatIsNotThreadSafeIsNeverEnteredTwice) {
    const std::string path = codec_lib("example-int4-serial");
    auto c = load_ok(path);
    ASSERT_TRUE(c);
    ASSERT_FALSE(c->thread_safe());
    constexpr int64_t kN = 4096;
    std::vector<float> x(kN);
    kernels::generate_span(kernels::Distribution::kNormal, 5, 0, 0, x);

    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr);
    auto entry = reinterpret_cast<qtransit_codec_v1_fn>(dlsym(h, QTRANSIT_CODEC_ENTRY));
    ASSERT_NE(entry, nullptr);
    char err[256];
    const qtransit_codec_v1_t* raw = entry(err, sizeof err);
    ASSERT_NE(raw, nullptr);
    std::atomic<int> overlaps{0};
    auto hammer = [&](auto call) {
        std::vector<std::thread> pool;
        for (int t = 0; t < 4; ++t)
            pool.emplace_back([&] {
                for (int rep = 0; rep < 200; ++rep) call();
            });
        for (auto& th : pool) th.join();
    };
    hammer([&] {
        std::vector<uint8_t> codes(static_cast<size_t>(kN / 2));
        std::vector<float> scales(static_cast<size_t>(kN / 32));
        qtransit_encode_args a{};
        a.struct_size = sizeof a;
        a.x = x.data();
        a.elements = kN;
        a.block = 32;
        a.shard = kN;
        a.codes = codes.data();
        a.scales = scales.data();
        a.rank = -1;
        char e[256];
        if (raw->encode(raw->state, &a, e, sizeof e) != 0) ++overlaps;
    });
    EXPECT_GT(overlaps.load(), 0) << "the detector never fired: this test could not fail";

    std::atomic<int> failures{0};
    hammer([&] {
        auto t = kernels::sized_encoded(c->format(), kN, 32);
        if (!c->encode(x, 32, kN, t.codes, t.scales, t.offsets, {}).ok()) ++failures;
    });
    EXPECT_EQ(failures.load(), 0) << "qtransit called a thread_safe = 0 codec from two threads at once";
}

RC_GTEST_PROP(ExampleCodecs, ConformOnGeneratedTensors, ()) {
    static const auto codecs = [] {
        std::vector<std::shared_ptr<const PluginCodec>> v;
        for (const char* n : {"example-int8", "example-int4", "example-int4-asym"}) {
            auto c = PluginCodec::load(codec_lib(n));
            if (c) v.push_back(*c);
        }
        return v;
    }();
    RC_ASSERT(codecs.size() == 3u);
    const auto tc = *testing::tensor_case();
    for (const auto& c : codecs) {
        testing::ConformOptions o;
        o.block = tc.block;
        const auto r = testing::conforms(*c, tc.x, o);
        RC_ASSERT(r.ok);
    }
}

}  // namespace
}  // namespace qtransit
