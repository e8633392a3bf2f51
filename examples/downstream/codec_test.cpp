// A user's own codec checked from their GoogleTest suite: load the plugin, run qtransit's kernel
// check on the gate's inputs, then let RapidCheck hunt for a tensor that tells it from the reference.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "qtransit/kernels/plugin.hpp"
#include "qtransit/testing/blocks.hpp"
#include "qtransit/testing/conforms.hpp"

namespace {

const qtransit::kernels::PluginCodec& codec() {
    static const auto c = qtransit::kernels::PluginCodec::load(QT_CODEC);
    if (!c) {
        ADD_FAILURE() << c.error().message;
        std::abort();
    }
    return **c;
}

TEST(MyCodec, ConformsBitForBitOnTheGatesInputs) {
    for (int64_t block : {16, 32, 128}) {
        qtransit::testing::ConformOptions o;
        o.block = block;
        const auto r = qtransit::testing::conforms(codec(), o);
        EXPECT_TRUE(r) << r;
        EXPECT_TRUE(r.exact) << r;
    }
}

RC_GTEST_PROP(MyCodec, ConformsOnGeneratedTensors, ()) {
    const auto t = *qtransit::testing::tensor_case();
    qtransit::testing::ConformOptions o;
    o.block = t.block;
    const auto r = qtransit::testing::conforms(codec(), t.x, o);
    RC_ASSERT(r.ok);
}

}  // namespace
