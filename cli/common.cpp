// What every subcommand of `qtransit` shares: saying a user's mistake, printing an outcome, progress.
#include <cstdio>

#include "commands.hpp"
#include "qtransit/collectives/mpi.hpp"

namespace qtransit::cli {

int fail(const Error& e) { return fail(e.message); }

int fail(const std::string& message) {
    // An mpi job whose ranks fell out of step (mpi.hpp: job_failure) ends here, whatever error that
    // surfaced as: every process of the job, with the failure's own one line.
    if (const Error* e = collectives::mpi::job_failure()) collectives::mpi::abort_job(e->message);
    std::fprintf(stderr, "qtransit: %s\n", one_line(message).c_str());
    return kExitUsage;
}

int finish(const Result<gate::Printed>& r, bool speaker, bool codec_finding) {
    if (!r && codec_finding && r.error().code == ErrorCode::kCodec) {
        std::fprintf(stderr, "qtransit: %s\n", one_line(r.error().message).c_str());
        return kExitCheckFailed;
    }
    if (!r) return speaker || collectives::mpi::job_failure() ? fail(r.error()) : kExitUsage;
    std::fputs(r->out.c_str(), stdout);
    std::fflush(stdout);
    for (const auto& line : r->complaints) std::fprintf(stderr, "qtransit: %s\n", line.c_str());
    return r->passed ? kExitOk : kExitCheckFailed;
}

gate::Emit to_stdout() {
    return [](const std::string& text) {
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
    };
}

gate::Emit to_stderr() {
    return [](const std::string& text) {
        std::fputs(text.c_str(), stderr);
        std::fflush(stderr);
    };
}

std::function<void(int, int, const std::string&)> survey_progress(bool tty) {
    if (!tty) return {};
    return [](int done, int total, const std::string& what) {
        if (total == 0) std::fprintf(stderr, "\n");
        else std::fprintf(stderr, "\r[%d/%d] %s   ", done, total, what.c_str());
    };
}

std::function<void(const gate::GateProgress&)> progress_printer(bool tty) {
    return [tty](const gate::GateProgress& p) {
        if (tty && !p.finished) {
            std::fprintf(stderr, "\r[%zu/%zu] %-10s %-12s %s N=%-4lld (%zu/%zu)   ", p.group + 1, p.groups, p.format.c_str(),
                         p.dist.c_str(), p.tree ? "tree-rs" : "paths", static_cast<long long>(p.n), p.step + 1, p.steps);
        } else if (!tty && p.finished) {
            std::fprintf(stderr, "qtransit check: [%zu/%zu] %s %s: %s, %.1f s\n", p.group + 1, p.groups, p.format.c_str(), p.dist.c_str(),
                         p.refused ? "input refused (binary16 range)"
                                   : (std::to_string(p.runs) + " runs, " + (p.holds ? "bounds and k hold" : "FAILURES")).c_str(),
                         p.seconds);
        } else if (tty && p.finished && p.group + 1 == p.groups) {
            std::fprintf(stderr, "\r%100s\r", "");
        }
        std::fflush(stderr);
    };
}

}  // namespace qtransit::cli
