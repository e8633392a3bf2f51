// Issue 15's findings, each a case a careless or hostile user can write: refused with exit 2 and one
// line that says what and where, before any work, with nothing written; never a PASS that checked
// nothing, never an abort, never a read that blocks or grows without bound.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>

#include "cli_fixture.hpp"

namespace fs = std::filesystem;

namespace {

class BadInput : public qtransit::testing::CliTest {
protected:
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
    refused("simulate --path ring-rs --format int8 --ranks 4 --elements 256 --dump " + (dir_ / "no" / "x.npy").string(),
            "cannot write the dump (--dump): the folder");
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
    // A 16-bit path quantizes nothing: a scaling rule there is fitted under its type (D51), and one
    // that names a format would be a skip on every run; a budget there matched no run (failed as if
    // its input had been refused).
    const std::string typed = "[gate]\npaths = [\"a2a-rs\", \"bf16-ring-rs\"]\nformats = [\"int8\"]\nranks = [8, 16]\n";
    refused("check --config " + write("g.toml", typed + "[[scaling]]\npath = \"bf16-ring-rs\"\nformats = [\"int8\"]\nmax = 1.0\n"),
            "g.toml:5: scaling[0]: path bf16-ring-rs quantizes nothing: its runs carry its type bf16 (leave formats out)");
    refused("check --config " + write("g.toml", typed + "[[budget]]\npath = \"bf16-ring-rs\"\nformat = \"int8\"\nmax = 0.1\n"),
            "g.toml:5: budget[0]: path bf16-ring-rs quantizes nothing (a 16-bit path, D26): its runs carry no format, so a budget on format int8 there would match no run");
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

// 4. FLT_MAX in a table: its shortest spelling loads, `formats show` prints what loads back, and the
// kernel and the reference agree on a tensor whose scaled values overflow binary32 (both saturate).
TEST_F(BadInput, TableWithFltMax) {
    const std::string decl = write("big.toml",
                                   "name = \"big-table\"\nscale = \"fp32-absmax\"\noffset = \"none\"\nrounding = \"nearest-even\"\n"
                                   "packing = \"lsb-first\"\n[element]\ntype = \"table\"\n"
                                   "values = [-3.4028235e38, -2.0e38, -1.0e38, 0.0, 1.0e38, 2.0e38, 3.0e38, 3.4028235e38]\n");
    const auto shown = run("formats show " + decl);
    ASSERT_EQ(shown.code, 0) << shown.err;
    EXPECT_NE(shown.out.find("3.4028235e+38"), std::string::npos) << shown.out;
    const std::string back = write("back.toml", shown.out);
    const auto again = run("formats show " + back);
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.out, shown.out);
    // A tiny block: its scale a / FLT_MAX is subnormal, so x / s overflows for the largest elements.
    const std::string npy = (dir_ / "x.npy").string();
    ASSERT_EQ(run("simulate --path a2a-rs --ranks 4 --elements 256 --format int4 --dist normal --dump " + npy).code, 0);
    const auto q = run("quantize --format " + decl + " --in " + npy + " --block 8");
    EXPECT_EQ(q.code, 0) << q.out << q.err;
    EXPECT_NE(q.out.find("kernel = reference yes, bit for bit"), std::string::npos) << q.out;
    refused("formats show " + write("inf.toml", "name = \"inf-table\"\nscale = \"fp32-absmax\"\n[element]\ntype = \"table\"\n"
                                                "values = [-1.0, 3.4028236e38]\n"),
            "is not a finite binary32 value (it rounds to infinity)");
}

// 11. Control characters and huge names in a message: escaped and cut, still one line.
TEST_F(BadInput, NamesAreEscapedAndCut) {
    const auto o = run("quantize --format 'int4\nfake line' --in x.npy");
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("int4\\nfake line"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    // A 1 MB TOML key: cut, one line.
    const auto key = run("check --config " + write("k.toml", "[gate]\n" + std::string(1 << 20, 'k') + " = 1\n"));
    EXPECT_EQ(key.code, 2);
    EXPECT_LT(key.err.size(), 1200u);
    EXPECT_EQ(std::count(key.err.begin(), key.err.end(), '\n'), 1) << key.err.substr(0, 300);
    const auto big = run("quantize --format " + std::string(100000, 'k') + " --in x.npy");
    EXPECT_EQ(big.code, 2);
    EXPECT_LT(big.err.size(), 1200u);
    EXPECT_NE(big.err.find("more bytes)"), std::string::npos) << big.err.substr(0, 300);
}

// Found by decl_fuzz: toml++ 3.3 reaches __builtin_unreachable on some non-ASCII characters where it
// looks for whitespace (é among them). Refused before toml++ sees them, naming line and column.
TEST_F(BadInput, TomlCharactersTheLibraryCannotRead) {
    refused("check --config " + write("u.toml", "[gate]\nseed = 1 \xc3\xa9\n"), "u.toml:2:10: the character U+00E9 cannot be read safely");
    refused("formats show " + write("u2.toml", "name = \"x\xd0\x96\"\n"), "u2.toml:1:10: the character U+0416");
    // decl_fuzz's second finding: U+FC3F after a bare key (the generated table's last child).
    refused("formats show " + write("u3.toml", "# f\nin\xef\xb0\xbfY\n"), "u3.toml:2:3: the character U+FC3F");
    // A string value or a quoted key holding an escaped newline, echoed in a message: one line still.
    refused("formats show " + write("nl2.toml", "name = \"a\\nb\"\n"), "nl2.toml:1:8: name: 'a\\nb' is not a format name");
    refused("check --config " + write("nl3.toml", "[gate]\n\"x\\ny\" = 1\n"), "nl3.toml:2: gate.x\\ny: unknown key");
    // toml++ quotes the offending character raw, a newline too: one line still.
    refused("formats show " + write("nl.toml", "name =f\n\"5z\"\n"), "nl.toml:1:8: TOML syntax error");
}

// 7. quantize --out writes its set together or not at all, and leaves no stale file of another format.
TEST_F(BadInput, QuantizeOutIsOneSet) {
    const std::string out = (dir_ / "q").string();
    ASSERT_EQ(run("quantize --format int4-asym --in " + npy() + " --out " + out).code, 0);
    EXPECT_TRUE(fs::exists(dir_ / "q" / "offsets.npy"));
    ASSERT_EQ(run("quantize --format int4 --in " + npy() + " --out " + out).code, 0);
    EXPECT_FALSE(fs::exists(dir_ / "q" / "offsets.npy")) << "a stale offsets.npy of the -asym run";
    const auto before = fs::last_write_time(dir_ / "q" / "decoded.npy");
    fs::remove(dir_ / "q" / "codes.bin");
    fs::create_directories(dir_ / "q" / "codes.bin");
    refused("quantize --format int8 --in " + npy() + " --out " + out, "codes.bin: is not a regular file (a directory?): nothing was written");
    EXPECT_EQ(fs::last_write_time(dir_ / "q" / "decoded.npy"), before) << "decoded.npy was rewritten";
    for (const auto& e : fs::directory_iterator(dir_))
        EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// 8 (rest). A block a declared format refuses, and a budget error in the user's file: file and line,
// before anything runs, no report directory.
TEST_F(BadInput, GateConfigErrorsNameTheirLine) {
    const std::string r = (dir_ / "r").string();
    refused("check --report-dir " + r + " --config " + write("mx.toml", "[gate]\nformats = [\"int4\", \"mxfp4\"]\nblock = 16\nranks = [8]\n"),
            "mx.toml:3: gate.block: mxfp4 has fixed blocks of 32 elements");
    refused("check --report-dir " + r + " --config " +
                write("bu.toml", "[gate]\nformats = [\"int4\"]\nranks = [8]\n\n[[budget]]\nname = \"x\"\npath = \"ring-rs\"\n"
                                 "format = \"int8\"\nmetric = \"rel_rms_error\"\nmax = 1.0\n"),
            "bu.toml:5: budget[0]: format int8 is not in gate.formats");
    EXPECT_FALSE(fs::exists(dir_ / "r"));
}

// 11 (rest). The table's count says what the check allows; simulate's NaN names the file.
TEST_F(BadInput, TableCountAndNaNFileNamed) {
    refused("formats show " + write("t2.toml", "name = \"t2\"\nscale = \"fp32-absmax\"\n[element]\ntype = \"table\"\nvalues = [-1.0, 1.0]\n"),
            "needs 4, 8, 16, 32, 64, 128 or 256 values");
    // A [2, 4] binary32 .npy with a NaN at row 1, column 2.
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }";
    dict.append(128 - 10 - dict.size() - 1, ' ');
    dict += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
    for (int i = 0; i < 8; ++i) {
        const float v = i == 6 ? std::numeric_limits<float>::quiet_NaN() : 1.0f + static_cast<float>(i);
        bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
    const std::string f = write("nan.npy", bytes);
    refused("simulate --path a2a-rs --ranks 2 --ranks-per-node 2 --format int4 --block 4 --in " + f, "nan.npy' rank 1 element 2");
}

// 3 (rest). The memory a run needs is estimated before it starts: past the machine's, exit 2 with
// both figures, nothing run.
TEST_F(BadInput, RunsPastTheMachinesMemoryAreRefused) {
    refused("simulate --path ring-ag --ranks 65536 --ranks-per-node 8 --elements 1073741824 --format int4 --dump " +
                (dir_ / "d.npy").string(),
            "of memory; this machine has");
    EXPECT_FALSE(fs::exists(dir_ / "d.npy"));
    refused("simulate --path a2a-rs --ranks 65536 --ranks-per-node 8 --elements 1073741824 --block 16384 --format int4",
            "this run needs about");
    // The gate's kernel check of M = 2^30 (64 GiB) was run until the kernel's OOM killer ended it;
    // and the report directory is not created for a run refused. (On a machine of 64 GiB or more it
    // would run: not here.)
    if (static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE)) >= 64.0 * (1 << 30)) return;
    refused("check --config " + write("g.toml", "[gate]\nformats = [\"int8\"]\npaths = [\"ring-rs\"]\nranks = [8]\nelements = 1073741824\n") +
                " --report-dir " + (dir_ / "r").string(),
            "the kernel check of M = 1073741824 elements (gate.elements) needs about 64 GiB of memory");
    EXPECT_FALSE(fs::exists(dir_ / "r"));
    // Refused before the run takes its report directory: the previous reports stay (D37).
    fs::create_directories(dir_ / "prev");
    std::ofstream(dir_ / "prev" / "report.json") << "previous";
    refused("check --config " + (dir_ / "g.toml").string() + " --report-dir " + (dir_ / "prev").string(), "needs about 64 GiB of memory");
    EXPECT_EQ(slurp(dir_ / "prev" / "report.json"), "previous");
}

// Session 44's audit: lists that name a thing twice, and options that would run nothing.
TEST_F(BadInput, ListsNamedTwiceAndOptionsThatRunNothing) {
    // A fit over N = 4 twice printed N^nan; a path twice ran twice and counted its points twice.
    refused("simulate --path ring-rs --ranks 4,4 --elements 256 --format int8", "--ranks 4 is given twice");
    refused("simulate --path all,ring-rs --ranks 4 --elements 256 --format int8", "--path ring-rs is named twice (all already has it)");
    refused("survey --format int8,int8 --elements 256 --report-dir " + (dir_ / "s").string(), "--format int8 is named twice");
    refused("survey --dist normal,normal --elements 256 --report-dir " + (dir_ / "s").string(), "--dist normal is named twice");
    // A codec on paths that quantize nothing said it had run.
    refused("simulate --codec " QT_CODEC_DIR "/libqt_codec_example-int4.so --path fp32-ring-rs,bf16-ring-ar --ranks 4 --elements 256",
            "--codec: no --path given quantizes");
    EXPECT_FALSE(fs::exists(dir_ / "s"));
}

// A report directory that cannot take the reports is refused before the gate runs, and nothing is
// created for a refused run.
TEST_F(BadInput, ReportDirectoryCheckedFirst) {
    fs::create_directories(dir_ / "r" / "junit.xml");
    refused("check --quick --report-dir " + (dir_ / "r").string(), "junit.xml: is a directory, not a report file");
    EXPECT_FALSE(fs::exists(dir_ / "r" / "report.json"));
    const std::string file = write("f", "x");
    refused("check --quick --report-dir " + file + "/sub", "is not a directory");
    refused("survey --elements 256 --report-dir " + file, "is not a directory");
    refused("check --config " + write("g.toml", "[gate]\nranks = [4, 4]\n") + " --report-dir " + (dir_ / "new").string(), "listed twice");
    EXPECT_FALSE(fs::exists(dir_ / "new"));
}

// A budget's name is printed in the summary and the reports: a control character could forge a
// "PASS" line; two budgets of one name gave two JUnit test cases of that name.
TEST_F(BadInput, BudgetNamesArePrintableAndUnique) {
    const std::string gate = "[gate]\nformats = [\"int8\"]\npaths = [\"ring-rs\"]\ndistributions = [\"normal\"]\nranks = [4, 8]\n"
                             "elements = 256\nranks_per_node = 0\n";
    const std::string budget = "[[budget]]\npath = \"ring-rs\"\nformat = \"int8\"\nmax = 1\n";
    refused("check --config " + write("g.toml", gate + budget + "name = \"x\\u001b[31mgreen\\nPASS\"\n"),
            "g.toml:12: budget[0].name: has a control character (code 27)");
    refused("check --config " + write("g.toml", gate + budget + "name = \"dup\"\n" + budget + "name = \"dup\"\n"),
            "budget[1]: its name 'dup' is budget[0]'s too");
}

// CLI11 kept strtoull's saturated result: --seed 2^64 ran as 2^64 - 1 and --elements 10^20 as
// 2^63 - 1, numbers the user never typed; gate.threads = 2^32 + 1 was cut to 1.
TEST_F(BadInput, NumbersPastTheirRangeAreRefusedNotClamped) {
    refused("quantize --format int4-sr --in " + npy() + " --seed 18446744073709551616", "18446744073709551616 is past the largest seed, 2^64 - 1");
    refused("simulate --path ring-rs --format int8 --ranks 4 --elements 99999999999999999999", "is past what a 64-bit count holds");
    refused("simulate --path ring-rs --format int8 --ranks 4 --elements 256 --threads 100000", "100000 is past the limit of 4096 threads");
    refused("check --config " + write("g.toml", "[gate]\nthreads = 4294967297\n"), "g.toml:2: gate.threads: at most 4096 threads");
    EXPECT_EQ(run("quantize --format int4-sr --in " + npy() + " --seed 18446744073709551615").code, 0);
}

// A mistyped command is named, with the commands there are (CLI11 said "A subcommand is required").
TEST_F(BadInput, UnknownCommandIsNamed) {
    refused("chek --quick", "unknown command 'chek'; the commands: info, formats, paths, quantize, bench, survey, simulate, check, verify");
}

// ---- issue 46: report files ---------------------------------------------------------------------

// A --junit that is not a file to replace, or that is one of the report directory's own files, is
// refused before any work, and the previous reports are left as they were (a FIFO hung the run
// after the reports were replaced; /dev/full failed after; DIR/report.json was overwritten with XML).
TEST_F(BadInput, JunitTargetsThatAreNotAReportFile) {
    const auto r = dir_ / "r";
    fs::create_directories(r);
    std::ofstream(r / "report.json") << "previous";
    const auto fifo = dir_ / "j.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string base = "check --quick --report-dir " + r.string() + " --junit ";
    refused(base + fifo.string(), "is not a regular file (a FIFO); the JUnit report is written as a file");
    refused(base + "/dev/full", "/dev/full: is not a regular file (a device)");
    refused(base + (r / "report.json").string(), "is the report directory's report.json: it would overwrite it");
    refused(base + (dir_ / "r" / ".." / "r" / "junit.xml").string(), "is the report directory's junit.xml");
    EXPECT_EQ(slurp(r / "report.json"), "previous");
}

// Two runs into one directory: the second is refused before any work while the first holds the
// directory (issue 46: two check runs could end with report.json missing).
TEST_F(BadInput, AReportDirectoryInUseIsRefused) {
    const auto r = dir_ / "r";
    fs::create_directories(r);
    const int fd = ::open(r.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    refused("check --quick --report-dir " + r.string(), "another qtransit run is writing its reports here");
    ::close(fd);
    const auto ok = run("check --quick --report-dir " + r.string());
    EXPECT_EQ(ok.code, 0) << ok.err;
    for (const char* f : {"report.json", "report.md", "junit.xml", "report.html"}) EXPECT_TRUE(fs::exists(r / f)) << f;
}

// A run starts by removing the previous set and any temporary folder a killed run left: what the
// directory holds afterwards is this run's set, whole (issue 46: a stale PASS next to a dead run).
TEST_F(BadInput, ARunReplacesTheWholeSetAndLeavesNoTemporaryFolder) {
    const auto r = dir_ / "r";
    fs::create_directories(r / ".qtransit-tmp-123");
    std::ofstream(r / ".qtransit-tmp-123" / "report.json") << "half";
    std::ofstream(r / "report.md") << "previous";
    const auto j = dir_ / "junit-elsewhere.xml";
    std::ofstream(j) << "previous";
    const auto ok = run("check --quick --report-dir " + r.string() + " --junit " + j.string());
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_FALSE(fs::exists(r / ".qtransit-tmp-123"));
    EXPECT_NE(slurp(r / "report.md"), "previous");
    EXPECT_EQ(slurp(j), slurp(r / "junit.xml"));
    for (const auto& e : fs::directory_iterator(r)) EXPECT_NE(e.path().filename().string().rfind(".qtransit", 0), 0u) << e.path();
}

// A control character in a name the user gave (an ESC in --config) never lands raw in report.md or
// on the terminal (issue 46).
TEST_F(BadInput, ControlCharactersInNamesAreEscapedInReports) {
    const std::string cfg = (dir_ / "g\x1b[31m.toml").string();
    {
        std::ifstream in(QTRANSIT_DATA "/../../gate/default_gate.toml");
        std::ofstream out(cfg);
        out << in.rdbuf();
    }
    const auto r = dir_ / "r";
    const auto o = run("check --quick --config '" + cfg + "' --report-dir " + r.string());
    EXPECT_EQ(o.code, 0) << o.err;
    const std::string md = slurp(r / "report.md");
    EXPECT_EQ(md.find('\x1b'), std::string::npos);
    EXPECT_NE(md.find("g\\x1b[31m.toml"), std::string::npos) << md.substr(0, 400);
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos);
}

// ---- issue 46: options and the environment ------------------------------------------------------

// An empty value is not "not given" (--codec '' ran qtransit's own kernels and passed, --config ''
// the default gate, --baseline '' compared nothing): refused for every option but the report
// directories whose help says "" means none.
TEST_F(BadInput, EmptyValuesAreRefused) {
    for (const std::string opt : {"--codec", "--config", "--baseline", "--junit", "--report-dir"})
        refused("check --quick " + opt + " ''", opt + ": an empty value ('') is not a value");
    refused("quantize --format int4 --in ''", "--in: an empty value");
    refused("simulate --path a2a-rs --ranks 4 --elements 64 --format ''", "--format: an empty value");
    refused("formats validate ''", "an empty value");
}

// An empty item in a comma-separated list (CLI11 drops it: `--path a2a-rs,,ring-rs` ran as if the
// comma were single, `--ranks 4,` as 4) is refused, as an empty value is; every list option, one rule.
TEST_F(BadInput, EmptyListItemsAreRefused) {
    refused("simulate --path a2a-rs,,ring-rs --ranks 4 --elements 64 --format int4", "--path: 'a2a-rs,,ring-rs' has an empty item");
    refused("simulate --path=a2a-rs, --ranks 4 --elements 64 --format int4", "--path: 'a2a-rs,' has an empty item");
    refused("simulate --path a2a-rs --ranks ,4 --elements 64 --format int4", "--ranks: ',4' has an empty item");
    refused("bench --format int8,,int4", "--format: 'int8,,int4' has an empty item");
    refused("survey --dist normal,,heavy", "--dist: 'normal,,heavy' has an empty item");
    // A single comma between items is the list.
    EXPECT_EQ(run("simulate --path a2a-rs,ring-rs --ranks 4,8 --elements 64 --format int4").code, 0);
}

// Numbers are decimal digits (hex skipped the limit checks: bench --threads 0x1001 started 4097
// threads, --seed 0x1 0000 0000 0000 0000 ran as 2^64 - 1; CLI11 reads 010 as octal 8): every
// integer option, by one rule.
TEST_F(BadInput, NumbersAreDecimal) {
    refused("bench --threads 0x1001", "--threads: must be a whole number in decimal digits, got 0x1001");
    refused("survey --seed 0x10000000000000000", "--seed: must be a whole number in decimal digits");
    refused("simulate --path a2a-rs --ranks 4 --elements 1e3 --format int4", "--elements: must be a whole number in decimal digits, got 1e3");
    refused("simulate --path a2a-rs --ranks 4 --elements 0b100 --format int4", "got 0b100");
    refused("simulate --path a2a-rs --ranks 4 --elements \"1'024\" --format int4", "got 1'024");
    refused("simulate --path a2a-rs --ranks 4 --elements \" 64\" --format int4", "decimal digits");
    // Leading zeros are decimal, not octal: 010 ranks is ten (M = 64 is then not divisible by it).
    refused("simulate --path a2a-rs --ranks 010 --elements 64 --format int4", "not divisible by N = 10 ranks");
    refused("survey --seed 018446744073709551616", "is past the largest seed");
}

// CLI11's own errors quote the value as given: one line whatever it holds, cut when long.
TEST_F(BadInput, ParseErrorsAreOneShortLine) {
    const auto o = run("check --no-such-option \"$(printf 'a\\nb\\033[31m')\"");
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err;
    const auto l = run("simulate --path a2a-rs --elements 64 --format int4 --ranks " + std::string(100000, '9'));
    EXPECT_EQ(l.code, 2);
    EXPECT_EQ(std::count(l.err.begin(), l.err.end(), '\n'), 1);
    EXPECT_LT(l.err.size(), 1200u) << l.err.size();
}

// A setting in the environment out of its range is refused before any work, naming it (4294967297
// wrapped to 1 s).
TEST_F(BadInput, EnvironmentSettingsAreChecked) {
    for (const char* v : {"4294967297", "0", "-1", "0x10", "abc", "1.5"}) {
        ::setenv("QTRANSIT_INPUT_TIMEOUT", v, 1);
        refused("info", std::string("QTRANSIT_INPUT_TIMEOUT=") + v + ": must be whole seconds from 1 to 86400");
    }
    ::setenv("QTRANSIT_INPUT_TIMEOUT", "", 1);
    EXPECT_EQ(run("info").code, 0);
    ::unsetenv("QTRANSIT_INPUT_TIMEOUT");
    ::setenv("QTRANSIT_MPI_TIMEOUT", "nan", 1);
    refused("info", "QTRANSIT_MPI_TIMEOUT=nan: must be seconds from 0.001 to 86400");
    ::unsetenv("QTRANSIT_MPI_TIMEOUT");
}

// verify collective --tensor with no .safetensors file among them was dropped silently.
TEST_F(BadInput, TensorNamesNeedSafetensors) {
    refused("verify collective --path a2a-rs --format int4 --ranks 4 --inputs in.npy --outputs out.npy --tensor x",
            "--tensor is for .safetensors files");
    refused("verify collective --path a2a-rs --format int4 --ranks 4 --inputs in.safetensors --outputs out.npy --output-tensor x",
            "--output-tensor is for .safetensors files");
}
