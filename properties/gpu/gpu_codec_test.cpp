// The CUDA encode/decode equal the CPU backend bit for bit (ctest label `gpu`). Without a GPU, or in
// a build without CUDA, every test reports itself skipped with the reason: never passed, never failed.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;

namespace {
// Bit-for-bit equality of two float vectors (NaN payloads and signed zeros included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
void skip_without_gpu() {
    const auto q = qt::kernels::gpu::query_devices();
    if (q.devices.empty()) GTEST_SKIP() << "no GPU: " << q.note;
}
}  // namespace

TEST(GpuCodec, EncodeDecodeEqualCpuForEveryFormat) {
    skip_without_gpu();
    if (::testing::Test::IsSkipped()) return;
    std::mt19937_64 rng(20261129);  // named seed: a failure replays
    for (const auto& f : qt::builtin_formats()) {
        for (int trial = 0; trial < 20; ++trial) {
            const int64_t n = std::uniform_int_distribution<int64_t>(0, 5000)(rng);
            const int64_t block = std::uniform_int_distribution<int64_t>(1, trial % 5 == 0 ? 9000 : 300)(rng);
            const auto dist = qt::kernels::all_distributions()[static_cast<size_t>(trial) % qt::kernels::all_distributions().size()];
            std::vector<float> x(static_cast<size_t>(n));
            qt::kernels::generate_span(dist, rng(), static_cast<uint32_t>(trial), 0, x);
            if (f.kind == qt::FormatKind::kDs)
                for (float& v : x) v = std::fmod(v, 60000.0f);
            const auto cpu = qt::kernels::encode(f, x, block);
            const auto gpu = qt::kernels::gpu::encode(f, x, block);
            ASSERT_TRUE(cpu.ok() && gpu.ok()) << (gpu.ok() ? "" : gpu.error().message);
            ASSERT_EQ(cpu->codes, gpu->codes) << f.name() << " n=" << n << " block=" << block;
            ASSERT_TRUE(same_bits(cpu->scales, gpu->scales)) << f.name();
            ASSERT_TRUE(same_bits(cpu->offsets, gpu->offsets)) << f.name();
            const auto dc = qt::kernels::decode(*cpu);
            const auto dg = qt::kernels::gpu::decode(*gpu);
            ASSERT_TRUE(dg.ok()) << dg.error().message;
            ASSERT_TRUE(same_bits(dc, *dg)) << f.name() << " n=" << n;
        }
    }
}

// Declared formats (fp8, MX, nf4, stochastic twins): the one decl_math.hpp definition gives the
// same codes, scales and decoded bits on both backends, stochastic rounding included.
TEST(GpuCodec, DeclaredFormatsEqualCpu) {
    skip_without_gpu();
    if (::testing::Test::IsSkipped()) return;
    std::mt19937_64 rng(20261130);
    for (const auto& f : qt::all_builtin_formats()) {
        if (f.kind != qt::FormatKind::kDecl) continue;
        for (int trial = 0; trial < 12; ++trial) {
            const int64_t n = std::uniform_int_distribution<int64_t>(0, 5000)(rng);
            const int64_t block = f.fixed_block() ? f.fixed_block()
                                                  : std::uniform_int_distribution<int64_t>(1, trial % 4 == 0 ? 9000 : 300)(rng);
            const auto dist = qt::kernels::all_distributions()[static_cast<size_t>(trial) % qt::kernels::all_distributions().size()];
            std::vector<float> x(static_cast<size_t>(n));
            qt::kernels::generate_span(dist, rng(), static_cast<uint32_t>(trial), 0, x);
            qt::kernels::CodecOptions o;
            o.seed = rng();
            o.hop = static_cast<uint32_t>(trial);
            o.site.rank = trial % 3 - 1;
            o.site.index_base = trial * 1000;
            const auto cpu = qt::kernels::encode(f, x, block, o);
            const auto gpu = qt::kernels::gpu::encode(f, x, block, o);
            ASSERT_TRUE(cpu.ok() && gpu.ok()) << f.name() << ": " << (gpu.ok() ? "" : gpu.error().message);
            ASSERT_EQ(cpu->codes, gpu->codes) << f.name() << " n=" << n << " block=" << block;
            ASSERT_TRUE(same_bits(cpu->scales, gpu->scales)) << f.name();
            ASSERT_TRUE(same_bits(cpu->offsets, gpu->offsets)) << f.name();
            const auto dc = qt::kernels::decode(*cpu);
            const auto dg = qt::kernels::gpu::decode(*gpu);
            ASSERT_TRUE(dg.ok()) << dg.error().message;
            ASSERT_TRUE(same_bits(dc, *dg)) << f.name() << " n=" << n;
        }
    }
}

TEST(GpuCodec, ErrorPolicyRefusesOnTheDeviceToo) {
    skip_without_gpu();
    if (::testing::Test::IsSkipped()) return;
    std::vector<float> x(1000, 1.0f);
    x[777] = NAN;
    const auto r = qt::kernels::gpu::encode(*qt::parse_format("int8"), x, 32);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("element 777"), std::string::npos) << r.error().message;
}
