//! A linear's packed tensors as a plan of the kernel compiler: affine views of the
//! bytes as they lie in the file ([`dq_runtime::linear::Linear`]), no copy.
//!
//! | scheme | weights `(n, k)` | zero points `(n, g)` | scales `(n, g)` |
//! |---|---|---|---|
//! | GPTQ | along K, word `n + (k / w) N` | along N, word `n / w + g ceil(N / w)`, `+1` in v1 | `n + g N` |
//! | AWQ | along N, word `n / 8 + k N / 8`, field `[0, 4, 1, 5, 2, 6, 3, 7][n % 8]` | the same with `g` | `n + g N` |
//! | compressed-tensors | along K, word `n ceil(K / w) + k / w`, `-2^(b-1)` | along N, word `(n / w) G + g`, `-2^(b-1)` | `n G + g` |

use dq_runtime::linear::{Groups, Linear, LinearError, Packed, Packing, ScaleType, Scales};
use safetensors::Dtype;

use super::config::GptqVersion;
use super::error::{HfError, Result};
use super::linear::{QuantLinear, Scheme};

/// AWQ's field of row `n % 8` of a word: the inverse of `[0, 2, 4, 6, 1, 3, 5, 7]`.
const AWQ_ORDER: [u8; 8] = [0, 4, 1, 5, 2, 6, 3, 7];
/// Rows of a word in order.
const IN_ORDER: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

impl<'a> QuantLinear<'a> {
    /// The linear as a plan over its packed tensors.
    ///
    /// # Errors
    /// [`HfError::Plan`] when a view reaches past its tensor (not for a linear the
    /// checkpoint reader accepted); [`HfError::NoKernel`] for a coded scheme
    /// (bitsandbytes, MLX, MXFP4), which this integer plan does not describe.
    pub fn plan(&self) -> Result<Linear<'a>> {
        let (n, g) = (self.n(), self.groups());
        let bits = self.scheme().bits();
        let w = (32 / bits) as usize;
        let packed = |packing, row_stride, col_stride, offset| Packed {
            words: self.packed().data(),
            bits,
            packing,
            row_stride,
            col_stride,
            offset,
        };
        let zeros = |order, row_stride, col_stride, offset| {
            self.zeros().map(|z| Packed {
                words: z.data(),
                bits,
                packing: Packing::Outer { order },
                row_stride,
                col_stride,
                offset,
            })
        };
        let (weights, zeros, scales) = match self.scheme() {
            Scheme::Gptq { version, .. } => {
                let plus = i32::from(version == GptqVersion::V1);
                let z = zeros(IN_ORDER, 1, n.div_ceil(w), plus);
                (packed(Packing::Inner, 1, n, 0), z, (1, n))
            }
            Scheme::Awq => {
                let order = Packing::Outer { order: AWQ_ORDER };
                (
                    packed(order, 1, n / 8, 0),
                    zeros(AWQ_ORDER, 1, n / 8, 0),
                    (1, n),
                )
            }
            Scheme::Float { .. } => {
                let why = "float weights are not packed integers: an elementwise plan runs them";
                return Err(HfError::Plan {
                    linear: self.name().to_owned(),
                    source: LinearError::View {
                        what: "weights",
                        why: why.into(),
                    },
                });
            }
            Scheme::Bnb4 { .. } | Scheme::Bnb8 | Scheme::Mlx { .. } | Scheme::Mxfp4 => {
                return Err(HfError::NoKernel {
                    linear: self.name().to_owned(),
                    scheme: self.scheme().to_string(),
                    backend: "integer linear plan",
                });
            }
            Scheme::CompressedTensors { .. } => {
                let minus = -(1i32 << (bits - 1));
                let q = packed(Packing::Inner, self.k().div_ceil(w), 1, minus);
                (q, zeros(IN_ORDER, g, 1, minus), (g, 1))
            }
        };
        let scales = Scales {
            bytes: self.scales().data(),
            dtype: scale_type(self.scales().dtype()),
            row_stride: scales.0,
            col_stride: scales.1,
        };
        // A `g_idx` that is `k / group_size` (GPTQ writes one without act-order too)
        // is the plain map: one group per run of 8 inputs, no per-input lookup.
        let size = self.group_size();
        let map = match self.g_idx() {
            Some(ix) if !ix.iter().enumerate().all(|(k, &g)| g as usize == k / size) => {
                Groups::Index(ix)
            }
            _ => Groups::Size(size),
        };
        Linear::new(n, self.k(), g, weights, zeros, scales, map).map_err(|source| HfError::Plan {
            linear: self.name().to_owned(),
            source,
        })
    }
}

/// The scale type of a float tensor (the reader admits f16, bf16 and f32 only).
fn scale_type(d: Dtype) -> ScaleType {
    match d {
        Dtype::F16 => ScaleType::F16,
        Dtype::BF16 => ScaleType::BF16,
        _ => ScaleType::F32,
    }
}
