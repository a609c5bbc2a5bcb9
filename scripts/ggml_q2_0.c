/* ggml's Q2_0 decoder (type 42, ggml-org/llama.cpp pull request 24448, merged
 * 2026-07), for scripts/make_gguf_fixtures.py (which compiles it with the system
 * C compiler and calls it through ctypes): gguf-py 0.19.0 does not know Q2_0, so
 * its fixture outputs are ggml's C.
 *
 * dequantize_row_q2_0 (ggml/src/ggml-quants.c) and block_q2_0 (ggml/src/ggml-common.h,
 * QK2_0 = 64): per block, d = GGML_FP16_TO_FP32(x[i].d); element j's code
 * q = (x[i].qs[j / 4] >> ((j % 4) * 2)) & 0x03 (00 = -1, 01 = 0, 10 = +1, 11 = +2)
 * and y[i*qk + j] = ((int)q - 1) * d: the int converted to float, one f32 product.
 * The f16 conversion (ggml-impl.h's ggml_compute_fp16_to_fp32, without F16C) is
 * the one scripts/ggml_q1_0.c spells out, included from there.
 */
#include "ggml_q1_0.c"

#define QK2_0 64

typedef struct {
    ggml_fp16_t d;
    uint8_t qs[QK2_0 / 4];
} block_q2_0;

void dequantize_row_q2_0(const block_q2_0 * x, float * y, int64_t k) {
    static const int qk = QK2_0;

    const int nb = k / qk;

    for (int i = 0; i < nb; i++) {
        const float d = GGML_FP16_TO_FP32(x[i].d);

        for (int j = 0; j < qk; ++j) {
            const int q = (x[i].qs[j / 4] >> ((j % 4) * 2)) & 0x03;
            y[i*qk + j] = ((int)q - 1) * d;
        }
    }
}
