// The tensor files training runs dump: bfloat16 .npy as ml_dtypes writes it, raw uint16 bits with a
// stated dtype, and .safetensors (read_tensor, write_safetensors), with every malformation we refuse
// checked for the message it gives.
//
// The golden bytes below were written by numpy 2.4.6, ml_dtypes 0.7.0 and safetensors 0.8.0 with:
//   bf = ml_dtypes.bfloat16
//   v = np.array([[1.0, -2.5, 2.0**-133, np.inf], [-np.inf, np.nan, -0.0, 3.3895313892515355e38]], dtype=bf)
//   np.save(f, v)                                                    # kMlDtypesNpy
//   t = {"w": np.array([[1.5, -2.25, 0.0], [-0.0, 1e-45, 3.4028234663852886e38]], dtype='<f4'),
//        "h": np.array([1.0, -65504.0, 2.0**-24, np.inf, -0.0], dtype='<f2'), "b": v}
//   safetensors.numpy.save(t, metadata={"format": "pt", "step": "100"})   # kReferenceSafetensors
#include <sys/stat.h>
#include <unistd.h>

#include <cfloat>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "inputs/temp_dir.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/tensor_file.hpp"

namespace qk = qtransit::kernels;
using qtransit::ErrorCode;
using qtransit::testing::TempDir;

namespace {

const std::string kMlDtypesNpy(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x56\x32"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x34\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x80\x3f\x20\xc0\x01\x00\x80\x7f\x80\xff\xc0\x7f\x00\x80\x7f\x7f",
    144);

const std::string kReferenceSafetensors(
    "\xd8\x00\x00\x00\x00\x00\x00\x00\x7b\x22\x5f\x5f\x6d\x65\x74\x61\x64\x61\x74\x61\x5f\x5f\x22\x3a"
    "\x7b\x22\x73\x74\x65\x70\x22\x3a\x22\x31\x30\x30\x22\x2c\x22\x66\x6f\x72\x6d\x61\x74\x22\x3a\x22"
    "\x70\x74\x22\x7d\x2c\x22\x77\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x33\x32\x22\x2c"
    "\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x32\x2c\x33\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73"
    "\x65\x74\x73\x22\x3a\x5b\x30\x2c\x32\x34\x5d\x7d\x2c\x22\x62\x22\x3a\x7b\x22\x64\x74\x79\x70\x65"
    "\x22\x3a\x22\x42\x46\x31\x36\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x32\x2c\x34\x5d\x2c\x22"
    "\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x32\x34\x2c\x34\x30\x5d\x7d\x2c\x22"
    "\x68\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x31\x36\x22\x2c\x22\x73\x68\x61\x70\x65"
    "\x22\x3a\x5b\x35\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x34\x30"
    "\x2c\x35\x30\x5d\x7d\x7d\x20\x20\x00\x00\xc0\x3f\x00\x00\x10\xc0\x00\x00\x00\x00\x00\x00\x00\x80"
    "\x01\x00\x00\x00\xff\xff\x7f\x7f\x80\x3f\x20\xc0\x01\x00\x80\x7f\x80\xff\xc0\x7f\x00\x80\x7f\x7f"
    "\x00\x3c\xff\xfb\x01\x00\x00\x7c\x00\x80",
    274);

// The bfloat16 bits of v above (v.view(np.uint16)), and what they widen to.
const uint16_t kBfBits[] = {0x3f80, 0xc020, 0x0001, 0x7f80, 0xff80, 0x7fc0, 0x8000, 0x7f7f};

uint32_t bits(float f) { return qk::f32_bits(f); }

void expect_bf_v(const qk::NpyArray& a) {
    ASSERT_EQ(a.shape, (std::vector<int64_t>{2, 4}));
    ASSERT_EQ(a.data.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(bits(a.data[i]), uint32_t{kBfBits[i]} << 16) << i;
    EXPECT_EQ(a.data[2], 0x1p-133f);  // the smallest bfloat16 subnormal
    EXPECT_TRUE(std::isnan(a.data[5]));
    EXPECT_TRUE(std::signbit(a.data[6]));
}

std::string npy_bytes(const std::string& header, const std::string& payload) {
    std::string s("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(header.size() & 0xff);
    s += static_cast<char>((header.size() >> 8) & 0xff);
    return s + header + payload;
}

std::string u16_le(std::initializer_list<uint16_t> v) {
    std::string s;
    for (uint16_t b : v) {
        s += static_cast<char>(b & 0xff);
        s += static_cast<char>(b >> 8);
    }
    return s;
}

std::string u16_be(std::initializer_list<uint16_t> v) {
    std::string s;
    for (uint16_t b : v) {
        s += static_cast<char>(b >> 8);
        s += static_cast<char>(b & 0xff);
    }
    return s;
}

std::string npy_header(const std::string& descr, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }\n";
}

// A .safetensors file: the length field, the JSON header, the data buffer.
std::string st_bytes(const std::string& header, const std::string& data = "") {
    std::string s;
    for (int i = 0; i < 8; ++i) s += static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
    return s + header + data;
}

std::string st_len(uint64_t len) {
    std::string s;
    for (int i = 0; i < 8; ++i) s += static_cast<char>((len >> (8 * i)) & 0xff);
    return s;
}

qk::TensorReadOptions opts(std::string tensor, std::string dtype = "") { return {std::move(tensor), std::move(dtype)}; }

// Both readers of a .safetensors file, the file one and the in-memory one, must agree.
qtransit::Result<qk::NpyArray> read_st_both(const TempDir& dir, const std::string& name, const std::string& bytes,
                                            const qk::TensorReadOptions& o, std::string& path) {
    path = dir.write(name + ".safetensors", bytes);
    auto a = qk::read_tensor(path, o);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    auto b = qk::read_safetensors_bytes(std::span<const uint8_t>(p, bytes.size()), o, path);
    EXPECT_EQ(a.ok(), b.ok()) << name;
    if (!a.ok() && !b.ok()) {
        EXPECT_EQ(a.error().message, b.error().message) << name;
    }
    if (a.ok() && b.ok()) {
        EXPECT_EQ(a->shape, b->shape) << name;
        EXPECT_EQ(a->data.size(), b->data.size()) << name;
        if (a->data.size() == b->data.size()) {
            EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), a->data.size() * 4), 0) << name;
        }
    }
    return a;
}

void expect_one_line_error(const qtransit::Error& e, const std::string& fragment, const std::string& label) {
    EXPECT_NE(e.message.find(fragment), std::string::npos)
        << label << ": got \"" << e.message << "\", expected it to contain \"" << fragment << "\"";
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << label << ": one line";
    EXPECT_FALSE(e.message.empty()) << label;
}

// ---- bfloat16 .npy -------------------------------------------------------------------------------

TEST(NpyBfloat16, ReadsWhatMlDtypesWrites) {
    TempDir dir;
    auto a = qk::read_npy(dir.write("bf.npy", kMlDtypesNpy));
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->dtype, qk::NpyDtype::kBfloat16);
    expect_bf_v(*a);
}

TEST(NpyBfloat16, EverySpellingOfTheDescr) {
    TempDir dir;
    const std::string data = u16_le({0x3f80, 0xc020, 0x0001, 0x7f80, 0xff80, 0x7fc0, 0x8000, 0x7f7f});
    // '<V2' (np.save of ml_dtypes' type), '|V2' (a plain 2-byte void), 'bfloat16' (str(array.dtype)).
    for (const char* d : {"<V2", "|V2", "bfloat16"}) {
        auto a = qk::read_npy(dir.write("d.npy", npy_bytes(npy_header(d, "(2, 4)"), data)));
        ASSERT_TRUE(a.ok()) << d << ": " << a.error().message;
        EXPECT_EQ(a->dtype, qk::NpyDtype::kBfloat16) << d;
        expect_bf_v(*a);
        auto t = qk::read_tensor(dir.file("d.npy"), opts("", "bf16"));
        ASSERT_TRUE(t.ok()) << d << ": " << t.error().message;
        expect_bf_v(*t);
    }
}

TEST(NpyBfloat16, WriterIsByteIdenticalToMlDtypesAndRoundTrips) {
    TempDir dir;
    const std::string p = dir.file("w.npy");
    std::vector<float> v;
    for (uint16_t b : kBfBits) v.push_back(qk::bf16_bits_to_f32(b));
    const int64_t shape[] = {2, 4};
    ASSERT_TRUE(qk::write_npy(p, v, shape, qk::NpyDtype::kBfloat16).ok());
    EXPECT_EQ(qtransit::testing::read_bytes(p), kMlDtypesNpy);
    auto a = qk::read_npy(p);
    ASSERT_TRUE(a.ok()) << a.error().message;
    expect_bf_v(*a);
    EXPECT_EQ(dir.entries(), 1u) << "no temporary file left behind";
}

TEST(NpyBfloat16, WriterRoundsToNearestEvenAndRefusesOverflow) {
    TempDir dir;
    const std::string p = dir.file("r.npy");
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3*2^-8 is halfway up: to 1 + 2^-6.
    // A binary32 subnormal keeps 7 fraction bits; -0 and a NaN payload's sign are kept.
    const std::vector<float> v = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1.02p-130f, -0.0f, -NAN, 3.3895313892515355e38f};
    const int64_t shape[] = {6};
    ASSERT_TRUE(qk::write_npy(p, v, shape, qk::NpyDtype::kBfloat16).ok());
    auto a = qk::read_npy(p);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->data[0], 1.0f);
    EXPECT_EQ(a->data[1], 1.0f + 0x1p-6f);
    EXPECT_EQ(a->data[2], qk::round_bf16(0x1.02p-130f));
    EXPECT_EQ(bits(a->data[3]), 0x80000000u);
    EXPECT_TRUE(std::isnan(a->data[4]) && std::signbit(a->data[4]));
    EXPECT_EQ(a->data[5], 3.3895313892515355e38f);

    const std::string before = qtransit::testing::read_bytes(p);
    const std::vector<float> big = {1.0f, FLT_MAX, INFINITY};
    const int64_t shape3[] = {3};
    auto st = qk::write_npy(p, big, shape3, qk::NpyDtype::kBfloat16);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kRangeOverflow);
    EXPECT_NE(st.error().message.find("element 1 (value 3.40282347e+38) overflows bfloat16"), std::string::npos)
        << st.error().message;
    EXPECT_EQ(qtransit::testing::read_bytes(p), before);
}

// ---- uint16 bits and --dtype ---------------------------------------------------------------------

TEST(NpyUint16, NeedsToBeToldWhatItsBitsAre) {
    TempDir dir;
    // The same bits mean different values: 0x3c00 is 1.0 in binary16 and 2^-7 in bfloat16.
    const std::string le = u16_le({0x3c00, 0xc000, 0x0001, 0x7c00});
    const std::string be = u16_be({0x3c00, 0xc000, 0x0001, 0x7c00});
    const std::vector<float> as_f16 = {1.0f, -2.0f, 0x1p-24f, INFINITY};
    const std::vector<float> as_bf16 = {0x1p-7f, -2.0f, 0x1p-133f, 0x1p121f};
    int k = 0;
    for (const auto& [descr, payload] : {std::pair<std::string, std::string>{"<u2", le}, {">u2", be}, {"|u2", le}}) {
        const std::string p = dir.write("u" + std::to_string(k++) + ".npy", npy_bytes(npy_header(descr, "(4,)"), payload));
        auto none = qk::read_npy(p);
        ASSERT_FALSE(none.ok()) << descr;
        EXPECT_EQ(none.error().code, ErrorCode::kBadFile);
        EXPECT_EQ(none.error().message, p + ": a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16)");
        auto t = qk::read_tensor(p);
        ASSERT_FALSE(t.ok());
        EXPECT_EQ(t.error().message, none.error().message);
        auto f32 = qk::read_tensor(p, opts("", "fp32"));
        ASSERT_FALSE(f32.ok());
        expect_one_line_error(f32.error(), "a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16); --dtype fp32 is not a 16-bit type", descr);

        auto h = qk::read_tensor(p, opts("", "fp16"));
        ASSERT_TRUE(h.ok()) << descr << ": " << h.error().message;
        EXPECT_EQ(h->dtype, qk::NpyDtype::kFloat16);
        EXPECT_EQ(h->data, as_f16) << descr;
        auto b = qk::read_npy(p, qk::NpyDtype::kBfloat16);
        ASSERT_TRUE(b.ok()) << descr << ": " << b.error().message;
        EXPECT_EQ(b->dtype, qk::NpyDtype::kBfloat16);
        EXPECT_EQ(b->data, as_bf16) << descr;
    }
}

TEST(TensorDtype, MustAgreeWithATypedFile) {
    TempDir dir;
    const std::string f4 = dir.file("x.npy");
    const int64_t shape[] = {2};
    const float v[] = {1.5f, -3.0f};
    ASSERT_TRUE(qk::write_npy(f4, v, shape).ok());
    auto ok = qk::read_tensor(f4, opts("", "fp32"));
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok->data, (std::vector<float>{1.5f, -3.0f}));
    EXPECT_TRUE(qk::read_tensor(f4).ok());

    auto bf = qk::read_tensor(f4, opts("", "bf16"));
    ASSERT_FALSE(bf.ok());
    EXPECT_EQ(bf.error().code, ErrorCode::kBadFile);
    EXPECT_EQ(bf.error().message, f4 + " holds float32 but --dtype says bf16");

    const std::string f2 = dir.file("h.npy");
    ASSERT_TRUE(qk::write_npy(f2, v, shape, qk::NpyDtype::kFloat16).ok());
    auto h = qk::read_tensor(f2, opts("", "bf16"));
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.error().message, f2 + " holds float16 but --dtype says bf16");
    EXPECT_TRUE(qk::read_tensor(f2, opts("", "fp16")).ok());

    const std::string b = dir.write("b.npy", kMlDtypesNpy);
    for (const char* d : {"fp16", "fp32"}) {
        auto r = qk::read_tensor(b, opts("", d));
        ASSERT_FALSE(r.ok()) << d;
        EXPECT_EQ(r.error().message, b + " holds bfloat16 but --dtype says " + d);
    }
}

TEST(TensorDtype, UnknownDtypeListsTheKnownOnes) {
    TempDir dir;
    const std::string f4 = dir.write("x.npy", kMlDtypesNpy);
    EXPECT_EQ(qk::known_dtype_names(), "fp32, fp16, bf16");
    for (const char* d : {"bfloat16", "BF16", "f32", "fp8\n"}) {
        for (const std::string& p : {f4, dir.write("x.safetensors", kReferenceSafetensors)}) {
            auto r = qk::read_tensor(p, opts("", d));
            ASSERT_FALSE(r.ok()) << d;
            EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
            expect_one_line_error(r.error(), "unknown --dtype '", d);
            expect_one_line_error(r.error(), "'; known: fp32, fp16, bf16", d);
        }
    }
}

TEST(TensorDtype, TensorNameIsForSafetensorsOnly) {
    TempDir dir;
    const std::string p = dir.write("x.npy", kMlDtypesNpy);
    auto r = qk::read_tensor(p, opts("w"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message, p + ": --tensor is for .safetensors files (a .npy file holds one array)");
}

// ---- .safetensors --------------------------------------------------------------------------------

void expect_reference_tensors(const std::string& p) {
    auto w = qk::read_tensor(p, opts("w"));
    ASSERT_TRUE(w.ok()) << w.error().message;
    EXPECT_EQ(w->dtype, qk::NpyDtype::kFloat32);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
    const std::vector<float> wv = {1.5f, -2.25f, 0.0f, -0.0f, 1e-45f, FLT_MAX};
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(bits(w->data[i]), bits(wv[i])) << i;

    auto h = qk::read_tensor(p, opts("h", "fp16"));
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(h->dtype, qk::NpyDtype::kFloat16);
    EXPECT_EQ(h->shape, (std::vector<int64_t>{5}));
    const std::vector<float> hv = {1.0f, -65504.0f, 0x1p-24f, INFINITY, -0.0f};
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(bits(h->data[i]), bits(hv[i])) << i;

    auto b = qk::read_tensor(p, opts("b"));
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->dtype, qk::NpyDtype::kBfloat16);
    expect_bf_v(*b);
}

TEST(Safetensors, ReadsWhatTheReferenceWrites) {
    TempDir dir;
    const std::string p = dir.write("model.safetensors", kReferenceSafetensors);
    expect_reference_tensors(p);
    // The extension is matched without regard to case.
    expect_reference_tensors(dir.write("MODEL.SafeTensors", kReferenceSafetensors));

    auto all = qk::read_tensor(p);
    ASSERT_FALSE(all.ok());
    EXPECT_EQ(all.error().code, ErrorCode::kBadFile);
    EXPECT_EQ(all.error().message, p + ": the file holds 3 tensors; say which with --tensor: 'b', 'h', 'w'");
    auto none = qk::read_tensor(p, opts("x"));
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.error().message, p + ": no tensor named 'x'; the file holds 'b', 'h', 'w'");
    auto meta = qk::read_tensor(p, opts("__metadata__"));
    ASSERT_FALSE(meta.ok());
    EXPECT_EQ(meta.error().message, p + ": no tensor named '__metadata__'; the file holds 'b', 'h', 'w'");
    auto disagree = qk::read_tensor(p, opts("w", "bf16"));
    ASSERT_FALSE(disagree.ok());
    EXPECT_EQ(disagree.error().message, p + ": tensor 'w' holds float32 but --dtype says bf16");
}

TEST(Safetensors, WriterRoundTripsThreeDtypesAndMetadata) {
    TempDir dir;
    const std::string p = dir.file("out.safetensors");
    qk::NpyArray w{{2, 3}, qk::NpyDtype::kFloat32, {1.5f, -2.25f, 0.0f, -0.0f, 1e-45f, FLT_MAX}};
    qk::NpyArray h{{5}, qk::NpyDtype::kFloat16, {1.0f, -65504.0f, 0x1p-24f, INFINITY, -0.0f}};
    qk::NpyArray b{{2, 4}, qk::NpyDtype::kBfloat16, {}};
    for (uint16_t x : kBfBits) b.data.push_back(qk::bf16_bits_to_f32(x));
    ASSERT_TRUE(qk::write_safetensors(p, {{"w", w}, {"h", h}, {"b", b}}, {{"format", "pt"}, {"step", "100"}}).ok());
    expect_reference_tensors(p);
    EXPECT_EQ(dir.entries(), 1u) << "no temporary file left behind";

    const std::string bytes = qtransit::testing::read_bytes(p);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = len << 8 | static_cast<unsigned char>(bytes[i]);
    EXPECT_EQ(len % 8, 0u) << "the data is 8-byte aligned";
    EXPECT_EQ(bytes.size(), 8 + len + 24 + 10 + 16);
    const std::string header = bytes.substr(8, len);
    EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\",\"step\":\"100\"}"), std::string::npos) << header;
    EXPECT_NE(header.find("\"w\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[2,3]}"), std::string::npos) << header;
    EXPECT_NE(header.find("\"h\":{\"data_offsets\":[24,34],\"dtype\":\"F16\",\"shape\":[5]}"), std::string::npos) << header;
    EXPECT_NE(header.find("\"b\":{\"data_offsets\":[34,50],\"dtype\":\"BF16\",\"shape\":[2,4]}"), std::string::npos) << header;

    // A 0-d and two empty tensors, and no metadata. The empty F32 one is copied with memcpy into a
    // vector whose data() is null: CI's fuzzer found that undefined (UBSan, nonnull argument).
    qk::NpyArray s{{}, qk::NpyDtype::kFloat32, {3.25f}};
    qk::NpyArray e{{0, 3}, qk::NpyDtype::kBfloat16, {}};
    qk::NpyArray e32{{0}, qk::NpyDtype::kFloat32, {}};
    ASSERT_TRUE(qk::write_safetensors(p, {{"s", s}, {"e", e}, {"e32", e32}}).ok());
    auto re32 = qk::read_tensor(p, opts("e32"));
    ASSERT_TRUE(re32.ok()) << re32.error().message;
    EXPECT_EQ(re32->shape, (std::vector<int64_t>{0}));
    EXPECT_TRUE(re32->data.empty());
    auto rs = qk::read_tensor(p, opts("s"));
    ASSERT_TRUE(rs.ok()) << rs.error().message;
    EXPECT_TRUE(rs->shape.empty());
    EXPECT_EQ(rs->data, (std::vector<float>{3.25f}));
    auto re = qk::read_tensor(p, opts("e"));
    ASSERT_TRUE(re.ok()) << re.error().message;
    EXPECT_EQ(re->shape, (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE(re->data.empty());
    EXPECT_EQ(qtransit::testing::read_bytes(p).find("__metadata__"), std::string::npos);

    // One tensor: read without --tensor.
    ASSERT_TRUE(qk::write_safetensors(p, {{"only", w}}).ok());
    auto only = qk::read_tensor(p);
    ASSERT_TRUE(only.ok()) << only.error().message;
    EXPECT_EQ(only->shape, (std::vector<int64_t>{2, 3}));
}

TEST(Safetensors, WriterRefusesWhatItCannotWrite) {
    TempDir dir;
    const std::string p = dir.file("bad.safetensors");
    qk::NpyArray one{{1}, qk::NpyDtype::kFloat32, {1.0f}};
    qk::NpyArray wrong{{2, 2}, qk::NpyDtype::kFloat32, {1.0f}};
    qk::NpyArray big{{2}, qk::NpyDtype::kFloat16, {1.0f, 70000.0f}};
    const struct {
        std::vector<std::pair<std::string, qk::NpyArray>> t;
        std::string expect;
        ErrorCode code;
    } cases[] = {
        {{{"a", one}, {"a", one}}, "tensor 'a' is given twice", ErrorCode::kInvalidArgument},
        {{{"", one}}, "a tensor has an empty name", ErrorCode::kInvalidArgument},
        {{{"__metadata__", one}}, "\"__metadata__\" is not a tensor name", ErrorCode::kInvalidArgument},
        {{{"bad\xff", one}}, "tensor 'bad\xff': the name is not valid UTF-8", ErrorCode::kInvalidArgument},
        {{{"w", wrong}}, "tensor 'w': shape [2, 2] holds 4 elements but 1 values were given", ErrorCode::kInvalidArgument},
        {{{"h", big}}, "tensor 'h': element 1 (value 70000) overflows binary16", ErrorCode::kRangeOverflow},
    };
    for (const auto& c : cases) {
        auto st = qk::write_safetensors(p, c.t);
        ASSERT_FALSE(st.ok()) << c.expect;
        EXPECT_EQ(st.error().code, c.code) << st.error().message;
        EXPECT_EQ(st.error().message.rfind(p + ": ", 0), 0u) << st.error().message;
        expect_one_line_error(st.error(), c.expect, c.expect);
    }
    EXPECT_EQ(dir.entries(), 0u) << "nothing written";

    // The target is a non-empty directory: the rename fails and the temporary goes.
    std::filesystem::create_directories(dir.path() / "t.safetensors" / "inside");
    auto st = qk::write_safetensors(dir.file("t.safetensors"), {{"a", one}});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
    EXPECT_NE(st.error().message.find("cannot rename"), std::string::npos) << st.error().message;
    EXPECT_EQ(dir.entries(), 1u);
}

TEST(Safetensors, Uint16NeedsADtypeAndOtherDtypesAreNamed) {
    TempDir dir;
    const std::string data = u16_le({0x3c00, 0xc000}) + std::string(16, '\0');
    const std::string bytes = st_bytes(
        R"({"u":{"dtype":"U16","shape":[2],"data_offsets":[0,4]},"i":{"dtype":"I64","shape":[2],"data_offsets":[4,20]}})", data);
    std::string p;
    auto none = read_st_both(dir, "u", bytes, opts("u"), p);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.error().message, p + ": tensor 'u': a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16)");
    auto f32 = read_st_both(dir, "u", bytes, opts("u", "fp32"), p);
    ASSERT_FALSE(f32.ok());
    expect_one_line_error(f32.error(), "--dtype fp32 is not a 16-bit type", "fp32");
    auto h = read_st_both(dir, "u", bytes, opts("u", "fp16"), p);
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(h->dtype, qk::NpyDtype::kFloat16);
    EXPECT_EQ(h->data, (std::vector<float>{1.0f, -2.0f}));
    auto b = read_st_both(dir, "u", bytes, opts("u", "bf16"), p);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->dtype, qk::NpyDtype::kBfloat16);
    EXPECT_EQ(b->data, (std::vector<float>{0x1p-7f, -2.0f}));

    auto i = read_st_both(dir, "u", bytes, opts("i"), p);
    ASSERT_FALSE(i.ok());
    EXPECT_EQ(i.error().message,
              p + ": tensor 'i' has dtype 'I64', which is not read; accepted: F32, F16, BF16, and U16 with --dtype fp16 or bf16");
}

TEST(Safetensors, ManyTensorsAreListedTwentyAtATime) {
    TempDir dir;
    std::string h = "{";
    for (int i = 0; i < 25; ++i) {
        char name[16];
        std::snprintf(name, sizeof name, "t%02d", i);
        h += std::string(i ? "," : "") + "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[" +
             std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    }
    h += "}";
    std::string p;
    auto r = read_st_both(dir, "many", st_bytes(h, std::string(100, '\0')), opts(""), p);
    ASSERT_FALSE(r.ok());
    std::string names;
    for (int i = 0; i < 20; ++i) names += (i ? ", 't" : "'t") + std::string(i < 10 ? "0" : "") + std::to_string(i) + "'";
    EXPECT_EQ(r.error().message, p + ": the file holds 25 tensors; say which with --tensor: " + names + ", and 5 more");
    auto u = read_st_both(dir, "many", st_bytes(h, std::string(100, '\0')), opts("t25"), p);
    ASSERT_FALSE(u.ok());
    EXPECT_EQ(u.error().message, p + ": no tensor named 't25'; the file holds " + names + ", and 5 more");
    auto ok = read_st_both(dir, "many", st_bytes(h, std::string(96, '\0') + std::string("\x00\x00\xc0\x3f", 4)), opts("t24"), p);
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok->data, (std::vector<float>{1.5f}));
}

struct Bad {
    std::string name, bytes, expect;  // `expect`: a fragment the message must contain
    std::string tensor = "a";
};

TEST(Safetensors, MalformedFilesSayWhatIsWrong) {
    TempDir dir;
    auto one = [](const std::string& entry) { return "{\"a\":" + entry + "}"; };
    const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    const std::string eight(8, '\0');
    const std::vector<Bad> cases = {
        {"empty", "", "too short for a .safetensors file: 0 bytes, less than its 8-byte header length field"},
        {"five", "abcde", "too short for a .safetensors file: 5 bytes"},
        {"lenpast", st_len(100) + "{}", "the header length (bytes 0-7) is 100, but only 2 bytes follow it"},
        {"lenhuge", st_len(uint64_t{1} << 40) + "{}", "is 1099511627776, over the limit of 100 MiB (104857600 bytes)"},
        {"lenmax", st_len(~uint64_t{0}), "over the limit of 100 MiB"},
        {"nojson", st_bytes(""), "the JSON header does not parse at its byte 0 (file offset 8)"},
        {"badjson", st_bytes("{\"a\":{\"dtype\":F32}}"), "the JSON header does not parse at its byte 14 (file offset 22): parse error at line 1, column 15"},
        {"ctrljson", st_bytes("{\"a\n\x01\":1}"), "does not parse at its byte 3"},
        {"badutf8", st_bytes("{\"a\xff\":1}"), "does not parse at its byte 3"},
        {"trailing", st_bytes("{} x"), "does not parse"},
        {"numoverflow", st_bytes(one(R"({"dtype":"F32","shape":[1e400],"data_offsets":[0,8]})"), eight),
         "the JSON header does not parse: number overflow parsing '1e400'"},
        {"array", st_bytes("[1, 2]"), "the JSON header is an array, not an object mapping tensor names to their entries"},
        {"string", st_bytes("\"F32\""), "the JSON header is a string, not an object"},
        {"emptyobj", st_bytes("{}"), "the file holds no tensors", ""},
        {"onlymeta", st_bytes(R"({"__metadata__":{"k":"v"}})"), "the file holds no tensors", ""},
        {"onlymeta2", st_bytes(R"({"__metadata__":{"k":"v"}})"), "no tensor named 'a'; the file holds none"},
        {"metanotobj", st_bytes(R"({"__metadata__":[1]})" ), "\"__metadata__\" is an array, not an object of strings"},
        {"metaint", st_bytes(R"({"__metadata__":{"step":100}})"), "\"__metadata__\" key 'step' maps to an integer, not a string"},
        {"dup", st_bytes(R"({"a":)" + f32x2 + R"(,"a":)" + f32x2 + "}", eight), "the JSON header names 'a' twice"},
        {"entryint", st_bytes(one("3")), "tensor 'a': the entry is an integer, not an object with \"dtype\", \"shape\" and \"data_offsets\""},
        {"nodtype", st_bytes(one(R"({"shape":[2],"data_offsets":[0,8]})"), eight), "tensor 'a': the entry has no \"dtype\""},
        {"noshape", st_bytes(one(R"({"dtype":"F32","data_offsets":[0,8]})"), eight), "tensor 'a': the entry has no \"shape\""},
        {"nooffsets", st_bytes(one(R"({"dtype":"F32","shape":[2]})"), eight), "tensor 'a': the entry has no \"data_offsets\""},
        {"dtypeint", st_bytes(one(R"({"dtype":32,"shape":[2],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"dtype\" is an integer, not a string such as \"F32\""},
        {"shapestr", st_bytes(one(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})"), eight),
         "tensor 'a': \"shape\" is a string, not an array of non-negative integers"},
        {"shapefloat", st_bytes(one(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"shape\"[0] is a non-integer number, not a non-negative integer"},
        {"shapenull", st_bytes(one(R"({"dtype":"F32","shape":[1,null],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"shape\"[1] is null, not a non-negative integer"},
        {"negative", st_bytes(one(R"({"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"shape\"[1] is -3: dimensions must be non-negative"},
        {"hugedim", st_bytes(one(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"shape\"[0] is 18446744073709551615, too large"},
        {"hugerdim", st_bytes(one(R"({"dtype":"F32","shape":[1e30],"data_offsets":[0,8]})"), eight),
         "\"shape\"[0] is a non-integer number"},
        {"overflow", st_bytes(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), eight),
         "tensor 'a': shape [4294967296, 4294967296] has too many elements (the size overflows)"},
        {"overflow2", st_bytes(one(R"({"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,8]})"), eight),
         "the size overflows"},
        {"offstr", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":"0-8"})"), eight),
         "tensor 'a': \"data_offsets\" must be [begin, end], two non-negative integers"},
        {"offone", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8]})"), eight), "\"data_offsets\" must be [begin, end]"},
        {"offneg", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), eight), "\"data_offsets\" must be [begin, end]"},
        {"offfloat", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})"), eight), "\"data_offsets\" must be [begin, end]"},
        {"backwards", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), eight),
         "tensor 'a': \"data_offsets\" [8, 0]: begin is past end"},
        {"size", st_bytes(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), eight),
         "tensor 'a': \"data_offsets\" [0, 8] hold 8 bytes, but dtype F32 and shape [3] need 12"},
        {"size16", st_bytes(one(R"({"dtype":"BF16","shape":[2,2],"data_offsets":[0,4]})"), eight),
         "\"data_offsets\" [0, 4] hold 4 bytes, but dtype BF16 and shape [2, 2] need 8"},
        {"past", st_bytes(one(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), eight),
         "tensor 'a': \"data_offsets\" [4, 12]: end is past the data buffer, which has 8 bytes (from file offset 63)"},
        {"pasthuge", st_bytes(one(R"({"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]})"), eight),
         "end is past the data buffer, which has 8 bytes"},
        {"subbyte", st_bytes(one(R"({"dtype":"F4","shape":[3],"data_offsets":[0,2]})"), eight),
         "tensor 'a': dtype F4 and shape [3] make 12 bits, not a whole number of bytes"},
        // Another tensor's entry is checked too, and an unknown dtype there only against the buffer.
        {"other", st_bytes(R"({"a":)" + f32x2 + R"(,"b":{"dtype":"I8","shape":[2],"data_offsets":[0,3]}})", eight),
         "tensor 'b': \"data_offsets\" [0, 3] hold 3 bytes, but dtype I8 and shape [2] need 2"},
        {"otherpast", st_bytes(R"({"a":)" + f32x2 + R"(,"b":{"dtype":"Q7","shape":[2],"data_offsets":[0,9]}})", eight),
         "tensor 'b': \"data_offsets\" [0, 9]: end is past the data buffer"},
        {"ctrlname", st_bytes(R"({"a\nb\u0001":)" + f32x2 + "}", eight), "no tensor named 'a'; the file holds 'a\\nb\\x01'"},
        // Issue 46: a NUL ended the parse, so what followed was never read; two tensors on shared bytes.
        {"nul", st_bytes(one(f32x2) + std::string(1, '\0') + "{\"evil\": [garbage", eight),
         "the JSON header holds a NUL byte at its byte 54 (file offset 62): a header is JSON text, padded with spaces only"},
        {"nulpad", st_bytes(one(f32x2) + std::string(3, '\0'), eight), "holds a NUL byte at its byte 54"},
        {"overlap", st_bytes(R"({"a":)" + f32x2 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
         "tensors 'a' (data_offsets [0, 8]) and 'b' ([4, 8]) overlap: each tensor's bytes are its own"},
        {"same", st_bytes(R"({"a":)" + f32x2 + R"(,"b":)" + f32x2 + "}", eight), "overlap"},
        // The ranges tile the data buffer, as safetensors' own validate requires: a late start, a gap
        // between tensors, and bytes after the last tensor belong to no tensor.
        {"late", st_bytes(one(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), eight),
         "tensor 'a' (data_offsets [4, 8]) leaves bytes [0, 4) of the data buffer to no tensor: the tensors' ranges follow one another from byte 0"},
        {"gap", st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[1],"data_offsets":[6,8]}})", eight),
         "tensor 'b' (data_offsets [6, 8]) leaves bytes [4, 6) of the data buffer to no tensor (after tensor 'a')"},
        {"trailing", st_bytes(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), eight),
         "the tensors' data ends at byte 4 of the data buffer, which has 8 bytes: the 4 bytes after it belong to no tensor"},
        {"ctrldtype", st_bytes(one(R"({"dtype":"F\n32","shape":[2],"data_offsets":[0,8]})"), eight),
         "tensor 'a' has dtype 'F\\n32', which is not read; accepted: F32, F16, BF16, and U16 with --dtype fp16 or bf16"},
    };
    for (const Bad& c : cases) {
        std::string p;
        auto a = read_st_both(dir, c.name, c.bytes, opts(c.tensor), p);
        ASSERT_FALSE(a.ok()) << c.name;
        EXPECT_EQ(a.error().code, ErrorCode::kBadFile) << c.name << ": " << a.error().message;
        EXPECT_EQ(a.error().message.rfind(p + ": ", 0), 0u) << c.name << ": " << a.error().message;
        expect_one_line_error(a.error(), c.expect, c.name);
    }
    // A valid entry next to an unknown dtype reads; trailing spaces pad the header; extra keys are ignored.
    std::string p;
    auto ok = read_st_both(dir, "ok",
                           st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1},"b":{"dtype":"Q7","shape":[1],"data_offsets":[8,8]}}   )",
                                    std::string("\x00\x00\xc0\x3f\x00\x00\x10\xc0", 8)),
                           opts("a"), p);
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok->data, (std::vector<float>{1.5f, -2.25f}));
}

// The widened values are checked against the machine's memory before they are allocated: a sparse
// file whose header is consistent with a 4 TiB tensor is refused, not a bad_alloc.
TEST(Safetensors, MemoryIsCheckedBeforeAllocating) {
    TempDir dir;
    const uint64_t n = uint64_t{1} << 40;
    const std::string h = R"({"a":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}})";
    const std::string p = dir.write("big.safetensors", st_bytes(h));
    if (::truncate(p.c_str(), static_cast<off_t>(8 + h.size() + 4 * n)) != 0) GTEST_SKIP() << "no sparse 4 TiB file here";
    auto a = qk::read_tensor(p, opts("a"));
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument) << a.error().message;
    expect_one_line_error(a.error(), "reading the 1099511627776 values of tensor 'a'", "big");
}

TEST(Safetensors, OpenAndReadFailures) {
    TempDir dir;
    const std::string missing = dir.file("nope.safetensors");
    auto a = qk::read_tensor(missing);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kIo);
    EXPECT_EQ(a.error().message.rfind(missing + ": cannot open for reading: ", 0), 0u) << a.error().message;

    std::filesystem::create_directories(dir.path() / "d.safetensors");
    auto d = qk::read_tensor(dir.file("d.safetensors"));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::kIo) << d.error().message;
    expect_one_line_error(d.error(), dir.file("d.safetensors") + ": ", "dir");
}

TEST(Safetensors, ReadsFromAPipe) {
    TempDir dir;
    const struct {
        std::string bytes, tensor, expect;  // expect empty: must succeed
    } cases[] = {
        {kReferenceSafetensors, "b", ""},
        {kReferenceSafetensors.substr(0, kReferenceSafetensors.size() - 1), "h",
         "tensor 'h': \"data_offsets\" [40, 50]: end is past the data buffer, which has 49 bytes (from file offset 224)"},
        {kReferenceSafetensors.substr(0, 5), "h", "too short for a .safetensors file: 5 bytes, less than its 8-byte header length field"},
    };
    int k = 0;
    for (const auto& c : cases) {
        const std::string fifo = dir.file(std::to_string(k++) + ".safetensors");
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
        std::thread writer([&] {
            std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens
            out.write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
        });
        auto a = qk::read_tensor(fifo, opts(c.tensor));
        writer.join();
        if (c.expect.empty()) {
            ASSERT_TRUE(a.ok()) << a.error().message;
            expect_bf_v(*a);
        } else {
            ASSERT_FALSE(a.ok());
            EXPECT_EQ(a.error().message, fifo + ": " + c.expect);
        }
    }
}

}  // namespace

// read_tensor_slice: only [first, first + count) of the data, the rest unread; the whole file still
// checked; the same values as the whole read, in every dtype and in both file formats.
TEST(TensorSlice, EqualsTheWholeReadsPartAndRefusesARangeOutside) {
    TempDir dir;
    std::vector<float> v(60);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.75f - 20.0f;
    const std::vector<int64_t> shape{6, 10};
    for (qk::NpyDtype d : {qk::NpyDtype::kFloat32, qk::NpyDtype::kFloat16, qk::NpyDtype::kBfloat16}) {
        const std::string npy = dir.file("s.npy"), st = dir.file("s.safetensors");
        ASSERT_TRUE(qk::write_npy(npy, v, shape, d).ok());
        qk::NpyArray a;
        a.shape = shape;
        a.dtype = d;
        a.data = v;
        ASSERT_TRUE(qk::write_safetensors(st, {{"t", a}}).ok());
        for (const std::string& f : {npy, st}) {
            const auto whole = qk::read_tensor(f);
            ASSERT_TRUE(whole.ok()) << whole.error().message;
            for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 0}, {0, 60}, {13, 7}, {59, 1}, {60, 0}}) {
                const auto part = qk::read_tensor_slice(f, {}, first, count);
                ASSERT_TRUE(part.ok()) << f << ": " << part.error().message;
                EXPECT_EQ(part->shape, shape);
                EXPECT_EQ(part->dtype, d);
                ASSERT_EQ(part->data.size(), static_cast<size_t>(count));
                for (int64_t i = 0; i < count; ++i)
                    EXPECT_EQ(std::bit_cast<uint32_t>(part->data[static_cast<size_t>(i)]),
                              std::bit_cast<uint32_t>(whole->data[static_cast<size_t>(first + i)]));
            }
            const auto out = qk::read_tensor_slice(f, {}, 55, 6);
            ASSERT_FALSE(out.ok());
            EXPECT_NE(out.error().message.find("elements [55, 61) are not within its 60 elements"), std::string::npos) << out.error().message;
        }
    }
    // A malformed file is refused by a slice read as by a whole one.
    std::ofstream(dir.file("bad.npy"), std::ios::binary) << "\x93NUMPY\x01";
    EXPECT_FALSE(qk::read_tensor_slice(dir.file("bad.npy"), {}, 0, 0).ok());
}
