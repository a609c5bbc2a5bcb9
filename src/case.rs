//! Owned cases: an op with its tensors' descriptors and bytes, generated from a seed
//! and run on any kernel, and [`Rng`], the seeded generator behind every piece of
//! synthetic data. The CLI (`dq bench`, `dq demo`, `dq model`), the benches and the
//! tests share both.
//!
//! ```
//! use dq::case::Case;
//! use dq::kernel::Reference;
//! use dq::{DType, DynamicDequantize, TensorDesc};
//! // u4 weights [4, 256] in groups of 1x128 with u4 zero points, to bf16.
//! let params = [4, 2];
//! let case = Case::generate(
//!     DynamicDequantize::per_group(vec![1, 128]).into(),
//!     TensorDesc::new(DType::U4, &[4, 256]),
//!     Some(TensorDesc::new(DType::BF16, &params)),
//!     Some(TensorDesc::new(DType::U4, &params)),
//!     TensorDesc::new(DType::BF16, &[4, 256]),
//!     7,
//! )?;
//! let want = case.run(&Reference::default())?;
//! assert_eq!(want.len(), 4 * 256 * 2);
//! let plan = case.plan()?;
//! let kernel = dq::backends().select(dq::Backend::Auto, &plan)?;
//! assert_eq!(case.run_parallel(kernel, 2)?, want);
//! # Ok::<(), dq::Error>(())
//! ```

use std::fmt;

use half::{bf16, f16};

use crate::kernel::Kernel;
use crate::{DType, Dequantize, Job, Op, Plan, Qtype, Result, Role, Tensor, TensorDesc, TensorMut};
use dq_runtime::plan::normalize_axis;

pub use dq_runtime::rng::Rng;

/// A tensor descriptor and the bytes it owns (little-endian, 4-bit packed).
#[derive(Clone, PartialEq, Eq)]
pub struct OwnedTensor {
    /// Dtype, shape and layout.
    pub desc: TensorDesc,
    /// The buffer the view lies in.
    pub data: Vec<u8>,
}

impl OwnedTensor {
    /// A tensor over `data`.
    pub fn new(desc: TensorDesc, data: Vec<u8>) -> OwnedTensor {
        OwnedTensor { desc, data }
    }

    /// A borrowed view.
    pub fn view(&self) -> Tensor<'_> {
        Tensor {
            desc: self.desc.clone(),
            data: &self.data,
        }
    }
}

impl fmt::Debug for OwnedTensor {
    /// The descriptor and at most 256 bytes in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [", self.desc.describe())?;
        for (i, b) in self.data.iter().take(256).enumerate() {
            write!(f, "{}{b:02x}", if i == 0 { "" } else { " " })?;
        }
        write!(f, "]")?;
        if self.data.len() > 256 {
            write!(f, " ... ({} bytes)", self.data.len())?;
        }
        Ok(())
    }
}

/// One dequantization with its data: the op, its inputs and the dst view.
#[derive(Clone)]
pub struct Case {
    /// The op (the static op holds its scales and zero points).
    pub op: Op,
    /// Src view and bytes.
    pub src: OwnedTensor,
    /// Scales (dynamic and axes ops).
    pub scales: Option<OwnedTensor>,
    /// Zero points as a tensor (dynamic and axes ops), where the case has them.
    pub zps: Option<OwnedTensor>,
    /// Dst view and the bytes an output buffer starts as: [`run`](Self::run) returns
    /// them with the view written, bytes outside it untouched.
    pub dst: OwnedTensor,
}

impl Case {
    /// A case with random data of the sizes its views need, from `seed`: integers of
    /// their dtype (s32 within +-1000, so results stay ordinary numbers), scales in
    /// `[2^-10, 2^-4)`, a zeroed dst. The static op gets random scales, one per
    /// channel, and random zero points in `-100..=100` when its `zps` is `Some`.
    /// Nothing is validated: [`plan`](Self::plan) does that.
    ///
    /// # Errors
    /// [`Error::Overflow`](crate::Error::Overflow) or
    /// [`Error::StridesRank`](crate::Error::StridesRank) for a view whose size cannot
    /// be computed.
    pub fn generate(
        mut op: Op,
        src: TensorDesc,
        scales: Option<TensorDesc>,
        zps: Option<TensorDesc>,
        dst: TensorDesc,
        seed: u64,
    ) -> Result<Case> {
        let mut rng = Rng::new(seed);
        let src_bytes = int_bytes(&mut rng, src.dtype, src.required_bytes(Role::Src)?);
        if let Op::Dequantize(o) = &mut op {
            fill_static_lists(o, &src.shape, &mut rng);
        }
        let mut owned = |d: TensorDesc, role: Role, make: Generator| -> Result<OwnedTensor> {
            let bytes = make(&mut rng, d.dtype, d.required_bytes(role)?);
            Ok(OwnedTensor::new(d, bytes))
        };
        let scales = scales
            .map(|d| owned(d, Role::Scales, scale_bytes))
            .transpose()?;
        let zps = zps.map(|d| owned(d, Role::Zps, int_bytes)).transpose()?;
        let dst_bytes = vec![0; dst.required_bytes(Role::Dst)?];
        Ok(Case {
            op,
            src: OwnedTensor::new(src, src_bytes),
            scales,
            zps,
            dst: OwnedTensor::new(dst, dst_bytes),
        })
    }

    /// The validated plan.
    ///
    /// # Errors
    /// Any validation [`Error`](crate::Error) of [`Plan::new`].
    pub fn plan(&self) -> Result<Plan> {
        Plan::new(
            &self.op,
            &self.src.desc,
            self.scales.as_ref().map(|t| &t.desc),
            self.zps.as_ref().map(|t| &t.desc),
            &self.dst.desc,
        )
    }

    /// Binds the case's inputs and `dst` (a view over the caller's output buffer,
    /// usually with the case's dst descriptor) to `plan`.
    ///
    /// # Errors
    /// Any [`Plan::bind`] error.
    pub fn bind<'a>(&'a self, plan: &'a Plan, dst: &'a mut TensorMut<'_>) -> Result<Job<'a>> {
        plan.bind(
            &self.src.view(),
            self.scales.as_ref().map(OwnedTensor::view).as_ref(),
            self.zps.as_ref().map(OwnedTensor::view).as_ref(),
            dst,
        )
    }

    /// Binds the case to `plan` with `out` as the dst buffer and calls `f` on the job.
    ///
    /// # Errors
    /// Any [`Plan::bind`] error; `f` is not called then.
    pub fn with_job<R>(
        &self,
        plan: &Plan,
        out: &mut [u8],
        f: impl FnOnce(&mut Job<'_>) -> R,
    ) -> Result<R> {
        let mut dst = TensorMut {
            desc: self.dst.desc.clone(),
            data: out,
        };
        let mut job = self.bind(plan, &mut dst)?;
        Ok(f(&mut job))
    }

    /// Runs `kernel` on the caller's thread ([`Job::run`]) and returns the dst bytes.
    ///
    /// # Errors
    /// A validation error, or the kernel's refusal.
    pub fn run(&self, kernel: &dyn Kernel) -> Result<Vec<u8>> {
        let plan = self.plan()?;
        let mut out = self.dst.data.clone();
        self.with_job(&plan, &mut out, |job| job.run(kernel))??;
        Ok(out)
    }

    /// Runs `kernel` on `threads` threads ([`Job::run_parallel`]) and returns the dst
    /// bytes.
    ///
    /// # Errors
    /// A validation error, zero threads, or the kernel's refusal.
    pub fn run_parallel(&self, kernel: &dyn Kernel, threads: usize) -> Result<Vec<u8>> {
        let plan = self.plan()?;
        let mut out = self.dst.data.clone();
        self.with_job(&plan, &mut out, |job| job.run_parallel(kernel, threads))??;
        Ok(out)
    }

    /// Runs `kernel` on `threads` threads into the case's own dst bytes, without the
    /// copy [`run_parallel`](Self::run_parallel) makes (for outputs too large to hold
    /// twice).
    ///
    /// # Errors
    /// A [`Plan::bind`] error, zero threads, or the kernel's refusal.
    pub fn run_in_place(&mut self, plan: &Plan, kernel: &dyn Kernel, threads: usize) -> Result<()> {
        let Case {
            src,
            scales,
            zps,
            dst,
            ..
        } = self;
        let mut out = TensorMut {
            desc: dst.desc.clone(),
            data: &mut dst.data,
        };
        plan.bind(
            &src.view(),
            scales.as_ref().map(OwnedTensor::view).as_ref(),
            zps.as_ref().map(OwnedTensor::view).as_ref(),
            &mut out,
        )?
        .run_parallel(kernel, threads)
    }
}

impl fmt::Debug for Case {
    /// The op and every view, with at most 256 bytes of each input in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Case {{ op: {:?}", self.op)?;
        writeln!(f, "  src: {:?}", self.src)?;
        if let Some(t) = &self.scales {
            writeln!(f, "  scales: {t:?}")?;
        }
        if let Some(t) = &self.zps {
            writeln!(f, "  zps: {t:?}")?;
        }
        let d = &self.dst;
        write!(
            f,
            "  dst: {} ({} bytes) }}",
            d.desc.describe(),
            d.data.len()
        )
    }
}

/// Makes `bytes` bytes of random data of a dtype.
type Generator = fn(&mut Rng, DType, usize) -> Vec<u8>;

/// Random scales for the static op, one per channel of `shape`, and random zero
/// points in `-100..=100` when it has a zero-point list.
fn fill_static_lists(o: &mut Dequantize, shape: &[usize], rng: &mut Rng) {
    let n = match o.qtype {
        Qtype::PerChannel => normalize_axis(o.axis, shape.len()).map_or(1, |a| shape[a]),
        _ => 1,
    };
    o.scales = (0..n).map(|_| scale(rng)).collect();
    if o.zps.is_some() {
        o.zps = Some(
            (0..n)
                .map(|_| (rng.next_u64() % 201) as i64 - 100)
                .collect(),
        );
    }
}

/// `bytes` bytes of random integers of `dtype` (s32 within +-1000).
fn int_bytes(rng: &mut Rng, dtype: DType, bytes: usize) -> Vec<u8> {
    if dtype == DType::S32 {
        return (0..bytes / 4)
            .flat_map(|_| ((rng.next_u64() % 2001) as i32 - 1000).to_le_bytes())
            .collect();
    }
    let mut v = vec![0; bytes];
    rng.fill(&mut v);
    v
}

/// A scale in `[2^-10, 2^-4)`.
fn scale(rng: &mut Rng) -> f32 {
    let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    (1.0 + u * 63.0) / 1024.0
}

/// `bytes` bytes of scales stored as `dtype` (e8m0: powers of two; random integers
/// for a dtype that is not a float, which validation then refuses).
fn scale_bytes(rng: &mut Rng, dtype: DType, bytes: usize) -> Vec<u8> {
    let encode: fn(f32) -> Vec<u8> = match dtype {
        DType::F16 => |s| f16::from_f32(s).to_le_bytes().to_vec(),
        DType::BF16 => |s| bf16::from_f32(s).to_le_bytes().to_vec(),
        DType::F32 => |s| s.to_le_bytes().to_vec(),
        DType::F64 => |s| f64::from(s).to_le_bytes().to_vec(),
        // e8m0: 2^-10 ..= 2^-4, the range of the other dtypes' scales.
        DType::E8M0 => {
            return (0..bytes)
                .map(|_| 117 + (rng.next_u64() % 7) as u8)
                .collect();
        }
        _ => return int_bytes(rng, dtype, bytes),
    };
    let n = bytes / (dtype.bits() / 8);
    (0..n).flat_map(|_| encode(scale(rng))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AxesDequantize;
    use crate::kernel::Reference;

    #[test]
    fn splitmix64_known_values() {
        // The first outputs for seed 0 (Vigna's reference implementation).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn bytes_and_fill_take_their_draws() {
        let mut a = Rng::new(5);
        let mut b = Rng::new(5);
        let x = b.next_u64();
        assert_eq!(a.bytes(2), [x as u8, b.next_u64() as u8]);
        let mut buf = [0u8; 11];
        let mut c = Rng::new(9);
        c.fill(&mut buf);
        let mut d = Rng::new(9);
        assert_eq!(buf[..8], d.next_u64().to_le_bytes());
        assert_eq!(buf[8..], d.next_u64().to_le_bytes()[..3]);
        assert_eq!(c.next_u64(), d.next_u64());
    }

    #[test]
    fn generate_sizes_values_and_seeds() {
        let src = TensorDesc::new(DType::S32, &[3, 5]);
        let params = TensorDesc::new(DType::F16, &[5]);
        let op: Op = AxesDequantize::new(vec![1]).into();
        let dst = TensorDesc::new(DType::F16, &[3, 5]);
        let make = |seed| {
            Case::generate(
                op.clone(),
                src.clone(),
                Some(params.clone()),
                Some(TensorDesc::new(DType::S32, &[5])),
                dst.clone(),
                seed,
            )
            .unwrap()
        };
        let c = make(3);
        assert_eq!(c.src.data.len(), 60);
        assert_eq!(c.scales.as_ref().unwrap().data.len(), 10);
        assert_eq!(c.zps.as_ref().unwrap().data.len(), 20);
        assert_eq!(c.dst.data, [0; 30]);
        for q in c.src.data.chunks(4) {
            let v = i32::from_le_bytes(q.try_into().unwrap());
            assert!((-1000..=1000).contains(&v), "{v}");
        }
        for s in c.scales.as_ref().unwrap().data.chunks(2) {
            let v = f16::from_le_bytes([s[0], s[1]]).to_f32();
            assert!((2f32.powi(-10)..=2f32.powi(-4)).contains(&v), "{v}");
        }
        assert_eq!(make(3).src.data, c.src.data);
        assert_ne!(make(4).src.data, c.src.data);
        let out = c.run(&Reference::default()).unwrap();
        assert_eq!(out.len(), 30);
        assert_eq!(c.run_parallel(&Reference::default(), 3).unwrap(), out);
    }

    #[test]
    fn generate_fills_the_static_lists() {
        let src = TensorDesc::new(DType::S8, &[4, 3]);
        let dst = TensorDesc::new(DType::F32, &[4, 3]);
        let op: Op = crate::Dequantize::new(vec![])
            .per_channel(0)
            .zps(vec![])
            .into();
        let c = Case::generate(op, src, None, None, dst, 1).unwrap();
        let Op::Dequantize(o) = &c.op else {
            unreachable!()
        };
        assert_eq!(o.scales.len(), 4);
        let zps = o.zps.as_ref().unwrap();
        assert_eq!(zps.len(), 4);
        assert!(zps.iter().all(|z| (-100..=100).contains(z)), "{zps:?}");
        let mut c2 = c.clone();
        c2.run_in_place(&c.plan().unwrap(), &Reference::default(), 2)
            .unwrap();
        assert_eq!(c2.dst.data, c.run(&Reference::default()).unwrap());
    }
}
