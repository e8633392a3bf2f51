// libFuzzer: the command's number rules (cli/options.hpp) on arbitrary option values (issue 46: hex
// skipped the limit checks, a 2^64 seed saturated, "010" was octal). One App with an option of each
// kind the command has, under decimal_numbers_only as the command builds it. For every input: either
// a refusal whose message is one line of bounded length once printed as the command prints it, or a
// value equal to the input read as decimal digits (a '+' and leading zeros aside) and within its
// option's range. Anything else (a wrapped, saturated, octal or hex value) is a finding.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "options.hpp"
#include "qtransit/common/status.hpp"

namespace {

// The input as a decimal number's digits: sign and digits with leading zeros taken off, or "" when
// it is not one.
std::string decimal(const std::string& v, bool& neg) {
    neg = v.starts_with('-');
    std::string d = v.starts_with('-') || v.starts_with('+') ? v.substr(1) : v;
    if (d.empty()) return "";
    for (char c : d)
        if (c < '0' || c > '9') return "";
    d.erase(0, std::min(d.find_first_not_of('0'), d.size() - 1));
    return d;
}

bool decimal_le(const std::string& a, const std::string& b) { return a.size() < b.size() || (a.size() == b.size() && a <= b); }

template <class T>
void one(const std::string& value, const char* flag, const CLI::Validator* check, const std::string& max_digits, bool allow_negative) {
    CLI::App app{"fuzz"};
    T v{};
    auto* o = app.add_option(flag, v, "a number");
    if (check) o->check(*check);
    qtransit::cli::decimal_numbers_only(app);
    std::string s1 = "fuzz", s2 = flag, s3 = value;
    char* argv[] = {s1.data(), s2.data(), s3.data()};
    bool neg = false;
    const std::string d = decimal(value, neg);
    try {
        app.parse(3, argv);
    } catch (const CLI::ParseError& e) {
        const std::string line = qtransit::one_line(e.what());
        if (line.find('\n') != std::string::npos || line.size() > 1200) __builtin_trap();
        for (unsigned char c : line)
            if (c < 0x20 || c == 0x7f) __builtin_trap();
        return;
    }
    // Accepted: it must be the decimal number the user typed, within range.
    if (d.empty()) __builtin_trap();
    if (neg && d != "0" && !allow_negative) __builtin_trap();
    if (!max_digits.empty() && !neg && !decimal_le(d, max_digits)) __builtin_trap();
    const std::string got = std::to_string(v);
    if (got != ((neg && d != "0") ? "-" + d : d)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 4096) return 0;
    const std::string value(reinterpret_cast<const char*>(data), size);
    if (value.find('\0') != std::string::npos) return 0;  // an argv string cannot hold one
    using namespace qtransit::cli;
    one<int64_t>(value, "--count", &non_negative, "9223372036854775807", false);
    one<uint64_t>(value, "--seed", &seed_value, "18446744073709551615", false);
    one<int>(value, "--threads", &thread_count, std::to_string(kMaxThreads), false);
    one<int64_t>(value, "--elements", &fits_int64, "9223372036854775807", true);
    return 0;
}
