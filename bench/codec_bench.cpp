// Google Benchmark: CPU encode/decode of int8 and int4 and of the built-in declared formats
// (docs/FORMATS.md; `qtransit bench --format` measures the same) next to memcpy of the same input
// bytes, at a cache-resident size and at a DRAM size (ggml's test-quantize-perf habit). Compare the
// bytes_per_second counters within one run; absolute times on shared machines mean little.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;

namespace {
std::vector<float> input(int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 1, 0, 0, x);
    return x;
}

void BM_Memcpy(benchmark::State& st) {
    const auto x = input(st.range(0));
    std::vector<float> y(x.size());
    for (auto _ : st) {
        std::memcpy(y.data(), x.data(), x.size() * 4);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(st.iterations() * st.range(0) * 4);
}

void BM_Encode(benchmark::State& st, const char* name) {
    const auto f = *qt::parse_format(name);
    const auto x = input(st.range(0));
    const auto sz = qt::kernels::encoded_sizes(f, st.range(0), 32);
    std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes));
    std::vector<float> scales(static_cast<size_t>(sz.blocks)), offsets(static_cast<size_t>(sz.offsets));
    qt::kernels::CodecOptions opt;
    opt.threads = 1;
    for (auto _ : st) {
        auto s = qt::kernels::encode_into(f, x, 32, codes, scales, offsets, opt);
        benchmark::DoNotOptimize(s);
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(st.iterations() * st.range(0) * 4);
}

void BM_Decode(benchmark::State& st, const char* name) {
    const auto f = *qt::parse_format(name);
    const auto x = input(st.range(0));
    const auto t = *qt::kernels::encode(f, x, 32);
    std::vector<float> out(x.size());
    for (auto _ : st) {
        qt::kernels::decode_into(f, 32, t.codes, t.scales, t.offsets, out, 1);
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(st.iterations() * st.range(0) * 4);
}

// 16 Ki elements (64 KiB: L2-resident) and 16 Mi elements (64 MiB: DRAM).
BENCHMARK(BM_Memcpy)->Arg(1 << 14)->Arg(1 << 24);
BENCHMARK_CAPTURE(BM_Encode, int8, "int8")->Arg(1 << 14)->Arg(1 << 24);
BENCHMARK_CAPTURE(BM_Encode, int4, "int4")->Arg(1 << 14)->Arg(1 << 24);
BENCHMARK_CAPTURE(BM_Decode, int8, "int8")->Arg(1 << 14)->Arg(1 << 24);
BENCHMARK_CAPTURE(BM_Decode, int4, "int4")->Arg(1 << 14)->Arg(1 << 24);
// Declared formats (issue 16); block 32, the MX formats' only one.
#define QT_DECL_BENCH(id, name)                                        \
    BENCHMARK_CAPTURE(BM_Encode, id, name)->Arg(1 << 14)->Arg(1 << 24); \
    BENCHMARK_CAPTURE(BM_Decode, id, name)->Arg(1 << 14)->Arg(1 << 24)
QT_DECL_BENCH(fp8_e4m3, "fp8-e4m3");
QT_DECL_BENCH(mxfp8_e4m3, "mxfp8-e4m3");
QT_DECL_BENCH(mxfp6_e2m3, "mxfp6-e2m3");
QT_DECL_BENCH(mxfp4, "mxfp4");
QT_DECL_BENCH(nf4, "nf4");
QT_DECL_BENCH(int4_sr, "int4-sr");
QT_DECL_BENCH(mxint8, "mxint8");
#undef QT_DECL_BENCH
}  // namespace

BENCHMARK_MAIN();
