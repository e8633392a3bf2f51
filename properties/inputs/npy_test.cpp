// .npy reading and writing: files numpy wrote, hand-made variants numpy accepts, every malformation
// we refuse (with the message checked for what it names), and the writer's layout and atomicity.
//
// The golden files in properties/data/ were written by numpy 2.4 with:
//   v = np.array([[1.5, -2.25, 0.0], [-0.0, 1e-45, 3.4028234663852886e38]], dtype='<f4')
//   np.save('f4_le_2x3.npy', v); np.save('f4_be_2x3.npy', v.astype('>f4'))
//   h = np.array([1.0, -65504.0, 2.0**-24, np.inf, -0.0], dtype='<f2')
//   np.save('f2_le_5.npy', h); np.save('f2_be_5.npy', h.astype('>f2'))
//   np.save('f4_0d.npy', np.array(3.25, dtype='<f4')); np.save('f4_0x3.npy', np.zeros((0, 3), '<f4'))
//   a = np.arange(4, dtype='<f4').reshape(2, 2, 1)
//   np.lib.format.write_array(open('f4_v2_2x2x1.npy', 'wb'), a, version=(2, 0))   # and (3, 0)
//   np.save('f4_fortran_2x3.npy', np.asfortranarray(v)); np.save('f8_2.npy', np.array([1.0, 2.0]))
#include <csignal>
#include <sys/stat.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <chrono>

#include "inputs/temp_dir.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/tensor_file.hpp"

namespace qk = qtransit::kernels;
using qtransit::ErrorCode;
using qtransit::testing::TempDir;

namespace {

std::string data(const std::string& name) { return std::string(QT_TEST_DATA_DIR) + "/" + name; }

uint32_t bits(float f) { return qk::f32_bits(f); }

// A .npy file with the given version and header text, followed by `payload` bytes.
std::string npy_bytes(const std::string& header, const std::string& payload, int major = 1) {
    std::string s("\x93NUMPY", 6);
    s += static_cast<char>(major);
    s += '\0';
    const size_t n = header.size();
    s += static_cast<char>(n & 0xff);
    s += static_cast<char>((n >> 8) & 0xff);
    if (major != 1) {
        s += static_cast<char>((n >> 16) & 0xff);
        s += static_cast<char>((n >> 24) & 0xff);
    }
    return s + header + payload;
}

std::string floats_le(std::initializer_list<float> v) {
    std::string s;
    for (float f : v) {
        const uint32_t b = bits(f);
        for (int i = 0; i < 4; ++i) s += static_cast<char>((b >> (8 * i)) & 0xff);
    }
    return s;
}

const std::vector<float> kV = {1.5f, -2.25f, 0.0f, -0.0f, 1e-45f, FLT_MAX};

void expect_v(const qk::NpyArray& a) {
    ASSERT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    ASSERT_EQ(a.data.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(bits(a.data[i]), bits(kV[i])) << i;
}

// ---- files numpy wrote -------------------------------------------------------------------------

TEST(NpyRead, Float32BothByteOrders) {
    for (const char* f : {"f4_le_2x3.npy", "f4_be_2x3.npy"}) {
        auto a = qk::read_npy(data(f));
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->dtype, qk::NpyDtype::kFloat32);
        EXPECT_EQ(a->elements(), 6);
        expect_v(*a);
    }
}

TEST(NpyRead, Float16BothByteOrdersWidenExactly) {
    for (const char* f : {"f2_le_5.npy", "f2_be_5.npy"}) {
        auto a = qk::read_npy(data(f));
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->dtype, qk::NpyDtype::kFloat16);
        ASSERT_EQ(a->shape, (std::vector<int64_t>{5}));
        const std::vector<float> want = {1.0f, -65504.0f, 0x1p-24f, INFINITY, -0.0f};
        for (size_t i = 0; i < 5; ++i) EXPECT_EQ(bits(a->data[i]), bits(want[i])) << f << " " << i;
    }
}

TEST(NpyRead, ZeroDimensionalAndZeroSize) {
    auto s = qk::read_npy(data("f4_0d.npy"));
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_TRUE(s->shape.empty());
    EXPECT_EQ(s->elements(), 1);
    ASSERT_EQ(s->data.size(), 1u);
    EXPECT_EQ(s->data[0], 3.25f);

    auto e = qk::read_npy(data("f4_0x3.npy"));
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ(e->shape, (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(e->elements(), 0);
    EXPECT_TRUE(e->data.empty());
}

TEST(NpyRead, Versions2And3) {
    for (const char* f : {"f4_v2_2x2x1.npy", "f4_v3_2x2x1.npy"}) {
        auto a = qk::read_npy(data(f));
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2, 1}));
        EXPECT_EQ(a->data, (std::vector<float>{0, 1, 2, 3}));
    }
}

TEST(NpyRead, FortranOrderIsRefused) {
    const std::string p = data("f4_fortran_2x3.npy");
    auto a = qk::read_npy(p);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kBadFile);
    EXPECT_EQ(a.error().message,
              p + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
}

TEST(NpyRead, Float64IsRefusedListingSupportedTypes) {
    const std::string p = data("f8_2.npy");
    auto a = qk::read_npy(p);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kBadFile);
    EXPECT_EQ(a.error().message.rfind(p + ": unsupported dtype '<f8'", 0), 0u) << a.error().message;
    for (const char* t : {"'<f4'", "'>f4'", "'<f2'", "'>f2'"})
        EXPECT_NE(a.error().message.find(t), std::string::npos) << a.error().message;
}

// ---- hand-made headers that numpy also accepts ---------------------------------------------------

TEST(NpyRead, AcceptsEveryWellFormedSpelling) {
    TempDir dir;
    const std::string six = floats_le({1.5f, -2.25f, 0.0f, -0.0f, 1e-45f, FLT_MAX});
    const char* headers[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",                 // no comma, no '\n'
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",          // double quotes
        "{'shape': (2,3,), 'fortran_order': False, 'descr': '<f4'}   \n",             // any key order
        "{ 'descr' :'<f4' ,\n 'fortran_order':False,'shape':( 2 , 3 ) }\n",           // whitespace
        "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }\n",             // native order
        "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }\n",             // not-applicable order
        "{'descr': '<f4', 'fortran_order': False, 'shape': (+2, 3), }\n",            // unary plus
    };
    int k = 0;
    for (const char* h : headers) {
        for (int major : {1, 2, 3}) {
            const std::string p = dir.write("ok" + std::to_string(k++) + ".npy", npy_bytes(h, six, major));
            auto a = qk::read_npy(p);
            ASSERT_TRUE(a.ok()) << h << " -> " << a.error().message;
            expect_v(*a);
        }
    }
    // 1-d shape "(6,)" and "(6, )"; -0 is a non-negative integer in Python.
    for (const char* h : {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (6, )}",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 1, -0)}"}) {
        auto a = qk::read_npy(dir.write("one.npy", npy_bytes(h, std::string(h).find("-0") == std::string::npos ? six : "")));
        ASSERT_TRUE(a.ok()) << h << " -> " << a.error().message;
    }
    // A zero-size dimension next to an enormous one is still an empty array (no overflow).
    auto z = qk::read_npy(
        dir.write("z.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (9223372036854775807, 0)}", "")));
    ASSERT_TRUE(z.ok()) << z.error().message;
    EXPECT_EQ(z->elements(), 0);
}

// ---- malformed files -----------------------------------------------------------------------------

struct Bad {
    std::string name, bytes, expect;  // `expect`: a fragment the message must contain
    ErrorCode code = ErrorCode::kBadFile;
};

TEST(NpyRead, MalformedFilesSayWhatIsWrong) {
    TempDir dir;
    const std::string six = floats_le({1, 2, 3, 4, 5, 6});
    auto h = [](const std::string& shape_part) {
        return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_part + ", }\n";
    };
    const std::string good = h("(2, 3)");
    std::string huge_len("\x93NUMPY\x02\x00", 8);
    huge_len += std::string("\x00\x00\x00\x40", 4);  // 1 GiB header length
    const std::vector<Bad> cases = {
        {"empty", "", "not a .npy file"},
        {"magic", "\x93NUMPZ\x01\x00", "not a .npy file: it does not start with the magic string"},
        {"pickle", "\x80\x04\x95", "not a .npy file"},
        {"noversion", std::string("\x93NUMPY\x01", 7), "ends inside the format version"},
        {"v4", npy_bytes(good, six, 4), "unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)"},
        {"v11", std::string("\x93NUMPY\x01\x01", 8) + "\x10\x00", "unsupported .npy format version 1.1"},
        {"lenfield", std::string("\x93NUMPY\x01\x00\x10", 9), "ends inside the header length field"},
        {"lenfield2", std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "ends inside the header length field"},
        {"hugelen", huge_len, "header length 1073741824 is implausibly large"},
        {"shorthdr", npy_bytes(good, "").substr(0, 40),
         "truncated header: the header length field says " + std::to_string(good.size()) + " bytes, but only 30 follow"},
        {"notdict", npy_bytes("['descr', '<f4']\n", six), "expected '{' to open the dict at offset 0"},
        {"nokeyquote", npy_bytes("{descr: '<f4'}\n", six), "expected a quoted string as a key"},
        {"nocolon", npy_bytes("{'descr' '<f4'}\n", six), "expected ':' after key 'descr'"},
        {"unterminated", npy_bytes("{'descr: '<f4'}\n", six), "expected ':' after key 'descr: '"},
        {"unterminated2", npy_bytes("{'descr': '<f4\n", six), "unterminated string"},
        {"escape", npy_bytes("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (6,)}", six), "escape sequences"},
        {"nocomma", npy_bytes("{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", six),
         "expected ',' or '}' after the value of 'descr'"},
        {"noclose", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", six),
         "expected ',' or '}' after the value of 'shape'"},
        {"trailing", npy_bytes(good + "x", six), "unexpected text after the closing '}'"},
        {"twodicts", npy_bytes("{} {}", six), "unexpected text after the closing '}'"},
        {"missing", npy_bytes("{'descr': '<f4', 'fortran_order': False}", six), "missing key 'shape'"},
        {"missing2", npy_bytes("{'shape': (6,), 'fortran_order': False}", six), "missing key 'descr'"},
        {"missing3", npy_bytes("{'shape': (6,), 'descr': '<f4'}", six), "missing key 'fortran_order'"},
        {"extra", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", six),
         "unexpected key 'x'"},
        {"dup", npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", six),
         "duplicate key 'descr'"},
        {"descrnum", npy_bytes("{'descr': 4, 'fortran_order': False, 'shape': (6,)}", six), "'descr' must be a string"},
        {"f8", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", six),
         "unsupported dtype '<f8'; supported: '<f4', '>f4', '<f2', '>f2'"},
        {"i4", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}", six), "unsupported dtype '<i4'"},
        // '<V2' is bfloat16 (tensor_file_test.cpp); other void sizes, and a void with a byte order, are not.
        {"void4", npy_bytes("{'descr': '<V4', 'fortran_order': False, 'shape': (6,)}", six), "unsupported dtype '<V4'"},
        {"voidbe", npy_bytes("{'descr': '>V2', 'fortran_order': False, 'shape': (12,)}", six), "unsupported dtype '>V2'"},
        {"u4", npy_bytes("{'descr': '<u4', 'fortran_order': False, 'shape': (6,)}", six), "unsupported dtype '<u4'"},
        {"ctrl", npy_bytes("{'descr': '<f\x01', 'fortran_order': False, 'shape': (6,)}", six), "unsupported dtype '<f\\x01'"},
        {"bf16short", npy_bytes("{'descr': '<V2', 'fortran_order': False, 'shape': (13,)}", six),
         "truncated data: dtype '<V2' and shape (13,) need 26 bytes of data, the file has 24"},
        {"name", npy_bytes("{'descr': 'float32', 'fortran_order': False, 'shape': (6,)}", six),
         "unsupported dtype 'float32'"},
        {"fortran", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", six),
         "Fortran-order arrays are not supported; save with np.ascontiguousarray"},
        {"fortran01", npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", six),
         "'fortran_order' must be True or False"},
        {"fortranlower", npy_bytes("{'descr': '<f4', 'fortran_order': false, 'shape': (6,)}", six),
         "'fortran_order' must be True or False"},
        {"truex", npy_bytes("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (6,)}", six),
         "'fortran_order' must be True or False"},
        {"shapeint", npy_bytes(h("(6)"), six), "'shape' (6) is an integer, not a tuple; write (6,)"},
        {"shapelist", npy_bytes(h("[2, 3]"), six), "'shape' must be a tuple of integers"},
        {"shapebare", npy_bytes(h("6"), six), "'shape' must be a tuple of integers"},
        {"shapefloat", npy_bytes(h("(2.0, 3)"), six), "malformed integer in 'shape'"},
        {"shapehex", npy_bytes(h("(0x6,)"), six), "malformed integer in 'shape'"},
        {"shapezero", npy_bytes(h("(06,)"), six), "leading zero"},
        {"shapestr", npy_bytes(h("('6',)"), six), "'shape' must be a tuple of integers"},
        {"shapeempty", npy_bytes(h("(,)"), six), "'shape' must be a tuple of integers"},
        {"shapesep", npy_bytes(h("(2 3)"), six), "expected ',' or ')' in 'shape'"},
        {"negative", npy_bytes(h("(-2, 3)"), six), "shape entries must be non-negative, found -2"},
        {"toolarge", npy_bytes(h("(99999999999999999999,)"), six), "shape entry 99999999999999999999 is too large"},
        // libFuzzer's find: whitespace between a sign and its digits stays one line in the message.
        {"toolarge_sign", npy_bytes(h("(2, -\n\n99999999999999999999)"), six), "shape entry -\\n\\n99999999999999999999 is too large"},
        {"negative_sign", npy_bytes(h("(- \n2, 3)"), six), "shape entries must be non-negative, found - \\n2"},
        {"overflow", npy_bytes(h("(4611686018427387904, 4)"), six), "has too many elements (the size overflows)"},
        {"overflow2", npy_bytes(h("(3037000500, 3037000500)"), six), "the size overflows"},
        {"truncated", npy_bytes(good, six.substr(0, 20)),
         "truncated data: dtype '<f4' and shape (2, 3) need 24 bytes of data, the file has 20"},
        {"nodata", npy_bytes(good, ""), "need 24 bytes of data, the file has 0"},
        {"trailing_data", npy_bytes(good, six + "abcd"),
         "trailing bytes after the data: dtype '<f4' and shape (2, 3) need 24 bytes of data, the file has 28"},
        {"f2odd", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (3,)}", "abcde"),
         "truncated data: dtype '<f2' and shape (3,) need 6 bytes of data, the file has 5"},
        {"zero_d_empty", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", ""),
         "shape () need 4 bytes of data, the file has 0"},
    };
    for (const Bad& c : cases) {
        const std::string p = dir.write(c.name + ".npy", c.bytes);
        auto a = qk::read_npy(p);
        ASSERT_FALSE(a.ok()) << c.name;
        EXPECT_EQ(a.error().code, c.code) << c.name << ": " << a.error().message;
        EXPECT_EQ(a.error().message.rfind(p + ": ", 0), 0u) << c.name << ": " << a.error().message;
        EXPECT_NE(a.error().message.find(c.expect), std::string::npos)
            << c.name << ": got \"" << a.error().message << "\", expected it to contain \"" << c.expect << "\"";
        EXPECT_EQ(a.error().message.find('\n'), std::string::npos) << c.name << ": one line";
    }
}

TEST(NpyRead, MalformedHeaderMessageQuotesTheHeader) {
    TempDir dir;
    const std::string p = dir.write("q.npy", npy_bytes("{'descr': '<f4', 'oops'}\n", ""));
    auto a = qk::read_npy(p);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("(header: {'descr': '<f4', 'oops'}\\n)"), std::string::npos)
        << a.error().message;
}

TEST(NpyRead, OpenAndReadFailuresAreIoErrors) {
    TempDir dir;
    const std::string missing = dir.file("nope.npy");
    auto a = qk::read_npy(missing);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kIo);
    EXPECT_EQ(a.error().message.rfind(missing + ": cannot open for reading: ", 0), 0u) << a.error().message;
    EXPECT_NE(a.error().message.find("No such file"), std::string::npos) << a.error().message;

    auto d = qk::read_npy(dir.path().string());  // a directory opens but cannot be read
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::kIo) << d.error().message;
    EXPECT_EQ(d.error().message.rfind(dir.path().string() + ": ", 0), 0u) << d.error().message;
}

// A pipe cannot seek: the reader then reads to the end and checks the size afterwards.
TEST(NpyRead, ReadsFromAPipe) {
    TempDir dir;
    const std::string good = qtransit::testing::read_bytes(data("f4_le_2x3.npy"));
    const struct {
        std::string bytes, expect;  // expect empty: must succeed
    } cases[] = {
        {good, ""},
        {good.substr(0, good.size() - 3), "truncated data: dtype '<f4' and shape (2, 3) need 24 bytes of data, the file has 21"},
        {good + std::string(100000, 'x'), "trailing bytes after the data: dtype '<f4' and shape (2, 3) need 24 bytes of data, the file has 100024"},
    };
    int k = 0;
    for (const auto& c : cases) {
        const std::string fifo = dir.file(std::to_string(k++) + ".pipe");
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
        std::thread writer([&] {
            std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens
            out.write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
        });
        auto a = qk::read_npy(fifo);
        writer.join();
        if (c.expect.empty()) {
            ASSERT_TRUE(a.ok()) << a.error().message;
            expect_v(*a);
        } else {
            ASSERT_FALSE(a.ok());
            EXPECT_EQ(a.error().code, ErrorCode::kBadFile);
            EXPECT_EQ(a.error().message, fifo + ": " + c.expect);
        }
    }
}

// A pipe whose writer stalls after its first bytes (and keeps the pipe open) is a read error after
// QTRANSIT_INPUT_TIMEOUT seconds, for .npy and .safetensors alike: only the wait for the first byte
// was bounded, and a stalled writer held the reader for ever.
TEST(NpyRead, APipeWhoseWriterStallsTimesOut) {
    TempDir dir;
    const std::string good = qtransit::testing::read_bytes(data("f4_le_2x3.npy"));
    ::setenv("QTRANSIT_INPUT_TIMEOUT", "1", 1);
    // .safetensors: a header length of 64, then 10 of those bytes.
    const std::string st_head = std::string("\x40\0\0\0\0\0\0\0", 8) + "{\"a\": {\"dt";
    for (const char* name : {"stall.npy", "stall.safetensors"}) {
        const std::string fifo = dir.file(name);
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
        const bool st = std::string(name) == "stall.safetensors";
        std::thread writer([&] {
            std::ofstream out(fifo, std::ios::binary);
            if (st) out.write(st_head.data(), static_cast<std::streamsize>(st_head.size()));
            else out.write(good.data(), 20);  // the preamble and part of the header
            out.flush();
            std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // open, silent
        });
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = st ? qk::read_tensor(fifo) : qk::read_npy(fifo);
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        writer.join();
        ASSERT_FALSE(r.ok()) << name;
        EXPECT_EQ(r.error().code, ErrorCode::kIo) << r.error().message;
        EXPECT_NE(r.error().message.find("the pipe gave no byte for 1 s (QTRANSIT_INPUT_TIMEOUT): its writer stalled"), std::string::npos)
            << r.error().message;
        EXPECT_LT(waited, 1.9) << name;
    }
    ::unsetenv("QTRANSIT_INPUT_TIMEOUT");
}

// A pipe whose header declares more than the process may hold is refused from its header, before
// its data is read (issue 46: a header of 32 GiB was read until memory ran out, and a memory limit
// ended the process with no message).
TEST(NpyRead, APipesDeclaredSizeIsCheckedBeforeItsData) {
    TempDir dir;
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (8589934592,), }";
    while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
    std::string header = std::string("\x93NUMPY\x01\x00", 8);
    header += static_cast<char>(dict.size() & 0xff);
    header += static_cast<char>(dict.size() >> 8);
    header += dict;
    const std::string fifo = dir.file("huge.pipe");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::signal(SIGPIPE, SIG_IGN);  // the reader may close before the writer is done
    std::thread writer([&] {
        std::ofstream out(fifo, std::ios::binary);
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(std::string(4096, '\0').data(), 4096);  // a little data, then the end
    });
    auto a = qk::read_npy(fifo);
    writer.join();
    ASSERT_FALSE(a.ok());
    if (qtransit::physical_memory_bytes() < (int64_t{64} << 30)) {
        EXPECT_NE(a.error().message.find("from a pipe (the header declares 34359738368 bytes of data) needs about 64 GiB of memory"),
                  std::string::npos)
            << a.error().message;
    } else {
        EXPECT_NE(a.error().message.find("truncated data"), std::string::npos) << a.error().message;
    }
}

// ---- writing -------------------------------------------------------------------------------------

TEST(NpyWrite, ByteIdenticalToNumpy) {
    TempDir dir;
    const int64_t shape[] = {2, 3};
    const std::string p = dir.file("w.npy");
    ASSERT_TRUE(qk::write_npy(p, kV, shape).ok());
    EXPECT_EQ(qtransit::testing::read_bytes(p), qtransit::testing::read_bytes(data("f4_le_2x3.npy")));

    const std::vector<float> h = {1.0f, -65504.0f, 0x1p-24f, INFINITY, -0.0f};
    const int64_t shape5[] = {5};
    ASSERT_TRUE(qk::write_npy(p, h, shape5, qk::NpyDtype::kFloat16).ok());
    EXPECT_EQ(qtransit::testing::read_bytes(p), qtransit::testing::read_bytes(data("f2_le_5.npy")));

    const float s[] = {3.25f};
    ASSERT_TRUE(qk::write_npy(p, s, std::span<const int64_t>()).ok());
    EXPECT_EQ(qtransit::testing::read_bytes(p), qtransit::testing::read_bytes(data("f4_0d.npy")));

    const int64_t empty[] = {0, 3};
    ASSERT_TRUE(qk::write_npy(p, std::span<const float>(), empty).ok());
    EXPECT_EQ(qtransit::testing::read_bytes(p), qtransit::testing::read_bytes(data("f4_0x3.npy")));
    EXPECT_EQ(dir.entries(), 1u) << "no temporary file left behind";
}

TEST(NpyWrite, HeaderLayout) {
    TempDir dir;
    for (size_t dims = 0; dims < 40; ++dims) {
        std::vector<int64_t> shape(dims, 1);
        const std::string p = dir.file("l.npy");
        const float one[] = {7.0f};
        ASSERT_TRUE(qk::write_npy(p, one, shape).ok());
        const std::string b = qtransit::testing::read_bytes(p);
        ASSERT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
        const size_t hlen = static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8;
        EXPECT_EQ((10 + hlen) % 64, 0u) << dims;  // data aligned to 64 bytes
        EXPECT_EQ(b[10 + hlen - 1], '\n');
        EXPECT_EQ(b.size(), 10 + hlen + 4);
        auto a = qk::read_npy(p);
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->shape, shape);
    }
}

// More than one 16384-element write chunk, both dtypes, values from a generator stream.
TEST(NpyWrite, LargeArraysRoundTrip) {
    TempDir dir;
    std::vector<float> v(100003);
    for (size_t i = 0; i < v.size(); ++i) v[i] = qk::bits_f32(0x9E3779B9u * static_cast<uint32_t>(i + 1));
    const int64_t shape[] = {7, 14286, 1};
    ASSERT_EQ(7 * 14286 + 1, static_cast<int64_t>(v.size()));  // one short: the shape check is real
    const int64_t good[] = {100003};
    EXPECT_FALSE(qk::write_npy(dir.file("x.npy"), v, shape).ok());
    ASSERT_TRUE(qk::write_npy(dir.file("x.npy"), v, good).ok());
    auto a = qk::read_npy(dir.file("x.npy"));
    ASSERT_TRUE(a.ok());
    ASSERT_EQ(a->data.size(), v.size());
    EXPECT_EQ(std::memcmp(a->data.data(), v.data(), v.size() * 4), 0);
    for (float& x : v) x = qk::round_f16(std::isfinite(x) ? std::fmod(x, 60000.0f) : x);
    ASSERT_TRUE(qk::write_npy(dir.file("h.npy"), v, good, qk::NpyDtype::kFloat16).ok());
    auto h = qk::read_npy(dir.file("h.npy"));
    ASSERT_TRUE(h.ok());
    for (size_t i = 0; i < v.size(); ++i)
        ASSERT_TRUE(qk::f32_bits(h->data[i]) == qk::f32_bits(v[i]) || (std::isnan(v[i]) && std::isnan(h->data[i]))) << i;
}

TEST(NpyWrite, ShapeMustMatchData) {
    TempDir dir;
    const std::string p = dir.file("s.npy");
    const int64_t wrong[] = {2, 2};
    auto st = qk::write_npy(p, kV, wrong);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(st.error().message, p + ": shape (2, 2) holds 4 elements but 6 values were given");
    const int64_t neg[] = {-2, -3};
    st = qk::write_npy(p, kV, neg);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("negative"), std::string::npos) << st.error().message;
    const int64_t big[] = {int64_t{1} << 40, int64_t{1} << 40};
    st = qk::write_npy(p, kV, big);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("too many"), std::string::npos) << st.error().message;
    EXPECT_EQ(dir.entries(), 0u);
}

TEST(NpyWrite, Float16OverflowNamesTheElementAndLeavesTheOldFile) {
    TempDir dir;
    const std::string p = dir.file("h.npy");
    const float old[] = {1.0f};
    const int64_t one[] = {1};
    ASSERT_TRUE(qk::write_npy(p, old, one, qk::NpyDtype::kFloat16).ok());
    const std::string before = qtransit::testing::read_bytes(p);

    // 65519.99 rounds to 65504; 65520 is the first value that rounds to infinity.
    const std::vector<float> v = {0.0f, 65504.0f, 65519.99f, -65520.0f, 1.0f, NAN, INFINITY};
    const int64_t shape[] = {7};
    auto st = qk::write_npy(p, v, shape, qk::NpyDtype::kFloat16);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kRangeOverflow);
    EXPECT_EQ(st.error().message.rfind(p + ": element 3 (value -65520) overflows binary16", 0), 0u)
        << st.error().message;
    EXPECT_EQ(qtransit::testing::read_bytes(p), before);
    EXPECT_EQ(dir.entries(), 1u);

    // Without the overflowing element, NaN and inf are written as such.
    std::vector<float> ok = v;
    ok[3] = -65504.0f;
    ASSERT_TRUE(qk::write_npy(p, ok, shape, qk::NpyDtype::kFloat16).ok());
    auto a = qk::read_npy(p);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->data[2], 65504.0f);
    EXPECT_TRUE(std::isnan(a->data[5]));
    EXPECT_EQ(a->data[6], INFINITY);
}

TEST(NpyWrite, UnwritableDirectoryIsAnIoError) {
    TempDir dir;
    const std::string p = dir.file("no/such/dir/x.npy");
    const int64_t shape[] = {6};
    auto st = qk::write_npy(p, kV, shape);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
    EXPECT_EQ(st.error().message.rfind(p + ": ", 0), 0u) << st.error().message;
}

TEST(NpyWrite, RenameFailureLeavesNoTemporary) {
    TempDir dir;
    // The target is a non-empty directory: the data is written, the rename fails, the temporary goes.
    std::filesystem::create_directories(dir.path() / "t.npy" / "inside");
    const int64_t shape[] = {6};
    auto st = qk::write_npy(dir.file("t.npy"), kV, shape);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kIo);
    EXPECT_NE(st.error().message.find("cannot rename"), std::string::npos) << st.error().message;
    EXPECT_EQ(dir.entries(), 1u);
}

}  // namespace
