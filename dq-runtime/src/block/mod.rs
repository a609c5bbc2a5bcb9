//! Block formats (GGUF's quantized blocks) as declarations, and the generated
//! backend's driver that runs them.
//!
//! A [`BlockDecl`] says, as data, where a block type's integers and parameters sit
//! and how they combine (see [`decl`]); [`gguf`] declares llama.cpp's types. A
//! [`BlockKernel`] is one type compiled by the generic driver for each ISA.
//!
//! ```
//! use dq_runtime::block::gguf;
//! // One Q8_0 block: d = 0.5 (f16 0x3800), then 32 signed bytes.
//! let mut block = vec![0x00, 0x38];
//! block.extend((0..32).map(|i| (i as i8 - 16) as u8));
//! let mut out = [0f32; 32];
//! gguf::kernel("Q8_0").expect("declared").run(&block, &mut out)?;
//! assert_eq!((out[0], out[31]), (-8.0, 7.5));
//! # Ok::<(), dq_runtime::block::BlockError>(())
//! ```

pub mod decl;
mod driver;
pub mod gguf;
mod out;
mod params;
mod plain;
pub mod race;
pub mod tables;

pub use crate::convert::f16_to_f32;
pub use decl::{BlockDecl, BlockFormula, BlockNode, Field, Grid, ParamNode, Table};
pub use driver::{Block, MAX_RUN, form};
pub use out::{BlockOut, vectors};
pub use params::{e8m0_half, ue4m3_half};

use crate::arch::{self, Isa};

/// Why a block kernel did not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// `bytes` is not whole blocks, or `out` is not their element count.
    #[error("{name}: {bytes} bytes are not whole {block_bytes}-byte blocks of {elements} elements")]
    Length {
        /// The block type.
        name: &'static str,
        /// Bytes given.
        bytes: usize,
        /// Elements given.
        elements: usize,
        /// Bytes per block.
        block_bytes: usize,
    },
    /// This CPU cannot run the ISA asked for.
    #[error("this CPU cannot run {isa:?} code")]
    IsaUnavailable {
        /// The ISA asked for.
        isa: Isa,
    },
}

/// Decodes whole blocks into f32, f16 or bf16 (lengths checked by the caller).
pub trait Decode {
    /// Decodes `bytes` (whole blocks) into `out` (their elements), rounding to
    /// `O` with the vectors of `V` ([`vectors`]).
    fn decode<O: BlockOut, const V: u8>(bytes: &[u8], out: &mut [O]);
}

/// A declared block type through the driver, in form `FORM` ([`form`]).
pub struct Declared<D, const FORM: usize = 0>(core::marker::PhantomData<D>);

impl<D: Block, const FORM: usize> Decode for Declared<D, FORM> {
    #[inline(always)]
    fn decode<O: BlockOut, const V: u8>(bytes: &[u8], out: &mut [O]) {
        driver::decode::<D, FORM, O, V>(bytes, out);
    }
}

/// One decoder into `O` compiled for every ISA.
#[doc(hidden)]
#[derive(Debug)]
pub struct Fns<O> {
    portable: fn(&[u8], &mut [O]),
    #[cfg(target_arch = "x86_64")]
    avx2: unsafe fn(&[u8], &mut [O]),
    #[cfg(target_arch = "x86_64")]
    avx512: unsafe fn(&[u8], &mut [O]),
}

impl<O> Clone for Fns<O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<O> Copy for Fns<O> {}

impl<O: BlockOut> Fns<O> {
    const fn of<K: Decode>() -> Fns<O> {
        Fns {
            portable: K::decode::<O, { out::vectors::PORTABLE }>,
            #[cfg(target_arch = "x86_64")]
            avx2: avx2::<K, O>,
            #[cfg(target_arch = "x86_64")]
            avx512: avx512::<K, O>,
        }
    }

    /// The four forms of declared type `D`.
    const fn forms<D: Block>() -> [Fns<O>; form::COUNT] {
        [
            Fns::of::<Declared<D, { form::OPAQUE }>>(),
            Fns::of::<Declared<D, { form::OPEN }>>(),
            Fns::of::<Declared<D, { form::OPAQUE_NT }>>(),
            Fns::of::<Declared<D, { form::OPEN_NT }>>(),
        ]
    }

    /// Runs the `isa` code.
    ///
    /// # Safety
    /// This CPU can run `isa`.
    unsafe fn run(&self, isa: Isa, bytes: &[u8], out: &mut [O]) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512 F/BW/VL/DQ, AVX2 and F16C (caller), the
            // features `avx512` is compiled with.
            Isa::Avx512 => unsafe { (self.avx512)(bytes, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 and F16C (caller).
            Isa::Avx2 => unsafe { (self.avx2)(bytes, out) },
            _ => (self.portable)(bytes, out),
        }
    }
}

/// One block type compiled for every ISA and output element (f32, f16, bf16), in
/// one form (a plain float type) or [`form::COUNT`] (a declared type: its runs
/// opaque to LLVM or not, each with plain or non-temporal stores). The forms give
/// the same bits; [`run_on`](BlockKernel::run_on) times them on its first large
/// calls and keeps the fastest, per type, ISA and output element.
#[derive(Clone, Copy, Debug)]
pub struct BlockKernel {
    /// The type's name.
    pub name: &'static str,
    /// Bytes per block.
    pub block_bytes: usize,
    /// Elements per block.
    pub block_elems: usize,
    /// The declaration, or `None` for a plain float type (F32, F16, BF16: a direct
    /// conversion).
    pub decl: Option<&'static BlockDecl>,
    f32: [Fns<f32>; form::COUNT],
    bf16: [Fns<half::bf16>; form::COUNT],
    f16: [Fns<half::f16>; form::COUNT],
    count: usize,
}

impl BlockKernel {
    /// The kernel of a declared type.
    pub const fn declared<D: Block>() -> Self {
        let d = &D::DECL;
        BlockKernel {
            f32: Fns::forms::<D>(),
            bf16: Fns::forms::<D>(),
            f16: Fns::forms::<D>(),
            count: form::COUNT,
            ..Self::of::<Declared<D>>(d.name, d.block_bytes, d.block_elems, Some(d))
        }
    }

    /// The kernel of decoder `K`.
    pub const fn of<K: Decode>(
        name: &'static str,
        block_bytes: usize,
        block_elems: usize,
        decl: Option<&'static BlockDecl>,
    ) -> Self {
        BlockKernel {
            name,
            block_bytes,
            block_elems,
            decl,
            f32: [Fns::of::<K>(); form::COUNT],
            bf16: [Fns::of::<K>(); form::COUNT],
            f16: [Fns::of::<K>(); form::COUNT],
            count: 1,
        }
    }

    /// How many forms the type is compiled in (1 or [`form::COUNT`]).
    pub fn forms(&self) -> usize {
        self.count
    }

    /// Decodes `bytes`, whole blocks, into `out` (their elements: f32, or f16/bf16
    /// rounded from the f32 values) with the ISA the generated kernels use
    /// ([`arch::selected`]).
    ///
    /// # Errors
    /// [`BlockError::Length`] when the lengths do not match.
    pub fn run<O: BlockOut>(&self, bytes: &[u8], out: &mut [O]) -> Result<(), BlockError> {
        self.run_on(arch::selected(), bytes, out)
    }

    /// [`run`](Self::run) with the code compiled for `isa`, in the form the race
    /// for (type, `isa`, output element) says; calls of fewer than [`race::MIN_ELEMENTS`] elements
    /// are not timed and run [`race::UNRACED_FORM`] until the race is over.
    ///
    /// # Errors
    /// [`BlockError::IsaUnavailable`] when this CPU cannot run `isa`;
    /// [`BlockError::Length`] when the lengths do not match.
    pub fn run_on<O: BlockOut>(
        &self,
        isa: Isa,
        bytes: &[u8],
        out: &mut [O],
    ) -> Result<(), BlockError> {
        self.check(isa, bytes, out.len())?;
        let key = (self.name, isa, O::OUT);
        let (form, timed) = if self.count < 2 {
            (0, false)
        } else if out.len() < race::MIN_ELEMENTS {
            (race::untimed_form(key), false)
        } else {
            race::next(key)
        };
        let t = std::time::Instant::now();
        // SAFETY: `check` found `isa` available.
        unsafe { O::forms(self)[form].run(isa, bytes, out) };
        if timed {
            let ns = t.elapsed().as_nanos() as f64 / out.len() as f64;
            race::report(key, form, ns);
        }
        Ok(())
    }

    /// [`run_on`](Self::run_on) with form `form` (taken modulo
    /// [`forms`](Self::forms)), for tests.
    ///
    /// # Errors
    /// As [`run_on`](Self::run_on).
    #[doc(hidden)]
    pub fn run_form<O: BlockOut>(
        &self,
        isa: Isa,
        form: usize,
        bytes: &[u8],
        out: &mut [O],
    ) -> Result<(), BlockError> {
        self.check(isa, bytes, out.len())?;
        // SAFETY: `check` found `isa` available.
        unsafe { O::forms(self)[form % self.count].run(isa, bytes, out) };
        Ok(())
    }

    /// Checks that this CPU runs `isa` and that `bytes` are whole blocks of
    /// `elements` elements.
    fn check(&self, isa: Isa, bytes: &[u8], elements: usize) -> Result<(), BlockError> {
        if !isa.available() {
            return Err(BlockError::IsaUnavailable { isa });
        }
        let whole = bytes.len().is_multiple_of(self.block_bytes);
        if !whole || bytes.len() / self.block_bytes * self.block_elems != elements {
            return Err(BlockError::Length {
                name: self.name,
                bytes: bytes.len(),
                elements,
                block_bytes: self.block_bytes,
            });
        }
        Ok(())
    }
}

/// `K::decode` compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn avx2<K: Decode, O: BlockOut>(bytes: &[u8], out: &mut [O]) {
    K::decode::<O, { out::vectors::AVX2 }>(bytes, out);
}

/// `K::decode` compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL, DQ, AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")]
unsafe fn avx512<K: Decode, O: BlockOut>(bytes: &[u8], out: &mut [O]) {
    K::decode::<O, { out::vectors::AVX512 }>(bytes, out);
}
