/* ggml's Q1_0 decoder, transcribed for scripts/make_gguf_fixtures.py (which
 * compiles it with the system C compiler and calls it through ctypes): gguf-py
 * 0.19.0 does not decode Q1_0, so its fixture outputs are ggml's C.
 *
 * dequantize_row_q1_0: ggml/src/ggml-quants.c; ggml_compute_fp16_to_fp32 and
 * fp32_from_bits / fp32_to_bits (GGML_FP16_TO_FP32 without F16C): ggml/src/ggml-impl.h
 * (ggml-org/llama.cpp, MIT licence). Only the names' GGML_RESTRICT and the block
 * struct's typedefs are spelled out here.
 */
#include <stdint.h>
#include <string.h>

#define QK1_0 128

typedef uint16_t ggml_fp16_t;

typedef struct {
    ggml_fp16_t d;
    uint8_t qs[QK1_0 / 8];
} block_q1_0;

static inline float fp32_from_bits(uint32_t w) {
    union {
        uint32_t as_bits;
        float as_value;
    } fp32;
    fp32.as_bits = w;
    return fp32.as_value;
}

static inline uint32_t fp32_to_bits(float f) {
    union {
        float as_value;
        uint32_t as_bits;
    } fp32;
    fp32.as_value = f;
    return fp32.as_bits;
}

static inline float ggml_compute_fp16_to_fp32(ggml_fp16_t h) {
    const uint32_t w = (uint32_t) h << 16;
    const uint32_t sign = w & UINT32_C(0x80000000);
    const uint32_t two_w = w + w;

    const uint32_t exp_offset = UINT32_C(0xE0) << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized_value = fp32_from_bits((two_w >> 4) + exp_offset) * exp_scale;

    const uint32_t magic_mask = UINT32_C(126) << 23;
    const float magic_bias = 0.5f;
    const float denormalized_value = fp32_from_bits((two_w >> 17) | magic_mask) - magic_bias;

    const uint32_t denormalized_cutoff = UINT32_C(1) << 27;
    const uint32_t result = sign |
        (two_w < denormalized_cutoff ? fp32_to_bits(denormalized_value) : fp32_to_bits(normalized_value));
    return fp32_from_bits(result);
}

#define GGML_FP16_TO_FP32(x) ggml_compute_fp16_to_fp32(x)

void dequantize_row_q1_0(const block_q1_0 * x, float * y, int64_t k) {
    static const int qk = QK1_0;

    const int nb = k / qk;

    for (int i = 0; i < nb; i++) {
        const float d = GGML_FP16_TO_FP32(x[i].d);
        const float neg_d = -d;

        for (int j = 0; j < qk; ++j) {
            const int byte_index = j / 8;
            const int bit_offset = j % 8;
            const uint8_t bit = (x[i].qs[byte_index] >> bit_offset) & 1;
            y[i*qk + j] = bit ? d : neg_d;
        }
    }
}
