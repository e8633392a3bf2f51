// The codec plugin adapter (plugin.hpp): dlopen, the checks of every declared field, and the
// conversions between the codec's declared layout and qtransit's.
#include "qtransit/kernels/plugin.hpp"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cfenv>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <initializer_list>

#include "qtransit/codec_plugin.h"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/shortest.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/gpu.hpp"

// LeakSanitizer's entry point when it is linked in (the asan preset): finish_process() ends with
// _exit, which skips the check that exit() would run.
extern "C" void __lsan_do_leak_check() __attribute__((weak));

namespace qtransit::kernels {
namespace {

// A scale slot the codec was given and did not write still holds this NaN (not the poison NaN).
constexpr uint32_t kUnwritten = 0x7fc5a5a5u;
constexpr size_t kErrLen = 512;
constexpr size_t kMessageMax = 300;  // the most of a codec's own message that a message quotes

// ---- a codec that calls exit(), crashes, or changes the floating-point environment ------------------
// exit() inside a codec call would end qtransit with the codec's status (0: a silent pass) and
// without a word. Every call into the codec is marked (the calling thread's, and the latest of any
// thread's for an exit from a thread the codec started); an atexit handler, registered once before
// the first codec is loaded, turns an exit during a marked call into one line on stderr and exit 2.
// Between calls, only the codec's own threads can call exit(): qtransit's threads never do, and its
// main thread ends the process only from main(). So an exit from a thread other than the main one,
// while a codec is loaded, is the codec's too (issue 46: a thread it started called exit(0)).
//
// A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) during a marked call prints one line
// naming the codec and the call (encode/decode, format, block, elements) and exits 2; the line is
// written before the call, so the handler only calls write() and _exit(). A fatal signal outside a
// codec call is qtransit's own: the handler that was there before (the default, or a sanitizer's)
// takes it. Each thread that calls a codec gets an alternate signal stack, so a codec that overflows
// its stack is named too.
struct CodecCall {
    const char* who = nullptr;         // the codec's name (its path while its entry point runs)
    const char* what = nullptr;        // "encode", "decode", QTRANSIT_CODEC_ENTRY
    const char* crash_line = nullptr;  // "qtransit: codec 'x' crashed during encode (...): " (no signal name yet)
    size_t crash_len = 0;
};
thread_local const CodecCall* tl_call = nullptr;
std::atomic<int> g_calls_in_flight{0};
std::atomic<const char*> g_last_who{nullptr}, g_last_what{nullptr};
// The name of the codec loaded last, for the messages of an exit or a crash between calls (a copy:
// the strings of a call do not outlive it).
char g_loaded[160] = {0};
std::atomic<bool> g_codec_loaded{false};

bool on_main_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)) == ::getpid(); }

void on_exit_during_codec_call() {
    const CodecCall* c = tl_call;
    const char* who = c ? c->who : nullptr;
    const char* what = c ? c->what : nullptr;
    if (!c) {
        if (g_calls_in_flight.load() == 0) {
            if (!g_codec_loaded.load() || on_main_thread()) return;  // an ordinary exit
            std::fprintf(stderr, "qtransit: a thread of codec '%s' called exit() between calls: nothing it ran is a result\n", g_loaded);
            std::fflush(stderr);
            std::_Exit(2);
        }
        who = g_last_who.load();
        what = g_last_what.load();
    }
    std::fprintf(stderr, "qtransit: codec '%s' called exit() during %s: nothing it ran is a result\n", who ? who : "?",
                 what ? what : "a call");
    std::fflush(stderr);
    std::_Exit(2);
}

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[sizeof kFatalSignals / sizeof kFatalSignals[0]];

const char* signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV (a bad memory access)";
        case SIGBUS: return "SIGBUS (a bad memory access)";
        case SIGFPE: return "SIGFPE (an arithmetic trap)";
        case SIGILL: return "SIGILL (an illegal instruction)";
        case SIGABRT: return "SIGABRT (abort)";
        default: return "a fatal signal";
    }
}

void write_all(const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(2, p, n);
        if (w <= 0) return;
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void on_fatal_signal(int sig, siginfo_t* info, void* ctx) {
    const CodecCall* c = tl_call;
    if (c && c->crash_line) {
        write_all(c->crash_line, c->crash_len);
        const char* name = signal_name(sig);
        write_all(name, std::strlen(name));
        write_all("; nothing it ran is a result\n", 29);
        ::_exit(2);
    }
    // Not inside a codec call: qtransit's own fault. The previous handler (or the default) takes it.
    for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
        if (kFatalSignals[i] != sig) continue;
        const struct sigaction& prev = g_previous[i];
        if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
            prev.sa_sigaction(sig, info, ctx);
            return;
        }
        ::sigaction(sig, &prev, nullptr);
        if (prev.sa_handler != SIG_IGN && prev.sa_handler != SIG_DFL && prev.sa_handler) {
            prev.sa_handler(sig);
            return;
        }
        ::signal(sig, SIG_DFL);
        ::raise(sig);
        return;
    }
}

void arm_exit_guard() {
    static std::once_flag once;
    std::call_once(once, [] {
        std::atexit(on_exit_during_codec_call);
        for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
            struct sigaction sa {};
            sa.sa_sigaction = on_fatal_signal;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            ::sigaction(kFatalSignals[i], &sa, &g_previous[i]);
        }
    });
}

// An alternate signal stack for the calling thread, once (a stack overflow in the codec could not
// run the handler on the stack it overflowed). mmap, not new: it is never freed (the thread may
// take a signal until its end), and a leak checker does not count it.
void ensure_signal_stack() {
    thread_local bool done = false;
    if (done) return;
    done = true;
    stack_t old{};
    if (::sigaltstack(nullptr, &old) == 0 && !(old.ss_flags & SS_DISABLE)) return;  // one is there (a sanitizer's)
    constexpr size_t kBytes = 64 * 1024;
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    stack_t st{};
    st.ss_sp = p;
    st.ss_size = kBytes;
    ::sigaltstack(&st, nullptr);
}

// The floating-point modes a codec must leave as it found them: MXCSR's control bits (flush-to-zero,
// denormals-are-zero, rounding, exception masks; not its sticky exception flags) and the x87
// control word on x86, the rounding mode everywhere. MXCSR is per thread: a mode a codec leaves set
// changes qtransit's own reference arithmetic on that thread (issue 46: FTZ/DAZ made an all-zero
// codec match "bit for bit" on subnormal input).
struct FpModes {
    uint32_t mxcsr = 0;
    uint16_t x87 = 0;
    int round = 0;
    bool operator==(const FpModes&) const = default;
};
FpModes fp_modes() {
    FpModes m;
#if defined(__x86_64__) || defined(__i386__)
    m.mxcsr = _mm_getcsr() & ~0x3Fu;
    uint16_t cw = 0;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    m.x87 = cw;
#endif
    m.round = std::fegetround();
    return m;
}
// What changed between a and b, in words ("" when nothing did).
std::string fp_change(const FpModes& a, const FpModes& b) {
    std::string s;
    auto add = [&s](const std::string& w) { s += (s.empty() ? "" : ", ") + w; };
    const uint32_t diff = a.mxcsr ^ b.mxcsr;
    if (diff & 0x8000u) add(std::string(b.mxcsr & 0x8000u ? "set" : "cleared") + " flush-to-zero (MXCSR FZ)");
    if (diff & 0x40u) add(std::string(b.mxcsr & 0x40u ? "set" : "cleared") + " denormals-are-zero (MXCSR DAZ)");
    if (diff & 0x1F80u) add("changed the exception masks (MXCSR)");
    if (a.round != b.round || (diff & 0x6000u)) {
        const char* r = b.round == FE_TONEAREST ? "to-nearest" : b.round == FE_UPWARD ? "upward" : b.round == FE_DOWNWARD ? "downward"
                        : b.round == FE_TOWARDZERO ? "toward-zero" : "another";
        add(std::string("changed the rounding mode to ") + r);
    }
    if (a.x87 != b.x87) add("changed the x87 control word");
    return s;
}

// Runs f() (a call into the codec) marked as `what` of codec `who`, with the floating-point
// environment saved before and put back after; f's result. `fp_changed` gets what the codec changed
// in the environment, in words, or stays empty.
template <class F>
auto marked_call(const std::string& who, const char* what, const std::string& crash_line, std::string& fp_changed, F&& f) {
    ensure_signal_stack();
    CodecCall call{who.c_str(), what, crash_line.c_str(), crash_line.size()};
    const CodecCall* outer = tl_call;
    fenv_t env;
    std::fegetenv(&env);
    const FpModes before = fp_modes();
    tl_call = &call;
    g_last_who.store(call.who);
    g_last_what.store(what);
    g_calls_in_flight.fetch_add(1);
    struct Unmark {
        const CodecCall* outer;
        const FpModes& before;
        fenv_t& env;
        std::string& changed;
        ~Unmark() {
            g_calls_in_flight.fetch_sub(1);
            tl_call = outer;
            const FpModes after = fp_modes();
            if (!(after == before)) changed = fp_change(before, after);
            std::fesetenv(&env);
        }
    } unmark{outer, before, env, fp_changed};
    return f();
}

enum class Stream : uint8_t { kLsb, kMsb, kBytePerCode };

Stream canonical_stream(const FormatSpec& f) {
    if (f.kind == FormatKind::kDecl) return f.decl->packing == Packing::kLsbFirst ? Stream::kLsb : Stream::kMsb;
    if (f.kind == FormatKind::kDs && f.bits == 4) return Stream::kMsb;
    return Stream::kLsb;  // 8 bits: a byte per code either way
}

bool signed_codes(const FormatSpec& f) {
    switch (f.kind) {
        case FormatKind::kSym:
        case FormatKind::kDs: return true;
        case FormatKind::kAsym:
        case FormatKind::kQr: return false;
        case FormatKind::kDecl: return f.decl->elem == ElemType::kInt && f.decl->is_signed;
    }
    return false;
}

uint32_t get_raw(Stream s, int bits, const uint8_t* b, int64_t i) {
    if (s == Stream::kBytePerCode || bits == 8) return b[i];
    const int64_t bit = i * bits;
    if (s == Stream::kLsb) {
        const uint32_t two = b[bit >> 3] | ((((bit & 7) + bits) > 8) ? (static_cast<uint32_t>(b[(bit >> 3) + 1]) << 8) : 0u);
        return (two >> (bit & 7)) & ((1u << bits) - 1u);
    }
    const uint32_t two = (static_cast<uint32_t>(b[bit >> 3]) << 8) | ((((bit & 7) + bits) > 8) ? b[(bit >> 3) + 1] : 0u);
    return (two >> (16 - (bit & 7) - bits)) & ((1u << bits) - 1u);
}

// Writes raw code v (bits wide; kBytePerCode: the byte) of element i into zeroed bytes.
void set_raw(Stream s, int bits, uint8_t* b, int64_t i, uint32_t v) {
    if (s == Stream::kBytePerCode || bits == 8) {
        b[i] = static_cast<uint8_t>(v);
        return;
    }
    const int64_t bit = i * bits;
    if (s == Stream::kLsb) {
        const uint32_t two = v << (bit & 7);
        b[bit >> 3] = static_cast<uint8_t>(b[bit >> 3] | (two & 0xFFu));
        if ((bit & 7) + bits > 8) b[(bit >> 3) + 1] = static_cast<uint8_t>(b[(bit >> 3) + 1] | (two >> 8));
    } else {
        const uint32_t w = v << (16 - (bit & 7) - bits);
        b[bit >> 3] = static_cast<uint8_t>(b[bit >> 3] | (w >> 8));
        if ((bit & 7) + bits > 8) b[(bit >> 3) + 1] = static_cast<uint8_t>(b[(bit >> 3) + 1] | (w & 0xFFu));
    }
}

const char* packing_name(int p) {
    switch (p) {
        case QTRANSIT_PACKING_FORMAT: return "format";
        case QTRANSIT_PACKING_LOW_NIBBLE_FIRST: return "low-nibble-first";
        case QTRANSIT_PACKING_HIGH_NIBBLE_FIRST: return "high-nibble-first";
        case QTRANSIT_PACKING_BYTE_PER_CODE: return "byte-per-code";
    }
    return "?";
}

bool valid_name(const char* s) {
    if (!s) return false;
    const size_t n = std::strlen(s);
    if (n < 1 || n > 64) return false;
    return std::all_of(s, s + n, [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    });
}

// Device copies of a call's buffers for a cuda codec (freed on every path out).
struct DeviceBuffer {
    void* p = nullptr;
    ~DeviceBuffer() {
        if (p) gpu::device_free(p);
    }
    Status alloc(size_t bytes) {
        auto r = gpu::device_alloc(std::max<size_t>(bytes, 1));
        if (!r) return r.error();
        p = *r;
        return Status::Ok();
    }
};

// One host buffer of a cuda codec's call: its device copy, filled from `in` (null: zeroed) before
// the call and copied back to `out` (null: not read back) after it.
struct Staged {
    Staged(const void* in_, void* out_, size_t bytes_) : in(in_), out(out_), bytes(bytes_) {}
    const void* in;
    void* out;
    size_t bytes;
    DeviceBuffer dev;
};
Status stage_in(std::initializer_list<Staged*> bufs) {
    for (Staged* b : bufs) {
        if (auto st = b->dev.alloc(b->bytes); !st) return st;
        if (b->bytes == 0) continue;
        if (auto st = b->in ? gpu::copy_to_device(b->dev.p, b->in, b->bytes) : gpu::device_fill(b->dev.p, 0, b->bytes); !st) return st;
    }
    return Status::Ok();
}
Status stage_out(std::initializer_list<Staged*> bufs) {
    if (auto st = gpu::device_synchronize(); !st) return st;  // the codec may have queued its work
    for (Staged* b : bufs)
        if (b->out && b->bytes)
            if (auto st = gpu::copy_to_host(b->out, b->dev.p, b->bytes); !st) return st;
    return Status::Ok();
}

template <class T>
std::vector<T>& scratch(int slot) {
    thread_local std::vector<T> v[8];
    return v[slot];
}

}  // namespace

bool is_unwritten(float v) { return std::bit_cast<uint32_t>(v) == kUnwritten; }

Result<Conformance> parse_conformance(std::string_view name) {
    if (name == "exact") return Conformance::kExact;
    if (name == "bounded") return Conformance::kBounded;
    return make_error(ErrorCode::kInvalidArgument, "unknown conformance '" + std::string(name) + "' (known: exact, bounded)");
}
const char* to_string(Conformance c) { return c == Conformance::kExact ? "exact" : "bounded"; }

const char* to_string(ValueType t) {
    switch (t) {
        case ValueType::kBinary32: return "binary32";
        case ValueType::kBinary16: return "binary16";
        case ValueType::kBfloat16: return "bfloat16";
    }
    return "?";
}

float round_to(ValueType t, float v) {
    switch (t) {
        case ValueType::kBinary32: return v;
        case ValueType::kBinary16: return round_f16(v);
        case ValueType::kBfloat16: return round_bf16(v);
    }
    return v;
}

EncodedSizes sharded_sizes(const FormatSpec& format, int64_t elements, int64_t block, int64_t shard) {
    EncodedSizes s;
    if (block < 1 || shard < 1 || elements <= 0 || elements % shard) return s;
    const EncodedSizes one = encoded_sizes(format, shard, block);
    const int64_t shards = elements / shard;
    s.blocks = one.blocks * shards;
    s.code_bytes = one.code_bytes * shards;
    s.offsets = one.offsets * shards;
    return s;
}

Result<std::shared_ptr<const PluginCodec>> PluginCodec::load(const std::string& path) {
    auto bad = [&path](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "codec '" + path + "': " + what);
    };
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return bad("no such file");
    if (!std::filesystem::is_regular_file(path, ec)) return bad("not a regular file");
    // A name without a slash would make dlopen search the library path instead of this file.
    const std::string open_as = path.find('/') == std::string::npos ? "./" + path : path;
    // Armed before dlopen: the library's constructors run inside it, and may start a thread that
    // calls exit() or crash.
    arm_exit_guard();
    std::snprintf(g_loaded, sizeof g_loaded, "%s", path.c_str());
    g_codec_loaded.store(true);
    // Loading is a marked call too, so that a constructor's crash names the library.
    const std::string load_line = "qtransit: codec library '" + printable(path, kMessageMax) + "' crashed while it was loaded: ";
    std::string fp_load;
    void* h = marked_call(path, "dlopen", load_line, fp_load, [&] { return dlopen(open_as.c_str(), RTLD_NOW | RTLD_LOCAL); });
    if (!h) {
        const char* e = dlerror();
        return bad(std::string("cannot be loaded: ") + (e ? e : "dlopen failed"));
    }
    // A constructor that turns on flush-to-zero (GCC's -ffast-math links crtfastmath.o, which does)
    // changes qtransit's own arithmetic on this thread: put back, and the codec refused.
    if (!fp_load.empty())
        return bad("loading it " + fp_load + " (a library linked with -ffast-math does this): its arithmetic is not the format's; "
                   "qtransit restored the environment and refuses the codec (rebuild it without -ffast-math)");
    // The library stays loaded for the life of the process: a codec's code and strings must outlive
    // every object that points into them.
    void* sym = dlsym(h, QTRANSIT_CODEC_ENTRY);
    if (!sym) return bad("exports no function " QTRANSIT_CODEC_ENTRY " (is it built against qtransit/codec_plugin.h, with the symbol visible?)");
    // A data symbol of that name would be "called" and crash: only a function (or an ifunc) is.
    Dl_info info{};
    void* extra = nullptr;
    const auto* esym = dladdr1(sym, &info, &extra, RTLD_DL_SYMENT) != 0 ? static_cast<const ElfW(Sym)*>(extra) : nullptr;
    if (esym) {
        const int type = ELF64_ST_TYPE(esym->st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC)
            return bad(QTRANSIT_CODEC_ENTRY " is exported as " + std::string(type == STT_OBJECT ? "data (an object)" : "a symbol that is not a function") +
                       ", not as a function: build it from qtransit/codec_plugin.h's declaration");
    }
    auto entry = reinterpret_cast<qtransit_codec_v1_fn>(sym);
    char err[kErrLen] = {0};
    std::string fp_entry;
    const std::string entry_line = "qtransit: codec library '" + printable(path, kMessageMax) + "' crashed in " QTRANSIT_CODEC_ENTRY "(): ";
    const qtransit_codec_v1_t* c = marked_call(path, QTRANSIT_CODEC_ENTRY, entry_line, fp_entry, [&] { return entry(err, sizeof err); });
    err[kErrLen - 1] = 0;
    if (!fp_entry.empty())
        return bad(std::string(QTRANSIT_CODEC_ENTRY "() ") + fp_entry + ": qtransit restored the environment and refuses the codec");
    if (!c) return bad(std::string(QTRANSIT_CODEC_ENTRY " returned NULL: ") + (err[0] ? printable(err, kMessageMax) : "no reason given"));
    return from_descriptor(c, path);
}

Result<std::shared_ptr<const PluginCodec>> PluginCodec::from_descriptor(const qtransit_codec_v1_t* c, const std::string& path) {
    auto bad = [&path](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "codec '" + path + "': " + what);
    };
    if (!c) return bad("no descriptor");
    arm_exit_guard();
    if (c->abi_version != QTRANSIT_CODEC_ABI_VERSION)
        return bad("implements codec ABI version " + std::to_string(c->abi_version) + "; this qtransit reads version " +
                   std::to_string(QTRANSIT_CODEC_ABI_VERSION));
    if (c->struct_size < sizeof(qtransit_codec_v1_t))
        return bad("its qtransit_codec_v1_t is " + std::to_string(c->struct_size) + " bytes; version 1's is " +
                   std::to_string(sizeof(qtransit_codec_v1_t)));
    if (!valid_name(c->name)) return bad("its name must be 1 to 64 characters of [A-Za-z0-9._-]");
    auto p = std::make_shared<PluginCodec>();
    p->c_ = c;
    p->name_ = c->name;
    p->path_ = path;
    const std::string who = "codec '" + p->name_ + "' (" + path + ")";
    auto refuse = [&who](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, who + ": " + what); };
    if ((c->format != nullptr) == (c->format_toml != nullptr))
        return refuse("declare its format by exactly one of `format` (a built-in name) and `format_toml` (a declaration)");
    if (c->format) {
        auto f = parse_format(c->format);
        if (!f) return refuse(f.error().message);
        p->format_ = *f;
    } else {
        // A declaration is held to the limit of a declaration file (text_file.hpp), counted without
        // reading past it.
        if (::strnlen(c->format_toml, static_cast<size_t>(kMaxConfigBytes) + 1) > static_cast<size_t>(kMaxConfigBytes))
            return refuse("its format_toml is longer than a declaration may be (" + std::to_string(kMaxConfigBytes >> 20) + " MiB)");
        auto f = parse_declaration(c->format_toml, who + " format_toml");
        if (!f) return make_error(ErrorCode::kInvalidArgument, f.error().message);
        if (auto st = register_or_find(*f); !st) return refuse(st.error().message);
        p->format_ = *f;
    }
    const FormatSpec& f = p->format_;
    // A tiled format's codec is handed its tiles as blocks of the tile's area, in tile order, each
    // tile row-major (docs/PLUGIN.md, "2-D blocks"); a format with a tensor amax gets T in its args
    // and exchanges E4M3 block scales ("Two-level scales").
    // The codec's name names its verdicts (kernel-vs-reference/<name>) next to the formats' own: a
    // format's name would give two verdicts of one name for different kernels.
    for (const auto& b : all_builtin_formats())
        if (b.name() == p->name_)
            return refuse("codec name '" + p->name_ + "' is a built-in format's name: name the codec something else");
    if (p->name_ != f.name())
        if (auto other = parse_format(p->name_); other)
            return refuse("codec name '" + p->name_ + "' is the name of the declared format " + other->name() + ", not of its own format " +
                          f.name() + ": name the codec something else");
    if (c->device != QTRANSIT_DEVICE_CPU && c->device != QTRANSIT_DEVICE_CUDA)
        return refuse("device " + std::to_string(c->device) + " is not QTRANSIT_DEVICE_CPU (0) or QTRANSIT_DEVICE_CUDA (1)");
    p->cuda_ = c->device == QTRANSIT_DEVICE_CUDA;
    for (int32_t t : {c->input_type, c->output_type})
        if (t < QTRANSIT_BINARY32 || t > QTRANSIT_BFLOAT16)
            return refuse("element type " + std::to_string(t) + " is not QTRANSIT_BINARY32 (0), BINARY16 (1) or BFLOAT16 (2)");
    p->in_ = static_cast<ValueType>(c->input_type);
    p->out_ = static_cast<ValueType>(c->output_type);
    p->packing_ = c->packing;
    switch (c->packing) {
        case QTRANSIT_PACKING_FORMAT: break;
        case QTRANSIT_PACKING_LOW_NIBBLE_FIRST:
        case QTRANSIT_PACKING_HIGH_NIBBLE_FIRST:
            if (f.bits != 4) return refuse(std::string("packing ") + packing_name(c->packing) + " is for 4-bit codes; " + f.name() + " has " + std::to_string(f.bits));
            break;
        case QTRANSIT_PACKING_BYTE_PER_CODE:
            if (f.bits > 8) return refuse("packing byte-per-code is for codes of at most 8 bits; " + f.name() + " has " + std::to_string(f.bits));
            break;
        default: return refuse("packing " + std::to_string(c->packing) + " is not one of format (0), low-nibble-first (1), high-nibble-first (2), byte-per-code (3)");
    }
    p->layout_ = c->scale_layout;
    if (c->scale_layout == QTRANSIT_SCALES_IN_ORDER) {
        if (c->scale_row_blocks != 0) return refuse("scale_row_blocks is for the swizzled layout: give 0 with QTRANSIT_SCALES_IN_ORDER");
    } else if (c->scale_layout == QTRANSIT_SCALES_SWIZZLED_128X4) {
        if (c->scale_row_blocks < 1 || c->scale_row_blocks > (int64_t{1} << 20))
            return refuse("QTRANSIT_SCALES_SWIZZLED_128X4 needs scale_row_blocks in [1, 2^20], got " + std::to_string(c->scale_row_blocks));
        p->row_blocks_ = c->scale_row_blocks;
    } else {
        return refuse("scale layout " + std::to_string(c->scale_layout) + " is not QTRANSIT_SCALES_IN_ORDER (0) or QTRANSIT_SCALES_SWIZZLED_128X4 (1)");
    }
    if (c->block_min < 0 || c->block_max < 0 || c->block_multiple < 0)
        return refuse("block_min, block_max and block_multiple must not be negative");
    p->block_min_ = std::max<int64_t>(c->block_min, 1);
    p->block_max_ = c->block_max;
    p->block_multiple_ = std::max<int64_t>(c->block_multiple, 1);
    if (p->block_max_ && p->block_max_ < p->block_min_)
        return refuse("block_max " + std::to_string(p->block_max_) + " is below block_min " + std::to_string(p->block_min_));
    if (const int64_t fb = f.fixed_block(); fb && !p->check_block(fb))
        return refuse(f.name() + " has blocks of " + std::to_string(fb) + ", which the codec's block constraints refuse");
    if (c->thread_safe != 0 && c->thread_safe != 1) return refuse("thread_safe must be 0 or 1");
    p->thread_safe_ = c->thread_safe == 1;
    if (!c->encode) return refuse("its encode entry point is NULL");
    if (!c->decode) return refuse("its decode entry point is NULL");
    p->has_reduce_ = c->reduce_requantize != nullptr;
    if (p->cuda_) {
        if (!gpu::build_info().cuda) return refuse("a cuda codec, and this qtransit was built without CUDA");
        if (!gpu::device_available()) return refuse("a cuda codec, and no GPU answered: " + gpu::query_devices().note);
    }
    std::snprintf(g_loaded, sizeof g_loaded, "%s", p->name_.c_str());
    g_codec_loaded.store(true);
    return std::shared_ptr<const PluginCodec>(std::move(p));
}

std::string PluginCodec::describe() const {
    return name_ + " (" + format_.name() + "; " + (cuda_ ? "cuda" : "cpu") + "; packing " + packing_name(packing_) + "; " +
           to_string(in_) + " in, " + to_string(out_) + " out; scales " +
           (layout_ == QTRANSIT_SCALES_IN_ORDER ? std::string("in order") : "swizzled 128x4, " + std::to_string(row_blocks_) + " per row") +
           (thread_safe_ ? "" : "; one call at a time") + ") from " + path_;
}

Status PluginCodec::check_block(int64_t block) const {
    if (auto st = format_.check_block(block); !st) return st;
    auto bad = [&](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "codec '" + name_ + "' " + what + "; the block size is " + std::to_string(block));
    };
    if (block < block_min_) return bad("takes blocks of at least " + std::to_string(block_min_));
    if (block_max_ && block > block_max_) return bad("takes blocks of at most " + std::to_string(block_max_));
    if (block % block_multiple_) return bad("takes blocks that are multiples of " + std::to_string(block_multiple_));
    return Status::Ok();
}

int64_t PluginCodec::plugin_code_bytes(int64_t len) const {
    return packing_ == QTRANSIT_PACKING_BYTE_PER_CODE ? len : format_.code_bytes(len);
}

int64_t PluginCodec::plugin_tensor_code_bytes(int64_t elements, int64_t block, int64_t shard) const {
    const int64_t tail = shard % block;
    return (elements / shard) * ((shard / block) * plugin_code_bytes(block) + (tail ? plugin_code_bytes(tail) : 0));
}

size_t PluginCodec::plugin_scale_count(int64_t blocks) const {
    if (layout_ == QTRANSIT_SCALES_IN_ORDER || blocks <= 0) return static_cast<size_t>(std::max<int64_t>(blocks, 0));
    // The 128x4 tiles up to the last one a block of the call falls in, not the whole matrix: a call
    // of one block would otherwise take (and fill) 128 x scale_row_blocks floats (32 MiB at 2^16).
    // The last tile holds the last block's slot, or a slot of a full row before it in the same
    // row tile (then the row tile's last column tile).
    const int64_t last = blocks - 1, r = last / row_blocks_, col_tiles = (row_blocks_ + 3) / 4;
    const int64_t last_col = r % 128 == 0 ? last % row_blocks_ : row_blocks_ - 1;
    const int64_t tiles = (r / 128) * col_tiles + last_col / 4 + 1;
    return static_cast<size_t>(tiles * 512);
}

int64_t PluginCodec::scale_slot(int64_t j) const {
    if (layout_ == QTRANSIT_SCALES_IN_ORDER) return j;
    const int64_t r = j / row_blocks_, col = j % row_blocks_, col_tiles = (row_blocks_ + 3) / 4;
    const int64_t tile = (r / 128) * col_tiles + col / 4;
    return tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + col % 4;
}

Error PluginCodec::codec_error(const std::string& what, const char* msg) const {
    // The codec's text goes into one-line messages and reports: control characters escaped (a newline,
    // an ESC sequence), and cut at kMessageMax bytes with the count of what was cut.
    return make_error(ErrorCode::kCodec, "codec '" + name_ + "' " + what + " failed: " +
                                             (msg && msg[0] ? printable(msg, kMessageMax) : std::string("no message")));
}

std::string PluginCodec::crash_line(const char* call, int64_t elements, int64_t block) const {
    return "qtransit: codec '" + name_ + "' crashed during " + call + " (format " + format_.name() + ", block " + std::to_string(block) +
           ", " + std::to_string(elements) + " elements): ";
}

namespace {
constexpr const char* kBreachFp = ": qtransit restored the floating-point environment; what the codec computed under it is not a result";
constexpr const char* kBreachInput = ": a codec's inputs are const, and nothing it returned is a result";
bool ends_with(const std::string& s, const char* tail) {
    const size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}
}  // namespace

bool is_contract_breach(const Error& e) {
    return e.code == ErrorCode::kCodec && (ends_with(e.message, kBreachFp) || ends_with(e.message, kBreachInput));
}

int finish_process(int rc) {
    if (!g_codec_loaded.load()) return rc;  // no codec: the ordinary end
    std::fflush(nullptr);
    if (__lsan_do_leak_check) __lsan_do_leak_check();
    ::_exit(rc);
}

Error PluginCodec::fp_error(const char* call, const std::string& change) const {
    return make_error(ErrorCode::kCodec, "codec '" + name_ + "' " + change + " during " + call + " and left it so" + kBreachFp);
}

// A codec's input is const (codec_plugin.h): one that writes into it would be judged against its own
// output (issue 46: an in-place fake-quant "conformed" with error 3.5). The first element that
// differs, or -1.
template <class T>
int64_t first_changed(const T* kept, const T* given, size_t n) {
    if (n == 0 || std::memcmp(kept, given, n * sizeof(T)) == 0) return -1;  // n == 0: the pointers may be null
    for (size_t i = 0; i < n; ++i)
        if (std::memcmp(kept + i, given + i, sizeof(T)) != 0) return static_cast<int64_t>(i);
    return -1;
}

Error PluginCodec::wrote_input(const char* call, const std::string& what, int64_t index) const {
    return make_error(ErrorCode::kCodec, "codec '" + name_ + "' wrote into its input during " + call + " (" + what + " " +
                                             std::to_string(index) + ")" + kBreachInput);
}

Status PluginCodec::call_encode(const void* x, int64_t elements, int64_t block, int64_t shard, uint8_t* codes,
                                float* scales, float* offsets, const CodecOptions& opt, size_t code_bytes,
                                size_t scale_count) const {
    qtransit_encode_args a{};
    a.struct_size = sizeof a;
    a.elements = elements;
    a.block = block;
    a.shard = shard;
    a.index_base = opt.site.index_base;
    a.rank = opt.site.rank;
    a.hop = opt.hop;
    a.seed = opt.seed;
    a.tensor_amax = amax_for_call(opt.tensor_amax);
    char err[kErrLen] = {0};
    std::unique_lock<std::mutex> lock(serial_, std::defer_lock);
    if (!thread_safe_) lock.lock();
    const std::string line = crash_line("encode", elements, block);
    std::string fp;
    if (!cuda_) {
        a.x = x, a.codes = codes, a.scales = scales, a.offsets = offsets;
        const int rc = marked_call(name_, "encode", line, fp, [&] { return c_->encode(c_->state, &a, err, sizeof err); });
        err[kErrLen - 1] = 0;
        if (!fp.empty()) return fp_error("encode", fp);
        return rc == 0 ? Status::Ok() : Status(codec_error("encode", err));
    }
    const size_t xbytes = static_cast<size_t>(elements) * (in_ == ValueType::kBinary32 ? 4 : 2);
    const size_t mbytes = scale_count * 4;
    Staged sx{x, nullptr, xbytes}, sc{codes, codes, code_bytes}, ss{scales, scales, mbytes}, so{offsets, offsets, offsets ? mbytes : 0};
    if (auto st = stage_in({&sx, &sc, &ss, &so}); !st) return st;
    a.x = sx.dev.p, a.codes = static_cast<uint8_t*>(sc.dev.p), a.scales = static_cast<float*>(ss.dev.p);
    a.offsets = offsets ? static_cast<float*>(so.dev.p) : nullptr;
    a.stream = nullptr;
    const int rc = marked_call(name_, "encode", line, fp, [&] { return c_->encode(c_->state, &a, err, sizeof err); });
    err[kErrLen - 1] = 0;
    if (!fp.empty()) return fp_error("encode", fp);
    if (rc != 0) return codec_error("encode", err);
    return stage_out({&sc, &ss, &so});
}

float PluginCodec::amax_for_call(float t) const {
    if (!format_.takes_tensor_amax()) return 0.0f;
    return t >= 0.0f ? t : format_.decl->tensor_amax;
}

Status PluginCodec::call_decode(const uint8_t* codes, const float* scales, const float* offsets, int64_t elements,
                                int64_t block, int64_t shard, void* out, size_t code_bytes, size_t scale_count, float tensor_amax) const {
    qtransit_decode_args a{};
    a.struct_size = sizeof a;
    a.elements = elements;
    a.block = block;
    a.shard = shard;
    a.tensor_amax = amax_for_call(tensor_amax);
    char err[kErrLen] = {0};
    std::unique_lock<std::mutex> lock(serial_, std::defer_lock);
    if (!thread_safe_) lock.lock();
    const std::string line = crash_line("decode", elements, block);
    std::string fp;
    if (!cuda_) {
        a.codes = codes, a.scales = scales, a.offsets = offsets, a.out = out;
        const int rc = marked_call(name_, "decode", line, fp, [&] { return c_->decode(c_->state, &a, err, sizeof err); });
        err[kErrLen - 1] = 0;
        if (!fp.empty()) return fp_error("decode", fp);
        return rc == 0 ? Status::Ok() : Status(codec_error("decode", err));
    }
    const size_t obytes = static_cast<size_t>(elements) * (out_ == ValueType::kBinary32 ? 4 : 2);
    const size_t mbytes = scale_count * 4;
    // `out` starts zeroed on the device, as a host caller's buffer does.
    Staged sc{codes, nullptr, code_bytes}, ss{scales, nullptr, mbytes}, so{offsets, nullptr, offsets ? mbytes : 0}, sout{nullptr, out, obytes};
    if (auto st = stage_in({&sc, &ss, &so, &sout}); !st) return st;
    a.codes = static_cast<const uint8_t*>(sc.dev.p), a.scales = static_cast<const float*>(ss.dev.p);
    a.offsets = offsets ? static_cast<const float*>(so.dev.p) : nullptr;
    a.out = sout.dev.p;
    const int rc = marked_call(name_, "decode", line, fp, [&] { return c_->decode(c_->state, &a, err, sizeof err); });
    err[kErrLen - 1] = 0;
    if (!fp.empty()) return fp_error("decode", fp);
    if (rc != 0) return codec_error("decode", err);
    return stage_out({&sout});
}

Status PluginCodec::encode(std::span<const float> x, int64_t block, int64_t shard, std::span<uint8_t> codes,
                           std::span<float> scales, std::span<float> offsets, const CodecOptions& opt) const {
    const int64_t n = static_cast<int64_t>(x.size());
    if (auto st = check_block(block); !st) return st;
    if (n == 0) return Status::Ok();  // nothing to encode: the codec is not called
    if (shard < 1 || n % shard)
        return make_error(ErrorCode::kInvalidArgument, "shard length " + std::to_string(shard) + " does not divide the " +
                                                           std::to_string(n) + " elements");
    const EncodedSizes sz = sharded_sizes(format_, n, block, shard);
    if (static_cast<int64_t>(codes.size()) != sz.code_bytes || static_cast<int64_t>(scales.size()) != sz.blocks ||
        static_cast<int64_t>(offsets.size()) != sz.offsets)
        return make_error(ErrorCode::kInternal, "PluginCodec::encode: buffers of the wrong size");
    // The input in the codec's element type.
    const void* xin = x.data();
    auto& x16 = scratch<uint16_t>(0);
    if (in_ != ValueType::kBinary32) {
        x16.resize(x.size());
        for (size_t i = 0; i < x.size(); ++i)
            x16[i] = in_ == ValueType::kBinary16 ? f32_to_f16_bits(x[i]) : f32_to_bf16_bits(x[i]);
        xin = x16.data();
    }
    // The codec's own layout, prefilled so that what it leaves unwritten shows.
    const int64_t per_shard_blocks = (shard + block - 1) / block, shards = n / shard;
    const int64_t pbytes = plugin_tensor_code_bytes(n, block, shard);
    const bool same_codes = packing_ == QTRANSIT_PACKING_FORMAT;
    const bool same_scales = layout_ == QTRANSIT_SCALES_IN_ORDER;
    auto& pcodes = scratch<uint8_t>(1);
    auto& pscales = scratch<float>(2);
    auto& poffs = scratch<float>(3);
    uint8_t* cptr = codes.data();
    if (!same_codes) {
        pcodes.assign(static_cast<size_t>(pbytes), 0);
        cptr = pcodes.data();
    } else {
        std::fill(codes.begin(), codes.end(), uint8_t{0});
    }
    const size_t nscales = plugin_scale_count(sz.blocks);
    const float unwritten = std::bit_cast<float>(kUnwritten);
    float* sptr = scales.data();
    float* optr = format_.has_offset() ? offsets.data() : nullptr;
    if (!same_scales) {
        pscales.assign(nscales, unwritten);
        sptr = pscales.data();
        if (optr) {
            poffs.assign(nscales, unwritten);
            optr = poffs.data();
        }
    } else {
        std::fill(scales.begin(), scales.end(), unwritten);
        std::fill(offsets.begin(), offsets.end(), unwritten);
    }
    // The codec gets a copy of its input, compared after the call with what it was given: qtransit
    // judges against x, which the codec never sees (a cuda codec gets a device copy already).
    const size_t xbytes = x.size() * (in_ == ValueType::kBinary32 ? 4 : 2);
    auto& given = scratch<uint8_t>(4);
    if (!cuda_) {
        given.resize(xbytes);
        if (xbytes > 0) std::memcpy(given.data(), xin, xbytes);
    }
    if (auto st = call_encode(cuda_ ? xin : given.data(), n, block, shard, cptr, sptr, optr, opt, static_cast<size_t>(pbytes), nscales); !st)
        return st;
    if (!cuda_)
        if (const int64_t i = first_changed(static_cast<const uint8_t*>(xin), given.data(), xbytes); i >= 0)
            return wrote_input("encode", "x, element", i / (in_ == ValueType::kBinary32 ? 4 : 2));
    // Back to qtransit's layout.
    if (!same_scales) {
        for (int64_t j = 0; j < sz.blocks; ++j) {
            scales[static_cast<size_t>(j)] = pscales[static_cast<size_t>(scale_slot(j))];
            if (format_.has_offset()) offsets[static_cast<size_t>(j)] = poffs[static_cast<size_t>(scale_slot(j))];
        }
    }
    // Two-level scales: the codec wrote E4M3 block scales s_b; qtransit keeps decode factors under T.
    if (format_.takes_tensor_amax()) {
        const FormatSpec ft = format_.with_tensor_amax(amax_for_call(opt.tensor_amax));
        for (int64_t j = 0; j < sz.blocks; ++j) {
            float& v = scales[static_cast<size_t>(j)];
            if (is_unwritten(v) || v != v) continue;  // unwritten shows as such; a NaN scale poisons its block
            if (!is_e4m3_scale_value(v))
                return make_error(ErrorCode::kCodec, "codec '" + name_ + "' wrote block scale " + shortest(v) + " for block " +
                                                         std::to_string(j) + ", which is not a non-negative E4M3 value (" + format_.name() +
                                                         "'s block scales are E4M3 values s_b, docs/PLUGIN.md)");
            v = nvfp4_factor_of(ft, v);
        }
    }
    if (!same_codes) {
        const Stream from = packing_ == QTRANSIT_PACKING_LOW_NIBBLE_FIRST    ? Stream::kLsb
                            : packing_ == QTRANSIT_PACKING_HIGH_NIBBLE_FIRST ? Stream::kMsb
                                                                             : Stream::kBytePerCode;
        const Stream to = canonical_stream(format_);
        const int bits = format_.bits;
        const bool sgn = signed_codes(format_);
        const uint32_t mask = bits >= 32 ? ~0u : (1u << bits) - 1u;
        std::fill(codes.begin(), codes.end(), uint8_t{0});
        int64_t pin = 0, qout = 0;
        for (int64_t s = 0; s < shards; ++s) {
            for (int64_t b = 0; b < per_shard_blocks; ++b) {
                const int64_t len = std::min(block, shard - b * block);
                for (int64_t i = 0; i < len; ++i) {
                    uint32_t r = get_raw(from, bits, cptr + pin, i);
                    if (from == Stream::kBytePerCode && bits < 8) {
                        const int32_t v = sgn ? static_cast<int8_t>(r) : static_cast<int32_t>(r);
                        const int32_t lo = sgn ? -(1 << (bits - 1)) : 0, hi = sgn ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
                        if (v < lo || v > hi)
                            return make_error(ErrorCode::kCodec, "codec '" + name_ + "' wrote code " + std::to_string(v) + " for element " +
                                                                     std::to_string(s * shard + b * block + i) + ", which is not a " +
                                                                     std::to_string(bits) + "-bit " + (sgn ? "signed" : "unsigned") + " code");
                        r = static_cast<uint32_t>(v) & mask;
                    }
                    set_raw(to, bits, codes.data() + qout, i, r);
                }
                pin += plugin_code_bytes(len);
                qout += format_.code_bytes(len);
            }
        }
    }
    return Status::Ok();
}

Status PluginCodec::decode(int64_t block, int64_t shard, std::span<const uint8_t> codes, std::span<const float> scales,
                           std::span<const float> offsets, std::span<float> out, float tensor_amax) const {
    const int64_t n = static_cast<int64_t>(out.size());
    if (auto st = check_block(block); !st) return st;
    if (n == 0) return Status::Ok();
    if (shard < 1 || n % shard)
        return make_error(ErrorCode::kInvalidArgument, "shard length " + std::to_string(shard) + " does not divide the " +
                                                           std::to_string(n) + " elements");
    const EncodedSizes sz = sharded_sizes(format_, n, block, shard);
    if (static_cast<int64_t>(codes.size()) != sz.code_bytes || static_cast<int64_t>(scales.size()) != sz.blocks ||
        static_cast<int64_t>(offsets.size()) != sz.offsets)
        return make_error(ErrorCode::kInternal, "PluginCodec::decode: buffers of the wrong size");
    const int64_t per_shard_blocks = (shard + block - 1) / block, shards = n / shard;
    const uint8_t* cptr = codes.data();
    auto& pcodes = scratch<uint8_t>(1);
    const int64_t pbytes = plugin_tensor_code_bytes(n, block, shard);
    if (packing_ != QTRANSIT_PACKING_FORMAT) {
        pcodes.assign(static_cast<size_t>(pbytes), 0);
        const Stream to = packing_ == QTRANSIT_PACKING_LOW_NIBBLE_FIRST    ? Stream::kLsb
                          : packing_ == QTRANSIT_PACKING_HIGH_NIBBLE_FIRST ? Stream::kMsb
                                                                           : Stream::kBytePerCode;
        const Stream from = canonical_stream(format_);
        const int bits = format_.bits;
        const bool sgn = signed_codes(format_);
        int64_t pin = 0, qout = 0;
        for (int64_t s = 0; s < shards; ++s)
            for (int64_t b = 0; b < per_shard_blocks; ++b) {
                const int64_t len = std::min(block, shard - b * block);
                for (int64_t i = 0; i < len; ++i) {
                    uint32_t r = get_raw(from, bits, cptr + qout, i);
                    if (to == Stream::kBytePerCode && bits < 8 && sgn) r = static_cast<uint32_t>(sign_extend(r, bits)) & 0xFFu;
                    set_raw(to, bits, pcodes.data() + pin, i, r);
                }
                pin += plugin_code_bytes(len);
                qout += format_.code_bytes(len);
            }
        cptr = pcodes.data();
    }
    const size_t nscales = plugin_scale_count(sz.blocks);
    const float* sptr = scales.data();
    const float* optr = format_.has_offset() ? offsets.data() : nullptr;
    auto& pscales = scratch<float>(2);
    auto& poffs = scratch<float>(3);
    // Two-level scales: the codec decodes from its E4M3 block scales s_b (and T), not qtransit's factors.
    auto& sb = scratch<float>(7);
    if (format_.takes_tensor_amax()) {
        const FormatSpec ft = format_.with_tensor_amax(amax_for_call(tensor_amax));
        sb.resize(scales.size());
        for (size_t j = 0; j < scales.size(); ++j) sb[j] = is_unwritten(scales[j]) ? scales[j] : nvfp4_block_scale_of(ft, scales[j]);
        sptr = sb.data();
    }
    if (layout_ != QTRANSIT_SCALES_IN_ORDER) {
        pscales.assign(nscales, 0.0f);
        poffs.assign(optr ? nscales : 0, 0.0f);
        for (int64_t j = 0; j < sz.blocks; ++j) {
            pscales[static_cast<size_t>(scale_slot(j))] = sptr[j];
            if (optr) poffs[static_cast<size_t>(scale_slot(j))] = offsets[static_cast<size_t>(j)];
        }
        sptr = pscales.data();
        if (optr) optr = poffs.data();
    }
    // The codec gets copies of the codes and scales, compared after the call with what it was given
    // (its inputs are const; a cuda codec gets device copies already).
    auto& gcodes = scratch<uint8_t>(5);
    auto& gscales = scratch<float>(5);
    auto& goffs = scratch<float>(6);
    const uint8_t* pass_c = cptr;
    const float* pass_s = sptr;
    const float* pass_o = optr;
    if (!cuda_) {
        gcodes.assign(cptr, cptr + pbytes);
        gscales.assign(sptr, sptr + nscales);
        pass_c = gcodes.data();
        pass_s = gscales.data();
        if (optr) {
            goffs.assign(optr, optr + nscales);
            pass_o = goffs.data();
        }
    }
    auto unchanged = [&]() -> Status {
        if (cuda_) return Status::Ok();
        if (const int64_t i = first_changed(cptr, gcodes.data(), static_cast<size_t>(pbytes)); i >= 0)
            return wrote_input("decode", "the codes, byte", i);
        if (const int64_t i = first_changed(sptr, gscales.data(), nscales); i >= 0) return wrote_input("decode", "the scales, block", i);
        if (optr)
            if (const int64_t i = first_changed(optr, goffs.data(), nscales); i >= 0) return wrote_input("decode", "the offsets, block", i);
        return Status::Ok();
    };
    if (out_ == ValueType::kBinary32) {
        if (auto st = call_decode(pass_c, pass_s, pass_o, n, block, shard, out.data(), static_cast<size_t>(pbytes), nscales, tensor_amax); !st) return st;
        return unchanged();
    }
    std::vector<uint16_t> o16(static_cast<size_t>(n));
    if (auto st = call_decode(pass_c, pass_s, pass_o, n, block, shard, o16.data(), static_cast<size_t>(pbytes), nscales, tensor_amax); !st) return st;
    if (auto st = unchanged(); !st) return st;
    for (int64_t i = 0; i < n; ++i)
        out[static_cast<size_t>(i)] = out_ == ValueType::kBinary16 ? f16_bits_to_f32(o16[static_cast<size_t>(i)])
                                                                   : bf16_bits_to_f32(o16[static_cast<size_t>(i)]);
    return Status::Ok();
}

Status PluginCodec::encode_block(const float* x, int64_t len, int64_t block, uint8_t* codes, float* scale, float* offset,
                                 const CodecOptions& opt) const {
    const int64_t cb = format_.code_bytes(len);
    float o = 0;
    return encode(std::span<const float>(x, static_cast<size_t>(len)), block, len,
                  std::span<uint8_t>(codes, static_cast<size_t>(cb)), std::span<float>(scale, 1),
                  format_.has_offset() ? std::span<float>(offset, 1) : std::span<float>(&o, 0), opt);
}

Status PluginCodec::decode_block(const uint8_t* codes, int64_t len, int64_t block, float scale, float offset, float* out,
                                 float tensor_amax) const {
    const int64_t cb = format_.code_bytes(len);
    return decode(block, len, std::span<const uint8_t>(codes, static_cast<size_t>(cb)),
                  std::span<const float>(&scale, 1), format_.has_offset() ? std::span<const float>(&offset, 1) : std::span<const float>(),
                  std::span<float>(out, static_cast<size_t>(len)), tensor_amax);
}

}  // namespace qtransit::kernels
