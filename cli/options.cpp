#include "options.hpp"

#include <algorithm>

#include "qtransit/common/status.hpp"

namespace qtransit::cli {
namespace {
// Whether the decimal digits of v (after an optional '+') are at most `limit`, itself a decimal:
// CLI11 converts with strtoll/strtoull and keeps their saturated result, so 2^64 became 2^64 - 1 (a
// seed the user never typed) and 10^20 elements became 2^63 - 1. Anything else (hex, a word) is
// left to CLI11's own conversion.
bool decimal_past(const std::string& v, const std::string& limit) {
    std::string d = v.starts_with('+') ? v.substr(1) : v;
    if (d.empty() || !std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    d.erase(0, std::min(d.find_first_not_of('0'), d.size() - 1));
    return d.size() > limit.size() || (d.size() == limit.size() && d > limit);
}
}  // namespace

// A validator of whole numbers 0..limit (limit in decimal, named `what` in the message). A negative
// value is refused here: CLI11's own range check prints DBL_MAX.
CLI::Validator up_to(const std::string& limit, const std::string& what, const std::string& name) {
    return CLI::Validator(
        [limit, what](std::string& v) {
            if (v.starts_with('-')) return "must be >= 0, got " + v;
            if (decimal_past(v, limit)) return v + " is past " + what;
            return std::string();
        },
        name);
}
// Counts: 0 to 2^63 - 1.
const CLI::Validator non_negative = up_to("9223372036854775807", "the largest count, 2^63 - 1", "NON-NEGATIVE");
// Seeds: 0 to 2^64 - 1.
const CLI::Validator seed_value = up_to("18446744073709551615", "the largest seed, 2^64 - 1", "SEED");
// Signed counts that other checks bound (--elements, --ranks): only what int64 cannot hold.
const CLI::Validator fits_int64(
    [](std::string& v) {
        if (decimal_past(v.starts_with('-') ? v.substr(1) : v, "9223372036854775807")) return v + " is past what a 64-bit count holds";
        return std::string();
    },
    "INT64");
// Threads: at most this many (bench started 100,000 threads when asked).
const CLI::Validator thread_count = up_to(std::to_string(kMaxThreads), "the limit of " + std::to_string(kMaxThreads) + " threads", "THREADS");

// Whole numbers in decimal digits, an optional sign first (issue 46: `bench --threads 0x1001` passed
// the limit checks, which read decimal, and CLI11 then converted the hex to 4097; it reads "010" as
// octal 8). Leading zeros and a '+' are taken off, so CLI11's conversion sees plain decimal.
const CLI::Validator decimal_digits(
    [](std::string& v) {
        const bool neg = v.starts_with('-');
        std::string d = v.starts_with('-') || v.starts_with('+') ? v.substr(1) : v;
        if (d.empty() || !std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return "must be a whole number in decimal digits, got " + v;
        d.erase(0, std::min(d.find_first_not_of('0'), d.size() - 1));
        v = (neg && d != "0" ? "-" : "") + d;
        return std::string();
    },
    "DECIMAL");

// Every integer option of app and its subcommands takes decimal_digits: one rule, so an option added
// later cannot miss it.
void decimal_numbers_only(CLI::App& app) {
    for (CLI::Option* o : app.get_options()) {
        const std::string t = o->get_type_name();
        if (t.rfind("INT", 0) == 0 || t.rfind("UINT", 0) == 0) o->transform(decimal_digits);
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) decimal_numbers_only(*sub);
}

// The first option given an empty value, in the command that ran (issue 46: `--codec ''` ran
// qtransit's own kernels and passed, `--config ''` the default gate, `--baseline ''` compared
// nothing): "" is refused, not taken as "not given". An option whose help says `"": none` is the
// exception that says so.
std::string empty_value(const CLI::App& app) {
    for (const CLI::Option* o : app.get_options()) {
        if (o->count() == 0 || o->get_description().find("(\"\": none)") != std::string::npos) continue;
        for (const auto& r : o->results())
            if (r.empty()) return o->get_name();
    }
    for (const CLI::App* sub : app.get_subcommands())
        if (auto n = empty_value(*sub); !n.empty()) return n;
    return "";
}


std::string empty_list_item(const CLI::App& app, int argc, const char* const* argv) {
    std::vector<const CLI::App*> chain{&app};
    while (true) {
        const auto subs = chain.back()->get_subcommands();
        if (subs.empty()) break;
        chain.push_back(subs.front());
    }
    auto list_option = [&](const std::string& name) -> const CLI::Option* {
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
            if (const CLI::Option* o = (*it)->get_option_no_throw(name)) return o->get_delimiter() == ',' ? o : nullptr;
        return nullptr;
    };
    auto has_empty_item = [](const std::string& v) {
        return v.empty() || v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string tok = argv[i];
        if (tok.size() < 2 || tok[0] != '-') continue;
        std::string name = tok, value;
        bool have = false;
        if (const size_t eq = tok.find('='); eq != std::string::npos && tok.rfind("--", 0) == 0) {
            name = tok.substr(0, eq);
            value = tok.substr(eq + 1);
            have = true;
        } else if (i + 1 < argc) {
            value = argv[i + 1];
            have = value.empty() || value[0] != '-' || value.size() == 1 || value.find(',') != std::string::npos;
        }
        if (!have || value.find(',') == std::string::npos) continue;
        if (const CLI::Option* o = list_option(name); o && has_empty_item(value))
            return o->get_name() + ": '" + printable(value, 80) + "' has an empty item (items are separated by single commas)";
    }
    return "";
}

}  // namespace qtransit::cli
