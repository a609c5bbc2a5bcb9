//! The IQ3 and IQ1 GGUF types as grid declarations, in gguf-py 0.19.0's operation
//! order (each doc quotes its NumPy lines).
//!
//! IQ3: a run of 8 elements is two codebook rows of 4 lanes. IQ1: the grid's lanes
//! are -1, 0 or 1 and NumPy adds a delta of ±0.125 before the scale, `dl * (grid +
//! delta)`; the declarations assemble the integer `q = 8 * grid ± 1` (grid lanes at
//! bit 3, the delta's sign a signed one-bit field at bit 1, offset 1) and compute
//! `dl * (q * 0.125)`. The same bits: `grid + delta` is `q / 8` exactly in f32
//! (`|q| <= 9`), `q * 0.125` is exact, and the one rounding, the product with `dl`,
//! has the same operands in the same order.

use super::field;
use super::tables::{iq2_db, run_field};
use crate::block::decl::{BlockDecl, BlockFormula, BlockNode as N, Field, Grid, ParamNode as P};
use crate::block::tables::{IQ1S_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};

/// `Param(0) * float(q)`.
const D_TIMES_Q: BlockFormula = super::D_TIMES_Q;

/// IQ3_XXS: `db * grid * signs`, `db = d * (0.5 + (scales >> 28)) * 0.5`; group `g`
/// of 32 elements has the u32 `aux` at `66 + 4 g`; element `32 g + 8 l + 4 h + j` is
/// lane `j` of `iq3xxs_grid[qs[8 g + 2 l + h]]` (`qs` at 2), negated where bit
/// `4 h + j` of `ksigns_iq2xs[(aux >> 7 l) & 127]` is set:
/// ```text
/// db = d * (np.float32(0.5) + (scales >> 28).astype(np.float32)) * np.float32(0.5)
/// signs = ksigns[(scales >> [0, 7, 14, 21]) & 0x7F] >> [0..8] & 1 -> +-1
/// grid = np.take_along_axis(cls.grid, qs.reshape((n_blocks, -1, 1, 1)), axis=-2)
/// return (db * grid * signs).reshape((n_blocks, -1))
/// ```
/// The sign is folded into the integer as for IQ2_XXS (the same bits).
pub const IQ3_XXS: BlockDecl = BlockDecl {
    name: "IQ3_XXS",
    block_bytes: 98,
    block_elems: 256,
    digits: &[8, 4, 8],
    fields: &[],
    offset: 0,
    group: &[1, 0, 0],
    groups: 8,
    params: &iq3_db(),
    outputs: &[7],
    formula: D_TIMES_Q,
    grid: Some(Grid {
        table: &IQ3XXS_GRID,
        index: &[
            &[run_field(2, &[8, 2, 0], &[0, 0, 0], 8)],
            &[run_field(3, &[8, 2, 0], &[0, 0, 0], 8)],
        ],
        signs: &[run_field(66, &[4, 0, 0], &[0, 7, 0], 7)],
        sign_table: Some(&KSIGNS_IQ2XS),
        at: 0,
    }),
    then: &[],
};

/// IQ3_XXS's `db`: IQ2's with a last factor of 0.5, the scale the top nibble of
/// `aux` (byte `69 + 4 g`).
const fn iq3_db() -> [P; 8] {
    let mut p = iq2_db(P::Byte {
        at: 69,
        stride: 4,
        shift: 4,
        bits: 4,
        signed: false,
    });
    p[6] = P::Const(0x3F00_0000);
    p
}

/// `Param(0) * (2 s + 1)` nodes: `d` (node 0) times the odd integer of the 3- or
/// 4-bit scale `s` (node 1), `d * (1 + 2 * s)` with NumPy's integer `1 + 2 * s`
/// (exact in f32).
const fn d_odd(s: P) -> [P; 7] {
    [
        P::F16(0),
        s,
        P::Float(1),
        P::Add(2, 2),
        P::Const(0x3F80_0000),
        P::Add(3, 4),
        P::Mul(0, 5),
    ]
}

/// IQ3_S: `db * grid * signs`, `db = d * (1 + 2 * scale)` per 32 elements (nibble
/// `g % 2` of byte `106 + g / 2`); element `32 g + 8 l + 4 h + j` (row
/// `k = 8 g + 2 l + h`) is lane `j` of `iq3s_grid[qs[k] | (bit k % 8 of qh[g]) << 8]`
/// (`qs` at 2, `qh` at 66), negated by bit `4 h + j` of `signs[4 g + l]` (at 74):
/// ```text
/// db = d * (1 + 2 * scales)
/// signs = signs >> [0..8] & 1 -> +-1
/// qs = qs.astype(np.uint16) | ((qh >> [0..8]) & 0x01).astype(np.uint16) << 8
/// return (db * grid[qs] * signs).reshape((n_blocks, -1))
/// ```
pub const IQ3_S: BlockDecl = BlockDecl {
    name: "IQ3_S",
    block_bytes: 110,
    block_elems: 256,
    digits: &[8, 4, 8],
    fields: &[],
    offset: 0,
    group: &[1, 0, 0],
    groups: 8,
    params: &d_odd(P::GroupBits {
        at: 106,
        shift: 4,
        bits: 4,
    }),
    outputs: &[6],
    formula: D_TIMES_Q,
    grid: Some(Grid {
        table: &IQ3S_GRID,
        index: &[
            &[
                run_field(2, &[8, 2, 0], &[0, 0, 0], 8),
                Field {
                    at: 8,
                    ..run_field(66, &[1, 0, 0], &[0, 2, 0], 1)
                },
            ],
            &[
                run_field(3, &[8, 2, 0], &[0, 0, 0], 8),
                Field {
                    at: 8,
                    shift: 1,
                    ..run_field(66, &[1, 0, 0], &[0, 2, 0], 1)
                },
            ],
        ],
        signs: &[run_field(74, &[4, 1, 0], &[0, 0, 0], 8)],
        sign_table: None,
        at: 0,
    }),
    then: &[],
};

/// `dl * (q * 0.125)` (see the module doc): `Param(0)` is `dl`, `Param(1)` 0.125.
const IQ1_FORMULA: BlockFormula = BlockFormula {
    nodes: &[
        N::Q,
        N::Float(0),
        N::Param(1),
        N::Mul(1, 2),
        N::Param(0),
        N::Mul(4, 3),
    ],
};

/// IQ1_S: `dl * (grid + delta)`, `dl = d * (2 * ((qh >> 12) & 7) + 1)`, delta
/// -0.125 where bit 15 of `qh` is set, else 0.125; group `g` of 32 elements has the
/// u16 `qh[g]` at `34 + 2 g`; element `32 g + 8 l + j` is lane `j` of
/// `iq1s_grid[qs[4 g + l] | ((qh[g] >> 3 l) & 7) << 8]` (`qs` at 2):
/// ```text
/// dl = d * (2 * ((qh >> 12) & 7) + 1)
/// delta = np.where((qh & np.uint16(0x8000)) == 0, cls.delta, -cls.delta)
/// qs = qs.astype(np.uint16) | ((qh >> [0, 3, 6, 9]) & 7) << 8
/// return (dl * (grid[qs] + delta)).reshape((n_blocks, -1))
/// ```
pub const IQ1_S: BlockDecl = BlockDecl {
    name: "IQ1_S",
    block_bytes: 50,
    block_elems: 256,
    digits: &[8, 4, 8],
    fields: &[Field {
        shift: 7,
        signed: true,
        ..field(35, &[2, 0, 0], &[0, 0, 0], 1, 1)
    }],
    offset: 1,
    group: &[1, 0, 0],
    groups: 8,
    params: &iq1_params(d_odd(P::Byte {
        at: 35,
        stride: 2,
        shift: 4,
        bits: 3,
        signed: false,
    })),
    outputs: &[6, 7],
    formula: IQ1_FORMULA,
    grid: Some(Grid {
        table: &IQ1S_GRID,
        index: &[&[
            run_field(2, &[4, 1, 0], &[0, 0, 0], 8),
            Field {
                at: 8,
                ..run_field(34, &[2, 0, 0], &[0, 3, 0], 3)
            },
        ]],
        signs: &[],
        sign_table: None,
        at: 3,
    }),
    then: &[],
};

/// `dl`'s nodes, then the constant 0.125.
const fn iq1_params(dl: [P; 7]) -> [P; 8] {
    [
        dl[0],
        dl[1],
        dl[2],
        dl[3],
        dl[4],
        dl[5],
        dl[6],
        P::Const(0x3E00_0000),
    ]
}

/// IQ1_M: `dl * (grid + delta)` as IQ1_S, per 16 elements `dl = d * (2 * s + 1)`,
/// `s` the 3 bits `3 (k % 4)` of the u16 `scales[k / 4]` at 48, `d` the f16 of the
/// four top nibbles of `scales`; element `16 k + 8 h + j` is lane `j` of
/// `iq1s_grid[qs[2 k + h] | ((qh[k] >> 4 h) & 7) << 8]` (`qs` at 0, `qh` at 32),
/// delta negative where bit `4 h + 3` of `qh[k]` is set:
/// ```text
/// d = (scales.reshape((n_blocks, 4)) & np.uint16(0xF000)) >> np.array([12, 8, 4, 0])
/// d = (d[..., 0] | d[..., 1] | d[..., 2] | d[..., 3]).view(np.float16).astype(np.float32)
/// scales = (scales.reshape(n_blocks, -1, 1) >> [0, 3, 6, 9]) & 0x07
/// dl = d * (2 * scales + 1)
/// qh = qh.reshape((n_blocks, -1, 1)) >> [0, 4]
/// qs = qs.astype(np.uint16) | ((qh & 0x07).astype(np.uint16) << 8)
/// delta = np.where(qh & 0x08 == 0, cls.delta, -cls.delta)
/// return (dl * (grid[qs] + delta)).reshape((n_blocks, -1))
/// ```
pub const IQ1_M: BlockDecl = BlockDecl {
    name: "IQ1_M",
    block_bytes: 56,
    block_elems: 256,
    digits: &[16, 2, 8],
    fields: &[Field {
        shift: 3,
        signed: true,
        ..field(32, &[1, 0, 0], &[0, 4, 0], 1, 1)
    }],
    offset: 1,
    group: &[1, 0, 0],
    groups: 16,
    params: &[
        top_nibble(49),
        top_nibble(51),
        P::OrShl(0, 1, 4),
        top_nibble(53),
        P::OrShl(2, 3, 8),
        top_nibble(55),
        P::OrShl(4, 5, 12),
        P::F16Of(6),
        P::Bits {
            at: 48,
            per: 4,
            outer: 16,
            inner: 3,
            bits: 3,
        },
        P::Float(8),
        P::Add(9, 9),
        P::Const(0x3F80_0000),
        P::Add(10, 11),
        P::Mul(7, 12),
        P::Const(0x3E00_0000),
    ],
    outputs: &[13, 14],
    formula: IQ1_FORMULA,
    grid: Some(Grid {
        table: &IQ1S_GRID,
        index: &[&[
            run_field(0, &[2, 1, 0], &[0, 0, 0], 8),
            Field {
                at: 8,
                ..run_field(32, &[1, 0, 0], &[0, 4, 0], 3)
            },
        ]],
        signs: &[],
        sign_table: None,
        at: 3,
    }),
    then: &[],
};

/// The top nibble of byte `at` (the same for every group).
const fn top_nibble(at: usize) -> P {
    P::Byte {
        at,
        stride: 0,
        shift: 4,
        bits: 4,
        signed: false,
    }
}
