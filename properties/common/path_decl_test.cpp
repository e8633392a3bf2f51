// Declared paths (common/path_decl.hpp, docs/PATHS.md): every built-in path is a declaration that
// resolves to itself; a declaration prints back to one that resolves the same; every declaration no
// modeled schedule computes is refused with its reason, by file, line and key.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "qtransit/common/path_decl.hpp"

namespace {

using namespace qtransit;

std::string one(const std::string& body) { return "[[path]]\nname = \"p\"\n" + body; }

TEST(PathDecl, EveryBuiltInPathIsADeclarationThatResolvesToItself) {
    const auto& b = builtin_path_decls();
    ASSERT_FALSE(b.empty());
    std::set<std::string> names;
    for (const auto& d : b) names.insert(d.name);
    EXPECT_EQ(names.size(), b.size());  // no name twice
    for (const auto& p : all_paths()) {
        auto d = find_path_decl(p.name);
        ASSERT_TRUE(d.ok()) << p.name;
        EXPECT_EQ(d->kind, p.kind) << p.name;
        EXPECT_TRUE(d->is_builtin_kind()) << p.name;
        EXPECT_EQ(d->wire_any(), p.quantized) << p.name;  // a quantized built-in takes the run's format
        if (typed_path(p.kind)) {
            ASSERT_TRUE(d->accum.has_value()) << p.name;
            EXPECT_EQ(*d->accum, p.element) << p.name;
        }
        EXPECT_FALSE(d->divide.has_value()) << p.name;  // a built-in under its own name fixes no division
    }
    // The declaration-only variants: NCCL's FP8 ncclAvg, the mean with the factor before the sum.
    int avg = 0;
    for (const auto& d : b)
        if (d.name.ends_with("-avg")) {
            ++avg;
            EXPECT_TRUE(saturating(path_info(d.kind).element)) << d.name;
            ASSERT_TRUE(d.divide.has_value());
            EXPECT_EQ(*d.divide, Divide::kPre) << d.name;
            EXPECT_EQ(std::string(path_info(d.kind).name) + "-avg", d.name);
            EXPECT_FALSE(d.is_builtin_kind());
        }
    EXPECT_EQ(avg, 6);
    // DeepEP's dispatch (D44): ring-ag's schedule with DeepEP's cast fixed as the wire.
    int dispatch = 0;
    for (const auto& d : b)
        if (d.name.starts_with("deepep-fp8-dispatch")) {
            ++dispatch;
            EXPECT_EQ(d.kind, PathKind::kRingAg) << d.name;
            EXPECT_EQ(d.collective, "dispatch") << d.name;
            ASSERT_EQ(d.wire.size(), 1u) << d.name;
            EXPECT_TRUE(d.wire[0].starts_with("fp8-e4m3-1x128")) << d.name;
            EXPECT_FALSE(d.is_builtin_kind()) << d.name;
        }
    EXPECT_EQ(dispatch, 3);
    // FlashInfer's FP8 all-reduce (D46): two-shot whose owner keeps its binary32 sum, bf16 outputs.
    auto fi = find_path_decl("flashinfer-fp8-2shot");
    ASSERT_TRUE(fi.ok()) << fi.error().message;
    EXPECT_EQ(fi->kind, PathKind::kTwoShotArKeep);
    EXPECT_EQ(fi->requantize, "each-stage-except-owner");
    EXPECT_EQ(fi->wire, std::vector<std::string>{"flashinfer-fp8"});
    EXPECT_EQ(fi->accum, Accum::kFp32);
    EXPECT_EQ(fi->output, Accum::kBf16);
    EXPECT_FALSE(fi->is_builtin_kind());
    EXPECT_EQ(fi->input, Accum::kBf16);
    // DeepEP's combine (D47): bf16 inputs summed in binary32, one rounding to bf16: fp32-ring-rs's sum.
    auto cb = find_path_decl("deepep-bf16-combine");
    ASSERT_TRUE(cb.ok()) << cb.error().message;
    EXPECT_EQ(cb->kind, PathKind::kFp32RingRs);
    EXPECT_EQ(cb->collective, "combine");
    EXPECT_EQ(cb->input, Accum::kBf16);
    EXPECT_EQ(cb->output, Accum::kBf16);
    // NCCL's FP8 over NVLS (D49): the binary16 all-reduce's schedule with FP8 inputs and outputs.
    for (const char* ty : {"e4m3", "e5m2"}) {
        auto nv = find_path_decl(std::string("nccl-fp8-") + ty + "-nvls-ar");
        ASSERT_TRUE(nv.ok()) << nv.error().message;
        EXPECT_EQ(nv->kind, PathKind::kFp16RingAr);
        EXPECT_EQ(nv->exchange, "nvls");
        EXPECT_EQ(nv->input, std::string(ty) == "e4m3" ? Accum::kFp8E4m3 : Accum::kFp8E5m2);
        EXPECT_EQ(nv->output, nv->input);
    }
    for (const auto& d : b)
        EXPECT_EQ(d.output.has_value(), d.name == "flashinfer-fp8-2shot" || d.name == "deepep-bf16-combine" || d.name.ends_with("-nvls-ar") ||
                                            d.name.starts_with("quickreduce-"))
            << d.name;
    for (const auto& d : b) EXPECT_EQ(d.per_tensor(), d.name == "fsdp-float8-ag" || d.name == "te-nvfp4-ag") << d.name;
    // QuickReduce's (D57): two-shot-ar with its codec, binary16 sums from +0, binary16 in and out.
    for (int bits : {4, 6, 8}) {
        auto qr = find_path_decl("quickreduce-int" + std::to_string(bits));
        ASSERT_TRUE(qr.ok()) << qr.error().message;
        EXPECT_EQ(qr->kind, PathKind::kTwoShotAr);
        EXPECT_EQ(qr->wire, std::vector<std::string>{"quickreduce-q" + std::to_string(bits)});
        EXPECT_EQ(qr->accum, Accum::kFp16);
        EXPECT_EQ(qr->input, Accum::kFp16);
        EXPECT_EQ(qr->start, "zero");
        PathConfig pc;
        apply_declared(*qr, pc);
        EXPECT_TRUE(pc.sum_from_zero);
    }
    for (const auto& d : b) EXPECT_EQ(d.start.empty(), !d.name.starts_with("quickreduce-")) << d.name;
    // + ncclAvg's 6, NVLS's 2, DeepEP's 3 dispatches and its combine, FlashInfer's, FSDP2's float8 and TE's
    // NVFP4 all-gathers, QuickReduce's 3
    EXPECT_EQ(b.size(), all_paths().size() + 6 + 2 + 3 + 2 + 2 + 3);
}

TEST(PathDecl, PrintsBackToTheSameResolution) {
    for (const auto& d : builtin_path_decls()) {
        auto back = parse_path_decls(path_decl_to_toml(d), "back.toml");
        ASSERT_TRUE(back.ok()) << d.name << ": " << back.error().message;
        ASSERT_EQ(back->size(), 1u);
        const PathDecl& e = (*back)[0];
        EXPECT_EQ(e.name, d.name);
        EXPECT_EQ(e.kind, d.kind) << d.name;
        EXPECT_EQ(e.accum, d.accum) << d.name;
        EXPECT_EQ(e.divide, d.divide) << d.name;
        EXPECT_EQ(e.wire, d.wire) << d.name;
        EXPECT_EQ(e.output, d.output) << d.name;
        EXPECT_EQ(e.input, d.input) << d.name;
        EXPECT_EQ(e.requantize, d.requantize) << d.name;
        EXPECT_EQ(e.source, d.source) << d.name;
        EXPECT_EQ(e.start, d.start) << d.name;
    }
}

// Found by path_decl_fuzz: a source with a control character (a TOML "\r") printed raw, which TOML
// refuses inside a string; now written as \uXXXX, with quotes and backslashes escaped.
TEST(PathDecl, ASourceWithControlCharactersPrintsBack) {
    auto d = parse_path_decls(one("source = \"a\\tb\\rc \\\"q\\\" \\\\ d\\u007F\"\ncollective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\n"),
                              "s.toml");
    ASSERT_TRUE(d.ok()) << d.error().message;
    EXPECT_EQ((*d)[0].source, "a\tb\rc \"q\" \\ d\x7f");
    auto back = parse_path_decls(path_decl_to_toml((*d)[0]), "back.toml");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ((*back)[0].source, (*d)[0].source);
}

TEST(PathDecl, AUsersDeclarationResolvesToItsSchedule) {
    // QuickReduce's shape (docs/SOURCES.md section 2): two-shot, INT4 in groups of 32, sums in binary16.
    auto q = parse_path_decls(one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int4\"\nadd = \"fp16\"\n"), "q.toml");
    ASSERT_TRUE(q.ok()) << q.error().message;
    EXPECT_EQ((*q)[0].kind, PathKind::kTwoShotAr);
    EXPECT_EQ((*q)[0].requantize, "each-stage");  // left out: the requantizing owner, as before D46
    EXPECT_FALSE((*q)[0].output.has_value());
    // FlashInfer's variant by hand, with fp16 outputs.
    auto k = parse_path_decls(one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\n"
                                  "requantize = \"each-stage-except-owner\"\noutput = \"fp16\"\n"), "k.toml");
    ASSERT_TRUE(k.ok()) << k.error().message;
    EXPECT_EQ((*k)[0].kind, PathKind::kTwoShotArKeep);
    EXPECT_EQ((*k)[0].output, Accum::kFp16);
    ASSERT_TRUE((*q)[0].accum.has_value());
    EXPECT_EQ(*(*q)[0].accum, Accum::kFp16);
    // One format per stage.
    auto h = parse_path_decls(one("collective = \"reduce-scatter\"\nexchange = \"all-to-all-hierarchical\"\nwire = [\"int8\", \"int4\"]\n"), "h.toml");
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ((*h)[0].kind, PathKind::kA2aHierRs);
    EXPECT_EQ((*h)[0].wire.size(), 2u);
    // A ring all-gather: once is qwZ's, each-hop the naive one.
    auto g = parse_path_decls(one("collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"int8\"\nrequantize = \"each-hop\"\n"), "g.toml");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ((*g)[0].kind, PathKind::kRingAgRequant);
}

TEST(PathDecl, FsdpFloat8AllGatherIsRingAgWithATensorsScale) {
    auto d = find_path_decl("fsdp-float8-ag");
    ASSERT_TRUE(d.ok()) << d.error().message;
    EXPECT_EQ(d->kind, PathKind::kRingAg);
    EXPECT_TRUE(d->per_tensor());
    EXPECT_EQ(d->wire_text(), "torchao-fp8-e4m3");
    // printed back and read again: the same declaration, per-tensor included
    auto again = parse_path_decls(path_decl_to_toml(*d), "again.toml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE((*again)[0].per_tensor());
    // a user's own: DeepEP's 1x128 cast with a tensor's amax, over a dispatch
    auto u = parse_path_decls(one("collective = \"dispatch\"\nexchange = \"all-to-all\"\nwire = \"fp8-e4m3-1x128\"\nrequantize = \"once\"\n"
                                  "scales = \"per-tensor\"\n"), "u.toml");
    ASSERT_TRUE(u.ok()) << u.error().message;
    EXPECT_TRUE((*u)[0].per_tensor());
}

TEST(PathDecl, WhatNoScheduleComputesIsRefusedWithTheReason) {
    const std::pair<std::string, std::string> cases[] = {
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"int8\"\n"),
         "x.toml:5:8: path[0].wire: an all-reduce over exchange = \"ring\" is modeled unquantized only"},
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"fp32\"\nstored = \"fp8-e4m3\"\n"),
         "an FP8 sum added in binary32, as NCCL's symmetric kernels do, is not modeled"},
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\n"), "path[0].stored: missing"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\nscales = \"per-tensor\"\n"),
         "path[0].scales: scales per-tensor: ring-rs is not modeled with a tensor's scale"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"any\"\nscales = \"per-tensor\"\n"),
         "path[0].scales: scales per-tensor: ring-rs is not modeled with a tensor's scale"},
        {one("collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"int8\"\nrequantize = \"once\"\nscales = \"per-tensor\"\n"),
         "path[0].scales: scales per-tensor needs a scale computed from max(absmax, amax_floor)"},
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nstored = \"bf16\"\nscales = \"per-tensor\"\n"),
         "path[0].scales: \"per-tensor\" scales a quantized wire"},
        {one("collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"int8\"\n"), "path[0].requantize: missing"},
        {one("collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"int8\"\nrequantize = \"once\"\ndivide = \"pre\"\n"),
         "path[0].divide:"},
        {one("collective = \"all-reduce\"\nexchange = \"tree\"\nwire = \"none\"\nstored = \"fp8-e5m2\"\ndivide = \"post\"\n"),
         "ncclAvg multiplies every input"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = [\"int8\", \"int4\"]\n"), "quantizes in one stage"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int9\"\n"), "path[0].wire:"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\nadd = \"fp8-e4m3\"\n"),
         "FP8 sums with a quantized wire are not modeled"},
        {one("collective = \"all-gather\"\nexchange = \"two-shot\"\nwire = \"int8\"\n"), "is not a schedule qtransit models"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"none\"\nstored = \"fp16\"\nrequantize = \"once\"\n"),
         "nothing is quantized"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\nhops = 3\n"), "path[0].hops: unknown key"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\n") + one("collective = \"all-gather\"\nexchange = \"hpz\"\nwire = \"int8\"\nrequantize = \"once\"\n"),
         "path[1].name: 'p' is declared twice"},
        {"[[path]]\nname = \"all\"\n", "path[0].name: 'all'"},
        {"[path]\nname = \"x\"\n", "expected [[path]] tables"},
        {"name = \"x\"\n", "x.toml:1:8: name: unknown key"},
        {one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\noutput = \"fp64\"\n"),
         "path[0].output: unknown value 'fp64' (known: fp32, bf16, fp16, fp8-e4m3, fp8-e5m2)"},
        // An FP8 input on a path whose element is FP8 already, or a 16-bit input on a 16-bit path: refused.
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"fp16\"\nstored = \"fp8-e4m3\"\ninput = \"fp8-e4m3\"\n"),
         "path[0].input: input fp8-e4m3: nccl-fp8-e4m3-ring-ar casts its inputs to fp8-e4m3, its element type, already"},
        {one("collective = \"all-reduce\"\nexchange = \"nvls\"\nwire = \"int8\"\n"), "is modeled unquantized only"},
        {one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\noutput = \"bf16\"\ndivide = \"post\"\n"),
         "path[0].output: output bf16 with --divide post is not modeled"},
        {one("collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nstored = \"bf16\"\ninput = \"fp16\"\n"),
         "path[0].input: input fp16: bf16-ring-ar casts its inputs to bf16, its element type, already"},
        {one("collective = \"combine\"\nexchange = \"all-to-all\"\nwire = \"int8\"\n"), "is modeled unquantized only"},
        // start (D57): two-shot-ar's alone; two-shot-ar-keep's starts from +0 already.
        {one("collective = \"reduce-scatter\"\nexchange = \"all-to-all\"\nwire = \"int8\"\nstart = \"zero\"\n"),
         "path[0].start: only a two-shot all-reduce that requantizes each stage (two-shot-ar) chooses where its sum starts"},
        {one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\nrequantize = \"each-stage-except-owner\"\nstart = \"first\"\n"),
         "two-shot-ar-keep's starts from +0 (D46)"},
        {one("collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"int8\"\nstart = \"one\"\n"),
         "path[0].start: unknown value 'one' (known: first, zero)"},
        {one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int8\"\nrequantize = \"each-stage-except-owner\"\n"),
         "path[0].requantize: \"each-stage-except-owner\": a quantized reduce-scatter over ring is modeled with requantize = each-hop"},
    };
    for (const auto& [text, want] : cases) {
        auto r = parse_path_decls(text, "x.toml");
        ASSERT_FALSE(r.ok()) << text;
        EXPECT_NE(r.error().message.find(want), std::string::npos) << text << "\nwanted: " << want << "\ngot: " << r.error().message;
        EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
    }
}

TEST(PathDecl, ABuiltInNameIsNotTakenByAnotherDeclaration) {
    auto d = parse_path_decls("[[path]]\nname = \"ring-rs\"\ncollective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int4\"\n", "y.toml");
    ASSERT_TRUE(d.ok()) << d.error().message;
    auto st = register_path_decl((*d)[0]);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("is a built-in path"), std::string::npos) << st.error().message;
    // The same declaration twice registers once; another one under that name is refused.
    auto u = parse_path_decls(one("collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"int4\"\n"), "u.toml");
    ASSERT_TRUE(u.ok());
    EXPECT_TRUE(register_path_decl((*u)[0]).ok());
    EXPECT_TRUE(register_path_decl((*u)[0]).ok());
    auto v = parse_path_decls(one("collective = \"reduce-scatter\"\nexchange = \"all-to-all\"\nwire = \"int4\"\n"), "v.toml");
    ASSERT_TRUE(v.ok());
    EXPECT_FALSE(register_path_decl((*v)[0]).ok());
    auto f = find_path_decl("p");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->kind, PathKind::kRingRs);
    auto unknown = find_path_decl("ring-rz");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("nccl-fp8-e4m3-ring-ar-avg"), std::string::npos);
}

}  // namespace
