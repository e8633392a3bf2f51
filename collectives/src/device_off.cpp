// The device transports in a build without CUDA: they say so, and never pretend to have run.
#include "qtransit/collectives/device.hpp"

namespace qtransit::collectives {
namespace {
Error not_built() {
    return make_error(ErrorCode::kCuda, "this build has no CUDA backend (configure with QTRANSIT_CUDA=ON on a machine "
                                        "with the CUDA toolkit)");
}
}  // namespace

Result<std::unique_ptr<Transport>> make_device_transport(int64_t, int64_t, FormatSpec, int64_t) { return not_built(); }
Result<std::unique_ptr<Transport>> make_nccl_transport(int64_t, int64_t, FormatSpec, int64_t) { return not_built(); }

}  // namespace qtransit::collectives
