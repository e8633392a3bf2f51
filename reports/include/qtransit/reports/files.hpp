// Writing the reports, and reading a baseline back.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::reports {

using ReportFiles = std::vector<std::pair<std::string, std::string>>;  // file name in the directory, its text

// One file (truncated and rewritten); an Error naming it if it cannot be written.
Status write_file(const std::filesystem::path& p, const std::string& text);
// Whether write_files(dir, files named `names`) can be expected to work, without writing anything:
// dir is a directory we can write into (or can be created under one), and none of the names is a
// directory or another non-file there. For the commands to call before any work (issue 15: nothing
// found wrong after minutes of it).
Status check_report_dir(const std::filesystem::path& dir, const std::vector<std::string>& names);
// Writes every file into `dir` (created if missing) together, all or none: all of them into a
// temporary directory inside it first, then each renamed into place, and on a failed rename the
// previous files put back, so a failed write leaves the previous report whole. An Error names the
// file that could not be written.
// `extra`: files outside dir (a --junit path) written in the same set, each beside its final place.
// Signals are held back while the files are renamed into place, so an interrupt lands after the
// set is whole.
Status write_files(const std::filesystem::path& dir, const ReportFiles& files,
                   const std::vector<std::pair<std::filesystem::path, std::string>>& extra = {});

// One command's report set from the start of its work to its end (issue 46). begin(), after every
// check and before any work: creates dir, locks it for the run (a second run into the same directory
// is refused, not interleaved), and removes the previous run's files of this set, the `extra` files
// (--junit) and any temporary folder a killed run left, names.front() (report.json) last, so that a
// run that dies for any reason leaves no report that could be taken for its own. commit() writes the
// set as write_files does. The lock is released when the object goes.
class ReportRun {
public:
    static Result<ReportRun> begin(const std::filesystem::path& dir, const std::vector<std::string>& names,
                                   const std::vector<std::filesystem::path>& extra = {});
    Status commit(const ReportFiles& files, const std::vector<std::pair<std::filesystem::path, std::string>>& extra = {});
    ReportRun(ReportRun&& o) noexcept;
    ReportRun& operator=(ReportRun&& o) noexcept;
    ReportRun(const ReportRun&) = delete;
    ReportRun& operator=(const ReportRun&) = delete;
    ~ReportRun();

private:
    ReportRun() = default;
    int fd_ = -1;
    bool created_ = false, committed_ = false;
    std::filesystem::path dir_;
};

// A file an option names (--junit) that is one of the report directory's own files would be
// overwritten by the set (issue 46: --junit DIR/report.json replaced report.json with XML): refused.
Status check_report_target(const std::filesystem::path& file, const std::filesystem::path& dir, const std::vector<std::string>& names,
                           const std::string& option);
// A new empty directory beside `dir` (same file system, so renames out of it cannot copy), for a
// set of files written together; an Error when none could be made.
Result<std::filesystem::path> make_sibling_temp_dir(const std::filesystem::path& dir);
// The gate's four reports: report.json, report.md, junit.xml, report.html.
ReportFiles report_files(const GateResult& r);
// Their names, in that order (for check_report_dir before the work).
std::vector<std::string> report_file_names();
Status write_reports(const GateResult& r, const std::filesystem::path& dir);
// The runs of a previous report.json. An Error names the file and says what is wrong with it.
Result<std::vector<GateRun>> load_baseline(const std::filesystem::path& file);

}  // namespace qtransit::reports
