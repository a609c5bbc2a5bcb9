//! The formula: its nodes in order, scalar (F32 or F64 work float, I64 or I128
//! integers) or on F32X4/I32X4 lanes, integer nodes tracked symbolically so that
//! biased operands need no integer code; exact integer-to-float conversion (i128
//! included) and min/max with the reference's NaN and signed-zero rules.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use dq_runtime::Node;

use super::{Translator, lanes};
use crate::lane_math::LaneMath;

/// The integer operands of [`Translator::eval`].
#[derive(Clone, Copy)]
pub(super) enum Ints {
    /// `q` and `z` as integers (the scalar int type, or I32X4).
    Plain { q: Value, z: Value },
    /// F32X4 floats `fq = float(q) + k` and `fz = float(z) + k` for a constant splat
    /// `k` (`None`: 0), every value an integer below 2^24, so `float(q) = fq - k`
    /// and `float(q - z) = fq - fz` exactly.
    Biased {
        fq: Value,
        fz: Value,
        k: Option<Value>,
    },
    /// A float src's decoded values (F32X4; SPEC §10): `q` is a float operand.
    Float(Value),
}

/// What an integer node of the formula is, as far as the translator knows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Int {
    /// Known zero (the zero point when there is none).
    Zero,
    Q,
    Z,
    /// `q - z`.
    QmZ,
    /// Any other value, computed.
    V(Value),
}

impl Int {
    /// Integer node `node` (`IntSub` with operands `a`, `b`) symbolically, or `None`
    /// when it needs a computed subtraction.
    fn of(node: Node, zps: bool, a: Int, b: Int) -> Option<Int> {
        match node {
            Node::Q => Some(Int::Q),
            Node::Z if zps => Some(Int::Z),
            Node::Z => Some(Int::Zero),
            _ => match (a, b) {
                (x, Int::Zero) => Some(x),
                (Int::Q, Int::Z) => Some(Int::QmZ),
                _ => None,
            },
        }
    }

    /// True when every integer the formula converts to float is `q`, `q - z` or
    /// zero, so [`Ints::Biased`] operands serve.
    pub(super) fn biased_ok(nodes: &[Node], zps: bool) -> bool {
        let mut v: Vec<Option<Int>> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let at = |i: u16| v.get(i as usize).copied().flatten();
            let x = match *node {
                Node::Q | Node::Z => Int::of(*node, zps, Int::Zero, Int::Zero),
                Node::IntSub(a, b) => match (at(a), at(b)) {
                    (Some(a), Some(b)) => match Int::of(*node, zps, a, b) {
                        Some(x) => Some(x),
                        None => return false,
                    },
                    _ => return false,
                },
                Node::Float(a) if !matches!(at(a), Some(Int::Q | Int::QmZ | Int::Zero)) => {
                    return false;
                }
                _ => None,
            };
            v.push(x);
        }
        true
    }
}

/// A formula node's value in [`Translator::eval`].
#[derive(Clone, Copy)]
enum Val {
    I(Int),
    F(Value),
}

impl<'a, 'f> Translator<'a, 'f> {
    /// Evaluates the formula for integer operands `ints` and scale `s` (work float),
    /// scalar or I32X4/F32X4 when `vector`.
    pub(super) fn eval(&mut self, ints: Ints, s: Value, vector: bool) -> Value {
        let wty = if vector { types::F32X4 } else { self.work_ty() };
        let zps = self.spec.zps.is_some();
        let nodes = self.spec.formula.nodes;
        let mut v: Vec<Val> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let int = |i: u16| match v[i as usize] {
                Val::I(x) => x,
                Val::F(_) => unreachable!("analysed: integer operand"),
            };
            let f = |i: u16| match v[i as usize] {
                Val::F(x) => x,
                Val::I(_) => unreachable!("analysed: float operand"),
            };
            let x = match *node {
                // A float src's value, decoded (SPEC §10).
                Node::Q if self.spec.src.is_float_src() => match ints {
                    Ints::Plain { q, .. } | Ints::Float(q) => Val::F(q),
                    Ints::Biased { .. } => unreachable!("float src is never biased"),
                },
                Node::Q | Node::Z | Node::IntSub(..) => {
                    let (a, b) = match *node {
                        Node::IntSub(a, b) => (int(a), int(b)),
                        _ => (Int::Zero, Int::Zero),
                    };
                    match Int::of(*node, zps, a, b) {
                        Some(x) => Val::I(x),
                        None => {
                            let (a, b) = (self.int_value(a, ints), self.int_value(b, ints));
                            Val::I(Int::V(self.b.ins().isub(a, b)))
                        }
                    }
                }
                Node::S => Val::F(s),
                Node::Float(a) => Val::F(self.float_of(int(a), ints, wty)),
                Node::Lit(bits) => Val::F(self.lit(f64::from_bits(bits), wty)),
                Node::Neg(a) => Val::F(self.b.ins().fneg(f(a))),
                Node::Abs(a) => Val::F(self.b.ins().fabs(f(a))),
                Node::Add(a, b) => Val::F(self.b.ins().fadd(f(a), f(b))),
                Node::Sub(a, b) => Val::F(self.b.ins().fsub(f(a), f(b))),
                Node::Mul(a, b) => Val::F(self.b.ins().fmul(f(a), f(b))),
                Node::Min(a, b) => Val::F(self.min_max(f(a), f(b), false)),
                Node::Max(a, b) => Val::F(self.min_max(f(a), f(b), true)),
            };
            v.push(x);
        }
        match v.last() {
            Some(Val::F(y)) => *y,
            _ => unreachable!("analysed: ends in a float node"),
        }
    }

    /// The integer value of `x` (plain operands only: biased ones are used only for
    /// formulas where [`Int::biased_ok`] holds).
    fn int_value(&mut self, x: Int, ints: Ints) -> Value {
        let Ints::Plain { q, z } = ints else {
            unreachable!("biased and float operands need no integer values")
        };
        match x {
            Int::Q => q,
            Int::Z => z,
            Int::QmZ => self.b.ins().isub(q, z),
            Int::V(v) => v,
            Int::Zero => {
                let ty = self.b.func.dfg.value_type(q);
                if ty.is_vector() {
                    self.vconst(ty, 0)
                } else {
                    let zero = self.iconst(0);
                    if ty == types::I128 {
                        self.b.ins().sextend(types::I128, zero)
                    } else {
                        zero
                    }
                }
            }
        }
    }

    /// `float(x)` in the work type `wty` (exact for biased operands).
    fn float_of(&mut self, x: Int, ints: Ints, wty: Type) -> Value {
        match (x, ints) {
            (Int::Q, Ints::Biased { fq, k, .. }) => match k {
                Some(k) => self.b.ins().fsub(fq, k),
                None => fq,
            },
            (Int::QmZ, Ints::Biased { fq, fz, .. }) => self.b.ins().fsub(fq, fz),
            (Int::Zero, Ints::Biased { .. } | Ints::Float(_)) => self.lit(0.0, wty),
            _ => {
                let i = self.int_value(x, ints);
                self.int_to_float(i, wty)
            }
        }
    }

    /// Literal `x` in the work type `wty` (F32X4: a splat).
    fn lit(&mut self, x: f64, wty: Type) -> Value {
        match wty {
            types::F64 => self.b.ins().f64const(x),
            types::F32 => self.b.ins().f32const(x as f32),
            _ => self.vconst(types::F32X4, (x as f32).to_bits() as u64),
        }
    }

    /// Round-to-nearest-even of an exact integer to the work type.
    fn int_to_float(&mut self, x: Value, wty: Type) -> Value {
        if self.b.func.dfg.value_type(x) != types::I128 {
            return self.b.ins().fcvt_from_sint(wty, x);
        }
        // i128 (|x| < 2^99, f32 work): direct when it fits i64, else shift right by
        // 36 keeping a sticky bit (round to odd), convert and rescale: exact RNE.
        let lo = self.b.ins().ireduce(types::I64, x);
        let back = self.b.ins().sextend(types::I128, lo);
        let fits = self.b.ins().icmp(IntCC::Equal, back, x);
        let direct = self.b.ins().fcvt_from_sint(types::F32, lo);
        let hi = self.b.ins().sshr_imm_s(x, 36);
        let hi = self.b.ins().ireduce(types::I64, hi);
        let rest = self.b.ins().band_imm_s(lo, (1i64 << 36) - 1);
        let sticky = self.b.ins().icmp_imm_s(IntCC::NotEqual, rest, 0);
        let sticky = self.b.ins().uextend(types::I64, sticky);
        let hi = self.b.ins().bor(hi, sticky);
        let big = self.b.ins().fcvt_from_sint(types::F32, hi);
        let k = self.b.ins().f32const((1u64 << 36) as f32);
        let big = self.b.ins().fmul(big, k);
        self.b.ins().select(fits, direct, big)
    }

    /// `max`/`min` with the NaN and signed-zero rules of `dq_runtime::formula`.
    fn min_max(&mut self, a: Value, b: Value, max: bool) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let ity = ty.as_int();
        let (better, neg_of) = if max {
            (FloatCC::GreaterThan, b)
        } else {
            (FloatCC::LessThan, a)
        };
        let wins = self.b.ins().fcmp(better, a, b);
        let eq = self.b.ins().fcmp(FloatCC::Equal, a, b);
        let bits = self.b.ins().bitcast(ity, lanes(), neg_of);
        let zero = if ty.is_vector() {
            self.vconst(ity, 0)
        } else {
            self.b.ins().iconst(ity, 0)
        };
        let neg = self.b.ins().icmp(IntCC::SignedLessThan, bits, zero);
        let tie = self.b.ins().band(eq, neg);
        let pick_a = self.b.ins().bor(wins, tie);
        let r = self.pick(pick_a, a, b);
        let b_nan = self.b.ins().fcmp(FloatCC::Unordered, b, b);
        let r = self.pick(b_nan, b, r);
        let a_nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
        self.pick(a_nan, a, r)
    }
}
