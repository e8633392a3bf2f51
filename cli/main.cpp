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

// What the command line fills: one request per command (gate/commands.hpp).
struct Requests {
    bool info_json = false;
    qtransit::gate::FormatsRequest formats;
    std::string show_target;
    qtransit::gate::FormatsValidateRequest validate;
    qtransit::gate::QuantizeRequest quantize;
    qtransit::gate::BenchRequest bench;
    qtransit::gate::SurveyRequest survey;
    qtransit::gate::SimulateRequest simulate;
    qtransit::gate::CheckRequest check;
    qtransit::gate::VerifyQuantizeRequest verify_quantize;
    qtransit::gate::VerifyCollectiveRequest verify_collective;
    bool paths_json = false;
    std::string paths_show;
    qtransit::gate::PathsValidateRequest paths_validate;
};
// Its subcommands, to see which one ran.
struct Commands {
    CLI::App *info = nullptr, *formats = nullptr, *formats_show = nullptr, *formats_validate = nullptr, *quantize = nullptr,
             *bench = nullptr, *survey = nullptr, *simulate = nullptr, *check = nullptr, *verify = nullptr, *verify_quantize = nullptr,
             *verify_collective = nullptr, *paths = nullptr, *paths_show = nullptr, *paths_validate = nullptr;
};

const std::string kBackendHelp =
    "Where the values are computed and the messages travel: cpu (in process), device (every rank on one GPU), "
    "nccl (one rank per GPU: one process for every visible GPU, or under mpirun/srun one process per rank and "
    "GPU), mpi (one process per rank, under mpirun)";

// `info`'s options, into its request.
void add_info(CLI::App& app, Requests& r, Commands& c) {
    c.info = app.add_subcommand("info", "Version, build features (CUDA archs, NCCL), GPUs visible now");
    c.info->add_flag("--json", r.info_json, "Print one JSON object");
}

// `formats`, `formats show` and `formats validate`: their options, into their requests.
void add_formats(CLI::App& app, Requests& r, Commands& c) {
    c.formats = app.add_subcommand("formats", "List the formats: bits per element, metadata and wire bytes");
    c.formats->add_option("--block", r.formats.block, "Block size for the wire-byte column")->check(fits_int64)->capture_default_str();
    c.formats->add_flag("--json", r.formats.json, "Print JSON");
    c.formats_show = c.formats->add_subcommand(
        "show", "Print the TOML declaration of a format (built-in, or a .toml file); it parses back to the same format");
    c.formats_show->add_option("format", r.show_target, "Format name or FILE.toml")->required();
    c.formats_validate = c.formats->add_subcommand(
        "validate", "Check a declaration (FILE.toml), then every generic property and every path on it next to built-in "
                    "formats; writes the gate's reports. Exit 0 all promised properties and bounds hold, 1 one fails, 2 bad file");
    c.formats_validate->add_option("file", r.validate.file, "The declaration, FILE.toml (with --codec: may be left out)");
    c.formats_validate->add_option("--codec", r.validate.codec, "A codec plugin (.so, docs/PLUGIN.md) of the format: every property and path runs it");
    c.formats_validate->add_option("--report-dir", r.validate.report_dir, "Where the reports go")->capture_default_str();
    c.formats_validate->add_option("--seed", r.validate.seed, "Inputs' seed (and stochastic rounding's keys)")->check(seed_value)->capture_default_str();
    c.formats_validate->add_flag("--quick", r.validate.quick, "Fewer blocks, ranks and elements (a few seconds)");
}

// `paths`, `paths show` and `paths validate` (docs/PATHS.md).
void add_paths(CLI::App& app, Requests& r, Commands& c) {
    c.paths = app.add_subcommand("paths", "List the paths as declarations: collective, exchange, wire, requantize, add/stored types, division");
    c.paths->add_flag("--json", r.paths_json, "Print JSON");
    c.paths_show = c.paths->add_subcommand("show", "Print the TOML declaration of a path (built-in), or every declaration of a .toml file");
    c.paths_show->add_option("path", r.paths_show, "Path name or FILE.toml")->required();
    c.paths_validate = c.paths->add_subcommand(
        "validate", "Read a file of path declarations ([[path]] tables), resolve each to the schedule it is, and run each at N = 4 and 8 "
                    "with every output checked against its bounds. Exit 0 every bound holds, 1 one fails, 2 bad file");
    c.paths_validate->add_option("file", r.paths_validate.file, "The declarations, FILE.toml")->required();
    c.paths_validate->add_option("--seed", r.paths_validate.seed, "Inputs' seed")->check(seed_value)->capture_default_str();
}

// `quantize`'s options, into its request.
void add_quantize(CLI::App& app, Requests& r, Commands& c) {
    c.quantize = app.add_subcommand(
        "quantize", "Quantize a .npy tensor with the production kernel; check the bound exactly and the kernel "
                    "against the reference bit for bit");
    c.quantize->add_option("--format", r.quantize.format, "Format name (see `qtransit formats`) or a declaration FILE.toml (with --codec: may be left out)");
    c.quantize->add_option("--codec", r.quantize.codec, "A codec plugin (.so, docs/PLUGIN.md) run in place of qtransit's kernel; its format is the format");
    c.quantize->add_option("--conformance", r.quantize.conformance, "With --codec: exact (every bit) or bounded (every element within the format's bound)")
        ->capture_default_str();
    c.quantize->add_option("--shard", r.quantize.shard, "Blocks restart every SHARD elements (0: the whole tensor; must divide it)")
        ->check(non_negative)->capture_default_str();
    c.quantize->add_option("--rounding", r.quantize.rounding, "nearest (the format's own) or stochastic (its -sr twin)")
        ->capture_default_str();
    c.quantize->add_option("--seed", r.quantize.seed, "Stochastic rounding's key (replays exactly)")->check(seed_value)->capture_default_str();
    c.quantize->add_option("--block", r.quantize.block,
                           "Elements per quantization block (last block may be short); 0: the format's own (nvfp4's 16, a tile's area), else 32")
        ->capture_default_str();
    c.quantize->add_option("--shape", r.quantize.shape,
                           "The tensor's shape, ROWS,COLS,... (default: the .npy's): a tiled format (nvfp4-2d, fp8-e4m3-128x128) "
                           "quantizes it as [product of the others, last] in its tiles")
        ->delimiter(',');
    c.quantize->add_option("--in", r.quantize.in, "Input .npy (binary32 or binary16, any shape, C order)")->required();
    c.quantize->add_option("--nonfinite", r.quantize.nonfinite, "NaN/inf policy: error (refuse) or propagate (poison block)")
        ->capture_default_str();
    c.quantize->add_flag("--json", r.quantize.json, "Print one JSON object with scales, codes, decoded values and the bound");
    c.quantize->add_option("--out", r.quantize.out_dir,
                         "Directory to write decoded.npy, codes.bin (packed wire codes), scales.npy, offsets.npy");
    c.quantize->add_flag("--no-hunt", r.quantize.no_hunt,
                       "With --codec: check the tensor only, not also the inputs generated at the format's boundaries "
                       "(near-ties, scale boundaries, lengths, block sizes, canaries; a fraction of a second)");
}

// `bench`'s options, into its request.
void add_bench(CLI::App& app, Requests& r, Commands& c) {
    c.bench = app.add_subcommand(
        "bench", "Encode/decode throughput of the CPU kernels as a ratio to memcpy measured in the same run");
    c.bench->add_option("--mib", r.bench.mib, "Input size in MiB of binary32")->capture_default_str()->check(CLI::Range(1, 4096));
    c.bench->add_option("--repeats", r.bench.repeats, "Timed repetitions (the median is reported)")
        ->capture_default_str()->check(CLI::Range(1, 1000));
    c.bench->add_option("--threads", r.bench.threads, "Threads for the multi-thread rows (0: all)")->check(thread_count)->capture_default_str();
    c.bench->add_option("--block", r.bench.block, "Block size (0: each format's own fixed block, nvfp4's 16 or a tile's area, else 32)")
        ->check(fits_int64)
        ->capture_default_str();
    c.bench->add_option("--format", r.bench.formats, "Formats, comma-separated (names or .toml declarations)")
        ->delimiter(',')
        ->capture_default_str();
    c.bench->add_flag("--json", r.bench.json, "Print JSON");
}

// `survey`'s options, into its request.
void add_survey(CLI::App& app, Requests& r, Commands& c) {
    c.survey = app.add_subcommand(
        "survey", "Quantize every format over every input distribution; verify kernels against the reference bit "
                  "for bit and every element's error bound in exact arithmetic; write a report");
    c.survey->add_option("--format", r.survey.formats, "Formats or declaration FILE.toml (default: every built-in)")->delimiter(',');
    c.survey->add_option("--dist", r.survey.distributions, "Distributions (default: all)")->delimiter(',');
    c.survey->add_option("--elements", r.survey.elements, "Elements per case")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
    c.survey->add_option("--block", r.survey.block, "Block size (default: 32, and a fixed-block format its own: nvfp4 16, a tile its area)")
        ->check(fits_int64);
    c.survey->add_option("--seed", r.survey.seed, "Generator seed")->check(seed_value)->capture_default_str();
    c.survey->add_option("--report-dir", r.survey.report_dir, "Where survey.json and survey.md go")->capture_default_str();
    c.survey->add_flag("--json", r.survey.json, "Print the JSON report on stdout instead of the table");
}

// `simulate`'s options, into its request.
void add_simulate(CLI::App& app, Requests& r, Commands& c) {
    c.simulate = app.add_subcommand(
        "simulate", "Run collective paths on simulated ranks; check every output element's error against its "
                    "a-posteriori and a-priori bounds exactly; fit the error's growth with N");
    c.simulate->add_option("--path", r.simulate.paths, "Paths, comma-separated, or all (every one but the nccl-fp8- paths, "
                           "whose inputs must fit FP8), a declared path (`qtransit paths`: the -avg ones) or a FILE.toml of [[path]] "
                           "declarations (docs/PATHS.md; what one fixes becomes the run's --accum, --divide, --format): " + qtransit::known_path_names())
        ->required()->delimiter(',');
    c.simulate->add_option("--ranks", r.simulate.ranks, "N, comma-separated for a sweep (e.g. 4,8,16)")->delimiter(',')->check(fits_int64);
    c.simulate->add_option("--ranks-per-node", r.simulate.ranks_per_node, "G (default: 8 when it divides N, else N)")->check(non_negative);
    c.simulate->add_option("--elements", r.simulate.elements, "M, elements per rank (M % N == 0)")->check(fits_int64);
    c.simulate->add_option("--format", r.simulate.format, "Format name (see `qtransit formats`) or a declaration FILE.toml (with --codec, or with "
                                                "only the unquantized bf16-/fp16-/nccl-fp8- paths: may be left out)");
    c.simulate->add_option("--codec", r.simulate.codec, "A codec plugin (.so, docs/PLUGIN.md) running every quantization and decode of the paths");
    c.simulate->add_option("--rounding", r.simulate.rounding, "nearest (the format's own) or stochastic (its -sr twin, keyed by --seed)")
        ->capture_default_str();
    c.simulate->add_option("--block", r.simulate.block,
                           "Quantization block size (default: the format's fixed block, as flashinfer-fp8's 256, else 32)")
        ->check(fits_int64);
    c.simulate->add_option("--dist", r.simulate.dist, "Input distribution")->capture_default_str();
    c.simulate->add_option("--seed", r.simulate.seed, "Generator seed, and stochastic rounding's key")->check(seed_value)->capture_default_str();
    c.simulate->add_option("--accum", r.simulate.accum, "Accumulation: every add rounded to fp32, fp16 or bf16 (D11, D24); the bf16-/fp16- paths "
                                              "sum in their own type (D26)")->capture_default_str();
    c.simulate->add_option("--divide", r.simulate.divide, "Where a mean's 1/N goes on the reduce paths: none (the sum), pre (every input "
                                                "divided by N in the path's element type, as DeepSpeed does) or post (the result "
                                                "divided); the target is then the exact mean (D27)")->capture_default_str();
    c.simulate->add_option("--rotation", r.simulate.rotation, "A rotated format's sums (int4-rht, ...): each-hop (every hop decodes and "
                                                    "rotates back) or end-to-end (inputs rotated once, sums in the rotated "
                                                    "domain, one inverse at the destination; ring-rs, a2a-rs, a2a-hier-rs, "
                                                    "tree-rs) (D28)")->capture_default_str();
    c.simulate->add_option("--in", r.simulate.in,
                         "Inputs from a file of shape [N, M], one row per rank (.npy float32/float16/bfloat16, or .safetensors), "
                         "or one [M] file per rank named with {rank} (in.{rank}.npy; under --backend mpi each process reads its own)");
    c.simulate->add_option("--dump", r.simulate.dump, "Write the result (one path, one N) as .npy: [N, S] or [N, M]");
    c.simulate->add_option("--threads", r.simulate.threads, "Worker threads (0: all)")->check(thread_count)->capture_default_str();
    c.simulate->add_option("--backend", r.simulate.backend, kBackendHelp)->capture_default_str();
    c.simulate->add_flag("--json", r.simulate.json, "Print {\"runs\": [...], \"fits\": [...]}");
}

// `check`'s options, into its request.
void add_check(CLI::App& app, Requests& r, Commands& c) {
    c.check = app.add_subcommand(
        "check", "The numerics gate: every format, path, N and distribution of the gate checked exactly; named "
                 "verdicts; reports (report.json, report.md, junit.xml, report.html). Exit 0 all pass, 1 one failed");
    c.check->add_option("--config", r.check.config, "Gate config (TOML; default: the embedded default gate)");
    c.check->add_option("--report-dir", r.check.report_dir, "Where the reports go")->capture_default_str();
    c.check->add_option("--baseline", r.check.baseline, "A previous report.json: fail on a metric worse than it by more than the margin");
    c.check->add_flag("--update-baseline", r.check.update_baseline, "Write this run's report.json to --baseline");
    c.check->add_option("--junit", r.check.junit, "Also write the JUnit XML here");
    c.check->add_option("--codec", r.check.codec, "A codec plugin (.so, docs/PLUGIN.md) run in place of qtransit's kernels, on its format only");
    c.check->add_flag("--quick", r.check.quick,
                    "The quick tier: the same formats, paths, rules and budgets at the config's two smallest N, M = their lcm "
                    "x block, its first two distributions (the default gate: N = 8, 64, M = 2048, normal and heavy; seconds)");
    c.check->add_option("--conformance", r.check.conformance, "exact (every bit, the default) or bounded (every element within the format's bound)");
    c.check->add_option("--backend", r.check.backend,
                      kBackendHelp + ". Under mpi (and nccl under mpirun) the gate's N must equal the number of "
                                     "processes; rank 0 writes the reports")
        ->capture_default_str();
}

// `verify quantize` and `verify collective`: their options, into their requests.
void add_verify(CLI::App& app, Requests& r, Commands& c) {
    c.verify = app.add_subcommand(
        "verify", "Judge a run computed elsewhere (a framework's quantizer or collective) from its dumps, in exact arithmetic");
    c.verify->require_subcommand(1);
    c.verify_quantize = c.verify->add_subcommand(
        "quantize", "One quantization done elsewhere: its decoded values (and codes, scales, offsets when given) against the "
                    "reference bit for bit, every element's error against the format's bound. Exit 0 the conformance holds, 1 not, 2 bad input");
    c.verify_quantize->add_option("--format", r.verify_quantize.format, "Format name (see `qtransit formats`) or a declaration FILE.toml")->required();
    c.verify_quantize->add_option("--in", r.verify_quantize.in, "The input x: .npy (float32, float16, bfloat16) or .safetensors")->required();
    c.verify_quantize->add_option("--decoded", r.verify_quantize.decoded, "What the run decoded, the input's shape")->required();
    c.verify_quantize->add_option("--codes", r.verify_quantize.codes, "Its codes: packed wire bytes (.bin, `quantize --out`'s codes.bin) or one integer per element (.npy)");
    c.verify_quantize->add_option("--scales", r.verify_quantize.scales, "Its per-block scales (.npy)");
    c.verify_quantize->add_option("--offsets", r.verify_quantize.offsets, "Its per-block offsets (.npy; asym formats)");
    c.verify_quantize->add_option("--block", r.verify_quantize.block, "Elements per quantization block")->check(fits_int64)->capture_default_str();
    c.verify_quantize->add_option("--shard", r.verify_quantize.shard, "Blocks restart every SHARD elements (0: the whole tensor)")->check(non_negative)->capture_default_str();
    c.verify_quantize->add_option("--conformance", r.verify_quantize.conformance, "exact (every bit) or bounded (every element within the format's bound)")
        ->capture_default_str();
    c.verify_quantize->add_option("--dtype", r.verify_quantize.dtype, "What a raw uint16 array holds: fp16 or bf16 (typed files say it themselves)");
    c.verify_quantize->add_option("--tensor", r.verify_quantize.tensor, "The input's tensor name in a .safetensors file");
    c.verify_quantize->add_option("--decoded-tensor", r.verify_quantize.decoded_tensor,
                                "The decoded values' tensor name in a .safetensors file (default: its only tensor)");
    c.verify_quantize->add_option("--report-dir", r.verify_quantize.report_dir, "Where the reports go (\"\": none)")->capture_default_str();
    c.verify_quantize->add_flag("--json", r.verify_quantize.json, "Print one JSON object");

    c.verify_collective = c.verify->add_subcommand(
        "collective", "A collective run elsewhere: every output's exact error, judged in tiers exact (qtransit's schedule bit for "
                      "bit), same-events (the same decoded contributions, any order of adds), bounded (the path's a-priori bound). "
                      "Exit 0 the tier holds, 1 a violation, 2 bad input");
    c.verify_collective->add_option("--path", r.verify_collective.path, "The path the run took: " + qtransit::known_path_names())->required();
    c.verify_collective->add_option("--ranks", r.verify_collective.ranks, "N, the ranks of the run")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    c.verify_collective->add_option("--ranks-per-node", r.verify_collective.ranks_per_node, "G (default: 8 when it divides N, else N)")->check(non_negative);
    c.verify_collective->add_option("--format", r.verify_collective.format,
                                    "The format the run quantized with (may be left out when --path is a declaration with its own wire)");
    c.verify_collective->add_option("--inputs", r.verify_collective.inputs,
                                  "What each rank contributed: one [N, M] file, or one [M] file per rank with {rank} in the name "
                                  "(in.{rank}.npy); .npy or .safetensors")
        ->required();
    c.verify_collective->add_option("--outputs", r.verify_collective.outputs,
                                  "What each rank held after: one file, [N, S] for a reduce-scatter (row c: chunk c on rank c) or [N, M], "
                                  "or one file per rank with {rank}")
        ->required();
    c.verify_collective->add_option("--block", r.verify_collective.block,
                                    "Quantization block size (default: the format's fixed block, else 32)")
        ->check(fits_int64);
    c.verify_collective->add_option("--accum", r.verify_collective.accum, "The run's accumulation: fp32, fp16 or bf16")->capture_default_str();
    c.verify_collective->add_option("--target", r.verify_collective.target, "sum, or mean (the sum times 1/N; one division allowed at any stage)")->capture_default_str();
    c.verify_collective->add_option("--ring-order", r.verify_collective.ring_order, "A ring path's order, as data flows (each rank sends to the next); default: the worst")
        ->delimiter(',');
    c.verify_collective->add_option("--conformance", r.verify_collective.conformance,
                                  "exact, same-events or bounded (default: same-events where the path allows it, else bounded)");
    c.verify_collective->add_option("--dtype", r.verify_collective.dtype, "What raw uint16 arrays hold: fp16 or bf16");
    c.verify_collective->add_option("--tensor", r.verify_collective.tensor, "The tensor's name in .safetensors files");
    c.verify_collective->add_option("--output-tensor", r.verify_collective.output_tensor, "The outputs' tensor name, when it differs from --tensor");
    c.verify_collective->add_option("--report-dir", r.verify_collective.report_dir, "Where the reports go (\"\": none)")->capture_default_str();
    c.verify_collective->add_flag("--json", r.verify_collective.json, "Print one JSON object");
    c.verify_collective->add_option("--backend", r.verify_collective.backend,
                                  "cpu (one process), or mpi (under mpirun: each process reads and checks its own chunks, rank 0 reports)")
        ->capture_default_str();
}

int dispatch(int argc, char** argv) {
    using namespace qtransit::cli;
    CLI::App app{"qtransit: numerics verification for quantized collective communication.\n"
                 "Exit codes: 0 success, 1 a check failed, 2 bad invocation or input."};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(QTRANSIT_VERSION));
    Requests r;
    Commands c;
    for (auto add : {add_info, add_formats, add_paths, add_quantize, add_bench, add_survey, add_simulate, add_check, add_verify}) add(app, r, c);

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
    if (*c.info) return finish(gate::info({r.info_json, allocator()}));
    if (*c.formats_show) return finish(gate::formats_show(r.show_target));
    if (*c.formats_validate) return finish(gate::formats_validate(r.validate, to_stderr(), progress_printer(tty)));
    if (*c.formats) return finish(gate::formats(r.formats));
    if (*c.paths_show) return finish(gate::paths_show(r.paths_show));
    if (*c.paths_validate) return finish(gate::paths_validate(r.paths_validate));
    if (*c.paths) return finish(gate::paths(r.paths_json));
    if (*c.quantize) return finish(gate::quantize(r.quantize));
    if (*c.bench) return finish(gate::bench(r.bench, to_stdout()));
    if (*c.survey) return finish(gate::survey(r.survey, to_stdout(), survey_progress(tty)));
    if (*c.simulate) return run_simulate(r.simulate);
    if (*c.check) return finish(gate::check(r.check, progress_printer(tty)), gate::speaker(r.check.backend));
    if (*c.verify_quantize) return finish(gate::verify_quantize(r.verify_quantize));
    if (*c.verify_collective) return finish(gate::verify_collective(r.verify_collective), r.verify_collective.backend != "mpi" || qtransit::collectives::mpi::rank() == 0);
    return kExitUsage;
}
}  // namespace
