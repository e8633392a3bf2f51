// Declared formats as a user meets them on the command line: `formats show` round trips, a .toml
// file wherever a format is named, `formats validate` (exit 0 and reports, exit 2 with the keyed
// message), `--rounding stochastic` replays with its seed, and a gate config with declared formats.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>
#include <set>
#include <string>

#include "cli_fixture.hpp"
#include "qtransit/kernels/npy.hpp"

namespace fs = std::filesystem;
using qtransit::testing::Outcome;

namespace {

class Formats : public qtransit::testing::CliTest {
protected:
    std::string file(const std::string& name, const std::string& text) {
        const fs::path p = dir_ / name;
        std::ofstream(p) << text;
        return p.string();
    }
    // `formats show <builtin>` saved under another name.
    std::string copy_of(const std::string& builtin, const std::string& name) {
        const Outcome r = run("formats show " + builtin);
        EXPECT_EQ(r.code, 0) << r.err;
        std::string text = r.out;
        const std::string from = "name = \"" + builtin + "\"";
        const auto at = text.find(from);
        EXPECT_NE(at, std::string::npos) << text;
        if (at != std::string::npos) text.replace(at, from.size(), "name = \"" + name + "\"");
        return file(name + ".toml", text);
    }
    std::string npy(const std::string& name, size_t n) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((static_cast<int>(i * 37 % 101) - 50)) / 7.0f;
        const std::string path = (dir_ / name).string();
        const std::vector<int64_t> shape{static_cast<int64_t>(n)};
        EXPECT_TRUE(qtransit::kernels::write_npy(path, v, shape).ok());
        return path;
    }
};

}  // namespace

TEST_F(Formats, PlainFormatsListsEveryBuiltinWithScaleAndBlock) {
    const Outcome r = run("formats");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"int4 ", "ds-int8", "fp8-e4m3", "mxfp6-e2m3-rceil", "nf4", "int4-sr", "fp8-e5m2-sr"})
        EXPECT_NE(r.out.find(f), std::string::npos) << f;
    const auto j = nlohmann::json::parse(run("formats --json").out);
    bool seen = false;
    for (const auto& row : j["formats"])
        if (row["format"] == "mxfp4") {
            seen = true;
            EXPECT_EQ(row["fixed_block"], 32);
            EXPECT_EQ(row["scale"], "e8m0-floor");
            EXPECT_EQ(row["wire_bytes_per_block"], 17);  // 16 code bytes + one E8M0 byte
            EXPECT_DOUBLE_EQ(row["wire_bits_per_element"].get<double>(), 4.25);
        }
    EXPECT_TRUE(seen);
}

TEST_F(Formats, ShowPrintsADeclarationThatLoadsBack) {
    const std::string path = copy_of("fp8-e4m3", "my-e4m3");
    const Outcome r = run("formats show " + path);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("name = \"my-e4m3\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("special = \"nan-only\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bias = 7"), std::string::npos) << r.out;
}

TEST_F(Formats, ShowOfDsIntSaysWhyItHasNoDeclaration) {
    const Outcome r = run("formats show ds-int4");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hand-written"), std::string::npos) << r.err;
    EXPECT_EQ(run("formats show int9").code, 2);
}

TEST_F(Formats, ABadFileIsNamedWithItsKeyAndExitsTwo) {
    const std::string bad = file("bad.toml", "name = \"b\"\nscale = \"fp8\"\n[element]\ntype = \"int\"\nbits = 4\n");
    for (const std::string& cmd : std::vector<std::string>{"formats show " + bad, "formats validate " + bad + " --quick --report-dir " + (dir_ / "r").string(),
                                  "quantize --format " + bad + " --in " + npy("x.npy", 64),
                                  "simulate --path ring-rs --ranks 4 --elements 64 --format " + bad}) {
        const Outcome r = run(cmd);
        EXPECT_EQ(r.code, 2) << cmd;
        EXPECT_NE(r.err.find(bad + ":2:"), std::string::npos) << cmd << "\n" << r.err;
        EXPECT_NE(r.err.find("scale: unknown value 'fp8' (known: fp32-absmax"), std::string::npos) << r.err;
    }
    const Outcome missing = run("formats validate " + (dir_ / "none.toml").string());
    EXPECT_EQ(missing.code, 2);
    EXPECT_NE(missing.err.find("none.toml: cannot read"), std::string::npos) << missing.err;
    EXPECT_FALSE(fs::exists(dir_ / "r"));
}

// A copy of int4 passes everything (exit 0) and the reports exist.
TEST_F(Formats, ValidateACopyOfInt4WritesTheReports) {
    const std::string path = copy_of("int4", "copy-int4");
    const fs::path rep = dir_ / "rep";
    const Outcome r = run("formats validate " + path + " --quick --report-dir " + rep.string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    for (const char* f : {"report.json", "report.md", "junit.xml", "report.html", "declaration.toml"})
        EXPECT_TRUE(fs::exists(rep / f)) << f;
    const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
    std::map<std::string, std::string> status;
    for (const auto& v : j["verdicts"]) status[v["name"].get<std::string>()] = v["status"].get<std::string>();
    for (const char* p : {"codes-in-range", "monotone", "pack-unpack", "odd-symmetry", "idempotence", "scale-equivariance"})
        EXPECT_EQ(status["property/copy-int4/" + std::string(p)], "pass") << p;
    EXPECT_EQ(status["property/copy-int4/stochastic-unbiased"], "skip");
    for (const char* p : {"bound", "kernel-vs-reference"}) EXPECT_EQ(status["property/copy-int4/" + std::string(p)], "pass") << p;
    EXPECT_EQ(status["bounds/copy-int4/ring-rs"], "pass");
    EXPECT_EQ(status["kernel-vs-reference/copy-int4"], "pass");
    // The comparison: the declared copy sits exactly on int4 (same bits, same errors).
    const auto& cmp = j["format_comparison"]["formats"];
    ASSERT_GE(cmp.size(), 5u);
    EXPECT_EQ(cmp[0]["format"], "copy-int4");
    EXPECT_EQ(cmp[0]["declared"], true);
    for (const auto& row : cmp)
        if (row["format"] == "int4") {
            EXPECT_EQ(row["rel_rms_error_k1"], cmp[0]["rel_rms_error_k1"]);
            EXPECT_EQ(row["rel_rms_error_k2"], cmp[0]["rel_rms_error_k2"]);
            EXPECT_EQ(row["wire_bits_per_element"], cmp[0]["wire_bits_per_element"]);
        }
    EXPECT_NE(slurp(rep / "report.md").find("## Format comparison"), std::string::npos);
    EXPECT_NE(slurp(rep / "report.html").find("id=\"format-comparison\""), std::string::npos);
    EXPECT_NE(r.out.find("copy-int4 *"), std::string::npos) << r.out;
}

// The properties meet the generated boundary blocks too (issue 47): an MX copy's kernel is checked
// on the blocks at 448 2^k and 1 or 2 ulps either side of every k (thousands of blocks where the
// distributions give a few hundred), and scale equivariance holds on those inside its premise (a
// decoded FLT_MAX may be a saturated product, a value scaled into the subnormals rounds twice: the
// premise leaves both out; before, they were reported as failures).
TEST_F(Formats, ValidateChecksTheGeneratedBoundaryBlocks) {
    const std::string path = copy_of("mxfp8-e4m3-rceil", "copy-mx");
    const fs::path rep = dir_ / "rep";
    const Outcome r = run("formats validate " + path + " --quick --report-dir " + rep.string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
    bool seen = false;
    for (const auto& v : j["verdicts"]) {
        const auto name = v["name"].get<std::string>();
        if (name == "property/copy-mx/kernel-vs-reference") {
            seen = true;
            EXPECT_EQ(v["status"], "pass");
            const auto m = v["message"].get<std::string>();
            const auto at = m.find("holds on ");
            ASSERT_NE(at, std::string::npos) << m;
            EXPECT_GT(std::stoll(m.substr(at + 9)), 3000) << m;
        }
        if (name == "property/copy-mx/scale-equivariance") {
            EXPECT_EQ(v["status"], "pass") << v["message"];
        }
    }
    EXPECT_TRUE(seen);
    EXPECT_NE(slurp(rep / "report.md").find("generated near-tie and scale-boundary blocks"), std::string::npos);
}

// A declaration whose rounding is toward-zero: idempotence is not promised for it (section 6's
// premise is a nearest rounding) and it does fail; validate says so without failing the format.
TEST_F(Formats, ValidateReportsAnUnpromisedPropertyAsNotPromised) {
    const std::string path = file("tz.toml", "name = \"int5-tz\"\nrounding = \"toward-zero\"\n[element]\ntype = \"int\"\nbits = 5\n");
    const fs::path rep = dir_ / "rep";
    const Outcome r = run("formats validate " + path + " --quick --report-dir " + rep.string());
    ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
    const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
    bool seen = false;
    for (const auto& v : j["verdicts"])
        if (v["name"] == "property/int5-tz/idempotence") {
            seen = true;
            EXPECT_EQ(v["status"], "skip");
            EXPECT_NE(v["message"].get<std::string>().find("not promised"), std::string::npos);
            EXPECT_NE(v["message"].get<std::string>().find("failure(s)"), std::string::npos) << v["message"];
        }
    EXPECT_TRUE(seen);
}

TEST_F(Formats, StochasticTwinIsMeasuredUnbiased) {
    const std::string path = copy_of("int4", "sr-int4");
    // The declared format's stochastic twin is a copy named sr-int4-sr.
    std::string text = slurp(path);
    text.replace(text.find("nearest-even"), 12, "stochastic");
    text.replace(text.find("sr-int4"), 7, "sr2-int4");
    const fs::path rep = dir_ / "rep";
    const Outcome r = run("formats validate " + file("sr2.toml", text) + " --quick --report-dir " + rep.string());
    ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
    const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
    for (const auto& v : j["verdicts"]) {
        if (v["name"] == "property/sr2-int4/stochastic-unbiased") {
            EXPECT_EQ(v["status"], "pass") << v["message"];
        }
        if (v["name"] == "property/sr2-int4/monotone") {
            EXPECT_EQ(v["status"], "skip") << v["message"];
        }
    }
}

// --rounding stochastic: the same seed replays the same result bit for bit, another seed gives
// another. Inputs come from a file, so --seed is only the rounding's key (PathConfig::seed).
TEST_F(Formats, RoundingStochasticReplaysWithItsSeed) {
    const std::string x = (dir_ / "x.npy").string();
    {
        std::vector<float> v(8 * 256);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * 7919 % 1013) - 506) / 97.0f;
        const std::vector<int64_t> shape{8, 256};
        ASSERT_TRUE(qtransit::kernels::write_npy(x, v, shape).ok());
    }
    auto result = [&](const std::string& extra, const std::string& out) {
        const std::string dump = (dir_ / out).string();
        const Outcome r = run("simulate --path a2a-rs --in " + x + " --format int4 --dump " + dump + " " + extra);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find(extra.find("stochastic") != std::string::npos ? "int4-sr" : "int4,"), std::string::npos) << r.out;
        return slurp(dump);
    };
    const std::string a = result("--rounding stochastic --seed 7", "a.npy"), b = result("--rounding stochastic --seed 7", "b.npy");
    const std::string c = result("--rounding stochastic --seed 8", "c.npy"), n = result("--seed 7", "n.npy");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    EXPECT_NE(a, n);
    EXPECT_EQ(n, result("--seed 8", "n8.npy"));  // nearest rounding: the seed changes nothing here
}

// quantize --seed keys the kernel and the reference alike: they agree bit for bit at any seed.
TEST_F(Formats, QuantizeStochasticMatchesTheReferenceAtItsSeed) {
    const std::string x = npy("x.npy", 1000);
    std::string first;
    for (const char* seed : {"0", "7", "123456789"}) {
        const Outcome r = run(std::string("quantize --format fp8-e4m3 --rounding stochastic --json --in ") + x + " --seed " + seed);
        ASSERT_EQ(r.code, 0) << seed << ": " << r.err;
        const auto j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["format"], "fp8-e4m3-sr");
        EXPECT_EQ(j["matches_reference"], true) << seed;
        EXPECT_EQ(j["bound_holds"], true) << seed;
        if (first.empty()) first = j["codes"].dump();
        else EXPECT_NE(j["codes"].dump(), first) << seed;
    }
}

TEST_F(Formats, RoundingStochasticErrorsListTheFormatsThatHaveIt) {
    const std::string x = npy("x.npy", 64);
    for (const char* f : {"nf4", "ds-int4", "mxfp4"}) {
        const Outcome r = run(std::string("quantize --format ") + f + " --in " + x + " --rounding stochastic");
        EXPECT_EQ(r.code, 2) << f;
        EXPECT_NE(r.err.find("int2..int8"), std::string::npos) << r.err;
    }
    const Outcome bad = run("simulate --path ring-rs --ranks 4 --elements 64 --format int4 --rounding up");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("known: nearest, stochastic"), std::string::npos) << bad.err;
}

TEST_F(Formats, SimulateRefusesAnMxFormatAtAnotherBlock) {
    const Outcome r = run("simulate --path ring-rs --ranks 4 --elements 128 --format mxfp4 --block 16");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--block: mxfp4 has fixed blocks of 32 elements; got block size 16"), std::string::npos) << r.err;
}

// A gate config names a declaration file (relative to the config) and declares one inline.
TEST_F(Formats, GateConfigTakesDeclaredFormats) {
    copy_of("int8", "file-int8");
    const std::string cfg = file("gate.toml",
                                 "[gate]\nformats = [\"int4\", \"file-int8.toml\", \"inline-e3m2\"]\npaths = [\"ring-rs\", \"a2a-rs\"]\n"
                                 "distributions = [\"normal\"]\nranks = [8, 16]\nelements = 256\n[[budget]]\npath = \"a2a-rs\"\n"
                                 "format = \"inline-e3m2\"\nmax = 1.0\n"
                                 "[[format]]\nname = \"inline-e3m2\"\n[format.element]\ntype = \"float\"\nexponent_bits = 3\n"
                                 "mantissa_bits = 2\nspecial = \"none\"\n");
    const Outcome r = run("check --config " + cfg + " --report-dir " + (dir_ / "rep").string());
    ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;  // 1: the default scaling rules do not fit two N
    const auto j = nlohmann::json::parse(slurp(dir_ / "rep" / "report.json"));
    std::set<std::string> formats;
    for (const auto& f : j["gate"]["formats"]) formats.insert(f.get<std::string>());
    EXPECT_EQ(formats, (std::set<std::string>{"int4", "file-int8", "inline-e3m2"}));
    std::set<std::string> run_formats;
    for (const auto& x : j["runs"]) run_formats.insert(x["format"].get<std::string>());
    EXPECT_EQ(run_formats, formats);
    std::set<std::string> names;
    for (const auto& v : j["verdicts"]) names.insert(v["name"].get<std::string>());
    EXPECT_TRUE(names.count("budget/a2a-rs-inline-e3m2-rel_rms_error"));
    for (const auto& v : j["verdicts"]) {
        const std::string n = v["name"].get<std::string>();
        if (n.rfind("bounds/", 0) == 0 || n.rfind("kernel-vs-reference/", 0) == 0 || n.rfind("budget/", 0) == 0) {
            EXPECT_EQ(v["status"], "pass") << n << ": " << v["message"];
        }
    }

    // Mistakes in an inline declaration name the table and key; a missing file names the file.
    const Outcome bad = run("check --config " + file("bad.toml", "[[format]]\nname = \"q\"\n[format.element]\ntype = \"int\"\nbits = 12\n") +
                            " --report-dir " + (dir_ / "rep2").string());
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("format[0].element.bits: must be 2..8, got 12"), std::string::npos) << bad.err;
    const Outcome missing = run("check --config " + file("m.toml", "[gate]\nformats = [\"nope.toml\"]\n") + " --report-dir " +
                                (dir_ / "rep3").string());
    EXPECT_EQ(missing.code, 2);
    EXPECT_NE(missing.err.find("nope.toml: cannot read"), std::string::npos) << missing.err;
}
