//! CPU detection and the vector instruction sets the generated kernels run on.
//!
//! Detection happens once and is cached in an atomic. `DQ_ISA=avx512|avx2|portable`
//! (read once) forces a lower ISA so every path can be tested on one machine.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::kernels::Lanes;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

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
        let forced = std::env::var("DQ_ISA").ok().and_then(|v| parse(&v));
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

/// True when outputs bigger than half the last-level cache are written with
/// non-temporal stores (`DQ_STREAM=1`, read once; default off).
///
/// Off by default because on the machine dq is tuned on (a 2-vCPU Sapphire Rapids
/// VM) one thread's non-temporal stores reach less bandwidth than ordinary
/// stores with their line reads: 16M s8 -> f32 per channel took 15.5 ms
/// streamed and 11.4 ms with ordinary stores (BENCHMARKS.md). With streaming off,
/// large outputs prefetch dst lines ahead of the stores instead (9.2 ms there).
/// Turn it on where measurements favour it.
pub fn streaming() -> bool {
    match STREAM.load(Ordering::Relaxed) {
        0 => false,
        1 => true,
        _ => {
            let on = std::env::var("DQ_STREAM").is_ok_and(|v| matches!(v.as_str(), "1" | "on"));
            // A racing `set_streaming` wins.
            let _ = STREAM.compare_exchange(2, u8::from(on), Ordering::Relaxed, Ordering::Relaxed);
            STREAM.load(Ordering::Relaxed) == 1
        }
    }
}

/// Turns streaming of large outputs on or off for the whole process (overrides
/// `DQ_STREAM`). Results are the same bits either way.
pub fn set_streaming(on: bool) {
    STREAM.store(u8::from(on), Ordering::Relaxed);
}

/// 0 off, 1 on, 2 not read yet.
static STREAM: AtomicU8 = AtomicU8::new(2);

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
    /// Looks up `LANES` 4-bit values packed at `src` (low nibble first) in `t`
    /// and stores the `LANES` entries (one vector) at `dst`.
    ///
    /// # Safety
    /// `src` is valid for reading `LANES / 2` bytes, `dst` for writing `LANES * 4`.
    unsafe fn lut32(self, t: Self::Tab32, src: *const u8, dst: *mut u8);
    /// Looks up `2 * LANES` 4-bit values packed at `src` (low nibble first) in `t`
    /// and stores the `2 * LANES` entries (one vector) at `dst`.
    ///
    /// # Safety
    /// `src` is valid for reading `LANES` bytes, `dst` for writing `LANES * 4`.
    unsafe fn lut16(self, t: Self::Tab16, src: *const u8, dst: *mut u8);
}

#[cfg(test)]
mod tests {
    use super::*;

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
