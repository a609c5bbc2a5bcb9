//! Type-level dtypes: the markers `#[dequant_kernel]` instantiates the generic
//! kernels with, each knowing how to load or store its elements.

use half::{bf16, f16};

use super::lanes::{ExactInt, FromI64};
use crate::arch::Simd;
use crate::convert::{f32_to_bf16_bits, f32_to_f16_bits, quiet_f32, quiet_f64};
use crate::dtype::DType;
use crate::minifloat::{E8M0_TABLE, F4_E2M1_TABLE, F8_E4M3_TABLE, F8_E5M2_TABLE};

/// The seal of [`IntType`] and [`FloatType`]: not nameable outside this crate.
mod sealed {
    pub trait Sealed {}
}

/// An integer src or zero-point type (or [`NoZp`]), or a float src type read
/// as its codes (8-bit, or 4-bit nibbles) and decoded: by table ([`DECODE`])
/// element by element, by bit manipulation in vectors ([`load_float`]).
///
/// [`DECODE`]: IntType::DECODE
/// [`load_float`]: IntType::load_float
///
/// Sealed: the kernels trust `DTYPE` and the loads to agree on element sizes,
/// so only this module's markers implement it.
pub trait IntType: sealed::Sealed + 'static {
    /// The dtype (`None` for [`NoZp`]).
    const DTYPE: Option<DType>;
    /// For a float src (SPEC §10): the value of each code; `None` for integers.
    const DECODE: Option<&'static [f32; 256]> = None;
    /// For a float src: true when some code is NaN (the kernels then write
    /// [`NAN_BITS`](crate::minifloat::NAN_BITS) for it).
    const NAN: bool = false;
    /// True when every value lies in `-128..=255` (so `q - z` fits i32 lanes).
    const SMALL: bool;
    /// The exact integer type for `q - z` with this zero-point type.
    type Exact: ExactInt;
    /// Element `o` (nibble offset for 4-bit).
    ///
    /// # Safety
    /// `base` is valid for reading element `o`.
    unsafe fn load(base: *const u8, o: usize) -> i64;
    /// `V::LANES` elements from `o` (even for 4-bit).
    ///
    /// # Safety
    /// `base` is valid for reading those elements; never called for s64.
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Int;
    /// For a float src: the values of `V::LANES` elements from `o` (even for
    /// 4-bit), decoded by bit manipulation (a NaN code gives some NaN).
    ///
    /// # Safety
    /// As [`load_vec`](Self::load_vec); only for a float src.
    unsafe fn load_float<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float {
        let _ = (v, base, o);
        unreachable!("not a float src")
    }
}

/// A float dst type with its scales: of the same type, or e8m0 ([`E8`]).
///
/// Sealed, as [`IntType`]: the kernels trust `DTYPE`, `SIZE` and the stores to
/// agree.
pub trait FloatType: sealed::Sealed + 'static {
    /// The dtype.
    const DTYPE: DType;
    /// The scales dtype.
    const SCALES: DType = Self::DTYPE;
    /// Bytes per element.
    const SIZE: usize;
    /// True when the vector kernels handle it (f32 working type).
    const VECTOR: bool;
    /// The working float type (f64 for f64 dst, else f32).
    type Work: FromI64;
    /// Scale element `o`, exact in the working type.
    ///
    /// # Safety
    /// `base` is valid for reading element `o`.
    unsafe fn load(base: *const u8, o: usize) -> Self::Work;
    /// Rounds `y` once, nearest-even (NaN quieted), into element `o`.
    ///
    /// # Safety
    /// `base` is valid for writing element `o`, which no one else accesses.
    unsafe fn store(base: *mut u8, o: usize, y: Self::Work);
    /// The working value as f32 (exact when `VECTOR`).
    fn work_f32(w: Self::Work) -> f32;
    /// `V::LANES` scales from element `o`.
    ///
    /// # Safety
    /// `base` is valid for reading those elements; only when `VECTOR`.
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float;
    /// Stores `V::LANES` results from element `o` (f32 NaNs quieted when `quiet`).
    ///
    /// # Safety
    /// `base` is valid for writing those elements; only when `VECTOR`.
    unsafe fn store_vec<V: Simd>(v: V, base: *mut u8, o: usize, y: V::Float, quiet: bool);
    /// True when [`store_vec2`](Self::store_vec2) is cheaper than two
    /// [`store_vec`](Self::store_vec) (the vector loops then step by two vectors).
    const PAIR: bool = false;
    /// Stores `2 * V::LANES` results from element `o`: `y[0]`'s, then `y[1]`'s.
    ///
    /// # Safety
    /// As [`store_vec`](Self::store_vec), for `2 * V::LANES` elements.
    #[inline(always)]
    unsafe fn store_vec2<V: Simd>(v: V, base: *mut u8, o: usize, y: [V::Float; 2], quiet: bool) {
        // SAFETY: forwarded from the caller, one vector each.
        unsafe {
            Self::store_vec(v, base, o, y[0], quiet);
            Self::store_vec(v, base, o + V::LANES, y[1], quiet);
        }
    }
    /// As [`store_vec2`](Self::store_vec2), the lanes of `nan` as
    /// [`NAN_BITS`](crate::minifloat::NAN_BITS); only where `PAIR` and
    /// [`Simd::NAN_MASKS`].
    ///
    /// # Safety
    /// As [`store_vec2`](Self::store_vec2).
    unsafe fn store_vec2_nan<V: Simd>(
        v: V,
        base: *mut u8,
        o: usize,
        y: [V::Float; 2],
        nan: V::Nan,
    ) {
        let _ = (v, base, o, y, nan);
        unreachable!("only where PAIR")
    }
    /// A 16-entry table of encoded dst values in registers.
    type Tab<V: Simd>: Copy;
    /// Where [`PAIR`](Self::PAIR): the table of results `y[0]`, then `y[1]`
    /// (with 16 lanes, `y[1]` is `y[0]`), made in registers.
    fn tab2<V: Simd>(v: V, y: [V::Float; 2]) -> Self::Tab<V> {
        let _ = (v, y);
        unreachable!("only where PAIR")
    }
    /// Elements per [`lut`](Self::lut) step: one vector of dst bytes.
    fn lut_step<V: Simd>() -> usize;
    /// Loads a table of 16 encoded dst values from `p`.
    ///
    /// # Safety
    /// `p` is valid for reading 16 elements; only when `VECTOR`.
    unsafe fn tab<V: Simd>(v: V, p: *const u8) -> Self::Tab<V>;
    /// Looks up [`lut_step`](Self::lut_step) 4-bit values packed at `src` in `t`
    /// and stores them at `dst`.
    ///
    /// # Safety
    /// As [`Simd::lut32`] / [`Simd::lut16`] (ordinary stores) for that many
    /// elements; only when `VECTOR`.
    unsafe fn lut<V: Simd>(v: V, t: Self::Tab<V>, src: *const u8, dst: *mut u8);
    /// Whether a [`lut`](Self::lut) step under `V` is one whole line of dst, which
    /// [`lut_line`](Self::lut_line) gives in registers.
    fn lut_lines<V: Simd>() -> bool {
        Self::VECTOR && V::LINES && Self::lut_step::<V>() * Self::SIZE == 64
    }
    /// A [`lut`](Self::lut) step's line, in registers.
    ///
    /// # Safety
    /// As [`lut`](Self::lut) for reading; only where [`lut_lines`](Self::lut_lines).
    unsafe fn lut_line<V: Simd>(v: V, t: Self::Tab<V>, src: *const u8) -> V::Line {
        let _ = (v, t, src);
        unreachable!("only where lut_lines")
    }
}

macro_rules! marker {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        $($(#[$doc])* #[derive(Clone, Copy, Debug)] pub struct $name;)*
    };
}

marker! {
    /// s4 (src or zero points).
    S4;
    /// u4 (src or zero points).
    U4;
    /// s8 (src or zero points).
    S8;
    /// u8 (src or zero points).
    U8;
    /// s32 (axes-form src, zero points).
    S32;
    /// s64 (the static op's wide zero points).
    S64;
    /// No zero points (all zero).
    NoZp;
    /// f16 dst and scales.
    F16;
    /// bf16 dst and scales.
    BF16;
    /// f32 dst and scales.
    F32;
    /// f64 dst and scales (axes form).
    F64;
    /// f8_e4m3 src.
    F8E4M3;
    /// f8_e5m2 src.
    F8E5M2;
    /// f4_e2m1 src (nibbles).
    F4E2M1;
}

/// Reads `N` bytes at element `o` of a buffer of `N`-byte elements.
///
/// # Safety
/// `base` is valid for reading them.
#[inline(always)]
unsafe fn read<const N: usize>(base: *const u8, o: usize) -> [u8; N] {
    // SAFETY: caller guarantees the N bytes are readable.
    unsafe { base.add(o * N).cast::<[u8; N]>().read_unaligned() }
}

/// Writes `N` bytes at element `o`.
///
/// # Safety
/// `base` is valid for writing them.
#[inline(always)]
unsafe fn write<const N: usize>(base: *mut u8, o: usize, b: [u8; N]) {
    // SAFETY: caller guarantees the N bytes are writable.
    unsafe { base.add(o * N).cast::<[u8; N]>().write_unaligned(b) }
}

/// The raw nibble at nibble offset `o`.
///
/// # Safety
/// `base` is valid for reading byte `o / 2`.
#[inline(always)]
unsafe fn nibble(base: *const u8, o: usize) -> u8 {
    // SAFETY: caller guarantees byte o / 2 is readable.
    unsafe { (*base.add(o / 2) >> ((o & 1) * 4)) & 0x0f }
}

macro_rules! int_type {
    ($t:ident, $d:expr, $small:expr, $exact:ty,
     |$b:ident, $o:ident| $load:expr, |$v:ident, $vb:ident, $vo:ident| $vec:expr
     $(, float: $table:expr, nan: $nan:expr, |$fv:ident, $fb:ident, $fo:ident| $fvec:expr)?) => {
        impl sealed::Sealed for $t {}
        impl IntType for $t {
            const DTYPE: Option<DType> = $d;
            const SMALL: bool = $small;
            type Exact = $exact;
            #[inline(always)]
            #[allow(unused_unsafe)]
            unsafe fn load($b: *const u8, $o: usize) -> i64 {
                // SAFETY: forwarded from the caller.
                unsafe { $load }
            }
            #[inline(always)]
            #[allow(unused_unsafe)]
            unsafe fn load_vec<V: Simd>($v: V, $vb: *const u8, $vo: usize) -> V::Int {
                // SAFETY: forwarded from the caller.
                unsafe { $vec }
            }
            $(
                const DECODE: Option<&'static [f32; 256]> = Some($table);
                const NAN: bool = $nan;
                #[inline(always)]
                unsafe fn load_float<V: Simd>($fv: V, $fb: *const u8, $fo: usize) -> V::Float {
                    // SAFETY: forwarded from the caller.
                    unsafe { $fvec }
                }
            )?
        }
    };
}

int_type!(
    S4,
    Some(DType::S4),
    true,
    i64,
    |b, o| crate::dtype::s4_value(nibble(b, o)) as i64,
    |v, b, o| v.load_s4(b.add(o / 2))
);
int_type!(
    U4,
    Some(DType::U4),
    true,
    i64,
    |b, o| nibble(b, o) as i64,
    |v, b, o| v.load_u4(b.add(o / 2))
);
int_type!(
    S8,
    Some(DType::S8),
    true,
    i64,
    |b, o| i8::from_le_bytes(read::<1>(b, o)) as i64,
    |v, b, o| v.load_s8(b.add(o))
);
int_type!(
    U8,
    Some(DType::U8),
    true,
    i64,
    |b, o| u8::from_le_bytes(read::<1>(b, o)) as i64,
    |v, b, o| v.load_u8(b.add(o))
);
int_type!(
    S32,
    Some(DType::S32),
    false,
    i64,
    |b, o| i32::from_le_bytes(read::<4>(b, o)) as i64,
    |v, b, o| v.load_s32(b.add(o * 4))
);
int_type!(
    S64,
    Some(DType::S64),
    false,
    i128,
    |b, o| i64::from_le_bytes(read::<8>(b, o)),
    |v, _b, _o| unreachable_vec(v)
);
int_type!(NoZp, None, true, i64, |_b, _o| 0, |v, _b, _o| v
    .splat_int(0));
int_type!(
    F8E4M3,
    Some(DType::F8E4M3),
    true,
    i64,
    |b, o| u8::from_le_bytes(read::<1>(b, o)) as i64,
    |v, b, o| v.load_u8(b.add(o)),
    float: &F8_E4M3_TABLE,
    nan: true,
    |v, b, o| v.load_f8_e4m3(b.add(o))
);
int_type!(
    F8E5M2,
    Some(DType::F8E5M2),
    true,
    i64,
    |b, o| u8::from_le_bytes(read::<1>(b, o)) as i64,
    |v, b, o| v.load_u8(b.add(o)),
    float: &F8_E5M2_TABLE,
    nan: true,
    |v, b, o| v.load_f8_e5m2(b.add(o))
);
int_type!(
    F4E2M1,
    Some(DType::F4E2M1),
    true,
    i64,
    |b, o| nibble(b, o) as i64,
    |v, b, o| v.load_u4(b.add(o / 2)),
    float: &F4_E2M1_TABLE,
    nan: false,
    |v, b, o| v.f4_e2m1(v.load_u4(b.add(o / 2)))
);

/// s64 zero points always take the exact scalar path.
#[inline(always)]
fn unreachable_vec<V: Simd>(_v: V) -> V::Int {
    unreachable!("s64 zero points take the exact path")
}

/// The table-lookup items of a 16-bit dst type.
macro_rules! lut16_items {
    () => {
        type Tab<V: Simd> = V::Tab16;
        #[inline(always)]
        fn lut_step<V: Simd>() -> usize {
            V::LUT16
        }
        #[inline(always)]
        unsafe fn tab<V: Simd>(v: V, p: *const u8) -> V::Tab16 {
            // SAFETY: forwarded from the caller.
            unsafe { v.tab16(p) }
        }
        #[inline(always)]
        unsafe fn lut<V: Simd>(v: V, t: V::Tab16, src: *const u8, dst: *mut u8) {
            // SAFETY: forwarded from the caller.
            unsafe { v.lut16(t, src, dst) }
        }
        #[inline(always)]
        unsafe fn lut_line<V: Simd>(v: V, t: V::Tab16, src: *const u8) -> V::Line {
            // SAFETY: forwarded from the caller.
            unsafe { v.lut16_line(t, src) }
        }
    };
}

impl sealed::Sealed for F32 {}
impl FloatType for F32 {
    const DTYPE: DType = DType::F32;
    const SIZE: usize = 4;
    const VECTOR: bool = true;
    type Work = f32;
    #[inline(always)]
    fn work_f32(w: f32) -> f32 {
        w
    }
    #[inline(always)]
    unsafe fn load(base: *const u8, o: usize) -> f32 {
        // SAFETY: forwarded from the caller.
        f32::from_le_bytes(unsafe { read::<4>(base, o) })
    }
    #[inline(always)]
    unsafe fn store(base: *mut u8, o: usize, y: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { write::<4>(base, o, quiet_f32(y).to_le_bytes()) }
    }
    #[inline(always)]
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float {
        // SAFETY: forwarded from the caller.
        unsafe { v.load_f32(base.add(o * 4)) }
    }
    #[inline(always)]
    unsafe fn store_vec<V: Simd>(v: V, base: *mut u8, o: usize, y: V::Float, quiet: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { v.store_f32(base.add(o * 4), y, quiet) }
    }
    type Tab<V: Simd> = V::Tab32;
    #[inline(always)]
    fn lut_step<V: Simd>() -> usize {
        V::LANES
    }
    #[inline(always)]
    unsafe fn tab<V: Simd>(v: V, p: *const u8) -> V::Tab32 {
        // SAFETY: forwarded from the caller.
        unsafe { v.tab32(p) }
    }
    #[inline(always)]
    unsafe fn lut<V: Simd>(v: V, t: V::Tab32, src: *const u8, dst: *mut u8) {
        // SAFETY: forwarded from the caller.
        unsafe { v.lut32(t, src, dst) }
    }
    #[inline(always)]
    unsafe fn lut_line<V: Simd>(v: V, t: V::Tab32, src: *const u8) -> V::Line {
        // SAFETY: forwarded from the caller.
        unsafe { v.lut32_line(t, src) }
    }
}

impl sealed::Sealed for F16 {}
impl FloatType for F16 {
    const DTYPE: DType = DType::F16;
    const SIZE: usize = 2;
    const VECTOR: bool = true;
    type Work = f32;
    #[inline(always)]
    fn work_f32(w: f32) -> f32 {
        w
    }
    #[inline(always)]
    unsafe fn load(base: *const u8, o: usize) -> f32 {
        // SAFETY: forwarded from the caller.
        f16::from_le_bytes(unsafe { read::<2>(base, o) }).to_f32()
    }
    #[inline(always)]
    unsafe fn store(base: *mut u8, o: usize, y: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { write::<2>(base, o, f32_to_f16_bits(y).to_le_bytes()) }
    }
    #[inline(always)]
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float {
        // SAFETY: forwarded from the caller.
        unsafe { v.load_f16(base.add(o * 2)) }
    }
    #[inline(always)]
    unsafe fn store_vec<V: Simd>(v: V, base: *mut u8, o: usize, y: V::Float, _quiet: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { v.store_f16(base.add(o * 2), y) }
    }
    lut16_items!();
}

impl sealed::Sealed for BF16 {}
impl FloatType for BF16 {
    const DTYPE: DType = DType::BF16;
    const SIZE: usize = 2;
    const VECTOR: bool = true;
    type Work = f32;
    #[inline(always)]
    fn work_f32(w: f32) -> f32 {
        w
    }
    #[inline(always)]
    unsafe fn load(base: *const u8, o: usize) -> f32 {
        // SAFETY: forwarded from the caller.
        bf16::from_le_bytes(unsafe { read::<2>(base, o) }).to_f32()
    }
    #[inline(always)]
    unsafe fn store(base: *mut u8, o: usize, y: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { write::<2>(base, o, f32_to_bf16_bits(y).to_le_bytes()) }
    }
    #[inline(always)]
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float {
        // SAFETY: forwarded from the caller.
        unsafe { v.load_bf16(base.add(o * 2)) }
    }
    #[inline(always)]
    unsafe fn store_vec<V: Simd>(v: V, base: *mut u8, o: usize, y: V::Float, _quiet: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { v.store_bf16(base.add(o * 2), y) }
    }
    const PAIR: bool = true;
    #[inline(always)]
    unsafe fn store_vec2<V: Simd>(v: V, base: *mut u8, o: usize, y: [V::Float; 2], _q: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { v.store_bf16x2(base.add(o * 2), y[0], y[1]) }
    }
    #[inline(always)]
    unsafe fn store_vec2_nan<V: Simd>(
        v: V,
        base: *mut u8,
        o: usize,
        y: [V::Float; 2],
        nan: V::Nan,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { v.store_bf16x2_nan(base.add(o * 2), y[0], y[1], nan) }
    }
    #[inline(always)]
    fn tab2<V: Simd>(v: V, y: [V::Float; 2]) -> V::Tab16 {
        v.tab16_bf16(y[0], y[1])
    }
    lut16_items!();
}

impl sealed::Sealed for F64 {}
impl FloatType for F64 {
    const DTYPE: DType = DType::F64;
    const SIZE: usize = 8;
    const VECTOR: bool = false;
    type Work = f64;
    fn work_f32(w: f64) -> f32 {
        w as f32
    }
    #[inline(always)]
    unsafe fn load(base: *const u8, o: usize) -> f64 {
        // SAFETY: forwarded from the caller.
        f64::from_le_bytes(unsafe { read::<8>(base, o) })
    }
    #[inline(always)]
    unsafe fn store(base: *mut u8, o: usize, y: f64) {
        // SAFETY: forwarded from the caller.
        unsafe { write::<8>(base, o, quiet_f64(y).to_le_bytes()) }
    }
    unsafe fn load_vec<V: Simd>(_v: V, _base: *const u8, _o: usize) -> V::Float {
        unreachable!("f64 dst takes the exact path")
    }
    unsafe fn store_vec<V: Simd>(_v: V, _b: *mut u8, _o: usize, _y: V::Float, _q: bool) {
        unreachable!("f64 dst takes the exact path")
    }
    type Tab<V: Simd> = ();
    fn lut_step<V: Simd>() -> usize {
        unreachable!("f64 dst takes the exact path")
    }
    unsafe fn tab<V: Simd>(_v: V, _p: *const u8) {
        unreachable!("f64 dst takes the exact path")
    }
    unsafe fn lut<V: Simd>(_v: V, _t: (), _src: *const u8, _dst: *mut u8) {
        unreachable!("f64 dst takes the exact path")
    }
}

/// Dst `D` with e8m0 scales (SPEC §10): each scale byte decoded to its exact f32
/// (by table one at a time, by bit manipulation in vectors); everything else
/// is `D`'s.
#[derive(Clone, Copy, Debug)]
pub struct E8<D>(core::marker::PhantomData<D>);

impl<D: FloatType<Work = f32>> sealed::Sealed for E8<D> {}
impl<D: FloatType<Work = f32>> FloatType for E8<D> {
    const DTYPE: DType = D::DTYPE;
    const SCALES: DType = DType::E8M0;
    const SIZE: usize = D::SIZE;
    const VECTOR: bool = D::VECTOR;
    type Work = f32;
    #[inline(always)]
    fn work_f32(w: f32) -> f32 {
        w
    }
    #[inline(always)]
    unsafe fn load(base: *const u8, o: usize) -> f32 {
        // SAFETY: forwarded from the caller (one byte per scale).
        E8M0_TABLE[u8::from_le_bytes(unsafe { read::<1>(base, o) }) as usize]
    }
    #[inline(always)]
    unsafe fn store(base: *mut u8, o: usize, y: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { D::store(base, o, y) }
    }
    #[inline(always)]
    unsafe fn load_vec<V: Simd>(v: V, base: *const u8, o: usize) -> V::Float {
        // SAFETY: forwarded from the caller (one byte per scale).
        unsafe { v.load_e8m0(base.add(o)) }
    }
    #[inline(always)]
    unsafe fn store_vec<V: Simd>(v: V, base: *mut u8, o: usize, y: V::Float, quiet: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { D::store_vec(v, base, o, y, quiet) }
    }
    const PAIR: bool = D::PAIR;
    #[inline(always)]
    unsafe fn store_vec2<V: Simd>(v: V, base: *mut u8, o: usize, y: [V::Float; 2], quiet: bool) {
        // SAFETY: forwarded from the caller.
        unsafe { D::store_vec2(v, base, o, y, quiet) }
    }
    type Tab<V: Simd> = D::Tab<V>;
    #[inline(always)]
    unsafe fn store_vec2_nan<V: Simd>(
        v: V,
        base: *mut u8,
        o: usize,
        y: [V::Float; 2],
        nan: V::Nan,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { D::store_vec2_nan(v, base, o, y, nan) }
    }
    #[inline(always)]
    fn tab2<V: Simd>(v: V, y: [V::Float; 2]) -> D::Tab<V> {
        D::tab2(v, y)
    }
    #[inline(always)]
    fn lut_step<V: Simd>() -> usize {
        D::lut_step::<V>()
    }
    #[inline(always)]
    unsafe fn tab<V: Simd>(v: V, p: *const u8) -> D::Tab<V> {
        // SAFETY: forwarded from the caller.
        unsafe { D::tab(v, p) }
    }
    #[inline(always)]
    unsafe fn lut<V: Simd>(v: V, t: D::Tab<V>, src: *const u8, dst: *mut u8) {
        // SAFETY: forwarded from the caller.
        unsafe { D::lut(v, t, src, dst) }
    }
    #[inline(always)]
    unsafe fn lut_line<V: Simd>(v: V, t: D::Tab<V>, src: *const u8) -> V::Line {
        // SAFETY: forwarded from the caller.
        unsafe { D::lut_line(v, t, src) }
    }
}
