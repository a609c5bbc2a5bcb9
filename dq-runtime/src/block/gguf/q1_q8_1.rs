//! Q8_1 and Q1_0, types gguf-py 0.19.0 does not decode, as declarations in the
//! operation order of their ggml source (each doc quotes it).

use super::{Q8_0, field};
use crate::block::decl::{BlockDecl, BlockFormula, BlockNode as N, Field, ParamNode as P};

/// Q8_1 (ggml-common.h `block_q8_1`: f16 `d`, f16 `s`, 32 signed bytes): ggml has
/// no `dequantize_row_q8_1` (its `s = d * sum(qs)` serves dot products only); the
/// values are Q8_0's, `x * d` (`dequantize_row_q8_0`: `y = x[i].qs[j]*d`), from byte
/// 4.
pub const Q8_1: BlockDecl = BlockDecl {
    name: "Q8_1",
    block_bytes: 36,
    fields: &[Field {
        signed: true,
        ..field(4, &[1], &[0], 8, 0)
    }],
    ..Q8_0
};

/// Q1_0 (ggml `dequantize_row_q1_0`: `y = bit ? d : neg_d`, `neg_d = -d`, bit `j % 8`
/// of byte `2 + j / 8`; `d` by `GGML_FP16_TO_FP32`, which quiets a signalling NaN).
/// Declared as `flip_sign(quiet(d), float(2 bit - 1))`: the sign flip is ggml's
/// negation (bits, a NaN's sign too).
pub const Q1_0: BlockDecl = BlockDecl {
    name: "Q1_0",
    block_bytes: 18,
    block_elems: 128,
    digits: &[16, 8],
    fields: &[field(2, &[1, 0], &[0, 1], 1, 1)],
    offset: -1,
    group: &[0, 0],
    groups: 1,
    params: &[P::F16(0), P::Quiet(0)],
    outputs: &[1],
    formula: BlockFormula {
        nodes: &[N::Q, N::Float(0), N::Param(0), N::FlipSign(2, 1)],
    },
    grid: None,
    then: &[],
};
