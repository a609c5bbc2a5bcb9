//! The parameter program, evaluated once per group (scalar: a handful of
//! operations per sub-block), and the loads it names.

use super::Block;
use super::decl::{BlockDecl, MAX_GROUPS, MAX_NODES, MAX_PARAMS, ParamNode};
use crate::convert::f16_to_f32;

/// gguf-py's `MXFP4.e8m0_to_fp32_half`: `2^(e - 128)` built from bits.
#[inline(always)]
pub const fn e8m0_half(e: u8) -> f32 {
    let e = e as u32;
    f32::from_bits(if e < 2 {
        0x0020_0000 << e
    } else {
        (e - 1) << 23
    })
}

/// gguf-py's NVFP4 `ue4m3_to_fp32` of byte `x`: `man * 2^-9` (exponent 0) or
/// `(1 + man / 8) * 2^(exp - 7)`, halved; 0 for the bytes 0 and 0x7F. Every value
/// is exact in f32, so it is built from its bits (the top bit of `x` is ignored).
#[inline(always)]
pub const fn ue4m3_half(x: u8) -> f32 {
    let (exp, man) = ((x as u32 >> 3) & 0xF, x as u32 & 7);
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    if exp == 0 {
        // man * 2^-10: an f32 normal with man's top bit as its leading one.
        man as f32 / 1024.0
    } else {
        f32::from_bits(((exp + 119) << 23) | (man << 20))
    }
}

/// Q4_K/Q5_K's 6-bit scale (or min) `j` from 12 bytes (gguf-py `get_scale_min`).
#[inline(always)]
fn k4_scale_min(s: &[u8; 12], j: usize, min: bool) -> u8 {
    match (j, min) {
        (0..4, false) => s[j] & 0x3F,
        (_, false) => (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30),
        (0..4, true) => s[j + 4] & 0x3F,
        (_, true) => (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30),
    }
}

/// Q3_K's 6-bit scale `k` from 12 bytes: low nibble of byte `k % 8` (shifted by
/// `4 * (k / 8)`), high two bits from byte `8 + k % 4` (shifted by `2 * (k / 4)`).
#[inline(always)]
fn k3_scale(s: &[u8; 12], k: usize) -> u8 {
    let low = (s[k % 8] >> (4 * (k / 8))) & 0x0F;
    let high = (s[8 + k % 4] >> (2 * (k / 4))) & 0x03;
    low | (high << 4)
}

/// Q3_K's 16 packed 6-bit scales for each node that reads them, unpacked before
/// the group loop: a loop of constant trip count that LLVM unrolls into constant
/// shifts (inside the group loop they were variable shifts, scalar: in cache on AMD
/// Zen 4 this sped Q3_K up; BENCHMARKS.md). Q4_K's 8 scales and mins measured no
/// faster this way and stay in the group loop.
#[inline(always)]
fn k3_scales(d: &BlockDecl, block: &[u8]) -> [[i32; MAX_GROUPS]; MAX_NODES] {
    let mut packed = [[0i32; MAX_GROUPS]; MAX_NODES];
    for (i, node) in d.params.iter().enumerate() {
        if let ParamNode::K3Scale(at) = *node {
            let s: &[u8; 12] = block[at..at + 12].try_into().expect("12 bytes");
            for (g, v) in packed[i].iter_mut().enumerate() {
                *v = i32::from(k3_scale(s, g));
            }
        }
    }
    packed
}

/// Bits `shift..shift + bits` of `b`, sign-extended when `signed`.
#[inline(always)]
pub(crate) fn bits_of(b: u8, shift: u8, bits: u8, signed: bool) -> i32 {
    let v = i32::from(b >> shift) & ((1 << bits) - 1);
    if signed {
        (v << (32 - bits)) >> (32 - bits)
    } else {
        v
    }
}

/// `bits` bits from bit `shift` (< 8) of the little-endian u16 at byte `at` of
/// `block` (`BlockDecl::check`: the bits lie in the block; a byte past it reads 0).
#[inline(always)]
fn two_byte_bits(block: &[u8], at: usize, shift: usize, bits: u8) -> i32 {
    let w = u16::from_le_bytes([block[at], block.get(at + 1).copied().unwrap_or(0)]);
    i32::from(w >> shift) & ((1 << bits) - 1)
}

/// Every node's value for every group: `[node][group]`.
type Values<T> = [[T; MAX_GROUPS]; MAX_NODES];

/// The parameters of every group of `block` into `out[g][k]`.
///
/// Node by node, each over all the groups: the node loop is unrolled by its
/// constant index (a `const` node, so no node is dispatched at run time), and each
/// node's group loop is straight-line code LLVM vectorizes. Each group's values are
/// the same operations in the same order as one group at a time. (A node loop over
/// `d.params` inside the group loop stayed a loop with a jump table per node where
/// the program is long: IQ1_M's 15 nodes times 16 groups, most of its time.)
#[inline(always)]
pub(crate) fn eval<D: Block>(block: &[u8], out: &mut [[f32; MAX_PARAMS]]) {
    let d = &D::DECL;
    let packed = k3_scales(d, block);
    let mut ints: Values<i32> = [[0; MAX_GROUPS]; MAX_NODES];
    let mut floats: Values<f32> = [[0.0; MAX_GROUPS]; MAX_NODES];
    macro_rules! nodes {
        ($($i:literal)*) => {
            $(node::<D, $i>(block, &packed, &mut ints, &mut floats);)*
        };
    }
    const { assert!(MAX_NODES == 16, "one call per node index below") };
    nodes!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    for (g, out) in out.iter_mut().enumerate().take(d.groups) {
        for (k, &o) in d.outputs.iter().enumerate() {
            out[k] = floats[o as usize][g];
        }
    }
}

/// Node `I` of `D`'s parameter program (nothing past its last) for every group.
#[inline(always)]
fn node<D: Block, const I: usize>(
    block: &[u8],
    packed: &Values<i32>,
    ints: &mut Values<i32>,
    floats: &mut Values<f32>,
) {
    let node = const {
        let p = D::DECL.params;
        if I < p.len() { Some(p[I]) } else { None }
    };
    let Some(node) = node else {
        return;
    };
    let groups = D::DECL.groups;
    let (gi, gf) = (0..groups, 0..groups);
    match node {
        ParamNode::F16(at) => {
            floats[I] = [f16_to_f32(u16::from_le_bytes([block[at], block[at + 1]])); MAX_GROUPS];
        }
        ParamNode::E8m0Half(at) => floats[I] = [e8m0_half(block[at]); MAX_GROUPS],
        ParamNode::F32(at) => {
            let b = [block[at], block[at + 1], block[at + 2], block[at + 3]];
            floats[I] = [f32::from_le_bytes(b); MAX_GROUPS];
        }
        ParamNode::Ue4m3Half(at) => gf.for_each(|g| floats[I][g] = ue4m3_half(block[at + g])),
        ParamNode::F16Of(a) => {
            let x = ints[a as usize];
            gf.for_each(|g| floats[I][g] = f16_to_f32(x[g] as u16));
        }
        ParamNode::Quiet(a) => {
            let x = floats[a as usize];
            gf.for_each(|g| {
                floats[I][g] = if x[g].is_nan() {
                    f32::from_bits(x[g].to_bits() | 0x0040_0000)
                } else {
                    x[g]
                };
            });
        }
        ParamNode::Bits {
            at,
            per,
            outer,
            inner,
            bits,
        } => gi.for_each(|g| {
            let per = usize::from(per);
            let bit = usize::from(outer) * (g / per) + usize::from(inner) * (g % per);
            ints[I][g] = two_byte_bits(block, at + bit / 8, bit % 8, bits);
        }),
        ParamNode::GroupBits { at, shift, bits } => gi.for_each(|g| {
            let bit = usize::from(shift) * g;
            ints[I][g] = bits_of(block[at + bit / 8], (bit % 8) as u8, bits, false);
        }),
        ParamNode::OrShl(a, b, k) => {
            let (x, y) = (ints[a as usize], ints[b as usize]);
            gi.for_each(|g| ints[I][g] = x[g] | (y[g] << k));
        }
        ParamNode::Const(bits) => floats[I] = [f32::from_bits(bits); MAX_GROUPS],
        ParamNode::Add(a, b) => {
            let (x, y) = (floats[a as usize], floats[b as usize]);
            gf.for_each(|g| floats[I][g] = x[g] + y[g]);
        }
        ParamNode::Byte {
            at,
            stride,
            shift,
            bits,
            signed,
        } => gi.for_each(|g| ints[I][g] = bits_of(block[at + stride * g], shift, bits, signed)),
        ParamNode::K4ScaleMin { at, min } => {
            let s = block[at..at + 12].try_into().expect("12 bytes");
            gi.for_each(|g| ints[I][g] = i32::from(k4_scale_min(s, g, min)));
        }
        ParamNode::K3Scale(_) => ints[I] = packed[I],
        ParamNode::AddInt(a, k) => {
            let x = ints[a as usize];
            gi.for_each(|g| ints[I][g] = x[g] + k);
        }
        ParamNode::Float(a) => {
            let x = ints[a as usize];
            gf.for_each(|g| floats[I][g] = x[g] as f32);
        }
        ParamNode::Mul(a, b) => {
            let (x, y) = (floats[a as usize], floats[b as usize]);
            gf.for_each(|g| floats[I][g] = x[g] * y[g]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e8m0_half_from_bits() {
        assert_eq!(e8m0_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_half(128), 1.0);
        assert_eq!(e8m0_half(255), 2f32.powi(127));
    }

    #[test]
    fn ue4m3_half_as_gguf_py() {
        // gguf-py: exp 0 -> man * 2^-9; else (1 + man / 8) * 2^(exp - 7); all * 0.5.
        assert_eq!(ue4m3_half(0), 0.0);
        assert_eq!(ue4m3_half(0x7F), 0.0);
        assert_eq!(ue4m3_half(0x80), 0.0);
        assert_eq!(ue4m3_half(1), 2f32.powi(-10));
        assert_eq!(ue4m3_half(7), 7.0 * 2f32.powi(-10));
        assert_eq!(ue4m3_half(0x38), 0.5);
        assert_eq!(ue4m3_half(0x3C), 0.75);
        assert_eq!(ue4m3_half(0x7E), 1.75 * 256.0 * 0.5);
        assert_eq!(ue4m3_half(0xFF), 1.875 * 256.0 * 0.5);
        assert_eq!(ue4m3_half(0xB8), 0.5);
    }

    #[test]
    fn k3_scales() {
        // Scale 5: low nibble of byte 5 | bits 4-5 from byte 1's top bits.
        let s = [0, 0b1100_0000, 0, 0, 0, 0, 0, 0, 0, 0x0A, 0, 0];
        assert_eq!(k4_scale_min(&s, 5, false), 0x0A | 0x30);
        assert_eq!(k4_scale_min(&s, 1, false), 0);
        // Q3_K scale 9 (gguf-py: `lscales` row 1 column 1, `hscales` row 2 column 1):
        // high nibble of byte 1, bits 4-5 of byte 9.
        let s = [0, 0x70, 0, 0, 0, 0, 0, 0, 0, 0b10_0000, 0, 0];
        assert_eq!(k3_scale(&s, 9), 0x07 | (0b10 << 4));
        assert_eq!(bits_of(0xFE, 0, 8, true), -2);
        assert_eq!(bits_of(0xFE, 4, 4, false), 15);
    }
}
