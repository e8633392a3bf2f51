// What the TOML readers of format declarations (decl_toml.cpp) and of gate configs (gate/src/config.cpp)
// share. Private: toml++ stays out of every installed header (TOML_EXCEPTIONS=1, compiled mode: qt_toml).
#pragma once

#include <string>

#include <toml++/toml.h>

#include "qtransit/common/format.hpp"

namespace qtransit::detail {

// A declaration from a table already parsed (a gate config's [[format]] entry). `prefix` is put
// before every key in messages ("format[0]."), `source` before the line.
Result<FormatSpec> declaration_from_table(const toml::table& t, const std::string& source, const std::string& prefix);

// "a string", "an integer", ...: a TOML value's type for error messages (declarations, gate configs).
const char* type_name(const toml::node& n);

// Where a declaration's mistake is: `source` (the file) and `prefix` ("path[0]."), put before the key
// in every message. err() gives "<source>:<line>:<column>: <prefix><key>: <what>", one line: keys
// and values are the user's text (a quoted key or a string may hold a newline), escaped.
struct TomlCtx {
    std::string source, prefix;
    Error err(const toml::source_region& at, const std::string& key, const std::string& what) const;
};
// A string value, or an Error saying what it was instead.
Result<std::string> get_str(const TomlCtx& c, const toml::node& n, const std::string& key);

// toml::parse, after a check for the code points on which toml++ 3.3 (Debian 12) reaches
// __builtin_unreachable (U+00A1..U+0499, U+2C5E..U+3057 but U+3000, U+FB26..U+FEFE, wherever it tests
// for whitespace: found by the fuzz target decl_fuzz): they are refused before it sees the text. The
// Error says "<source>:<line>:<column>: ...", its description escaped to one line.
Result<toml::table> parse_toml(const std::string& text, const std::string& source);

}  // namespace qtransit::detail
