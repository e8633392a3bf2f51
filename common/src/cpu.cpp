#include "qtransit/common/cpu.hpp"

namespace qtransit {

bool cpu_avx512() {
#if defined(__x86_64__)
    static const bool v = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    }();
    return v;
#else
    return false;
#endif
}

}  // namespace qtransit
