// The rules every option of the `qtransit` command is held to (issue 46), apart from the commands so
// that a fuzz target (properties/fuzz/cli_numbers_fuzz.cpp) runs the same ones: whole numbers in
// decimal digits within their range, no empty value, and one-line error text.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace qtransit::cli {

// Whole numbers 0..limit (limit in decimal, named `what` in the message); a negative value refused.
CLI::Validator up_to(const std::string& limit, const std::string& what, const std::string& name);
extern const CLI::Validator non_negative;   // counts: 0 to 2^63 - 1
extern const CLI::Validator seed_value;     // seeds: 0 to 2^64 - 1
extern const CLI::Validator fits_int64;     // signed counts other checks bound: what int64 holds
extern const CLI::Validator thread_count;   // threads: 0 (all) to kMaxThreads
extern const CLI::Validator decimal_digits; // a transform: decimal digits only, normalized
inline constexpr int kMaxThreads = 4096;
// Every integer option of app and its subcommands takes decimal_digits.
void decimal_numbers_only(CLI::App& app);
// The first option of the command that ran given an empty value ("" if none).
std::string empty_value(const CLI::App& app);
// The first comma-separated list option (one with CLI11's ',' delimiter) given an empty item in the
// command that ran ("int8,,int4", ",x", "x,", ","), as "--name: 'value' has an empty item ...": CLI11
// drops empty items, so `simulate --path a2a-rs,,ring-rs` ran as if the comma were single.
// "" when none. Read from argv after parsing (CLI11 keeps only the split items).
std::string empty_list_item(const CLI::App& app, int argc, const char* const* argv);

}  // namespace qtransit::cli
