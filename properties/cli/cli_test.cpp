// The `qtransit` command as a user meets it: exit codes (0 ok, 1 check failed, 2 user error), one
// clear line for every user error, and the JSON contract of `quantize --json`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "cli_fixture.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/npy.hpp"

namespace fs = std::filesystem;

namespace {

using qtransit::testing::Outcome;

class Cli : public qtransit::testing::CliTest {
protected:
    std::string npy(const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape = {}) {
        if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
        const std::string path = (dir_ / name).string();
        EXPECT_TRUE(qtransit::kernels::write_npy(path, v, shape).ok());
        return path;
    }
};

TEST_F(Cli, FormatsListsEveryFormat) {
    const Outcome r = run("formats --block 32");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"int2", "int8", "int4-asym", "ds-int4", "ds-int8"}) EXPECT_NE(r.out.find(f), std::string::npos) << f;
    const Outcome j = run("formats --json");
    const auto js = nlohmann::json::parse(j.out);
    EXPECT_EQ(js["formats"].size(), qtransit::all_builtin_formats().size());
    // int4, block 32: 16 code bytes + one binary32 scale.
    for (const auto& row : js["formats"])
        if (row["format"] == "int4") {
            EXPECT_EQ(row["wire_bytes_per_block"], 20);
        }
}

TEST_F(Cli, InfoSaysWhatWasBuilt) {
    const Outcome r = run("info --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.contains("cuda"));
    EXPECT_TRUE(j["gpus"].is_array());
    ASSERT_TRUE(j["formats"].is_array());
    EXPECT_EQ(j["formats"].size(), qtransit::all_builtin_formats().size());
    EXPECT_EQ(j["formats"][0], qtransit::all_builtin_formats()[0].name());
    if (j["gpus"].empty()) {
        EXPECT_FALSE(j["gpu_note"].get<std::string>().empty());
    }
}

TEST_F(Cli, UnknownFormatListsTheKnownOnes) {
    const Outcome r = run("quantize --format int9 --in " + npy("x.npy", {1, 2}));
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("unknown format 'int9'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ds-int8"), std::string::npos) << r.err;
}

TEST_F(Cli, BadInvocationsExitTwoWithOneLine) {
    const std::string x = npy("x.npy", {1, 2, 3});
    for (const std::string& args : {"quantize --format int8 --block -1 --in " + x, "quantize --format int8 --block -3 --in " + x,
                                    "quantize --format int8 --in " + (dir_ / "missing.npy").string(),
                                    "quantize --format int8 --in " + x + " --nonfinite maybe", "quantize --in " + x,
                                    std::string("nosuchcommand"), "quantize --format int8 --in " + x + " --block abc"}) {
        const Outcome r = run(args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
        EXPECT_EQ(r.out, "") << args;
    }
}

TEST_F(Cli, MalformedFileIsAClearError) {
    const fs::path bad = dir_ / "bad.npy";
    std::ofstream(bad) << "this is not a numpy file";
    const Outcome r = run("quantize --format int8 --in " + bad.string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;
}

TEST_F(Cli, NanUnderErrorPolicyNamesTheElement) {
    const std::string x = npy("x.npy", {1, 2, NAN, 4});
    const Outcome r = run("quantize --format int4 --block 2 --in " + x + " --out " + (dir_ / "out").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("element 2: value nan"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "nothing may be written for a refused input";
}

TEST_F(Cli, PropagatePoisonsTheBlock) {
    const std::string x = npy("x.npy", {1, 2, INFINITY, 4});
    const Outcome r = run("quantize --format int4 --block 2 --nonfinite propagate --json --in " + x);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["poisoned_blocks"], 1);
    EXPECT_TRUE(j["decoded"][2].is_null());
    EXPECT_TRUE(j["decoded"][3].is_null());
    EXPECT_TRUE(j["scales"][1].is_null());
    EXPECT_EQ(j["decoded"][1], 2.0);
}

TEST_F(Cli, QuantizeJsonContract) {
    const std::string x = npy("x.npy", {0.1f, -0.2f, 0.3f, 1.0f, 0.7f, -1.4f, 3.5f}, {7});
    const Outcome r = run("quantize --format int4-asym --block 4 --json --in " + x);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* k : {"format", "block", "elements", "scales", "offsets", "codes", "decoded", "max_abs_error",
                          "max_error_to_bound", "bound_holds", "wire_bytes"})
        EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["format"], "int4-asym");
    EXPECT_EQ(j["elements"], 7);
    EXPECT_EQ(j["scales"].size(), 2u);
    EXPECT_EQ(j["offsets"][0], -0.2);  // lo of block 0, printed in its shortest form
    EXPECT_EQ(j["codes"].size(), 7u);
    EXPECT_TRUE(j["bound_holds"].get<bool>());
    EXPECT_LE(j["max_error_to_bound"].get<double>(), 1.0);
    EXPECT_EQ(j["wire_bytes"], 2 + 8 + 2 + 8);  // 4 codes in 2 bytes, 3 in 2, and scale+lo per block
    // Every binary32 is printed in its shortest round-trip form: -0.2f, not -0.20000000298023224.
    EXPECT_NE(r.out.find("-0.2,"), std::string::npos);
    EXPECT_EQ(r.out.find("0.20000000298"), std::string::npos);
}

TEST_F(Cli, OutWritesDecodedTensorWithInputShape) {
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i));
    const std::string x = npy("x.npy", v, {2, 3, 4});
    const Outcome r = run("quantize --format ds-int8 --block 5 --in " + x + " --out " + (dir_ / "out").string());
    ASSERT_EQ(r.code, 0) << r.err;
    auto dec = qtransit::kernels::read_npy((dir_ / "out" / "decoded.npy").string());
    ASSERT_TRUE(dec.ok()) << dec.error().message;
    EXPECT_EQ(dec->shape, (std::vector<int64_t>{2, 3, 4}));
    auto sc = qtransit::kernels::read_npy((dir_ / "out" / "scales.npy").string());
    ASSERT_TRUE(sc.ok());
    EXPECT_EQ(sc->elements(), 5);
    EXPECT_EQ(fs::file_size(dir_ / "out" / "codes.bin"), 24u);
}

TEST_F(Cli, BenchPrintsRatios) {
    const Outcome r = run("bench --mib 1 --repeats 1 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 8u);
    for (const auto& row : j["rows"]) EXPECT_GT(row["ratio_to_memcpy"].get<double>(), 0.0);
}

TEST_F(Cli, BenchTakesDeclaredFormatsAndChecksTheirBlock) {
    const Outcome r = run("bench --mib 1 --repeats 1 --threads 1 --format mxfp4,nf4 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 4u);  // 2 formats x encode/decode, on one thread (no "all threads" pass of one)
    EXPECT_EQ(j["rows"][0]["format"], "mxfp4");
    EXPECT_EQ(j["rows"][3]["format"], "nf4");
    const Outcome bad = run("bench --mib 1 --repeats 1 --format mxfp4 --block 16");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("fixed blocks of 32"), std::string::npos) << bad.err;
    // No --block: each format at its own (nvfp4's 16, a 16 x 16 tile's 256), the others at 32.
    const Outcome own = run("bench --mib 1 --repeats 1 --threads 1 --format nvfp4,nvfp4-2d,int8 --json");
    ASSERT_EQ(own.code, 0) << own.err;
    const auto o = nlohmann::json::parse(own.out);
    ASSERT_EQ(o["rows"].size(), 6u);
    EXPECT_EQ(o["rows"][0]["block"], 16);
    EXPECT_EQ(o["rows"][2]["block"], 256);
    EXPECT_EQ(o["rows"][4]["block"], 32);
    EXPECT_EQ(run("bench --mib 1 --repeats 1 --format int8 --block -1").code, 2);
}

TEST_F(Cli, SurveyDefaultCoversEveryBuiltInAndNamesWhatAFixedBlockLeavesOut) {
    const Outcome r = run("survey --elements 512 --dist normal --block 16 --report-dir " + (dir_ / "all").string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(slurp(dir_ / "all" / "survey.json"));
    size_t fixed = 0;
    for (const auto& f : qtransit::all_builtin_formats()) fixed += f.fixed_block() != 0 && f.fixed_block() != 16;  // nvfp4's is 16
    EXPECT_EQ(j["skipped_formats"].size(), fixed);
    EXPECT_EQ(j["cases"].size(), qtransit::all_builtin_formats().size() - fixed);
    EXPECT_EQ(j["failures"], 0);
    EXPECT_NE(r.out.find("not run at block 16"), std::string::npos) << r.out;
}

// Without --block every built-in runs, a fixed-block format at its own block and a tiled one as a
// 2-D tensor (they were left out of the default survey, and a named tile format was "refused" as a
// 1-D tensor yet counted as passing).
TEST_F(Cli, SurveyRunsEachFixedBlockFormatAtItsOwnBlock) {
    const Outcome r = run("survey --elements 512 --dist normal --report-dir " + (dir_ / "own").string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(slurp(dir_ / "own" / "survey.json"));
    EXPECT_EQ(j["cases"].size(), qtransit::all_builtin_formats().size());
    EXPECT_TRUE(j["skipped_formats"].empty());
    EXPECT_EQ(j["block"], 32);
    for (const auto& c : j["cases"]) {
        EXPECT_FALSE(c.contains("refused")) << c.dump();
        EXPECT_EQ(c["pass"], true) << c.dump();
        const auto f = qtransit::parse_format(c["format"].get<std::string>());
        ASSERT_TRUE(f.ok());
        EXPECT_EQ(c["block"], f->fixed_block() ? f->fixed_block() : 32) << c.dump();
    }
    const std::string md = slurp(dir_ / "own" / "survey.md");
    EXPECT_NE(md.find("nvfp4 16"), std::string::npos) << md.substr(0, 400);
    const Outcome t = run("survey --elements 512 --format fp8-e4m3-128x128 --json --report-dir " + (dir_ / "tile").string());
    ASSERT_EQ(t.code, 0) << t.err;
    const auto tj = nlohmann::json::parse(t.out);  // (a range-for over a temporary's member reads freed memory)
    ASSERT_FALSE(tj["cases"].empty());
    for (const auto& c : tj["cases"]) EXPECT_FALSE(c.contains("refused")) << c.dump();
}

TEST_F(Cli, SurveyPassesAndWritesItsReport) {
    const Outcome r = run("survey --elements 2000 --format int4,int8-asym,ds-int4 --dist normal,outliers --report-dir " +
                      (dir_ / "rep").string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(fs::exists(dir_ / "rep" / "survey.json"));
    const auto j = nlohmann::json::parse(slurp(dir_ / "rep" / "survey.json"));
    EXPECT_EQ(j["cases"].size(), 6u);
    EXPECT_EQ(j["failures"], 0);
}

TEST_F(Cli, SimulateJsonContract) {
    const Outcome r = run("simulate --path ring-rs,a2a-rs --ranks 4,8 --elements 512 --format int4 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["runs"].size(), 4u);
    for (const auto& run : j["runs"]) {
        for (const char* k : {"path", "ranks", "ranks_per_node", "elements", "format", "block", "dist", "seed", "k_min",
                              "k_max", "max_abs_error", "rms_error", "rel_rms_error", "max_a_posteriori", "max_a_priori",
                              "bound_holds", "bytes_per_rank", "cross_node_bytes_per_rank", "fp16_ring_rs_bytes_per_rank"})
            EXPECT_TRUE(run.contains(k)) << k;
        EXPECT_TRUE(run["bound_holds"].get<bool>());
        EXPECT_LE(run["max_abs_error"].get<double>(), run["max_a_posteriori"].get<double>());
        EXPECT_LE(run["max_a_posteriori"].get<double>(), run["max_a_priori"].get<double>());
    }
    // ring-rs at N = 8: k from 0 (the owner's own contribution) to N - 1.
    for (const auto& run : j["runs"])
        if (run["path"] == "ring-rs" && run["ranks"] == 8) {
            EXPECT_EQ(run["k_min"], 0);
            EXPECT_EQ(run["k_max"], 7);
            // (N-1) chunks of S = 64 int4 values: 32 code bytes + a 4-byte scale per 32-element block
            EXPECT_EQ(run["bytes_per_rank"], 7 * 2 * (16 + 4));
            EXPECT_EQ(run["fp16_ring_rs_bytes_per_rank"], 7 * 64 * 2);
        }
    ASSERT_EQ(j["fits"].size(), 2u);
    EXPECT_EQ(j["fits"][0]["points"].size(), 2u);
}

TEST_F(Cli, SimulateRejectsImpossibleShapesWithOneLine) {
    for (const std::string& args : {std::string("simulate --path ring-rs --ranks 3 --elements 10 --format int8"),
                                    std::string("simulate --path tree-rs --ranks 6 --elements 12 --format int8"),
                                    std::string("simulate --path a2a-hier-rs --ranks 8 --ranks-per-node 3 --elements 16 --format int8"),
                                    std::string("simulate --path nope --ranks 4 --elements 16 --format int8"),
                                    std::string("simulate --path ring-rs --ranks 4 --elements 16 --format int8 --accum fp64"),
                                    std::string("simulate --path ring-rs,a2a-rs --ranks 4 --elements 16 --format int8 --dump x.npy")}) {
        const Outcome r = run(args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    }
    const Outcome r = run("simulate --path ring-rs --ranks 3 --elements 10 --format int8");
    EXPECT_NE(r.err.find("not divisible by N = 3"), std::string::npos) << r.err;
}

// --format A,B (issue 17): one format per stage. int8 inside the node and int4 across puts int4's
// bytes on the inter-node links and spends int8's inside, and its error lies between the two; a
// single-format path given a list, a list of the wrong length and a backend that carries one
// format are refused with one line each.
TEST_F(Cli, SimulatePerStageFormats) {
    auto one = [&](const std::string& f) {
        const Outcome r = run("simulate --path a2a-hier-rs --ranks 16 --ranks-per-node 4 --elements 2048 --format " + f + " --json");
        EXPECT_EQ(r.code, 0) << f << ": " << r.err;
        return nlohmann::json::parse(r.out)["runs"][0];
    };
    const auto mixed = one("int8,int4"), i8 = one("int8"), i4 = one("int4"), i4i4 = one("int4,int4");
    EXPECT_EQ(mixed["format"], "int8,int4");
    EXPECT_TRUE(mixed["bound_holds"].get<bool>());
    EXPECT_EQ(mixed["cross_node_bytes_per_rank"], i4["cross_node_bytes_per_rank"]);
    EXPECT_GT(mixed["bytes_per_rank"].get<int64_t>(), i4["bytes_per_rank"].get<int64_t>());
    EXPECT_LT(mixed["bytes_per_rank"].get<int64_t>(), i8["bytes_per_rank"].get<int64_t>());
    EXPECT_LT(mixed["rel_rms_error"].get<double>(), i4["rel_rms_error"].get<double>());
    EXPECT_GT(mixed["rel_rms_error"].get<double>(), i8["rel_rms_error"].get<double>());
    EXPECT_EQ(i4i4["rel_rms_error"], i4["rel_rms_error"]);  // one format in every stage is that format
    EXPECT_EQ(i4i4["bytes_per_rank"], i4["bytes_per_rank"]);
    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
             {"simulate --path ring-rs --ranks 4 --elements 16 --format int8,int4", "qtransit: ring-rs quantizes with one format; got 2"},
             {"simulate --path a2a-hier-rs --ranks 4 --elements 16 --format int8,int4,int4",
              "qtransit: a2a-hier-rs takes 2 formats, one per stage (intra-node, then inter-node); got 3"},
             {"simulate --path two-shot-ar --ranks 4 --elements 16 --format int8,nope", "unknown format 'nope'"},
             {"simulate --path two-shot-ar --ranks 4 --elements 16 --format int8,", "an empty format name"},
             {"simulate --path hpz-ag-requant --ranks 4 --elements 128 --format int8,mxfp4 --block 16", "mxfp4 has fixed blocks of 32"}}) {
        const Outcome r = run(args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
        EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
    }
}

TEST_F(Cli, SimulateFromNpyAndDump) {
    std::vector<float> v(4 * 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
    const std::string x = npy("ranks.npy", v, {4, 8});
    const std::string out = (dir_ / "rs.npy").string();
    const Outcome r = run("simulate --path fp32-ring-rs --in " + x + " --format int8 --dump " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    auto d = qtransit::kernels::read_npy(out);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->shape, (std::vector<int64_t>{4, 2}));
    // Small integers: the fp32 ring is exact, row r is chunk r of the sum over ranks.
    for (int64_t r2 = 0; r2 < 4; ++r2)
        for (int64_t i = 0; i < 2; ++i) {
            float t = 0;
            for (int64_t j = 0; j < 4; ++j) t += v[static_cast<size_t>(j * 8 + r2 * 2 + i)];
            EXPECT_EQ(d->data[static_cast<size_t>(r2 * 2 + i)], t);
        }
    const std::string ag = (dir_ / "ag.npy").string();
    ASSERT_EQ(run("simulate --path hpz-ag-requant --in " + x + " --ranks-per-node 2 --format int8 --dump " + ag).code, 0);
    auto g = qtransit::kernels::read_npy(ag);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->shape, (std::vector<int64_t>{4, 8}));
    const Outcome bad = run("simulate --path ring-rs --ranks 5 --in " + x + " --format int8");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("has 4 rows"), std::string::npos) << bad.err;
}

// The 16-bit paths (D26) and --divide (D27) from the command line: no --format needed, the row says
// its type, k counts roundings, and every mistake is one line and exit 2 before any work.
// Rotated formats (FORMATS.md section 9) and where their sums are taken (D28): both ways hold their
// bounds and the run says which ran; every mistake is one line and exit 2 before any work.
TEST_F(Cli, RotatedFormatsAndWhereTheySum) {
    // SDP4Bit's arrangement: int8 inside the node, rotated int4 between nodes; each hop rotates back.
    const std::string sdp = "simulate --path a2a-hier-rs --format int8,int4-rht --ranks 8 --ranks-per-node 4 --elements 512 "
                            "--dist heavy --json";
    const Outcome each = run(sdp);
    ASSERT_EQ(each.code, 0) << each.err;
    EXPECT_EQ(nlohmann::json::parse(each.out)["runs"][0]["bound_holds"], true);
    refused(sdp + " --rotation end-to-end", "needs a rotated format in every stage");  // int8 does not rotate
    const Outcome e = run("simulate --path a2a-hier-rs,ring-rs --format int4-rht --ranks 8 --ranks-per-node 4 --elements 512 "
                          "--dist heavy --rotation end-to-end --json");
    ASSERT_EQ(e.code, 0) << e.err;
    const auto j = nlohmann::json::parse(e.out);
    for (const auto& run : j["runs"]) {
        EXPECT_EQ(run["rotation"], "end-to-end");
        EXPECT_EQ(run["bound_holds"], true);
    }
    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
             {"simulate --path a2a-rs --format int4-rht --ranks 4 --elements 96", "a block of 24 elements"},
             {"simulate --path a2a-rs --format int4-rht --block 24 --ranks 4 --elements 96", "power of two"},
             {"simulate --path two-shot-ar --format int4-rht --rotation end-to-end --ranks 4 --elements 128", "not on two-shot-ar"},
             {"simulate --path a2a-rs --format int4 --rotation end-to-end --ranks 4 --elements 128", "needs a rotated format"},
             {"simulate --path a2a-rs --format int4-rht --rotation sometimes --ranks 4 --elements 128", "known: each-hop, end-to-end"},
             {"simulate --path a2a-rs --format int4-rht --backend device --ranks 4 --elements 128", "run with --backend cpu"},
         })
        refused(args, says);
}

TEST_F(Cli, SixteenBitPathsAndDivide) {
    const Outcome r = run("simulate --path bf16-ring-rs,fp16-tree-ar --ranks 6 --ranks-per-node 3 --elements 96 --block 16 --divide pre --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["runs"].size(), 2u);
    EXPECT_EQ(j["runs"][0]["format"], "bf16");
    EXPECT_EQ(j["runs"][0]["accum"], "bf16");
    EXPECT_EQ(j["runs"][0]["divide"], "pre");
    EXPECT_EQ(j["runs"][0]["k_max"], 5);  // N - 1 rounded adds
    EXPECT_EQ(j["runs"][1]["format"], "fp16");
    EXPECT_EQ(j["runs"][0]["bound_holds"], true);
    EXPECT_EQ(j["runs"][1]["bound_holds"], true);
    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
             {"simulate --path bf16-ring-rs --accum fp16 --ranks 4 --elements 64", "--accum fp16 contradicts --path bf16-ring-rs"},
             {"simulate --path a2a-rs --format int8 --divide half --ranks 4 --elements 64", "known: none, pre, post"},
             {"simulate --path ring-ag --format int8 --divide post --ranks 4 --elements 64", "ring-ag gathers shards"},
             {"simulate --path bf16-ring-ar --ranks 4 --elements 64 --backend device", "bf16-ring-ar runs with --backend cpu or mpi"},
         })
        refused(args, says);
    // An input fp16 cannot hold: refused, naming it.
    std::vector<float> v(4 * 8, 1.0f);
    v[2 * 8 + 3] = 1e6f;
    const std::string x = npy("big.npy", v, {4, 8});
    const Outcome o = run("simulate --path fp16-ring-rs --in " + x);
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("rank 2 element 3"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("overflows fp16"), std::string::npos) << o.err;
}

TEST_F(Cli, SimulateBackendChoice) {
    const std::string base = "simulate --path a2a-rs --ranks 4 --elements 64 --block 16 --format int8";
    const Outcome bad = run(base + " --backend tpu");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("unknown backend 'tpu'"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("cpu, device, nccl"), std::string::npos) << bad.err;
    EXPECT_EQ(run(base + " --backend cpu").code, 0);
    const Outcome dev = run(base + " --backend device");
    if (qtransit::kernels::gpu::query_devices().devices.empty()) {
        EXPECT_EQ(dev.code, 2) << dev.err;
        EXPECT_EQ(dev.err.rfind("qtransit: no GPU: ", 0), 0u) << dev.err;
        const Outcome nccl = run(base + " --backend nccl");
        EXPECT_EQ(nccl.code, 2) << nccl.err;
        EXPECT_NE(nccl.err.find("no GPU: "), std::string::npos) << nccl.err;
    } else {
        EXPECT_EQ(dev.code, 0) << dev.err;  // the device backend runs the same paths and checks them
    }
}

}  // namespace

// NCCL's FP8 paths (issue 49, D41): a clamp at 448 is named in the text and counted in the JSON,
// the bound still holds (the clamp's excess is in it), and `all` leaves the paths out.
TEST_F(Cli, NcclFp8PathsNameTheirSaturations) {
    // N = 2, S = 2: chunk 0 sums X_1 + X_0 = 448 + 32 (past 464: clamps), 1 + 2; chunk 1 3 + 4, 5 + 6.
    const std::string in = npy("x.npy", {32, 1, 3, 5, 448, 2, 4, 6}, {2, 4});
    const Outcome t = run("simulate --path nccl-fp8-e4m3-ring-rs --ranks 2 --elements 4 --block 2 --in " + in);
    ASSERT_EQ(t.code, 0) << t.err;
    EXPECT_NE(t.out.find("nccl-fp8-e4m3-ring-rs N=2: 1 of 4 output values saturated (at most 1 clamps on one value's way)"),
              std::string::npos) << t.out;
    const Outcome j = run("simulate --path nccl-fp8-e4m3-ring-rs,nccl-fp8-e4m3-ring-ar --ranks 2 --elements 4 --block 2 --in " + in + " --json");
    ASSERT_EQ(j.code, 0) << j.err;
    const auto js = nlohmann::json::parse(j.out);
    ASSERT_EQ(js["runs"].size(), 2u);
    EXPECT_EQ(js["runs"][0]["saturated_outputs"], 1);
    EXPECT_EQ(js["runs"][1]["saturated_outputs"], 2);  // both ranks hold the clamped value
    EXPECT_EQ(js["runs"][0]["max_saturations"], 1);
    EXPECT_TRUE(js["runs"][0]["bound_holds"].get<bool>());
    EXPECT_EQ(js["runs"][0]["max_abs_error"], 32.0);
    EXPECT_EQ(js["runs"][0]["max_a_priori"], nullptr);  // unbounded where a clamp can happen
    // The other paths carry no such field.
    const Outcome b = run("simulate --path bf16-ring-rs --ranks 2 --elements 4 --block 2 --in " + in + " --json");
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_FALSE(nlohmann::json::parse(b.out)["runs"][0].contains("saturated_outputs"));
    // An input past FP8's range is refused, and so is a mean taken after the sum (ncclAvg divides first).
    refused("simulate --path nccl-fp8-e4m3-tree-ar --ranks 2 --elements 4 --block 2 --in " + npy("big.npy", {1, 2, 3, 4, 5, 6, 7, 500}, {2, 4}),
            "rank 1 element 3: value 500 overflows fp8-e4m3, the element type of nccl-fp8-e4m3-tree-ar");
    refused("simulate --path nccl-fp8-e5m2-ring-rs --ranks 2 --elements 4 --divide post", "--divide post is not what NCCL's FP8 ring and tree do");
    // ncclAvg: 3 ranks of 104 in e4m3 give 112 (the factor 0.34375 is 3.1% high), and the text says how it divided.
    const Outcome m = run("simulate --path nccl-fp8-e4m3-ring-ar --ranks 3 --elements 3 --block 1 --divide pre --in " +
                          npy("avg.npy", std::vector<float>(9, 104.0f), {3, 3}) + " --json");
    ASSERT_EQ(m.code, 0) << m.err;
    EXPECT_EQ(nlohmann::json::parse(m.out)["runs"][0]["max_abs_error"], 8.0);
    EXPECT_NE(run("simulate --path nccl-fp8-e4m3-ring-ar --ranks 3 --elements 3 --block 1 --divide pre --in " + (dir_ / "avg.npy").string())
                  .out.find("every input times 1/N rounded to FP8 before the reduce (ncclAvg)"),
              std::string::npos);
    // `all` is every path but these; named, they run.
    const Outcome a = run("simulate --path all --ranks 4 --elements 64 --format int8 --json");
    ASSERT_EQ(a.code, 0) << a.err;
    const auto all = nlohmann::json::parse(a.out);
    for (const auto& r : all["runs"])
        EXPECT_EQ(r["path"].get<std::string>().rfind("nccl-fp8-", 0), std::string::npos) << r["path"];
}

// Declared paths (docs/PATHS.md): `paths` lists every built-in as a declaration; a declaration-only
// built-in (ncclAvg) is the same run as its schedule with the option it fixes; a user's file of
// declarations is validated by running it, runs under its own name, and contradicting it is refused.
TEST_F(Cli, DeclaredPathsRunAsTheScheduleTheyResolveTo) {
    const Outcome l = run("paths --json");
    ASSERT_EQ(l.code, 0) << l.err;
    const auto ls = nlohmann::json::parse(l.out)["paths"];
    // ncclAvg's 6, NVLS's 2, DeepEP's dispatch 3 and combine, FlashInfer's, FSDP2's float8 all-gather
    // and TE's NVFP4 one, QuickReduce's 3
    EXPECT_EQ(ls.size(), qtransit::all_paths().size() + 6 + 2 + 3 + 2 + 2 + 3);
    for (const auto& p : ls)
        if (p["name"] == "nccl-fp8-e4m3-nvls-ar") {
            EXPECT_EQ(p["exchange"], "nvls");
            EXPECT_EQ(p["input"], "fp8-e4m3");
            EXPECT_EQ(p["output"], "fp8-e4m3");
            EXPECT_EQ(p["saturates"], true);
        }
    const Outcome t = run("paths");
    ASSERT_EQ(t.code, 0) << t.err;
    for (const char* n : {"ring-rs", "a2a-hier-rs", "hpz-ag-requant", "bf16-tree-ar", "nccl-fp8-e5m2-tree-ar-avg"})
        EXPECT_NE(t.out.find(n), std::string::npos) << n;
    // FlashInfer's FP8 all-reduce (D46): the owner's values quantized once, the others' twice, bf16
    // outputs, within the bounds; the row says what it is.
    // (--block left out: the wire's fixed 256)
    const Outcome fi = run("simulate --path flashinfer-fp8-2shot --ranks 4 --elements 4096 --json");
    ASSERT_EQ(fi.code, 0) << fi.err;
    const auto fj = nlohmann::json::parse(fi.out)["runs"][0];
    EXPECT_EQ(fj["path"], "flashinfer-fp8-2shot");
    EXPECT_EQ(fj["schedule"], "two-shot-ar-keep");
    EXPECT_EQ(fj["format"], "flashinfer-fp8");
    EXPECT_EQ(fj["output"], "bf16");
    EXPECT_EQ(fj["k_min"], 1);
    EXPECT_EQ(fj["k_max"], 2);
    EXPECT_EQ(fj["bound_holds"], true);
    EXPECT_EQ(fj["input"], "bf16");
    EXPECT_EQ(fj["block"], 256);
    refused("simulate --path flashinfer-fp8-2shot --block 128 --ranks 4 --elements 4096", "256");
    // DeepEP's combine (D47): bf16 inputs summed in binary32, one bf16 rounding: nothing quantized.
    const Outcome cb = run("simulate --path deepep-bf16-combine --ranks 8 --elements 4096 --json");
    ASSERT_EQ(cb.code, 0) << cb.err;
    const auto cj = nlohmann::json::parse(cb.out)["runs"][0];
    EXPECT_EQ(cj["schedule"], "fp32-ring-rs");
    EXPECT_EQ(cj["input"], "bf16");
    EXPECT_EQ(cj["output"], "bf16");
    EXPECT_EQ(cj["k_max"], 0);
    EXPECT_EQ(cj["bound_holds"], true);
    EXPECT_GT(cj["max_abs_error"], 0.0);  // the sum's rounding to bf16
    const Outcome sh = run("paths show nccl-fp8-e4m3-ring-ar-avg");
    ASSERT_EQ(sh.code, 0) << sh.err;
    EXPECT_NE(sh.out.find("divide = \"pre\""), std::string::npos) << sh.out;
    EXPECT_NE(sh.out.find("stored = \"fp8-e4m3\""), std::string::npos) << sh.out;

    // ncclAvg as a name: 3 ranks of 104 give 112, as --divide pre does; the row is named by the declaration.
    const std::string in = npy("avg.npy", std::vector<float>(9, 104.0f), {3, 3});
    const Outcome d = run("simulate --path nccl-fp8-e4m3-ring-ar-avg --ranks 3 --elements 3 --block 1 --in " + in + " --json");
    const Outcome o = run("simulate --path nccl-fp8-e4m3-ring-ar --divide pre --ranks 3 --elements 3 --block 1 --in " + in + " --json");
    ASSERT_EQ(d.code, 0) << d.err;
    ASSERT_EQ(o.code, 0) << o.err;
    auto dj = nlohmann::json::parse(d.out)["runs"][0], oj = nlohmann::json::parse(o.out)["runs"][0];
    EXPECT_EQ(dj["path"], "nccl-fp8-e4m3-ring-ar-avg");
    EXPECT_EQ(dj["max_abs_error"], 8.0);
    EXPECT_EQ(dj["schedule"], "nccl-fp8-e4m3-ring-ar");
    dj.erase("path"), oj.erase("path"), dj.erase("schedule");
    EXPECT_EQ(dj.dump(), oj.dump());
    refused("simulate --path nccl-fp8-e4m3-ring-ar-avg --divide post --ranks 3 --elements 3 --block 1 --in " + in,
            "--divide post contradicts the declared path nccl-fp8-e4m3-ring-ar-avg, which fixes it to pre");
    refused("simulate --path nccl-fp8-e4m3-ring-ar-avg,nccl-fp8-e4m3-ring-ar --ranks 4 --elements 4 --block 1",
            "--path nccl-fp8-e4m3-ring-ar and nccl-fp8-e4m3-ring-ar-avg are the same schedule (nccl-fp8-e4m3-ring-ar): name one");
    refused("simulate --path ring-rz --ranks 4 --elements 64 --format int8", "unknown path 'ring-rz'");

    // DeepEP's dispatch: ring-ag with its cast as the wire, under its own name; its blocks are 128.
    // Transformer Engine's NVFP4 all-gather (D58): one amax over every rank's shard, the E4M3 block scales
    // travel with the codes: (N - 1) S (1/2 + 1/16) bytes and the amax all-reduce's 8 (N - 1) / N.
    const Outcome nv = run("simulate --path te-nvfp4-ag --ranks 8 --elements 4096 --json");
    ASSERT_EQ(nv.code, 0) << nv.err;
    const auto nvj = nlohmann::json::parse(nv.out)["runs"][0];
    EXPECT_EQ(nvj["scales"], "per-tensor");
    EXPECT_EQ(nvj["format"], "nvfp4");
    EXPECT_GT(nvj["tensor_amax"].get<double>(), 3.0);
    EXPECT_EQ(nvj["bytes_per_rank"].get<double>(), 7 * 512 * 0.5625 + 7.0);
    EXPECT_TRUE(nvj["bound_holds"].get<bool>());
    EXPECT_EQ(nvj["k_max"], 1);
    const Outcome dp = run("simulate --path deepep-fp8-dispatch --ranks 4 --elements 512 --block 128 --json");
    const Outcome ag = run("simulate --path ring-ag --format fp8-e4m3-1x128 --ranks 4 --elements 512 --block 128 --json");
    ASSERT_EQ(dp.code, 0) << dp.err;
    ASSERT_EQ(ag.code, 0) << ag.err;
    auto dpj = nlohmann::json::parse(dp.out)["runs"][0], agj = nlohmann::json::parse(ag.out)["runs"][0];
    EXPECT_EQ(dpj["path"], "deepep-fp8-dispatch");
    EXPECT_EQ(dpj["schedule"], "ring-ag");
    EXPECT_EQ(dpj["k_max"], 1) << dpj.dump();
    dpj.erase("path"), agj.erase("path"), dpj.erase("schedule");
    EXPECT_EQ(dpj.dump(), agj.dump());
    // --block left out: the wire's fixed 128; another block is refused.
    const Outcome dd = run("simulate --path deepep-fp8-dispatch --ranks 4 --elements 512 --json");
    ASSERT_EQ(dd.code, 0) << dd.err;
    EXPECT_EQ(nlohmann::json::parse(dd.out)["runs"][0]["block"], 128);
    refused("simulate --path deepep-fp8-dispatch --ranks 4 --elements 512 --block 64", "fixed blocks of 128");
    // A fixed block in the second stage only: that one (wire_block, as the gate and verify take it).
    const Outcome st = run("simulate --path a2a-hier-rs --format int8,fp8-e4m3-1x128 --ranks 16 --elements 2048 --json");
    ASSERT_EQ(st.code, 0) << st.err;
    EXPECT_EQ(nlohmann::json::parse(st.out)["runs"][0]["block"], 128);

    // A user's file: QuickReduce's shape (two-shot, INT4 groups of 32, binary16 sums) and SDP4Bit's
    // (INT8 inside the node, INT4 across).
    const std::string f = write("mine.toml",
                                "[[path]]\nname = \"qr-int4\"\ncollective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int4\"\n"
                                "add = \"fp16\"\n\n[[path]]\nname = \"sdp4bit\"\ncollective = \"reduce-scatter\"\n"
                                "exchange = \"all-to-all-hierarchical\"\nwire = [\"int8\", \"int4\"]\n");
    const Outcome v = run("paths validate " + f);
    ASSERT_EQ(v.code, 0) << v.err << v.out;
    EXPECT_NE(v.out.find("qr-int4: two-shot-ar (all-reduce over two-shot, wire int4, add fp16): N=4 k 2, N=8 k 2; bounds hold"),
              std::string::npos) << v.out;
    EXPECT_NE(v.out.find("sdp4bit: a2a-hier-rs"), std::string::npos) << v.out;
    refused("simulate --path " + f + " --ranks 8 --elements 2048", "differ in");  // int4 and int8,int4 in one run
    const Outcome q = run("simulate --path qr-int4 --ranks 8 --elements 2048 --json");  // registered only by a file
    EXPECT_EQ(q.code, 2);
    const Outcome one = run("simulate --path " + write("qr.toml", "[[path]]\nname = \"qr-int4\"\ncollective = \"all-reduce\"\n"
                                                                "exchange = \"two-shot\"\nwire = \"int4\"\nadd = \"fp16\"\n") +
                            " --ranks 8 --elements 2048");
    ASSERT_EQ(one.code, 0) << one.err;
    EXPECT_NE(one.out.find("qr-int4 "), std::string::npos) << one.out;
    EXPECT_NE(one.out.find("(int4, block 32"), std::string::npos) << one.out;
    EXPECT_NE(one.out.find("fp16 accumulation"), std::string::npos) << one.out;
    refused("simulate --path " + (dir_ / "qr.toml").string() + " --format int8 --ranks 8 --elements 2048",
            "--format int8 contradicts the declared path qr-int4, which fixes it to int4");
    // A wire with a fixed block below 32 (nvfp4's 16) runs at that block, and the declared input and
    // output types are in the line (both were missed: nvfp4 was refused as "--block", a flag paths
    // validate does not have).
    const Outcome fixed = run("paths validate " + write("nv.toml", "[[path]]\nname = \"nv-ag\"\ncollective = \"all-gather\"\n"
                                                              "exchange = \"ring\"\nwire = \"nvfp4\"\nrequantize = \"once\"\n\n[[path]]\nname = \"bf-rs\"\n"
                                                              "collective = \"reduce-scatter\"\nexchange = \"all-to-all\"\n"
                                                              "wire = \"int4\"\nrequantize = \"once\"\ninput = \"bf16\"\noutput = \"fp16\"\n"));
    ASSERT_EQ(fixed.code, 0) << fixed.err << fixed.out;
    EXPECT_NE(fixed.out.find("nv-ag: ring-ag (all-gather over ring, wire nvfp4, block 16): N=4 k 1, N=8 k 1; bounds hold"),
              std::string::npos) << fixed.out;
    EXPECT_NE(fixed.out.find("bf-rs: a2a-rs (reduce-scatter over all-to-all, wire int4, input bf16, output fp16): N=4 k 1, N=8 k 1"),
              std::string::npos) << fixed.out;
    refused("paths validate " + write("noreq.toml", "[[path]]\nname = \"x\"\ncollective = \"all-gather\"\nexchange = \"ring\"\n"
                                                    "wire = \"int8\"\n"),
            "missing: an all-gather over ring is modeled with requantize = once or each-hop");
    // A bad declaration: exit 2, file and line, before any run.
    refused("paths validate " + write("bad.toml", "[[path]]\nname = \"x\"\ncollective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"int8\"\n"),
            "bad.toml:5:8: path[0].wire: an all-reduce over exchange = \"ring\" is modeled unquantized only");
}

// One run, one writer (D64): the gate's report.json and `simulate --json` hold the same object for
// the same run, field for field; only the (row, contributor) pairs of k are counted by the gate alone.
TEST_F(Cli, ARunIsOneObjectInTheReportAndInSimulate) {
    const std::string cfg = write("g.toml", "[gate]\nformats = [\"int8\"]\npaths = [\"a2a-hier-rs\"]\ndistributions = [\"heavy\"]\n"
                                            "ranks = [16]\nranks_per_node = 8\nelements = 1024\n");
    const Outcome g = run("check --config " + cfg + " --report-dir " + (dir_ / "rep").string());
    ASSERT_EQ(g.code, 0) << g.err;
    const Outcome s = run("simulate --path a2a-hier-rs --format int8 --dist heavy --ranks 16 --ranks-per-node 8 --elements 1024 --json");
    ASSERT_EQ(s.code, 0) << s.err;
    const auto report = nlohmann::json::parse(slurp(dir_ / "rep" / "report.json"));
    const auto sim = nlohmann::json::parse(s.out);
    ASSERT_EQ(sim["runs"].size(), 1u);
    const nlohmann::json* gate_run = nullptr;
    for (const auto& r : report["runs"])
        if (r["path"] == "a2a-hier-rs" && r["ranks"] == 16) gate_run = &r;
    ASSERT_NE(gate_run, nullptr);
    const nlohmann::json& a = *gate_run;
    const nlohmann::json& b = sim["runs"][0];
    EXPECT_GT(a["k_checked"].get<int64_t>(), 0);  // simulate counts k's pairs as the gate does (it said 0)
    EXPECT_EQ(a, b) << "report: " << a.dump() << "\nsimulate: " << b.dump();
    EXPECT_EQ(a["accum"], "fp32");
    EXPECT_EQ(a["shape"], "reduce-scatter");
}

// A gate config names them: they run once per distribution beside the 16-bit paths, a refused
// input (heavy tails past 448) is reported as a refusal, and a saturated sum gets its section.
TEST_F(Cli, GateRunsNamedNcclFp8Paths) {
    const fs::path cfg = dir_ / "g.toml";
    std::ofstream(cfg) << "[gate]\nformats = [\"int8\"]\npaths = [\"a2a-rs\", \"nccl-fp8-e4m3-ring-rs\", \"nccl-fp8-e5m2-tree-ar\"]\n"
                          "distributions = [\"normal\", \"heavy\"]\nranks = [8, 16]\nranks_per_node = 8\nelements = 1024\n";
    const Outcome o = run("check --config " + cfg.string() + " --report-dir " + (dir_ / "rep").string());
    ASSERT_NE(o.code, 2) << o.err;
    const auto js = nlohmann::json::parse(slurp(dir_ / "rep" / "report.json"));
    int fp8_runs = 0;
    for (const auto& r : js["runs"])
        if (r["path"].get<std::string>().rfind("nccl-fp8-", 0) == 0) {
            ++fp8_runs;
            EXPECT_TRUE(r.contains("saturated_outputs")) << r["path"];
            EXPECT_TRUE(r["bound_holds"].get<bool>()) << r["path"];
        }
    EXPECT_GE(fp8_runs, 4);  // e4m3 on normal, e5m2 on normal and heavy, at N = 8 and 16
    EXPECT_NE(slurp(dir_ / "rep" / "report.md").find("fp8-e4m3 on heavy: tensor 'input'"), std::string::npos);
}
