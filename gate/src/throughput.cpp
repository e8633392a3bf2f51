#include "qtransit/gate/throughput.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qtransit::gate {
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

Result<std::vector<ThroughputRow>> measure_throughput(const ThroughputSpec& spec, const std::function<void(const ThroughputRow&)>& on_row) {
    for (const auto& f : spec.formats) {
        if (auto st = kernels::validate_block(spec.block_for(f)); !st) return st.error();
        if (auto st = f.check_block(spec.block_for(f)); !st) return st.error();
    }
    const int64_t n = spec.mib * (int64_t{1} << 20) / 4;
    const int all = spec.threads > 0 ? spec.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<float> x(static_cast<size_t>(n)), copy(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    kernels::generate_span(kernels::Distribution::kNormal, 1, 0, 0, x);
    std::fill(copy.begin(), copy.end(), 1.0f);
    std::fill(out.begin(), out.end(), 1.0f);
    std::vector<ThroughputRow> rows;
    // One thread, then all of them: on one (--threads 1, or a one-core machine) the second pass would
    // repeat the first's rows and double the time.
    std::vector<int> passes{1};
    if (all > 1) passes.push_back(all);
    for (int threads : passes) {
        const double t_copy = median_seconds(spec.repeats, [&] { parallel_memcpy(copy.data(), x.data(), x.size() * 4, threads); });
        for (const FormatSpec& f : spec.formats) {
            const int64_t block = spec.block_for(f);
            const auto sz = kernels::encoded_sizes(f, n, block);
            std::vector<uint8_t> codes(static_cast<size_t>(sz.code_bytes), 1);
            std::vector<float> scales(static_cast<size_t>(sz.blocks), 1.0f), offsets(static_cast<size_t>(sz.offsets));
            kernels::CodecOptions opt;
            opt.threads = threads;
            Status st;
            const double t_enc =
                median_seconds(spec.repeats, [&] { st = kernels::encode_into(f, x, block, codes, scales, offsets, opt); });
            if (!st) return st.error();
            const double t_dec =
                median_seconds(spec.repeats, [&] { kernels::decode_into(f, block, codes, scales, offsets, out, threads); });
            for (auto [op, t] : {std::pair{"encode", t_enc}, std::pair{"decode", t_dec}}) {
                rows.push_back({f.name(), op, threads, block, t, t_copy, t_copy / t});
                if (on_row) on_row(rows.back());
            }
        }
    }
    return rows;
}

}  // namespace qtransit::gate
