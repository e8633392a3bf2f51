// Format declarations in TOML (docs/FORMATS.md section 8): a user's file becomes a FormatSpec of
// kind kDecl, and any declarable format prints back as a file that parses to the same Decl. Every
// mistake is an Error naming "<source>:<line>:<column>: <key>: <what>".
#pragma once

#include <string>
#include <string_view>

#include "qtransit/common/format.hpp"

// toml++ is private to qt_common (src/toml_table.hpp has what the gate's config parser shares).
namespace qtransit {

// A declaration from a TOML document's text. `source` names it in messages (the file's path).
Result<FormatSpec> parse_declaration(const std::string& text, const std::string& source);
// A declaration file: unreadable files and every mistake in them are Errors naming the path.
Result<FormatSpec> load_declaration(const std::string& path);

// The TOML text of a format's declaration (built-in or declared); ds-int<b> has none (the Error
// says why). Floats print shortest round-trip, so parse_declaration(text) gives back the same Decl.
Result<std::string> declaration_to_toml(const FormatSpec& f);

// Whether two declarations have the same declared fields (the derived ones follow from them).
bool same_declaration(const Decl& a, const Decl& b);

// What every format argument of the CLI goes through: a value ending in ".toml" is loaded as a
// declaration and registered (register_format) so it can be named afterwards (loading the same
// declaration twice gives the format already registered); anything else is parse_format(arg).
Result<FormatSpec> resolve_format(std::string_view arg);
inline bool is_declaration_file(std::string_view arg) { return arg.size() > 5 && arg.ends_with(".toml"); }
// Registers f, or finds it registered already with the same declaration (an Error if the name is
// taken by a different format).
Status register_or_find(const FormatSpec& f);

// The stochastic-rounding twin of a format (`--rounding stochastic`): int<b> -> int<b>-sr,
// fp8-* -> fp8-*-sr, a stochastic format -> itself, a user-declared int or float format NAME -> a
// copy with rounding stochastic named NAME-sr (registered). Anything else is an Error listing the
// formats that have one.
Result<FormatSpec> stochastic_twin(const FormatSpec& f);
// `--rounding nearest|stochastic` applied to a format.
Result<FormatSpec> apply_rounding(const FormatSpec& f, std::string_view rounding);

}  // namespace qtransit
