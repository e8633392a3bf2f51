/* The correct example codec (examples/codecs/example_codec.c, included whole) with one mistake, chosen
 * by MUT, for the tests of what the loader, the adapter and the kernel check must catch
 * (codec_cli_test.cpp, plugin_test.cpp). EXAMPLE_FORMAT picks the format as in the example.
 *   MUT 1  never refuses NaN or inf input (isfinite always true)
 *   MUT 2  never refuses a range overflow (isinf always false: int4-asym's hi - lo)
 *   MUT 3  encode calls exit(0) after it succeeded
 *   MUT 4  encode fails with a message holding a newline, an ESC sequence, and 600 bytes in all
 *   MUT 5  named "int8" (a built-in format's name), whatever its format
 *   MUT 6  decode calls exit(0) after it succeeded
 *   MUT 7  decode moves the call's last value up by one ulp
 *   MUT 8  encode leaves the second block's scale unwritten (qtransit's fill NaN)
 * Hostile ones (issue 46): what a codec must not do to qtransit's process.
 *   MUT 9  encode writes its decoded values back into its const input (an in-place fake-quant)
 *   MUT 10 a constructor turns on flush-to-zero and denormals-are-zero (as -ffast-math's crtfastmath)
 *   MUT 11 encode turns on flush-to-zero and leaves it on
 *   MUT 12 the first encode starts a thread that calls exit(0) 1 ms after that call returned, between calls
 *   MUT 13 encode dereferences a null pointer (SIGSEGV)
 *   MUT 14 decode calls abort() (SIGABRT)
 *   MUT 15 encode sets the rounding mode upward and leaves it so
 *   MUT 16 decode flips a bit of its const codes
 * Inputs that hunt (issue 47): a mistake only a boundary input shows.
 *   MUT 17 the quotient x / s computed in binary64 and rounded once (rint((double)x / s)): it differs
 *          from binary32's x / s then RNE only where fl32(x / s) lands on a tie the exact quotient
 *          does not, about 2e-6 of normal int8 inputs
 * A wrong codec that would end the process with status 0 after qtransit's verdict (exit 1):
 *   MUT 18 decode as MUT 7, and a destructor that calls exit(0) (it runs when the process ends)
 *   MUT 19 decode as MUT 7, and an atexit handler registered at load that calls _exit(0) */
#define _POSIX_C_SOURCE 199309L /* as example_codec.c defines it */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if MUT >= 9
#include <fenv.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <xmmintrin.h>
#endif
#if MUT == 17
#define EXAMPLE_QUOTIENT_F64
#endif
#if MUT == 1
#undef isfinite
#define isfinite(x) 1
#elif MUT == 2
#undef isinf
#define isinf(x) 0
#endif
#define qtransit_codec_v1 example_entry
#include "example_codec.c"
#undef qtransit_codec_v1

static qtransit_codec_v1_t mutated;

#if MUT == 18
__attribute__((destructor)) static void exit_zero_at_unload(void) { exit(0); }
#elif MUT == 19
#include <unistd.h>
static void exit_zero_at_exit(void) { _exit(0); }
__attribute__((constructor)) static void register_exit_zero(void) { atexit(exit_zero_at_exit); }
#endif

#if MUT == 10
__attribute__((constructor)) static void fast_math_on_load(void) { _mm_setcsr(_mm_getcsr() | 0x8040u); }
#elif MUT == 12
static volatile int first_call_done = 0;
static void* exit_later(void* arg) {
    (void)arg;
    /* After the first encode has returned (qtransit then checks for about 20 ms more), 1 ms later:
     * between calls. */
    struct timespec t = {0, 1000 * 1000};
    while (!first_call_done) nanosleep(&t, NULL);
    nanosleep(&t, NULL);
    exit(0);
    return NULL;
}
#endif

static int mutated_encode(void* state, const qtransit_encode_args* a, char* err, size_t err_len) {
#if MUT == 4
    (void)state, (void)a;
    char long_tail[601];
    memset(long_tail, 'x', 600);
    long_tail[600] = 0;
    snprintf(err, err_len, "line one\nline two\x1b[31mred %s", long_tail);
    return 1;
#else
    const int rc = example_encode(state, a, err, err_len);
#if MUT == 3
    if (rc == 0) exit(0);
#elif MUT == 8
    if (rc == 0 && a->elements > a->block) {
        const uint32_t fill = 0x7fc5a5a5u;
        memcpy(&a->scales[1], &fill, 4);
    }
#elif MUT == 9
    if (rc == 0) {
        float* x = (float*)a->x; /* const cast away, as an in-place fake-quant does */
        for (int64_t i = 0; i < a->elements; ++i) x[i] = nearbyintf(x[i] * 4.0f) / 4.0f;
    }
#elif MUT == 11
    _mm_setcsr(_mm_getcsr() | 0x8000u);
#elif MUT == 12
    static int started = 0;
    if (!started) {
        started = 1;
        pthread_t t;
        if (pthread_create(&t, NULL, exit_later, NULL) == 0) pthread_detach(t);
    }
    first_call_done = 1;
#elif MUT == 13
    if (rc == 0) *(volatile int*)(uintptr_t)a->block = 1; /* a small address: never mapped */
#elif MUT == 15
    fesetround(FE_UPWARD);
#endif
    return rc;
#endif
}

static int mutated_decode(void* state, const qtransit_decode_args* a, char* err, size_t err_len) {
    const int rc = example_decode(state, a, err, err_len);
#if MUT == 6
    if (rc == 0) exit(0);
#elif MUT == 7 || MUT == 18 || MUT == 19
    if (rc == 0) {
        float* o = (float*)a->out;
        o[a->elements - 1] = nextafterf(o[a->elements - 1], INFINITY);
    }
#elif MUT == 14
    if (rc == 0) abort();
#elif MUT == 16
    if (rc == 0) ((uint8_t*)a->codes)[0] ^= 1u;
#endif
    return rc;
}

__attribute__((visibility("default"))) const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    const qtransit_codec_v1_t* inner = example_entry(err, err_len);
    if (!inner) return NULL;
    mutated = *inner;
    mutated.encode = mutated_encode;
    mutated.decode = mutated_decode;
#if MUT == 5
    mutated.name = "int8";
#endif
    return &mutated;
}
