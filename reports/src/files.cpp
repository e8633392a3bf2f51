#include "qtransit/reports/files.hpp"

#include "qtransit/common/text_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace qtransit::reports {
namespace fs = std::filesystem;

Status write_file(const fs::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) return make_error(ErrorCode::kIo, p.string() + ": cannot write (" + std::strerror(errno) + ")");
    return {};
}

Result<fs::path> make_sibling_temp_dir(const fs::path& dir) {
    std::error_code ec;
    const fs::path parent = fs::absolute(dir, ec).parent_path();
    for (int i = 0; i < 16; ++i) {
        const fs::path t = parent / ("." + dir.filename().string() + ".tmp-" + std::to_string(std::random_device{}()));
        if (fs::create_directory(t, ec)) return t;
    }
    return make_error(ErrorCode::kIo, parent.string() + ": cannot create a temporary directory: " + ec.message());
}

namespace {
// What is at p (no symlink followed); false, and nothing, when nothing is there.
bool something_at(const fs::path& p, fs::file_status& st, std::error_code& ec) {
    st = fs::symlink_status(p, ec);
    // (Not a directory: a file stands where a folder of the path would be; nothing is at p.)
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory || (!ec && st.type() == fs::file_type::not_found)) {
        ec.clear();
        return false;
    }
    return !ec;
}

// A report file can replace what is at p: nothing, a regular file or a symlink (rename replaces the
// link, not what it names). A directory or a device is the user's, and nothing replaces it.
Status replaceable(const fs::path& p) {
    std::error_code ec;
    fs::file_status st;
    if (!something_at(p, st, ec)) {
        if (ec) return make_error(ErrorCode::kIo, p.string() + ": cannot look at it (" + ec.message() + ")");
        return {};
    }
    if (st.type() == fs::file_type::regular || st.type() == fs::file_type::symlink) return {};
    return make_error(ErrorCode::kIo, p.string() + ": is " + (st.type() == fs::file_type::directory ? "a directory" : "not a regular file") +
                                          ", not a report file: move it away (nothing was written)");
}

Status writable_dir(const fs::path& d) {
    if (::access(d.c_str(), W_OK | X_OK) != 0)
        return make_error(ErrorCode::kIo, d.string() + ": cannot write into it (" + std::strerror(errno) + ")");
    return {};
}
}  // namespace

Status check_report_dir(const fs::path& dir, const std::vector<std::string>& names) {
    std::error_code ec;
    fs::file_status st;
    if (dir.empty()) return make_error(ErrorCode::kInvalidArgument, "the report directory is an empty path");
    if (something_at(dir, st, ec)) {
        if (!fs::is_directory(fs::status(dir, ec)))
            return make_error(ErrorCode::kIo, dir.string() + ": is not a directory (the report directory)");
        if (auto s = writable_dir(dir); !s) return s;
        for (const auto& n : names)
            if (auto s = replaceable(dir / n); !s) return s;
        return {};
    }
    if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot look at it (" + ec.message() + ")");
    // Not there yet: write_files will create it, under its nearest existing ancestor.
    fs::path up = fs::absolute(dir, ec).parent_path();
    while (!up.empty()) {
        if (something_at(up, st, ec)) {
            if (!fs::is_directory(fs::status(up, ec)))
                return make_error(ErrorCode::kIo, dir.string() + ": cannot create it: " + up.string() + " is not a directory");
            return writable_dir(up);
        }
        if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot create it (" + ec.message() + ")");
        if (up == up.root_path()) break;
        up = up.parent_path();
    }
    return make_error(ErrorCode::kIo, dir.string() + ": cannot create it (no existing directory above it)");
}

namespace {
// Every blockable signal held back while a set of renames runs, so SIGINT, SIGTERM or SIGHUP lands
// after the set is whole (issue 46: a signal between two renames left one run's report.json beside
// another's report.html). The renames take microseconds; SIGKILL cannot be held, and is why the
// previous set is removed when a run begins (ReportRun::begin).
struct HoldSignals {
    sigset_t old;
    HoldSignals() {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
    }
    ~HoldSignals() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

std::string random_tag() { return std::to_string(std::random_device{}()); }
}  // namespace

Status write_files(const fs::path& dir, const ReportFiles& files, const std::vector<std::pair<fs::path, std::string>>& extra) {
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.first);
    if (auto st = check_report_dir(dir, names); !st) return st;
    for (const auto& [path, text] : extra)
        if (auto st = replaceable(path); !st) return st;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot create directory: " + ec.message());
    // The temporary directory is inside dir: the renames stay in one directory, and writing needs no
    // more than dir itself. A file outside dir (--junit) is written beside its final place.
    fs::path tmp;
    for (int i = 0; i < 16 && tmp.empty(); ++i) {
        const fs::path t = dir / (".qtransit-tmp-" + random_tag());
        if (fs::create_directory(t, ec)) tmp = t;
    }
    if (tmp.empty()) return make_error(ErrorCode::kIo, dir.string() + ": cannot create a temporary directory in it: " + ec.message());
    struct Place {
        fs::path final, temp, old;
        bool had_old = false, placed = false;
    };
    std::vector<Place> places;
    for (const auto& [name, text] : files) places.push_back({dir / name, tmp / name, tmp / (name + ".old")});
    const std::string tag = random_tag();
    for (const auto& [path, text] : extra) {
        const fs::path parent = fs::absolute(path, ec).parent_path();
        const std::string base = path.filename().string();
        places.push_back({path, parent / ("." + base + ".qtransit-tmp-" + tag), parent / ("." + base + ".qtransit-old-" + tag)});
    }
    auto abandon = [&](Status st) {
        std::error_code ignore;
        for (const auto& p : places)
            if (p.temp.parent_path() != tmp) {
                fs::remove(p.temp, ignore);
                fs::remove(p.old, ignore);
            }
        fs::remove_all(tmp, ignore);
        return st;
    };
    for (size_t i = 0; i < places.size(); ++i) {
        const std::string& text = i < files.size() ? files[i].second : extra[i - files.size()].second;
        if (auto st = write_file(places[i].temp, text); !st)
            return abandon(make_error(ErrorCode::kIo, places[i].final.string() + ": cannot write: " + st.error().message));
    }
    // All or none: each previous file is moved aside first, and put back if a later rename fails, so
    // a failed write never leaves one run's report.json beside another's report.html.
    HoldSignals hold;
    auto roll_back = [&] {
        std::error_code ignore;
        for (auto it = places.rbegin(); it != places.rend(); ++it) {
            if (it->placed) fs::remove(it->final, ignore);
            if (it->had_old) fs::rename(it->old, it->final, ignore);
        }
    };
    for (auto& p : places) {
        fs::file_status st;
        if (something_at(p.final, st, ec)) {
            fs::rename(p.final, p.old, ec);
            if (ec) {
                roll_back();
                return abandon(make_error(ErrorCode::kIo, p.final.string() + ": cannot replace: " + ec.message() + " (nothing was changed)"));
            }
            p.had_old = true;
        }
        fs::rename(p.temp, p.final, ec);
        if (ec) {
            roll_back();
            return abandon(make_error(ErrorCode::kIo, p.final.string() + ": cannot replace: " + ec.message() + " (nothing was changed)"));
        }
        p.placed = true;
    }
    return abandon(Status::Ok());
}

// ---- a run's report set, locked from its start ------------------------------------------------------
ReportRun::ReportRun(ReportRun&& o) noexcept : fd_(o.fd_), created_(o.created_), committed_(o.committed_), dir_(std::move(o.dir_)) {
    o.fd_ = -1;
    o.created_ = false;
}
ReportRun& ReportRun::operator=(ReportRun&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        created_ = o.created_;
        committed_ = o.committed_;
        dir_ = std::move(o.dir_);
        o.fd_ = -1;
        o.created_ = false;
    }
    return *this;
}
ReportRun::~ReportRun() {
    // A run refused after begin() (the gate's memory check) leaves no folder it made: removed when
    // still empty (a file put there meanwhile keeps it).
    if (created_ && !committed_) {
        std::error_code ignore;
        fs::remove(dir_, ignore);
    }
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

Result<ReportRun> ReportRun::begin(const fs::path& dir, const std::vector<std::string>& names, const std::vector<fs::path>& extra) {
    if (auto st = check_report_dir(dir, names); !st) return st.error();
    std::error_code ec;
    ReportRun run;
    run.created_ = fs::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot create directory: " + ec.message());
    run.dir_ = dir;
    run.fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (run.fd_ < 0) return make_error(ErrorCode::kIo, dir.string() + ": cannot open the report directory (" + std::strerror(errno) + ")");
    if (::flock(run.fd_, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            return make_error(ErrorCode::kIo, dir.string() + ": another qtransit run is writing its reports here (it holds the directory's "
                                                             "lock): wait for it, or give another --report-dir");
        return make_error(ErrorCode::kIo, dir.string() + ": cannot lock the report directory (" + std::strerror(errno) + ")");
    }
    // A run that dies (a codec's crash, SIGKILL, the OOM killer) must not leave the previous run's
    // PASS for a CI job to read as its own: the set goes now, and comes back whole at the end or not
    // at all. A temporary folder a killed run left goes too. The first name (report.json, the one a
    // reader takes the verdict from) goes last: one killed between two removals leaves no report.json
    // beside files of the set, so whoever finds it gone finds the whole set gone.
    for (size_t i = 1; i < names.size(); ++i) fs::remove(dir / names[i], ec);
    for (const auto& p : extra) {
        fs::file_status st;
        if (something_at(p, st, ec) && (st.type() == fs::file_type::regular || st.type() == fs::file_type::symlink)) fs::remove(p, ec);
    }
    if (!names.empty()) fs::remove(dir / names.front(), ec);
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind(".qtransit-tmp-", 0) == 0) fs::remove_all(e.path(), ec);
    return run;
}

Status ReportRun::commit(const ReportFiles& files, const std::vector<std::pair<fs::path, std::string>>& extra) {
    committed_ = true;
    return write_files(dir_, files, extra);
}

Status check_report_target(const fs::path& file, const fs::path& dir, const std::vector<std::string>& names, const std::string& option) {
    std::error_code ec;
    const fs::path f = fs::weakly_canonical(fs::absolute(file, ec), ec);
    for (const auto& n : names) {
        std::error_code ec2;
        const fs::path r = fs::weakly_canonical(fs::absolute(dir / n, ec2), ec2);
        if (!ec && !ec2 && f == r)
            return make_error(ErrorCode::kInvalidArgument, option + " " + file.string() + " is the report directory's " + n +
                                                               ": it would overwrite it; name another file");
    }
    return {};
}

ReportFiles report_files(const GateResult& r) {
    return {{"report.json", to_json(r).dump(2) + "\n"}, {"report.md", to_markdown(r)}, {"junit.xml", to_junit(r)}, {"report.html", to_html(r)}};
}

std::vector<std::string> report_file_names() { return {"report.json", "report.md", "junit.xml", "report.html"}; }

Status write_reports(const GateResult& r, const fs::path& dir) { return write_files(dir, report_files(r)); }

Result<std::vector<GateRun>> load_baseline(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(file, ec))
        return make_error(ErrorCode::kBadFile, file.string() + ": baseline not found (run with --update-baseline to create it)");
    auto text = read_text_file(file.string(), kMaxBaselineBytes, "baseline (a report.json)");
    if (!text) return text.error();
    try {
        const auto j = nlohmann::json::parse(*text);
        auto runs = runs_from_json(j);
        if (!runs) return make_error(ErrorCode::kBadFile, file.string() + ": " + runs.error().message);
        if (runs->empty()) return make_error(ErrorCode::kBadFile, file.string() + ": the baseline has no runs: nothing to compare against");
        return runs;
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::kBadFile, file.string() + ": not valid JSON: " + e.what());
    }
}

}  // namespace qtransit::reports
