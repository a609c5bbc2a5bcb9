//! Mutation tests of Q2_0's declaration against ggml's C outputs
//! (`tests/fixtures/gguf/q2_0`, `scripts/ggml_q2_0.c`): the crumbs of a run read
//! across four bytes (as Q4_0 spreads its nibbles) instead of byte by byte, the
//! code's offset -2 (`(q - 2) * d`, a reading of the ternary code some tools use)
//! instead of -1, and the scale not applied each fail on the generated driver and
//! the JIT; the unmutated declaration passes on both.
use dq::block::{Block, BlockDecl, BlockFormula, BlockNode as N, Declared, Decode, Field, gguf};
use dq::formats::gguf::Gguf;

use crate::support::gguf::{expected, fixtures};

/// The bytes of q2_0.gguf's tensor `name` and ggml's output for it.
fn tensor(name: &str) -> (Vec<u8>, Vec<f32>) {
    let file = Gguf::open(fixtures().join("q2_0.gguf")).unwrap();
    let t = file.tensor(name).unwrap();
    (
        file.tensor_data(t).unwrap().to_vec(),
        expected("q2_0", name),
    )
}

/// Element `16 a + 4 b + c` from crumb `b` of byte `2 + 4 a + c` (ggml: crumb `c`
/// of byte `2 + 4 a + b`).
const ACROSS: BlockDecl = BlockDecl {
    digits: &[4, 4, 4],
    fields: &[Field {
        byte: 2,
        byte_stride: &[4, 0, 1],
        shift: 0,
        shift_stride: &[0, 2, 0],
        bits: 2,
        signed: false,
        base3: false,
        table: None,
        at: 0,
    }],
    group: &[0, 0, 0],
    ..gguf::Q2_0
};
/// `(q - 2) * d`.
const OFFSET_2: BlockDecl = BlockDecl {
    offset: -2,
    ..gguf::Q2_0
};
/// `q - 1` without the scale.
const UNSCALED: BlockDecl = BlockDecl {
    formula: BlockFormula {
        nodes: &[N::Q, N::Float(0)],
    },
    ..gguf::Q2_0
};
const MUTANTS: [&BlockDecl; 3] = [&ACROSS, &OFFSET_2, &UNSCALED];

struct Mutant<const M: usize>;

impl<const M: usize> Block for Mutant<M> {
    const DECL: BlockDecl = *MUTANTS[M];
}

/// How many elements of `got` differ from `want` in bits.
fn differing(got: &[f32], want: &[f32]) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count()
}

fn generated<const M: usize>(bytes: &[u8], n: usize) -> Vec<f32> {
    let mut got = vec![0f32; n];
    Declared::<Mutant<M>>::decode::<f32, 0>(bytes, &mut got);
    got
}

#[test]
fn a_wrong_crumb_order_offset_or_scale_fails_on_the_generated_driver() {
    let (bytes, want) = tensor("q2_0.r3");
    let mut got = vec![0f32; want.len()];
    gguf::kernel("Q2_0").unwrap().run(&bytes, &mut got).unwrap();
    assert_eq!(differing(&got, &want), 0, "the declaration itself");
    let n = want.len();
    for (m, got) in [
        generated::<0>(&bytes, n),
        generated::<1>(&bytes, n),
        generated::<2>(&bytes, n),
    ]
    .iter()
    .enumerate()
    {
        // Random codes: about three in four elements change under each mutant.
        assert!(differing(got, &want) > n / 2, "mutant {m} went unseen");
    }
}

/// The JIT compiling the same mutants.
#[cfg(feature = "jit")]
#[test]
fn a_wrong_crumb_order_offset_or_scale_fails_on_the_jit() {
    use dq::block::BlockKernel;
    let (bytes, want) = tensor("q2_0.r3");
    let jit = dq_jit::block::kernel("Q2_0").unwrap();
    let mut got = vec![0f32; want.len()];
    jit.run(&bytes, &mut got).unwrap();
    assert_eq!(differing(&got, &want), 0, "the declaration itself");
    for (m, decl) in MUTANTS.into_iter().enumerate() {
        let gk: &'static BlockKernel = Box::leak(Box::new(BlockKernel::of::<Declared<Mutant<0>>>(
            decl.name,
            decl.block_bytes,
            decl.block_elems,
            Some(decl),
        )));
        let jit = dq_jit::block::compile_uncached(gk).unwrap();
        jit.run(&bytes, &mut got).unwrap();
        assert!(
            differing(&got, &want) > want.len() / 2,
            "mutant {m} went unseen"
        );
    }
}
