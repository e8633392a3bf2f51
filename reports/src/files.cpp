#include "qtransit/reports/files.hpp"

#include "qtransit/common/text_file.hpp"

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

Status write_files(const fs::path& dir, const ReportFiles& files) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, dir.string() + ": cannot create directory: " + ec.message());
    auto made = make_sibling_temp_dir(dir);
    if (!made) return made.error();
    const fs::path tmp = *made;
    for (const auto& [name, text] : files)
        if (auto st = write_file(tmp / name, text); !st) {
            fs::remove_all(tmp, ec);
            return make_error(ErrorCode::kIo, (dir / name).string() + ": cannot write: " + st.error().message);
        }
    for (const auto& [name, text] : files) {
        fs::rename(tmp / name, dir / name, ec);
        if (ec) {
            std::error_code ignore;
            fs::remove_all(tmp, ignore);
            return make_error(ErrorCode::kIo, (dir / name).string() + ": cannot replace: " + ec.message());
        }
    }
    fs::remove_all(tmp, ec);
    return {};
}

ReportFiles report_files(const GateResult& r) {
    return {{"report.json", to_json(r).dump(2) + "\n"}, {"report.md", to_markdown(r)}, {"junit.xml", to_junit(r)}, {"report.html", to_html(r)}};
}

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
