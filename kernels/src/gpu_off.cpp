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
Status encode_device_queued(const FormatSpec&, const float*, int64_t, int64_t, uint8_t*, float*, float*,
                            const CodecOptions&, unsigned long long*, void*) {
    return not_built();
}
Status decode_device(const FormatSpec&, int64_t, const uint8_t*, const float*, const float*, float*, int64_t, void*,
                     const SignKey&) {
    return not_built();
}
Result<EncodedTensor> encode(const FormatSpec&, std::span<const float>, int64_t, const CodecOptions&) {
    return not_built();
}
Result<std::vector<float>> decode(const EncodedTensor&) { return not_built(); }

Status encode_swizzled_device(const FormatSpec&, const SwizzleLayout&, const float*, int64_t, DeviceEncodedOut,
                              const CodecOptions&, void*) {
    return not_built();
}
Status reduce_requantize_device(const FormatSpec&, int64_t, std::span<const DeviceEncoded>, int64_t, Accum,
                                DeviceEncodedOut, const CodecOptions&, void*) {
    return not_built();
}
Status decode_add_device(const FormatSpec&, int64_t, DeviceEncoded, const float*, float*, int64_t, Accum, void*) {
    return not_built();
}
Result<void*> device_alloc(size_t) { return not_built(); }
void device_free(void*) {}
Status copy_to_device(void*, const void*, size_t) { return not_built(); }
Status copy_to_host(void*, const void*, size_t) { return not_built(); }
Status device_fill(void*, int, size_t) { return not_built(); }
Status device_synchronize() { return not_built(); }
Result<EncodedTensor> reduce_requantize(std::span<const EncodedTensor>, Accum, const CodecOptions&) {
    return not_built();
}
Result<std::vector<float>> decode_add(const EncodedTensor&, std::span<const float>, Accum) { return not_built(); }
Result<FastMathDs> ds_encode_fast_math(int, std::span<const float>, int64_t) { return not_built(); }

}  // namespace qtransit::kernels::gpu
