/* Codec plugins that break the ABI one way each (BAD = 1..15; 14: the entry symbol is data, not a
 * function; 15: a format_toml of 21 MiB), for the loader's refusals
 * (plugin_test.cpp). BAD = 0 is a well-formed int8 codec whose encode and decode fail on purpose, so
 * that a test can see a codec's own error message come back. Not a quantizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qtransit/codec_plugin.h"

#ifndef BAD
#define BAD 0
#endif

static int fail_encode(void* state, const qtransit_encode_args* a, char* err, size_t err_len) {
    (void)state, (void)a;
    snprintf(err, err_len, "this codec refuses everything (bad_codec.c)");
    return 1;
}
static int fail_decode(void* state, const qtransit_decode_args* a, char* err, size_t err_len) {
    (void)state, (void)a;
    snprintf(err, err_len, "this codec decodes nothing (bad_codec.c)");
    return 1;
}

static qtransit_codec_v1_t codec;

#if BAD == 14
/* The entry's name on a data object: calling it would jump into data. */
__attribute__((visibility("default"))) const unsigned char entry_as_data[64] __asm__("qtransit_codec_v1") = {0xc3};
static const qtransit_codec_v1_t* not_exported(char* err, size_t err_len);
static const qtransit_codec_v1_t* (*volatile keep)(char*, size_t) = not_exported;
static const qtransit_codec_v1_t* not_exported(char* err, size_t err_len) {
#elif BAD == 5
__attribute__((visibility("default"))) const qtransit_codec_v1_t* qtransit_codec_v2(char* err, size_t err_len) {
#else
const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
#endif
    memset(&codec, 0, sizeof codec);
    codec.abi_version = QTRANSIT_CODEC_ABI_VERSION;
    codec.struct_size = sizeof codec;
    codec.name = "bad-codec";
    codec.format = "int8";
    codec.device = QTRANSIT_DEVICE_CPU;
    codec.packing = QTRANSIT_PACKING_FORMAT;
    codec.input_type = QTRANSIT_BINARY32;
    codec.output_type = QTRANSIT_BINARY32;
    codec.scale_layout = QTRANSIT_SCALES_IN_ORDER;
    codec.block_min = 1;
    codec.block_multiple = 1;
    codec.thread_safe = 1;
    codec.encode = fail_encode;
    codec.decode = fail_decode;
#if BAD == 1
    codec.abi_version = 2;
#elif BAD == 2
    codec.struct_size = 16;
#elif BAD == 3
    codec.format = "int9";
#elif BAD == 4
    codec.encode = NULL;
#elif BAD == 6
    snprintf(err, err_len, "no licence for this machine");
    return NULL;
#elif BAD == 7
    codec.packing = QTRANSIT_PACKING_HIGH_NIBBLE_FIRST;
#elif BAD == 8
    codec.block_min = 64;
    codec.block_max = 16;
#elif BAD == 9
    codec.format_toml = "name = \"x\"";
#elif BAD == 10
    codec.format = NULL;
    codec.format_toml = "name = \"broken-decl\"\nscale = \"fp32-absmax\"\n[element]\ntype = \"int\"\nbits = 99\n";
#elif BAD == 11
    codec.name = "bad name!";
#elif BAD == 12
    codec.block_multiple = 64;
#elif BAD == 15
    {
        /* A valid declaration padded with a comment to 21 MiB: too long to be read as one. */
        static char* big = NULL;
        const char* decl = "name = \"plugin-int4-big\"\nscale = \"fp32-absmax\"\n[element]\ntype = \"int\"\nbits = 4\n#";
        const size_t n = (size_t)21 << 20;
        if (!big) {
            big = (char*)malloc(n + 1);
            if (!big) return NULL;
            memset(big, 'x', n);
            memcpy(big, decl, strlen(decl));
            big[n] = 0;
        }
        codec.format = NULL;
        codec.format_toml = big;
    }
#elif BAD == 13
    codec.format = NULL;
    codec.format_toml =
        "name = \"plugin-int4\"\nscale = \"fp32-absmax\"\noffset = \"none\"\nrounding = \"nearest-even\"\npacking = \"lsb-first\"\n"
        "[element]\ntype = \"int\"\nbits = 4\nsigned = true\nrange = \"restricted\"\nfraction_bits = 0\n";
#endif
    (void)err, (void)err_len;
    return &codec;
}
