//! GGUF test data: the committed fixtures (`tests/fixtures/gguf`, made by
//! `scripts/make_gguf_fixtures.py`) and random or exhaustive block bytes.

use std::path::{Path, PathBuf};

use dq::block::{ParamNode, gguf};
use dq::formats::gguf::GgmlType;

use super::Rng;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

/// gguf-py's output for a tensor of fixture `stem` (raw little-endian f32).
pub fn expected(stem: &str, name: &str) -> Vec<f32> {
    let path = fixtures().join(stem).join(format!("{name}.bin"));
    let b = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The types dq decodes.
pub fn supported() -> Vec<GgmlType> {
    GgmlType::ALL
        .into_iter()
        .filter(|t| t.is_supported())
        .collect()
}

/// f16 bits that reach every class of output.
pub const SPECIAL_F16: [u16; 10] = [
    0x0000, 0x8000, 0x0001, 0x83FF, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
];

/// f32 bits that reach every class of output (Q8_K's `d`).
pub const SPECIAL_F32: [u32; 8] = [
    0x0000_0000,
    0x8000_0000,
    0x0000_0001,
    0x8000_0001,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0x7F80_0001,
];

/// `blocks` random blocks of `ty`; each f16 or f32 parameter is special one time in
/// three, each e8m0 byte 0, 1, 254 or 255 one time in three.
pub fn random_blocks(rng: &mut Rng, ty: GgmlType, blocks: usize) -> Vec<u8> {
    let k = gguf::kernel(ty.name()).unwrap();
    let mut bytes = rng.bytes(blocks * k.block_bytes);
    let params = k.decl.map_or(&[][..], |d| d.params);
    for block in bytes.chunks_exact_mut(k.block_bytes) {
        for p in params {
            match *p {
                ParamNode::F16(at) if rng.one_in(3) => {
                    let h = rng.pick(&SPECIAL_F16).to_le_bytes();
                    block[at..at + 2].copy_from_slice(&h);
                }
                ParamNode::E8m0Half(at) if rng.one_in(3) => block[at] = rng.pick(&[0, 1, 254, 255]),
                ParamNode::F32(at) if rng.one_in(3) => {
                    let bits = rng.pick(&SPECIAL_F32).to_le_bytes();
                    block[at..at + 4].copy_from_slice(&bits);
                }
                _ => {}
            }
        }
    }
    if k.decl.is_none() && rng.one_in(2) {
        // F16 / BF16 / F32 elements: specials too (as f16 or high halves).
        for c in bytes.chunks_exact_mut(2) {
            if rng.one_in(4) {
                c.copy_from_slice(&rng.pick(&SPECIAL_F16).to_le_bytes());
            }
        }
    }
    bytes
}

/// Blocks of `ty` with every byte position holding each of a few values in turn
/// (others zero, f16 parameters 1): each field view and scale byte is reached, one
/// at a time.
pub fn every_byte_blocks(ty: GgmlType) -> Vec<u8> {
    let k = gguf::kernel(ty.name()).unwrap();
    let mut bytes = Vec::new();
    for at in 0..k.block_bytes {
        for v in [0x01u8, 0x5A, 0xA5, 0x80, 0xFF] {
            let mut block = vec![0u8; k.block_bytes];
            for p in k.decl.map_or(&[][..], |d| d.params) {
                if let ParamNode::F16(f) = *p {
                    block[f..f + 2].copy_from_slice(&0x3C00u16.to_le_bytes());
                }
            }
            block[at] = v;
            bytes.extend(block);
        }
    }
    bytes
}
