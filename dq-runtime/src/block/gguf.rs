//! The GGUF block types as declarations, in gguf-py 0.19.0's operation order
//! (SPEC §11). Each doc quotes the NumPy line the formula follows.

use super::BlockKernel;
use super::decl::{BlockDecl, BlockFormula, BlockNode as N, Field, ParamNode as P};
use super::plain::{Bf16, F16, F32};
use super::tables::KVALUES_MXFP4;

mod iq1_iq3;
mod q1_q8_1;
mod q2_0;
mod tables;
mod tq1_0;
pub use iq1_iq3::{IQ1_M, IQ1_S, IQ3_S, IQ3_XXS};
pub use q1_q8_1::{Q1_0, Q8_1};
pub use q2_0::Q2_0;
pub use tables::{IQ2_S, IQ2_XS, IQ2_XXS, IQ4_NL, IQ4_XS, NVFP4, Q8_K, TQ2_0};
pub use tq1_0::TQ1_0;

/// A nibble or crumb of the block's bytes (no table, not signed).
pub(super) const fn field(
    byte: usize,
    byte_stride: &'static [usize],
    shift_stride: &'static [u8],
    bits: u8,
    at: u8,
) -> Field {
    Field {
        byte,
        byte_stride,
        shift: 0,
        shift_stride,
        bits,
        signed: false,
        base3: false,
        table: None,
        at,
    }
}

/// `Param(0) * float(q)`.
pub(super) const D_TIMES_Q: BlockFormula = BlockFormula {
    nodes: &[N::Q, N::Float(0), N::Param(0), N::Mul(2, 1)],
};
/// `(Param(0) * float(q)) + Param(1)`.
const D_Q_PLUS_M: BlockFormula = BlockFormula {
    nodes: &[
        N::Q,
        N::Float(0),
        N::Param(0),
        N::Mul(2, 1),
        N::Param(1),
        N::Add(3, 4),
    ],
};
/// `Param(0) * float(q) - Param(1)`.
const D_Q_MINUS_M: BlockFormula = BlockFormula {
    nodes: &[
        N::Q,
        N::Float(0),
        N::Param(0),
        N::Mul(2, 1),
        N::Param(1),
        N::Sub(3, 4),
    ],
};

/// Q4_0: `d * (qs - 8)`; element `16 h + l` is nibble `h` of byte `2 + l`.
pub const Q4_0: BlockDecl = BlockDecl {
    name: "Q4_0",
    block_bytes: 18,
    block_elems: 32,
    digits: &[2, 16],
    fields: &[field(2, &[0, 1], &[4, 0], 4, 0)],
    offset: -8,
    group: &[0, 0],
    groups: 1,
    params: &[P::F16(0)],
    outputs: &[0],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// Q4_1: `(d * qs) + m`.
pub const Q4_1: BlockDecl = BlockDecl {
    name: "Q4_1",
    block_bytes: 20,
    fields: &[field(4, &[0, 1], &[4, 0], 4, 0)],
    offset: 0,
    params: &[P::F16(0), P::F16(2)],
    outputs: &[0, 1],
    formula: D_Q_PLUS_M,
    ..Q4_0
};

/// Q5_0: `d * ((ql | qh << 4) - 16)`; element `16 h + l`: nibble `h` of byte
/// `6 + l`, fifth bit `16 h + l` of the 32-bit `qh` at byte 2.
pub const Q5_0: BlockDecl = BlockDecl {
    name: "Q5_0",
    block_bytes: 22,
    block_elems: 32,
    digits: &[2, 16],
    fields: &[
        field(6, &[0, 1], &[4, 0], 4, 0),
        field(2, &[0, 0], &[16, 1], 1, 4),
    ],
    offset: -16,
    group: &[0, 0],
    groups: 1,
    params: &[P::F16(0)],
    outputs: &[0],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// Q5_1: `(d * (ql | qh << 4)) + m`.
pub const Q5_1: BlockDecl = BlockDecl {
    name: "Q5_1",
    block_bytes: 24,
    fields: &[
        field(8, &[0, 1], &[4, 0], 4, 0),
        field(4, &[0, 0], &[16, 1], 1, 4),
    ],
    offset: 0,
    params: &[P::F16(0), P::F16(2)],
    outputs: &[0, 1],
    formula: D_Q_PLUS_M,
    ..Q5_0
};

/// Q8_0: `x * d` (x the signed byte `2 + l`).
pub const Q8_0: BlockDecl = BlockDecl {
    name: "Q8_0",
    block_bytes: 34,
    block_elems: 32,
    digits: &[32],
    fields: &[Field {
        signed: true,
        ..field(2, &[1], &[0], 8, 0)
    }],
    offset: 0,
    group: &[0],
    groups: 1,
    params: &[P::F16(0)],
    outputs: &[0],
    formula: BlockFormula {
        nodes: &[N::Q, N::Float(0), N::Param(0), N::Mul(1, 2)],
    },
    grid: None,
    then: &[],
};

/// Q2_K: `dl * qs - ml`, `dl = d * (scales & 0xF)`, `ml = dmin * (scales >> 4)`;
/// element `128 a + 32 p + 16 h + l`: crumb `p` of byte `16 + 32 a + 16 h + l`,
/// group `8 a + 2 p + h`.
pub const Q2_K: BlockDecl = BlockDecl {
    name: "Q2_K",
    block_bytes: 84,
    block_elems: 256,
    digits: &[2, 4, 2, 16],
    fields: &[field(16, &[32, 0, 16, 1], &[0, 2, 0, 0], 2, 0)],
    offset: 0,
    group: &[8, 2, 1, 0],
    groups: 16,
    params: &[
        P::F16(80),
        P::F16(82),
        P::Byte {
            at: 0,
            stride: 1,
            shift: 0,
            bits: 4,
            signed: false,
        },
        P::Float(2),
        P::Mul(0, 3),
        P::Byte {
            at: 0,
            stride: 1,
            shift: 4,
            bits: 4,
            signed: false,
        },
        P::Float(5),
        P::Mul(1, 6),
    ],
    outputs: &[4, 7],
    formula: D_Q_MINUS_M,
    grid: None,
    then: &[],
};

/// Q3_K: `dl * q`, `dl = d * (scale - 32)`, `q = ql - ((hmask bit ^ 1) << 2)`,
/// assembled as `ql | hbit << 2` then `- 4` (the same integer); the high bit of
/// element `128 a + 32 p + 16 h + l` is bit `4 a + p` of byte `16 h + l`.
pub const Q3_K: BlockDecl = BlockDecl {
    name: "Q3_K",
    block_bytes: 110,
    fields: &[
        field(32, &[32, 0, 16, 1], &[0, 2, 0, 0], 2, 0),
        field(0, &[0, 0, 16, 1], &[4, 1, 0, 0], 1, 2),
    ],
    offset: -4,
    params: &[
        P::K3Scale(96),
        P::AddInt(0, -32),
        P::Float(1),
        P::F16(108),
        P::Mul(3, 2),
    ],
    outputs: &[4],
    formula: D_TIMES_Q,
    ..Q2_K
};

/// Q4_K: `(d * sc) * qs - (dmin * m)`; element `64 p + 32 h + l`: nibble `h` of
/// byte `16 + 32 p + l`, group `2 p + h`.
pub const Q4_K: BlockDecl = BlockDecl {
    name: "Q4_K",
    block_bytes: 144,
    block_elems: 256,
    digits: &[4, 2, 32],
    fields: &[field(16, &[32, 0, 1], &[0, 4, 0], 4, 0)],
    offset: 0,
    group: &[2, 1, 0],
    groups: 8,
    params: &[
        P::F16(0),
        P::F16(2),
        P::K4ScaleMin { at: 4, min: false },
        P::Float(2),
        P::Mul(0, 3),
        P::K4ScaleMin { at: 4, min: true },
        P::Float(5),
        P::Mul(1, 6),
    ],
    outputs: &[4, 7],
    formula: D_Q_MINUS_M,
    grid: None,
    then: &[],
};

/// Q5_K: Q4_K with a fifth bit: bit `2 p + h` of `qh` byte `16 + l`.
pub const Q5_K: BlockDecl = BlockDecl {
    name: "Q5_K",
    block_bytes: 176,
    fields: &[
        field(48, &[32, 0, 1], &[0, 4, 0], 4, 0),
        field(16, &[0, 0, 1], &[2, 1, 0], 1, 4),
    ],
    ..Q4_K
};

/// Q6_K: `(d * scale) * ((ql | qh << 4) - 32)`; element
/// `128 a + 64 s + 32 t + 16 h + l`: nibble `s` of `ql` byte `64 a + 32 t + 16 h + l`,
/// crumb `2 s + t` of `qh` byte `128 + 32 a + 16 h + l`, group `8 a + 4 s + 2 t + h`.
pub const Q6_K: BlockDecl = BlockDecl {
    name: "Q6_K",
    block_bytes: 210,
    block_elems: 256,
    digits: &[2, 2, 2, 2, 16],
    fields: &[
        field(0, &[64, 0, 32, 16, 1], &[0, 4, 0, 0, 0], 4, 0),
        field(128, &[32, 0, 0, 16, 1], &[0, 4, 2, 0, 0], 2, 4),
    ],
    offset: -32,
    group: &[8, 4, 2, 1, 0],
    groups: 16,
    params: &[
        P::F16(208),
        P::Byte {
            at: 192,
            stride: 1,
            shift: 0,
            bits: 8,
            signed: true,
        },
        P::Float(1),
        P::Mul(0, 2),
    ],
    outputs: &[3],
    formula: D_TIMES_Q,
    grid: None,
    then: &[],
};

/// MXFP4: `d * kvalues[nibble]`, `d = e8m0_to_fp32_half(e)`.
pub const MXFP4: BlockDecl = BlockDecl {
    name: "MXFP4",
    block_bytes: 17,
    fields: &[Field {
        table: Some(&KVALUES_MXFP4),
        ..field(1, &[0, 1], &[4, 0], 4, 0)
    }],
    offset: 0,
    params: &[P::E8m0Half(0)],
    ..Q4_0
};

/// Every declared block type.
pub const ALL: [&BlockDecl; 27] = [
    &Q4_0, &Q4_1, &Q5_0, &Q5_1, &Q8_0, &Q2_K, &Q3_K, &Q4_K, &Q5_K, &Q6_K, &MXFP4, &IQ4_NL, &IQ4_XS,
    &TQ2_0, &Q8_K, &NVFP4, &IQ2_XXS, &IQ2_XS, &IQ2_S, &IQ3_XXS, &IQ3_S, &IQ1_S, &IQ1_M, &Q8_1,
    &Q1_0, &TQ1_0, &Q2_0,
];

const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        if let Err(e) = ALL[i].check() {
            panic!("{}", e);
        }
        i += 1;
    }
};

macro_rules! kernels {
    ($($ty:ident),*) => {
        /// The block kernels of the declared types, by GGUF name.
        mod types {
            $(
                #[allow(non_camel_case_types)]
                pub struct $ty;
                impl crate::block::Block for $ty {
                    const DECL: crate::block::BlockDecl = super::$ty;
                }
            )*
        }
        const KERNELS: &[BlockKernel] = &[
            BlockKernel::of::<F32>("F32", 4, 1, None),
            BlockKernel::of::<F16>("F16", 2, 1, None),
            BlockKernel::of::<Bf16>("BF16", 2, 1, None),
            $(BlockKernel::declared::<types::$ty>(),)*
        ];
    };
}

kernels!(
    Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4, IQ4_NL, IQ4_XS, TQ2_0, Q8_K,
    NVFP4, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, Q8_1, Q1_0, TQ1_0, Q2_0
);

/// The kernel of GGUF type `name` (its GGUF spelling: `Q4_K`, `BF16`, ...), for
/// the 30 types dq decodes.
pub fn kernel(name: &str) -> Option<&'static BlockKernel> {
    KERNELS.iter().find(|k| k.name == name)
}

/// Every GGUF kernel: F32, F16, BF16, then the declared types.
pub fn kernels() -> &'static [BlockKernel] {
    KERNELS
}
