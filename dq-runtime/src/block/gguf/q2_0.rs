//! Q2_0 (ggml type 42, added to ggml-org/llama.cpp by pull request 24448, merged
//! 2026-07; gguf-py 0.19.0 does not know it) as a declaration in the operation
//! order of ggml's `dequantize_row_q2_0`.

use super::field;
use crate::block::decl::{BlockDecl, ParamNode as P};

/// Q2_0 (ggml-common.h `block_q2_0`: f16 `d`, then `qs[QK2_0 / 4]`, `QK2_0 = 64`;
/// 18 bytes): `y[j] = ((int)q - 1) * d` with `q = (qs[j / 4] >> ((j % 4) * 2)) & 3`
/// and `d = GGML_FP16_TO_FP32(x[i].d)` — the integer `q - 1` converted to f32,
/// times `d` (one f32 product: a NaN `d` comes out quieted, `0 * inf` is NaN).
///
/// Element `16 a + l` is crumb `l` of the 32 bits at byte `2 + 4 a` (crumb `l % 4`
/// of byte `2 + 4 a + l / 4`, the same bits): runs of 16 from a 32-bit window.
pub const Q2_0: BlockDecl = BlockDecl {
    name: "Q2_0",
    block_bytes: 18,
    block_elems: 64,
    digits: &[4, 16],
    fields: &[field(2, &[4, 0], &[0, 2], 2, 0)],
    offset: -1,
    group: &[0, 0],
    groups: 1,
    params: &[P::F16(0)],
    outputs: &[0],
    formula: super::D_TIMES_Q,
    grid: None,
    then: &[],
};
