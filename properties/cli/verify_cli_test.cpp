// `qtransit verify quantize` and `qtransit verify collective` as a user runs them on dumps: what
// qtransit itself wrote (quantize --out, simulate --dump), then changed, retyped (bfloat16, raw
// uint16, safetensors) or broken.
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/tensor_file.hpp"

namespace qtransit::testing {
namespace {

class VerifyCli : public CliTest {
protected:
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    void save(const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape,
              kernels::NpyDtype d = kernels::NpyDtype::kFloat32) {
        ASSERT_TRUE(kernels::write_npy(path(name), v, shape, d).ok());
    }
    std::vector<float> load(const std::string& name) { return kernels::read_npy(path(name))->data; }
    // An integer .npy (numpy's layout: a 1.0 header padded to 64 bytes).
    void save_ints(const std::string& name, const std::vector<int32_t>& v, const char* descr, const std::string& shape = "") {
        std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                        (shape.empty() ? std::to_string(v.size()) + "," : shape) + "), }";
        while ((10 + h.size() + 1) % 64) h += ' ';
        h += '\n';
        std::ofstream f(path(name), std::ios::binary);
        f.write("\x93NUMPY\x01\x00", 8);
        const uint16_t len = static_cast<uint16_t>(h.size());
        f.put(static_cast<char>(len & 0xFF));
        f.put(static_cast<char>(len >> 8));
        f << h;
        const int item = descr[2] - '0';
        for (int32_t x : v) f.write(reinterpret_cast<const char*>(&x), item);  // little-endian host
    }
    static std::vector<float> tensor(int64_t n, float scale = 1) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i)) * (1 + static_cast<float>(i % 7));
        return x;
    }
};

// ---- verify quantize --------------------------------------------------------------------------------

TEST_F(VerifyCli, QuantizeWhatQuantizeWroteIsExactAndAnUlpIsNamed) {
    save("x.npy", tensor(300), {300});
    ASSERT_EQ(run("quantize --format int8 --block 32 --in " + path("x.npy") + " --out " + path("q")).code, 0);
    const std::string base = "verify quantize --format int8 --block 32 --in " + path("x.npy") + " --report-dir " + path("rep");
    auto o = run(base + " --decoded " + path("q/decoded.npy") + " --codes " + path("q/codes.bin") + " --scales " + path("q/scales.npy"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("every given value equals the reference's bit for bit"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("ulps         decoded against the reference's: 0: 300"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("worst        element "), std::string::npos) << o.out;
    for (const char* f : {"report.json", "report.md", "junit.xml", "report.html"}) EXPECT_TRUE(std::filesystem::exists(dir_ / "rep" / f)) << f;
    const auto rep = nlohmann::json::parse(slurp(dir_ / "rep" / "report.json"));
    EXPECT_EQ(rep["tool"], "qtransit verify");
    EXPECT_TRUE(rep["verify"]["conforms"].get<bool>());
    EXPECT_NE(slurp(dir_ / "rep" / "report.md").find("## Verify"), std::string::npos);

    // One decoded value one ulp off: exact names it, bounded lets it through and counts it.
    auto d = load("q/decoded.npy");
    d[77] = std::nextafter(d[77], 1e30f);
    save("d1.npy", d, {300});
    o = run(base + " --decoded " + path("d1.npy"));
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_NE(o.err.find("element 77 "), std::string::npos) << o.err;
    // No codes or scales were given: the run's are not invented (only the reference's are named).
    EXPECT_GT(o.err.find("(code "), o.err.find(", reference ")) << o.err;
    EXPECT_EQ(o.err.find(" vs reference"), std::string::npos) << o.err;
    o = run(base + " --decoded " + path("d1.npy") + " --conformance bounded --json");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["ulp_histogram"]["1"], 1);
    EXPECT_EQ(j["ulp_histogram"]["0"], 299);
    EXPECT_FALSE(j["exact"].get<bool>());
    EXPECT_EQ(j["compared"]["codes"], false);

    // Far past the bound: bounded names it too.
    d[140] += 5.0f;
    save("d2.npy", d, {300});
    o = run(base + " --decoded " + path("d2.npy") + " --conformance bounded");
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_NE(o.err.find("element 140 "), std::string::npos) << o.err;
    EXPECT_NE(o.out.find("worst        element 140 "), std::string::npos) << o.out;
}

TEST_F(VerifyCli, QuantizeCodesAsIntegersAndEveryBadInput) {
    const auto x = tensor(64, 0.5f);
    save("x.npy", x, {64});
    const auto q = run("quantize --format int4 --block 16 --in " + path("x.npy") + " --out " + path("q") + " --json");
    ASSERT_EQ(q.code, 0) << q.err;
    const auto j = nlohmann::json::parse(q.out);
    std::vector<int32_t> codes = j["codes"].get<std::vector<int32_t>>();
    save_ints("codes.npy", codes, "|i1");
    const std::string base = "verify quantize --format int4 --block 16 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy");
    auto o = run(base + " --codes " + path("codes.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    // A code off by one: a difference; a code int4 cannot hold: a bad input.
    auto wrong = codes;
    wrong[9] = wrong[9] == 7 ? 6 : wrong[9] + 1;
    save_ints("wrong.npy", wrong, "<i4");
    o = run(base + " --codes " + path("wrong.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_NE(o.err.find("element 9 "), std::string::npos) << o.err;
    wrong[9] = 100;
    save_ints("nocode.npy", wrong, "<i4");
    refused(base + " --codes " + path("nocode.npy") + " --report-dir ''", "codes[9] = 100 is not a code of int4");
    refused(base + " --codes " + path("q/scales.npy") + " --report-dir ''", "is not an integer array");
    write("short.bin", "abc");
    refused(base + " --codes " + path("short.bin") + " --report-dir ''", "short.bin: codes holds 3 bytes, but 32 are expected");
    save("d.npy", x, {8, 8});
    refused("verify quantize --format int4 --block 16 --in " + path("x.npy") + " --decoded " + path("d.npy"),
            "shape [8, 8], but the input " + path("x.npy") + " is [64]");
    auto nan = x;
    nan[21] = std::nanf("");
    save("nan.npy", nan, {64});
    refused("verify quantize --format int4 --block 16 --in " + path("nan.npy") + " --decoded " + path("q/decoded.npy"), "21");
    refused(base + " --scales " + path("missing.npy"), "missing.npy: no such file");
    refused("verify quantize --format int9 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy"), "int8");
}

// NVFP4 (D58): quantize takes the tensor's amax as its second level and prints it with every block's
// E4M3 byte; the wire holds 9 bytes per block of 16 and the amax once. verify quantize takes the same
// amax from --in: the decoded values pass exactly, and those of a tensor whose amax differs do not,
// even where its elements are the same.
TEST_F(VerifyCli, Nvfp4TakesTheTensorsAmax) {
    auto x = tensor(320, 0.5f);
    x[100] = 40.0f;
    save("x.npy", x, {320});
    const auto q = run("quantize --format nvfp4 --block 16 --in " + path("x.npy") + " --out " + path("q") + " --json");
    ASSERT_EQ(q.code, 0) << q.err;
    const auto j = nlohmann::json::parse(q.out);
    EXPECT_EQ(j["tensor_amax"].get<double>(), 40.0);
    ASSERT_EQ(j["e4m3_scale_bytes"].size(), 20u);
    EXPECT_EQ(j["e4m3_scale_bytes"][6], 126);  // the block of the amax: s_b = 448, E4M3's largest
    for (const auto& b : j["e4m3_scale_bytes"]) EXPECT_LE(b.get<int>(), 126);
    EXPECT_EQ(j["wire_bytes"], 20 * 9 + 4);
    EXPECT_TRUE(j["matches_reference"].get<bool>());
    EXPECT_TRUE(j["bound_holds"].get<bool>());
    const auto t = run("quantize --format nvfp4 --block 16 --in " + path("x.npy"));
    EXPECT_NE(t.out.find("tensor amax       40 "), std::string::npos) << t.out;
    auto o = run("verify quantize --format nvfp4 --block 16 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    auto y = x;
    y[100] = 20.0f;
    save("y.npy", y, {320});
    ASSERT_EQ(run("quantize --format nvfp4 --block 16 --in " + path("y.npy") + " --out " + path("qy")).code, 0);
    auto dy = load("qy/decoded.npy");
    dy[100] = load("q/decoded.npy")[100];  // the one element that differs in the inputs takes x's own
    save("dy.npy", dy, {320});
    o = run("verify quantize --format nvfp4 --block 16 --in " + path("x.npy") + " --decoded " + path("dy.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 1) << o.out << o.err;
}

// 2-D blocks (FORMATS.md section 8): quantize takes a 2-D tensor's tiles (or --shape for a flat one);
// the decoded values come back row-major, so verify quantize passes them, and a changed element fails
// it; a shape that is not a multiple of the tile is padded with zeros to whole tiles (as DeepGEMM and
// TE pad: the same numbers as the tensor with zero rows appended), and verify quantize, which takes
// the user's tensor as given, refuses it before any work.
TEST_F(VerifyCli, TilesQuantizeAndVerifyRowMajor) {
    auto x = tensor(32 * 48, 0.25f);
    for (size_t i = 0; i < 16 * 48; ++i) x[i] *= 100.0f;  // the upper tiles 400 times the lower
    save("w.npy", x, {32, 48});
    save("flat.npy", x, {32 * 48});
    const auto q = run("quantize --format nvfp4-2d --in " + path("w.npy") + " --out " + path("q") + " --json");
    ASSERT_EQ(q.code, 0) << q.err;
    const auto j = nlohmann::json::parse(q.out);
    EXPECT_EQ(j["block"], 256);
    EXPECT_EQ(j["scales"].size(), 6u);  // 2 x 3 tiles
    EXPECT_TRUE(j["matches_reference"].get<bool>());
    const auto f = run("quantize --format nvfp4-2d --in " + path("flat.npy") + " --shape 32,48 --json");
    ASSERT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(nlohmann::json::parse(f.out)["decoded"], j["decoded"]);
    auto o = run("verify quantize --format nvfp4-2d --in " + path("w.npy") + " --decoded " + path("q/decoded.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    auto d = load("q/decoded.npy");
    d[47] = d[47] + 1.0f;  // row 0, column 47: tile (0, 2)
    save("d.npy", d, {32, 48});
    o = run("verify quantize --format nvfp4-2d --in " + path("w.npy") + " --decoded " + path("d.npy") + " --report-dir ''");
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    refused("quantize --format nvfp4-2d --in " + path("flat.npy"), "quantizes a 2-D tensor in tiles of 16 x 16");
    refused("quantize --format nvfp4-2d --in " + path("flat.npy") + " --shape 10,10", "--shape 10,10 holds 100 elements");
    // 24 x 64: the last tile row padded with 8 zero rows; the numbers are those of the 32 x 64 tensor
    // whose last 8 rows are zeros.
    const auto p = run("quantize --format nvfp4-2d --in " + path("flat.npy") + " --shape 24,64 --json");
    ASSERT_EQ(p.code, 0) << p.err;
    const auto pj = nlohmann::json::parse(p.out);
    EXPECT_EQ(pj["padded_shape"], nlohmann::json::array({32, 64}));
    EXPECT_EQ(pj["scales"].size(), 8u);  // 2 x 4 tiles
    EXPECT_EQ(pj["decoded"].size(), 24u * 64u);
    EXPECT_TRUE(pj["matches_reference"].get<bool>());
    auto z = x;
    z.resize(32 * 64);
    std::fill(z.begin() + 24 * 64, z.end(), 0.0f);
    save("z.npy", z, {32, 64});
    const auto zj = nlohmann::json::parse(run("quantize --format nvfp4-2d --in " + path("z.npy") + " --json").out);
    EXPECT_EQ(zj["scales"], pj["scales"]);
    for (size_t i = 0; i < 24 * 64; ++i) ASSERT_EQ(zj["decoded"][i], pj["decoded"][i]) << i;
    save("p.npy", std::vector<float>(x.begin(), x.begin() + 24 * 64), {24, 64});
    refused("verify quantize --format nvfp4-2d --in " + path("p.npy") + " --decoded " + path("p.npy") + " --report-dir ''",
            "is not a multiple of it");
    const auto big = run("quantize --format fp8-e4m3-128x128 --in " + path("w.npy") + " --json");
    ASSERT_EQ(big.code, 0) << big.err;
    EXPECT_EQ(nlohmann::json::parse(big.out)["padded_shape"], nlohmann::json::array({128, 128}));
    EXPECT_EQ(nlohmann::json::parse(big.out)["scales"].size(), 1u);
}

TEST_F(VerifyCli, QuantizeReadsBfloat16AndSafetensors) {
    // bf16 inputs (what a framework holds): exactly representable, quantized as binary32 values.
    std::vector<float> x = tensor(128);
    for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
    save("x.npy", x, {128}, kernels::NpyDtype::kBfloat16);
    ASSERT_EQ(run("quantize --format int8 --in " + path("x.npy") + " --out " + path("q")).code, 0);
    kernels::NpyArray a;
    a.shape = {128};
    a.dtype = kernels::NpyDtype::kBfloat16;
    a.data = x;
    kernels::NpyArray other = a;
    other.shape = {2, 64};
    ASSERT_TRUE(kernels::write_safetensors(path("x.safetensors"), {{"grad", a}, {"other", other}}).ok());
    auto o = run("verify quantize --format int8 --in " + path("x.safetensors") + " --tensor grad --decoded " + path("q/decoded.npy") +
                 " --report-dir ''");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    refused("verify quantize --format int8 --in " + path("x.safetensors") + " --decoded " + path("q/decoded.npy"), "grad");
    // The decoded values from a .safetensors file of several tensors: --decoded-tensor picks one.
    kernels::NpyArray dec;
    dec.shape = {128};
    dec.data = kernels::read_npy(path("q/decoded.npy"))->data;
    ASSERT_TRUE(kernels::write_safetensors(path("run.safetensors"), {{"decoded", dec}, {"input", a}}).ok());
    const std::string v = "verify quantize --format int8 --in " + path("x.safetensors") + " --tensor grad --decoded " +
                          path("run.safetensors") + " --report-dir ''";
    refused(v, "decoded");  // two tensors: which one is to be said
    o = run(v + " --decoded-tensor decoded");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    o = run(v + " --decoded-tensor input");  // the input itself is not what int8 decodes
    EXPECT_EQ(o.code, 1) << o.out << o.err;
}

// --codes is an integer .npy by its extension in any case, or by numpy's magic string: codes.NPY or a
// .npy under another name was read as packed wire bytes and refused for its byte count.
TEST_F(VerifyCli, QuantizeCodesNpyIsKnownByMagicAndAnyCase) {
    const auto x = tensor(64, 0.5f);
    save("x.npy", x, {64});
    const auto q = run("quantize --format int4 --block 16 --in " + path("x.npy") + " --out " + path("q") + " --json");
    ASSERT_EQ(q.code, 0) << q.err;
    const std::vector<int32_t> codes = nlohmann::json::parse(q.out)["codes"].get<std::vector<int32_t>>();
    const std::string base = "verify quantize --format int4 --block 16 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy") +
                             " --report-dir '' --codes ";
    for (const char* name : {"codes.NPY", "codes.Npy", "codes.dump", "codes"}) {
        save_ints(name, codes, "|i1");
        auto o = run(base + path(name));
        EXPECT_EQ(o.code, 0) << name << "\n" << o.out << o.err;
        EXPECT_NE(o.out.find("codes"), std::string::npos) << o.out;
    }
    // The packed wire bytes are still read as such.
    auto o = run(base + path("q/codes.bin"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
}

// --dtype says what raw uint16 bits are in every file verify quantize reads, --scales and --offsets too.
TEST_F(VerifyCli, QuantizeScalesAsRawUint16TakeDtype) {
    auto x = tensor(64, 0.5f);
    x[5] = 127;  // each block's scale amax / 127 a power of two: bfloat16 holds it exactly
    x[40] = -254;
    save("x.npy", x, {64});
    ASSERT_EQ(run("quantize --format int8 --block 32 --in " + path("x.npy") + " --out " + path("q")).code, 0);
    std::vector<int32_t> bits;
    for (float v : load("q/scales.npy")) bits.push_back(static_cast<int32_t>(std::bit_cast<uint32_t>(kernels::round_bf16(v)) >> 16));
    save_ints("s_u2.npy", bits, "<u2");
    const std::string base = "verify quantize --format int8 --block 32 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy") +
                             " --report-dir '' --scales " + path("s_u2.npy");
    refused(base, "s_u2.npy: a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16)");
    auto o = run(base + " --dtype bf16 --json");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    ASSERT_FALSE(o.out.empty()) << o.err;
    EXPECT_TRUE(nlohmann::json::parse(o.out)["compared"]["scales"].get<bool>()) << o.out;
}

// ---- verify collective ------------------------------------------------------------------------------

class VerifyCollectiveCli : public VerifyCli {
protected:
    void SetUp() override {
        VerifyCli::SetUp();
        std::vector<float> x = tensor(8 * 256);
        for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>(i / 256);  // ranks of other magnitudes
        x_ = x;
        save("in.npy", x, {8, 256});
        for (int r = 0; r < 8; ++r) save("in." + std::to_string(r) + ".npy", std::vector<float>(x.begin() + r * 256, x.begin() + (r + 1) * 256), {256});
    }
    Outcome simulate(const std::string& p, const std::string& dump) {
        return run("simulate --path " + p + " --format int8 --ranks 8 --in " + path("in.npy") + " --dump " + path(dump));
    }
    std::string verify(const std::string& p, const std::string& ins, const std::string& outs, int ranks = 8) {
        return "verify collective --path " + p + " --format int8 --ranks " + std::to_string(ranks) + " --inputs " + path(ins) + " --outputs " + path(outs) +
               " --report-dir " + path("rep");
    }
    std::vector<float> x_;
};

TEST_F(VerifyCollectiveCli, Bfloat16OutputsAndRawUint16Bits) {
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    const auto sum = load("sum.npy");  // [8, 32]
    save("sum_bf16.npy", sum, {8, 32}, kernels::NpyDtype::kBfloat16);
    auto o = run(verify("a2a-rs", "in.npy", "sum_bf16.npy"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;  // the schedule rounded to bf16
    // The same bits as raw uint16 (a dump through .view(np.uint16)): --dtype says what they are.
    std::vector<int32_t> bits;
    const auto b = kernels::read_npy(path("sum_bf16.npy"))->data;
    for (float v : b) bits.push_back(static_cast<int32_t>(std::bit_cast<uint32_t>(v) >> 16));
    save_ints("raw.npy", bits, "<u2", "8, 32");
    refused(verify("a2a-rs", "in.npy", "raw.npy"), "--dtype bf16 or --dtype fp16");
    // --dtype says what raw uint16 arrays hold; the float32 inputs are read as they say.
    o = run(verify("a2a-rs", "in.npy", "raw.npy") + " --dtype bf16");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
    // Read as binary16 bits instead, they are other numbers altogether.
    o = run(verify("a2a-rs", "in.npy", "raw.npy") + " --dtype fp16");
    EXPECT_EQ(o.code, 1) << o.out << o.err;
}

// A bf16 ring reduce-scatter as NCCL runs it for FSDP2 (reduce_dtype=bf16, D24), computed here on
// its own: chunk c starts on rank c+1 from the bf16 cast of its input; each hop adds the next rank's
// bf16 input and stores the bf16 sum; the outputs are dumped as bfloat16. verify judges it as
// fp32-ring-rs --accum bf16, with the same tiers: exact on the schedule's ring, same-events on
// another order (the same bf16 terms, summed otherwise), and far off when judged as an fp32 ring.
TEST_F(VerifyCollectiveCli, ABf16RingReduceScatterDump) {
    const int n = 8, m = 256, s = m / n;
    auto bf = [](float v) { return kernels::round_bf16(v); };
    auto ring = [&](const std::vector<int>& order) {  // order[h]: the rank at hop h of chunk 0's ring, rotated per chunk
        std::vector<float> out(static_cast<size_t>(n * s));
        for (int c = 0; c < n; ++c)
            for (int i = 0; i < s; ++i) {
                auto x = [&](int r) { return x_[static_cast<size_t>(r * m + c * s + i)]; };
                float p = bf(x((c + order[0]) % n));
                for (int h = 1; h < n; ++h) p = bf(p + bf(x((c + order[static_cast<size_t>(h)]) % n)));
                out[static_cast<size_t>(c * s + i)] = p;
            }
        return out;
    };
    std::vector<int> natural(n), reversed(n);
    for (int h = 0; h < n; ++h) {
        natural[static_cast<size_t>(h)] = (h + 1) % n;   // c+1, c+2, ..., c
        reversed[static_cast<size_t>(h)] = (n - 1 - h + n) % n;  // c-1, c-2, ..., c
    }
    save("bf16_ring.npy", ring(natural), {n, s}, kernels::NpyDtype::kBfloat16);
    const std::string v = "verify collective --path fp32-ring-rs --format int8 --ranks 8 --inputs " + path("in.npy") +
                          " --report-dir '' --outputs ";
    auto o = run(v + path("bf16_ring.npy") + " --accum bf16");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
    // Another ring order: not the schedule's bits, but within the worst order's bound.
    save("bf16_ring_rev.npy", ring(reversed), {n, s}, kernels::NpyDtype::kBfloat16);
    o = run(v + path("bf16_ring_rev.npy") + " --accum bf16");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_EQ(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("strongest tier met: same-events"), std::string::npos) << o.out;  // the same terms in another order
    // Judged as an fp32 ring, the bf16 roundings are far past its bound.
    o = run(v + path("bf16_ring.npy"));
    EXPECT_EQ(o.code, 1) << o.out << o.err;
}

// A declared path (D45): a file of one [[path]] (QuickReduce's shape: two-shot, binary16 sums), and
// DeepEP's dispatch by name: verify checks the schedule it resolves to with what it fixes, under its
// name; an option that contradicts it is refused.
TEST_F(VerifyCollectiveCli, ADeclaredPath) {
    const std::string decl = path("qr.toml");
    {
        std::ofstream f(decl);
        f << "[[path]]\nname = \"qr-int8\"\ncollective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\nadd = \"fp16\"\n";
    }
    ASSERT_EQ(run("simulate --path two-shot-ar --format int8 --accum fp16 --ranks 8 --in " + path("in.npy") + " --dump " + path("qr.npy")).code, 0);
    auto o = run("verify collective --path " + decl + " --format int8 --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy") +
                 " --report-dir '' --json");
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["path"], "qr-int8");
    EXPECT_EQ(j["schedule"], "two-shot-ar");
    EXPECT_EQ(j["accum"], "fp16");  // the declaration's add type, not --accum's default
    EXPECT_EQ(j["strongest"], "exact");
    // Judged with binary32 sums (two-shot-ar itself), the binary16 roundings are not the schedule's bits.
    o = run("verify collective --path two-shot-ar --format int8 --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy") +
            " --report-dir '' --json");
    EXPECT_NE(nlohmann::json::parse(o.out)["strongest"], "exact") << o.out;
    refused("verify collective --path " + decl + " --format int8 --accum bf16 --ranks 8 --inputs " + path("in.npy") + " --outputs " +
                path("qr.npy"),
            "--accum bf16 contradicts the declared path qr-int8, which adds in fp16");
    // NVLS (D49) runs as the binary16 all-reduce, which verify collective does not judge yet: said with
    // the declared name and its schedule, before anything is read.
    refused("verify collective --path nccl-fp8-e4m3-nvls-ar --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy"),
            "verify collective does not judge nccl-fp8-e4m3-nvls-ar (fp16-ring-ar's schedule) yet (simulate and check bound it)");
    // Only a 16-bit ring reduce-scatter is pointed to fp32-ring-rs with its --accum: an all-reduce's
    // dump is [N, M], and --accum takes no FP8 type (both were advised so).
    refused("verify collective --path bf16-ring-rs --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy"),
            "does not judge bf16-ring-rs yet; a bf16 ring reduce-scatter's dump is judged as --path fp32-ring-rs --accum bf16");
    for (const char* p : {"fp16-tree-ar", "bf16-ring-ar", "nccl-fp8-e4m3-ring-rs"}) {
        const auto r = run(std::string("verify collective --path ") + p + " --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy"));
        EXPECT_EQ(r.code, 2) << p;
        EXPECT_NE(r.err.find(std::string("does not judge ") + p + " yet (simulate and check bound it)"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("--accum"), std::string::npos) << r.err;
    }
    // fp32-ring-rs quantizes nothing: --format may be left out, as simulate's.
    ASSERT_EQ(run("simulate --path fp32-ring-rs --ranks 8 --in " + path("in.npy") + " --dump " + path("f32.npy")).code, 0);
    o = run("verify collective --path fp32-ring-rs --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("f32.npy") +
            " --report-dir '' --json");
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_EQ(nlohmann::json::parse(o.out)["strongest"], "exact") << o.out;
    // A declared FP8 output type (D49) is not judged yet either: refused, named.
    {
        std::ofstream f(path("o8.toml"));
        f << "[[path]]\nname = \"a2a-o8\"\ncollective = \"reduce-scatter\"\nexchange = \"all-to-all\"\nwire = \"int8\"\noutput = \"fp8-e4m3\"\n";
    }
    refused("verify collective --path " + path("o8.toml") + " --ranks 8 --inputs " + path("in.npy") + " --outputs " + path("qr.npy"),
            "verify collective does not judge a2a-o8's output type fp8-e4m3 yet");
    // DeepEP's dispatch by name: its wire is fp8-e4m3-1x128, blocks of 128.
    ASSERT_EQ(run("simulate --path deepep-fp8-dispatch --ranks 8 --block 128 --in " + path("in.npy") + " --dump " + path("dp.npy")).code, 0);
    o = run("verify collective --path deepep-fp8-dispatch --format fp8-e4m3-1x128 --block 128 --ranks 8 --inputs " + path("in.npy") +
            " --outputs " + path("dp.npy") + " --report-dir '' --json");
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_EQ(nlohmann::json::parse(o.out)["path"], "deepep-fp8-dispatch");
    refused("verify collective --path deepep-fp8-dispatch --format int8 --block 128 --ranks 8 --inputs " + path("in.npy") + " --outputs " +
                path("dp.npy"),
            "--format int8 contradicts the declared path deepep-fp8-dispatch, whose wire is fp8-e4m3-1x128");
    refused("verify collective --path nccl-fp8-e4m3-ring-ar-avg --format int8 --ranks 8 --inputs " + path("in.npy") + " --outputs " +
                path("dp.npy"),
            "verify collective checks sums (--target sum) and means of sums (--target mean), not a division inside the path");
    // FlashInfer's FP8 all-reduce (D46): the owner keeps its sum, so ranks differ and that is not a
    // failure; the outputs are bf16; with the owner requantizing (two-shot-ar) they are not its bits.
    // (bf16 inputs, as FlashInfer takes; S = 512, two blocks of 256 a chunk)
    std::vector<float> big = tensor(8 * 4096, 3);
    for (float& v : big) v = kernels::round_bf16(v);
    save("fin.npy", big, {8, 4096});
    auto sim = run("simulate --path flashinfer-fp8-2shot --ranks 8 --block 256 --in " + path("fin.npy") + " --dump " + path("fi.npy"));
    ASSERT_EQ(sim.code, 0) << sim.out << sim.err;
    o = run("verify collective --path flashinfer-fp8-2shot --ranks 8 --inputs " + path("fin.npy") + " --outputs " + path("fi.npy") +
            " --report-dir '' --json");  // (--block left out: the wire's fixed 256)
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    const auto fj = nlohmann::json::parse(o.out);
    EXPECT_EQ(fj["path"], "flashinfer-fp8-2shot");
    EXPECT_EQ(fj["schedule"], "two-shot-ar-keep");
    EXPECT_EQ(fj["strongest"], "exact") << o.out;
    EXPECT_EQ(fj["same_bits"]["applies"], false) << o.out;
    for (float v : load("fi.npy")) EXPECT_EQ(v, kernels::round_bf16(v));
    o = run("verify collective --path two-shot-ar --format flashinfer-fp8 --block 256 --ranks 8 --inputs " + path("fin.npy") + " --outputs " +
            path("fi.npy") + " --report-dir '' --json");
    EXPECT_NE(nlohmann::json::parse(o.out)["strongest"], "exact") << o.out;
    save("fin32.npy", tensor(8 * 4096, 3), {8, 4096});  // not bf16 values
    refused("verify collective --path flashinfer-fp8-2shot --block 256 --ranks 8 --inputs " + path("fin32.npy") + " --outputs " + path("fi.npy"),
            ", not a bf16 value: flashinfer-fp8-2shot takes bf16 inputs (dump what the kernel read)");
    refused("verify collective --path two-shot-ar --block 256 --ranks 8 --inputs " + path("fin.npy") + " --outputs " + path("fi.npy"),
            "--format is required (the format the run quantized with), unless --path names a declaration with its own wire");
}

TEST_F(VerifyCollectiveCli, SafetensorsPerRankFilesAndTheMean) {
    ASSERT_EQ(simulate("two-shot-ar", "ar.npy").code, 0);
    const auto ar = load("ar.npy");  // [8, 256]
    kernels::NpyArray ins, outs;
    ins.shape = {8, 256};
    ins.data = x_;
    outs.shape = {8, 256};
    outs.data = ar;
    ASSERT_TRUE(kernels::write_safetensors(path("run.safetensors"), {{"inputs", ins}, {"outputs", outs}}).ok());
    auto o = run("verify collective --path two-shot-ar --format int8 --ranks 8 --inputs " + path("run.safetensors") + " --outputs " +
                 path("run.safetensors") + " --tensor inputs --output-tensor outputs --report-dir ''");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("every rank holds the same bits"), std::string::npos) << o.out;
    // One rank's copy differs: the ranks do not hold the same bits.
    auto bad = ar;
    bad[3 * 256 + 100] = std::nextafter(bad[3 * 256 + 100], 1e30f);
    for (int r = 0; r < 8; ++r)
        save("out." + std::to_string(r) + ".npy", std::vector<float>(bad.begin() + r * 256, bad.begin() + (r + 1) * 256), {256});
    o = run(verify("two-shot-ar", "in.{rank}.npy", "out.{rank}.npy"));
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_NE(o.err.find("do not hold the same bits: tensor index 100 (shard 3): rank 3 holds"), std::string::npos) << o.err;
    // The mean: the sum times fl32(1/N), as NUMERICS 3 defines it.
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    auto mean = load("sum.npy");
    for (float& v : mean) v *= static_cast<float>(1.0 / 8);
    save("mean.npy", mean, {8, 32});
    o = run(verify("a2a-rs", "in.npy", "mean.npy") + " --target mean");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
    o = run(verify("a2a-rs", "in.npy", "mean.npy"));  // judged as a sum it is far off
    EXPECT_EQ(o.code, 1) << o.out << o.err;
}

TEST_F(VerifyCollectiveCli, BadInvocationsAreRefusedBeforeAnyWork) {
    ASSERT_EQ(simulate("ring-rs", "rs.npy").code, 0);
    refused(verify("ring-rs", "in.npy", "rs.npy") + " --conformance same-events",
            "--conformance same-events cannot judge this run: ring-rs requantizes partial sums");
    refused(verify("a2a-rs", "in.npy", "rs.npy") + " --ring-order 0,1,2,3,4,5,6,7", "a2a-rs has no ring");
    refused(verify("ring-rs", "in.npy", "rs.npy") + " --ring-order 0,1,2,3,4,5,6,6", "rank 6 appears twice");
    refused(verify("ring-ag", "in.npy", "rs.npy") + " --target mean", "a mean is for reduce paths");
    refused(verify("ring-ag", "in.npy", "rs.npy"), "ring-ag with N = 8 and M = 256 leaves [8, 256]");
    refused(verify("rung-rs", "in.npy", "rs.npy"), "ring-rs");
    refused(verify("a2a-rs", "rs.npy", "rs.npy", 3), "the inputs are [N, M] with N = 3");
    refused(verify("a2a-rs", "in.{rank}.npy", "rs.npy", 9), "in.8.npy: no such file");
    refused(verify("a2a-rs", "in.npy", "rs.npy") + " --conformance strict", "known: exact, same-events, bounded");
    refused(verify("a2a-rs", "in.npy", "rs.npy") + " --backend nccl", "verify runs on cpu (one process) or mpi");
    auto nan = x_;
    nan[5 * 256 + 77] = std::nanf("");
    save("nan.npy", nan, {8, 256});
    refused(verify("ring-rs", "nan.npy", "rs.npy"), "nan.npy: rank 5, element 77 is nan: a run's inputs must be finite");
    save("odd.npy", tensor(8 * 250), {8, 250});
    refused(verify("a2a-rs", "odd.npy", "rs.npy"), "250");  // M % N
}

// A report directory that cannot take the reports is refused before any file is read; it was found
// after the verification, and the verdict was never printed.
TEST_F(VerifyCollectiveCli, ReportDirectoryIsCheckedBeforeTheWork) {
    ASSERT_EQ(simulate("a2a-rs", "rs.npy").code, 0);
    std::filesystem::create_directories(dir_ / "rep" / "junit.xml");
    refused(verify("a2a-rs", "in.npy", "rs.npy"), "junit.xml: is a directory, not a report file");
    refused(verify("a2a-rs", "no-such.npy", "rs.npy"), "junit.xml: is a directory");  // before the files are looked at
    EXPECT_FALSE(std::filesystem::exists(dir_ / "rep" / "report.json"));
}

// A path too long for the system or a symlink loop is a file that cannot be read (exit 2, named with
// the reason), never an uncaught std::filesystem::filesystem_error.
TEST_F(VerifyCollectiveCli, UnreadablePathsAreBadFilesNotAborts) {
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    const std::string longname(300, 'a');
    std::filesystem::create_symlink(dir_ / "loop_b", dir_ / "loop_a");
    std::filesystem::create_symlink(dir_ / "loop_a", dir_ / "loop_b");
    refused(verify("a2a-rs", longname + ".npy", "sum.npy"), ".npy: cannot read it (");
    refused(verify("a2a-rs", "loop_a", "sum.npy"), "loop_a: cannot read it (");
    refused(verify("a2a-rs", "in.npy", "out.{rank}" + longname), ": cannot read it (");
    save("x.npy", tensor(64), {64});
    ASSERT_EQ(run("quantize --format int8 --in " + path("x.npy") + " --out " + path("q")).code, 0);
    const std::string q = "verify quantize --format int8 --in " + path("x.npy") + " --decoded " + path("q/decoded.npy") + " --report-dir ''";
    refused(q + " --codes " + path(longname + ".bin"), ".bin: cannot read it (");
    refused(q + " --scales " + path("loop_a"), "loop_a: cannot read it (");
}

// Per-rank outputs of different dtypes are refused: the tolerance is the outputs' dtype's, so judging
// every file by the first one's (bfloat16) let a float32 file off by 2^-10 pass.
TEST_F(VerifyCollectiveCli, PerRankOutputsOfMixedDtypesAreRefused) {
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    const auto sum = load("sum.npy");  // [8, 32]
    auto row = [&](int r) { return std::vector<float>(sum.begin() + r * 32, sum.begin() + (r + 1) * 32); };
    for (int r = 0; r < 8; ++r) save("out." + std::to_string(r) + ".npy", row(r), {32});
    auto o = run(verify("a2a-rs", "in.npy", "out.{rank}.npy"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    save("out.0.npy", row(0), {32}, kernels::NpyDtype::kBfloat16);
    auto off = row(1);
    for (float& v : off) v *= 1.0f + 1.0f / 1024;
    save("out.1.npy", off, {32});
    refused(verify("a2a-rs", "in.npy", "out.{rank}.npy"),
            path("out.1.npy") + ": float32, but " + path("out.0.npy") + " is bfloat16: every rank's outputs must have one dtype");
}

// M comes from the inputs' shape: an empty or badly sized inputs file is named with its shape and the
// real constraint, not blamed on an --elements option verify does not have.
TEST_F(VerifyCollectiveCli, InputsOfABadSizeAreNamedByTheirShape) {
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    save("empty.npy", {}, {8, 0});
    refused(verify("a2a-rs", "empty.npy", "sum.npy"), path("empty.npy") + ": shape [8, 0]: each rank's inputs hold no elements (M = 0)");
    save("odd.npy", tensor(8 * 250), {8, 250});
    refused(verify("a2a-rs", "odd.npy", "sum.npy"),
            path("odd.npy") + ": shape [8, 250]: M = 250 elements per rank is not divisible by N = 8 ranks");
    for (int r = 0; r < 8; ++r) save("e." + std::to_string(r) + ".npy", {}, {0});
    refused(verify("a2a-rs", "e.{rank}.npy", "sum.npy"), path("e.0.npy") + ": shape [0]: each rank's inputs hold no elements");
}

// A pipe (--inputs <(cat inputs.npy), or /dev/stdin) can be read only once: the inputs, or rank 0's
// inputs file, were read for their header and then again whole, and the second read found nothing.
TEST_F(VerifyCollectiveCli, InputsFromAPipeAreReadOnce) {
    ASSERT_EQ(simulate("a2a-rs", "sum.npy").code, 0);
    auto piped = [&](const std::string& file, const std::string& args) {  // `file` on qtransit's stdin, through a pipe
        const std::string cmd = "cat " + file + " | " + std::string(QTRANSIT_EXE) + " " + args + " >" + path("stdout") + " 2>" + path("stderr");
        const int status = std::system(cmd.c_str());
        return Outcome{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "stdout"), slurp(dir_ / "stderr")};
    };
    const std::string v = "verify collective --path a2a-rs --format int8 --ranks 8 --report-dir '' ";
    auto o = piped(path("in.npy"), v + "--inputs /dev/stdin --outputs " + path("sum.npy"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
    o = piped(path("sum.npy"), v + "--inputs " + path("in.npy") + " --outputs /dev/stdin");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    // Rank 0's per-rank inputs file a pipe: read once, for M and for its values.
    for (int r = 1; r < 8; ++r) std::filesystem::copy_file(path("in." + std::to_string(r) + ".npy"), path("p." + std::to_string(r) + ".npy"));
    std::filesystem::create_symlink("/dev/stdin", dir_ / "p.0.npy");
    o = piped(path("in.0.npy"), v + "--inputs " + path("p.{rank}.npy") + " --outputs " + path("sum.npy"));
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("strongest tier met: exact"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace qtransit::testing
