// A command's stdout as it is produced (Say); appendf (common) builds the commands' text, byte for
// byte what the command line printed with printf before the commands moved into gate/ (issue 48).
#pragma once

#include <cstdarg>
#include <string>

#include "qtransit/common/appendf.hpp"
#include "qtransit/gate/commands.hpp"

namespace qtransit::gate {

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
