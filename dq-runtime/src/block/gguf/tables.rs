//! The GGUF types that index a [`Table`](crate::block::Table) or a codebook
//! [`Grid`] or need the newer parameter loads (IQ4_NL, IQ4_XS, NVFP4, IQ2_XXS,
//! IQ2_XS, IQ2_S), the
//! ternary TQ2_0 and Q8_K, as
//! declarations. Operation order: gguf-py 0.19.0 `quants.py` where it decodes the
//! type (each doc quotes its NumPy lines), else ggml's `dequantize_row_*` (Q8_K).

use super::{D_TIMES_Q, Q4_0, field};
use crate::block::decl::{BlockDecl, Field, Grid, ParamNode as P};
use crate::block::tables::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL, KVALUES_MXFP4,
};

/// IQ4_NL: `d * kvalues[qs]`; element `16 h + l` is nibble `h` of byte `2 + l`.
pub const IQ4_NL: BlockDecl = BlockDecl {
    name: "IQ4_NL",
    fields: &[Field {
        table: Some(&KVALUES_IQ4NL),
        ..field(2, &[0, 1], &[4, 0], 4, 0)
    }],
    offset: 0,
    ..Q4_0
};

/// IQ4_XS: `dl * kvalues[qs]`, `dl = d * (scales_l | scales_h << 4) - 32)`;
/// element `32 g + 16 h + l` is nibble `h` of byte `8 + 16 g + l`; group `g`'s
/// scale is nibble `g` of the bytes at 4 and crumb `g` of the u16 at 2.
pub const IQ4_XS: BlockDecl = BlockDecl {
    name: "IQ4_XS",
    block_bytes: 136,
    block_elems: 256,
    digits: &[8, 2, 16],
    fields: &[Field {
        table: Some(&KVALUES_IQ4NL),
        ..field(8, &[16, 0, 1], &[0, 4, 0], 4, 0)
    }],
    offset: 0,
    group: &[1, 0, 0],
    groups: 8,
    params: &[
        P::F16(0),
        P::GroupBits {
            at: 4,
            shift: 4,
            bits: 4,
        },
        P::GroupBits {
            at: 2,
            shift: 2,
            bits: 2,
        },
        P::OrShl(1, 2, 4),
        P::AddInt(3, -32),
        P::Float(4),
        P::Mul(0, 5),
    ],
    outputs: &[6],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// TQ2_0: `d * ((qs & 3) - 1)`; element `128 a + 32 p + l` is crumb `p` of byte
/// `32 a + l`; `d` the f16 at 64.
pub const TQ2_0: BlockDecl = BlockDecl {
    name: "TQ2_0",
    block_bytes: 66,
    block_elems: 256,
    digits: &[2, 4, 32],
    fields: &[field(0, &[32, 0, 1], &[0, 2, 0], 2, 0)],
    offset: -1,
    group: &[0, 0, 0],
    groups: 1,
    params: &[P::F16(64)],
    outputs: &[0],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// Q8_K (ggml `dequantize_row_q8_K`: `y = x.d * x.qs[j]`, `d` an f32): 256 signed
/// bytes from byte 4 (the 16 `bsums` after them are not read).
pub const Q8_K: BlockDecl = BlockDecl {
    name: "Q8_K",
    block_bytes: 292,
    block_elems: 256,
    digits: &[8, 32],
    fields: &[Field {
        signed: true,
        ..field(4, &[32, 1], &[0, 0], 8, 0)
    }],
    offset: 0,
    group: &[0, 0],
    groups: 1,
    params: &[P::F32(0)],
    outputs: &[0],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// NVFP4: `d * kvalues[q]`, `d = ue4m3_to_fp32(d_bytes[s])` (halved); element
/// `16 s + 8 h + l` is nibble `h` of byte `4 + 8 s + l`, group `s`.
pub const NVFP4: BlockDecl = BlockDecl {
    name: "NVFP4",
    block_bytes: 36,
    block_elems: 64,
    digits: &[4, 2, 8],
    fields: &[Field {
        table: Some(&KVALUES_MXFP4),
        ..field(4, &[8, 0, 1], &[0, 4, 0], 4, 0)
    }],
    offset: 0,
    group: &[1, 0, 0],
    groups: 4,
    params: &[P::Ue4m3Half(0)],
    outputs: &[0],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// A run-constant field (see [`Grid`]): `bits` bits from bit `shift` of byte
/// `byte`, plus the strides of the outer digits.
pub(super) const fn run_field(
    byte: usize,
    byte_stride: &'static [usize],
    shift_stride: &'static [u8],
    bits: u8,
) -> Field {
    Field {
        bits,
        ..field(byte, byte_stride, shift_stride, 1, 0)
    }
}

/// IQ2_XXS: `db * grid * signs`, `db = d * (0.5 + (aux1 >> 28)) * 0.25`; the
/// 32 elements of group `g` (`aux0`, `aux1` the two u32 at `2 + 8 g`): element
/// `8 l + j` is lane `j` of `iq2xxs_grid[byte l of aux0]`, negated where bit `j`
/// of `ksigns_iq2xs[(aux1 >> 7 l) & 127]` is set. The sign is folded into the
/// integer: `(db * grid) * -1` and `db * -grid` are the same bits (a product's
/// sign is the operands' sign bits xor'ed, its magnitude rounds the same; a NaN
/// `db` is kept either way).
pub const IQ2_XXS: BlockDecl = BlockDecl {
    name: "IQ2_XXS",
    block_bytes: 66,
    block_elems: 256,
    digits: &[8, 4, 8],
    fields: &[],
    offset: 0,
    group: &[1, 0, 0],
    groups: 8,
    params: &iq2_db(P::Byte {
        at: 9,
        stride: 8,
        shift: 4,
        bits: 4,
        signed: false,
    }),
    outputs: &[7],
    formula: D_TIMES_Q,
    grid: Some(Grid {
        table: &IQ2XXS_GRID,
        index: &[&[run_field(2, &[8, 1, 0], &[0, 0, 0], 8)]],
        signs: &[run_field(6, &[8, 0, 0], &[0, 7, 0], 7)],
        sign_table: Some(&KSIGNS_IQ2XS),
        at: 0,
    }),
    then: &[],
};

/// `db = d * (0.5 + s) * 0.25` for the scale `s` of node 1 (IQ2's `db`).
pub(super) const fn iq2_db(s: P) -> [P; 8] {
    [
        P::F16(0),
        s,
        P::Float(1),
        P::Const(0x3F00_0000),
        P::Add(3, 2),
        P::Mul(0, 4),
        P::Const(0x3E80_0000),
        P::Mul(5, 6),
    ]
}

/// IQ2_XS: `db * grid * signs` as IQ2_XXS, `db = d * (0.5 + scale) * 0.25` per 16
/// elements (nibble `h % 2` of byte `66 + h / 2`); element `16 h + 8 t + j` is lane
/// `j` of `iq2xs_grid[q & 511]`, `q` the u16 at `2 + 4 h + 2 t`, negated by bit `j`
/// of `ksigns_iq2xs[q >> 9]`.
pub const IQ2_XS: BlockDecl = BlockDecl {
    name: "IQ2_XS",
    block_bytes: 74,
    block_elems: 256,
    digits: &[16, 2, 8],
    fields: &[],
    offset: 0,
    group: &[1, 0, 0],
    groups: 16,
    params: &iq2_db(P::GroupBits {
        at: 66,
        shift: 4,
        bits: 4,
    }),
    outputs: &[7],
    formula: D_TIMES_Q,
    grid: Some(Grid {
        table: &IQ2XS_GRID,
        index: &[&[run_field(2, &[4, 2, 0], &[0, 0, 0], 9)]],
        signs: &[Field {
            shift: 1,
            ..run_field(3, &[4, 2, 0], &[0, 0, 0], 7)
        }],
        sign_table: Some(&KSIGNS_IQ2XS),
        at: 0,
    }),
    then: &[],
};

/// IQ2_S: `db * grid * signs`, `db` as IQ2_XS's from the nibbles at 74; element
/// `16 (2 a + b) + 8 t + j` (run `r = 4 a + 2 b + t`) is lane `j` of
/// `iq2s_grid[qs[r] | ((qh[a] >> (4 b + 2 t)) & 3) << 8]`, negated by bit `j` of
/// `signs[r]` (`qs` at 2, `signs` at 34, `qh` at 66).
pub const IQ2_S: BlockDecl = BlockDecl {
    name: "IQ2_S",
    block_bytes: 82,
    block_elems: 256,
    digits: &[8, 2, 2, 8],
    fields: &[],
    offset: 0,
    group: &[2, 1, 0, 0],
    groups: 16,
    params: &iq2_db(P::GroupBits {
        at: 74,
        shift: 4,
        bits: 4,
    }),
    outputs: &[7],
    formula: D_TIMES_Q,
    grid: Some(Grid {
        table: &IQ2S_GRID,
        index: &[&[
            run_field(2, &[4, 2, 1, 0], &[0, 0, 0, 0], 8),
            Field {
                at: 8,
                ..run_field(66, &[1, 0, 0, 0], &[0, 4, 2, 0], 2)
            },
        ]],
        signs: &[run_field(34, &[4, 2, 1, 0], &[0, 0, 0, 0], 8)],
        sign_table: None,
        at: 0,
    }),
    then: &[],
};
