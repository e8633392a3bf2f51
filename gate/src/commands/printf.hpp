// printf into a std::string: the commands' text is built here, byte for byte what the command line
// printed with printf before the commands moved into gate/ (issue 48).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

#include "qtransit/gate/commands.hpp"

namespace qtransit::gate {

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

[[gnu::format(printf, 2, 3)]] inline void appendf(std::string& out, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vappendf(out, fmt, ap);
    va_end(ap);
}

// A command's stdout: to `emit` as it is produced when one is given, else into `out`.
class Say {
public:
    Say(const Emit& emit, std::string& out) : emit_(emit), out_(out) {}
    void operator()(const std::string& text) const {
        if (emit_) emit_(text);
        else out_ += text;
    }
    [[gnu::format(printf, 2, 3)]] void f(const char* fmt, ...) const {
        std::string text;
        va_list ap;
        va_start(ap, fmt);
        vappendf(text, fmt, ap);
        va_end(ap);
        (*this)(text);
    }

private:
    const Emit& emit_;
    std::string& out_;
};

}  // namespace qtransit::gate
