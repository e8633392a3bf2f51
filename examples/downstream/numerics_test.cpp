// A user's numerics tests, calling qtransit in-process: the gate on a small config (asserting on named
// verdicts), a config built in code and checked before it runs, and the exact reference checker on
// one collective path.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/paths.hpp"
#include "qtransit/version.hpp"

namespace qt = qtransit;

namespace {

const qt::reports::Verdict* find(const qt::reports::GateResult& r, const std::string& name) {
    for (const auto& v : r.verdicts)
        if (v.name == name) return &v;
    return nullptr;
}

// Our quantized reduce-scatter is qgZ's one-hop all-to-all: every contribution quantized once, so
// its error must not grow with N, and INT4's relative RMS error stays under 0.12.
constexpr const char* kGate = R"([gate]
formats = ["int4", "int8"]
paths = ["ring-rs", "a2a-rs"]
distributions = ["normal"]
ranks = [8, 16, 32]
elements = 1024

[[scaling]]
path = "a2a-rs"
min = -0.05
max = 0.05
why = "one hop: quantized once"

[[budget]]
name = "our-int4-rs"
path = "a2a-rs"
format = "int4"
metric = "rel_rms_error"
max = 0.12
)";

}  // namespace

TEST(Downstream, TheGateOnOurConfig) {
    auto cfg = qt::gate::parse_gate_config(kGate, "downstream.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    auto res = qt::gate::run_gate(*cfg, {});
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->version, QTRANSIT_VERSION);
    for (const char* name : {"kernel-vs-reference/int4", "kernel-vs-reference/int8", "bounds/int4/a2a-rs", "bounds/int4/ring-rs",
                             "k/int4/a2a-rs", "k/int8/ring-rs", "scaling/int4/a2a-rs/normal", "budget/our-int4-rs"}) {
        const auto* v = find(*res, name);
        ASSERT_NE(v, nullptr) << name;
        EXPECT_EQ(v->status, qt::reports::VerdictStatus::kPass) << name << ": " << v->message;
    }
    EXPECT_TRUE(res->passed());
}

TEST(Downstream, ABudgetTooTightFails) {
    auto cfg = qt::gate::parse_gate_config(kGate, "downstream.toml");
    ASSERT_TRUE(cfg) << cfg.error().message;
    cfg->budgets[0].max = 0.01;  // INT4 cannot get there
    auto res = qt::gate::run_gate(*cfg, {});
    ASSERT_TRUE(res) << res.error().message;
    const auto* v = find(*res, "budget/our-int4-rs");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->status, qt::reports::VerdictStatus::kFail) << v->message;
    EXPECT_FALSE(res->passed());
}

TEST(Downstream, AConfigBuiltInCodeIsCheckedBeforeItRuns) {
    auto cfg = qt::gate::parse_gate_config(kGate, "downstream.toml");
    ASSERT_TRUE(cfg);
    cfg->elements = 1000;  // not divisible by N = 16
    auto st = qt::gate::validate(*cfg);
    ASSERT_FALSE(st);
    EXPECT_NE(st.error().message.find("gate.elements"), std::string::npos) << st.error().message;
}

TEST(Downstream, TheReferenceCheckerOnOnePath) {
    const int64_t n = 8, m = 1024;
    std::vector<float> x(static_cast<size_t>(n * m));
    std::mt19937 gen(7);
    std::normal_distribution<float> normal;
    for (auto& v : x) v = normal(gen);
    for (auto [path, k] : {std::pair{qt::PathKind::kA2aRs, 1}, std::pair{qt::PathKind::kRingRs, static_cast<int>(n - 1)}}) {
        qt::PathConfig c;
        c.path = path;
        c.format = *qt::parse_format("int4");
        c.ranks = n;
        c.ranks_per_node = n;
        c.elements = m;
        auto columns = qt::reference::run_path_plain(c, x);
        ASSERT_TRUE(columns) << columns.error().message;
        qt::reference::PathChecker checker(c);
        for (const auto& col : *columns) checker.add(col);
        const auto s = checker.stats();
        EXPECT_TRUE(s.bound_holds) << s.first_violation;
        EXPECT_EQ(s.outputs_checked, m);  // a reduce-scatter: M / N outputs on each of N ranks
        EXPECT_EQ(s.k_max, k);            // quantized once on the all-to-all, N - 1 times around the ring
        EXPECT_GT(s.rel_rms_error(), 0.0);
    }
}
