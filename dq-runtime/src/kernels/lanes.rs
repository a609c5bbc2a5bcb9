//! The lane abstraction a `#[dequant_kernel]` formula is evaluated over: scalars
//! (exact integers) or vectors of i32/f32 lanes (see [`crate::arch::Simd`]).

use core::marker::PhantomData;

pub use crate::arch::Lanes;
use crate::formula::{self, WorkFloat};

/// An element formula compiled into Rust by `#[dequant_kernel]`.
pub trait Formula: 'static {
    /// False when a NaN result is always quiet already
    /// ([`formula::may_pass_signaling`]), so vector f32 stores skip quieting.
    const QUIET: bool = true;
    /// The result for `q`, `z`, `s` (before the final rounding into dst).
    fn eval<L: Lanes>(l: L, q: L::Int, z: L::Int, s: L::Float) -> L::Float;
    /// True when [`eval_float`](Self::eval_float) is the formula's float-src
    /// form; [`Entry::new`](super::Entry::new) refuses a float src otherwise (at
    /// compile time).
    const FLOAT_SRC: bool = false;
    /// The result for a float src value `x` and scale `s` (SPEC §10), where
    /// [`FLOAT_SRC`](Self::FLOAT_SRC).
    fn eval_float<L: Lanes>(l: L, x: L::Float, s: L::Float) -> L::Float {
        let _ = (l, x, s);
        unreachable!("no float-src form (Entry::new refuses float src for it)")
    }
}

/// The formula at src `q` (a code of float src `S`, decoded by its table first,
/// or an integer), zero point `z` and scale `s`, one element exactly.
#[inline(always)]
pub fn apply<S: super::IntType, F: Formula, I: ExactInt, W: FromI64>(
    l: Scalar<I, W>,
    q: I,
    z: I,
    s: W,
) -> W {
    match S::DECODE {
        // Exact: every f32 is a working float exactly.
        Some(t) => float_src::<S, F, _>(l, W::from_lit(t[q.low_byte()] as f64), s),
        None => F::eval(l, q, z, s),
    }
}

/// The formula at the value `x` of a float src `S` and scale `s`.
#[inline(always)]
pub fn float_src<S: super::IntType, F: Formula, L: Lanes>(
    l: L,
    x: L::Float,
    s: L::Float,
) -> L::Float {
    let y = F::eval_float(l, x, s);
    // A NaN src gives the one NaN, whatever the scale: which NaN a product of
    // two NaNs keeps is the compiler's choice of operand order, so it is not left
    // to the multiply.
    if S::NAN { l.nan_or(x, y) } else { y }
}

/// The spec's formula `(q - z) * s` in Rust, the twin of [`formula::STANDARD`].
#[derive(Clone, Copy, Debug)]
pub struct Standard;

impl Formula for Standard {
    const QUIET: bool = formula::may_pass_signaling(formula::STANDARD.nodes);
    #[inline(always)]
    fn eval<L: Lanes>(l: L, q: L::Int, z: L::Int, s: L::Float) -> L::Float {
        let d = l.int_sub(q, z);
        l.mul(l.float(d), s)
    }
    const FLOAT_SRC: bool = true;
    #[inline(always)]
    fn eval_float<L: Lanes>(l: L, x: L::Float, s: L::Float) -> L::Float {
        l.mul(x, s)
    }
}

/// An exact integer type for the scalar path (`i64`, or `i128` for s64 zero points).
pub trait ExactInt: Copy + 'static {
    /// Widens an `i64`.
    fn from_i64(v: i64) -> Self;
    /// `self - b` (exact: the type is wide enough for the operands it is given).
    fn sub(self, b: Self) -> Self;
    /// Rounds to `F`, nearest-even.
    fn round<F: FromI64>(self) -> F;
    /// The low 8 bits, as a table index.
    fn low_byte(self) -> usize;
}

impl ExactInt for i64 {
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // Operands are values of at most 32-bit types here: no overflow.
        self.wrapping_sub(b)
    }
    #[inline(always)]
    fn round<F: FromI64>(self) -> F {
        F::from_i64(self)
    }
    #[inline(always)]
    fn low_byte(self) -> usize {
        (self & 0xff) as usize
    }
}

impl ExactInt for i128 {
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as i128
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self - b
    }
    #[inline(always)]
    fn round<F: FromI64>(self) -> F {
        F::from_int(self)
    }
    #[inline(always)]
    fn low_byte(self) -> usize {
        (self & 0xff) as usize
    }
}

/// Extra conversion the scalar path needs on top of [`WorkFloat`].
pub trait FromI64: WorkFloat {
    /// Rounds an `i64`, nearest-even.
    fn from_i64(v: i64) -> Self;
}

impl FromI64 for f32 {
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
}

impl FromI64 for f64 {
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f64
    }
}

/// Scalar lanes: exact integers of type `I`, floats of type `F`.
#[derive(Debug)]
pub struct Scalar<I, F>(PhantomData<(I, F)>);

impl<I, F> Clone for Scalar<I, F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, F> Copy for Scalar<I, F> {}

impl<I, F> Default for Scalar<I, F> {
    fn default() -> Self {
        Scalar(PhantomData)
    }
}

impl<I: ExactInt, F: FromI64> Lanes for Scalar<I, F> {
    type Int = I;
    type Float = F;

    #[inline(always)]
    fn int_sub(self, a: I, b: I) -> I {
        a.sub(b)
    }
    #[inline(always)]
    fn float(self, a: I) -> F {
        a.round::<F>()
    }
    #[inline(always)]
    fn lit(self, v: f64) -> F {
        F::from_lit(v)
    }
    #[inline(always)]
    fn neg(self, a: F) -> F {
        -a
    }
    #[inline(always)]
    fn abs(self, a: F) -> F {
        a.abs()
    }
    #[inline(always)]
    fn add(self, a: F, b: F) -> F {
        a.add(b)
    }
    #[inline(always)]
    fn sub(self, a: F, b: F) -> F {
        a.sub(b)
    }
    #[inline(always)]
    fn mul(self, a: F, b: F) -> F {
        a.mul(b)
    }
    #[inline(always)]
    fn min(self, a: F, b: F) -> F {
        formula::min(a, b)
    }
    #[inline(always)]
    fn max(self, a: F, b: F) -> F {
        formula::max(a, b)
    }
    #[inline(always)]
    fn nan_or(self, x: F, y: F) -> F {
        // A NaN `x` here comes from `decode`: the tables' NaN is NAN_BITS.
        if x.is_nan() { x } else { y }
    }
}
