// The GPU interface in a build without CUDA: it says so, and never pretends to have run anything.
#include "qtransit/kernels/gpu.hpp"

namespace qtransit::kernels::gpu {
namespace {
Error not_built() {
    return make_error(ErrorCode::kCuda, "this build of qtransit has no CUDA backend (configure with QTRANSIT_CUDA=ON "
                                        "on a machine with the CUDA toolkit)");
}
}  // namespace

BuildInfo build_info() { return {}; }
DeviceQuery query_devices() { return {{}, 0, "CUDA backend not compiled in this build"}; }
bool device_available() { return false; }
Status encode_device(const FormatSpec&, const float*, int64_t, int64_t, uint8_t*, float*, float*, const CodecOptions&,
                     void*) {
    return not_built();
}
Status decode_device(const FormatSpec&, int64_t, const uint8_t*, const float*, const float*, float*, int64_t, void*) {
    return not_built();
}
Result<EncodedTensor> encode(const FormatSpec&, std::span<const float>, int64_t, const CodecOptions&) {
    return not_built();
}
Result<std::vector<float>> decode(const EncodedTensor&) { return not_built(); }

}  // namespace qtransit::kernels::gpu
