// Issue 15's findings, each a case a careless or hostile user can write: refused with exit 2 and one
// line that says what and where, before any work, with nothing written; never a PASS that checked
// nothing, never an abort, never a read that blocks or grows without bound.
#include <sys/stat.h>

#include <cstdlib>

#include "cli_fixture.hpp"

namespace fs = std::filesystem;

namespace {

class BadInput : public qtransit::testing::CliTest {
protected:
    // exit 2, `want` in the one stderr line, nothing on stdout.
    void refused(const std::string& args, const std::string& want) {
        const auto o = run(args);
        EXPECT_EQ(o.code, 2) << args << "\n" << o.out << o.err;
        EXPECT_NE(o.err.find(want), std::string::npos) << args << "\nwanted: " << want << "\ngot: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_TRUE(o.out.empty()) << args << "\n" << o.out;
    }
    std::string write(const std::string& name, const std::string& text) {
        std::ofstream(dir_ / name) << text;
        return (dir_ / name).string();
    }
    std::string npy() { return std::string(QTRANSIT_DATA) + "/f4_le_2x3.npy"; }
};

}  // namespace

// 1. A block past every tensor used to give "0 blocks", "bound holds" and exit 0.
TEST_F(BadInput, HugeBlocksAreRefusedNotPassed) {
    const std::string huge = "9223372036854775807";
    refused("quantize --format int4 --in " + npy() + " --block " + huge, "block size 9223372036854775807 is past the limit of 2^30");
    refused("simulate --path a2a-rs --ranks 4 --elements 64 --format int4 --block " + huge, "is past the limit of 2^30");
    refused("formats --block 4611686018427387904", "is past the limit of 2^30");
    refused("check --config " + write("g.toml", "[gate]\nranks = [8]\nblock = " + huge + "\n"), "g.toml:3: gate.block: at most 2^30");
}

// 2 and 5. A directory where a file belongs.
TEST_F(BadInput, DirectoriesAreNotFiles) {
    fs::create_directories(dir_ / "d");
    const std::string d = (dir_ / "d").string();
    refused("check --config " + d, "is a directory, not a config file");
    refused("check --baseline " + d + " --report-dir " + (dir_ / "r").string(), "is a directory, not a baseline");
    refused("formats validate " + d + "/x.toml", "x.toml: cannot read the declaration file");
    EXPECT_FALSE(fs::exists(dir_ / "r" / "report.json"));
}

// 3. Sizes past their limits, refused before any allocation.
TEST_F(BadInput, SizesPastTheirLimits) {
    refused("simulate --path a2a-rs --ranks 4294967296 --elements 4294967296 --format int4", "N = 4294967296 ranks is past the limit of 2^16");
    refused("simulate --path a2a-rs --ranks 4 --elements 4611686018427387904 --format int4",
            "M = 4611686018427387904 elements per rank is past the limit of 2^30");
    refused("check --config " + write("g.toml", "[gate]\nranks = [100000]\n"), "g.toml:2: gate.ranks: N = 100000 is not a number of ranks (1..65536)");
}

// 6. Where the results go is checked before the gate runs.
TEST_F(BadInput, OutputPathsCheckedFirst) {
    refused("check --junit " + (dir_ / "no" / "such" / "j.xml").string(), "cannot write the JUnit report: the folder");
    refused("check --baseline " + (dir_ / "no" / "b.json").string() + " --update-baseline", "cannot write the baseline: the folder");
}

// 8. Config mistakes are config errors, with file and line.
TEST_F(BadInput, GateConfigMistakes) {
    refused("check --config " + write("g.toml", "[gate]\nranks = [4, 4]\n"), "g.toml:2: gate.ranks: N = 4 is listed twice");
    refused("check --config " + write("g.toml", "[gate]\npaths = [\"a2a-rs\", \"a2a-rs\"]\n"), "g.toml:2: gate.paths: a2a-rs is listed twice");
    for (const char* bad : {"max = nan", "max = inf"})
        refused("check --config " + write("g.toml", "[gate]\nranks = [8]\n[[budget]]\npath = \"a2a-rs\"\nformat = \"int4\"\n" + std::string(bad) + "\n"),
                "g.toml:6: budget[0].max: must be a finite number");
    refused("check --config " + write("g.toml", "[gate]\nranks = [8]\n[[scaling]]\npath = \"a2a-rs\"\nmin = nan\n"),
            "g.toml:5: scaling[0].min: must be a finite number");
    refused("check --config " + write("g.toml", "[baseline]\nmargin = nan\n"), "g.toml:2: baseline.margin: must be a finite number");
}

// 9. A baseline that holds nothing to compare against is no baseline.
TEST_F(BadInput, EmptyBaselines) {
    refused("check --baseline " + write("b.json", "{\"schema_version\": 1, \"runs\": []}"), "the baseline has no runs");
}

// 10. A FIFO never blocks a read for ever (QTRANSIT_INPUT_TIMEOUT, set to 1 s here), a config is a
// regular file; a config larger than the limit is refused unread.
TEST_F(BadInput, UnboundedReads) {
    const auto fifo = dir_ / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ::setenv("QTRANSIT_INPUT_TIMEOUT", "1", 1);
    // A pipe is an input like a file (process substitution), but one nobody writes to ends.
    refused("quantize --format int4 --in " + fifo.string() + " --json", "a FIFO nothing was written to within 1 s");
    refused("check --config " + fifo.string(), "is not a regular file (a FIFO), not a config file");
    ::unsetenv("QTRANSIT_INPUT_TIMEOUT");
    refused("check --config /dev/zero", "/dev/zero: is not a regular file (a device)");
    std::ofstream(dir_ / "big.toml") << std::string((16 << 20) + 1, '#');
    refused("check --config " + (dir_ / "big.toml").string(), "is larger than the limit of 16777216 bytes");
}

// 11. Counts and seeds are not negative.
TEST_F(BadInput, NegativeCounts) {
    refused("simulate --path a2a-rs --ranks 4 --elements 64 --format int4 --threads -1", "--threads: must be >= 0, got -1");
    refused("simulate --path a2a-rs --ranks 4 --elements 64 --format int4 --ranks-per-node -2", "--ranks-per-node: must be >= 0, got -2");
    refused("survey --seed -1", "--seed: must be >= 0, got -1");
}
