// `qtransit bench`: encode/decode throughput of the CPU backend as a ratio to memcpy of the same
// input bytes, both measured in this run (absolute times on shared machines mean little).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qtransit::cli {
namespace {

template <class Fn>
double median_seconds(int repeats, Fn&& fn) {
    fn();  // warm-up: page faults, caches, the loader's ifunc choice
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void parallel_memcpy(void* dst, const void* src, size_t bytes, int threads) {
    if (threads <= 1) {
        std::memcpy(dst, src, bytes);
        return;
    }
    std::vector<std::thread> pool;
    const size_t per = (bytes / static_cast<size_t>(threads) + 63) & ~size_t{63};
    for (int t = 0; t < threads; ++t) {
        const size_t b0 = std::min(bytes, per * static_cast<size_t>(t)), b1 = std::min(bytes, b0 + per);
        if (b0 < b1)
            pool.emplace_back([=] { std::memcpy(static_cast<char*>(dst) + b0, static_cast<const char*>(src) + b0, b1 - b0); });
    }
    for (auto& th : pool) th.join();
}

}  // namespace

int run_bench(const BenchArgs& a) {
    if (auto st = kernels::validate_block(a.block); !st) return fail(st.error());
    std::vector<FormatSpec> formats;
    for (const auto& name : a.formats) {
        auto f = resolve_format(name);
        if (!f) return fail(f.error());
        if (auto st = f->check_block(a.block); !st) return fail("--block: " + st.error().message);
        formats.push_back(*f);
    }
    const int64_t n = a.mib * (int64_t{1} << 20) / 4;
    const int all = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<float> x(static_cast<size_t>(n)), copy(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    kernels::generate_span(kernels::Distribution::kNormal, 1, 0, 0, x);
    std::fill(copy.begin(), copy.end(), 1.0f);
    std::fill(out.begin(), out.end(), 1.0f);

    nlohmann::json rows = nlohmann::json::array();
    if (!a.json)
        std::printf("%-18s %-7s %7s %11s %11s %11s\n", "format", "op", "threads", "ms", "memcpy ms", "vs memcpy");
    for (int threads : {1, all}) {
        const double t_copy = median_seconds(a.repeats, [&] { parallel_memcpy(copy.data(), x.data(), x.size() * 4, threads); });
        for (const FormatSpec& f : formats) {
            const std::string name = f.name();
            const auto sz = kernels::encoded_sizes(f, n, a.block);
            std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes), 1);
            std::vector<float> scales(static_cast<size_t>(sz.blocks), 1.0f), offsets(static_cast<size_t>(sz.offsets));
            kernels::CodecOptions opt;
            opt.threads = threads;
            Status st;
            const double t_enc = median_seconds(a.repeats, [&] { st = kernels::encode_into(f, x, a.block, codes, scales, offsets, opt); });
            if (!st) return fail(st.error());
            const double t_dec = median_seconds(a.repeats, [&] { kernels::decode_into(f, a.block, codes, scales, offsets, out, threads); });
            for (auto [op, t] : {std::pair{"encode", t_enc}, std::pair{"decode", t_dec}}) {
                const double ratio = t_copy / t;
                if (a.json) {
                    rows.push_back({{"format", name}, {"op", op}, {"threads", threads}, {"seconds", t},
                                    {"memcpy_seconds", t_copy}, {"ratio_to_memcpy", ratio}});
                } else {
                    std::printf("%-18s %-7s %7d %11.3f %11.3f %11.3f\n", name.c_str(), op, threads, t * 1e3, t_copy * 1e3, ratio);
                }
            }
        }
    }
    if (a.json) {
        nlohmann::json j{{"input_mib", a.mib}, {"block", a.block}, {"repeats", a.repeats},
                         {"note", "ratio_to_memcpy = memcpy time of the same binary32 input bytes / op time, same run, median"},
                         {"rows", rows}};
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("(%lld MiB binary32, block %lld, median of %d; ratio > 1 is faster than memcpy)\n",
                    static_cast<long long>(a.mib), static_cast<long long>(a.block), a.repeats);
    }
    return kExitOk;
}

}  // namespace qtransit::cli
