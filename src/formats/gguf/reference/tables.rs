//! Reference decoders of the table-indexed and newer GGUF types (IQ4_NL, IQ4_XS,
//! NVFP4, IQ2_XXS, IQ2_XS, IQ2_S, TQ2_0, Q8_K), written from gguf-py 0.19.0's `quants.py` (ggml's
//! `dequantize_row_q8_K` for Q8_K, which gguf-py does not decode), independently of
//! the block declarations they test: arithmetic as NumPy does it (the IQ2 signs
//! multiplied as ±1, not folded into the integer), small tables from gguf-py; the
//! IQ2 grids and sign masks are ggml's, shared with the declarations (the
//! committed gguf-py outputs check them).

use super::{KVALUES, f16_at, nibble32};

/// `IQ4_NL.kvalues` (gguf-py 0.19.0).
const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// IQ4_NL (`d` f16, 16 bytes of nibbles):
/// ```text
/// qs = (qs & np.uint8(0x0F)).reshape((n_blocks, -1, 1))
/// qs = np.take_along_axis(kvalues, qs, axis=-1).astype(np.float32).reshape((n_blocks, -1))
/// return (d * qs)
/// ```
pub(super) fn iq4_nl(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (i, y) in y.iter_mut().enumerate() {
        *y = d * f32::from(KVALUES_IQ4NL[usize::from(nibble32(b, 2, i))]);
    }
}

/// IQ4_XS (`d` f16, `scales_h` u16, 4 bytes `scales_l`, 128 bytes of nibbles):
/// ```text
/// scales = (scales_l | (scales_h << np.uint8(4))).astype(np.int8) - np.int8(32)
/// dl = (d * scales.astype(np.float32)).reshape((n_blocks, -1, 1))
/// qs = qs.reshape((n_blocks, -1, 1, 16)) >> np.array([0, 4], dtype=np.uint8).reshape((1, 1, 2, 1))
/// qs = np.take_along_axis(kvalues, qs & 0x0F, axis=-1).astype(np.float32).reshape((n_blocks, -1, 32))
/// return (dl * qs).reshape((n_blocks, -1))
/// ```
/// Group `g`: low nibble `g % 2` of byte `4 + g / 2`, high bits `2g..2g+2` of the u16.
pub(super) fn iq4_xs(b: &[u8; 136], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let h = u16::from_le_bytes([b[2], b[3]]);
    for (g, y) in y.chunks_exact_mut(32).enumerate() {
        let lo = (b[4 + g / 2] >> (4 * (g % 2))) & 0x0F;
        let hi = ((h >> (2 * g)) & 3) as u8;
        let dl = d * f32::from((lo | (hi << 4)) as i8 - 32);
        for (j, y) in y.iter_mut().enumerate() {
            let q = (b[8 + 16 * g + j % 16] >> (4 * (j / 16))) & 0x0F;
            *y = dl * f32::from(KVALUES_IQ4NL[usize::from(q)]);
        }
    }
}

/// NVFP4 (4 unsigned e4m3 bytes, 32 bytes of e2m1 nibbles; 4 sub-blocks of 16):
/// ```text
/// raw = np.where(exp == 0, man * 2**-9, (1.0 + man / 8.0) * (2.0 ** (exp.astype(np.float32) - 7)))
/// d = np.where((x == 0) | (x == 0x7F), 0.0, raw * 0.5)
/// vals = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # per sub-block of 8 bytes
/// return (d * kvalues[vals].astype(np.float32)).reshape(n_super, 64)
/// ```
pub(super) fn nvfp4(b: &[u8; 36], y: &mut [f32; 64]) {
    for (s, y) in y.chunks_exact_mut(16).enumerate() {
        let d = ue4m3_to_f32_half(b[s]);
        for (j, y) in y.iter_mut().enumerate() {
            let q = (b[4 + 8 * s + j % 8] >> (4 * (j / 8))) & 0x0F;
            *y = d * f32::from(KVALUES[usize::from(q)]);
        }
    }
}

/// `NVFP4.ue4m3_to_fp32` in f32 arithmetic, as NumPy runs it.
pub fn ue4m3_to_f32_half(x: u8) -> f32 {
    let exp = i32::from(x >> 3) & 0xF;
    let man = f32::from(x & 7);
    let raw = if exp == 0 {
        man * 2f32.powi(-9)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    if x == 0 || x == 0x7F { 0.0 } else { raw * 0.5 }
}

/// TQ2_0 (64 bytes of 2-bit values, `d` f16 at 64):
/// ```text
/// qs = qs.reshape((n_blocks, -1, 1, 32)) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape((1, 1, 4, 1))
/// qs = (qs & 0x03).reshape((n_blocks, -1)).astype(np.int8) - np.int8(1)
/// return (d * qs.astype(np.float32))
/// ```
pub(super) fn tq2_0(b: &[u8; 66], y: &mut [f32; 256]) {
    let d = f16_at(b, 64);
    for (i, y) in y.iter_mut().enumerate() {
        let (a, p, l) = (i / 128, (i % 128) / 32, i % 32);
        let q = ((b[32 * a + l] >> (2 * p)) & 3) as i8 - 1;
        *y = d * f32::from(q);
    }
}

/// Q8_K (`d` f32, 256 signed bytes, 16 i16 `bsums` unused), ggml's
/// `dequantize_row_q8_K`: `y[i*QK_K + j] = x[i].d * x[i].qs[j];` (the byte
/// converted to float, one f32 product).
pub(super) fn q8_k(b: &[u8; 292], y: &mut [f32; 256]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (j, y) in y.iter_mut().enumerate() {
        *y = d * f32::from(b[4 + j] as i8);
    }
}

/// `a * b` where a NaN `a` is the result (quieted), as x86-64 and AArch64 multiply:
/// written out because Rust may turn a product by -1 into a negation, which flips
/// a NaN's sign.
fn mul(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a * b
    }
}

/// IQ2_XXS (`d` f16, then per group of 32 two u32 `aux0`, `aux1`):
/// ```text
/// db = d * (np.float32(0.5) + (qs[..., 1] >> 28).astype(np.float32)) * np.float32(0.25)
/// signs = (qs[..., 1] >> [0, 7, 14, 21]) & 0x7F; signs = ksigns[signs] >> [0..8] & 1
/// signs = np.where(signs == 0, np.float32(1), np.float32(-1))
/// grid = cls.grid[qs[..., 0].view(np.uint8)]
/// return (db * grid * signs).reshape((n_blocks, -1))
/// ```
/// Element `32 g + 8 l + j`: lane `j` of grid row `aux0` byte `l`, sign bit `j` of
/// `ksigns[(aux1 >> 7 l) & 127]`; the ±1 multiplied as NumPy does.
pub(super) fn iq2_xxs(b: &[u8; 66], y: &mut [f32; 256]) {
    use dq_runtime::block::tables::{IQ2XXS_GRID_U64, KSIGNS_IQ2XS_U8};
    let d = f16_at(b, 0);
    for (g, y) in y.chunks_exact_mut(32).enumerate() {
        let at = 2 + 8 * g;
        let aux1 = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
        let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let row = IQ2XXS_GRID_U64[usize::from(b[at + l])].to_le_bytes();
            let signs = KSIGNS_IQ2XS_U8[((aux1 >> (7 * l)) & 0x7F) as usize];
            for (j, y) in y.iter_mut().enumerate() {
                let s = if (signs >> j) & 1 == 0 { 1.0 } else { -1.0 };
                *y = mul(db * f32::from(row[j]), s);
            }
        }
    }
}

/// `d * (0.5 + s) * 0.25` for the 4-bit scale `s` (IQ2_XS's and IQ2_S's `db`):
/// `db = d * (np.float32(0.5) + scales) * np.float32(0.25)`.
fn iq2_db(d: f32, s: u8) -> f32 {
    d * (0.5 + f32::from(s)) * 0.25
}

/// `db * grid * signs` over 8 lanes of `row`, negated where `mask`'s bit is set.
fn iq2_run(db: f32, row: u64, mask: u8, y: &mut [f32]) {
    for (j, y) in y.iter_mut().enumerate() {
        let s = if (mask >> j) & 1 == 0 { 1.0 } else { -1.0 };
        *y = mul(db * f32::from(row.to_le_bytes()[j]), s);
    }
}

/// IQ2_XS (`d` f16, 32 u16 `qs`, 8 bytes of 4-bit scales):
/// ```text
/// db = d * (np.float32(0.5) + scales) * np.float32(0.25)  # per 16 elements
/// signs = ksigns[qs >> 9] >> [0..8] & 1 -> +-1
/// grid = cls.grid[qs & 511]
/// return (db * grid * signs).reshape((n_blocks, -1))
/// ```
pub(super) fn iq2_xs(b: &[u8; 74], y: &mut [f32; 256]) {
    use dq_runtime::block::tables::{IQ2XS_GRID_U64, KSIGNS_IQ2XS_U8};
    let d = f16_at(b, 0);
    for (r, y) in y.chunks_exact_mut(8).enumerate() {
        let h = r / 2;
        let db = iq2_db(d, (b[66 + h / 2] >> (4 * (h % 2))) & 0x0F);
        let q = u16::from_le_bytes([b[2 + 2 * r], b[3 + 2 * r]]);
        let mask = KSIGNS_IQ2XS_U8[usize::from(q >> 9)];
        iq2_run(db, IQ2XS_GRID_U64[usize::from(q & 511)], mask, y);
    }
}

/// IQ2_S (`d` f16, 32 bytes `qs`, 32 bytes `signs`, 8 bytes `qh`, 8 bytes scales):
/// ```text
/// signs = signs >> [0..8] & 1 -> +-1
/// qh = qh.reshape((n_blocks, -1, 1)) >> np.array([0, 2, 4, 6])
/// qs = qs.astype(np.uint16) | ((qh & 0x03).astype(np.uint16) << 8).reshape((n_blocks, -1))
/// return (db * grid[qs] * signs).reshape((n_blocks, -1))
/// ```
pub(super) fn iq2_s(b: &[u8; 82], y: &mut [f32; 256]) {
    use dq_runtime::block::tables::IQ2S_GRID_U64;
    let d = f16_at(b, 0);
    for (r, y) in y.chunks_exact_mut(8).enumerate() {
        let h = r / 2;
        let db = iq2_db(d, (b[74 + h / 2] >> (4 * (h % 2))) & 0x0F);
        let high = (b[66 + r / 4] >> (2 * (r % 4))) & 3;
        let q = usize::from(b[2 + r]) | usize::from(high) << 8;
        iq2_run(db, IQ2S_GRID_U64[q], b[34 + r], y);
    }
}
