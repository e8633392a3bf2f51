// One `verify collective` (a collective run elsewhere, judged from its dumps): what ran, each tier's
// verdict, whether the ranks hold the same bits, and the error of the run and of qtransit's schedule
// on the same inputs. Plain data, filled by gate's verified_collective; `qtransit verify collective`
// and Python's verify_collective print it, and its report carries it (report.json's `verify`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qtransit::reports {

struct VerifiedCollective {
    std::string path;      // as asked: a declared path's own name (D45)
    std::string schedule;  // the built-in schedule it runs
    bool declared = false; // a declared path (then JSON names its schedule too)
    std::string format, accum;
    int64_t ranks = 0, ranks_per_node = 0, elements = 0, block = 0;
    bool mean = false;     // the target: the mean, else the sum
    std::vector<int64_t> ring_order;
    std::string asked;     // the tier judged
    bool asked_default = false;
    bool holds = false;    // the asked tier, and same bits where that applies
    std::string strongest; // the strongest tier that holds ("" none)
    struct Tier {
        std::string tier;
        bool exact = false;          // the exact tier (its ratio is in ulps; the text shows none)
        std::string not_applicable;  // why it cannot judge this run ("" when it can)
        bool holds = true;
        int64_t checked = 0, violations = 0;
        double max_ratio = 0;        // infinite: null in JSON
        std::string first;
        int64_t first_pos = -1, first_rank = -1;
    };
    std::vector<Tier> tiers;
    bool same_bits_applies = false, same_bits = true;
    int64_t same_bits_checked = 0, same_bits_pos = -1;
    std::string same_bits_first;
    int64_t outputs = 0, differing_from_schedule = 0;
    int32_t k_min = 0, k_max = 0;
    bool have_k = false;
    struct Error {
        double max_abs = 0, rel_rms = 0, mean = 0, sum_sq = 0, sum = 0;
    };
    Error run, simulation;  // the run's outputs, qtransit's schedule on the same inputs
    double sum_sq_target = 0;
};
// `qtransit verify collective --json`'s object (docs/REPORT.md).
nlohmann::json to_json(const VerifiedCollective& v);
// Its text: one line per tier, same bits, the error, the strongest tier met, the verdict.
std::string to_text(const VerifiedCollective& v);

}  // namespace qtransit::reports
