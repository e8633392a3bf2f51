// junit.xml: one testsuite per verdict category, one testcase per verdict.
#include <map>
#include <sstream>

#include "qtransit/reports/gate_result.hpp"

namespace qtransit::reports {

std::string xml_escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&#39;"; break;
            default:
                // XML 1.0 forbids most control characters.
                if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') o += ' ';
                else o += c;
        }
    }
    return o;
}

std::string to_junit(const GateResult& r) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Verdict*>> by;
    for (const auto& v : r.verdicts) {
        if (!by.count(v.category)) order.push_back(v.category);
        by[v.category].push_back(&v);
    }
    std::ostringstream o;
    o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    o << "<testsuites name=\"qtransit check\" tests=\"" << r.verdicts.size() << "\" failures=\""
      << r.count(VerdictStatus::kFail) << "\" skipped=\"" << r.count(VerdictStatus::kSkip) << "\" time=\""
      << r.wall_seconds << "\">\n";
    for (const auto& c : order) {
        const auto& vs = by[c];
        int64_t fail = 0, skip = 0;
        for (const auto* v : vs) {
            fail += v->status == VerdictStatus::kFail;
            skip += v->status == VerdictStatus::kSkip;
        }
        o << "  <testsuite name=\"" << xml_escape(c) << "\" tests=\"" << vs.size() << "\" failures=\"" << fail
          << "\" errors=\"0\" skipped=\"" << skip << "\">\n";
        for (const auto* v : vs) {
            o << "    <testcase classname=\"qtransit." << xml_escape(c) << "\" name=\"" << xml_escape(v->name) << "\"";
            if (v->status == VerdictStatus::kPass) {
                o << ">\n      <system-out>" << (v->checked >= 0 ? "checked " + std::to_string(v->checked) + ": " : std::string())
                  << xml_escape(v->message) << "</system-out>\n    </testcase>\n";
            } else if (v->status == VerdictStatus::kFail) {
                o << ">\n      <failure message=\"" << xml_escape(v->message) << "\">" << xml_escape(v->message)
                  << "</failure>\n    </testcase>\n";
            } else {
                o << ">\n      <skipped message=\"" << xml_escape(v->message) << "\"/>\n    </testcase>\n";
            }
        }
        o << "  </testsuite>\n";
    }
    o << "</testsuites>\n";
    return o.str();
}

}  // namespace qtransit::reports
