//! Reference decoders: each supported GGUF block type into f32, scalar, in the
//! operation order of gguf-py 0.19.0's `dequantize_blocks` (`gguf/quants.py`), which
//! SPEC §11 makes the contract.
//!
//! Each decoder's doc quotes its NumPy lines. Arithmetic is f32, one operation at a
//! time, as NumPy evaluates each ufunc (Rust does not contract `a * b + c` into an
//! FMA). Indexing follows NumPy's reshapes: the comment on each decoder says which
//! byte and bit element `i` of a block comes from.
//!
//! These are the bits the kernel compiler's lowering of the block types is tested
//! against.

use super::error::{GgufError, Result};
use super::types::GgmlType;

mod iq1_iq3;
mod q2_0;
mod tables;
pub use tables::ue4m3_to_f32_half;

/// Decodes `bytes`, whole blocks of type `ty`, into `out` (one f32 per element).
///
/// # Errors
/// [`GgufError::UnsupportedType`] for a type dq does not decode;
/// [`GgufError::Length`] when `bytes` is not whole blocks or `out` is not their
/// element count.
///
/// # Examples
/// ```
/// use dq::formats::gguf::{GgmlType, reference};
/// // One Q8_0 block: d = 0.5 (f16 0x3800), then 32 signed bytes.
/// let mut block = vec![0x00, 0x38];
/// block.extend((0..32).map(|i| (i as i8 - 16) as u8));
/// let mut out = [0f32; 32];
/// reference::dequantize(GgmlType::Q8_0, &block, &mut out)?;
/// assert_eq!(out[0], -8.0);
/// assert_eq!(out[31], 7.5);
/// # Ok::<(), dq::formats::gguf::GgufError>(())
/// ```
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    if !ty.is_supported() {
        return Err(GgufError::UnsupportedType {
            name: String::new(),
            ty: ty.name().to_owned(),
        });
    }
    let (block, size) = (ty.block_size(), ty.type_size());
    if !bytes.len().is_multiple_of(size) || bytes.len() / size * block != out.len() {
        return Err(GgufError::Length {
            ty,
            bytes: bytes.len(),
            elements: out.len(),
        });
    }
    decode(ty, bytes, out);
    Ok(())
}

/// Decodes whole blocks of a supported `ty` (lengths checked by the caller: `out`
/// holds `bytes`' elements); an unsupported type writes nothing.
pub(crate) fn decode(ty: GgmlType, bytes: &[u8], out: &mut [f32]) {
    match ty {
        GgmlType::F32 => blocks(bytes, out, f32_block),
        GgmlType::F16 => blocks(bytes, out, f16_block),
        GgmlType::BF16 => blocks(bytes, out, bf16_block),
        GgmlType::Q4_0 => blocks(bytes, out, q4_0),
        GgmlType::Q4_1 => blocks(bytes, out, q4_1),
        GgmlType::Q5_0 => blocks(bytes, out, q5_0),
        GgmlType::Q5_1 => blocks(bytes, out, q5_1),
        GgmlType::Q8_0 => blocks(bytes, out, q8_0),
        GgmlType::Q2_K => blocks(bytes, out, q2_k),
        GgmlType::Q3_K => blocks(bytes, out, q3_k),
        GgmlType::Q4_K => blocks(bytes, out, q4_k),
        GgmlType::Q5_K => blocks(bytes, out, q5_k),
        GgmlType::Q6_K => blocks(bytes, out, q6_k),
        GgmlType::MXFP4 => blocks(bytes, out, mxfp4),
        GgmlType::IQ4_NL => blocks(bytes, out, tables::iq4_nl),
        GgmlType::IQ4_XS => blocks(bytes, out, tables::iq4_xs),
        GgmlType::NVFP4 => blocks(bytes, out, tables::nvfp4),
        GgmlType::TQ2_0 => blocks(bytes, out, tables::tq2_0),
        GgmlType::Q8_K => blocks(bytes, out, tables::q8_k),
        GgmlType::IQ2_XXS => blocks(bytes, out, tables::iq2_xxs),
        GgmlType::IQ2_XS => blocks(bytes, out, tables::iq2_xs),
        GgmlType::IQ2_S => blocks(bytes, out, tables::iq2_s),
        GgmlType::IQ3_XXS => blocks(bytes, out, iq1_iq3::iq3_xxs),
        GgmlType::IQ3_S => blocks(bytes, out, iq1_iq3::iq3_s),
        GgmlType::IQ1_S => blocks(bytes, out, iq1_iq3::iq1_s),
        GgmlType::IQ1_M => blocks(bytes, out, iq1_iq3::iq1_m),
        GgmlType::Q8_1 => blocks(bytes, out, iq1_iq3::q8_1),
        GgmlType::Q1_0 => blocks(bytes, out, iq1_iq3::q1_0),
        GgmlType::TQ1_0 => blocks(bytes, out, iq1_iq3::tq1_0),
        GgmlType::Q2_0 => blocks(bytes, out, q2_0::q2_0),
        // `dequantize` checked `is_supported`, which is false for every other type.
        _ => {}
    }
}

/// Runs `f` over each `B`-byte block and its `N` outputs (lengths checked by the caller).
fn blocks<const B: usize, const N: usize>(
    bytes: &[u8],
    out: &mut [f32],
    f: impl Fn(&[u8; B], &mut [f32; N]),
) {
    let (bs, _) = bytes.as_chunks::<B>();
    let (os, _) = out.as_chunks_mut::<N>();
    for (b, o) in bs.iter().zip(os) {
        f(b, o);
    }
}

/// NumPy's f16 -> f32 (`.view(np.float16).astype(np.float32)`): exact; a NaN keeps
/// its payload and its signalling bit (NumPy's `npy_halfbits_to_floatbits`, where
/// `half` would set the quiet bit).
pub fn f16_to_f32(bits: u16) -> f32 {
    let h = half::f16::from_bits(bits);
    if h.is_nan() {
        let sign = u32::from(bits & 0x8000) << 16;
        f32::from_bits(sign | 0x7F80_0000 | (u32::from(bits & 0x03FF) << 13))
    } else {
        h.to_f32()
    }
}

/// The f16 at byte `at` of a block.
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// F32: `data.view(np.float32)` (bits as stored).
fn f32_block(b: &[u8; 4], y: &mut [f32; 1]) {
    y[0] = f32::from_le_bytes(*b);
}

/// F16: `data.view(np.float16).astype(np.float32)` (see [`f16_to_f32`]).
fn f16_block(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f16_to_f32(u16::from_le_bytes(*b));
}

/// BF16: `(blocks.view(np.int16).astype(np.int32) << 16).view(np.float32)`.
fn bf16_block(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f32::from_bits(u32::from(u16::from_le_bytes(*b)) << 16);
}

/// The 4-bit value of element `i` of a 32-element block whose nibbles start at
/// byte `at`: low nibbles are elements 0-15, high nibbles 16-31.
/// `qs.reshape((n_blocks, -1, 1, 16)) >> np.array([0, 4]).reshape((1, 1, 2, 1))`,
/// `qs & np.uint8(0x0F)`.
fn nibble32(b: &[u8], at: usize, i: usize) -> u8 {
    (b[at + i % 16] >> (4 * (i / 16))) & 0x0F
}

/// Bit `i` of the little-endian u32 at byte `at` (Q5's `qh`):
/// `qh.view(np.uint32)`, `qh >> np.array([i for i in range(32)])`, `qh & 1`.
fn bit32(b: &[u8], at: usize, i: usize) -> u8 {
    let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    ((qh >> i) & 1) as u8
}

/// Q4_0 (`d` f16, 16 bytes of nibbles):
/// ```text
/// d = d.view(np.float16).astype(np.float32)
/// qs = (qs & np.uint8(0x0F)).reshape((n_blocks, -1)).astype(np.int8) - np.int8(8)
/// return (d * qs.astype(np.float32))
/// ```
fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (i, y) in y.iter_mut().enumerate() {
        let q = nibble32(b, 2, i) as i8 - 8;
        *y = d * f32::from(q);
    }
}

/// Q4_1 (`d`, `m` f16, 16 bytes of nibbles):
/// ```text
/// qs = (qs & np.uint8(0x0F)).reshape((n_blocks, -1)).astype(np.float32)
/// return (d * qs) + m
/// ```
fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for (i, y) in y.iter_mut().enumerate() {
        let q = f32::from(nibble32(b, 4, i));
        *y = add(d * q, m);
    }
}

/// Q5_0 (`d` f16, `qh` u32, 16 bytes of nibbles):
/// ```text
/// qs = (ql | (qh << np.uint8(4))).astype(np.int8) - np.int8(16)
/// return (d * qs.astype(np.float32))
/// ```
fn q5_0(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (i, y) in y.iter_mut().enumerate() {
        let q = (nibble32(b, 6, i) | (bit32(b, 2, i) << 4)) as i8 - 16;
        *y = d * f32::from(q);
    }
}

/// Q5_1 (`d`, `m` f16, `qh` u32, 16 bytes of nibbles):
/// ```text
/// qs = (ql | (qh << np.uint8(4))).astype(np.float32)
/// return (d * qs) + m
/// ```
fn q5_1(b: &[u8; 24], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for (i, y) in y.iter_mut().enumerate() {
        let q = f32::from(nibble32(b, 8, i) | (bit32(b, 4, i) << 4));
        *y = add(d * q, m);
    }
}

/// Q8_0 (`d` f16, 32 signed bytes):
/// ```text
/// x = x.view(np.int8).astype(np.float32)
/// return (x * d)
/// ```
fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (i, y) in y.iter_mut().enumerate() {
        *y = f32::from(b[2 + i] as i8) * d;
    }
}

/// The 2-bit field of element `i` of a 256-element block whose 64 bytes start at
/// `at` (Q2_K's `qs`, Q3_K's low bits): 128 elements per 32 bytes, four 2-bit
/// planes of 32: `qs.reshape((n_blocks, -1, 1, 32)) >> [0, 2, 4, 6]`, `& 3`.
fn crumb256(b: &[u8], at: usize, i: usize) -> u8 {
    let (half, plane, l) = (i / 128, (i % 128) / 32, i % 32);
    (b[at + half * 32 + l] >> (2 * plane)) & 3
}

/// Q2_K (16 scale bytes, 64 bytes of 2-bit values, `d`, `dmin` f16):
/// ```text
/// dl = (d * (scales & 0xF).astype(np.float32)).reshape((n_blocks, QK_K // 16, 1))
/// ml = (dmin * (scales >> 4).astype(np.float32)).reshape((n_blocks, QK_K // 16, 1))
/// qs = dl * qs - ml
/// ```
fn q2_k(b: &[u8; 84], y: &mut [f32; 256]) {
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    let dl: [f32; 16] = std::array::from_fn(|g| d * f32::from(b[g] & 0x0F));
    let ml: [f32; 16] = std::array::from_fn(|g| dmin * f32::from(b[g] >> 4));
    for (i, y) in y.iter_mut().enumerate() {
        let q = f32::from(crumb256(b, 16, i));
        *y = dl[i / 16] * q - ml[i / 16];
    }
}

/// Q3_K (32 bytes `hmask`, 64 bytes low bits, 12 bytes of 6-bit scales, `d` f16):
/// ```text
/// scales = (lscales & np.uint8(0x0F)) | ((hscales & np.uint8(0x03)) << np.uint8(4))
/// scales = (scales.astype(np.int8) - np.int8(32)).astype(np.float32)
/// dl = (d * scales).reshape((n_blocks, 16, 1))
/// qh = qh ^ np.uint8(1)  # strangely, the offset is zero when the bitmask is 1
/// q = (ql.astype(np.int8) - (qh << np.uint8(2)).astype(np.int8)).astype(np.float32)
/// return (dl * q).reshape((n_blocks, QK_K))
/// ```
/// Scale `k`: low nibble of byte `k % 8` (shifted by `4 * (k / 8)`), high 2 bits of
/// byte `8 + k % 4` (shifted by `2 * (k / 4)`). High bit of element `i`: bit `i / 32`
/// of `hmask[i % 32]`.
fn q3_k(b: &[u8; 110], y: &mut [f32; 256]) {
    let d = f16_at(b, 108);
    let s = &b[96..108];
    let dl: [f32; 16] = std::array::from_fn(|k| {
        let low = (s[k % 8] >> (4 * (k / 8))) & 0x0F;
        let high = (s[8 + k % 4] >> (2 * (k / 4))) & 0x03;
        d * f32::from((low | (high << 4)) as i8 - 32)
    });
    for (i, y) in y.iter_mut().enumerate() {
        let ql = crumb256(b, 32, i) as i8;
        let qh = ((b[i % 32] >> (i / 32)) & 1) ^ 1;
        let q = f32::from(ql - (qh << 2) as i8);
        *y = dl[i / 16] * q;
    }
}

/// Q4_K/Q5_K's eight 6-bit scales and mins from 12 bytes (`Q4_K.get_scale_min`):
/// ```text
/// d, m, m_d = np.split(scales.reshape((n_blocks, 3, 4)), 3, axis=-2)
/// sc = np.concatenate([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
/// min = np.concatenate([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], axis=-1)
/// ```
fn scale_min_k4(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let sc = std::array::from_fn(|j| match j {
        0..4 => s[j] & 0x3F,
        _ => (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30),
    });
    let min = std::array::from_fn(|j| match j {
        0..4 => s[j + 4] & 0x3F,
        _ => (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30),
    });
    (sc, min)
}

/// Q4_K/Q5_K's per-sub-block factors, each rounded to f32 once:
/// ```text
/// d = (d * sc.astype(np.float32)).reshape((n_blocks, -1, 1))
/// dm = (dmin * m.astype(np.float32)).reshape((n_blocks, -1, 1))
/// ```
fn factors_k4(b: &[u8]) -> ([f32; 8], [f32; 8]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let (sc, m) = scale_min_k4(&b[4..16]);
    (sc.map(|s| d * f32::from(s)), m.map(|m| dmin * f32::from(m)))
}

/// The 4-bit value of element `i` of a 256-element block whose 128 bytes start at
/// `at`: sub-block `j = i / 32` takes the low (even `j`) or high (odd `j`) nibbles of
/// bytes `32 * (j / 2)..`: `qs.reshape((n_blocks, -1, 1, 32)) >> [0, 4]`, `& 0x0F`.
fn nibble256(b: &[u8], at: usize, i: usize) -> u8 {
    let (j, l) = (i / 32, i % 32);
    (b[at + (j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F
}

/// Q4_K (`d`, `dmin` f16, 12 scale bytes, 128 bytes of nibbles):
/// ```text
/// qs = (qs & np.uint8(0x0F)).reshape((n_blocks, -1, 32)).astype(np.float32)
/// return (d * qs - dm).reshape((n_blocks, QK_K))
/// ```
fn q4_k(b: &[u8; 144], y: &mut [f32; 256]) {
    let (d, dm) = factors_k4(b);
    for (i, y) in y.iter_mut().enumerate() {
        let q = f32::from(nibble256(b, 16, i));
        *y = d[i / 32] * q - dm[i / 32];
    }
}

/// Q5_K (`d`, `dmin` f16, 12 scale bytes, 32 bytes `qh`, 128 bytes of nibbles); the
/// fifth bit of element `i` is bit `i / 32` of `qh[i % 32]`:
/// ```text
/// q = (ql | (qh << np.uint8(4))).astype(np.float32)
/// return (d * q - dm).reshape((n_blocks, QK_K))
/// ```
fn q5_k(b: &[u8; 176], y: &mut [f32; 256]) {
    let (d, dm) = factors_k4(b);
    for (i, y) in y.iter_mut().enumerate() {
        let qh = (b[16 + i % 32] >> (i / 32)) & 1;
        let q = f32::from(nibble256(b, 48, i) | (qh << 4));
        *y = d[i / 32] * q - dm[i / 32];
    }
}

/// Q6_K (128 bytes `ql`, 64 bytes `qh`, 16 signed scales, `d` f16):
/// ```text
/// scales = scales.view(np.int8).astype(np.float32)
/// d = (d * scales).reshape((n_blocks, QK_K // 16, 1))
/// q = (ql | (qh << np.uint8(4))).astype(np.int8) - np.int8(32)
/// return (d * q).reshape((n_blocks, QK_K))
/// ```
/// Element `i = 128 a + 32 s + l`: low 4 bits from nibble `s / 2` of
/// `ql[64 a + 32 (s % 2) + l]`, high 2 bits from bits `2 s` of `qh[32 a + l]`.
fn q6_k(b: &[u8; 210], y: &mut [f32; 256]) {
    let d0 = f16_at(b, 208);
    let d: [f32; 16] = std::array::from_fn(|g| d0 * f32::from(b[192 + g] as i8));
    for (i, y) in y.iter_mut().enumerate() {
        let (a, h, l64) = (i / 128, (i % 128) / 64, i % 64);
        let ql = (b[64 * a + l64] >> (4 * h)) & 0x0F;
        let (s, l) = ((i % 128) / 32, i % 32);
        let qh = (b[128 + 32 * a + l] >> (2 * s)) & 0x03;
        let q = (ql | (qh << 4)) as i8 - 32;
        *y = d[i / 16] * f32::from(q);
    }
}

/// MXFP4's e2m1 values, doubled (`MXFP4.kvalues`).
const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `MXFP4.e8m0_to_fp32_half`: `2^(e - 128)` built from bits (e = 255 gives 2^127):
/// ```text
/// bits = np.where(x < 2, np.uint32(0x00200000) << np.uint32(x), np.uint32(x - 1) << np.uint32(23))
/// ```
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let e = u32::from(e);
    f32::from_bits(if e < 2 {
        0x0020_0000 << e
    } else {
        (e - 1) << 23
    })
}

/// MXFP4 (one e8m0 byte, 16 bytes of e2m1 nibbles):
/// ```text
/// d = cls.e8m0_to_fp32_half(e)
/// qs = np.take_along_axis(kvalues, qs, axis=-1).reshape((n_blocks, cls.block_size))
/// return (d * qs.astype(np.float32))
/// ```
fn mxfp4(b: &[u8; 17], y: &mut [f32; 32]) {
    let d = e8m0_to_f32_half(b[0]);
    for (i, y) in y.iter_mut().enumerate() {
        let k = KVALUES[usize::from(nibble32(b, 1, i))];
        *y = d * f32::from(k);
    }
}

/// `a + b` where a NaN `a` wins, as on x86-64 and AArch64 (the first operand's NaN,
/// quieted): the order NumPy's `(d * q) + m` gets. Written out because Rust may
/// commute an addition and so pick `b`'s NaN when both are NaN.
fn add(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        a + b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e8m0_half_from_bits() {
        assert_eq!(e8m0_to_f32_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_to_f32_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_to_f32_half(128), 1.0);
        assert_eq!(e8m0_to_f32_half(255), 2f32.powi(127));
    }

    #[test]
    fn f16_nan_keeps_signalling_bit() {
        assert_eq!(f16_to_f32(0x7C01).to_bits(), 0x7F80_2000);
        assert_eq!(f16_to_f32(0xFE01).to_bits(), 0xFFC0_2000);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0xFC00), f32::NEG_INFINITY);
    }

    #[test]
    fn add_keeps_first_nan() {
        // Opaque operands: a release build would fold `1.0 + NaN` at compile time,
        // and LLVM's folding need not keep the payload x86 keeps at run time.
        use std::hint::black_box;
        let a = black_box(f32::from_bits(0x7FC0_0001));
        let b = black_box(f32::from_bits(0xFFC0_0002));
        assert_eq!(add(a, b).to_bits(), 0x7FC0_0001);
        assert_eq!(add(black_box(1.0), b).to_bits(), 0xFFC0_0002);
        assert_eq!(add(1.0, 2.0), 3.0);
    }

    #[test]
    fn lengths_are_checked() {
        let mut out = [0f32; 32];
        assert!(matches!(
            dequantize(GgmlType::Q4_0, &[0; 17], &mut out),
            Err(GgufError::Length { .. })
        ));
        assert!(matches!(
            dequantize(GgmlType::Q4_0, &[0; 36], &mut out),
            Err(GgufError::Length { .. })
        ));
        assert!(matches!(
            dequantize(GgmlType::I8, &[0; 4], &mut [0f32; 4]),
            Err(GgufError::UnsupportedType { .. })
        ));
        dequantize(GgmlType::Q4_0, &[0; 18], &mut out).unwrap();
    }
}
