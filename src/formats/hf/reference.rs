//! Scalar reference dequantizers: a linear's packed tensors to its `[N, K]` weight.
//!
//! SPEC §11 arithmetic, element by element: `y = f32(q - z) * s` (one f32
//! multiply, no FMA), then one rounding to the output dtype. These are what the
//! generated and JIT lowerings are tested against; they favour plainness over speed.

use std::ops::Range;

use dq_runtime::DType;
use dq_runtime::convert::{quiet_f32, store_f32};
use half::{bf16, f16};
use safetensors::Dtype;

use super::checkpoint::TensorRef;
use super::config::GptqVersion;
use super::error::{HfError, Result};
use super::linear::{QuantLinear, Scheme, le_i32};

/// AWQ's nibble of column `j` of a group of 8: the inverse of `[0, 2, 4, 6, 1, 3, 5, 7]`.
const AWQ_NIBBLE: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The `[N, K]` weight in f32, row-major (`nn.Linear`'s `weight`).
pub fn dequantize_f32(linear: &QuantLinear<'_>) -> Vec<f32> {
    let mut out = vec![0f32; linear.n() * linear.k()];
    rows(linear, 0..linear.n(), &mut out);
    out
}

/// Rows `rows` of the `[N, K]` f32 weight into `out` (`rows.len() * K` elements;
/// checked by the caller, as `rows` lying inside `0..N`).
pub(crate) fn rows(linear: &QuantLinear<'_>, rows: Range<usize>, out: &mut [f32]) {
    match linear.scheme() {
        Scheme::Gptq { bits, version } => gptq(linear, bits, version, rows, out),
        Scheme::Awq => awq(linear, rows, out),
        Scheme::CompressedTensors { bits } => compressed_tensors(linear, bits, rows, out),
        Scheme::Float { .. } => super::float::reference_rows(linear, rows, out),
        _ => super::coded::reference_rows(linear, rows, out),
    }
}

/// The `[N, K]` weight as little-endian `dtype` bytes: the f32 values of
/// [`dequantize_f32`] rounded once (nearest-even) to f16 or bf16.
///
/// # Errors
/// An output dtype other than f32/f16/bf16, or `out` not `N * K * size` bytes long.
pub fn dequantize_into(linear: &QuantLinear<'_>, dtype: DType, out: &mut [u8]) -> Result<()> {
    let size = match dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 2,
        _ => return Err(HfError::UnsupportedOutput { dtype }),
    };
    let expected = linear.n() * linear.k() * size;
    if out.len() != expected {
        return Err(HfError::OutputSize {
            expected,
            got: out.len(),
        });
    }
    for (o, y) in dequantize_f32(linear).into_iter().enumerate() {
        store_f32(dtype, out, o, y);
    }
    Ok(())
}

/// GPTQ: `q` is bits `b·(k % w)` of `qweight[k / w, n]` (w = 32/b values per word), `z`
/// bits `b·(n % w)` of `qzeros[g, n / w]` (+1 for v1, no wrap), `s = scales[g, n]`, with
/// `g = g_idx[k]` or `k / group_size`.
fn gptq(l: &QuantLinear<'_>, bits: u32, version: GptqVersion, rows: Range<usize>, out: &mut [f32]) {
    let (n_dim, per_word) = (l.n(), 32 / bits as usize);
    let packed = l.packed().data();
    let zeros = l.zeros().map_or(&[][..], |z| z.data());
    let plus = u32::from(version == GptqVersion::V1);
    let zero_cols = n_dim.div_ceil(per_word);
    fill(l, rows, out, |n, k, g| {
        let q = field(packed, (k / per_word) * n_dim + n, k % per_word, bits);
        let z = field(zeros, g * zero_cols + n / per_word, n % per_word, bits) + plus;
        let s = scale(l.scales(), g * n_dim + n);
        ((q as i32 - z as i32) as f32) * s
    })
}

/// AWQ GEMM: `q` is nibble `AWQ_NIBBLE[n % 8]` of `qweight[k, n / 8]`, `z` the same nibble
/// of `qzeros[g, n / 8]`, `s = scales[g, n]`, `g = k / group_size`.
fn awq(l: &QuantLinear<'_>, rows: Range<usize>, out: &mut [f32]) {
    let (n_dim, cols) = (l.n(), l.n() / 8);
    let packed = l.packed().data();
    let zeros = l.zeros().map_or(&[][..], |z| z.data());
    fill(l, rows, out, |n, k, g| {
        let nibble = AWQ_NIBBLE[n % 8] as usize;
        let q = field(packed, k * cols + n / 8, nibble, 4);
        let z = field(zeros, g * cols + n / 8, nibble, 4);
        let s = scale(l.scales(), g * n_dim + n);
        ((q as i32 - z as i32) as f32) * s
    })
}

/// compressed-tensors: `q = field - 2^(b-1)` with the field at bits `b·(k % w)` of
/// `weight_packed[n, k / w]`; `z` the same from `weight_zero_point[n / w, g]` (bits
/// `b·(n % w)`), or 0 when symmetric; `s = weight_scale[n, g]`.
fn compressed_tensors(l: &QuantLinear<'_>, bits: u32, rows: Range<usize>, out: &mut [f32]) {
    let per_word = 32 / bits as usize;
    let offset = 1i32 << (bits - 1);
    let (groups, row_words) = (l.groups(), l.k().div_ceil(per_word));
    let packed = l.packed().data();
    let zeros = l.zeros().map(|z| z.data());
    fill(l, rows, out, |n, k, g| {
        let q = field(packed, n * row_words + k / per_word, k % per_word, bits) as i32 - offset;
        let z = zeros.map_or(0, |z| {
            field(z, (n / per_word) * groups + g, n % per_word, bits) as i32 - offset
        });
        let s = scale(l.scales(), n * groups + g);
        ((q - z) as f32) * s
    })
}

/// Rows `rows` of the `[N, K]` weight from `value(n, k, group_of(k))` into `out`, NaNs
/// quieted (SPEC §5).
fn fill(
    l: &QuantLinear<'_>,
    rows: Range<usize>,
    out: &mut [f32],
    value: impl Fn(usize, usize, usize) -> f32,
) {
    let k_dim = l.k();
    if k_dim == 0 {
        return;
    }
    let groups: Vec<usize> = (0..k_dim).map(|k| l.group_of(k)).collect();
    for (n, row) in rows.zip(out.chunks_exact_mut(k_dim)) {
        for (k, (o, &g)) in row.iter_mut().zip(&groups).enumerate() {
            *o = quiet_f32(value(n, k, g));
        }
    }
}

/// Field `index` (of `bits` bits, low bits first) of i32 word `word`.
fn field(data: &[u8], word: usize, index: usize, bits: u32) -> u32 {
    let w = le_i32(&data[4 * word..4 * word + 4]) as u32;
    (w >> (bits as usize * index)) & ((1u32 << bits) - 1)
}

/// Scale element `i` as f32 (exact for f16/bf16/f32).
fn scale(t: TensorRef<'_>, i: usize) -> f32 {
    let d = t.data();
    match t.dtype() {
        Dtype::F16 => f16::from_le_bytes([d[2 * i], d[2 * i + 1]]).to_f32(),
        Dtype::BF16 => bf16::from_le_bytes([d[2 * i], d[2 * i + 1]]).to_f32(),
        _ => f32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]),
    }
}
