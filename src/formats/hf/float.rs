//! Linears whose weights are floats with block scales: FP8 e4m3 (`quant_method:
//! "fp8"`, compressed-tensors `float-quantized`) and NVFP4 e2m1 (compressed-tensors
//! `nvfp4-pack-quantized`, NVIDIA ModelOpt).
//!
//! Element `(n, k)` is `x * s`: `x` the exact f32 value of the weight's code, `s` the
//! f32 scale of block `(n / bn, k / bk)` (partial blocks at the edges), one f32
//! multiply, then one rounding to the output dtype. NVFP4's two-level scale is
//! first made one f32 per block, as each reference does: compressed-tensors
//! `scale / weight_global_scale` (the global scale is stored as a reciprocal),
//! ModelOpt `scale * weight_scale_2` (and ModelOpt's e2m1 table has +0.0 for code 8:
//! [`modelopt_zeros`]). That is the runtime's `DynamicDequantize` of
//! an `f8_e4m3` or `f4_e2m1` source per group `[bn, bk]` with f32 scales (SPEC §10),
//! so the generated backend and the JIT run it as that plan over the weight's bytes
//! where they lie; the block scales of the rows a thread decodes are made f32 first.
//! NVFP4 with e4m3 scales per 16 inputs of a row runs as a coded declaration instead
//! (`coded.rs`: `Scale::F8`, ModelOpt's own e2m1 table), the same values.

use std::ops::Range;
use std::sync::Mutex;

use dq_runtime::convert::quiet_f32;
use dq_runtime::minifloat;
use dq_runtime::{DType, DynamicDequantize, Op, Plan, Tensor, TensorDesc, TensorMut};
use half::{bf16, f16};
use safetensors::Dtype;

use super::checkpoint::TensorRef;
use super::error::{HfError, Result};
use super::linear::{QuantLinear, Scheme};
use crate::Options;
use crate::formats::element::{self, Element};

/// A float-weight format: which code, how its two scales combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatFormat {
    /// `quant_method: "fp8"` (DeepSeek-V3, Kimi-K2, Qwen3-*-FP8): `weight` F8_E4M3,
    /// `weight_scale_inv` f32, bf16 or F8_E8M0 per `weight_block_size` block.
    Fp8,
    /// compressed-tensors `float-quantized`: `weight` F8_E4M3, `weight_scale` per
    /// tensor, channel, group or block.
    CtFp8,
    /// compressed-tensors `nvfp4-pack-quantized`: `weight_packed` U8 (e2m1 pairs, low
    /// nibble first), `weight_scale` F8_E4M3 per 16 inputs, `weight_global_scale`
    /// f32, divided by.
    CtNvfp4,
    /// NVIDIA ModelOpt NVFP4: `weight` U8 (e2m1 pairs), `weight_scale` F8_E4M3 per 16
    /// inputs, `weight_scale_2` f32, multiplied by.
    ModelOptNvfp4,
}

impl FloatFormat {
    /// The weight's element type.
    pub fn element(self) -> DType {
        match self {
            FloatFormat::Fp8 | FloatFormat::CtFp8 => DType::F8E4M3,
            FloatFormat::CtNvfp4 | FloatFormat::ModelOptNvfp4 => DType::F4E2M1,
        }
    }

    /// `s` of a block from its stored scale `block` and the global scale `global`.
    pub fn combine(self, block: f32, global: f32) -> f32 {
        match self {
            FloatFormat::CtNvfp4 => block / global,
            FloatFormat::ModelOptNvfp4 => block * global,
            FloatFormat::Fp8 | FloatFormat::CtFp8 => block,
        }
    }
}

/// Scale `i` of a block-scale tensor as f32 (exact for every dtype admitted: f32,
/// f16, bf16, F8_E4M3, and F8_E8M0's `2^(e-127)`, `0xFF` NaN).
pub(super) fn scale(t: TensorRef<'_>, i: usize) -> f32 {
    let d = t.data();
    match t.dtype() {
        Dtype::BF16 => bf16::from_le_bytes([d[2 * i], d[2 * i + 1]]).to_f32(),
        Dtype::F16 => f16::from_le_bytes([d[2 * i], d[2 * i + 1]]).to_f32(),
        Dtype::F8_E8M0 => minifloat::e8m0_to_f32(d[i]),
        Dtype::F8_E4M3 => minifloat::f8_e4m3_to_f32(d[i]),
        _ => f32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]),
    }
}

/// The linear's format, block and global scale (`None` for another scheme).
fn layout(l: &QuantLinear<'_>) -> Option<(FloatFormat, usize, usize, f32)> {
    match l.scheme() {
        Scheme::Float {
            format,
            block_n,
            block_k,
        } => Some((
            format,
            block_n as usize,
            block_k as usize,
            l.global_scale().unwrap_or(1.0),
        )),
        _ => None,
    }
}

/// The f32 value of weight element `o` (row-major index): OCP e2m1 and e4m3, but
/// ModelOpt's own table for its NVFP4, whose code 8 is `+0.0` ([`modelopt_zeros`]).
fn code(format: FloatFormat, x: &[u8], o: usize) -> f32 {
    match format.element() {
        DType::F4E2M1 => match (x[o / 2] >> (4 * (o % 2))) & 15 {
            8 if format == FloatFormat::ModelOptNvfp4 => 0.0,
            q => minifloat::f4_e2m1_to_f32(q),
        },
        _ => minifloat::f8_e4m3_to_f32(x[o]),
    }
}

/// ModelOpt's `e2m1_values` (`nvfp4_tensor.py`) holds `0` (+0.0) for code 8 where
/// OCP e2m1, the runtime's `f4_e2m1` the plans decode, has -0.0; every other code
/// agrees. A code-8 output is that zero times its block's scale: where the plan
/// gave a zero, ModelOpt's is the other zero (a NaN scale gives the same NaN
/// either way). Flips those signs in `out`, the f32 outputs of `codes` (two a
/// byte, low nibble first). A fix-up of the plan's outputs rather than a
/// declaration: the runtime's element types are OCP's, and this one difference is
/// the sign of a zero.
fn modelopt_zeros(codes: &[u8], out: &mut [f32]) {
    // Branch-free on the bits, 16 outputs a step, so that it vectorizes: the
    // sign flips where the code is 8 and the output is a zero (bits << 1 == 0).
    let flip = |y: &mut u32, q: u8| *y ^= (u32::from(q == 8) & u32::from(*y << 1 == 0)) << 31;
    let out: &mut [u32] = bytemuck::cast_slice_mut(out);
    let mut steps = out.chunks_exact_mut(16);
    let mut bytes = codes.chunks_exact(8);
    for (o, b) in (&mut steps).zip(&mut bytes) {
        for (i, y) in o.iter_mut().enumerate() {
            flip(y, (b[i / 2] >> (4 * (i % 2))) & 15);
        }
    }
    let rest = steps.into_remainder();
    for (i, y) in rest.iter_mut().enumerate() {
        flip(y, (bytes.remainder()[i / 2] >> (4 * (i % 2))) & 15);
    }
}

/// The reference: rows `rows` of the f32 weight, element by element (NaN codes as
/// the runtime gives them, SPEC §10).
pub(super) fn reference_rows(l: &QuantLinear<'_>, rows: Range<usize>, out: &mut [f32]) {
    let Some((format, block_n, block_k, global)) = layout(l) else {
        return;
    };
    let (k_dim, x) = (l.k(), l.packed().data());
    let cols = k_dim.div_ceil(block_k);
    for (n, row) in rows.zip(out.chunks_exact_mut(k_dim.max(1))) {
        for (k, o) in row.iter_mut().enumerate() {
            let stored = scale(l.scales(), (n / block_n) * cols + k / block_k);
            let s = format.combine(stored, global);
            let v = code(format, x, n * k_dim + k);
            *o = if v.is_nan() { v } else { quiet_f32(v * s) };
        }
    }
}

/// The weight through the runtime's plan on `opts`' backend, into `out` (`N * K`
/// elements, checked by the caller).
pub(super) fn dequantize<T: Element>(
    l: &QuantLinear<'_>,
    out: &mut [T],
    opts: &Options,
) -> Result<()> {
    let Some((format, block_n, block_k, global)) = layout(l) else {
        return Ok(());
    };
    let (n, k) = (l.n(), l.k());
    if n == 0 || k == 0 {
        return Ok(());
    }
    let op: Op = DynamicDequantize::per_group(vec![block_n as i64, block_k as i64]).into();
    let bands = Bands {
        l,
        op: &op,
        format,
        global,
        block_n,
        cols: k.div_ceil(block_k),
    };
    // The kernel, chosen once on the first band's plan (every plan has its key).
    let first = bands.plan(0..n.min(block_n))?;
    let kernel = crate::backends()
        .select(opts.backend(), &first)
        .map_err(|e| bands.error(e))?;
    let failed = Mutex::new(None);
    let decode = |rows: Range<usize>, part: &mut [T]| {
        let done = match T::as_f32_mut(part) {
            Some(f32s) => bands.rows(kernel, rows, f32s),
            None => bands.rows_rounded(kernel, rows, part),
        };
        if let Err(e) = done {
            let mut slot = failed.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(e);
        }
    };
    opts.scope(|| element::split_direct(out, k, opts.threads(), &decode));
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// f32 elements decoded per plan for a 16-bit output (a thread's buffer, in L2).
const PIECE: usize = 1 << 16;

/// Plans made so far, by `(rows, bands)`.
#[derive(Default)]
struct Plans(Vec<((usize, usize), Plan)>);

/// What every plan over a run of rows shares.
struct Bands<'a, 'l> {
    l: &'a QuantLinear<'l>,
    op: &'a Op,
    format: FloatFormat,
    global: f32,
    block_n: usize,
    cols: usize,
}

impl Bands<'_, '_> {
    fn error(&self, source: dq_runtime::Error) -> HfError {
        HfError::Runtime {
            linear: self.l.name().to_owned(),
            source: Box::new(source),
        }
    }

    /// The plan of `rows`, which start on a band boundary or end in the band they
    /// start in (so the group map's blocks are the checkpoint's).
    fn plan(&self, rows: Range<usize>) -> Result<Plan> {
        let shape = [rows.len(), self.l.k()];
        let bands = rows.len().div_ceil(self.block_n);
        Plan::new(
            self.op,
            &TensorDesc::new(self.format.element(), &shape),
            Some(&TensorDesc::new(DType::F32, &[bands, self.cols])),
            None,
            &TensorDesc::new(DType::F32, &shape),
        )
        .map_err(|e| self.error(e))
    }

    /// Rows `rows` into a 16-bit `out`: runs of rows decoded into an f32 buffer of
    /// about [`PIECE`] elements, then rounded once.
    fn rows_rounded<T: Element>(
        &self,
        kernel: &dyn dq_runtime::Kernel,
        rows: Range<usize>,
        out: &mut [T],
    ) -> Result<()> {
        let k = self.l.k();
        let step = (PIECE / k).max(1);
        let mut buf = vec![0f32; step.min(rows.len()) * k];
        let _plain = element::scratch();
        let mut plans = Plans::default();
        for (i, chunk) in out.chunks_mut(step * k).enumerate() {
            let start = rows.start + i * step;
            let buf = &mut buf[..chunk.len()];
            self.rows_with(kernel, start..start + chunk.len() / k, buf, &mut plans)?;
            T::from_f32s(chunk, buf, false);
        }
        Ok(())
    }

    /// Rows `rows` into `buf`: a plan for the rows up to the first band boundary,
    /// one for the rest.
    fn rows(
        &self,
        kernel: &dyn dq_runtime::Kernel,
        rows: Range<usize>,
        buf: &mut [f32],
    ) -> Result<()> {
        self.rows_with(kernel, rows, buf, &mut Plans::default())
    }

    /// [`rows`](Self::rows), the plans kept in `plans` by their rows and bands (a
    /// 16-bit output's pieces of one band share one).
    fn rows_with(
        &self,
        kernel: &dyn dq_runtime::Kernel,
        rows: Range<usize>,
        buf: &mut [f32],
        plans: &mut Plans,
    ) -> Result<()> {
        let k = self.l.k();
        let per_row = if self.format.element() == DType::F4E2M1 {
            k / 2
        } else {
            k
        };
        let x = self.l.packed().data();
        let mut at = rows.start;
        while at < rows.end {
            let band = at / self.block_n;
            let end = match at % self.block_n {
                0 => rows.end,
                _ => rows.end.min((band + 1) * self.block_n),
            };
            let bands = band..end.div_ceil(self.block_n);
            let scales: Vec<f32> = (bands.start * self.cols..bands.end * self.cols)
                .map(|i| self.format.combine(scale(self.l.scales(), i), self.global))
                .collect();
            let key = (end - at, bands.len());
            let plan = match plans.0.iter().position(|(k, _)| *k == key) {
                Some(i) => &plans.0[i].1,
                None => {
                    plans.0.push((key, self.plan(at..end)?));
                    &plans.0[plans.0.len() - 1].1
                }
            };
            let bytes = &x[at * per_row..end * per_row];
            let src = Tensor::from_bytes(self.format.element(), &[end - at, k], bytes);
            let scales = Tensor::from_slice(&scales, &[bands.len(), self.cols]);
            let part = &mut buf[(at - rows.start) * k..(end - rows.start) * k];
            let mut dst = TensorMut::from_slice(part, &[end - at, k]);
            let mut job = plan
                .bind(&src, Some(&scales), None, &mut dst)
                .map_err(|e| self.error(e))?;
            job.run(kernel).map_err(|e| self.error(e))?;
            if self.format == FloatFormat::ModelOptNvfp4 {
                modelopt_zeros(bytes, part);
            }
            at = end;
        }
        Ok(())
    }
}
