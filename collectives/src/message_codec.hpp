// How a column's messages are encoded and decoded (paths.cpp's Column): qtransit's CPU kernels, a
// user's codec plugin, or the CUDA kernels in each rank's device buffer (DeviceOps), chosen once per
// column by make_message_codec. Column calls Q and D through this one interface, instead of asking
// at every step which of the three it runs on (issue 48).
//
// It is a collectives interface, not a kernels one: the device's encode writes into a rank's buffer
// and its decode reads where a message lies, which are a transport's notions (D63).
#pragma once

#include <cstdint>
#include <memory>

#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/status.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::collectives {

class MessageCodec {
public:
    virtual ~MessageCodec() = default;
    // The element type encode reads: a plugin's own (the values are rounded to it before encode,
    // so that the ledger records what the codec read); binary32 for qtransit's kernels.
    virtual kernels::ValueType input_type() const { return kernels::ValueType::kBinary32; }
    // Q: the n values v of rank `from` into m (codes, scale, offset; and on a device, the block in
    // from's buffer). f: the stage's format, as the ledger unpacks the codes.
    virtual Status encode(const FormatSpec& f, int64_t from, const float* v, int64_t n, const kernels::CodecOptions& options,
                          Message& m) = 0;
    // D: the message's values, quantized or not, into out[0, m.len).
    virtual Status decode(const Message& m, float* out) = 0;
    // An unquantized message made ready to leave `rank` (a device copies it into rank's buffer).
    virtual Status stage_raw(int64_t /*rank*/, Message& /*m*/) { return Status::Ok(); }
    // Whether a decoded partial lies in the receiver's device buffer (m.dev_rank).
    virtual bool on_device() const { return false; }
    // Whether this is qtransit's CPU kernels: encode reads its values without changing them (no
    // copy needed), and decode is a function of the message alone (equal messages, equal rows).
    virtual bool host_kernels() const { return false; }
};

// The codec of column steps under config c: c's codec plugin when it has one, else the device's
// kernels when the transport runs on one (dev non-null), else qtransit's CPU kernels. A plugin on a
// device transport is refused (codec_backend_problem): the Error says so.
Result<std::unique_ptr<MessageCodec>> make_message_codec(const PathConfig& c, DeviceOps* dev);

}  // namespace qtransit::collectives
