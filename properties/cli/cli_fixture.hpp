// Running the `qtransit` binary the way a user does: a fresh temporary directory per test, the
// command's exit code, stdout and stderr. QTRANSIT_EXE is the binary's path (set by CMake).
// Each command runs in the test's own directory: the default report folders (qtransit-report,
// qtransit-verify, ...) are relative to it, and ctest runs tests in parallel from one folder, where a
// second run refused the first's report lock (CI failed once on exactly that).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace qtransit::testing {

struct Outcome {
    int code = -1;
    std::string out, err;
};

class CliTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("qtransit_cli_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // `qtransit <args>` with stdout and stderr captured.
    Outcome run(const std::string& args) {
        const auto out = dir_ / "stdout", err = dir_ / "stderr";
        const std::string cmd = "cd '" + dir_.string() + "' && " + std::string(QTRANSIT_EXE) + " " + args + " >" +
                                out.string() + " 2>" + err.string();
        const int status = std::system(cmd.c_str());
        return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
    }
    // A refusal: exit 2, `want` in the one line on stderr, nothing on stdout.
    void refused(const std::string& args, const std::string& want) {
        const auto o = run(args);
        EXPECT_EQ(o.code, 2) << args << "\n" << o.out << o.err;
        EXPECT_NE(o.err.find(want), std::string::npos) << args << "\nwanted: " << want << "\ngot: " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_TRUE(o.out.empty()) << args << "\n" << o.out;
    }
    // A file of this test's directory with `text` in it; its path.
    std::string write(const std::string& name, const std::string& text) {
        std::ofstream(dir_ / name) << text;
        return (dir_ / name).string();
    }
    static std::string slurp(const std::filesystem::path& p) {
        std::ifstream f(p);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    std::filesystem::path dir_;
};

}  // namespace qtransit::testing
