// report.html as a person sees it: `qtransit check` on a small config, then headless Chromium renders
// the report and each plot alone to PNGs, and check_plots.py counts their pixels (every plot present
// and not blank). Skips, saying why, where chromium or python3 was not found at configure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

int sh(const std::string& cmd) {
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST(ReportRender, EveryPlotIsDrawnInChromium) {
    // The programs CMake found (properties/CMakeLists.txt), so that the set-up guard checks these.
    const std::string chromium = CHROMIUM;
    if (chromium.empty()) GTEST_SKIP() << "no chromium found at configure (make deps-test installs it; configure again)";
    const std::string python = PYTHON3;
    if (python.empty()) GTEST_SKIP() << "no python3 found at configure (it decodes the screenshots)";

    const fs::path dir = fs::temp_directory_path() / ("qtransit_render_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "gate.toml") << "[gate]\nformats = [\"int4\", \"int8\", \"int4-asym\", \"ds-int8\"]\n"
                                        "paths = [\"ring-rs\", \"a2a-rs\", \"a2a-hier-rs\", \"tree-rs\", \"ring-ag\"]\n"
                                        "distributions = [\"normal\"]\nranks = [8, 16, 32]\nelements = 1024\n";
    ASSERT_EQ(sh(std::string(QTRANSIT_EXE) + " check --config " + (dir / "gate.toml").string() + " --report-dir " +
                 (dir / "report").string() + " >" + (dir / "out.txt").string() + " 2>&1"),
              0);
    const int rc = sh(python + " " + PLOT_CHECK_PY + " " + chromium + " " + (dir / "report" / "report.html").string() + " " +
                      dir.string() + " >" + (dir / "plots.txt").string() + " 2>&1");
    std::ifstream f(dir / "plots.txt");
    const std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << log;
    // k (2 facets), N (5 paths x 2 facets), bytes (2).
    EXPECT_NE(log.find("14 plot(s)"), std::string::npos) << log;
    if (rc == 0) fs::remove_all(dir);
}
