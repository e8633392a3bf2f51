// RapidCheck generators of blocks for a codec's own test suite (and qtransit's): binary32 values from
// bit patterns mixed with the values that break quantizers (±0, subnormals, the smallest normal,
// FLT_MAX), blocks of one magnitude, blocks built to contain exact ties, constant, single-element,
// subnormal-only and huge blocks, and tensors of several blocks whose block size need not divide
// them (odd lengths, short last blocks). RapidCheck's own float generator makes no specials.
// Header-only; the user's test links rapidcheck (qtransit::testing brings it).
#pragma once

#include <rapidcheck.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace qtransit::testing {


inline float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Any finite binary32, by bit pattern (exponent field 255 is remapped to 254).
inline rc::Gen<float> finite_bits() {
    return rc::gen::map(rc::gen::arbitrary<uint32_t>(), [](uint32_t u) {
        if (((u >> 23) & 0xff) == 0xff) u &= ~(1u << 23);
        return from_bits(u);
    });
}

inline rc::Gen<float> special_value() {
    return rc::gen::elementOf(std::vector<float>{0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN, -FLT_MIN,
                                                 FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.5f, 65504.0f, -65504.0f,
                                                 6.1035156e-05f /*2^-14*/, 5.9604645e-08f /*2^-24*/});
}

inline rc::Gen<float> subnormal() {
    return rc::gen::map(rc::gen::inRange<uint32_t>(1, 0x800000), [](uint32_t m) { return from_bits(m | ((m & 1) << 31)); });
}

// m * 2^e with a small integer m: values whose quotients by a power-of-two scale are exact, so
// rounding ties (k + 1/2) are common.
inline rc::Gen<float> dyadic(int emin, int emax) {
    return rc::gen::apply([](int m, int e) { return std::ldexp(static_cast<float>(m), e); },
                          rc::gen::inRange(-511, 512), rc::gen::inRange(emin, emax + 1));
}

// A value drawn from a mix of the above.
inline rc::Gen<float> any_value() {
    return rc::gen::weightedOneOf<float>({{4, finite_bits()}, {2, special_value()}, {2, subnormal()},
                                          {3, dyadic(-30, 30)},
                                          {3, rc::gen::map(rc::gen::inRange(-1000000, 1000001),
                                                           [](int v) { return static_cast<float>(v) * 1e-3f; })}});
}

// Values of one magnitude scale (what real blocks look like), optionally with specials mixed in.
inline rc::Gen<std::vector<float>> block_values(int max_len) {
    return rc::gen::mapcat(rc::gen::inRange(0, 7), [max_len](int shape) -> rc::Gen<std::vector<float>> {
        const auto len = rc::gen::inRange(1, max_len + 1);
        switch (shape) {
            case 0:  // anything
                return rc::gen::mapcat(len, [](int n) { return rc::gen::container<std::vector<float>>(n, any_value()); });
            case 1:  // one scale: dyadics around 2^e
                return rc::gen::mapcat(rc::gen::pair(len, rc::gen::inRange(-140, 100)), [](std::pair<int, int> p) {
                    return rc::gen::container<std::vector<float>>(p.first, dyadic(p.second, p.second + 4));
                });
            case 2:  // exact ties for int<b>: elements (k + 1/2) 2^e and one (2^(b-1)-1) 2^e (so s = 2^e)
                return rc::gen::mapcat(rc::gen::tuple(len, rc::gen::inRange(2, 9), rc::gen::inRange(-120, 110)),
                                       [](std::tuple<int, int, int> t) {
                                           // Plain variables: clang before 16 cannot capture a structured binding.
                                           const int n = std::get<0>(t), bits = std::get<1>(t), e = std::get<2>(t);
                                           const int qmax = (1 << (bits - 1)) - 1;
                                           return rc::gen::map(
                                               rc::gen::container<std::vector<int>>(n, rc::gen::inRange(-qmax, qmax)),
                                               [qmax, e](std::vector<int> ks) {
                                                   std::vector<float> v;
                                                   for (int k : ks) v.push_back(std::ldexp(k + 0.5f, e));
                                                   v[0] = std::ldexp(static_cast<float>(qmax), e);
                                                   return v;
                                               });
                                       });
            case 3:  // constant block (zero included, with either sign)
                return rc::gen::apply([](int n, float v) { return std::vector<float>(static_cast<size_t>(n), v); }, len,
                                      rc::gen::weightedOneOf<float>({{1, special_value()}, {1, finite_bits()}}));
            case 4:  // subnormal-only
                return rc::gen::mapcat(len, [](int n) { return rc::gen::container<std::vector<float>>(n, subnormal()); });
            case 5:  // mixed zeros and tiny values
                return rc::gen::mapcat(len, [](int n) {
                    return rc::gen::container<std::vector<float>>(
                        n, rc::gen::elementOf(std::vector<float>{0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN, 2 * FLT_TRUE_MIN}));
                });
            default:  // huge: near FLT_MAX
                return rc::gen::mapcat(len, [](int n) {
                    return rc::gen::container<std::vector<float>>(
                        n, rc::gen::map(rc::gen::inRange<uint32_t>(0x7e000000u, 0x7f800000u), [](uint32_t u) {
                            return from_bits(u | ((u & 1u) << 31));
                        }));
                });
        }
    });
}

// A tensor of several blocks and the block size to cut it with (block may or may not divide it).
struct Case {
    std::vector<float> x;
    int64_t block = 32;
};

// `count` values from `g`, with count drawn from [lo, hi].
template <class T>
rc::Gen<std::vector<T>> vector_of(int lo, int hi, rc::Gen<T> g) {
    return rc::gen::mapcat(rc::gen::inRange(lo, hi + 1), [g](int n) {
        return rc::gen::container<std::vector<T>>(static_cast<size_t>(n), g);
    });
}

inline rc::Gen<Case> tensor_case(int max_blocks = 6, int max_block = 70) {
    return rc::gen::mapcat(rc::gen::inRange(1, max_block + 1), [max_blocks](int block) {
        return rc::gen::map(vector_of<std::vector<float>>(1, max_blocks, block_values(block)),
                            [block](const std::vector<std::vector<float>>& parts) {
                                Case c;
                                c.block = block;
                                for (const auto& p : parts) c.x.insert(c.x.end(), p.begin(), p.end());
                                return c;
                            });
    });
}

}  // namespace qtransit::testing
