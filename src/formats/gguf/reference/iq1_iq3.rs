//! Reference decoders of IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and TQ1_0 from gguf-py
//! 0.19.0's `quants.py` (its NumPy order: signs multiplied as ±1, IQ1's delta added
//! to the grid value before the scale, as the declarations do not), and of Q8_1 and Q1_0
//! from ggml's C (gguf-py decodes neither). The codebooks are ggml's, shared with
//! the declarations (the committed gguf-py outputs check them).

use super::f16_at;
use dq_runtime::block::tables::{IQ1S_GRID_U64, IQ3S_GRID_U32, IQ3XXS_GRID_U32, KSIGNS_IQ2XS_U8};

/// `a * b` where a NaN `a` is the result (quieted), as x86-64 multiplies (Rust may
/// turn a product by -1 into a negation, which flips a NaN's sign).
fn mul(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a * b
    }
}

/// `db * grid * signs` over the 8 elements of a run: rows `lo` and `hi` (4 lanes
/// each), lane `j` negated where bit `j` of `mask` is set.
fn iq3_run(db: f32, lo: u32, hi: u32, mask: u8, y: &mut [f32]) {
    let lanes = (u64::from(hi) << 32 | u64::from(lo)).to_le_bytes();
    for (j, y) in y.iter_mut().enumerate() {
        let s = if (mask >> j) & 1 == 0 { 1.0 } else { -1.0 };
        *y = mul(mul(db, f32::from(lanes[j])), s);
    }
}

/// IQ3_XXS (`d` f16, 64 bytes `qs`, 8 u32 `scales`):
/// ```text
/// db = d * (np.float32(0.5) + (scales >> 28).astype(np.float32)) * np.float32(0.5)
/// signs = ksigns[(scales >> [0, 7, 14, 21]) & 0x7F] >> [0..8] & 1 -> +-1
/// grid = np.take_along_axis(cls.grid, qs.reshape((n_blocks, -1, 1, 1)), axis=-2)
/// return (db * grid * signs).reshape((n_blocks, -1))
/// ```
pub(super) fn iq3_xxs(b: &[u8; 98], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (g, y) in y.chunks_exact_mut(32).enumerate() {
        let aux = u32::from_le_bytes(b[66 + 4 * g..70 + 4 * g].try_into().expect("4 bytes"));
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let k = 2 + 8 * g + 2 * l;
            let mask = KSIGNS_IQ2XS_U8[((aux >> (7 * l)) & 0x7F) as usize];
            let (lo, hi) = (usize::from(b[k]), usize::from(b[k + 1]));
            iq3_run(db, IQ3XXS_GRID_U32[lo], IQ3XXS_GRID_U32[hi], mask, y);
        }
    }
}

/// IQ3_S (`d` f16, 64 bytes `qs`, 8 bytes `qh`, 32 bytes `signs`, 4 bytes `scales`):
/// ```text
/// scales = (scales >> [0, 4]) & 0x0F; db = d * (1 + 2 * scales)
/// signs = signs >> [0..8] & 1 -> +-1
/// qs = qs.astype(np.uint16) | ((qh >> [0..8]) & 0x01).astype(np.uint16) << 8
/// return (db * grid[qs] * signs).reshape((n_blocks, -1))
/// ```
pub(super) fn iq3_s(b: &[u8; 110], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let row = |k: usize| {
        let high = usize::from((b[66 + k / 8] >> (k % 8)) & 1);
        IQ3S_GRID_U32[usize::from(b[2 + k]) | high << 8]
    };
    for (g, y) in y.chunks_exact_mut(32).enumerate() {
        let s = (b[106 + g / 2] >> (4 * (g % 2))) & 0x0F;
        let db = d * f32::from(1 + 2 * s);
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let k = 8 * g + 2 * l;
            iq3_run(db, row(k), row(k + 1), b[74 + 4 * g + l], y);
        }
    }
}

/// `dl * (grid + delta)` over the 8 lanes of `row`.
fn iq1_run(dl: f32, row: u64, delta: f32, y: &mut [f32]) {
    for (j, y) in y.iter_mut().enumerate() {
        let grid = f32::from(row.to_le_bytes()[j] as i8);
        *y = dl * (grid + delta);
    }
}

/// ±0.125: `np.where(bit == 0, cls.delta, -cls.delta)`.
fn delta(bit: bool) -> f32 {
    if bit { -0.125 } else { 0.125 }
}

/// IQ1_S (`d` f16, 32 bytes `qs`, 8 u16 `qh`):
/// ```text
/// dl = d * (2 * ((qh >> 12) & 7) + 1)
/// delta = np.where((qh & np.uint16(0x8000)) == 0, cls.delta, -cls.delta)
/// qs = qs.astype(np.uint16) | ((qh >> [0, 3, 6, 9]) & 7) << 8
/// return (dl * (grid[qs] + delta)).reshape((n_blocks, -1))
/// ```
pub(super) fn iq1_s(b: &[u8; 50], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for (g, y) in y.chunks_exact_mut(32).enumerate() {
        let qh = u16::from_le_bytes([b[34 + 2 * g], b[35 + 2 * g]]);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let dt = delta(qh & 0x8000 != 0);
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let q = usize::from(b[2 + 4 * g + l]) | usize::from((qh >> (3 * l)) & 7) << 8;
            iq1_run(dl, IQ1S_GRID_U64[q], dt, y);
        }
    }
}

/// IQ1_M (32 bytes `qs`, 16 bytes `qh`, 4 u16 `scales` whose top nibbles are `d`):
/// ```text
/// d = (scales & 0xF000) >> [12, 8, 4, 0] or'ed, .view(np.float16).astype(np.float32)
/// dl = d * (2 * ((scales >> [0, 3, 6, 9]) & 0x07) + 1)
/// qh = qh >> [0, 4]; qs = qs | (qh & 0x07) << 8
/// delta = np.where(qh & 0x08 == 0, cls.delta, -cls.delta)
/// return (dl * (grid[qs] + delta)).reshape((n_blocks, -1))
/// ```
pub(super) fn iq1_m(b: &[u8; 56], y: &mut [f32; 256]) {
    let sc: [u16; 4] = core::array::from_fn(|i| u16::from_le_bytes([b[48 + 2 * i], b[49 + 2 * i]]));
    let bits = (sc[0] >> 12) | ((sc[1] & 0xF000) >> 8) | ((sc[2] & 0xF000) >> 4) | (sc[3] & 0xF000);
    let d = super::f16_to_f32(bits);
    for (k, y) in y.chunks_exact_mut(16).enumerate() {
        let s = (sc[k / 4] >> (3 * (k % 4))) & 7;
        let dl = d * f32::from(2 * s + 1);
        for (h, y) in y.chunks_exact_mut(8).enumerate() {
            let qh = b[32 + k] >> (4 * h);
            let q = usize::from(b[2 * k + h]) | usize::from(qh & 7) << 8;
            iq1_run(dl, IQ1S_GRID_U64[q], delta(qh & 8 != 0), y);
        }
    }
}

/// Q8_1 (`d` f16, `s` f16 unused, 32 signed bytes): ggml has no
/// `dequantize_row_q8_1`; Q8_0's `dequantize_row_q8_0`, `y = x[i].qs[j]*d`.
pub(super) fn q8_1(b: &[u8; 36], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (j, y) in y.iter_mut().enumerate() {
        *y = f32::from(b[4 + j] as i8) * d;
    }
}

/// Q1_0 (`d` f16, 16 bytes of bits), ggml's `dequantize_row_q1_0`:
/// ```text
/// const float d = GGML_FP16_TO_FP32(x[i].d);
/// const float neg_d = -d;
/// const uint8_t bit = (x[i].qs[j / 8] >> (j % 8)) & 1;
/// y[i*qk + j] = bit ? d : neg_d;
/// ```
/// `GGML_FP16_TO_FP32` quiets a signalling NaN (its software form multiplies by
/// 2^-112; F16C's `vcvtph2ps` quiets too).
pub(super) fn q1_0(b: &[u8; 18], y: &mut [f32; 128]) {
    let mut d = f16_at(b, 0);
    if d.is_nan() {
        d = f32::from_bits(d.to_bits() | 0x0040_0000);
    }
    let neg_d = -d;
    for (j, y) in y.iter_mut().enumerate() {
        let bit = (b[2 + j / 8] >> (j % 8)) & 1;
        *y = if bit != 0 { d } else { neg_d };
    }
}

/// TQ1_0 (48 bytes `qs`, 4 bytes `qh`, `d` f16 at 52):
/// ```text
/// qs0 = qs[..., :32].reshape((n_blocks, -1, 1, 32)) * np.array([1, 3, 9, 27, 81], dtype=np.uint8)
/// qs1 = qs[..., 32:].reshape((n_blocks, -1, 1, 16)) * np.array([1, 3, 9, 27, 81], dtype=np.uint8)
/// qh = qh.reshape((n_blocks, -1, 1, 4)) * np.array([1, 3, 9, 27], dtype=np.uint8)
/// qs = np.concatenate([qs0, qs1, qh], axis=-1)
/// qs = ((qs.astype(np.uint16) * 3) >> 8).astype(np.int8) - np.int8(1)
/// return (d * qs.astype(np.float32))
/// ```
/// The `uint8` products wrap (mod 256).
pub(super) fn tq1_0(b: &[u8; 54], y: &mut [f32; 256]) {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let d = f16_at(b, 52);
    let digit = |byte: u8, p: usize| ((u16::from(byte.wrapping_mul(POW3[p])) * 3) >> 8) as i8 - 1;
    // (first element, first byte, bytes, digit places) of each section.
    for (first, at, n, places) in [(0, 0, 32, 5), (160, 32, 16, 5), (240, 48, 4, 4)] {
        for p in 0..places {
            for l in 0..n {
                y[first + n * p + l] = d * f32::from(digit(b[at + l], p));
            }
        }
    }
}
