// What qtransit knows, as tables: `qtransit formats` (the built-in formats at a block) and `qtransit
// paths` (the built-in path declarations), in JSON (`--json`, Python's formats() and paths()) and text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/path_decl.hpp"

namespace qtransit::reports {

// One built-in format at `block` (its fixed block where it has one): the words for its element type,
// scale and rounding, its code range and what a block costs on the wire.
struct FormatRow {
    std::string format, element, scale, rounding;
    int bits = 0;
    int64_t fixed_block = 0;  // 0: any block
    int64_t code_min = 0, code_max = 0;
    int metadata_bytes = 0;   // per block
    int64_t block = 0, wire_bytes = 0;  // the block the row is at, and a block's bytes on the wire
};
struct FormatTable {
    int64_t block = 0;  // asked (a fixed-block format's row is at its own)
    std::vector<FormatRow> rows;
};
// {"block": ..., "formats": [...]}: a row's fields are the table's columns (docs: `qtransit formats --json`).
nlohmann::json to_json(const FormatTable& t);
// The table `qtransit formats` prints, with its note on what the columns mean.
std::string to_text(const FormatTable& t);

// {"paths": [...]}: each declaration's name, schedule, collective, exchange, wire, requantize, add,
// stored, divide, rotation, input, output (null where the run's option applies), saturates, source.
nlohmann::json paths_to_json(const std::vector<PathDecl>& paths);
// The table `qtransit paths` prints, with its note.
std::string paths_to_text(const std::vector<PathDecl>& paths);

}  // namespace qtransit::reports
