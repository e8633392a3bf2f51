// The subcommands of `qtransit` that the command line itself runs, and what every command shares:
// printing a gate::Printed (gate/commands.hpp, where quantize, simulate, check and verify live) and
// mapping it to the process exit code: 0 success, 1 a check that failed (a bound, a bit-exactness
// verdict), 2 a user error (bad file, bad option, NaN under the `error` policy); user errors print
// one line on stderr before returning 2.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/gate/commands.hpp"

namespace qtransit::cli {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitUsage = 2;

// Print "qtransit: <message>" on stderr, as one_line(), and return kExitUsage.
int fail(const Error& e);
int fail(const std::string& message);
// What a command left: its stdout, then each complaint on stderr ("qtransit: <line>"); the exit code.
// An Error is a user's mistake (fail(), exit 2), said by a speaker only (under one process per rank:
// rank 0), unless the job failed (every process says it); with codec_finding, an Error of kind
// kCodec is a finding instead (exit 1: a user's codec broke on valid input).
int finish(const Result<gate::Printed>& r, bool speaker = true, bool codec_finding = false);
// The gate's progress on stderr: on a terminal "\r[i/total] format dist paths N=.. (j/n)" and a cleared
// line at the end; else one line per finished group.
std::function<void(const gate::GateProgress&)> progress_printer(bool tty);

// Text to stdout (or stderr) as a command produces it, flushed: a table's rows as they finish.
gate::Emit to_stdout();
gate::Emit to_stderr();
// survey --json's progress on a terminal: "\r[i/n] format dist" per case, a newline at the end.
std::function<void(int, int, const std::string&)> survey_progress(bool tty);
// The allocator this program runs on (mimalloc when the build found it; info.cpp).
std::string allocator();

// `qtransit simulate`: gate::simulate, with the progress and the per-rank costs it prints.
int run_simulate(const gate::SimulateRequest& a);

}  // namespace qtransit::cli
