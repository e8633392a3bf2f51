// `qtransit simulate`: gate::simulate with its progress on a terminal, the table (or JSON) on
// stdout and, under one process per rank, what checking cost each rank (stderr).
#include <cstdio>
#include <unistd.h>

#include "commands.hpp"
#include "qtransit/gate/sweep.hpp"

namespace qtransit::cli {

int run_simulate(const gate::SimulateRequest& a) {
    const bool per_rank = [&] {
        auto b = collectives::parse_backend(a.backend);
        return b && gate::one_process_per_rank(*b);
    }();
    // Under mpi (and nccl under mpirun) only rank 0 prints and writes (every rank holds the same
    // combined verdicts).
    const bool speaker = gate::speaker(a.backend);
    const bool tty = speaker && isatty(fileno(stderr)) != 0;
    std::function<void(size_t, size_t, int64_t)> on_group;
    if (tty)
        on_group = [](size_t i, size_t total, int64_t n) {
            std::fprintf(stderr, "\r[%zu/%zu] N=%lld ...   ", i + 1, total, static_cast<long long>(n));
        };
    auto outcome = gate::simulate(a, nullptr, on_group);
    if (tty) std::fprintf(stderr, "\r%40s\r", "");
    if (!outcome) return finish(outcome.error(), true, true);
    const gate::Printed p = (*outcome)->printed(a);
    if (!speaker) return p.passed ? kExitOk : kExitCheckFailed;
    std::fputs(p.out.c_str(), stdout);
    std::fflush(stdout);
    if (per_rank) std::fputs((*outcome)->costs(a).c_str(), stderr);
    return finish(gate::Printed{"", p.complaints, p.passed});
}

}  // namespace qtransit::cli
