// printf into a std::string: how the commands' and the reports' texts are built (gate/, reports/).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace qtransit {

// vprintf's text appended to out.
inline void vappendf(std::string& out, const char* fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, again);
    va_end(again);
    if (n <= 0) return;
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, ap);
    out.resize(at + static_cast<size_t>(n));
}

// printf's text appended to out.
[[gnu::format(printf, 2, 3)]] inline void appendf(std::string& out, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vappendf(out, fmt, ap);
    va_end(ap);
}

}  // namespace qtransit
