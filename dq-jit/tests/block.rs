//! The JIT's block kernels against the generated block driver on random block
//! bytes, bit for bit (the root crate's `tests/formats/gguf_jit.rs` checks the reference
//! and the fixtures).

use dq_runtime::block::{ParamNode, gguf};

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const SPECIAL_F16: [u16; 10] = [
    0x0000, 0x8000, 0x0001, 0x83FF, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
];

#[test]
fn every_type_matches_the_generated_driver() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for gk in gguf::kernels() {
        let k = dq_jit::block::kernel(gk.name).unwrap();
        for blocks in [1usize, 2, 7, 33, 400] {
            let mut bytes: Vec<u8> = (0..blocks * gk.block_bytes)
                .map(|_| rng.next() as u8)
                .collect();
            let params = gk.decl.map_or(&[][..], |d| d.params);
            for block in bytes.chunks_exact_mut(gk.block_bytes) {
                for p in params {
                    match *p {
                        ParamNode::F16(at) if rng.next().is_multiple_of(3) => {
                            let h = SPECIAL_F16[rng.next() as usize % 10].to_le_bytes();
                            block[at..at + 2].copy_from_slice(&h);
                        }
                        ParamNode::E8m0Half(at) if rng.next().is_multiple_of(3) => {
                            block[at] = [0, 1, 254, 255][rng.next() as usize % 4];
                        }
                        _ => {}
                    }
                }
            }
            if gk.decl.is_none() {
                for c in bytes.chunks_exact_mut(2) {
                    if rng.next().is_multiple_of(4) {
                        c.copy_from_slice(&SPECIAL_F16[rng.next() as usize % 10].to_le_bytes());
                    }
                }
            }
            let n = blocks * gk.block_elems;
            let mut want = vec![0f32; n];
            gk.run(&bytes, &mut want).unwrap();
            let mut got = vec![f32::NAN; n];
            k.run(&bytes, &mut got).unwrap();
            for i in 0..n {
                assert_eq!(
                    got[i].to_bits(),
                    want[i].to_bits(),
                    "{} element {i} of {n}: jit {} generated {}",
                    gk.name,
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn lengths_are_checked_and_kernels_reused() {
    let k = dq_jit::block::kernel("Q4_0").unwrap();
    let mut out = [0f32; 32];
    assert!(k.run(&[0; 17], &mut out).is_err());
    assert!(k.run(&[0; 18], &mut out[..31]).is_err());
    k.run(&[0; 18], &mut out).unwrap();
    let before = dq_jit::block::stats();
    let again = dq_jit::block::kernel("Q4_0").unwrap();
    assert!(std::sync::Arc::ptr_eq(&k, &again));
    assert!(dq_jit::block::stats().reused > before.reused);
    assert!(dq_jit::block::kernel("I8").is_err());
}
