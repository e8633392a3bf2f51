// Every CUDA kernel against its CPU version, bit for bit (ctest label `gpu`): encode and decode at
// misaligned device addresses with poisoned outputs, the swizzled stage-1 encode, the fused
// reduce-requantize (fp32 and fp16 accumulation), the decode-and-add of a ring hop, a 2^20-element
// block and a long tensor. Outputs are filled with a poison pattern before every run, twice with
// two different patterns, so an element the kernel never wrote cannot match the CPU by luck.
// Without a GPU every test reports itself skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/fused.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;
namespace gpu = qt::kernels::gpu;

namespace {

#define SKIP_WITHOUT_GPU()                                                          \
    do {                                                                            \
        const auto q_ = gpu::query_devices();                                       \
        if (q_.devices.empty()) GTEST_SKIP() << "no GPU: " << q_.note;              \
    } while (0)

#define ASSERT_OK(expr)                                                             \
    do {                                                                            \
        auto st_ = (expr);                                                          \
        ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.error().message;              \
    } while (0)

// A device allocation with `pad` spare bytes in front, so tests can hand out misaligned pointers.
struct Dev {
    void* base = nullptr;
    size_t bytes = 0;
    explicit Dev(size_t n) : bytes(n + 64) {
        auto r = gpu::device_alloc(bytes);
        if (r.ok()) base = *r;
    }
    ~Dev() { gpu::device_free(base); }
    template <class T>
    T* at(size_t byte_offset) const { return reinterpret_cast<T*>(static_cast<char*>(base) + byte_offset); }
};

std::vector<float> make_input(const qt::FormatSpec& f, int64_t n, std::mt19937_64& rng, int trial) {
    const auto& dists = qt::kernels::all_distributions();
    std::vector<float> x(static_cast<size_t>(n));
    qt::kernels::generate_span(dists[static_cast<size_t>(trial) % dists.size()], rng(), static_cast<uint32_t>(trial), 0, x);
    if (f.kind == qt::FormatKind::kDs)
        for (float& v : x) v = std::fmod(v, 60000.0f);  // ds-int<b> refuses |x| >= 65520 (D3)
    return x;
}

bool same_bytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Device encode of x at the given misalignments, with outputs poisoned by `poison`; the result is
// copied back into an EncodedTensor.
::testing::AssertionResult device_encode(const qt::FormatSpec& f, const std::vector<float>& x, int64_t block,
                                         size_t x_mis, size_t c_mis, size_t s_mis, int poison,
                                         qt::kernels::EncodedTensor& out) {
    out = qt::kernels::sized_encoded(f, static_cast<int64_t>(x.size()), block);
    Dev dx(x.size() * 4), dc(out.codes.size()), ds(out.scales.size() * 4), doff(out.offsets.size() * 4);
    float* px = dx.at<float>(x_mis * 4);
    uint8_t* pc = dc.at<uint8_t>(c_mis);
    float* ps = ds.at<float>(s_mis * 4);
    float* po = doff.at<float>(s_mis * 4);
    if (!gpu::copy_to_device(px, x.data(), x.size() * 4).ok()) return ::testing::AssertionFailure() << "upload";
    (void)gpu::device_fill(dc.base, poison, dc.bytes);
    (void)gpu::device_fill(ds.base, poison, ds.bytes);
    (void)gpu::device_fill(doff.base, poison, doff.bytes);
    auto st = gpu::encode_device(f, px, static_cast<int64_t>(x.size()), block, pc, ps, po, {});
    if (!st.ok()) return ::testing::AssertionFailure() << st.error().message;
    (void)gpu::copy_to_host(out.codes.data(), pc, out.codes.size());
    (void)gpu::copy_to_host(out.scales.data(), ps, out.scales.size() * 4);
    (void)gpu::copy_to_host(out.offsets.data(), po, out.offsets.size() * 4);
    return ::testing::AssertionSuccess();
}

std::vector<float> device_decode(const qt::kernels::EncodedTensor& t, size_t c_mis, size_t o_mis, int poison) {
    Dev dc(t.codes.size()), ds(t.scales.size() * 4), doff(t.offsets.size() * 4), dout(static_cast<size_t>(t.elements) * 4);
    uint8_t* pc = dc.at<uint8_t>(c_mis);
    float* pout = dout.at<float>(o_mis * 4);
    (void)gpu::copy_to_device(pc, t.codes.data(), t.codes.size());
    (void)gpu::copy_to_device(ds.base, t.scales.data(), t.scales.size() * 4);
    (void)gpu::copy_to_device(doff.base, t.offsets.data(), t.offsets.size() * 4);
    (void)gpu::device_fill(dout.base, poison, dout.bytes);
    std::vector<float> out(static_cast<size_t>(t.elements));
    if (!gpu::decode_device(t.format, t.block, pc, ds.at<float>(0), doff.at<float>(0), pout, t.elements).ok()) return {};
    (void)gpu::copy_to_host(out.data(), pout, out.size() * 4);
    return out;
}

void expect_same(const qt::kernels::EncodedTensor& cpu, const qt::kernels::EncodedTensor& dev, const std::string& what) {
    ASSERT_EQ(cpu.codes, dev.codes) << what;
    ASSERT_TRUE(same_bytes(cpu.scales.data(), dev.scales.data(), cpu.scales.size() * 4)) << what << " scales";
    ASSERT_TRUE(same_bytes(cpu.offsets.data(), dev.offsets.data(), cpu.offsets.size() * 4)) << what << " offsets";
}

}  // namespace

TEST(GpuKernels, EncodeDecodeMisalignedAndPoisoned) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261201);  // named seed: a failure replays
    for (const auto& f : qt::builtin_formats()) {
        for (int trial = 0; trial < 24; ++trial) {
            const int64_t n = trial == 0 ? 0 : std::uniform_int_distribution<int64_t>(1, 6000)(rng);
            const int64_t block = trial % 6 == 0 ? std::uniform_int_distribution<int64_t>(2000, 9000)(rng)
                                                 : std::uniform_int_distribution<int64_t>(1, 300)(rng);
            const auto x = make_input(f, n, rng, trial);
            const auto cpu = qt::kernels::encode(f, x, block);
            ASSERT_TRUE(cpu.ok());
            const size_t xm = static_cast<size_t>(trial % 4), cm = static_cast<size_t>(trial % 8),
                         sm = static_cast<size_t>(trial % 3);
            const std::string what = f.name() + " n=" + std::to_string(n) + " block=" + std::to_string(block) +
                                     " misalign x=" + std::to_string(xm) + " codes=" + std::to_string(cm);
            for (int poison : {0xff, 0x00}) {
                qt::kernels::EncodedTensor dev;
                ASSERT_TRUE(device_encode(f, x, block, xm, cm, sm, poison, dev)) << what;
                expect_same(*cpu, dev, what);
                const auto dc = qt::kernels::decode(*cpu);
                const auto dd = device_decode(*cpu, cm, xm, poison);
                ASSERT_EQ(dd.size(), dc.size()) << what;
                ASSERT_TRUE(same_bytes(dc.data(), dd.data(), dc.size() * 4)) << what << " decode";
            }
        }
    }
}

TEST(GpuKernels, HugeBlockAndLongTensor) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261202);
    for (const char* name : {"int8", "int4", "int3-asym", "ds-int4"}) {
        const auto f = *qt::parse_format(name);
        for (auto [n, block] : {std::pair<int64_t, int64_t>{(1 << 20) + 13, 1 << 20},
                                std::pair<int64_t, int64_t>{(int64_t{1} << 26) + 5, 32}}) {
            const auto x = make_input(f, n, rng, 1);
            const auto cpu = qt::kernels::encode(f, x, block);
            ASSERT_TRUE(cpu.ok());
            qt::kernels::EncodedTensor dev;
            ASSERT_TRUE(device_encode(f, x, block, 0, 0, 0, 0xff, dev));
            expect_same(*cpu, dev, std::string(name) + " n=" + std::to_string(n));
            const auto dd = device_decode(*cpu, 0, 0, 0xff);
            const auto dc = qt::kernels::decode(*cpu);
            ASSERT_TRUE(dd.size() == dc.size() && same_bytes(dc.data(), dd.data(), dc.size() * 4)) << name;
        }
    }
}

TEST(GpuKernels, SwizzledEncodeEqualsCpu) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261203);
    for (const char* name : {"int8", "int4", "int5", "int4-asym", "ds-int8"}) {
        const auto f = *qt::parse_format(name);
        for (auto [N, G, S, B] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{8, 4, 100, 32},
                                  {16, 8, 64, 32}, {6, 3, 37, 7}, {4, 4, 5000, 4096}}) {
            const int64_t M = N * S;
            const auto x = make_input(f, M, rng, static_cast<int>(S));
            const auto lay = qt::kernels::swizzle_layout(f, M, N, G, B);
            ASSERT_TRUE(lay.ok());
            std::vector<uint8_t> c(static_cast<size_t>(lay->total_code_bytes()));
            std::vector<float> s(static_cast<size_t>(lay->total_blocks())), o(static_cast<size_t>(lay->total_offsets()));
            ASSERT_OK(qt::kernels::encode_swizzled_into(f, *lay, x, B, c, s, o));
            Dev dx(x.size() * 4), dc(c.size()), ds(s.size() * 4), dof(o.size() * 4);
            ASSERT_OK(gpu::copy_to_device(dx.base, x.data(), x.size() * 4));
            for (int poison : {0xff, 0x00}) {
                ASSERT_OK(gpu::device_fill(dc.base, poison, dc.bytes));
                ASSERT_OK(gpu::device_fill(ds.base, poison, ds.bytes));
                ASSERT_OK(gpu::encode_swizzled_device(f, *lay, dx.at<float>(0), B,
                                                      {dc.at<uint8_t>(0), ds.at<float>(0), dof.at<float>(0)}, {}));
                std::vector<uint8_t> c2(c.size());
                std::vector<float> s2(s.size()), o2(o.size());
                ASSERT_OK(gpu::copy_to_host(c2.data(), dc.base, c2.size()));
                ASSERT_OK(gpu::copy_to_host(s2.data(), ds.base, s2.size() * 4));
                ASSERT_OK(gpu::copy_to_host(o2.data(), dof.base, o2.size() * 4));
                ASSERT_EQ(c, c2) << name << " N=" << N << " G=" << G;
                ASSERT_TRUE(same_bytes(s.data(), s2.data(), s.size() * 4)) << name;
                ASSERT_TRUE(same_bytes(o.data(), o2.data(), o.size() * 4)) << name;
            }
        }
    }
}

TEST(GpuKernels, FusedReduceRequantizeEqualsCpu) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261204);
    for (const auto& f : qt::builtin_formats()) {
        for (int trial = 0; trial < 6; ++trial) {
            const int G = 1 + trial * 3 % 9;
            const int64_t n = std::uniform_int_distribution<int64_t>(1, 4000)(rng);
            const int64_t block = trial == 5 ? 5000 : std::uniform_int_distribution<int64_t>(1, 200)(rng);
            std::vector<qt::kernels::EncodedTensor> in;
            for (int g = 0; g < G; ++g) in.push_back(*qt::kernels::encode(f, make_input(f, n, rng, trial + g), block));
            for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16}) {
                qt::kernels::CodecOptions opt;
                opt.policy = qt::Nonfinite::kPropagate;  // an fp16 sum may overflow: poisoned on both sides
                const auto cpu = qt::kernels::reduce_requantize(in, accum, opt);
                const auto dev = gpu::reduce_requantize(in, accum, opt);
                ASSERT_TRUE(cpu.ok());
                ASSERT_TRUE(dev.ok()) << dev.error().message;
                expect_same(*cpu, *dev, f.name() + " G=" + std::to_string(G) + " n=" + std::to_string(n));
            }
        }
    }
}

TEST(GpuKernels, DecodeAddEqualsCpu) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261205);
    for (const auto& f : qt::builtin_formats()) {
        for (int trial = 0; trial < 6; ++trial) {
            const int64_t n = std::uniform_int_distribution<int64_t>(1, 5000)(rng);
            const int64_t block = std::uniform_int_distribution<int64_t>(1, 300)(rng);
            const auto t = *qt::kernels::encode(f, make_input(f, n, rng, trial), block);
            const auto own = make_input(f, n, rng, trial + 1);
            for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16}) {
                std::vector<float> cpu(static_cast<size_t>(n));
                ASSERT_OK(qt::kernels::decode_add(t, own, accum, cpu));
                const auto dev = gpu::decode_add(t, own, accum);
                ASSERT_TRUE(dev.ok()) << dev.error().message;
                ASSERT_TRUE(same_bytes(cpu.data(), dev->data(), cpu.size() * 4)) << f.name() << " n=" << n;
            }
        }
    }
}

TEST(GpuKernels, FusedRefusesANonFiniteSumUnderTheErrorPolicy) {
    SKIP_WITHOUT_GPU();
    const auto f = *qt::parse_format("int8");
    std::vector<float> big(100, 3.0e38f);
    std::vector<qt::kernels::EncodedTensor> in{*qt::kernels::encode(f, big, 32), *qt::kernels::encode(f, big, 32)};
    const auto dev = gpu::reduce_requantize(in, qt::Accum::kFp32);
    ASSERT_FALSE(dev.ok());
    EXPECT_NE(dev.error().message.find("reduced sum"), std::string::npos) << dev.error().message;
}
