// Declared paths (issue 49, docs/PATHS.md): a collective path named by what it does, in TOML, and
// resolved to one of the schedules qtransit models (PathKind) with the settings that schedule takes
// (the add's type, the division, the wire format per stage, the rotation). Every built-in path is
// such a declaration (builtin_path_decls), and so are variants that exist only as declarations
// (NCCL's FP8 ncclAvg ones). A declaration that no modeled schedule computes is refused with the
// reason, so its bounds always follow from the schedule's (NUMERICS.md section 3).
// Every mistake is an Error naming "<source>:<line>:<column>: path[i].<key>: <what>".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"

namespace qtransit {

struct PathDecl {
    std::string name;    // as --path names it
    std::string source;  // where its arithmetic comes from (a citation; free text)
    // The declared fields, as written (or their defaults), for printing back.
    std::string collective, exchange, add, stored, requantize, scales;
    // "any": the run's --format; "none": values travel unquantized in `stored`'s type; else one
    // format name per quantizing stage (two for the paths with stages, format_stages()).
    std::vector<std::string> wire;
    // What it resolves to. Settings left out of the declaration are the run's (std::nullopt).
    PathKind kind = PathKind::kRingRs;
    std::optional<Accum> accum;
    std::optional<Divide> divide;
    std::optional<Rotation> rotation;
    // The type every output is rounded to at the end (PathConfig::output, D46): bf16 or fp16 as a
    // kernel writing such a tensor; left out (or fp32): the binary32 values as they are.
    std::optional<Accum> output;
    // The type the inputs are cast to first (PathConfig::input, D47); left out: as given.
    std::optional<Accum> input;

    // owner = "chunk" (left out: "") | "flashinfer-stripes" (PathConfig::flashinfer_stripes, D52):
    // which rank keeps its sum on two-shot-ar-keep.
    std::string owner;
    bool flashinfer_stripes() const { return owner == "flashinfer-stripes"; }
    // start = "first" (left out: "") | "zero" (PathConfig::sum_from_zero, D57): two-shot-ar's sum
    // starts from its first term (NUMERICS 3) or from +0, as a kernel that zeroes its accumulator.
    std::string start;
    // scales = "per-tensor" (PathConfig::tensor_scale, D50): one amax for the whole tensor.
    bool per_tensor() const { return scales == "per-tensor"; }
    bool wire_any() const { return wire.size() == 1 && wire[0] == "any"; }
    bool wire_none() const { return wire.size() == 1 && wire[0] == "none"; }
    // Whether it names its own wire formats (neither "any" nor "none").
    bool fixes_wire() const { return !wire_any() && !wire_none(); }
    // The wire as the CLI writes it: the names joined by ",".
    std::string wire_text() const {
        std::string w;
        for (const auto& f : wire) w += (w.empty() ? "" : ",") + f;
        return w;
    }
    // The add and stored types as the tables write them: "add/stored", one name when they are the
    // same, "run's" (the run's --accum) when neither is declared, "-" for an all-gather (no add).
    std::string types_text() const {
        if (add.empty() && stored.empty()) return path_info(kind).shape == PathShape::kAllGather ? "-" : "run's";
        return add == stored ? add : add + "/" + stored;
    }
    // Whether it is exactly the built-in path of its kind: same name, nothing fixed beyond it.
    bool is_builtin_kind() const { return name == path_info(kind).name; }
};

// What only a declaration sets (no option does) onto a run's config: its output and input types
// (D46, D47), a tensor's scale (D50) and who keeps a sum (D52). One place, for simulate and the gate
// (sweep), verify collective and a declaration's own check.
void apply_declared(const PathDecl& d, PathConfig& c);

// Every [[path]] table of a TOML document. `source` names it in messages (the file's path).
Result<std::vector<PathDecl>> parse_path_decls(const std::string& text, const std::string& source);
// A declaration file (at most kMaxConfigBytes): unreadable files and every mistake are Errors naming it.
Result<std::vector<PathDecl>> load_path_decls(const std::string& file);
// The TOML of one declaration ([[path]] table); parse_path_decls gives it back.
std::string path_decl_to_toml(const PathDecl& d);

// The built-in declarations: one per built-in path (all_paths(), its own name) and the variants that
// are declarations only (the six NCCL FP8 paths with ncclAvg: <name>-avg, divide = "pre").
const std::vector<PathDecl>& builtin_path_decls();
// A built-in or registered declaration by name; an Error listing the names known.
Result<PathDecl> find_path_decl(std::string_view name);
// Registers a user's declaration so --path can name it; the same declaration twice is fine, another
// one under a taken name (a built-in's included) is an Error.
Status register_path_decl(const PathDecl& d);
// What --path's arguments go through: a value ending in ".toml" is loaded, each of its declarations
// registered, and all of them returned; anything else is find_path_decl(arg).
Result<std::vector<PathDecl>> resolve_path_arg(std::string_view arg);
std::string known_path_decl_names();

}  // namespace qtransit
