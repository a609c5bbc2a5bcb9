//! CPU detection and the vector instruction sets the generated kernels run on.
//!
//! Detection happens once and is cached in an atomic. `DQ_ISA=avx512|avx2|portable`
//! ([`crate::env`]) forces a lower ISA so every path can be tested on one machine.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::convert::{f16_to_f32, quiet_f32};

mod lanes;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

// What `#[dequant_kernel]` expansions instantiate (through `kernels`); not a public API.
#[doc(hidden)]
pub use lanes::Lanes;

/// An instruction set a generated kernel can run on, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Scalar Rust, any CPU.
    Portable,
    /// x86-64 AVX2 + F16C (FMA is never used: the formula is not fused).
    Avx2,
    /// x86-64 AVX-512 F + BW + VL + DQ.
    Avx512,
}

impl Isa {
    /// Every ISA, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The `DQ_ISA` spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// True when this CPU can run the ISA (ignores `DQ_ISA`).
    pub fn available(self) -> bool {
        self <= hardware()
    }
}

/// The best ISA of this CPU.
pub fn hardware() -> Isa {
    static HW: AtomicU8 = AtomicU8::new(u8::MAX);
    cached(&HW, detect)
}

/// The ISA the generated kernels use: the hardware's, lowered by `DQ_ISA`.
pub fn selected() -> Isa {
    static SEL: AtomicU8 = AtomicU8::new(u8::MAX);
    cached(&SEL, || {
        let forced = crate::env::isa().and_then(parse);
        forced.map_or(hardware(), |f| f.min(hardware()))
    })
}

/// Parses a `DQ_ISA` value.
pub fn parse(name: &str) -> Option<Isa> {
    Isa::ALL.into_iter().find(|i| i.name() == name)
}

fn cached(cell: &AtomicU8, init: impl FnOnce() -> Isa) -> Isa {
    let v = cell.load(Ordering::Relaxed);
    if let Some(&isa) = Isa::ALL.get(v as usize) {
        return isa;
    }
    let isa = init();
    cell.store(isa as u8, Ordering::Relaxed);
    isa
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    use std::arch::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("f16c");
    if avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") {
        Isa::Avx512
    } else if avx2 {
        Isa::Avx2
    } else {
        Isa::Portable
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Isa {
    Isa::Portable
}

/// True when [`f32_to_f16`] converts with vector instructions (x86-64 AVX2 and
/// F16C), so computing f16 results as f32 and converting them pays.
pub fn f16_convert() -> bool {
    hardware() >= Isa::Avx2
}

/// Writes `x` as f16 (little-endian bits) to `dst`, nearest-even with NaNs quieted
/// as F16C and `half` round: with the vector ISA's f16 stores where the CPU has
/// them (the ones the generated kernels use), else with `half`.
///
/// # Safety
/// `dst` is valid for writing `2 * x.len()` bytes and does not overlap `x`.
pub unsafe fn f32_to_f16(dst: *mut u8, x: &[f32]) {
    // SAFETY: each function runs only on a CPU with its ISA (`hardware`); the
    // buffers are the caller's.
    unsafe {
        match hardware() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86_64::f32_to_f16_avx512(dst, x),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86_64::f32_to_f16_avx2(dst, x),
            _ => f16_tail(dst, x),
        }
    }
}

/// [`f32_to_f16`] writing the whole 64-byte aligned lines of dst with
/// non-temporal stores, as [`stream_copy`] does (call [`stream_fence`] before the
/// data is read); plain [`f32_to_f16`] where the CPU has no vector conversion.
///
/// # Safety
/// As [`f32_to_f16`].
pub unsafe fn f32_to_f16_stream(dst: *mut u8, x: &[f32]) {
    // SAFETY: each function runs only on a CPU with its ISA (`hardware`); the
    // buffers are the caller's.
    unsafe {
        match hardware() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86_64::f32_to_f16_stream_avx512(dst, x),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86_64::f32_to_f16_stream_avx2(dst, x),
            _ => f16_tail(dst, x),
        }
    }
}

/// [`f32_to_f16`] with `v`'s f16 stores, `V::LANES` values a step.
///
/// # Safety
/// As [`f32_to_f16`]; the CPU has `V`'s ISA (the token proves it).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) unsafe fn f32_to_f16_with<V: Simd>(v: V, dst: *mut u8, x: &[f32]) {
    let whole = x.len() / V::LANES * V::LANES;
    for i in (0..whole).step_by(V::LANES) {
        // SAFETY: i + LANES <= x.len(): LANES f32 to read at i, LANES f16 to write
        // at byte 2i (the caller's dst holds 2 * x.len()).
        unsafe { v.store_f16(dst.add(2 * i), v.load_f32(x.as_ptr().add(i).cast())) }
    }
    // SAFETY: the rest of the caller's buffers.
    unsafe { f16_tail(dst.add(2 * whole), &x[whole..]) }
}

/// [`f32_to_f16`] one value at a time ([`f32_to_f16_bits`](crate::convert::f32_to_f16_bits)).
///
/// # Safety
/// As [`f32_to_f16`].
unsafe fn f16_tail(dst: *mut u8, x: &[f32]) {
    for (i, &v) in x.iter().enumerate() {
        let h = crate::convert::f32_to_f16_bits(v).to_le_bytes();
        // SAFETY: bytes 2i..2i + 2 are inside the caller's dst.
        unsafe { core::ptr::copy_nonoverlapping(h.as_ptr(), dst.add(2 * i), 2) }
    }
}

/// Writes `x` as bf16 (little-endian bits) to `dst`, nearest-even with NaNs
/// quieted ([`f32_to_bf16_bits`](crate::convert::f32_to_bf16_bits)): with the
/// vector ISA's bf16 stores where the CPU has them (the ones the generated kernels
/// use), else one value at a time.
///
/// # Safety
/// `dst` is valid for writing `2 * x.len()` bytes and does not overlap `x`.
pub unsafe fn f32_to_bf16(dst: *mut u8, x: &[f32]) {
    // SAFETY: each function runs only on a CPU with its ISA (`hardware`); the
    // buffers are the caller's.
    unsafe {
        match hardware() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86_64::f32_to_bf16_avx512(dst, x),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86_64::f32_to_bf16_avx2(dst, x),
            _ => bf16_tail(dst, x),
        }
    }
}

/// [`f32_to_bf16`] with `v`'s bf16 stores, `2 * V::LANES` values a step.
///
/// # Safety
/// As [`f32_to_bf16`]; the CPU has `V`'s ISA (the token proves it).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) unsafe fn f32_to_bf16_with<V: Simd>(v: V, dst: *mut u8, x: &[f32]) {
    let step = 2 * V::LANES;
    let whole = x.len() / step * step;
    for i in (0..whole).step_by(step) {
        // SAFETY: i + 2 LANES <= x.len(): 2 LANES f32 to read at i, 2 LANES bf16 to
        // write at byte 2i (the caller's dst holds 2 * x.len()).
        unsafe {
            let p = x.as_ptr().add(i);
            let a = v.load_f32(p.cast());
            let b = v.load_f32(p.add(V::LANES).cast());
            v.store_bf16x2(dst.add(2 * i), a, b)
        }
    }
    // SAFETY: the rest of the caller's buffers.
    unsafe { bf16_tail(dst.add(2 * whole), &x[whole..]) }
}

/// [`f32_to_bf16`] one value at a time.
///
/// # Safety
/// As [`f32_to_bf16`].
unsafe fn bf16_tail(dst: *mut u8, x: &[f32]) {
    for (i, &v) in x.iter().enumerate() {
        let h = crate::convert::f32_to_bf16_bits(v).to_le_bytes();
        // SAFETY: bytes 2i..2i + 2 are inside the caller's dst.
        unsafe { core::ptr::copy_nonoverlapping(h.as_ptr(), dst.add(2 * i), 2) }
    }
}

/// `x` rounded to f16 bits in `dst` ([`f32_to_f16`], safely).
///
/// # Panics
/// If the lengths differ.
pub fn narrow_f16(dst: &mut [u16], x: &[f32]) {
    assert_eq!(dst.len(), x.len(), "one f16 per f32");
    // SAFETY: dst holds x.len() u16s, 2 * x.len() bytes; a `&mut` does not overlap `x`.
    unsafe { f32_to_f16(dst.as_mut_ptr().cast(), x) }
}

/// `x` rounded to bf16 bits in `dst` ([`f32_to_bf16`], safely).
///
/// # Panics
/// If the lengths differ.
pub fn narrow_bf16(dst: &mut [u16], x: &[f32]) {
    assert_eq!(dst.len(), x.len(), "one bf16 per f32");
    // SAFETY: dst holds x.len() u16s, 2 * x.len() bytes; a `&mut` does not overlap `x`.
    unsafe { f32_to_bf16(dst.as_mut_ptr().cast(), x) }
}

/// [`narrow_f16`] (`bf16` false) or [`narrow_bf16`] (true) into `dst` by
/// non-temporal stores, fenced at the end: f16 by [`f32_to_f16_stream`]; bf16
/// converted a tile at a time into a small cache-resident buffer, then
/// [`stream_copy`].
///
/// # Panics
/// If the lengths differ.
pub fn narrow_stream(dst: &mut [u16], x: &[f32], bf16: bool) {
    assert_eq!(dst.len(), x.len(), "one 16-bit value per f32");
    if !bf16 {
        // SAFETY: dst holds x.len() u16s, 2 * x.len() bytes; a `&mut` does not
        // overlap `x`.
        unsafe { f32_to_f16_stream(dst.as_mut_ptr().cast(), x) };
        stream_fence();
        return;
    }
    const TILE: usize = 2048;
    let mut tile = [0u16; TILE];
    for (d, x) in dst.chunks_mut(TILE).zip(x.chunks(TILE)) {
        let t = &mut tile[..x.len()];
        narrow_bf16(t, x);
        let bytes: &[u8] = bytemuck::cast_slice(t);
        // SAFETY: `d` holds `t.len()` u16s, the bytes of `bytes`; a stack tile
        // does not overlap the caller's `&mut` dst.
        unsafe { stream_copy(d.as_mut_ptr().cast(), bytes) }
    }
    stream_fence();
}

/// Writes the f16 values `src` (little-endian bits) to `dst`, widened exactly
/// with NaNs quieted (as F16C and `half` widen): with the vector ISA's f16 loads
/// where the CPU has them (the ones the generated kernels use), else one at a
/// time ([`f16_to_f32`], quieted).
///
/// # Panics
/// If `src` is not `2 * dst.len()` bytes.
pub fn widen_f16(dst: &mut [f32], src: &[u8]) {
    assert_eq!(src.len(), 2 * dst.len(), "two bytes per f16");
    match hardware() {
        // SAFETY: this CPU has AVX-512 (`hardware`); the lengths match (asserted).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86_64::widen_f16_avx512(dst, src) },
        // SAFETY: this CPU has AVX2 and F16C (`hardware`); the lengths match.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86_64::widen_f16_avx2(dst, src) },
        _ => widen_f16_tail(dst, src),
    }
}

/// [`widen_f16`] with `v`'s f16 loads, `V::LANES` values a step.
///
/// # Safety
/// `src` is `2 * dst.len()` bytes; the CPU has `V`'s ISA (the token proves it).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) unsafe fn widen_f16_with<V: Simd>(v: V, dst: &mut [f32], src: &[u8]) {
    let whole = dst.len() / V::LANES * V::LANES;
    for i in (0..whole).step_by(V::LANES) {
        // SAFETY: i + LANES <= dst.len(): LANES f16 to read at byte 2i of `src`
        // (2 * dst.len() bytes), LANES f32 to write at i.
        unsafe {
            let y = v.load_f16(src.as_ptr().add(2 * i));
            v.store_f32(dst.as_mut_ptr().add(i).cast(), y, false)
        }
    }
    widen_f16_tail(&mut dst[whole..], &src[2 * whole..]);
}

/// [`widen_f16`] one value at a time.
fn widen_f16_tail(dst: &mut [f32], src: &[u8]) {
    for (y, h) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *y = quiet_f32(f16_to_f32(u16::from_le_bytes([h[0], h[1]])));
    }
}

/// Copies `src` to `dst`: the whole 64-byte aligned lines of dst with
/// non-temporal stores (the widest this CPU has), the partial lines at either
/// end with ordinary ones. Call [`stream_fence`] before the data is read.
///
/// # Safety
/// `dst` is valid for writing `src.len()` bytes and does not overlap `src`.
pub unsafe fn stream_copy(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each function runs only on a CPU with its ISA (`hardware`); the
    // buffers are the caller's.
    unsafe {
        match hardware() {
            Isa::Avx512 => x86_64::stream_copy_avx512(dst, src),
            Isa::Avx2 => x86_64::stream_copy_avx2(dst, src),
            Isa::Portable => x86_64::stream_copy_sse2(dst, src),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller promised.
    unsafe {
        core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
    }
}

/// Orders earlier non-temporal stores ([`stream_copy`]) before later stores.
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions (SSE is baseline on x86-64).
    unsafe {
        core::arch::x86_64::_mm_sfence()
    }
}

/// Hints that the line holding `p` will be written soon (the store calibration's
/// prefetch). Any address is allowed: a prefetch never faults and `p` is not
/// dereferenced.
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is baseline on x86-64; a prefetch does not access memory
    // architecturally (no fault, whatever the address).
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Size of one core's L2 cache in bytes (1 MiB when it cannot be read), clamped
/// to 256 KiB..=8 MiB: the threshold of a large output
/// ([`crate::policy::is_large_output`]). A VM reports its core's L2 as the core
/// has it, unlike the last-level cache, which may be the host's.
pub fn l2_bytes() -> usize {
    static L2: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *L2.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if let Some(n) = x86_64::l2_bytes() {
            return n.clamp(256 << 10, 8 << 20);
        }
        1 << 20
    })
}

/// Size of the last-level cache in bytes (32 MiB when it cannot be read).
pub fn llc_bytes() -> usize {
    static LLC: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LLC.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if let Some(n) = x86_64::llc_bytes() {
            return n;
        }
        32 << 20
    })
}

/// A vector ISA token: loads of every element type into `LANES` i32/f32 lanes,
/// stores of f32 lanes into every dst type, and the formula's operations.
///
/// # Safety
/// A value of an implementing type may exist only when the CPU supports its ISA;
/// its methods rely on that.
#[doc(hidden)]
pub unsafe trait Simd: Lanes {
    /// Elements per vector.
    const LANES: usize;

    /// Sign-extends `LANES` s8 values at `p`.
    ///
    /// # Safety
    /// `p` is valid for reading `LANES` bytes (same for every load below, in units
    /// of the element size; 4-bit loads read `LANES / 2` bytes).
    unsafe fn load_s8(self, p: *const u8) -> Self::Int;
    /// Zero-extends `LANES` u8 values at `p`.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_u8(self, p: *const u8) -> Self::Int;
    /// `LANES` s4 values from `LANES / 2` bytes at `p`, low nibble first.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_s4(self, p: *const u8) -> Self::Int;
    /// `LANES` u4 values from `LANES / 2` bytes at `p`, low nibble first.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_u4(self, p: *const u8) -> Self::Int;
    /// `LANES` little-endian s32 values at `p`.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_s32(self, p: *const u8) -> Self::Int;
    /// `LANES` f32 values at `p`.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_f32(self, p: *const u8) -> Self::Float;
    /// `LANES` f16 values at `p`, widened exactly.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_f16(self, p: *const u8) -> Self::Float;
    /// `LANES` bf16 values at `p`, widened exactly.
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_bf16(self, p: *const u8) -> Self::Float;
    /// `LANES` f8_e4m3 codes at `p`, decoded exactly by bit manipulation; the NaN
    /// codes give a NaN (any).
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_f8_e4m3(self, p: *const u8) -> Self::Float;
    /// `LANES` f8_e5m2 codes at `p`, decoded exactly; the NaN codes give a NaN (any).
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_f8_e5m2(self, p: *const u8) -> Self::Float;
    /// A mask of `2 * LANES` lanes, for [`NAN_MASKS`](Self::NAN_MASKS).
    type Nan: Copy;
    /// True when an f8 src's NaN codes may be found from the codes and their
    /// results replaced as they are stored ([`load_f8_any`](Self::load_f8_any),
    /// [`nan_codes`](Self::nan_codes),
    /// [`store_bf16x2_nan`](Self::store_bf16x2_nan)).
    const NAN_MASKS: bool = false;
    /// `LANES` f8 codes of dtype `t` (f8_e4m3 or f8_e5m2) at `p`, decoded as
    /// [`load_f8_e4m3`](Self::load_f8_e4m3) / [`load_f8_e5m2`](Self::load_f8_e5m2)
    /// do, except that a NaN code gives any value. Only where
    /// [`NAN_MASKS`](Self::NAN_MASKS).
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_f8_any(self, t: crate::DType, p: *const u8) -> Self::Float {
        let _ = (t, p);
        unreachable!("only where NAN_MASKS")
    }
    /// Which of the `2 * LANES` f8 codes of dtype `t` at `p` are NaN. Only where
    /// [`NAN_MASKS`](Self::NAN_MASKS).
    ///
    /// # Safety
    /// `p` is valid for reading `2 * LANES` bytes.
    unsafe fn nan_codes(self, t: crate::DType, p: *const u8) -> Self::Nan {
        let _ = (t, p);
        unreachable!("only where NAN_MASKS")
    }
    /// As [`store_bf16x2`](Self::store_bf16x2), with the bf16 of
    /// [`NAN_BITS`](crate::minifloat::NAN_BITS) in the lanes of `nan`. Only where
    /// [`NAN_MASKS`](Self::NAN_MASKS).
    ///
    /// # Safety
    /// As [`store_bf16x2`](Self::store_bf16x2).
    unsafe fn store_bf16x2_nan(self, p: *mut u8, a: Self::Float, b: Self::Float, nan: Self::Nan) {
        let _ = (p, a, b, nan);
        unreachable!("only where NAN_MASKS")
    }
    /// The f4_e2m1 values of nibbles `n` (i32 lanes, `0..16`), exactly.
    fn f4_e2m1(self, n: Self::Int) -> Self::Float;
    /// `LANES` e8m0 scales at `p`, decoded exactly, `0xff` as
    /// [`NAN_BITS`](crate::minifloat::NAN_BITS).
    ///
    /// # Safety
    /// See [`load_s8`](Self::load_s8).
    unsafe fn load_e8m0(self, p: *const u8) -> Self::Float;
    /// Every lane `v`.
    fn splat_int(self, v: i32) -> Self::Int;
    /// Every lane `v`.
    fn splat_float(self, v: f32) -> Self::Float;
    /// Stores as f32 (NaN quieted when `quiet`).
    ///
    /// # Safety
    /// `p` is valid for writing `LANES` f32.
    unsafe fn store_f32(self, p: *mut u8, y: Self::Float, quiet: bool);
    /// Stores as f16, nearest-even (NaN quieted).
    ///
    /// # Safety
    /// `p` is valid for writing `LANES` f16.
    unsafe fn store_f16(self, p: *mut u8, y: Self::Float);
    /// Stores as bf16, nearest-even (NaN quieted).
    ///
    /// # Safety
    /// `p` is valid for writing `LANES` bf16.
    unsafe fn store_bf16(self, p: *mut u8, y: Self::Float);
    /// Stores `a` then `b` as bf16, as two [`store_bf16`](Self::store_bf16) do.
    ///
    /// # Safety
    /// `p` is valid for writing `2 * LANES` bf16.
    #[inline(always)]
    unsafe fn store_bf16x2(self, p: *mut u8, a: Self::Float, b: Self::Float) {
        // SAFETY: the first and second `LANES` bf16 of the caller's span.
        unsafe {
            self.store_bf16(p, a);
            self.store_bf16(p.add(2 * Self::LANES), b);
        }
    }
    /// Orders earlier non-temporal stores before later stores.
    fn fence(self);
    /// Hints that the line holding `p` will be written soon. Any address is
    /// allowed: a prefetch never faults and `p` is not dereferenced.
    fn prefetch(self, p: *const u8);

    /// Copies `n` bytes from `src` to `dst`: whole 64-byte aligned lines of dst
    /// with non-temporal stores, the partial lines at either end with ordinary
    /// ones.
    ///
    /// # Safety
    /// `src` is valid for reading and `dst` for writing `n` bytes; they do not
    /// overlap.
    unsafe fn stream_copy(self, dst: *mut u8, src: *const u8, n: usize);

    /// A 16-entry table of 4-byte values, held in registers.
    type Tab32: Copy;
    /// A 16-entry table of 2-byte values, held in registers.
    type Tab16: Copy;
    /// Loads a table of 16 four-byte entries.
    ///
    /// # Safety
    /// `p` is valid for reading 64 bytes.
    unsafe fn tab32(self, p: *const u8) -> Self::Tab32;
    /// Loads a table of 16 two-byte entries.
    ///
    /// # Safety
    /// `p` is valid for reading 32 bytes.
    unsafe fn tab16(self, p: *const u8) -> Self::Tab16;
    /// The table of 16 bf16 entries `a` then `b` (with 16 lanes, `b` is `a`).
    #[inline(always)]
    fn tab16_bf16(self, a: Self::Float, b: Self::Float) -> Self::Tab16 {
        #[repr(align(64))]
        struct Buf([u8; 64]);
        let mut buf = Buf([0; 64]);
        // SAFETY: 2 * LANES bf16 (at most 64 bytes) into the buffer, whose
        // first 32 bytes the table reads.
        unsafe {
            self.store_bf16x2(buf.0.as_mut_ptr(), a, b);
            self.tab16(buf.0.as_ptr())
        }
    }
    /// Looks up `LANES` 4-bit values packed at `src` (low nibble first) in `t`
    /// and stores the `LANES` entries (one vector) at `dst`.
    ///
    /// # Safety
    /// `src` is valid for reading `LANES / 2` bytes, `dst` for writing `LANES * 4`.
    unsafe fn lut32(self, t: Self::Tab32, src: *const u8, dst: *mut u8);
    /// Elements per [`lut16`](Self::lut16) call (a multiple of `2 * LANES`).
    const LUT16: usize = 2 * Self::LANES;
    /// Looks up [`LUT16`](Self::LUT16) 4-bit values packed at `src` (low nibble
    /// first) in `t` and stores their 2-byte entries at `dst`.
    ///
    /// # Safety
    /// `src` is valid for reading `LUT16 / 2` bytes, `dst` for writing `LUT16 * 2`.
    unsafe fn lut16(self, t: Self::Tab16, src: *const u8, dst: *mut u8);

    /// One 64-byte line of dst held in registers (where [`LINES`](Self::LINES)).
    type Line: Copy;
    /// Whether lookups give whole lines in registers: [`lut16_line`](Self::lut16_line),
    /// [`lut32_line`](Self::lut32_line) (when `LANES * 4` is 64), [`splice`](Self::splice)
    /// and [`stream_line`](Self::stream_line) exist. Other ISAs stream through a tile.
    const LINES: bool = false;
    /// [`lut16`](Self::lut16)'s 64 bytes, in registers.
    ///
    /// # Safety
    /// `src` is valid for reading 16 bytes; only where `LINES`.
    unsafe fn lut16_line(self, t: Self::Tab16, src: *const u8) -> Self::Line {
        let _ = (t, src);
        unreachable!("only where LINES")
    }
    /// [`lut32`](Self::lut32)'s 64 bytes, in registers.
    ///
    /// # Safety
    /// `src` is valid for reading 8 bytes; only where `LINES` and `LANES` is 16.
    unsafe fn lut32_line(self, t: Self::Tab32, src: *const u8) -> Self::Line {
        let _ = (t, src);
        unreachable!("only where LINES")
    }
    /// The index [`splice`](Self::splice) takes to shift by `dwords` (0..16).
    fn splice_index(self, dwords: usize) -> Self::Line {
        let _ = dwords;
        unreachable!("only where LINES")
    }
    /// The line of 4-byte words `dwords..16` of `a` then `0..dwords` of `b`, for
    /// `idx` = [`splice_index`](Self::splice_index)`(dwords)`.
    fn splice(self, a: Self::Line, b: Self::Line, idx: Self::Line) -> Self::Line {
        let _ = (a, b, idx);
        unreachable!("only where LINES")
    }
    /// Stores a line with a non-temporal store.
    ///
    /// # Safety
    /// `dst` is 64-byte aligned and valid for writing 64 bytes; only where `LINES`.
    unsafe fn stream_line(self, dst: *mut u8, y: Self::Line) {
        let _ = (dst, y);
        unreachable!("only where LINES")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 pattern widened by each ISA's path, at lengths and offsets off
    /// a vector step, equals `half`'s widening.
    #[test]
    fn f16_widening_matches_half_for_every_pattern() {
        type WidenFn = unsafe fn(&mut [f32], &[u8]);
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut fns: Vec<(&str, WidenFn)> = vec![
            ("portable", widen_f16_tail as WidenFn),
            ("dispatch", widen_f16),
        ];
        #[cfg(target_arch = "x86_64")]
        for (isa, f) in [
            (Isa::Avx2, x86_64::widen_f16_avx2 as WidenFn),
            (Isa::Avx512, x86_64::widen_f16_avx512),
        ] {
            if isa.available() {
                fns.push((isa.name(), f));
            } else {
                eprintln!("SKIPPED (path unavailable): f16 widening {}", isa.name());
            }
        }
        let src: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        for (name, f) in fns {
            for (skip, len) in [(0, 1 << 16), (1, 100), (3, 17), (5, 0), (7, 65_000)] {
                let bytes = &src[2 * skip..2 * (skip + len)];
                let mut got = vec![0f32; len];
                // SAFETY: `bytes` holds 2 * len bytes; the ISA was checked above.
                unsafe { f(&mut got, bytes) };
                for (i, y) in got.iter().enumerate() {
                    let h = (skip + i) as u16;
                    let want = half::f16::from_bits(h).to_f32().to_bits();
                    assert_eq!(y.to_bits(), want, "{name}: {h:#06x} at {i} of {len}");
                }
            }
        }
    }

    #[test]
    fn parse_names_and_order() {
        for isa in Isa::ALL {
            assert_eq!(parse(isa.name()), Some(isa));
        }
        assert_eq!(parse("sse"), None);
        assert!(Isa::Portable.available());
        assert!(selected() <= hardware());
        assert!(llc_bytes() >= 1 << 20);
    }
}
