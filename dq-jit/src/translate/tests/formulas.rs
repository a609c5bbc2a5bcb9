//! Formulas other than the standard one: every node kind, scales passed through
//! (signalling NaNs), NaN literals, min/max ties of signed zeros, and integers
//! wider than i64.

use dq_runtime::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, FormulaIr, Node, TensorDesc,
};

use super::{Case, DYN_DST, DYN_SRC, Rng, check, jits_for};
use crate::Jit;

/// `float(q - 2z) * s`: with s64 zero points, integers up to 2^65, converted by
/// the 128-bit path (a shift keeping a sticky bit, then one rounding).
static Q_MINUS_2Z: [Node; 7] = [
    Node::Q,
    Node::Z,
    Node::IntSub(0, 1),
    Node::IntSub(2, 1),
    Node::Float(3),
    Node::S,
    Node::Mul(4, 5),
];
static Q_MINUS_2Z_IR: FormulaIr = FormulaIr {
    name: "q_minus_2z",
    nodes: &Q_MINUS_2Z,
};

/// Integers beyond i64 round once to f32: `q - 2z` for zero points at the ends
/// of i64, small ones (vector code), and `i64::MIN + 3 * 2^38 - 1`, where `q - 2z`
/// is `2^64 - 3 * 2^39 + q + 2`: shifted right by 36 an exact tie for f32, which
/// only the sticky bit of `q + 2` breaks (upwards, as the exact value does).
#[test]
fn wide_integers_round_once() {
    let mut r = Rng::new(7);
    let jit = Jit::new(&Q_MINUS_2Z_IR, 4);
    let tie = i64::MIN + 3 * (1 << 38) - 1;
    let zps = vec![tie, i64::MIN, i64::MAX, 1 << 22, -5, tie + 1];
    for src in [DType::U8, DType::S8] {
        let op = Dequantize::new(vec![1.0, 0.5, -3.0, 2.0, 1e-30, 1.0])
            .per_channel(1)
            .zps(zps.clone());
        let c = Case {
            op: op.into(),
            src: TensorDesc::new(src, &[40, 6]),
            scales: None,
            zps: None,
            dst: TensorDesc::new(DType::F32, &[40, 6]),
        };
        check(&jit, &c, &mut r, 2);
        let op = Dequantize::new(vec![1.0]).zps(vec![tie]);
        let c = Case {
            op: op.into(),
            src: TensorDesc::new(src, &[300]),
            scales: None,
            zps: None,
            dst: TensorDesc::new(DType::F32, &[300]),
        };
        check(&jit, &c, &mut r, 2);
    }
}

/// A clamp-like formula using every node kind: an integer `z - q` (no biased
/// floats), literals, min/max with their NaN and signed-zero rules, neg, abs.
static CLAMP: [Node; 13] = [
    Node::Q,
    Node::Z,
    Node::IntSub(1, 0),          // 2: z - q
    Node::Float(2),              // 3
    Node::S,                     // 4
    Node::Mul(3, 4),             // 5
    Node::Lit(6.0f64.to_bits()), // 6
    Node::Min(5, 6),             // 7
    Node::Neg(6),                // 8
    Node::Max(8, 7),             // 9
    Node::Abs(9),                // 10
    Node::Sub(10, 4),            // 11
    Node::Add(11, 9),            // 12
];
/// The scale passed through: results may be signalling NaNs (stores quiet them).
static ONLY_S: [Node; 1] = [Node::S];
/// A NaN literal with low payload bits added: bf16 results keep the NaN rule.
static ADD_NAN: [Node; 3] = [Node::S, Node::Lit(0x7ff8_1fff_e000_0000), Node::Add(1, 0)];
/// `max(-y, y)` and `min(y, -y)` for `y = float(q - z) * s`: ties of +0 and -0
/// (when `q == z` or the scale is a zero), and NaNs of either sign.
static MAX_NEG: [Node; 8] = [
    Node::Q,
    Node::Z,
    Node::IntSub(0, 1),
    Node::Float(2),
    Node::S,
    Node::Mul(3, 4), // 5: y
    Node::Neg(5),    // 6: -y
    Node::Max(6, 5),
];
static MIN_NEG: [Node; 8] = [
    Node::Q,
    Node::Z,
    Node::IntSub(0, 1),
    Node::Float(2),
    Node::S,
    Node::Mul(3, 4),
    Node::Neg(5),
    Node::Min(5, 6),
];
static FORMULAS: [FormulaIr; 5] = [
    FormulaIr {
        name: "clamp",
        nodes: &CLAMP,
    },
    FormulaIr {
        name: "only_s",
        nodes: &ONLY_S,
    },
    FormulaIr {
        name: "add_nan",
        nodes: &ADD_NAN,
    },
    FormulaIr {
        name: "max_neg",
        nodes: &MAX_NEG,
    },
    FormulaIr {
        name: "min_neg",
        nodes: &MIN_NEG,
    },
];

/// Custom formulas on every dynamic src and dst (vector, table and scalar code),
/// and on the axes op with f64 work.
#[test]
fn custom_formulas() {
    let mut r = Rng::new(5);
    for formula in &FORMULAS {
        for src in DYN_SRC {
            for dst in DYN_DST {
                let jits = jits_for(dst, formula);
                for zps in [None, Some(DType::S32), Some(DType::U4)] {
                    let dt = (src, zps, dst);
                    let cases = [
                        Case::per_tensor(dt, &[3, 70]),
                        Case::dynamic(DynamicDequantize::per_channel(1), dt, &[3, 40], &[40]),
                        Case::per_group(dt, &[3, 97], &[1, 32]),
                        Case::per_group(dt, &[6, 35], &[2, 3]).transposed(true, true),
                    ];
                    for c in &cases {
                        for jit in &jits {
                            check(jit, c, &mut r, 1);
                        }
                    }
                }
            }
        }
        let jit = Jit::new(formula, 4);
        for dst in [DType::F64, DType::F32] {
            let c = Case {
                op: AxesDequantize::new(vec![1]).into(),
                src: TensorDesc::new(DType::S32, &[4, 50]),
                scales: Some(TensorDesc::new(dst, &[50])),
                zps: Some(TensorDesc::new(DType::S32, &[50])),
                dst: TensorDesc::new(dst, &[4, 50]),
            };
            check(&jit, &c, &mut r, 2);
        }
    }
}
