// A codec plugin (qtransit/codec_plugin.h, docs/PLUGIN.md) loaded with dlopen and adapted to
// qtransit's own wire layout (codec.hpp's EncodedTensor: the format's packing, one scale per block
// in order), so that everything that runs qtransit's kernels can run a user's instead: the paths'
// Q and D, `quantize`, the gate's kernel-vs-reference checks, `formats validate`.
//
// The adapter undoes only what the codec declared: its packing (nibble order, a byte per code), its
// scale layout (cuBLAS's swizzled tiles), its element types (values are cast to the input type
// before encode, RNE, and decoded values widened exactly). Nothing else is repaired: a codec that
// declares one thing and does another is exactly what the checks are for.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/codec.hpp"

struct qtransit_codec_v1_t;

namespace qtransit::kernels {

// How closely a codec must agree with the reference (docs/PLUGIN.md "Conformance").
// exact: every code, scale, offset and decoded value bit for bit. bounded: every element within the
// format's bound for its block in exact arithmetic (a reciprocal multiply, an FMA are allowed);
// differing bits are counted and reported, never hidden.
enum class Conformance : uint8_t { kExact, kBounded };
Result<Conformance> parse_conformance(std::string_view name);  // "exact" | "bounded"
const char* to_string(Conformance c);

enum class ValueType : uint8_t { kBinary32 = 0, kBinary16 = 1, kBfloat16 = 2 };
const char* to_string(ValueType t);
// v rounded to the type (RNE; binary16 overflows to ±inf) and widened back exactly.
float round_to(ValueType t, float v);

// The buffer sizes of `elements` values in blocks of `block` restarting every `shard` elements
// (elements % shard == 0), in qtransit's layout: blocks in order, each on a byte boundary.
EncodedSizes sharded_sizes(const FormatSpec& format, int64_t elements, int64_t block, int64_t shard);

// Whether a scale or offset slot still holds the NaN qtransit filled it with before the codec's
// encode: the codec never wrote it (a layout mistake, shown as such in a first difference).
bool is_unwritten(float v);

// Whether e is a codec breaking qtransit's process contract (docs/PLUGIN.md: it wrote into a const
// input, or left the floating-point environment changed), as against failing on its own terms.
bool is_contract_breach(const Error& e);

// The last step of a program that loads codecs (the CLI's main): with no codec loaded it returns rc;
// otherwise it flushes stdio and ends the process with rc at once (_exit), after LeakSanitizer's
// check where that is linked in. No code of a codec runs after the verdict: not its destructors,
// its atexit handlers or its threads, any of which could end the process with a status of its own
// (a destructor calling exit(0) turned a failed check's exit 1 into 0).
int finish_process(int rc);

class PluginCodec {
public:
    // dlopen the library, call its qtransit_codec_v1, check every declared field. Every refusal is
    // one line naming the library and what is wrong (kInvalidArgument); nothing runs before.
    static Result<std::shared_ptr<const PluginCodec>> load(const std::string& path);
    // The checks of load() on a descriptor already in memory (`path` names it in messages): what
    // load() runs after the entry point returned, and what the loader's fuzz target drives.
    static Result<std::shared_ptr<const PluginCodec>> from_descriptor(const qtransit_codec_v1_t* descriptor,
                                                                      const std::string& path);

    const std::string& name() const { return name_; }
    const std::string& path() const { return path_; }
    const FormatSpec& format() const { return format_; }
    bool cuda() const { return cuda_; }
    bool thread_safe() const { return thread_safe_; }
    // The codec declares the optional fused dequantize-reduce-requantize (no command calls it yet).
    bool has_reduce() const { return has_reduce_; }
    ValueType input_type() const { return in_; }
    ValueType output_type() const { return out_; }
    // "example-int4 (int4; cpu; packing format; binary32 in, binary32 out; scales in order) from lib.so"
    std::string describe() const;
    // The codec's block constraints (and the format's): the Error names the one broken.
    Status check_block(int64_t block) const;

    // Encode `x` (cast to the input type first) in qtransit's layout; sizes from sharded_sizes().
    // opt.site and opt.seed/hop key stochastic rounding and name elements in messages. A codec's
    // own failure is an Error of kind kCodec carrying its message.
    Status encode(std::span<const float> x, int64_t block, int64_t shard, std::span<uint8_t> codes,
                  std::span<float> scales, std::span<float> offsets, const CodecOptions& opt) const;
    // tensor_amax: as CodecOptions::tensor_amax, the T the codes were encoded under (< 0: declared).
    Status decode(int64_t block, int64_t shard, std::span<const uint8_t> codes, std::span<const float> scales,
                  std::span<const float> offsets, std::span<float> out, float tensor_amax = -1.0f) const;
    // One block of len <= block values (a path's Q and D: one shard of len elements, one block).
    Status encode_block(const float* x, int64_t len, int64_t block, uint8_t* codes, float* scale, float* offset,
                        const CodecOptions& opt) const;
    Status decode_block(const uint8_t* codes, int64_t len, int64_t block, float scale, float offset, float* out,
                        float tensor_amax = -1.0f) const;
    PluginCodec(const PluginCodec&) = delete;
    PluginCodec& operator=(const PluginCodec&) = delete;
    PluginCodec() = default;

private:
    Status call_encode(const void* x, int64_t elements, int64_t block, int64_t shard, uint8_t* codes, float* scales,
                       float* offsets, const CodecOptions& opt, size_t code_bytes, size_t scale_count) const;
    Status call_decode(const uint8_t* codes, const float* scales, const float* offsets, int64_t elements,
                       int64_t block, int64_t shard, void* out, size_t code_bytes, size_t scale_count, float tensor_amax) const;
    // The tensor amax a call passes (0 for formats without one); t < 0: the format's declared one.
    float amax_for_call(float t) const;
    int64_t plugin_code_bytes(int64_t len) const;  // one block's, in the codec's packing
    int64_t plugin_tensor_code_bytes(int64_t elements, int64_t block, int64_t shard) const;
    size_t plugin_scale_count(int64_t blocks) const;
    int64_t scale_slot(int64_t block_index) const;
    Error codec_error(const std::string& what, const char* msg) const;
    // The line a fatal signal during `call` prints (docs/PLUGIN.md), the signal's name to follow.
    std::string crash_line(const char* call, int64_t elements, int64_t block) const;
    Error fp_error(const char* call, const std::string& change) const;
    Error wrote_input(const char* call, const std::string& what, int64_t index) const;

    const qtransit_codec_v1_t* c_ = nullptr;
    std::string name_, path_;
    FormatSpec format_;
    bool cuda_ = false, thread_safe_ = true, has_reduce_ = false;
    ValueType in_ = ValueType::kBinary32, out_ = ValueType::kBinary32;
    int packing_ = 0, layout_ = 0;
    int64_t row_blocks_ = 0, block_min_ = 1, block_max_ = 0, block_multiple_ = 1;
    mutable std::mutex serial_;  // held around every call when !thread_safe_
};

}  // namespace qtransit::kernels
