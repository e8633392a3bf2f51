#include "qtransit/reports/files.hpp"

#include "qtransit/common/text_file.hpp"

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

Status write_files(const fs::path& dir, const ReportFiles& files) {
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.first);
    if (auto st = check_report_dir(dir, names); !st) return st;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot create directory: " + ec.message());
    // The temporary directory is inside dir: the renames stay in one directory, and writing needs no
    // more than dir itself.
    fs::path tmp;
    for (int i = 0; i < 16 && tmp.empty(); ++i) {
        const fs::path t = dir / (".qtransit-tmp-" + std::to_string(std::random_device{}()));
        if (fs::create_directory(t, ec)) tmp = t;
    }
    if (tmp.empty()) return make_error(ErrorCode::kIo, dir.string() + ": cannot create a temporary directory in it: " + ec.message());
    auto abandon = [&tmp](Status st) {
        std::error_code ignore;
        fs::remove_all(tmp, ignore);
        return st;
    };
    for (const auto& [name, text] : files)
        if (auto st = write_file(tmp / name, text); !st)
            return abandon(make_error(ErrorCode::kIo, (dir / name).string() + ": cannot write: " + st.error().message));
    // All or none: each previous file is moved into tmp first, and put back if a later rename fails,
    // so the directory never holds one run's report.json beside another's report.html.
    struct Moved {
        std::string name;
        bool had_old = false;
    };
    std::vector<Moved> done;
    auto roll_back = [&] {
        std::error_code ignore;
        for (auto it = done.rbegin(); it != done.rend(); ++it) {
            fs::remove(dir / it->name, ignore);
            if (it->had_old) fs::rename(tmp / (it->name + ".old"), dir / it->name, ignore);
        }
    };
    for (const auto& [name, text] : files) {
        Moved m{name, false};
        fs::file_status st;
        if (something_at(dir / name, st, ec)) {
            fs::rename(dir / name, tmp / (name + ".old"), ec);
            if (ec) {
                roll_back();
                return abandon(make_error(ErrorCode::kIo, (dir / name).string() + ": cannot replace: " + ec.message() + " (nothing was changed)"));
            }
            m.had_old = true;
        }
        done.push_back(m);
        fs::rename(tmp / name, dir / name, ec);
        if (ec) {
            roll_back();
            return abandon(make_error(ErrorCode::kIo, (dir / name).string() + ": cannot replace: " + ec.message() + " (nothing was changed)"));
        }
    }
    return abandon(Status::Ok());
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
