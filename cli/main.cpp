// `qtransit`: thin; it parses the options into a command's request (gate/commands.hpp), calls it, prints the outcome and maps it to an exit code.
#include <algorithm>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "qtransit/version.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace {
int dispatch(int argc, char** argv);
}  // namespace

// `--backend mpi`, and `--backend nccl` started by a launcher (mpirun, srun: one process per GPU):
// MPI starts before anything else (every rank checks that every rank runs the same arguments) and
// ends after the command, whatever it returned: MPI_Finalize, or MPI_Abort of the whole job when the
// library reported the ranks out of step (mpi::job_failure; the library itself never aborts).
// `--backend nccl` run as one plain process keeps the single-process mode (one rank per visible GPU)
// and never starts MPI.
int main(int argc, char** argv) {
    namespace mpi = qtransit::collectives::mpi;
    const bool nccl_ranks = mpi::requested(argc, argv, "nccl") && mpi::launched();
    // With a codec loaded, the process ends through finish_process: no codec code (a destructor, an
    // atexit handler, a thread) runs after the verdict to change its status.
    if (!mpi::requested(argc, argv) && !nccl_ranks) return qtransit::kernels::finish_process(dispatch(argc, argv));
    if (!mpi::built())
        return qtransit::cli::fail(std::string(nccl_ranks ? "--backend nccl under a launcher (mpirun, srun) needs MPI, but "
                                                          : "") +
                                   "this build has no mpi backend (install openmpi-bin and libopenmpi-dev, then rebuild)");
    int rc = qtransit::cli::kExitUsage;
    if (auto st = mpi::init(&argc, &argv); !st) {
        if (!mpi::job_failure()) std::fprintf(stderr, "qtransit: rank %d: %s\n", mpi::rank(), st.error().message.c_str());
    } else {
        rc = dispatch(argc, argv);
    }
    // Ranks out of step (a wait past its deadline: a dead or stalled rank) cannot all reach
    // MPI_Finalize: the library returned the failure, and here the job ends, every process of it.
    if (const qtransit::Error* e = mpi::job_failure()) mpi::abort_job(e->message);
    mpi::finalize();
    return qtransit::kernels::finish_process(rc);
}

namespace {
using qtransit::cli::decimal_numbers_only;
using qtransit::cli::empty_value;
using qtransit::cli::fits_int64;
using qtransit::cli::non_negative;
using qtransit::cli::seed_value;
using qtransit::cli::thread_count;

int dispatch(int argc, char** argv) {
    using namespace qtransit::cli;
    CLI::App app{"qtransit: numerics verification for quantized collective communication.\n"
                 "Exit codes: 0 success, 1 a check failed, 2 bad invocation or input."};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(QTRANSIT_VERSION));

    bool info_json = false;
    auto* info = app.add_subcommand("info", "Version, build features (CUDA archs, NCCL), GPUs visible now");
    info->add_flag("--json", info_json, "Print one JSON object");

    qtransit::gate::FormatsRequest fa;
    auto* formats = app.add_subcommand("formats", "List the formats: bits per element, metadata and wire bytes");
    formats->add_option("--block", fa.block, "Block size for the wire-byte column")->check(fits_int64)->capture_default_str();
    formats->add_flag("--json", fa.json, "Print JSON");
    std::string show_target;
    auto* formats_show = formats->add_subcommand(
        "show", "Print the TOML declaration of a format (built-in, or a .toml file); it parses back to the same format");
    formats_show->add_option("format", show_target, "Format name or FILE.toml")->required();
    qtransit::gate::FormatsValidateRequest va;
    auto* formats_validate = formats->add_subcommand(
        "validate", "Check a declaration (FILE.toml), then every generic property and every path on it next to built-in "
                    "formats; writes the gate's reports. Exit 0 all promised properties and bounds hold, 1 one fails, 2 bad file");
    formats_validate->add_option("file", va.file, "The declaration, FILE.toml (with --codec: may be left out)");
    formats_validate->add_option("--codec", va.codec, "A codec plugin (.so, docs/PLUGIN.md) of the format: every property and path runs it");
    formats_validate->add_option("--report-dir", va.report_dir, "Where the reports go")->capture_default_str();
    formats_validate->add_option("--seed", va.seed, "Inputs' seed (and stochastic rounding's keys)")->check(seed_value)->capture_default_str();
    formats_validate->add_flag("--quick", va.quick, "Fewer blocks, ranks and elements (a few seconds)");

    qtransit::gate::QuantizeRequest qa;
    auto* quantize = app.add_subcommand(
        "quantize", "Quantize a .npy tensor with the production kernel; check the bound exactly and the kernel "
                    "against the reference bit for bit");
    quantize->add_option("--format", qa.format, "Format name (see `qtransit formats`) or a declaration FILE.toml (with --codec: may be left out)");
    quantize->add_option("--codec", qa.codec, "A codec plugin (.so, docs/PLUGIN.md) run in place of qtransit's kernel; its format is the format");
    quantize->add_option("--conformance", qa.conformance, "With --codec: exact (every bit) or bounded (every element within the format's bound)")
        ->capture_default_str();
    quantize->add_option("--shard", qa.shard, "Blocks restart every SHARD elements (0: the whole tensor; must divide it)")
        ->check(non_negative)->capture_default_str();
    quantize->add_option("--rounding", qa.rounding, "nearest (the format's own) or stochastic (its -sr twin)")
        ->capture_default_str();
    quantize->add_option("--seed", qa.seed, "Stochastic rounding's key (replays exactly)")->check(seed_value)->capture_default_str();
    quantize->add_option("--block", qa.block, "Elements per quantization block (last block may be short)")
        ->capture_default_str();
    quantize->add_option("--in", qa.in, "Input .npy (binary32 or binary16, any shape, C order)")->required();
    quantize->add_option("--nonfinite", qa.nonfinite, "NaN/inf policy: error (refuse) or propagate (poison block)")
        ->capture_default_str();
    quantize->add_flag("--json", qa.json, "Print one JSON object with scales, codes, decoded values and the bound");
    quantize->add_option("--out", qa.out_dir,
                         "Directory to write decoded.npy, codes.bin (packed wire codes), scales.npy, offsets.npy");
    quantize->add_flag("--no-hunt", qa.no_hunt,
                       "With --codec: check the tensor only, not also the inputs generated at the format's boundaries "
                       "(near-ties, scale boundaries, lengths, block sizes, canaries; a fraction of a second)");

    qtransit::gate::BenchRequest ba;
    auto* bench = app.add_subcommand(
        "bench", "Encode/decode throughput of the CPU kernels as a ratio to memcpy measured in the same run");
    bench->add_option("--mib", ba.mib, "Input size in MiB of binary32")->capture_default_str()->check(CLI::Range(1, 4096));
    bench->add_option("--repeats", ba.repeats, "Timed repetitions (the median is reported)")
        ->capture_default_str()->check(CLI::Range(1, 1000));
    bench->add_option("--threads", ba.threads, "Threads for the multi-thread rows (0: all)")->check(thread_count)->capture_default_str();
    bench->add_option("--block", ba.block, "Block size")->check(fits_int64)->capture_default_str();
    bench->add_option("--format", ba.formats, "Formats, comma-separated (names or .toml declarations)")
        ->delimiter(',')
        ->capture_default_str();
    bench->add_flag("--json", ba.json, "Print JSON");

    qtransit::gate::SurveyRequest sa;
    auto* survey = app.add_subcommand(
        "survey", "Quantize every format over every input distribution; verify kernels against the reference bit "
                  "for bit and every element's error bound in exact arithmetic; write a report");
    survey->add_option("--format", sa.formats, "Formats or declaration FILE.toml (default: every built-in)")->delimiter(',');
    survey->add_option("--dist", sa.distributions, "Distributions (default: all)")->delimiter(',');
    survey->add_option("--elements", sa.elements, "Elements per case")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
    survey->add_option("--block", sa.block, "Block size")->check(fits_int64)->capture_default_str();
    survey->add_option("--seed", sa.seed, "Generator seed")->check(seed_value)->capture_default_str();
    survey->add_option("--report-dir", sa.report_dir, "Where survey.json and survey.md go")->capture_default_str();
    survey->add_flag("--json", sa.json, "Print the JSON report on stdout instead of the table");

    qtransit::gate::SimulateRequest ma;
    auto* simulate = app.add_subcommand(
        "simulate", "Run collective paths on simulated ranks; check every output element's error against its "
                    "a-posteriori and a-priori bounds exactly; fit the error's growth with N");
    simulate->add_option("--path", ma.paths, "Paths, comma-separated, or all: " + qtransit::known_path_names())
        ->required()->delimiter(',');
    simulate->add_option("--ranks", ma.ranks, "N, comma-separated for a sweep (e.g. 4,8,16)")->delimiter(',')->check(fits_int64);
    simulate->add_option("--ranks-per-node", ma.ranks_per_node, "G (default: 8 when it divides N, else N)")->check(non_negative);
    simulate->add_option("--elements", ma.elements, "M, elements per rank (M % N == 0)")->check(fits_int64);
    simulate->add_option("--format", ma.format, "Format name (see `qtransit formats`) or a declaration FILE.toml (with --codec, or with "
                                                "only the unquantized bf16-/fp16- paths: may be left out)");
    simulate->add_option("--codec", ma.codec, "A codec plugin (.so, docs/PLUGIN.md) running every quantization and decode of the paths");
    simulate->add_option("--rounding", ma.rounding, "nearest (the format's own) or stochastic (its -sr twin, keyed by --seed)")
        ->capture_default_str();
    simulate->add_option("--block", ma.block, "Quantization block size")->check(fits_int64)->capture_default_str();
    simulate->add_option("--dist", ma.dist, "Input distribution")->capture_default_str();
    simulate->add_option("--seed", ma.seed, "Generator seed, and stochastic rounding's key")->check(seed_value)->capture_default_str();
    simulate->add_option("--accum", ma.accum, "Accumulation: every add rounded to fp32, fp16 or bf16 (D11, D24); the bf16-/fp16- paths "
                                              "sum in their own type (D26)")->capture_default_str();
    simulate->add_option("--divide", ma.divide, "Where a mean's 1/N goes on the reduce paths: none (the sum), pre (every input "
                                                "divided by N in the path's element type, as DeepSpeed does) or post (the result "
                                                "divided); the target is then the exact mean (D27)")->capture_default_str();
    simulate->add_option("--rotation", ma.rotation, "A rotated format's sums (int4-rht, ...): each-hop (every hop decodes and "
                                                    "rotates back) or end-to-end (inputs rotated once, sums in the rotated "
                                                    "domain, one inverse at the destination; ring-rs, a2a-rs, a2a-hier-rs, "
                                                    "tree-rs) (D28)")->capture_default_str();
    simulate->add_option("--in", ma.in,
                         "Inputs from a file of shape [N, M], one row per rank (.npy float32/float16/bfloat16, or .safetensors), "
                         "or one [M] file per rank named with {rank} (in.{rank}.npy; under --backend mpi each process reads its own)");
    simulate->add_option("--dump", ma.dump, "Write the result (one path, one N) as .npy: [N, S] or [N, M]");
    simulate->add_option("--threads", ma.threads, "Worker threads (0: all)")->check(thread_count)->capture_default_str();
    const std::string backend_help =
        "Where the values are computed and the messages travel: cpu (in process), device (every rank on one GPU), "
        "nccl (one rank per GPU: one process for every visible GPU, or under mpirun/srun one process per rank and "
        "GPU), mpi (one process per rank, under mpirun)";
    simulate->add_option("--backend", ma.backend, backend_help)->capture_default_str();
    simulate->add_flag("--json", ma.json, "Print {\"runs\": [...], \"fits\": [...]}");

    qtransit::gate::CheckRequest ca;
    auto* check = app.add_subcommand(
        "check", "The numerics gate: every format, path, N and distribution of the gate checked exactly; named "
                 "verdicts; reports (report.json, report.md, junit.xml, report.html). Exit 0 all pass, 1 one failed");
    check->add_option("--config", ca.config, "Gate config (TOML; default: the embedded default gate)");
    check->add_option("--report-dir", ca.report_dir, "Where the reports go")->capture_default_str();
    check->add_option("--baseline", ca.baseline, "A previous report.json: fail on a metric worse than it by more than the margin");
    check->add_flag("--update-baseline", ca.update_baseline, "Write this run's report.json to --baseline");
    check->add_option("--junit", ca.junit, "Also write the JUnit XML here");
    check->add_option("--codec", ca.codec, "A codec plugin (.so, docs/PLUGIN.md) run in place of qtransit's kernels, on its format only");
    check->add_flag("--quick", ca.quick,
                    "The quick tier: the same formats, paths, rules and budgets at the config's two smallest N, M = their lcm "
                    "x block, its first two distributions (the default gate: N = 8, 64, M = 2048, normal and heavy; seconds)");
    check->add_option("--conformance", ca.conformance, "exact (every bit, the default) or bounded (every element within the format's bound)");
    check->add_option("--backend", ca.backend,
                      backend_help + ". Under mpi (and nccl under mpirun) the gate's N must equal the number of "
                                     "processes; rank 0 writes the reports")
        ->capture_default_str();

    auto* verify = app.add_subcommand(
        "verify", "Judge a run computed elsewhere (a framework's quantizer or collective) from its dumps, in exact arithmetic");
    verify->require_subcommand(1);
    qtransit::gate::VerifyQuantizeRequest vq;
    auto* verify_quantize = verify->add_subcommand(
        "quantize", "One quantization done elsewhere: its decoded values (and codes, scales, offsets when given) against the "
                    "reference bit for bit, every element's error against the format's bound. Exit 0 the conformance holds, 1 not, 2 bad input");
    verify_quantize->add_option("--format", vq.format, "Format name (see `qtransit formats`) or a declaration FILE.toml")->required();
    verify_quantize->add_option("--in", vq.in, "The input x: .npy (float32, float16, bfloat16) or .safetensors")->required();
    verify_quantize->add_option("--decoded", vq.decoded, "What the run decoded, the input's shape")->required();
    verify_quantize->add_option("--codes", vq.codes, "Its codes: packed wire bytes (.bin, `quantize --out`'s codes.bin) or one integer per element (.npy)");
    verify_quantize->add_option("--scales", vq.scales, "Its per-block scales (.npy)");
    verify_quantize->add_option("--offsets", vq.offsets, "Its per-block offsets (.npy; asym formats)");
    verify_quantize->add_option("--block", vq.block, "Elements per quantization block")->check(fits_int64)->capture_default_str();
    verify_quantize->add_option("--shard", vq.shard, "Blocks restart every SHARD elements (0: the whole tensor)")->check(non_negative)->capture_default_str();
    verify_quantize->add_option("--conformance", vq.conformance, "exact (every bit) or bounded (every element within the format's bound)")
        ->capture_default_str();
    verify_quantize->add_option("--dtype", vq.dtype, "What a raw uint16 array holds: fp16 or bf16 (typed files say it themselves)");
    verify_quantize->add_option("--tensor", vq.tensor, "The input's tensor name in a .safetensors file");
    verify_quantize->add_option("--decoded-tensor", vq.decoded_tensor,
                                "The decoded values' tensor name in a .safetensors file (default: its only tensor)");
    verify_quantize->add_option("--report-dir", vq.report_dir, "Where the reports go (\"\": none)")->capture_default_str();
    verify_quantize->add_flag("--json", vq.json, "Print one JSON object");

    qtransit::gate::VerifyCollectiveRequest vc;
    auto* verify_collective = verify->add_subcommand(
        "collective", "A collective run elsewhere: every output's exact error, judged in tiers exact (qtransit's schedule bit for "
                      "bit), same-events (the same decoded contributions, any order of adds), bounded (the path's a-priori bound). "
                      "Exit 0 the tier holds, 1 a violation, 2 bad input");
    verify_collective->add_option("--path", vc.path, "The path the run took: " + qtransit::known_path_names())->required();
    verify_collective->add_option("--ranks", vc.ranks, "N, the ranks of the run")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    verify_collective->add_option("--ranks-per-node", vc.ranks_per_node, "G (default: 8 when it divides N, else N)")->check(non_negative);
    verify_collective->add_option("--format", vc.format, "The format the run quantized with")->required();
    verify_collective->add_option("--inputs", vc.inputs,
                                  "What each rank contributed: one [N, M] file, or one [M] file per rank with {rank} in the name "
                                  "(in.{rank}.npy); .npy or .safetensors")
        ->required();
    verify_collective->add_option("--outputs", vc.outputs,
                                  "What each rank held after: one file, [N, S] for a reduce-scatter (row c: chunk c on rank c) or [N, M], "
                                  "or one file per rank with {rank}")
        ->required();
    verify_collective->add_option("--block", vc.block, "Quantization block size")->check(fits_int64)->capture_default_str();
    verify_collective->add_option("--accum", vc.accum, "The run's accumulation: fp32, fp16 or bf16")->capture_default_str();
    verify_collective->add_option("--target", vc.target, "sum, or mean (the sum times 1/N; one division allowed at any stage)")->capture_default_str();
    verify_collective->add_option("--ring-order", vc.ring_order, "A ring path's order, as data flows (each rank sends to the next); default: the worst")
        ->delimiter(',');
    verify_collective->add_option("--conformance", vc.conformance,
                                  "exact, same-events or bounded (default: same-events where the path allows it, else bounded)");
    verify_collective->add_option("--dtype", vc.dtype, "What raw uint16 arrays hold: fp16 or bf16");
    verify_collective->add_option("--tensor", vc.tensor, "The tensor's name in .safetensors files");
    verify_collective->add_option("--output-tensor", vc.output_tensor, "The outputs' tensor name, when it differs from --tensor");
    verify_collective->add_option("--report-dir", vc.report_dir, "Where the reports go (\"\": none)")->capture_default_str();
    verify_collective->add_flag("--json", vc.json, "Print one JSON object");
    verify_collective->add_option("--backend", vc.backend,
                                  "cpu (one process), or mpi (under mpirun: each process reads and checks its own chunks, rank 0 reports)")
        ->capture_default_str();

    // A first word that is no command (a typo): CLI11 would say only "A subcommand is required".
    if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
            found = found || sub->get_name() == argv[1];
            known += (known.empty() ? "" : ", ") + sub->get_name();
        }
        if (!found) {
            std::fprintf(stderr, "qtransit: unknown command '%s'; the commands: %s (see qtransit --help)\n",
                         qtransit::one_line(argv[1]).c_str(), known.c_str());
            return kExitUsage;
        }
    }
    decimal_numbers_only(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // CLI11 quotes the value as given: escaped and cut, one line whatever it holds.
        std::fprintf(stderr, "qtransit: %s (see qtransit --help)\n", qtransit::one_line(e.what()).c_str());
        return kExitUsage;
    }
    if (const std::string name = empty_value(app); !name.empty())
        return qtransit::cli::fail(name + ": an empty value ('') is not a value: give one, or leave " + name + " out");
    if (const std::string item = qtransit::cli::empty_list_item(app, argc, argv); !item.empty()) return qtransit::cli::fail(item);
    // The environment's settings, before any work (a run would read them only when it opens a pipe
    // or starts MPI).
    if (auto st = qtransit::check_environment(); !st) return qtransit::cli::fail(st.error());

    namespace gate = qtransit::gate;
    const bool tty = isatty(fileno(stderr)) != 0;
    if (*info) return finish(gate::info({info_json, allocator()}));
    if (*formats_show) return finish(gate::formats_show(show_target));
    if (*formats_validate) return finish(gate::formats_validate(va, to_stderr(), progress_printer(tty)));
    if (*formats) return finish(gate::formats(fa));
    if (*quantize) return finish(gate::quantize(qa));
    if (*bench) return finish(gate::bench(ba, to_stdout()));
    if (*survey) return finish(gate::survey(sa, to_stdout(), survey_progress(tty)));
    if (*simulate) return run_simulate(ma);
    if (*check) return finish(gate::check(ca, progress_printer(tty)), gate::speaker(ca.backend));
    if (*verify_quantize) return finish(gate::verify_quantize(vq));
    if (*verify_collective) return finish(gate::verify_collective(vc), vc.backend != "mpi" || qtransit::collectives::mpi::rank() == 0);
    return kExitUsage;
}
}  // namespace
