// The schedules of NUMERICS.md section 3, one column at a time. Each path is a sequence of sends
// and receives over the Transport; the values a rank holds travel with their provenance (which
// quantization events and which adds produced them), and that provenance becomes the ledger.
#include "qtransit/collectives/paths.hpp"
#include "qtransit/kernels/plugin.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <thread>

#include "qtransit/collectives/device.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "message_codec.hpp"

namespace qtransit::collectives {

void GeneratedInputs::fill(int64_t rank, int64_t first, int64_t len, float* out) const {
    for (int64_t i = 0; i < len; ++i)
        out[i] = kernels::generate(dist_, seed_, static_cast<uint32_t>(rank), static_cast<uint64_t>(first + i));
}

GeneratedTable::GeneratedTable(kernels::Distribution d, uint64_t seed, int64_t ranks, int64_t elements)
    : ranks_(ranks), m_(elements), x_(static_cast<size_t>(ranks * ((elements + kTile - 1) / kTile) * kTile)) {
    // Rows split between the hardware threads: each value depends on its rank and index only.
    const int64_t parts = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(ranks, 1));
    auto rows = [&](int64_t part) {
        std::vector<float> row(static_cast<size_t>(elements));
        for (int64_t r = part; r < ranks; r += parts) {
            kernels::generate_span(d, seed, static_cast<uint32_t>(r), 0, row);
            for (int64_t first = 0; first < elements; first += kTile)
                std::memcpy(x_.data() + ((first / kTile) * ranks + r) * kTile, row.data() + first,
                            static_cast<size_t>(std::min(kTile, elements - first)) * sizeof(float));
        }
    };
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < parts; ++t) pool.emplace_back(rows, t);
    rows(0);
    for (auto& t : pool) t.join();
}

void GeneratedTable::fill(int64_t rank, int64_t first, int64_t len, float* out) const {
    while (len > 0) {  // tile by tile
        const int64_t tile = first / kTile, off = first - tile * kTile, n = std::min(len, kTile - off);
        std::memcpy(out, x_.data() + (tile * ranks_ + rank) * kTile + off, static_cast<size_t>(n) * sizeof(float));
        out += n;
        first += n;
        len -= n;
    }
}

void ArrayInputs::fill(int64_t rank, int64_t first, int64_t len, float* out) const {
    std::memcpy(out, x_.data() + rank * m_ + first, static_cast<size_t>(len) * sizeof(float));
}

namespace {

bool is_hpz(PathKind p) { return p == PathKind::kHpzAgFp || p == PathKind::kHpzAgRequant; }

}  // namespace

int64_t column_count(const PathConfig& c) {
    if (is_hpz(c.path)) {
        const int64_t sec = c.elements / c.ranks_per_node;  // M / G elements per secondary shard
        return c.ranks_per_node * ((sec + c.block - 1) / c.block);
    }
    const int64_t s = c.shard();
    return c.ranks * ((s + c.block - 1) / c.block);
}

std::pair<int64_t, int64_t> column_at(const PathConfig& c, int64_t index) {
    const int64_t span = is_hpz(c.path) ? c.elements / c.ranks_per_node : c.shard();
    const int64_t per = (span + c.block - 1) / c.block;
    const int64_t part = index / per, b = index % per;
    const int64_t first = part * span + b * c.block;
    return {first, std::min(c.block, span - b * c.block)};
}

namespace {

// A failure inside a schedule (a refused input); turned into a Status at run_column's boundary.
struct ColumnFailure {
    Error error;
};

// What produced each value a rank holds: the quantization events (ledger ids) and the adds.
struct Provenance {
    std::vector<int32_t> ids;
    std::vector<int32_t> rids;  // the 16-bit paths' roundings (ColumnRecord::roundings, D26)
    std::vector<double> add_abs, tr_abs;
    std::vector<int32_t> add_n, tr_n;
    std::vector<double> sat_ex;  // NCCL's FP8 paths (D41): what saturated adds clamped away
    std::vector<int32_t> sat_n;  // and how many saturated
};

struct Partial {
    std::vector<float> v;
    Provenance p;
    int64_t holder = -1;  // the rank whose buffer holds it (device transports; -1: not tracked)
};

class Column {
public:
    Column(const PathConfig& c, const Inputs& in, Transport& t, int64_t first, int64_t len, ColumnRecord& rec)
        : c_(c), in_(in), t_(t), first_(first), len_(len), rec_(rec), accum_(c.accum), low_(low_precision(c.accum)), sat_(saturating(c.accum)), out_sat_(saturating(c.output)),
          typed_(typed_path(c.path)), rot_(c.rotation == Rotation::kEndToEnd), dev_(t.device_ops()), codec_(codec_of(c, dev_)) {
        t_.begin_column();
        rec_.first = first;
        rec_.len = len;
        rec_.rotated_sum = rot_;
        rec_.first_block_absmax.clear();
        rec_.roundings.clear();
        n_rows_ = 0;
        n_events_ = 0;
        // About one kept ledger per rank and stage (a2a: N, a ring: N - 1, two-shot: N + 1): room
        // for them at once, not a doubling and a move of every ledger so far each time it fills.
        provenance_.reserve(static_cast<size_t>(2 * std::max<int64_t>(c.ranks, 1) + 2));
    }

    ~Column() {
        rec_.outputs.resize(n_rows_);
        rec_.events.resize(n_events_);
    }

    int64_t len() const { return len_; }

    // X_rank over this column (or over [first, first+len) for hpz's forward blocks).
    Partial input(int64_t rank) { return input_range(rank, first_, len_); }

    Partial input_range(int64_t rank, int64_t first, int64_t len) {
        Partial p;
        p.v.resize(static_cast<size_t>(len));
        in_.fill(rank, first, len, p.v.data());
        for (int64_t i = 0; i < len; ++i) {
            if (!std::isfinite(p.v[static_cast<size_t>(i)])) {
                Site site;
                site.tensor = in_.name();
                site.rank = rank;
                site.index_base = first;
                throw ColumnFailure{kernels::describe_block_error(c_.format, p.v.data(), len, 0, site)};
            }
        }
        // A 16-bit path's inputs are of its type, as real gradients already are (D26), and so are a
        // path's with a declared input type (D47): cast here, and a value the type cannot hold is
        // refused, as ds-int<b> refuses one past binary16.
        // (An FP8 input type on a 16-bit path, D49: cast to FP8, which its type then holds exactly.)
        const Accum cast = c_.input != Accum::kFp32 ? c_.input : typed_ ? accum_ : Accum::kFp32;
        if (typed_ || cast != Accum::kFp32)
            for (int64_t i = 0; i < len; ++i) {
                float& v = p.v[static_cast<size_t>(i)];
                const float r = kernels::cast_to(v, cast);  // FP8: one rounding from binary32 (D49)
                if (!std::isfinite(r) || kernels::cast_saturates(v, cast)) {
                    Site site;
                    site.tensor = in_.name();
                    site.rank = rank;
                    site.index_base = first;
                    char buf[64];
                    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
                    throw ColumnFailure{make_error(ErrorCode::kRangeOverflow,
                                                   describe(site, i) + ": value " + buf + " overflows " + to_string(cast) +
                                                       (cast == accum_ && typed_ ? ", the element type of " : ", the input type of ") + c_.path_name() +
                                                       " (its inputs are cast to it first)")};
                }
                v = r;
            }
        clear_provenance(p.p);
        p.holder = rank;
        return p;
    }

    // Q: encode the partial's values into a message, recording the event in the ledger.
    Message quantize(Partial&& p, int32_t stage, int64_t from, int64_t to, Contributors who,
                     int64_t column_offset = 0) {
        // A user's codec reads its own element type, so the ledger records what it read.
        if (const auto type = codec_->input_type(); type != kernels::ValueType::kBinary32)
            for (float& v : p.v) v = kernels::round_to(type, v);
        return encode(p.v.data(), static_cast<int64_t>(p.v.size()), std::move(p.p), stage, from, to, std::move(who),
                      column_offset);
    }

    // quantize(Partial(p), ...) without the copy of p's values, on the CPU kernels (which only read
    // them); a user's codec (which reads them rounded) and a device take the copy.
    Message quantize_copy(const Partial& p, int32_t stage, int64_t from, int64_t to, Contributors who) {
        if (!codec_->host_kernels()) return quantize(Partial(p), stage, from, to, std::move(who));
        return encode(p.v.data(), static_cast<int64_t>(p.v.size()), Provenance(p.p), stage, from, to, std::move(who), 0);
    }

    // An unquantized message (fp32-ring-rs, hpz's full-precision secondary shard).
    Message raw(Partial&& p) {
        Message m;
        m.len = static_cast<int64_t>(p.v.size());
        m.quantized = false;
        m.raw_bytes_per_element = accum_type(accum_).bytes;
        m.raw = std::move(p.v);
        if (auto st = codec_->stage_raw(p.holder >= 0 ? p.holder : 0, m); !st) throw ColumnFailure{st.error()};
        m.provenance = keep(std::move(p.p));
        return m;
    }

    // A copy of a message, as a rank forwards codes it received unchanged (ring all-gathers).
    static Message forward(const Message& m) { return m; }

    // D: what a receiver holds after decoding the message.
    Partial decode(const Message& m) {
        Partial p;
        p.v.resize(static_cast<size_t>(m.len));
        decode_to(m, p.v.data());
        if (codec_->on_device()) p.holder = m.dev_rank;
        p.p = provenance_[static_cast<size_t>(m.provenance)];
        return p;
    }

    // p = decode(m) for a message that nobody else decodes (a reduce's hop, sent once and received
    // once): p's buffer reused, m's ledger taken rather than copied, an unquantized message's values
    // moved. The same values and ledger as decode(m).
    void decode_into(Partial& p, Message&& m) {
        if (!codec_->on_device() && !m.quantized) {
            p.v = std::move(m.raw);
        } else {
            p.v.resize(static_cast<size_t>(m.len));
            decode_to(m, p.v.data());
        }
        p.holder = codec_->on_device() ? m.dev_rank : -1;
        p.p = std::move(provenance_[static_cast<size_t>(m.provenance)]);
    }
    Partial decode_take(Message&& m) {
        Partial p;
        decode_into(p, std::move(m));
        return p;
    }

    // The message's values into out[0, m.len).
    void decode_to(const Message& m, float* out) {
        if (auto st = codec_->decode(m, out); !st) throw ColumnFailure{st.error()};
    }

    // The first term of a sum: under fp16 (bf16) accumulation it is rounded to binary16 (bfloat16)
    // (D11, D24).
    void start_sum(Partial& acc) {
        if (!low_) return;
        if (dev_) {
            device_start_sum(acc);
            return;
        }
        own_ledger(acc);
        for (size_t i = 0; i < acc.v.size(); ++i) acc.v[i] = round_term(acc, i, acc.v[i]);
    }

    // acc = fl(acc + term), acc the left operand; provenance merged.
    void add(Partial& acc, Partial&& term) {
        if (dev_) {
            device_add(acc, std::move(term));
            return;
        }
        add_cpu(acc, term);
    }

    // add(acc, Partial(term)) without the copy (the CPU reads the term; a device's add writes it).
    void add_copy(Partial& acc, const Partial& term) {
        if (dev_) {
            add(acc, Partial(term));
            return;
        }
        add_cpu(acc, term);
    }

    void add_cpu(Partial& acc, const Partial& term) { add_values(acc, term.v.data(), term.p); }

    // acc = fl(acc + t) on the CPU, t's ledger `tp` merged: add's arithmetic for a term held in a
    // Partial (add_cpu) or decoded into a scratch buffer (add_decoded).
    void add_values(Partial& acc, const float* tv, const Provenance& tp) {
        own_ledger(acc);
        if (!low_) {  // binary32: the sums, then their ledger (each element on its own: the same values as one loop)
            const size_t n = acc.v.size();
            float* av = acc.v.data();
            for (size_t i = 0; i < n; ++i) av[i] = av[i] + tv[i];
            double* aa = acc.p.add_abs.data();
            int32_t* an = acc.p.add_n.data();
            if (tp.add_abs.empty()) {  // a term without adds (an input): its zeros
                for (size_t i = 0; i < n; ++i) {
                    aa[i] += 0.0 + std::abs(static_cast<double>(av[i]));
                    an[i] += 0 + 1;
                }
            } else {
                const double* ta = tp.add_abs.data();
                const int32_t* tn = tp.add_n.data();
                for (size_t i = 0; i < n; ++i) {
                    aa[i] += ta[i] + std::abs(static_cast<double>(av[i]));
                    an[i] += tn[i] + 1;
                }
            }
        } else {
            for (size_t i = 0; i < acc.v.size(); ++i) {
                const float a = acc.v[i], b = round_term(acc, i, tv[i]);
                acc.v[i] = kernels::accum_round(a + b, accum_);  // the correctly rounded sum of two values of the type (D11)
                merge_add(acc, tp, i);
                if (sat_ && kernels::accum_saturates(a + b, accum_)) {  // D41: |a + b| - max, exact in binary64
                    acc.p.sat_ex[i] += std::abs(static_cast<double>(a) + static_cast<double>(b)) - saturation_max(accum_);
                    acc.p.sat_n[i] += 1;
                }
            }
        }
        acc.p.ids.insert(acc.p.ids.end(), tp.ids.begin(), tp.ids.end());
        merge_rounded(acc, tp);
    }

    // add(acc, decode(m)) without the Partial between, on the CPU kernels: the message decoded into
    // a scratch buffer, its ledger merged from the kept provenance (add_values, as add does).
    // Otherwise (a device, a codec) add(acc, decode(m)) itself.
    void add_decoded(Partial& acc, const Message& m) {
        if (dev_ || (!codec_->host_kernels() && m.quantized) || static_cast<size_t>(m.len) != acc.v.size()) {
            add(acc, decode(m));
            return;
        }
        scratch_.resize(static_cast<size_t>(m.len));
        decode_to(m, scratch_.data());
        add_values(acc, scratch_.data(), provenance_[static_cast<size_t>(m.provenance)]);
    }

    // A 16-bit path's add was rounded to its type (D26): the ledger's rounding, with the
    // contributors the sum now holds. After add(acc, ...), on the same acc.
    void rounded(Partial& acc, Contributors who) {
        rec_.roundings.push_back(std::move(who));
        acc.p.rids.push_back(static_cast<int32_t>(rec_.roundings.size() - 1));
    }

    // End to end (D28): every input of the column rotated once, in place, with the column's signs
    // (the same on every rank). A rotation past the format's limit is refused as encode refuses it.
    void rotate_inputs(std::vector<Partial>& x) {
        if (!rot_) return;
        const bool signs = c_.format.decl->random_signs;
        const float limit = kernels::hadamard_limit(len_);
        for (size_t r = 0; r < x.size(); ++r) {
            kernels::hadamard_forward(x[r].v.data(), len_, signs, kernels::SignKey{c_.seed, first_});
            for (float v : x[r].v)
                if (!(std::abs(v) <= limit)) {  // described from the rank's input, read again
                    Site site;
                    site.tensor = in_.name();
                    site.rank = static_cast<int64_t>(r);
                    site.index_base = first_;
                    const Partial before = input(static_cast<int64_t>(r));
                    throw ColumnFailure{kernels::describe_block_error(c_.format, before.v.data(), len_, 0, site)};
                }
        }
    }

    // An output row: what `rank` holds for this column (end to end, D28: rotated back once).
    void emit(int64_t rank, const Partial& p) { fill_row(new_row(), rank, p); }

    // emit(rank, p) into the reserved row `index` (reserve_rows).
    void emit_at(size_t index, int64_t rank, const Partial& p) { fill_row(rec_.outputs[index], rank, p); }

    // Rows [first, first + count) of the record, made now and filled later in any order by
    // emit_decoded: a gather's rows are in rank order, its ring visits the ranks from the owner on.
    size_t reserve_rows(int64_t count) {
        const size_t first = n_rows_;
        for (int64_t r = 0; r < count; ++r) (void)new_row();
        return first;
    }

    // emit(rank, decode(m)) into the reserved row `index`, without the Partial between: the message
    // decoded straight into the row, its provenance copied once.
    void emit_decoded(size_t index, int64_t rank, const Message& m) {
        OutputRow& row = rec_.outputs[index];
        row.values.resize(static_cast<size_t>(m.len));
        decode_to(m, row.values.data());
        finish_row(row, rank, provenance_[static_cast<size_t>(m.provenance)]);
    }

    // Whether decode is the CPU kernel, a function of the message alone (not a user's codec, not
    // a device): then equal messages decode to equal rows.
    bool decodes_on_cpu() const { return codec_->host_kernels(); }

    // Row `index` made a copy of the finished row `from` (the same message decoded), held by `rank`.
    void emit_copy(size_t index, int64_t rank, size_t from) {
        OutputRow& row = rec_.outputs[index];
        row = rec_.outputs[from];
        row.rank = rank;
    }

    void fill_row(OutputRow& row, int64_t rank, const Partial& p) {
        row.values.assign(p.v.begin(), p.v.end());
        finish_row(row, rank, p.p);
    }

    void finish_row(OutputRow& row, int64_t rank, const Provenance& prov) {
        row.rank = rank;
        if (rot_)
            kernels::hadamard_inverse(row.values.data(), len_, c_.format.decl->random_signs, kernels::SignKey{c_.seed, first_});
        if (c_.divide == Divide::kPost) {  // D27: the result scaled by 1/N in the path's element type
            const float n = static_cast<float>(c_.ranks);
            const Accum t = division_type(c_);
            for (float& v : row.values) v = kernels::divide_round(v, n, t);
        }
        row.event_ids.assign(prov.ids.begin(), prov.ids.end());
        row.rounding_ids.assign(prov.rids.begin(), prov.rids.end());
        // An empty per-element ledger (no add reached the value) is zeros; a field the path does not
        // keep (term roundings but under fp16 or bf16, saturations but under FP8) stays empty.
        const size_t n = row.values.size();
        row_field(true, prov.add_abs, n, row.add_abs_sum);
        row_field(true, prov.add_n, n, row.add_count);
        row_field(low_, prov.tr_abs, n, row.term_round_abs_sum);
        row_field(low_, prov.tr_n, n, row.term_round_count);
        row_field(sat_ || out_sat_, prov.sat_ex, n, row.saturation_excess);
        row_field(sat_ || out_sat_, prov.sat_n, n, row.saturation_count);
        if (c_.output != Accum::kFp32)  // D46: the tensor the kernel writes, in its output type
            for (size_t i = 0; i < n; ++i) {
                float& v = row.values[i];
                if (!std::isfinite(v)) continue;  // a non-finite sum stays so (a failed bound), FP8 or not
                if (out_sat_ && kernels::cast_saturates(v, c_.output)) {  // D49: an FP8 output's clamp, an event as D41's
                    row.saturation_excess[i] += std::fabs(static_cast<double>(v)) - saturation_max(c_.output);
                    ++row.saturation_count[i];
                }
                v = kernels::cast_to(v, c_.output);  // FP8: one rounding from binary32, not through binary16
            }
    }
    template <typename T>
    static void row_field(bool kept, const std::vector<T>& from, size_t n, std::vector<T>& to) {
        if (!kept) to.clear();
        else if (from.empty()) to.assign(n, T{});
        else to.assign(from.begin(), from.end());
    }

    // The exact target's inputs: the N rows X_j (reduce paths) or the gathered row W (gathers).
    void set_contributions_reduce(const std::vector<Partial>& rows) {
        rec_.contribution_rows = static_cast<int64_t>(rows.size());
        rec_.contributions.resize(rows.size() * static_cast<size_t>(len_));
        for (size_t j = 0; j < rows.size(); ++j)
            std::copy(rows[j].v.begin(), rows[j].v.end(), rec_.contributions.begin() + static_cast<std::ptrdiff_t>(j * static_cast<size_t>(len_)));
    }
    void set_contributions_gather(const std::vector<float>& w, const std::vector<float>& first_block_absmax) {
        rec_.contribution_rows = 1;
        rec_.contributions.assign(w.begin(), w.end());
        rec_.first_block_absmax.assign(first_block_absmax.begin(), first_block_absmax.end());
    }

    const PathConfig& config() const { return c_; }
    Transport& transport() { return t_; }
    int64_t first() const { return first_; }

private:
    static std::unique_ptr<MessageCodec> codec_of(const PathConfig& c, DeviceOps* dev) {
        auto codec = make_message_codec(c, dev);
        if (!codec) throw ColumnFailure{codec.error()};
        return std::move(*codec);
    }
    int64_t holder_of(const Partial& p) const { return p.holder >= 0 ? p.holder : 0; }

    // Q of the n values v (already rounded to a codec's type), their ledger `prov`: the message,
    // and the event recorded.
    Message encode(const float* v, int64_t n, Provenance&& prov, int32_t stage, int64_t from, int64_t to, Contributors who,
                   int64_t column_offset) {
        // End to end (D28) the values are rotated already: the stage format without its rotation.
        const FormatSpec& f = rot_ ? c_.format_of_stage(stage).rotation_twin() : c_.format_of_stage(stage);
        Message m;
        m.len = n;
        m.quantized = true;
        if (!c_.stage_formats.empty() || rot_) m.format = &f;
        kernels::CodecOptions opt;
        opt.site.tensor = "partial sum";
        opt.site.rank = from;
        opt.site.index_base = first_ - column_offset;  // the block's first element (FORMATS.md section 4)
        m.sign_first = opt.site.index_base;
        opt.seed = c_.seed;
        opt.hop = static_cast<uint32_t>(stage);
        if (auto st = codec_->encode(f, from, v, n, opt, m); !st) throw ColumnFailure{st.error()};
        QuantEvent& e = new_event();
        e.stage = stage;
        e.format_stage = c_.format_stage_of(stage);
        e.from_rank = from;
        e.to_rank = to;
        e.scale = m.scale;
        e.offset = f.has_offset() ? m.offset : 0.0f;
        e.contributors = std::move(who);
        e.x.assign(v, v + n);
        e.codes.resize(static_cast<size_t>(n));
        kernels::unpack_block_codes(f, m.codes.data(), n, e.codes.data());
        e.column_offset = column_offset;
        prov.ids.push_back(static_cast<int32_t>(n_events_ - 1));
        m.provenance = keep(std::move(prov));
        return m;
    }

    // start_sum on the device: the rounded values come back, and a rounding that moved a value is
    // recorded as round_term records it.
    void device_start_sum(Partial& acc) {
        const std::vector<float> before = acc.v;
        if (auto st = dev_->round_first(holder_of(acc), acc.v.data(), static_cast<int64_t>(acc.v.size()), accum_); !st)
            throw ColumnFailure{st.error()};
        own_ledger(acc);
        for (size_t i = 0; i < acc.v.size(); ++i) record_rounding(acc, i, before[i], acc.v[i]);
    }

    // add on the device: the sums (and, under fp16 or bf16, the rounded terms) come back; the provenance is
    // merged exactly as add() merges it, in the same order, so the ledger's doubles are identical.
    void device_add(Partial& acc, Partial&& term) {
        const size_t n = acc.v.size();
        std::vector<float> term_in;
        if (low_) term_in = term.v;
        if (auto st = dev_->add(holder_of(acc), acc.v.data(), term.v.data(), static_cast<int64_t>(n), accum_); !st)
            throw ColumnFailure{st.error()};
        own_ledger(acc);
        for (size_t i = 0; i < n; ++i) {
            if (low_) record_rounding(acc, i, term_in[i], term.v[i]);
            merge_add(acc, term.p, i);
        }
        acc.p.ids.insert(acc.p.ids.end(), term.p.ids.begin(), term.p.ids.end());
        merge_rounded(acc, term.p);
    }
    void merge_rounded(Partial& acc, const Provenance& tp) {
        if (!tp.rids.empty()) acc.p.rids.insert(acc.p.rids.end(), tp.rids.begin(), tp.rids.end());
    }
    // The ledger of element i after acc[i] became the sum of acc[i] and term[i]: the term's adds
    // and roundings join the accumulator's, plus this add and its |result|.
    // acc's ledger is owned (own_ledger); the term's may be empty (zeros).
    void merge_add(Partial& acc, const Provenance& tp, size_t i) {
        const bool adds = !tp.add_abs.empty(), rounds = !tp.tr_abs.empty();
        acc.p.add_abs[i] += (adds ? tp.add_abs[i] : 0.0) + std::abs(static_cast<double>(acc.v[i]));
        acc.p.add_n[i] += (adds ? tp.add_n[i] : 0) + 1;
        if (low_) {
            acc.p.tr_abs[i] += rounds ? tp.tr_abs[i] : 0.0;
            acc.p.tr_n[i] += rounds ? tp.tr_n[i] : 0;
        }
        if (sat_ && !tp.sat_ex.empty()) {
            acc.p.sat_ex[i] += tp.sat_ex[i];
            acc.p.sat_n[i] += tp.sat_n[i];
        }
    }

    // round_term's ledger half: t rounded to r.
    void record_rounding(Partial& acc, size_t i, float t, float r) {
        if (r != t) {
            acc.p.tr_abs[i] += std::abs(static_cast<double>(t));
            acc.p.tr_n[i] += 1;
        }
    }

    // An input's ledger: no events, no roundings, and per element no adds (sums and counts of 0).
    // Those per-element zeros are kept empty, as every input's are (no allocation per input and
    // hop), until a sum first writes them (own_ledger); an empty one reads as zeros.
    void clear_provenance(Provenance& p) {
        p.ids.clear();
        p.rids.clear();
        p.add_abs.clear();
        p.add_n.clear();
        p.tr_abs.clear();
        p.tr_n.clear();
        p.sat_ex.clear();
        p.sat_n.clear();
    }
    // The accumulator's per-element ledger made explicit (zeros where it was empty) before an add or
    // a rounding writes it.
    void own_ledger(Partial& acc) {
        const size_t n = acc.v.size();
        if (acc.p.add_abs.size() != n) {
            acc.p.add_abs.assign(n, 0.0);
            acc.p.add_n.assign(n, 0);
        }
        if (low_ && acc.p.tr_abs.size() != n) {
            acc.p.tr_abs.assign(n, 0.0);
            acc.p.tr_n.assign(n, 0);
        }
        if (sat_ && acc.p.sat_ex.size() != n) {
            acc.p.sat_ex.assign(n, 0.0);
            acc.p.sat_n.assign(n, 0);
        }
    }
    // A rounding that leaves the value unchanged (a partial that is already of the type) has no
    // error, so only the roundings that moved a value enter the ledger.
    float round_term(Partial& acc, size_t i, float t) {
        const float r = kernels::accum_round(t, accum_);
        if (r != t) {
            acc.p.tr_abs[i] += std::abs(static_cast<double>(t));
            acc.p.tr_n[i] += 1;
        }
        return r;
    }
    int32_t keep(Provenance&& p) {
        provenance_.push_back(std::move(p));
        return static_cast<int32_t>(provenance_.size() - 1);
    }
    QuantEvent& new_event() {
        if (n_events_ == rec_.events.size()) rec_.events.emplace_back();
        return rec_.events[n_events_++];
    }
    OutputRow& new_row() {
        if (n_rows_ == rec_.outputs.size()) rec_.outputs.emplace_back();
        return rec_.outputs[n_rows_++];
    }

    const PathConfig& c_;
    const Inputs& in_;
    Transport& t_;
    int64_t first_, len_;
    ColumnRecord& rec_;
    Accum accum_;
    bool low_;  // fp16 or bf16: terms and sums rounded to the type
    bool sat_;  // NCCL's FP8 (D41): sums stored with saturation, each clamp in the ledger
    bool out_sat_;  // an FP8 output type (D49): the one rounding at the end can clamp
    bool typed_;  // a 16-bit path (D26): inputs cast to the type, roundings in the ledger
    bool rot_;    // Rotation::kEndToEnd (D28): the column sums in the rotated domain
    DeviceOps* dev_;  // the adds on a device transport; null: on the CPU
    std::unique_ptr<MessageCodec> codec_;  // Q and D: the CPU kernels, a codec plugin or the device's (message_codec.hpp)
    size_t n_rows_ = 0, n_events_ = 0;
    std::vector<Provenance> provenance_;
    std::vector<float> scratch_;  // add_decoded's decoded values
};

int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// Two messages that decode alike: the same payload, metadata bits, format, sign key and ledger handle.
bool same_payload(const Message& a, const Message& b) {
    return a.len == b.len && a.quantized == b.quantized && a.codes == b.codes &&
           std::bit_cast<uint32_t>(a.scale) == std::bit_cast<uint32_t>(b.scale) &&
           std::bit_cast<uint32_t>(a.offset) == std::bit_cast<uint32_t>(b.offset) && a.raw.size() == b.raw.size() &&
           (a.raw.empty() || std::memcmp(a.raw.data(), b.raw.data(), a.raw.size() * sizeof(float)) == 0) &&
           a.raw_bytes_per_element == b.raw_bytes_per_element && a.format == b.format && a.sign_first == b.sign_first &&
           a.provenance == b.provenance;
}

Contributors ring_range(int64_t first, int64_t count) {
    Contributors c;
    c.first = first;
    c.count = count;
    return c;
}

std::vector<Partial> all_inputs(Column& col, int64_t n) {
    std::vector<Partial> x;
    x.reserve(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) x.push_back(col.input(r));
    return x;
}

// Every rank's input to a reduce path, recorded as the exact target's contributions; under
// --divide pre (D27) each is then scaled by 1/N in the path's element type, as DeepSpeed
// pre-divides its gradients, and the path reduces those.
std::vector<Partial> reduce_inputs(Column& col) {
    const PathConfig& c = col.config();
    std::vector<Partial> x = all_inputs(col, c.ranks);
    col.set_contributions_reduce(x);
    col.rotate_inputs(x);  // end to end only (D28)
    if (c.divide == Divide::kPre) {
        const float n = static_cast<float>(c.ranks);
        const Accum t = division_type(c);
        for (auto& p : x)
            for (float& v : p.v) v = kernels::divide_round(v, n, t);
    }
    return x;
}

// ring-rs / fp32-ring-rs: chunk c starts on rank c+1 with P = X_{c+1}[c]; each hop sends Q(P) (or
// P itself, unquantized) and the receiver sets P = fl32(D(Q(P)) + X_self[c]).
Partial ring_reduce(Column& col, const std::vector<Partial>& x, int64_t c, bool quantized) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    Partial p = x[static_cast<size_t>(mod(c + 1, n))];
    for (int64_t h = 1; h < n; ++h) {
        const int64_t from = mod(c + h, n), to = mod(c + h + 1, n);
        Message m = quantized ? col.quantize(std::move(p), static_cast<int32_t>(h - 1), from, to, ring_range(c + 1, h))
                              : col.raw(std::move(p));
        t.send(from, to, std::move(m));
        col.decode_into(p, t.recv(to, from));
        col.start_sum(p);  // D(Q(P)) is the left term of this hop's sum
        col.add_copy(p, x[static_cast<size_t>(to)]);
    }
    return p;
}

// bf16-/fp16-ring-rs and the first half of -ring-ar (D26): fp32-ring-rs's ring in the path's type.
// P starts on rank c+1 as X_{c+1}; hop h sends P as it is (2 bytes a value) to rank c+h+1, which
// sets P = fl(P + X_self) rounded to the type: a rounding of contributors c+1 .. c+h+1. The inputs
// are of the type already (Column::input), so no term is rounded.
Partial ring_reduce_typed(Column& col, const std::vector<Partial>& x, int64_t c) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    Partial p = x[static_cast<size_t>(mod(c + 1, n))];
    for (int64_t h = 1; h < n; ++h) {
        const int64_t from = mod(c + h, n), to = mod(c + h + 1, n);
        t.send(from, to, col.raw(std::move(p)));
        col.decode_into(p, t.recv(to, from));
        col.add_copy(p, x[static_cast<size_t>(to)]);
        col.rounded(p, ring_range(mod(c + 1, n), h + 1));
    }
    return p;
}

// a2a-rs: every rank quantizes its block of chunk c and sends it to rank c, which sums the decoded
// blocks in rank order.
Partial a2a_reduce(Column& col, const std::vector<Partial>& x, int64_t c) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    for (int64_t j = 0; j < n; ++j)
        t.send(j, c, col.quantize_copy(x[static_cast<size_t>(j)], 0, j, c, ring_range(j, 1)));
    Partial acc = col.decode_take(t.recv(c, 0));
    col.start_sum(acc);
    for (int64_t j = 1; j < n; ++j) col.add_decoded(acc, t.recv(c, j));
    return acc;
}

// a2a-hier-rs: stage 1 within node n sends chunk p to local peer l' = p mod G (the swizzle: local
// peer l' gets shards l' + G m), which sums the G decoded blocks into U; stage 2 requantizes U and
// sends it to rank p (same local index, on node p / G); rank p sums over nodes in order.
Partial a2a_hier_reduce(Column& col, const std::vector<Partial>& x, int64_t p) {
    Transport& t = col.transport();
    const int64_t g = t.ranks_per_node(), local = p % g;
    for (int64_t node = 0; node < t.nodes(); ++node) {
        const std::vector<int64_t> members = t.node_group(node);
        const int64_t peer = t.rank_of(node, local);
        for (int64_t src : members)
            t.send(src, peer, col.quantize_copy(x[static_cast<size_t>(src)], 0, src, peer, ring_range(src, 1)));
        Partial u = col.decode_take(t.recv(peer, members[0]));
        col.start_sum(u);
        for (size_t j = 1; j < members.size(); ++j) col.add_decoded(u, t.recv(peer, members[j]));
        t.send(peer, p, col.quantize(std::move(u), 1, peer, p, ring_range(members[0], g)));
    }
    Partial acc = col.decode_take(t.recv(p, t.rank_of(0, local)));
    col.start_sum(acc);
    for (int64_t node = 1; node < t.nodes(); ++node) col.add_decoded(acc, t.recv(p, t.rank_of(node, local)));
    return acc;
}

// tree-rs (recursive halving): at step t with d = N / 2^(t+1), rank r and r XOR d swap the halves
// the other keeps; for chunk c the rank whose bit d differs from c's sends Q(partial) and its
// partner sets partial = fl32(own + D(Q(other))).
Partial tree_reduce(Column& col, const std::vector<Partial>& x, int64_t c) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    std::vector<Partial> part(x);
    std::vector<std::vector<int32_t>> who(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) who[static_cast<size_t>(r)] = {static_cast<int32_t>(r)};
    std::vector<bool> holds(static_cast<size_t>(n), true), summed(static_cast<size_t>(n), false);
    int32_t step = 0;
    for (int64_t d = n / 2; d >= 1; d /= 2, ++step) {
        std::vector<int64_t> senders;
        for (int64_t r = 0; r < n; ++r)
            if (holds[static_cast<size_t>(r)] && (r & d) != (c & d)) senders.push_back(r);
        for (int64_t r : senders) {
            Contributors cs;
            cs.list = who[static_cast<size_t>(r)];
            t.send(r, r ^ d, col.quantize(std::move(part[static_cast<size_t>(r)]), step, r, r ^ d, std::move(cs)));
            holds[static_cast<size_t>(r)] = false;
        }
        for (int64_t r : senders) {
            const int64_t to = r ^ d;
            Partial& own = part[static_cast<size_t>(to)];
            if (!summed[static_cast<size_t>(to)]) {
                col.start_sum(own);
                summed[static_cast<size_t>(to)] = true;
            }
            col.add_decoded(own, t.recv(to, r));
            auto& w = who[static_cast<size_t>(to)];
            w.insert(w.end(), who[static_cast<size_t>(r)].begin(), who[static_cast<size_t>(r)].end());
        }
    }
    return std::move(part[static_cast<size_t>(c)]);
}

// A ring all-gather of one encoded block from `owner`: the codes travel owner -> owner+1 -> ...
// unchanged; every rank (owner included) decodes them, but for an owner that keeps values of its own
// (`kept`: two-shot-ar-keep's unrequantized sum, D46), which it holds instead.
// Every rank's output row is what it holds: emitted in rank order (rows reserved first), each
// decoded into its row as the ring reaches it.
// A rank that received exactly the owner's message (every byte, the metadata's bits, the ledger's
// handle) holds the first decoded row's values (the owner's, or when it keeps its own the first
// other rank's), copied when the decode is the CPU kernel's (decodes_on_cpu).
void ring_broadcast_emit(Column& col, Message&& m, int64_t owner, const Partial* kept = nullptr, int64_t keeper = -1) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    const size_t rows = col.reserve_rows(n);
    const bool copy = col.decodes_on_cpu();
    const Message sent = copy ? Column::forward(m) : Message{};
    std::optional<size_t> decoded;  // the first row that decoded `sent`: the one a copy copies
    if (kept && keeper < 0) keeper = owner;  // (the rank that holds `kept` instead of decoding)
    if (kept && keeper == owner) {
        col.emit_at(rows + static_cast<size_t>(owner), owner, *kept);
    } else {
        col.emit_decoded(rows + static_cast<size_t>(owner), owner, m);
        decoded = rows + static_cast<size_t>(owner);
    }
    Message cur = std::move(m);
    for (int64_t h = 1; h < n; ++h) {
        const int64_t from = mod(owner + h - 1, n), to = mod(owner + h, n);
        t.send(from, to, std::move(cur));  // what it received, passed on
        cur = t.recv(to, from);
        const size_t at = rows + static_cast<size_t>(to);
        if (kept && to == keeper) {  // FlashInfer's stripes (D52): this rank keeps the sum it did not add
            col.emit_at(at, to, *kept);
            continue;
        }
        const bool same = copy && same_payload(cur, sent);
        if (same && decoded) {
            col.emit_copy(at, to, *decoded);
        } else {
            col.emit_decoded(at, to, cur);
            if (same) decoded = at;
        }
    }
}

// The same trip without decoding at every stop (bytes only).
void ring_forward(Column& col, const Message& m, int64_t owner) {
    const int64_t n = col.config().ranks;
    Transport& t = col.transport();
    Message cur = Column::forward(m);
    for (int64_t h = 1; h < n; ++h) {
        const int64_t from = mod(owner + h - 1, n), to = mod(owner + h, n);
        t.send(from, to, std::move(cur));  // each rank passes on what it received
        cur = t.recv(to, from);
    }
}

std::vector<float> block_absmax_of(const std::vector<float>& v) {
    float a = 0;
    for (float f : v) a = std::max(a, std::abs(f));
    return std::vector<float>(v.size(), a);
}

void run_reduce_scatter(Column& col, PathKind path) {
    const PathConfig& c = col.config();
    const int64_t chunk = col.first() / c.shard();
    const std::vector<Partial> x = reduce_inputs(col);
    Partial out;
    switch (path) {
        case PathKind::kRingRs: out = ring_reduce(col, x, chunk, true); break;
        case PathKind::kFp32RingRs: out = ring_reduce(col, x, chunk, false); break;
        case PathKind::kBf16RingRs:
        case PathKind::kFp16RingRs:
        case PathKind::kFp8E4m3RingRs:
        case PathKind::kFp8E5m2RingRs: out = ring_reduce_typed(col, x, chunk); break;
        case PathKind::kA2aRs: out = a2a_reduce(col, x, chunk); break;
        case PathKind::kA2aHierRs: out = a2a_hier_reduce(col, x, chunk); break;
        default: out = tree_reduce(col, x, chunk); break;
    }
    col.emit(chunk, out);
}

// An all-reduce's second half: the owner's message travels the ring unchanged and every rank
// (the owner too) holds what it decodes.
void gather_to_all(Column& col, Message&& m, int64_t owner) { ring_broadcast_emit(col, std::move(m), owner); }

// two-shot-ar: a2a-rs, then the owner quantizes the reduced block once and it is ring-gathered.
void run_two_shot(Column& col) {
    const PathConfig& c = col.config();
    const int64_t chunk = col.first() / c.shard();
    Partial reduced = a2a_reduce(col, reduce_inputs(col), chunk);
    if (c.sum_from_zero)  // start = "zero" (QuickReduce's, D57): an all -0 column sums to +0
        for (float& v : reduced.v) v += 0.0f;
    gather_to_all(col, col.quantize(std::move(reduced), 1, chunk, mod(chunk + 1, c.ranks), ring_range(0, c.ranks)), chunk);
}

// two-shot-ar-keep (FlashInfer's quantized_all_reduce, D46): two-shot-ar, but the owner holds its
// own sum, unrequantized, and only the other ranks decode the requantized block. The sum starts
// from +0 as FlashInfer's does (an all -0 column sums to +0; every other sum is unchanged by it).
void run_two_shot_keep(Column& col) {
    const PathConfig& c = col.config();
    const int64_t chunk = col.first() / c.shard();
    Partial reduced = a2a_reduce(col, reduce_inputs(col), chunk);
    for (float& v : reduced.v) v += 0.0f;
    // The rank that keeps it: the chunk's owner, or FlashInfer's stripe owner (D52; a column lies in
    // one stripe: the stripe is a multiple of the block).
    ring_broadcast_emit(col, col.quantize_copy(reduced, 1, chunk, mod(chunk + 1, c.ranks), ring_range(0, c.ranks)), chunk, &reduced,
                        c.keeper(col.first()));
}

// bf16-/fp16-ring-ar (D26): NCCL's ring all-reduce, a ring reduce-scatter and then a ring
// all-gather of each reduced chunk. The owner c's sum travels c -> c+1 -> ... unchanged (no add:
// nothing rounds), so every rank holds c's bits.
void run_ring_ar(Column& col) {
    const int64_t chunk = col.first() / col.config().shard();
    gather_to_all(col, col.raw(ring_reduce_typed(col, reduce_inputs(col), chunk)), chunk);
}

// bf16-/fp16-tree-ar (D26): NCCL's tree all-reduce. Up: inside node v the chain local G-1 -> ... ->
// local 0, each rank setting P = fl(X_self + P); at local 0 (node v's place in NCCL's binary tree
// over the nodes, btree_links) the sum then adds child down0's sum, then down1's, each add rounded.
// Down: the root's sum is broadcast unchanged along the same links, to every rank.
struct TreeUp {
    Partial p;
    std::vector<int32_t> who;  // the contributors p holds
};

TreeUp tree_up(Column& col, const std::vector<Partial>& x, int64_t v) {
    Transport& t = col.transport();
    const int64_t g = t.ranks_per_node();
    TreeUp u;
    const int64_t last = t.rank_of(v, g - 1);
    u.p = x[static_cast<size_t>(last)];
    u.who = {static_cast<int32_t>(last)};
    auto note = [&] {
        Contributors cs;
        cs.first = u.who.front();
        cs.count = static_cast<int64_t>(u.who.size());
        cs.list = u.who;
        col.rounded(u.p, std::move(cs));
    };
    for (int64_t l = g - 2; l >= 0; --l) {
        const int64_t from = t.rank_of(v, l + 1), to = t.rank_of(v, l);
        t.send(from, to, col.raw(std::move(u.p)));
        Partial own = x[static_cast<size_t>(to)];
        col.add_decoded(own, t.recv(to, from));
        u.p = std::move(own);
        u.who.push_back(static_cast<int32_t>(to));
        note();
    }
    const int64_t leader = t.rank_of(v, 0);
    const TreeLinks links = btree_links(t.nodes(), v);
    for (int64_t child : {links.down0, links.down1}) {
        if (child < 0) continue;
        TreeUp sub = tree_up(col, x, child);
        const int64_t from = t.rank_of(child, 0);
        t.send(from, leader, col.raw(std::move(sub.p)));
        col.add_decoded(u.p, t.recv(leader, from));
        u.who.insert(u.who.end(), sub.who.begin(), sub.who.end());
        note();
    }
    return u;
}

void tree_down(Column& col, int64_t v, Message&& m, std::vector<Partial>& held) {
    Transport& t = col.transport();
    const int64_t g = t.ranks_per_node(), leader = t.rank_of(v, 0);
    held[static_cast<size_t>(leader)] = col.decode(m);
    Message cur = Column::forward(m);
    for (int64_t l = 1; l < g; ++l) {
        const int64_t from = t.rank_of(v, l - 1), to = t.rank_of(v, l);
        t.send(from, to, std::move(cur));  // what it received, passed on
        cur = t.recv(to, from);
        held[static_cast<size_t>(to)] = col.decode(cur);
    }
    const TreeLinks links = btree_links(t.nodes(), v);
    for (int64_t child : {links.down0, links.down1}) {
        if (child < 0) continue;
        const int64_t to = t.rank_of(child, 0);
        t.send(leader, to, Column::forward(m));
        tree_down(col, child, t.recv(to, leader), held);
    }
}

void run_tree_ar(Column& col) {
    const PathConfig& c = col.config();
    const std::vector<Partial> x = reduce_inputs(col);
    TreeUp root = tree_up(col, x, 0);
    std::vector<Partial> held(static_cast<size_t>(c.ranks));
    tree_down(col, 0, col.raw(std::move(root.p)), held);
    for (int64_t r = 0; r < c.ranks; ++r) col.emit(r, held[static_cast<size_t>(r)]);
}

// ring-ag: the owner encodes its shard's block once, the codes travel unchanged.
// ring-ag-requant: every rank decodes and re-encodes before forwarding.
void run_all_gather(Column& col, bool requant) {
    const PathConfig& c = col.config();
    const int64_t n = c.ranks, owner = col.first() / c.shard();
    Transport& t = col.transport();
    Partial w = col.input(owner);
    col.set_contributions_gather(w.v, block_absmax_of(w.v));
    Message m = col.quantize(std::move(w), 0, owner, mod(owner + 1, n), ring_range(owner, 1));
    if (!requant) {
        ring_broadcast_emit(col, std::move(m), owner);
        return;
    }
    // Rows in rank order, each emitted as the ring reaches its rank; the hop's message is received
    // once, so its partial is decoded into one buffer that then goes on, requantized.
    const size_t rows = col.reserve_rows(n);
    Partial v = col.decode(m);
    col.emit_at(rows + static_cast<size_t>(owner), owner, v);
    for (int64_t h = 1; h < n; ++h) {
        const int64_t from = mod(owner + h - 1, n), to = mod(owner + h, n);
        t.send(from, to, std::move(m));
        col.decode_into(v, t.recv(to, from));
        col.emit_at(rows + static_cast<size_t>(to), to, v);
        if (h + 1 < n) m = col.quantize(std::move(v), static_cast<int32_t>(h), to, mod(to + 1, n), ring_range(owner, 1));
    }
}

// hpz-ag: the forward ring-ag's blocks that overlap this secondary block give F over it; mode fp
// keeps and sends F unquantized inside each node, mode requant re-encodes the secondary block first.
void run_hpz(Column& col, bool requant) {
    const PathConfig& c = col.config();
    Transport& t = col.transport();
    const int64_t n = c.ranks, g = c.ranks_per_node, s = c.shard(), len = col.len(), first = col.first();
    // Forward: the primary blocks (laid within S-element chunks) that overlap [first, first+len).
    Partial f;
    f.v.assign(static_cast<size_t>(len), 0.0f);
    std::vector<float> w(static_cast<size_t>(len)), first_absmax(static_cast<size_t>(len));
    std::vector<int32_t> ids;
    std::vector<int32_t> owners;
    for (int64_t pos = first; pos < first + len;) {
        const int64_t owner = pos / s, in_chunk = pos - owner * s;
        const int64_t bfirst = owner * s + (in_chunk / c.block) * c.block;
        const int64_t blen = std::min(c.block, owner * s + s - bfirst);
        Partial blk = col.input_range(owner, bfirst, blen);
        float amax = 0.0f;
        for (float v : blk.v) amax = std::max(amax, std::abs(v));
        const std::vector<float> wv = blk.v;
        Message m = col.quantize(std::move(blk), 0, owner, mod(owner + 1, n), ring_range(owner, 1), first - bfirst);
        Partial dec = col.decode(m);
        // Every rank decodes the same codes (ring-ag), so F is one vector; the block's trip around
        // the ring is counted once, in the column that holds its first element.
        if (bfirst >= first) ring_forward(col, m, owner);
        const int64_t lo = std::max(first, bfirst), hi = std::min(first + len, bfirst + blen);
        for (int64_t q = lo; q < hi; ++q) {
            f.v[static_cast<size_t>(q - first)] = dec.v[static_cast<size_t>(q - bfirst)];
            w[static_cast<size_t>(q - first)] = wv[static_cast<size_t>(q - bfirst)];
            first_absmax[static_cast<size_t>(q - first)] = amax;
        }
        ids.insert(ids.end(), dec.p.ids.begin(), dec.p.ids.end());
        if (owners.empty() || owners.back() != owner) owners.push_back(static_cast<int32_t>(owner));
        pos = bfirst + blen;
    }
    col.set_contributions_gather(w, first_absmax);
    f.p.ids = ids;
    f.p.add_abs.assign(static_cast<size_t>(len), 0.0);
    f.p.add_n.assign(static_cast<size_t>(len), 0);
    if (low_precision(c.accum)) {
        f.p.tr_abs.assign(static_cast<size_t>(len), 0.0);
        f.p.tr_n.assign(static_cast<size_t>(len), 0);
    }
    // Backward: local rank l of every node holds the secondary shard [l M/G, (l+1) M/G) of F and
    // gathers it around its node's ring.
    const int64_t l = first / (c.elements / g);
    const size_t rows = col.reserve_rows(n);  // rank order; each filled as its node's ring reaches it
    for (int64_t node = 0; node < t.nodes(); ++node) {
        const int64_t holder = t.rank_of(node, l);
        Partial fh(f);
        fh.holder = holder;
        Message m;
        if (requant) {
            Contributors who;
            who.list = owners;
            m = col.quantize(std::move(fh), 1, holder, t.rank_of(node, (l + 1) % g), std::move(who));
        } else {
            m = col.raw(std::move(fh));
        }
        col.emit_decoded(rows + static_cast<size_t>(holder), holder, m);
        Message cur = std::move(m);
        for (int64_t h = 1; h < g; ++h) {
            const int64_t from = t.rank_of(node, (l + h - 1) % g), to = t.rank_of(node, (l + h) % g);
            t.send(from, to, std::move(cur));  // what it received, passed on
            cur = t.recv(to, from);
            col.emit_decoded(rows + static_cast<size_t>(to), to, cur);
        }
    }
}

}  // namespace

Status run_column(const PathConfig& c, const Inputs& inputs, Transport& transport, int64_t first, int64_t len,
                  ColumnRecord& out) {
    try {
        Column col(c, inputs, transport, first, len, out);
        switch (c.path) {
            case PathKind::kRingRs:
            case PathKind::kFp32RingRs:
            case PathKind::kA2aRs:
            case PathKind::kA2aHierRs:
            case PathKind::kTreeRs:
            case PathKind::kBf16RingRs:
            case PathKind::kFp16RingRs:
            case PathKind::kFp8E4m3RingRs:
            case PathKind::kFp8E5m2RingRs: run_reduce_scatter(col, c.path); break;
            case PathKind::kBf16RingAr:
            case PathKind::kFp16RingAr:
            case PathKind::kFp8E4m3RingAr:
            case PathKind::kFp8E5m2RingAr: run_ring_ar(col); break;
            case PathKind::kBf16TreeAr:
            case PathKind::kFp16TreeAr:
            case PathKind::kFp8E4m3TreeAr:
            case PathKind::kFp8E5m2TreeAr: run_tree_ar(col); break;
            case PathKind::kTwoShotAr: run_two_shot(col); break;
            case PathKind::kTwoShotArKeep: run_two_shot_keep(col); break;
            case PathKind::kRingAg: run_all_gather(col, false); break;
            case PathKind::kRingAgRequant: run_all_gather(col, true); break;
            case PathKind::kHpzAgFp: run_hpz(col, false); break;
            case PathKind::kHpzAgRequant: run_hpz(col, true); break;
        }
    } catch (const ColumnFailure& f) {
        return f.error;
    } catch (const TransportFailure& f) {
        return f.error;
    } catch (const DeviceFailure& f) {
        return f.error;
    }
    return Status::Ok();
}

namespace {

// A column's inputs generated once for every path that shares the column partition.
class ColumnCache final : public Inputs {
public:
    // timed: the time spent generating inputs is summed (fill_seconds, fill_cpu_seconds).
    ColumnCache(const Inputs& base, int64_t ranks, bool timed)
        : base_(base), timed_(timed), filled_(static_cast<size_t>(ranks), false) {}
    double fill_seconds() const { return fill_s_; }
    double fill_cpu_seconds() const { return fill_cpu_s_; }
    std::string name() const override { return base_.name(); }
    void set_column(int64_t first, int64_t len) {
        first_ = first;
        len_ = len;
        std::fill(filled_.begin(), filled_.end(), false);
        data_.resize(filled_.size() * static_cast<size_t>(len));
    }
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override {
        if (first != first_ || len != len_) {
            generate(rank, first, len, out);
            return;
        }
        float* row = data_.data() + static_cast<size_t>(rank) * static_cast<size_t>(len_);
        if (!filled_[static_cast<size_t>(rank)]) {
            generate(rank, first, len, row);
            filled_[static_cast<size_t>(rank)] = true;
        }
        std::memcpy(out, row, static_cast<size_t>(len) * sizeof(float));
    }

private:
    void generate(int64_t rank, int64_t first, int64_t len, float* out) const {
        if (!timed_) {
            base_.fill(rank, first, len, out);
            return;
        }
        const auto w0 = std::chrono::steady_clock::now();
        const double c0 = thread_cpu_seconds();
        base_.fill(rank, first, len, out);
        fill_cpu_s_ += thread_cpu_seconds() - c0;
        fill_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    }

    const Inputs& base_;
    bool timed_;
    mutable double fill_s_ = 0, fill_cpu_s_ = 0;
    int64_t first_ = -1, len_ = -1;
    mutable std::vector<bool> filled_;
    mutable std::vector<float> data_;
};

}  // namespace

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Result<std::unique_ptr<Transport>> make_transport(Backend backend, const PathConfig& c) {
    switch (backend) {
        case Backend::kDevice: return make_device_transport(c.ranks, c.ranks_per_node, c.format, c.block);
        case Backend::kNccl: return make_nccl_transport(c.ranks, c.ranks_per_node, c.format, c.block);
        case Backend::kMpi: return mpi::make_mpi_transport(c.ranks, c.ranks_per_node, c.format);
        case Backend::kCpu: break;
    }
    return std::unique_ptr<Transport>(std::make_unique<SimTransport>(c.ranks, c.ranks_per_node, c.format));
}

std::string codec_backend_problem(Backend backend) {
    if (backend != Backend::kDevice && backend != Backend::kNccl) return "";
    return std::string("--codec runs the paths with --backend cpu or mpi, not ") + to_string(backend) + " (docs/PLUGIN.md)";
}

std::string host_only_problem(PathKind path, Divide divide, Backend backend, const std::string& divide_setting) {
    if (backend != Backend::kDevice && backend != Backend::kNccl) return "";
    const std::string not_here = " runs with --backend cpu or mpi for now (not " + std::string(to_string(backend)) + ")";
    if (typed_path(path)) return std::string(path_info(path).name) + not_here;
    if (divide != Divide::kNone) return (divide_setting.empty() ? std::string("--divide ") + to_string(divide) : divide_setting) + not_here;
    return "";
}

namespace {
// The largest finite |x| of the gathered tensor: every rank's own shard.
float tensor_amax(const PathConfig& c, const Inputs& inputs) {
    // The gathered tensor is every rank's own shard (ring-ag: rank r sends its elements [r S, (r + 1) S)).
    constexpr int64_t kChunk = 1 << 16;
    const int64_t s = c.shard();
    std::vector<float> buf(static_cast<size_t>(std::min<int64_t>(kChunk, std::max<int64_t>(s, 1))));
    float amax = 0.0f;
    for (int64_t r = 0; r < c.ranks; ++r)
        for (int64_t first = r * s; first < (r + 1) * s; first += kChunk) {
            const int64_t len = std::min(kChunk, (r + 1) * s - first);
            inputs.fill(r, first, len, buf.data());
            for (int64_t i = 0; i < len; ++i) {
                const float a = std::fabs(buf[static_cast<size_t>(i)]);
                if (std::isfinite(a)) amax = std::max(amax, a);  // a NaN or inf input is refused by the run itself
            }
        }
    return amax;
}

}  // namespace

Status resolve_tensor_scale(PathConfig& c, const Inputs& inputs) {
    if (!c.tensor_scale) return Status::Ok();
    if (auto st = validate(c); !st) return st;
    const float amax = tensor_amax(c, inputs);
    if (c.format.takes_tensor_amax()) {
        // NVFP4 (D58): the amax is the format's second level itself, T.
        c.format = c.format.with_tensor_amax(amax);
    } else {
        auto d = std::make_shared<Decl>(*c.format.decl);
        d->amax_floor = std::max(d->amax_floor, amax);
        c.format.decl = std::move(d);
    }
    c.tensor_amax = amax;
    return Status::Ok();
}

Result<RunTotals> run_paths(const std::vector<PathConfig>& paths, const Inputs& inputs, int threads,
                            const std::function<void(size_t, int, const ColumnRecord&)>& sink, Backend backend) {
    if (paths.empty()) return RunTotals{};
    for (const auto& p : paths) {
        if (auto st = validate(p); !st) return st.error();
        if (p.tensor_scale && !(p.tensor_amax >= 0))
            return make_error(ErrorCode::kInternal, "internal error: " + p.path_name() + "'s per-tensor scale was not resolved "
                                                    "(collectives::resolve_tensor_scale) before it ran");
        if (!p.stage_formats.empty() && backend != Backend::kCpu)
            return make_error(ErrorCode::kInvalidArgument, std::string("per-stage formats (") + p.format_name() +
                                                               ") run with --backend cpu for now; the " + to_string(backend) +
                                                               " transport carries one format");
        if (auto why = host_only_problem(p.path, p.divide, backend); !why.empty())
            return make_error(ErrorCode::kInvalidArgument, why);
        if (backend != Backend::kCpu && (p.format.rotated() || (p.stage_formats.size() > 1 && p.stage_formats[1].rotated())))
            return make_error(ErrorCode::kInvalidArgument, "rotated formats (" + p.format_name() + ") run with --backend cpu "
                                                           "for now; the " + to_string(backend) + " transport does not rotate");
        if (p.codec)
            if (auto why = codec_backend_problem(backend); !why.empty()) return make_error(ErrorCode::kInvalidArgument, why);
        if (p.codec)
            if (auto st = p.codec->check_block(p.block); !st) return st.error();
    }
    const PathConfig& c0 = paths.front();
    // Paths that share the reduce/gather column partition run column by column together; hpz-ag's
    // secondary columns are a partition of their own.
    int64_t columns = 0;
    for (const auto& p : paths) columns = std::max(columns, column_count(p));
    threads = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(columns, 1)));
    // nccl and mpi run on one thread: every process or GPU runs the whole schedule in step with the
    // others (nccl: every GPU's communicator). `device` gives each thread transports of its own (their
    // buffers and stream on the one GPU), as many threads as fit in half its memory: a column's device
    // steps are host round trips, and threads overlap them (issue 51).
    if (backend == Backend::kNccl || backend == Backend::kMpi) threads = 1;
    if (backend == Backend::kDevice) {
        int64_t per_thread = 0;
        for (const auto& p : paths) per_thread += device_transport_bytes(p.ranks, p.format, p.block);
        const auto q = kernels::gpu::query_devices();
        if (!q.devices.empty()) threads = device_thread_count(threads, per_thread, q.devices.front().memory_bytes);
        else threads = 1;  // make_transport says there is no GPU
    }
    std::vector<std::vector<std::unique_ptr<Transport>>> made(static_cast<size_t>(threads));
    for (auto& per_thread : made)
        for (const auto& p : paths) {
            auto t = make_transport(backend, p);
            if (!t) return t.error();
            per_thread.push_back(std::move(*t));
        }

    std::vector<std::vector<ByteCounts>> bytes(static_cast<size_t>(threads), std::vector<ByteCounts>(paths.size()));
    std::vector<std::vector<double>> wall(static_cast<size_t>(threads), std::vector<double>(paths.size(), 0.0)),
        cpu(static_cast<size_t>(threads), std::vector<double>(paths.size(), 0.0));
    std::vector<Status> status(static_cast<size_t>(threads));
    auto work = [&](int tid) {
        // A device or process-per-rank backend also times the input generation, which is not part
        // of the collective (cpu: not timed, the gate's many small columns would pay for it).
        ColumnCache cache(inputs, c0.ranks, backend != Backend::kCpu);
        ColumnRecord rec;
        std::vector<std::unique_ptr<Transport>>& transports = made[static_cast<size_t>(tid)];
        int64_t cached_first = -1, cached_len = -1;
        for (int64_t i = tid; i < columns; i += threads) {
            for (size_t k = 0; k < paths.size(); ++k) {
                if (i >= column_count(paths[k])) continue;
                const auto [first, len] = column_at(paths[k], i);
                if (!is_hpz(paths[k].path) && (first != cached_first || len != cached_len)) {
                    cache.set_column(first, len);  // generated once for every path of this column
                    cached_first = first;
                    cached_len = len;
                }
                const auto w0 = std::chrono::steady_clock::now();
                const double c0 = thread_cpu_seconds(), f0 = cache.fill_seconds(), fc0 = cache.fill_cpu_seconds();
                if (auto st = run_column(paths[k], cache, *transports[k], first, len, rec); !st) {
                    status[static_cast<size_t>(tid)] = st;
                    return;
                }
                cpu[static_cast<size_t>(tid)][k] += thread_cpu_seconds() - c0 - (cache.fill_cpu_seconds() - fc0);
                wall[static_cast<size_t>(tid)][k] += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() -
                                                     (cache.fill_seconds() - f0);
                sink(k, tid, rec);
            }
        }
        for (size_t k = 0; k < paths.size(); ++k) bytes[static_cast<size_t>(tid)][k] = transports[k]->bytes();
    };
    if (threads == 1) {
        work(0);
    } else {
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
        for (auto& th : pool) th.join();
    }
    for (const auto& st : status)
        if (!st) return st.error();
    RunTotals totals;
    totals.bytes.resize(paths.size());
    totals.seconds.assign(paths.size(), 0.0);
    totals.cpu_seconds.assign(paths.size(), 0.0);
    for (size_t k = 0; k < paths.size(); ++k) {
        totals.bytes[k].resize(paths[k].ranks);
        for (int t = 0; t < threads; ++t) {
            totals.bytes[k].merge(bytes[static_cast<size_t>(t)][k]);
            totals.seconds[k] += wall[static_cast<size_t>(t)][k];
            totals.cpu_seconds[k] += cpu[static_cast<size_t>(t)][k];
        }
    }
    return totals;
}

}  // namespace qtransit::collectives
