/* qtransit/codec_plugin.h: the codec plugin ABI, version 1 (docs/PLUGIN.md says it in full).
 *
 * A plugin is a shared library that exports one function, `qtransit_codec_v1`, returning a
 * description of one codec: the format it implements, where it runs, how it lays out its codes and
 * scales, and its encode and decode entry points. qtransit loads it with dlopen (`--codec lib.so`)
 * and runs it wherever it runs its own kernels, next to its exact reference.
 *
 * C99, no C++ types. The argument structs start with their size and the descriptor with its ABI
 * version and size, so that later versions can grow them.
 * Entry points return 0 on success; on failure a nonzero code, with a NUL-terminated message of at
 * most err_len bytes written to err. They never throw (a C++ plugin catches its own exceptions). */
#ifndef QTRANSIT_CODEC_PLUGIN_H
#define QTRANSIT_CODEC_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QTRANSIT_CODEC_ABI_VERSION 1u
#define QTRANSIT_CODEC_ENTRY "qtransit_codec_v1" /* the one exported symbol */

/* Where the codec runs: cpu takes host pointers; cuda takes device pointers and a stream. */
enum qtransit_device { QTRANSIT_DEVICE_CPU = 0, QTRANSIT_DEVICE_CUDA = 1 };

/* Element types of the values encoded and decoded (IEEE binary32, binary16, and bfloat16: the
 * upper 16 bits of a binary32), as their bits in host byte order. */
enum qtransit_dtype { QTRANSIT_BINARY32 = 0, QTRANSIT_BINARY16 = 1, QTRANSIT_BFLOAT16 = 2 };

/* How the codes of a block are packed. Every block starts on a byte boundary and its codes take
 * ceil(len * bits / 8) bytes (BYTE_PER_CODE: len bytes); the blocks follow each other in order. */
enum qtransit_packing {
    QTRANSIT_PACKING_FORMAT = 0,            /* the format's own (NUMERICS.md 1.3, 1.4; FORMATS.md) */
    QTRANSIT_PACKING_LOW_NIBBLE_FIRST = 1,  /* 4-bit codes: element 2j in the low nibble */
    QTRANSIT_PACKING_HIGH_NIBBLE_FIRST = 2, /* 4-bit codes: element 2j in the high nibble (DeepSpeed) */
    QTRANSIT_PACKING_BYTE_PER_CODE = 3      /* one byte per code: int8_t (signed codes) or uint8_t */
};

/* Where block j's scale (and offset) lies in the scales (and offsets) array. */
enum qtransit_scale_layout {
    QTRANSIT_SCALES_IN_ORDER = 0,     /* scales[j] */
    /* cuBLAS's block-scaled layout (the MX scale factors of cublasLt): the blocks form a matrix of
     * scale_row_blocks columns, padded to 128-row by 4-column tiles, tiles row-major, and inside a
     * tile the scale of (r, c) at (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4. */
    QTRANSIT_SCALES_SWIZZLED_128X4 = 1
};

/* One encode call: `elements` values, quantized in blocks of `block` that restart every `shard`
 * elements (elements % shard == 0; the last block of a shard may be short). */
typedef struct qtransit_encode_args {
    uint32_t struct_size;   /* sizeof(qtransit_encode_args) */
    const void* x;          /* elements values of input_type */
    int64_t elements, block, shard;
    uint8_t* codes;         /* the packed codes of every block */
    float* scales;          /* one per block (the format's metadata: ds-int<b> stores its step) */
    float* offsets;         /* one per block for formats with an offset (int<b>-asym's lo), else NULL */
    /* Where these values lie, for keyed stochastic rounding and for messages: the index of x[0]
     * in its tensor, the rank that quantizes, the hop or stage, and the run's seed. */
    int64_t index_base;
    int64_t rank;           /* -1: not a rank's tensor */
    uint32_t hop;
    uint64_t seed;
    void* stream;           /* cuda: the cudaStream_t to run on (v1 passes NULL, the default stream;
                               work may be queued: qtransit synchronizes before it reads); cpu: NULL */
    /* Formats with scale e4m3-tensor-amax (nvfp4): the tensor's amax T, the second scale level the
     * block scales are under (binary32, finite, >= 0); scales[j] is then block j's E4M3 scale s_b as
     * its binary32 value (docs/PLUGIN.md, "Two-level scales"). 0 for every other format. Added after
     * the first release of version 1: read it only when struct_size covers it. */
    float tensor_amax;
} qtransit_encode_args;

typedef struct qtransit_decode_args {
    uint32_t struct_size;   /* sizeof(qtransit_decode_args) */
    const uint8_t* codes;
    const float* scales;
    const float* offsets;   /* NULL for formats without an offset */
    int64_t elements, block, shard;
    void* out;              /* elements values of output_type */
    void* stream;
    float tensor_amax;      /* as in qtransit_encode_args: the T the codes and scales were encoded under */
} qtransit_decode_args;

/* Optional: the fused dequantize-reduce-requantize of qgZ's stage 2: `inputs` encoded tensors of
 * `elements` values each (one block layout, shard = elements), decoded, summed in input order in
 * binary32 (accum 0) or binary16 (accum 1), and requantized into out_*. */
typedef struct qtransit_reduce_args {
    uint32_t struct_size;
    int32_t inputs;
    const uint8_t* const* codes;
    const float* const* scales;
    const float* const* offsets;
    int64_t elements, block;
    int32_t accum;
    uint8_t* out_codes;
    float* out_scales;
    float* out_offsets;
    void* stream;
} qtransit_reduce_args;

typedef struct qtransit_codec_v1_t {
    uint32_t abi_version;   /* QTRANSIT_CODEC_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(qtransit_codec_v1_t) */
    const char* name;       /* names the codec in verdicts: [A-Za-z0-9._-], 1 to 64 characters */
    /* The format: a built-in name ("int4", "ds-int8", "mxfp4"), or NULL and the text of a format
     * declaration document (docs/FORMATS.md section 8: top-level keys, as `formats show` prints). */
    const char* format;
    const char* format_toml;
    int32_t device;         /* enum qtransit_device */
    int32_t packing;        /* enum qtransit_packing */
    int32_t input_type;     /* enum qtransit_dtype: what encode reads */
    int32_t output_type;    /* enum qtransit_dtype: what decode writes */
    int32_t scale_layout;   /* enum qtransit_scale_layout */
    int64_t scale_row_blocks; /* SWIZZLED_128X4: blocks per row of the scale matrix; else 0 */
    /* Block sizes it accepts: block_min <= block <= block_max (0: no upper limit), and a multiple
     * of block_multiple (0 or 1: any). */
    int64_t block_min, block_max, block_multiple;
    /* 1: encode and decode may run on several threads at once (each call with its own buffers);
     * 0: qtransit never calls the codec from two threads at once. */
    int32_t thread_safe;
    void* state;            /* passed back to every entry point */
    int (*encode)(void* state, const qtransit_encode_args* args, char* err, size_t err_len);
    int (*decode)(void* state, const qtransit_decode_args* args, char* err, size_t err_len);
    int (*reduce_requantize)(void* state, const qtransit_reduce_args* args, char* err, size_t err_len); /* or NULL */
} qtransit_codec_v1_t;

/* The one exported function. It may be called more than once and returns the same codec; NULL
 * (with a message in err) when the codec cannot start. The codec lives until the library is
 * unloaded. */
typedef const qtransit_codec_v1_t* (*qtransit_codec_v1_fn)(char* err, size_t err_len);
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* QTRANSIT_CODEC_PLUGIN_H */
