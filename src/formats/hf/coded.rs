//! Coded linears (bitsandbytes, MLX, MXFP4) as [`Coded`] declarations over their
//! tensors as they lie in the file, and their scalar reference decoders.
//!
//! | scheme | code of `(n, k)` | value |
//! |---|---|---|
//! | bitsandbytes 4-bit | nibble `n K + k` of `weight`, high first | `quant_map[q] · absmax[(n K + k) / blocksize]` |
//! | double-quant | the same | `absmax[b] = nested_quant_map[absmax_u8[b]] · nested_absmax[b / 256] + offset` |
//! | LLM.int8 | byte `n K + k` (i8) | `(q · SCB[n]) · 0.007874016` |
//! | MLX | bits `b (n K + k)` of `weight`, LSB first | `r(r(q · scale[n, k / gs]) + bias[n, k / gs])`, `r`: round to the scales' type |
//! | MXFP4 | nibble `(e N + n) K + k` of `blocks`, low first | `e2m1[q] · 2^(scale - 127)`, output `[E, K, N]` |

use std::ops::Range;

use dq_runtime::Backend;
use dq_runtime::convert::quiet_f32;
use dq_runtime::linear::ScaleType;
use dq_runtime::linear::coded::{BitOrder, Coded, Codes, Post, Scale};
use half::{bf16, f16};
use safetensors::Dtype;

use super::error::{HfError, Result};
use super::float::FloatFormat;
use super::linear::{QuantLinear, Scheme};

/// OCP e2m1 (MXFP4) values by code.
const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// bitsandbytes' `7.874015718698502e-3` (1/127) as the f32 torch multiplies by.
const INV_127: f32 = 7.874_016e-3;

impl<'a> QuantLinear<'a> {
    /// Whether this linear is coded (bitsandbytes, MLX, MXFP4).
    pub(crate) fn is_coded(&self) -> bool {
        self.coded_info().is_some()
    }

    /// Whether this linear runs as [`Coded`] declarations: the coded families, and
    /// NVFP4 (both conventions) with one scale per 16 inputs of a row and e4m3
    /// scales (a 4-bit code stream, a group of 16, [`Scale::F8`]).
    pub(crate) fn runs_coded(&self) -> bool {
        self.is_coded() || self.nvfp4_block().is_some()
    }

    /// NVFP4's format and block size along K where it is a [`Coded`] declaration.
    fn nvfp4_block(&self) -> Option<(FloatFormat, usize)> {
        match self.scheme() {
            Scheme::Float {
                format: format @ (FloatFormat::CtNvfp4 | FloatFormat::ModelOptNvfp4),
                block_n: 1,
                block_k,
            } if block_k > 0
                && self.k().is_multiple_of(block_k as usize)
                && self.scales().dtype() == Dtype::F8_E4M3 =>
            {
                Some((format, block_k as usize))
            }
            _ => None,
        }
    }

    /// The base value of each code.
    fn coded_base(&self) -> Vec<f32> {
        if let Some((format, _)) = self.nvfp4_block() {
            let mut e2m1 = E2M1.to_vec();
            // ModelOpt's own e2m1 table holds +0.0 for code 8 (float::modelopt_zeros).
            if format == FloatFormat::ModelOptNvfp4 {
                e2m1[8] = 0.0;
            }
            return e2m1;
        }
        match self.scheme() {
            Scheme::Bnb4 { .. } => self
                .aux(0)
                .map_or_else(Vec::new, |m| floats(m.data(), Dtype::F32)),
            Scheme::Bnb8 => (0..=255u8).map(|q| f32::from(q as i8)).collect(),
            Scheme::Mxfp4 => E2M1.to_vec(),
            _ => (0..=255u8).map(f32::from).collect(),
        }
    }

    /// Rows of one plan: all of them, or one expert's `K` for MXFP4.
    fn plan_rows(&self) -> usize {
        match self.scheme() {
            Scheme::Mxfp4 => self.shape()[1],
            _ => self.n(),
        }
    }

    /// A coded linear (bitsandbytes, MLX, MXFP4) as declarations of the generated
    /// backend over its tensors where they lie: one for the whole `[N, K]` output, or
    /// one per expert (MXFP4: `K` rows of `N` each). Empty for the integer schemes
    /// ([`plan`](Self::plan)).
    ///
    /// # Errors
    /// [`HfError::Plan`] when a view reaches past its tensor (not for a linear the
    /// checkpoint reader accepted).
    pub fn coded_plans(&self) -> Result<Vec<Coded<'a>>> {
        if !self.runs_coded() {
            return Ok(Vec::new());
        }
        let base = self.coded_base();
        let per = self.plan_rows().max(1);
        (0..self.n().div_ceil(per))
            .map(|e| self.coded_plan(&base, e))
            .collect()
    }

    /// The linear (or MXFP4 expert `expert`) as one declaration.
    fn coded_plan(&self, base: &[f32], expert: usize) -> Result<Coded<'a>> {
        let (k, bytes) = (self.k(), self.packed().data());
        if let Some((format, block)) = self.nvfp4_block() {
            let codes = Codes {
                bytes,
                bits: 4,
                order: BitOrder::Lsb,
            };
            let scale = Scale::F8 {
                bytes: self.scales().data(),
                global: self.global_scale().unwrap_or(1.0),
                divide: format == FloatFormat::CtNvfp4,
            };
            return Coded::new(
                self.n(),
                k,
                codes,
                (0, k, 1),
                block,
                base,
                scale,
                Post::None,
            )
            .map_err(|source| HfError::Plan {
                linear: self.name().to_owned(),
                source,
            });
        }
        let info = self.coded_info().expect("a coded linear");
        let floats = |t: super::TensorRef<'a>| Scale::Floats {
            bytes: t.data(),
            dtype: scale_type(t.dtype()),
        };
        let (codes, strides, scale, post) = match self.scheme() {
            Scheme::Bnb4 { .. } => {
                let codes = Codes {
                    bytes,
                    bits: 4,
                    order: BitOrder::HighNibbleFirst,
                };
                let scale = match (info.nested, self.aux(1), self.aux(2)) {
                    (Some((block, offset)), Some(absmax), Some(book)) => Scale::Nested {
                        codes: self.scales().data(),
                        book: book.data(),
                        absmax: absmax.data(),
                        block,
                        offset,
                    },
                    _ => floats(self.scales()),
                };
                (codes, (0, k, 1), scale, Post::None)
            }
            Scheme::Bnb8 => {
                let codes = Codes {
                    bytes,
                    bits: 8,
                    order: BitOrder::Lsb,
                };
                (codes, (0, k, 1), floats(self.scales()), Post::Mul(INV_127))
            }
            Scheme::Mlx { bits } => {
                let codes = Codes {
                    bytes,
                    bits,
                    order: BitOrder::Lsb,
                };
                let b = self.aux(0).expect("MLX biases");
                let post = Post::Add {
                    bytes: b.data(),
                    dtype: scale_type(b.dtype()),
                };
                (codes, (0, k, 1), floats(self.scales()), post)
            }
            _ => {
                // Expert `e`'s output row `kk` (an input of the layer), column `r`.
                let rows = self.plan_rows();
                let codes = Codes {
                    bytes,
                    bits: 4,
                    order: BitOrder::Lsb,
                };
                let scale = Scale::Pow2 {
                    bytes: self.scales().data(),
                };
                (codes, (expert * k * rows, 1, rows), scale, Post::None)
            }
        };
        Coded::new(
            self.plan_rows(),
            k,
            codes,
            strides,
            info.block,
            base,
            scale,
            post,
        )
        .map_err(|source| HfError::Plan {
            linear: self.name().to_owned(),
            source,
        })
    }

    /// Whether `backend` runs this linear: every backend runs every scheme (a build
    /// without the JIT refuses `Backend::Jit` when it runs).
    ///
    /// # Errors
    /// None now; kept for callers that check before they start work.
    pub fn check_backend(&self, backend: Backend) -> Result<()> {
        let _ = backend;
        Ok(())
    }

    /// Rows of one declaration ([`coded_plans`](Self::coded_plans)): all, or one
    /// MXFP4 expert's.
    pub(crate) fn rows_per_plan(&self) -> usize {
        self.plan_rows().max(1)
    }
}

/// Rows `rows` of a coded linear's 2-D output in f32, element by element, straight
/// from its tensors (independent of [`Coded`]).
pub(crate) fn reference_rows(l: &QuantLinear<'_>, rows: Range<usize>, out: &mut [f32]) {
    let k_dim = l.k();
    if k_dim == 0 {
        return;
    }
    let value = reference_value(l);
    for (n, row) in rows.zip(out.chunks_exact_mut(k_dim)) {
        for (k, y) in row.iter_mut().enumerate() {
            *y = quiet_f32(value(n, k));
        }
    }
}

/// The format's formula for output `(n, k)`.
fn reference_value<'l>(l: &'l QuantLinear<'_>) -> Box<dyn Fn(usize, usize) -> f32 + 'l> {
    let (k_dim, w) = (l.k(), l.packed().data());
    let scales = floats(l.scales().data(), l.scales().dtype());
    let info = l.coded_info().expect("a coded linear");
    match l.scheme() {
        Scheme::Bnb4 { .. } => {
            let book = l
                .aux(0)
                .map_or_else(Vec::new, |m| floats(m.data(), Dtype::F32));
            let absmax: Vec<f32> = match (info.nested, l.aux(1), l.aux(2)) {
                (Some((nb, offset)), Some(a2), Some(b2)) => {
                    let (a2, b2) = (floats(a2.data(), Dtype::F32), floats(b2.data(), Dtype::F32));
                    let codes = l.scales().data();
                    (0..codes.len())
                        .map(|b| b2[usize::from(codes[b])] * a2[b / nb] + offset)
                        .collect()
                }
                _ => scales,
            };
            let block = info.block;
            Box::new(move |n, k| {
                let i = n * k_dim + k;
                let q = if i % 2 == 0 {
                    w[i / 2] >> 4
                } else {
                    w[i / 2] & 15
                };
                book[usize::from(q)] * absmax[i / block]
            })
        }
        Scheme::Bnb8 => Box::new(move |n, k| {
            let q = w[n * k_dim + k] as i8;
            (f32::from(q) * scales[n]) * INV_127
        }),
        Scheme::Mlx { bits } => {
            let b = l.aux(0).expect("MLX biases");
            let (biases, dtype) = (floats(b.data(), b.dtype()), b.dtype());
            let (gs, groups) = (info.block, k_dim / info.block.max(1));
            Box::new(move |n, k| {
                let bit = (n * k_dim + k) * bits as usize;
                let mut word = 0u32;
                for (i, &byte) in w[bit / 8..].iter().take(3).enumerate() {
                    word |= u32::from(byte) << (8 * i);
                }
                let q = (word >> (bit % 8)) & ((1 << bits) - 1);
                let g = n * groups + k / gs;
                let r = |x: f32| match dtype {
                    Dtype::F16 => f16::from_f32(x).to_f32(),
                    Dtype::BF16 => bf16::from_f32(x).to_f32(),
                    _ => x,
                };
                r(r(q as f32 * scales[g]) + biases[g])
            })
        }
        _ => {
            // Output [E, K, N] viewed as [E·K, N]: row n is expert n / K, input n % K.
            let shape = l.shape();
            let (kk_dim, rows) = (shape[1], shape[2]);
            let e8 = l.scales().data();
            Box::new(move |n, r| {
                let (e, kk) = (n / kk_dim, n % kk_dim);
                let row = e * rows + r;
                let byte = w[row * kk_dim / 2 + kk / 2];
                let q = if kk % 2 == 0 { byte & 15 } else { byte >> 4 };
                let x = e8[row * (kk_dim / 32) + kk / 32];
                E2M1[usize::from(q)] * 2f32.powi(i32::from(x) - 127)
            })
        }
    }
}

/// Little-endian floats of `dtype` (f16, bf16, f32) as f32.
fn floats(d: &[u8], dtype: Dtype) -> Vec<f32> {
    match dtype {
        Dtype::F16 => d
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => d
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => d
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    }
}

fn scale_type(d: Dtype) -> ScaleType {
    match d {
        Dtype::F16 => ScaleType::F16,
        Dtype::BF16 => ScaleType::BF16,
        _ => ScaleType::F32,
    }
}
