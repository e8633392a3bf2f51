// Every CUDA kernel against its CPU version, bit for bit (ctest label `gpu`): encode and decode at
// misaligned device addresses with poisoned outputs, the swizzled stage-1 encode, the fused
// reduce-requantize (fp32 and fp16 accumulation), the decode-and-add of a ring hop, a 2^20-element
// block and a long tensor. Outputs are filled with a poison pattern before every run, twice with
// two different patterns, so an element the kernel never wrote cannot match the CPU by luck.
// And the one kernel that is not bit for bit by design, ds-int<b> as DeepSpeed's fast-math build
// computes it: admissible and within its bound, with a table of how often it differs.
// Without a GPU every test reports itself skipped with the reason (the fast-math kernel's argument
// checks run before any device call, so they run without one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <thread>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/fused.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reference/formats.hpp"

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

// The device transport's encode (issue 51): encode_device_queued leaves the refused block in a flag
// word that comes back with the codes, and refusal_of_flag makes it the CPU's Error. Every built-in
// format that is not rotated: the same codes, scales and offsets as the CPU and no refusal on
// finite inputs; the CPU's own Error, word for word, for a NaN under `error`; under `propagate` the
// CPU's poisoned block and no refusal.
TEST(GpuKernels, QueuedEncodeEqualsCpuAndItsFlagGivesTheCpusError) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 rng(20261207);
    for (const auto& f : qt::builtin_formats()) {
        if (f.rotated()) continue;  // encode_device rotates; the transports do not carry rotated formats
        const int64_t block = f.fixed_block() > 0 ? f.fixed_block() : 32, n = 3 * block;
        for (int trial = 0; trial < 3; ++trial) {
            auto x = make_input(f, n, rng, trial);
            qt::kernels::CodecOptions opt;
            opt.site.rank = 2;
            if (trial > 0) x[static_cast<size_t>(block + 5)] = NAN;
            if (trial == 2) opt.policy = qt::Nonfinite::kPropagate;
            const std::string what = f.name() + " trial " + std::to_string(trial);
            auto out = qt::kernels::sized_encoded(f, n, block);
            Dev dx(x.size() * 4), dc(out.codes.size()), ds(out.scales.size() * 4), doff(out.offsets.size() * 4), dflag(8);
            ASSERT_OK(gpu::copy_to_device(dx.base, x.data(), x.size() * 4));
            ASSERT_OK(gpu::device_fill(dflag.base, 0x00, 8));  // the queued encode must reset it
            ASSERT_OK(gpu::encode_device_queued(f, dx.at<float>(0), n, block, dc.at<uint8_t>(0), ds.at<float>(0),
                                                doff.at<float>(0), opt, dflag.at<unsigned long long>(0), nullptr));
            uint64_t flag = 0;
            ASSERT_OK(gpu::copy_to_host(&flag, dflag.base, 8));
            const qt::Status dev = qt::kernels::refusal_of_flag(f, flag, x.data(), n, block, opt);
            const auto cpu = qt::kernels::encode(f, x, block, opt);
            ASSERT_EQ(cpu.ok(), dev.ok()) << what << ": flag " << flag;
            if (!cpu.ok()) {
                EXPECT_EQ(dev.error().message, cpu.error().message) << what;
                continue;
            }
            ASSERT_OK(gpu::copy_to_host(out.codes.data(), dc.base, out.codes.size()));
            ASSERT_OK(gpu::copy_to_host(out.scales.data(), ds.base, out.scales.size() * 4));
            ASSERT_OK(gpu::copy_to_host(out.offsets.data(), doff.base, out.offsets.size() * 4));
            expect_same(*cpu, out, what);
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
            for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16, qt::Accum::kBf16}) {
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
            for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16, qt::Accum::kBf16}) {
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

// ---- ds-int<b>-fm: DeepSpeed's fast-math build (cuda/ds_fast_math.cu, docs/DECISIONS.md D23) --------
// The kernel compiled with --use_fast_math against the IEEE model (the CPU encode of ds-int<b>): how
// often its codes, steps and decoded values differ, one table row per (bits, input, group) printed
// to stdout, where gpu-check's tests.log keeps it (its rows start with "ds-fm", which gpu-check also
// copies into its main log). Whatever differs, every result must be one the admissible scales and
// steps give (reference::check_admissible) and every element within ds-int<b>-fm's bound.
namespace {

// The reference checks are scalar, one element at a time, and a 2^20-element tensor is checked two
// dozen times: they run in shards of whole blocks, one per hardware thread.
int64_t shard_count(int64_t blocks) {
    return std::min<int64_t>(blocks, std::max(1u, std::thread::hardware_concurrency()));
}
// fn(shard, first, end) for each of `shards` shards of n elements in blocks of `block`, on threads.
template <class Fn>
void over_block_shards(int64_t n, int64_t block, int64_t shards, Fn fn) {
    const int64_t blocks = (n + block - 1) / block;
    std::vector<std::thread> pool;
    for (int64_t s = 0; s < shards; ++s)
        pool.emplace_back([&fn, s, shards, blocks, block, n] {
            fn(s, blocks * s / shards * block, std::min(n, blocks * (s + 1) / shards * block));
        });
    for (auto& t : pool) t.join();
}

// The binary16 value one ulp from y (y != 0): away from zero for d = 1, towards it for d = -1.
float fp16_neighbour(float y, int d) {
    const uint16_t h = qt::kernels::f32_to_f16_bits(y);
    return qt::kernels::f16_bits_to_f32(static_cast<uint16_t>(d > 0 ? h + 1 : h - 1));
}

// Inputs on the IEEE scale's rounding ties. Block j has the absmax a at one drawn place (a power of
// two in even blocks, a binary16 value drawn log-uniformly from [2^-14, 2^15.9] in odd ones) and
// elsewhere y_k = fl16((k + 1/2) / sigma0) for k over the code range, sigma0 the IEEE scale, with
// its two binary16 neighbours. For a power of two, sigma0 is one too and y_k sigma0 = k + 1/2
// exactly: a tie that rne breaks to even and a scale one ulp off breaks the other way. For other a,
// y_k sigma0 lands within a binary16 ulp of the tie, often on it after the product's rounding.
std::vector<float> ds_tie_input(int bits, int64_t n, int64_t block, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<float> x(static_cast<size_t>(n));
    const int32_t levels = 1 << bits, cmin = -(levels / 2);
    for (int64_t first = 0, j = 0; first < n; first += block, ++j) {
        const int64_t len = std::min(block, n - first);
        const float a = j % 2 == 0 ? std::ldexp(1.0f, std::uniform_int_distribution<int>(-14, 15)(rng))
                                   : qt::kernels::round_f16(std::exp2(std::uniform_real_distribution<float>(-14.0f, 15.9f)(rng)));
        const float sigma0 = static_cast<float>(levels) / (2 * a);  // IEEE here: the host build has no fast math
        for (int64_t i = 0; i < len; ++i) {
            const int64_t t = i + j * 7;  // each block starts elsewhere in the pattern: short blocks cover every code too
            const int32_t k = cmin + static_cast<int32_t>((t / 3) % levels);
            float y = qt::kernels::round_f16((static_cast<float>(k) + 0.5f) / sigma0);
            if (t % 3 != 1) y = fp16_neighbour(y, t % 3 == 0 ? -1 : 1);
            x[static_cast<size_t>(first + i)] = std::clamp(y, -a, a);
        }
        x[static_cast<size_t>(first) + rng() % static_cast<size_t>(len)] = (rng() & 1) ? -a : a;
    }
    return x;
}

std::vector<float> ds_fm_input(const char* input, int bits, int64_t n, int64_t block, uint64_t seed) {
    if (std::string(input) == "ties") return ds_tie_input(bits, n, block, seed);
    std::vector<float> x(static_cast<size_t>(n));
    const auto d = std::string(input) == "normal" ? qt::kernels::Distribution::kNormal : qt::kernels::Distribution::kHeavy;
    qt::kernels::generate_span(d, seed, 0, 0, x);
    for (float& v : x) v = std::fmod(v, 60000.0f);  // heavy reaches 2.8e7; ds-int<b> refuses |x| >= 65520 (D3)
    return x;
}

size_t count_differing(const void* a, const void* b, size_t count, size_t size) {
    size_t d = 0;
    for (size_t i = 0; i < count; ++i)
        d += std::memcmp(static_cast<const char*>(a) + i * size, static_cast<const char*>(b) + i * size, size) != 0;
    return d;
}

}  // namespace

TEST(GpuKernels, DsFastMathIsAdmissibleAndWithinItsBound) {
    SKIP_WITHOUT_GPU();
    const int64_t n = (int64_t{1} << 20) + 37;  // about 2^20, and a short last group for every size
    std::printf("ds-fm differing from ds-int<b>'s IEEE results: codes/M and decod/M per million elements, steps/Mg per "
                "million groups (then the counts); err/E the largest |x - decoded| / ds-int<b>-fm's bound\n");
    std::printf("ds-fm %-10s %-6s %5s %8s %6s %9s %7s %9s %7s %9s %7s %7s\n", "format", "input", "group", "elements",
                "groups", "codes/M", "codes", "steps/Mg", "steps", "decod/M", "decoded", "err/E");
    for (int bits : {4, 8}) {
        const auto fm = qt::parse_format("ds-int" + std::to_string(bits) + "-fm");
        const auto ieee = qt::parse_format("ds-int" + std::to_string(bits));
        ASSERT_TRUE(fm.ok()) << fm.error().message;
        ASSERT_TRUE(ieee.ok());
        ASSERT_TRUE(fm->fast_math);
        for (const char* input : {"normal", "heavy", "ties"}) {
            for (int64_t block : {64, 256, 1024, 4096}) {
                const std::string what = fm->name() + " " + input + " group " + std::to_string(block);
                const auto x = ds_fm_input(input, bits, n, block, 20261206 + static_cast<uint64_t>(block) * 16 + bits);
                const auto dev = gpu::ds_encode_fast_math(bits, x, block);
                ASSERT_TRUE(dev.ok()) << what << ": " << dev.error().message;
                const auto cpu = qt::kernels::encode(*ieee, x, block);
                ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.error().message;
                const auto codes = qt::kernels::unpack_codes(*cpu);
                const auto decoded = qt::kernels::decode(*cpu);
                const auto groups = static_cast<int64_t>(cpu->scales.size());
                ASSERT_EQ(dev->codes.size(), codes.size()) << what;
                ASSERT_EQ(dev->steps.size(), cpu->scales.size()) << what;
                ASSERT_EQ(dev->decoded.size(), decoded.size()) << what;
                const size_t dc = count_differing(dev->codes.data(), codes.data(), codes.size(), 4);
                const size_t ds = count_differing(dev->steps.data(), cpu->scales.data(), cpu->scales.size(), 4);
                const size_t dd = count_differing(dev->decoded.data(), decoded.data(), decoded.size(), 4);

                // The reference checks, shard by shard (whole blocks, so each shard's blocks are the tensor's).
                const int64_t shards = shard_count(groups);
                std::vector<qt::reference::AdmissibleCheck> adm(static_cast<size_t>(shards));
                std::vector<qt::reference::BoundCheck> bound(static_cast<size_t>(shards));
                std::vector<int64_t> shard_first(static_cast<size_t>(shards));
                std::vector<std::string> shard_error(static_cast<size_t>(shards));
                over_block_shards(n, block, shards, [&](int64_t s, int64_t first, int64_t end) {
                    const auto e = static_cast<size_t>(s);
                    const size_t len = static_cast<size_t>(end - first), f0 = static_cast<size_t>(first);
                    const std::span<const float> xs(x.data() + f0, len);
                    shard_first[e] = first;
                    adm[e] = qt::reference::check_admissible(
                        *fm, xs, block, std::span<const int32_t>(dev->codes.data() + f0, len),
                        std::span<const float>(dev->steps.data() + f0 / static_cast<size_t>(block),
                                               (len + static_cast<size_t>(block) - 1) / static_cast<size_t>(block)),
                        std::span<const float>(dev->decoded.data() + f0, len), first);
                    auto q = qt::reference::quantize(*fm, xs, block);
                    if (!q.ok()) {
                        shard_error[e] = q.error().message;
                        return;
                    }
                    q->decoded.assign(dev->decoded.begin() + first, dev->decoded.begin() + end);
                    bound[e] = qt::reference::check_bounds(*q, xs);
                });
                int64_t bad_elements = 0, bad_steps = 0;
                double worst = 0;
                for (size_t e = 0; e < adm.size(); ++e) {
                    ASSERT_TRUE(shard_error[e].empty()) << what << ": reference::quantize: " << shard_error[e];
                    bad_elements += adm[e].inadmissible_elements;
                    bad_steps += adm[e].inadmissible_steps;
                    worst = std::max(worst, bound[e].max_error_to_bound);
                }
                std::printf("ds-fm %-10s %-6s %5lld %8lld %6lld %9.1f %7zu %9.1f %7zu %9.1f %7zu %7.4f\n",
                            fm->name().c_str(), input, static_cast<long long>(block), static_cast<long long>(n),
                            static_cast<long long>(groups), 1e6 * static_cast<double>(dc) / static_cast<double>(n), dc,
                            1e6 * static_cast<double>(ds) / static_cast<double>(groups), ds,
                            1e6 * static_cast<double>(dd) / static_cast<double>(n), dd, worst);
                std::fflush(stdout);
                // The first failing shard holds the tensor's first failing element.
                for (size_t e = 0; e < adm.size(); ++e) {
                    EXPECT_TRUE(adm[e].holds) << what << ": " << bad_elements << " inadmissible elements, " << bad_steps
                                              << " inadmissible steps; the first: " << adm[e].first_text;
                    EXPECT_TRUE(bound[e].holds) << what << ": element " << shard_first[e] + bound[e].first_violation
                                                << " is outside ds-int" << bits << "-fm's bound (x = "
                                                << x[static_cast<size_t>(shard_first[e] + bound[e].first_violation)]
                                                << ", decoded "
                                                << dev->decoded[static_cast<size_t>(shard_first[e] + bound[e].first_violation)]
                                                << ")";
                    if (!adm[e].holds || !bound[e].holds) break;
                }
            }
        }
    }
}

// The refusals happen before anything touches a device, so they need no GPU (only the CUDA build).
TEST(GpuKernels, DsFastMathRefusesBadArguments) {
    if (!gpu::build_info().cuda) GTEST_SKIP() << "this build has no CUDA backend";
    const std::vector<float> ok(100, 1.0f);
    for (int bits : {0, 2, 5, 16}) {
        const auto r = gpu::ds_encode_fast_math(bits, ok, 32);
        ASSERT_FALSE(r.ok()) << bits;
        EXPECT_EQ(r.error().code, qt::ErrorCode::kInvalidArgument);
        EXPECT_NE(r.error().message.find("bits"), std::string::npos) << r.error().message;
    }
    for (int64_t block : {0, -1}) {
        const auto r = gpu::ds_encode_fast_math(8, ok, block);
        ASSERT_FALSE(r.ok()) << block;
        EXPECT_EQ(r.error().code, qt::ErrorCode::kInvalidArgument);
        EXPECT_NE(r.error().message.find("block"), std::string::npos) << r.error().message;
    }
    // 65520, the midpoint between 65504 and 2^16, is the first binary32 value fl16 takes to infinity.
    for (float bad : {65520.0f, -65520.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        std::vector<float> x = ok;
        x[41] = bad;
        const auto r = gpu::ds_encode_fast_math(4, x, 32);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error().code, qt::ErrorCode::kInvalidArgument);
        EXPECT_NE(r.error().message.find("element 41"), std::string::npos) << r.error().message;
    }
}
