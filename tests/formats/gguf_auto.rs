//! `auto` on GGUF tensors: the first large calls race the generated block driver
//! and the JIT per block type and output type (`dq::formats::race`); every call,
//! raced or not, gives the reference's bits.

use crate::support;
use dq::formats::gguf::{GgmlType, Gguf, one_tensor_file};
use dq::formats::race;
use dq::{Backend, Options};
use half::f16;
use support::Rng;
use support::gguf::random_blocks;

const COLS: u64 = 4096;
/// COLS * ROWS = 2^20 elements: the race's threshold.
const ROWS: u64 = 256;

/// The settled races of `ty` to f16.
fn settled(ty: GgmlType) -> usize {
    let key = format!("gguf {} f16", ty.name());
    race::settled().iter().filter(|(k, _)| *k == key).count()
}

#[test]
fn auto_races_then_keeps_one_backend_with_the_same_bits() {
    const { assert!((COLS * ROWS) as usize >= race::MIN_ELEMENTS) };
    let mut rng = Rng::new(0x5eed);
    for ty in [GgmlType::Q4_K, GgmlType::Q5_0] {
        let blocks = (COLS * ROWS) as usize / ty.block_size();
        let file = one_tensor_file("w", ty, &[COLS, ROWS], &random_blocks(&mut rng, ty, blocks));
        let g = Gguf::from_bytes(&file).unwrap();
        let t = &g.tensors()[0];
        let n = (COLS * ROWS) as usize;
        let mut want = vec![f16::ZERO; n];
        let reference = Options::new()
            .with_backend(Backend::Reference)
            .with_threads(2);
        g.dequantize(t, &mut want, &reference).unwrap();
        assert_eq!(settled(ty), 0, "{ty}: no race before the first call");
        for call in 0..2 * race::ROUNDS + 2 {
            let mut got = vec![f16::from_f32(7.0); n];
            let auto = Options::new()
                .with_backend(Backend::Auto)
                .with_threads(1 + call % 2);
            g.dequantize(t, &mut got, &auto).unwrap();
            let first = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits());
            assert_eq!(
                first, None,
                "{ty} call {call}: auto differs from the reference"
            );
        }
        // The race is between the generated driver and the JIT: none without it.
        #[cfg(feature = "jit")]
        assert_eq!(
            settled(ty),
            1,
            "{ty}: one race settled: {:?}",
            race::settled()
        );
    }
}

#[test]
fn small_tensors_are_not_raced() {
    let ty = GgmlType::Q8_0;
    let mut rng = Rng::new(3);
    let file = one_tensor_file("w", ty, &[256, 4], &random_blocks(&mut rng, ty, 32));
    let g = Gguf::from_bytes(&file).unwrap();
    let t = &g.tensors()[0];
    let auto = Options::new().with_backend(Backend::Auto).with_threads(1);
    for _ in 0..4 * race::ROUNDS {
        let mut got = vec![f16::ZERO; 1024];
        g.dequantize(t, &mut got, &auto).unwrap();
    }
    assert_eq!(settled(ty), 0, "{:?}", race::settled());
}
