#include "message_codec.hpp"

#include <algorithm>

#include "qtransit/collectives/device.hpp"

namespace qtransit::collectives {
namespace {

// A message's values as sent (no quantization): copied.
void copy_raw(const Message& m, float* out) { std::copy(m.raw.begin(), m.raw.end(), out); }

// qtransit's production CPU kernels (kernels/codec.hpp). A message carries its stage's format
// when it is not the path's (Message::format), and a rotated format's signs keyed by the seed.
class HostKernels final : public MessageCodec {
public:
    HostKernels(const FormatSpec& format, uint64_t seed) : format_(format), seed_(seed) {}
    Status encode(const FormatSpec& f, int64_t, const float* v, int64_t n, const kernels::CodecOptions& options, Message& m) override {
        m.codes.resize(static_cast<size_t>(f.code_bytes(n)));
        return kernels::encode_block(f, v, n, m.codes.data(), &m.scale, &m.offset, options);
    }
    Status decode(const Message& m, float* out) override {
        if (!m.quantized) {
            copy_raw(m, out);
            return Status::Ok();
        }
        kernels::decode_block(m.format ? *m.format : format_, m.codes.data(), m.len, m.scale, m.offset, out,
                              kernels::SignKey{seed_, m.sign_first});
        return Status::Ok();
    }
    bool host_kernels() const override { return true; }

private:
    const FormatSpec& format_;
    uint64_t seed_;
};

// A user's codec plugin (docs/PLUGIN.md): the path's one format, block and (a format with a tensor
// amax) the path's resolved T, not the declared one (resolve_tensor_scale).
class Plugin final : public MessageCodec {
public:
    explicit Plugin(const PathConfig& c)
        : codec_(*c.codec), format_(c.format), block_(c.block),
          tensor_amax_(c.format.takes_tensor_amax() ? c.format.decl->tensor_amax : -1.0f) {}
    kernels::ValueType input_type() const override { return codec_.input_type(); }
    Status encode(const FormatSpec&, int64_t, const float* v, int64_t n, const kernels::CodecOptions& options, Message& m) override {
        m.codes.resize(static_cast<size_t>(format_.code_bytes(n)));
        kernels::CodecOptions o = options;
        o.tensor_amax = tensor_amax_;
        return codec_.encode_block(v, n, block_, m.codes.data(), &m.scale, &m.offset, o);
    }
    Status decode(const Message& m, float* out) override {
        if (!m.quantized) {
            copy_raw(m, out);
            return Status::Ok();
        }
        return codec_.decode_block(m.codes.data(), m.len, block_, m.scale, m.offset, out, tensor_amax_);
    }

private:
    const kernels::PluginCodec& codec_;
    const FormatSpec& format_;
    int64_t block_;
    float tensor_amax_;
};

// The CUDA kernels in each rank's device buffer (device.hpp); the codes and metadata the ledger
// records are copied back by DeviceOps::encode.
class Device final : public MessageCodec {
public:
    explicit Device(DeviceOps& dev) : dev_(dev) {}
    Status encode(const FormatSpec&, int64_t from, const float* v, int64_t n, const kernels::CodecOptions& options, Message& m) override {
        return dev_.encode(from, v, n, options, m);
    }
    Status decode(const Message& m, float* out) override { return dev_.decode(m, out); }
    Status stage_raw(int64_t rank, Message& m) override { return dev_.stage_raw(rank, m); }
    bool on_device() const override { return true; }

private:
    DeviceOps& dev_;
};

}  // namespace

Result<std::unique_ptr<MessageCodec>> make_message_codec(const PathConfig& c, DeviceOps* dev) {
    if (c.codec && dev)  // run_paths refuses it first (codec_backend_problem); this is run_column called alone
        return make_error(ErrorCode::kInvalidArgument, "--codec runs the paths with --backend cpu or mpi, not on a device transport (docs/PLUGIN.md)");
    if (c.codec) return std::unique_ptr<MessageCodec>(std::make_unique<Plugin>(c));
    if (dev) return std::unique_ptr<MessageCodec>(std::make_unique<Device>(*dev));
    return std::unique_ptr<MessageCodec>(std::make_unique<HostKernels>(c.format, c.seed));
}

}  // namespace qtransit::collectives
