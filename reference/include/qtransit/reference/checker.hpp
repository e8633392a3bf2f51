// The path checker (NUMERICS.md section 5): streams the ColumnRecords of one collective path and,
// for every output value of every row, compares in exact arithmetic
//   |error| <= a_posteriori <= a_priori,
// where error = value - exact target (a SuperAcc sum of the contribution rows, or the gathered row),
// a_posteriori = the sum over the row's ledger of each quantization event's E(x_i) plus the
// floating-point add (and binary16 term) rounding terms, and a_priori = a bound from the input
// block statistics alone (absmax of each contribution row, or first_block_absmax for gather paths),
// derived per path in checker.cpp. Both bounds are doubles that are rigorous upper bounds of the
// exact real quantities (see checker.cpp for the rounding argument).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reference/superacc.hpp"

namespace qtransit::reference {

struct PathStats {
    int64_t outputs_checked = 0;       // output values (every element of every row)
    double max_abs_error = 0;          // max |value - target| (finite outputs)
    double sum_sq_error = 0, sum_sq_target = 0;
    double rel_rms_error() const;      // sqrt(sum_sq_error / sum_sq_target), 0 if the target is 0
    double max_a_posteriori = 0, max_a_priori = 0;
    double max_error_to_a_posteriori = 0;  // max |error| / a_posteriori
    bool bound_holds = true;           // every |error| <= a_post <= a_priori, and no non-finite output
    int64_t violations = 0;
    std::string first_violation;       // which column, row rank, element and values
    int32_t k_min = 0, k_max = 0;      // over every contributor of every output row (from the ledger)
    int64_t nonfinite_outputs = 0;
    // NCCL's FP8 paths (D41): output values that a saturated add reached, and the most clamps on
    // one value's way. Their error is in the a-posteriori bound (what each clamp removed); the
    // a-priori bound is infinite wherever a clamp can happen.
    int64_t saturated_outputs = 0;
    int32_t max_saturations = 0;
};

namespace detail {
// What the per-element bound of one quantization event needs, computed once per event (checker.cpp).
struct EventBound {
    FormatKind kind = FormatKind::kSym;
    bool poisoned = false;  // NaN scale/offset: the decoded block is NaN
    double sym = 0;         // int<b>: E, the same for every element of the block
    bool asym_const = false;
    double asym_a = 0;      // int<b>-asym: A of D9
    bool ds_zero = false;
    int ds_top = 0;         // ds: 2^(b-1)
    float ds_scale = 0;
    double ds_step = 0;
    // ds-int<b>-fm: the extremes over the admissible scales and steps of the block's absmax (D23)
    bool ds_fm = false;
    float fm_scale_max = 0;
    double fm_step_max = 0, fm_tau = 0;
    const Decl* decl = nullptr;  // declared formats: FORMATS.md section 6 from x, the scale and lo
    float decl_scale = 0, decl_lo = 0, decl_m = 0;  // decl_m: the block's multiplier (the scales that multiply)
    int bits = 0;                  // quickreduce-q<b>: b
    float qr_dec = 0, qr_enc = 0;  // quickreduce-q<b>: the stored scale dec and the encode factor
    double qr_kappa = 0;           // |1 - enc dec| (exact: both are binary16 values)
    bool rotated = false;        // rotated formats: one bound for every element (rotated.cpp)
    double rot = 0;
    double at(float x, int32_t q) const;  // E(x_i) for the element x with code q
};
// An event's contributors when they are a ring range (PathChecker::add's copy, for k).
struct EvRange {
    int64_t first = 0, count = 0;
};
// A column's contribution rows, as PathChecker::add reads them (reference/src/column_scan.cpp).
// Over every |x| as bits: the largest (inf and NaN above every finite), the largest that is a
// number (NaNs passed over), the smallest non-zero (0x7F800000 if none below it).
struct ColumnScan {
    uint32_t top = 0, top_number = 0, lo = 0x7F800000u;
};
// rows x n values, row-major: absmax[r] = the largest |x| of row r that is a number (NaNs passed
// over, 0 for an empty row). simd: the AVX-512 loops where the CPU has them (column_simd()), else
// the portable ones; the two give the same results.
ColumnScan scan_column(const float* x, size_t rows, size_t n, double* absmax, bool simd = true);
// t[i] += x[r][i] * up as an int64 (truncated; exact when up is a power of two that makes every
// x an integer below 2^62 / rows), over every row.
void add_scaled_rows(const float* x, size_t rows, size_t n, double up, int64_t* t, bool simd = true);
bool column_simd();
// Whether every x of a column so scanned is an integer multiple of 2^grid and rows * max|x| < 2^(62 +
// grid) (finite x only): then add_scaled_rows with up = 2^-grid is exact.
bool grid_fits(const ColumnScan& cs, size_t rows, int grid);
// scan_column and add_scaled_rows(up = 2^-grid) in one pass over x where it can (AVX-512, n <= 32):
// `summed` tells whether t holds the exact sums added (grid_fits); when it is false, t is
// unspecified (it may hold truncated or overflowed sums).
ColumnScan scan_add_scaled(const float* x, size_t rows, size_t n, double* absmax, int grid, int64_t* t, bool& summed,
                           bool simd = true);
// acc[i] += E(x[i]) for i < n: the a-posteriori bound of each element of a declared format's block
// of scale s (and offset lo, for an offset format; FORMATS.md section 6), as PathChecker::add adds
// it. simd: eight elements at a time with AVX-512 where the CPU has it (column_simd()), else one
// at a time; the two give the same bits.
void add_decl_bounds(const Decl& d, float s, float lo, float m, const float* x, size_t n, double* acc, bool simd = true);
}  // namespace detail

class PathChecker {
public:
    explicit PathChecker(const PathConfig& config);
    void add(const ColumnRecord& column);
    void merge(const PathChecker& other);
    PathStats stats() const;
    // The exact sums behind stats()'s sum_sq_error and sum_sq_target, for a caller that combines
    // checkers of other processes (--backend mpi) as merge() does.
    const DoubleAcc& exact_sum_sq_error() const { return sum_sq_error_; }
    const DoubleAcc& exact_sum_sq_target() const { return sum_sq_target_; }

private:
    void record_violation(int64_t first, int64_t rank, int64_t element, const std::string& what);
    // add()'s phases for one column (checker.cpp), in order: its shape; its exact targets and every
    // event's statistics (one scan); its a-priori bounds and the events the scan left; then for each
    // output row its k, its a-posteriori bound, and its values against both. ColumnState carries
    // what they share, the state from one row to the next included.
    struct ColumnState;
    bool well_formed(const ColumnRecord& col);
    void column_targets(const ColumnRecord& col, ColumnState& c);
    void column_prior(const ColumnRecord& col, ColumnState& c);
    void row_k(const ColumnRecord& col, const OutputRow& row, ColumnState& c);
    bool row_a_posteriori(const ColumnRecord& col, const OutputRow& row, ColumnState& c);
    void check_row(const ColumnRecord& col, const OutputRow& row, ColumnState& c);
    void add_repeats(ColumnState& c);  // the sums of the rows equal to the last clean one, added as one term
    void requant_table(ColumnState& c, double ai);
    SuperAcc exact_error(const ColumnRecord& col, double sc, size_t i, float v) const;
    double grid_error(size_t i, float v, int64_t n, double sc) const;

    PathConfig cfg_;
    PathStats st_;
    // The sums of squared errors and targets: each output row's own sums (in element order, the
    // same in any run) added exactly, so that stats() gives the same bits however the columns were
    // shared among threads, or the rows among processes, and merged (D34).
    DoubleAcc sum_sq_error_, sum_sq_target_;
    bool have_k_ = false;
    // Position of the first violation (column start + element, then row rank): merge() keeps the
    // lowest, so that a sharded check reports the same first violation as a sequential one.
    int64_t first_pos_ = -1, first_rank_ = -1;
    // Per-column scratch, kept between columns to avoid allocation.
    std::vector<SuperAcc> acc_;
    std::vector<double> absmax_, apost_;
    std::vector<detail::EventBound> evb_;
    bool int_sum_ = false;                 // this column's targets are exact int64 sums on the grid 2^grid_ (checker.cpp)
    int grid_ = 0;
    // The grid the next column's int64 sums are tried on, in the scan's pass (from the previous
    // column's range of values), or kNoGrid.
    static constexpr int kNoGrid = std::numeric_limits<int>::min();
    int guess_grid_ = kNoGrid;
    int64_t ks_base_ = 0;                  // the contributor ks[0] stands for (a gather's first owner, or 0)
    std::vector<int64_t> tint_;
    std::vector<float> last_value_;        // per element: the previous row's value and its error
    std::vector<double> last_err_;
    std::vector<uint8_t> have_last_;
    std::vector<double> pre_extra_;        // --divide pre: per element, the divisions' bound summed over the rows
    struct Buffers {  // the rest of add()'s per-column state, kept for its capacity only
        std::vector<double> target, snap, whole, prev_apost;
        std::vector<uint8_t> ev_ok;
        std::vector<double> ev_sym;
        std::vector<detail::EvRange> ev_range;
        std::vector<int32_t> diff;
        std::vector<int32_t> ks;
        std::vector<float> prev_values;
    } s_;
};

// Least-squares slope of log(rel_rms) on log(n) (points with n <= 0 or rel_rms <= 0 or non-finite
// are skipped; NaN if fewer than two points remain or all n are equal).
double fit_exponent(std::span<const double> n, std::span<const double> rel_rms);

// ---- the pieces, exposed for tests ------------------------------------------------------------------

// The per-element bound E(x_i) of one quantization event (the checker's double mirror of
// reference::element_bound, from the event's x, codes and scale), rounded to nearest at every step
// but never below the exact E by more than a factor (1 - 2^-50): the checker inflates the sum of
// these by (1 + 2^-30). ev.x and ev.codes must hold the whole block; i indexes them.
// A rotated format's event needs its signs' key: the run's seed and the index of the block's first
// element (the column's first minus the event's column_offset).
double event_element_bound(const FormatSpec& format, const QuantEvent& ev, int64_t i, uint64_t seed = 0,
                           int64_t first = 0);

// e(a): a bound of E(x) for every element of every block (of this format) whose absmax is <= a.
// Monotone non-decreasing in a. Rounded to nearest (not inflated).
// A rotated format's e(a) also depends on the block length (at most `block`; FORMATS.md section 9).
double event_bound_of_absmax(const FormatSpec& format, double a, int64_t block = kDefaultBlock);

// The a-priori bound (inflated by 1 + 2^-20; +inf where the binary16 accumulation can overflow) of
// the error of an output held by `row_rank` in the column starting at `first`, from the absmax of
// each contribution row. Reduce paths: N values, the absmax of rank j's row in the column. Gather
// paths: absmax[0] = the absmax of the block the element was first quantized in, and optionally
// absmax[1] = the largest such absmax over the column (hpz-ag-requant's secondary block; defaults to
// absmax[0]).
double a_priori_bound(const PathConfig& config, int64_t first, int64_t row_rank, std::span<const double> absmax);

}  // namespace qtransit::reference
