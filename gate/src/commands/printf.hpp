// printf into a std::string: the commands' text is built here, byte for byte what the command line
// printed with printf before the commands moved into gate/ (issue 48).
#pragma once

#include <cstdarg>
#include <algorithm>
#include <cstdio>
#include <string>

#include "qtransit/gate/commands.hpp"

namespace qtransit::gate {

[[gnu::format(printf, 2, 3)]] inline void appendf(std::string& out, const char* fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        const size_t at = out.size();
        out.resize(at + static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
        out.resize(at + static_cast<size_t>(n));
    }
    va_end(again);
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
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        std::string text(static_cast<size_t>(std::max(std::vsnprintf(nullptr, 0, fmt, ap), 0)) + 1, '\0');
        va_end(ap);
        std::vsnprintf(text.data(), text.size(), fmt, again);
        va_end(again);
        text.pop_back();
        (*this)(text);
    }

private:
    const Emit& emit_;
    std::string& out_;
};

}  // namespace qtransit::gate
