//! The element formula as data: an SSA list of [`Node`]s that every backend evaluates
//! with the same typing and rounding.
//!
//! Typing (fixed, and the one `#[dequant_kernel]` documents):
//! - `q` (src value) and `z` (zero point, 0 when absent) are integers; `q - z` and
//!   `z - q` are exact integer differences ([`Node::IntSub`]). With a float src
//!   (SPEC §10: f8_e4m3, f8_e5m2, f4_e2m1) `q` is instead its exact value as a
//!   float, and `z` is 0 (float src takes no zero points): a formula reads `q` as
//!   one kind or the other ([`FormulaIr::q_kind`]).
//! - An integer meeting a float operation is first rounded to the working float type,
//!   nearest-even ([`Node::Float`]).
//! - Float operations work in f32 (f64 for f64 dst) with IEEE semantics, no fusion.
//!   Literals are rounded to the working type. `min`/`max` return the first operand
//!   if it is NaN, else the second if it is NaN; `max(-0, +0) = +0`, `min(-0, +0) = -0`.
//! - The result is rounded once, nearest-even, to the dst type; a NaN result is quieted.

/// One operation of a formula. Operands index earlier nodes of the same list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// The src value (integer).
    Q,
    /// The zero point (integer; 0 when absent).
    Z,
    /// The scale (float).
    S,
    /// Exact integer difference of two integer nodes.
    IntSub(u16, u16),
    /// An integer node rounded to the working float type.
    Float(u16),
    /// A float literal, as `f64` bits (rounded to the working type when used).
    Lit(u64),
    /// `-a` (sign flip).
    Neg(u16),
    /// `|a|` (sign clear).
    Abs(u16),
    /// `a + b`.
    Add(u16, u16),
    /// `a - b`.
    Sub(u16, u16),
    /// `a * b`.
    Mul(u16, u16),
    /// `min(a, b)`, NaN rules in the module docs.
    Min(u16, u16),
    /// `max(a, b)`, NaN rules in the module docs.
    Max(u16, u16),
}

/// A formula: its name and its nodes; the last node is the result (a float node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FormulaIr {
    /// The kernel's name (the function name in the DSL).
    pub name: &'static str,
    /// SSA nodes in evaluation order.
    pub nodes: &'static [Node],
}

/// The spec's formula, `(q - z) * s` (SPEC §5).
pub const STANDARD: FormulaIr = FormulaIr {
    name: "dequantize",
    nodes: &[
        Node::Q,
        Node::Z,
        Node::IntSub(0, 1),
        Node::Float(2),
        Node::S,
        Node::Mul(3, 4),
    ],
};

/// The spec's formula for a float src, `q * s` (SPEC §10): what `(q - z) * s`
/// is when `q` is a float and `z` is 0 (`x - 0` is `x` for every decoded value).
pub const STANDARD_FLOAT: FormulaIr = FormulaIr {
    name: "dequantize",
    nodes: &[Node::Q, Node::S, Node::Mul(0, 1)],
};

/// How a formula reads the src value `q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QKind {
    /// As an integer (integer src).
    Int,
    /// As a float (float src).
    Float,
    /// Not at all (any src).
    Unused,
}

/// True when the result of `nodes` can be a signalling NaN passed through from a
/// scale or literal unchanged (by `-`, `abs`, `min`, `max`). Float arithmetic
/// (`+ - *`) never returns a signalling NaN, so other formulas need no quieting
/// before an f32 store.
///
/// One backward sweep over the nodes (linear in their count): operands that are
/// not earlier nodes (a malformed IR, see [`FormulaIr::validate`]) are ignored.
pub const fn may_pass_signaling(nodes: &[Node]) -> bool {
    // Bit `i`: the result can be node `i`'s value unchanged. Operands are u16
    // indices, so 2^16 bits hold every node an operand can name.
    let mut passed = [0u64; 1 << 10];
    let mut i = nodes.len();
    while i > 0 {
        i -= 1;
        let result = i + 1 == nodes.len();
        if !result && (i > u16::MAX as usize || (passed[i / 64] >> (i % 64)) & 1 == 0) {
            continue;
        }
        let (a, b) = match nodes[i] {
            Node::S => return true,
            Node::Lit(b) if is_nan_bits(b) => return true,
            Node::Neg(a) | Node::Abs(a) => (a, a),
            Node::Min(a, b) | Node::Max(a, b) => (a, b),
            _ => continue,
        };
        let (a, b) = (a as usize, b as usize);
        if a < i {
            passed[a / 64] |= 1 << (a % 64);
        }
        if b < i {
            passed[b / 64] |= 1 << (b % 64);
        }
    }
    false
}

/// What backends need to know about a formula beyond its nodes, computed once per
/// formula ([`FormulaIr::facts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FormulaFacts {
    /// The result can be a signalling NaN passed through unchanged, so stores must
    /// quiet NaNs ([`may_pass_signaling`]).
    pub may_pass_signaling: bool,
    /// Some literal is a NaN.
    pub nan_literal: bool,
}

impl FormulaIr {
    /// The formula's [`FormulaFacts`].
    pub const fn facts(&self) -> FormulaFacts {
        let mut nan_literal = false;
        let mut i = 0;
        while i < self.nodes.len() {
            if let Node::Lit(b) = self.nodes[i] {
                nan_literal |= is_nan_bits(b);
            }
            i += 1;
        }
        FormulaFacts {
            may_pass_signaling: may_pass_signaling(self.nodes),
            nan_literal,
        }
    }
}

/// What is wrong with a formula's IR ([`FormulaIr::validate`], and the JIT's
/// range analysis).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormulaProblem {
    /// An operand does not index an earlier node (itself, a later node, or none).
    #[error("node {node}: operand is not an earlier node")]
    LaterOperand {
        /// The node.
        node: usize,
    },
    /// An integer operand was expected.
    #[error("node {node}: expected an integer operand")]
    ExpectedInt {
        /// The node.
        node: usize,
    },
    /// A float operand was expected.
    #[error("node {node}: expected a float operand")]
    ExpectedFloat {
        /// The node.
        node: usize,
    },
    /// An integer difference overflows the widths a backend supports.
    #[error("node {node}: overflow")]
    Overflow {
        /// The node.
        node: usize,
    },
    /// The last node is not a float node (or there are none).
    #[error("does not end in a float node")]
    NoFloatResult,
}

impl FormulaIr {
    /// Checks the IR is well formed: every operand indexes an earlier node (so
    /// the nodes are acyclic and in range), operands have the types their node
    /// takes (`q` as [`q_kind`](Self::q_kind) reads it first), and the last node
    /// is a float. Linear in the node count; IR from `#[dequant_kernel]` always
    /// passes.
    ///
    /// # Errors
    /// The first problem found, by node.
    pub fn validate(&self) -> Result<(), FormulaProblem> {
        self.check(self.q_kind() == QKind::Float)
    }

    /// [`validate`](Self::validate) for a src of dtype `src`: `q` is a float
    /// exactly when `src` is a float type, so a formula that reads it otherwise is
    /// refused at its first such use.
    ///
    /// # Errors
    /// The first problem found, by node.
    pub fn validate_for(&self, src: crate::DType) -> Result<(), FormulaProblem> {
        self.check(src.is_float_src())
    }

    /// The checks of [`validate`](Self::validate), with `q` a float when `q_float`.
    fn check(&self, q_float: bool) -> Result<(), FormulaProblem> {
        // Whether each node checked so far is a float.
        let mut float = Vec::with_capacity(self.nodes.len());
        for (node, n) in self.nodes.iter().enumerate() {
            let operand = |a: u16, want_float: bool| match float.get(a as usize) {
                None => Err(FormulaProblem::LaterOperand { node }),
                Some(&f) if f == want_float => Ok(()),
                Some(_) if want_float => Err(FormulaProblem::ExpectedFloat { node }),
                Some(_) => Err(FormulaProblem::ExpectedInt { node }),
            };
            let is_float = match *n {
                Node::Q => q_float,
                Node::Z => false,
                Node::S | Node::Lit(_) => true,
                Node::IntSub(a, b) => {
                    operand(a, false)?;
                    operand(b, false)?;
                    false
                }
                Node::Float(a) => {
                    operand(a, false)?;
                    true
                }
                Node::Neg(a) | Node::Abs(a) => {
                    operand(a, true)?;
                    true
                }
                Node::Add(a, b)
                | Node::Sub(a, b)
                | Node::Mul(a, b)
                | Node::Min(a, b)
                | Node::Max(a, b) => {
                    operand(a, true)?;
                    operand(b, true)?;
                    true
                }
            };
            float.push(is_float);
        }
        match float.last() {
            Some(true) => Ok(()),
            _ => Err(FormulaProblem::NoFloatResult),
        }
    }
}

impl FormulaIr {
    /// How the formula reads `q`: as an integer operand (of [`Node::IntSub`] or
    /// [`Node::Float`]), as a float one, or not at all. A formula that reads it
    /// both ways is malformed; this reports the first use.
    pub const fn q_kind(&self) -> QKind {
        let n = self.nodes;
        let mut q = u16::MAX;
        let mut i = 0;
        while i < n.len() {
            let (a, b) = match n[i] {
                Node::Q => {
                    q = i as u16;
                    (u16::MAX, u16::MAX)
                }
                Node::IntSub(a, b) if a == q || b == q => return QKind::Int,
                Node::Float(a) if a == q => return QKind::Int,
                Node::IntSub(..) | Node::Float(_) => (u16::MAX, u16::MAX),
                Node::Neg(a) | Node::Abs(a) => (a, u16::MAX),
                Node::Add(a, b)
                | Node::Sub(a, b)
                | Node::Mul(a, b)
                | Node::Min(a, b)
                | Node::Max(a, b) => (a, b),
                Node::Z | Node::S | Node::Lit(_) => (u16::MAX, u16::MAX),
            };
            if q != u16::MAX && (a == q || b == q) {
                return QKind::Float;
            }
            i += 1;
        }
        QKind::Unused
    }

    /// True when the formula can run on a src of dtype `src`: its `q` is read as
    /// that kind of value, or not at all.
    pub const fn accepts_src(&self, src: crate::DType) -> bool {
        match self.q_kind() {
            QKind::Unused => true,
            QKind::Int => !src.is_float_src(),
            QKind::Float => src.is_float_src(),
        }
    }

    /// The formula to run for a src of dtype `src`: this one when it
    /// [accepts](Self::accepts_src) it, [`STANDARD_FLOAT`] for [`STANDARD`] and
    /// a float src, else `None`.
    pub fn for_src(&'static self, src: crate::DType) -> Option<&'static FormulaIr> {
        if self.accepts_src(src) {
            Some(self)
        } else if src.is_float_src() && self.nodes == STANDARD.nodes {
            Some(&STANDARD_FLOAT)
        } else {
            None
        }
    }
}

/// True when f64 `bits` are a NaN.
const fn is_nan_bits(b: u64) -> bool {
    const EXP: u64 = 0x7ff0_0000_0000_0000;
    b & EXP == EXP && b & !(EXP | 1 << 63) != 0
}

/// A float type a formula can work in.
pub trait WorkFloat: Copy + PartialOrd + core::ops::Neg<Output = Self> {
    /// Rounds an exact integer, nearest-even.
    fn from_int(v: i128) -> Self;
    /// Rounds a literal, nearest-even.
    fn from_lit(v: f64) -> Self;
    /// `|self|` by clearing the sign bit.
    fn abs(self) -> Self;
    /// `self + b`.
    fn add(self, b: Self) -> Self;
    /// `self - b`.
    fn sub(self, b: Self) -> Self;
    /// `self * b`.
    fn mul(self, b: Self) -> Self;
    /// True for NaN.
    fn is_nan(self) -> bool;
    /// True for a negative sign bit.
    fn is_neg(self) -> bool;
}

macro_rules! work_float {
    ($t:ty) => {
        impl WorkFloat for $t {
            #[inline(always)]
            fn from_int(v: i128) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_lit(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn is_neg(self) -> bool {
                self.is_sign_negative()
            }
        }
    };
}
work_float!(f32);
work_float!(f64);

/// `max` with the NaN and signed-zero rules of the module docs.
#[inline(always)]
pub fn max<F: WorkFloat>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a > b || (a == b && b.is_neg()) {
        a
    } else {
        b
    }
}

/// `min` with the NaN and signed-zero rules of the module docs.
#[inline(always)]
pub fn min<F: WorkFloat>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a < b || (a == b && a.is_neg()) {
        a
    } else {
        b
    }
}

#[derive(Clone, Copy)]
enum Val<F> {
    Int(i128),
    Float(F),
}

/// Formulas up to this many nodes are evaluated without allocating.
const STACK_NODES: usize = 16;

impl FormulaIr {
    /// Evaluates the formula for one element (the interpreter the reference uses).
    ///
    /// # Panics
    /// On a malformed IR (an operand index not before its node, a type mismatch);
    /// IR from `#[dequant_kernel]` is checked at compile time.
    pub fn eval<F: WorkFloat>(&self, q: i64, z: i64, s: F) -> F {
        if self.nodes == STANDARD.nodes {
            // The same steps as interpreting STANDARD, without the interpreter.
            return F::from_int(q as i128 - z as i128).mul(s);
        }
        self.eval_val(Val::Int(q as i128), z, s)
    }

    /// Evaluates the formula for one element of a float src, `x` its exact value
    /// (`z` is 0: float src takes no zero points).
    ///
    /// # Panics
    /// As [`eval`](Self::eval); also when the formula reads `q` as an integer.
    pub fn eval_float<F: WorkFloat>(&self, x: F, s: F) -> F {
        if self.nodes == STANDARD_FLOAT.nodes {
            return x.mul(s);
        }
        self.eval_val(Val::Float(x), 0, s)
    }

    fn eval_val<F: WorkFloat>(&self, q: Val<F>, z: i64, s: F) -> F {
        if self.nodes.len() <= STACK_NODES {
            self.eval_in(&mut [Val::Int(0); STACK_NODES], q, z, s)
        } else {
            self.eval_in(&mut vec![Val::Int(0); self.nodes.len()], q, z, s)
        }
    }

    fn eval_in<F: WorkFloat>(&self, vals: &mut [Val<F>], q: Val<F>, z: i64, s: F) -> F {
        let int = |v: &[Val<F>], i: u16| match v[i as usize] {
            Val::Int(x) => x,
            Val::Float(_) => panic!("formula IR: node {i} is not an integer"),
        };
        let fl = |v: &[Val<F>], i: u16| match v[i as usize] {
            Val::Float(x) => x,
            Val::Int(_) => panic!("formula IR: node {i} is not a float"),
        };
        for (k, node) in self.nodes.iter().enumerate() {
            let done = &vals[..k];
            vals[k] = match *node {
                Node::Q => q,
                Node::Z => Val::Int(z as i128),
                Node::S => Val::Float(s),
                Node::IntSub(a, b) => Val::Int(int(done, a) - int(done, b)),
                Node::Float(a) => Val::Float(F::from_int(int(done, a))),
                Node::Lit(bits) => Val::Float(F::from_lit(f64::from_bits(bits))),
                Node::Neg(a) => Val::Float(-fl(done, a)),
                Node::Abs(a) => Val::Float(fl(done, a).abs()),
                Node::Add(a, b) => Val::Float(fl(done, a).add(fl(done, b))),
                Node::Sub(a, b) => Val::Float(fl(done, a).sub(fl(done, b))),
                Node::Mul(a, b) => Val::Float(fl(done, a).mul(fl(done, b))),
                Node::Min(a, b) => Val::Float(min(fl(done, a), fl(done, b))),
                Node::Max(a, b) => Val::Float(max(fl(done, a), fl(done, b))),
            };
        }
        match self.nodes.len().checked_sub(1).map(|k| vals[k]) {
            Some(Val::Float(y)) => y,
            _ => panic!("formula IR `{}` does not end in a float node", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_is_exact_difference_then_one_multiply() {
        assert_eq!(STANDARD.eval(20u8 as i64, 10, 0.1f32), 10.0f32 * 0.1);
        // i32::MIN zero point: the difference leaves the i32 range and is rounded once.
        let y = STANDARD.eval(127, i32::MIN as i64, 1.0f32);
        assert_eq!(y, (127i64 - i32::MIN as i64) as f32);
        assert!(STANDARD.eval(3, 3, -1.0f32).is_sign_negative());
    }

    #[test]
    fn q_kinds_and_float_forms() {
        use crate::DType;
        assert_eq!(STANDARD.q_kind(), QKind::Int);
        assert_eq!(STANDARD_FLOAT.q_kind(), QKind::Float);
        static NEG: [Node; 4] = [Node::Q, Node::Neg(0), Node::S, Node::Mul(1, 2)];
        let neg = FormulaIr {
            name: "neg",
            nodes: &NEG,
        };
        assert_eq!(neg.q_kind(), QKind::Float);
        static NO_Q: [Node; 1] = [Node::S];
        let no_q = FormulaIr {
            name: "s",
            nodes: &NO_Q,
        };
        assert_eq!(no_q.q_kind(), QKind::Unused);
        assert!(no_q.accepts_src(DType::F8E4M3) && no_q.accepts_src(DType::U4));
        assert_eq!(STANDARD.for_src(DType::F4E2M1), Some(&STANDARD_FLOAT));
        assert_eq!(STANDARD.for_src(DType::S8), Some(&STANDARD));
        assert_eq!(STANDARD_FLOAT.for_src(DType::S8), None);
        let x = f32::from_bits(0x0000_0001);
        assert_eq!(STANDARD_FLOAT.eval_float(x, 2.0f32), x * 2.0);
        assert_eq!(neg.eval_float(1.5f32, 2.0), -3.0);
        assert!(neg.eval_float(-0.0f32, 1.0).is_sign_positive());
    }

    #[test]
    fn min_max_nan_and_zero_rules() {
        assert_eq!(max(-0.0f32, 0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(max(0.0f32, -0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(min(0.0f32, -0.0).to_bits(), (-0.0f32).to_bits());
        assert!(max(f32::NAN, 1.0).is_nan());
        assert!(max(1.0, f32::NAN).is_nan());
        assert_eq!(max(1.0f32, 2.0), 2.0);
        assert_eq!(min(1.0f32, 2.0), 1.0);
    }

    #[test]
    fn signalling_nan_passes_only_through_bit_operations() {
        use Node::*;
        assert!(!may_pass_signaling(STANDARD.nodes));
        assert!(may_pass_signaling(&[S]));
        assert!(may_pass_signaling(&[S, Neg(0), Abs(1)]));
        // max((q - z) * s, 0.0): max can return its first operand unchanged, but
        // that operand is a product, so quiet.
        let relu = [
            Q,
            Z,
            IntSub(0, 1),
            Float(2),
            S,
            Mul(3, 4),
            Lit(0),
            Max(5, 6),
        ];
        assert!(!may_pass_signaling(&relu));
        assert!(may_pass_signaling(&[Q, Float(0), S, Max(1, 2)]));
        assert!(may_pass_signaling(&[Lit(0x7ff0_0000_0000_0001)]));
        assert!(!may_pass_signaling(&[Lit(f64::INFINITY.to_bits())]));
        assert!(!may_pass_signaling(&[S, Q, Float(1), Add(0, 1)]));
    }

    /// Cycles, forward and out-of-range operands, type mismatches and a
    /// non-float result are each refused, by node; the standard forms pass.
    #[test]
    fn validate_refuses_malformed_ir() {
        use FormulaProblem::*;
        use Node::*;
        let check = |nodes: &'static [Node]| FormulaIr { name: "t", nodes }.validate();
        assert_eq!(STANDARD.validate(), Ok(()));
        assert_eq!(STANDARD_FLOAT.validate(), Ok(()));
        assert_eq!(check(&[S, Neg(1)]), Err(LaterOperand { node: 1 }));
        assert_eq!(
            check(&[S, Add(0, 2), Neg(1)]),
            Err(LaterOperand { node: 1 })
        );
        assert_eq!(check(&[S, Mul(0, u16::MAX)]), Err(LaterOperand { node: 1 }));
        assert_eq!(check(&[Q, Z, IntSub(0, 1)]), Err(NoFloatResult));
        assert_eq!(check(&[]), Err(NoFloatResult));
        assert_eq!(check(&[Q, S, Add(0, 1)]), Ok(()), "q read as a float");
        assert_eq!(
            check(&[Q, Float(0), S, Add(0, 2)]),
            Err(ExpectedFloat { node: 3 }),
            "q read both ways"
        );
        assert_eq!(check(&[S, Float(0)]), Err(ExpectedInt { node: 1 }));
        assert_eq!(check(&[Z, S, Mul(0, 1)]), Err(ExpectedFloat { node: 2 }));
    }

    /// Self and forward operands end the sweep instead of looping, and a long
    /// chain of `max(x, x)` (2^n paths) takes one pass.
    #[test]
    fn signalling_sweep_is_linear_and_ends_on_cycles() {
        use Node::*;
        assert!(!may_pass_signaling(&[Lit(0), Neg(1)]));
        assert!(!may_pass_signaling(&[Lit(0), Min(2, 1), Max(1, 2)]));
        let mut chain = vec![Lit(0)];
        chain.extend((0..4000u16).map(|i| Max(i, i)));
        assert!(!may_pass_signaling(&chain));
        chain[0] = S;
        assert!(may_pass_signaling(&chain));
    }

    #[test]
    fn facts_of_standard_and_nan_literals() {
        use Node::*;
        let f = STANDARD.facts();
        assert!(!f.may_pass_signaling && !f.nan_literal);
        static QNAN: [Node; 5] = [Q, Float(0), Lit(0x7ff8_0000_0000_0000), Mul(1, 2), Abs(3)];
        let ir = FormulaIr {
            name: "qnan",
            nodes: &QNAN,
        };
        assert!(!ir.facts().may_pass_signaling && ir.facts().nan_literal);
        static PASS: [Node; 2] = [Lit(f64::INFINITY.to_bits()), Neg(0)];
        let ir = FormulaIr {
            name: "inf",
            nodes: &PASS,
        };
        assert!(!ir.facts().may_pass_signaling && !ir.facts().nan_literal);
        static SNAN: [Node; 1] = [Lit(0x7ff0_0000_0000_0001)];
        let ir = FormulaIr {
            name: "snan",
            nodes: &SNAN,
        };
        assert!(ir.facts().may_pass_signaling && ir.facts().nan_literal);
    }
}
