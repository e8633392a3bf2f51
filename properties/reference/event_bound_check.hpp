// The checker's double bound of one quantization event against the reference's exact bound, for a
// block x already quantized by the reference: shared by the integer and the declared-format
// property tests (RC_ASSERTs, so call it from inside a RapidCheck property).
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::testing {

// For every element: the double bound, once inflated by (1 + 2^-30), is rigorous (>= the exact
// E); it is tight (<= E (1 + 2^-20)); e(absmax) dominates both; and e(a) is monotone.
inline void assert_event_bound_mirrors(const FormatSpec& f, const std::vector<float>& x,
                                       const reference::Quantized& q) {
    using reference::element_bound, reference::event_bound_of_absmax, reference::event_element_bound,
        reference::Exact;
    QuantEvent ev;
    ev.scale = q.scales[0];
    if (!q.offsets.empty()) ev.offset = q.offsets[0];
    ev.x = x;
    ev.codes = q.codes;
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const double e_of_a = event_bound_of_absmax(f, amax);
    for (size_t i = 0; i < x.size(); ++i) {
        const Exact exact = element_bound(q, x, static_cast<int64_t>(i));
        const double mine = event_element_bound(f, ev, static_cast<int64_t>(i));
        RC_LOG() << f.name() << " x = " << x[i] << " exact " << exact.to_double() << " mine " << mine << " e(a) "
                 << e_of_a << "\n";
        RC_ASSERT(Exact(mine * (1 + 0x1p-30)) >= exact);                      // rigorous once inflated
        RC_ASSERT(Exact(mine) <= exact * Exact(1 + 0x1p-20) + Exact(0x1p-300));  // and tight
        RC_ASSERT(Exact(e_of_a * (1 + 0x1p-20)) >= exact);                    // e(a) dominates E
        RC_ASSERT(e_of_a * (1 + 0x1p-20) >= mine * (1 + 0x1p-30));
    }
    RC_ASSERT(event_bound_of_absmax(f, static_cast<double>(amax) * 1.5) >= e_of_a);  // e is monotone
}

}  // namespace qtransit::testing
