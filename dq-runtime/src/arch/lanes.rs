//! The operations a `#[dequant_kernel]` formula is evaluated with, on one value
//! or a vector of lanes: the supertrait of [`Simd`](super::Simd), implemented
//! for scalars by `kernels::lanes`.

/// The operations of the formula DSL on one value or a vector of lanes.
///
/// Typing follows [`crate::formula`]: `Int` values are exact integers (vector
/// implementations use i32 lanes; callers take them only when `q - z` fits),
/// `Float` values are the working float type.
pub trait Lanes: Copy {
    /// An integer value (`q`, `z`, `q - z`).
    type Int: Copy;
    /// A working-float value.
    type Float: Copy;
    /// Exact `a - b`.
    fn int_sub(self, a: Self::Int, b: Self::Int) -> Self::Int;
    /// An integer rounded to the working float, nearest-even.
    fn float(self, a: Self::Int) -> Self::Float;
    /// A literal rounded to the working float, nearest-even.
    fn lit(self, v: f64) -> Self::Float;
    /// `-a`.
    fn neg(self, a: Self::Float) -> Self::Float;
    /// `|a|`.
    fn abs(self, a: Self::Float) -> Self::Float;
    /// `a + b`.
    fn add(self, a: Self::Float, b: Self::Float) -> Self::Float;
    /// `a - b`.
    fn sub(self, a: Self::Float, b: Self::Float) -> Self::Float;
    /// `a * b`.
    fn mul(self, a: Self::Float, b: Self::Float) -> Self::Float;
    /// [`formula::min`](crate::formula::min).
    fn min(self, a: Self::Float, b: Self::Float) -> Self::Float;
    /// [`formula::max`](crate::formula::max).
    fn max(self, a: Self::Float, b: Self::Float) -> Self::Float;
    /// [`NAN_BITS`](crate::minifloat::NAN_BITS) where `x` is a NaN, else `y` (a
    /// NaN float src gives the one NaN).
    fn nan_or(self, x: Self::Float, y: Self::Float) -> Self::Float;
}
