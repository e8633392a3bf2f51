// The tensor files real training runs dump, read into an NpyArray: .npy (npy.hpp: binary32, binary16,
// bfloat16 as ml_dtypes writes it, uint16 bits) and Hugging Face's .safetensors
// (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the data, little-endian in C order.
// Nothing in a file is trusted: every failure is an Error whose message starts with the file and
// says what is wrong and where (a byte offset, a tensor's name), on one line.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/kernels/npy.hpp"

namespace qtransit::kernels {

struct TensorReadOptions {
    std::string tensor;  // safetensors: the tensor's name ("" : the file's only tensor)
    std::string dtype;   // "" (what the file says), "fp32", "fp16", "bf16": what raw uint16 bits are; must agree with a typed file
    bool raw_only = false;  // dtype says only what raw uint16 arrays hold: typed files are read as they say
};

// .safetensors (by extension, case-insensitive) or .npy (anything else). Reads F32, F16, BF16, and
// U16 only with a dtype of fp16 or bf16; the NpyArray's dtype says what the values were read as.
Result<NpyArray> read_tensor(const std::string& path, const TensorReadOptions& opt = {});
// Only the flat elements [first, first + count) of the tensor: the file is checked as read_tensor
// checks it, but the rest of its data is not read (a pipe is read whole). `shape` is the tensor's,
// `data` the count values.
Result<NpyArray> read_tensor_slice(const std::string& path, const TensorReadOptions& opt, int64_t first, int64_t count);
// Whether read_tensor reads `path` as .safetensors (its extension, any case).
bool is_safetensors_name(const std::string& path);

// The same reader on a whole .safetensors file held in memory (the fuzz target's entry); `name`
// stands for the file in messages.
Result<NpyArray> read_safetensors_bytes(std::span<const uint8_t> bytes, const TensorReadOptions& opt,
                                        const std::string& name);

// The names of --dtype values, for help text: "fp32, fp16, bf16".
std::string known_dtype_names();

// The largest JSON header read (the header length field past it is refused before anything is
// allocated): the reference implementation's own limit is 100 MB.
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t{100} << 20;

// Writes each array as F32, F16 or BF16 per its dtype, in the order given, with `metadata` as the
// header's "__metadata__" (omitted when empty); atomically, as write_npy does. The header is padded
// with spaces to a multiple of 8 bytes, as the reference implementation does. Names must be unique,
// non-empty, valid UTF-8 and not "__metadata__"; each shape must hold its data's count.
Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace qtransit::kernels
