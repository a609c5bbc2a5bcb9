//! `auto` on quantized linears: the first large calls race the generated driver
//! and the JIT (`dq::formats::race`); every call, raced or not, gives the
//! reference's bits.

use dq::formats::hf::Checkpoint;
use dq::formats::race;
use dq::{Backend, Options};
use half::bf16;
use safetensors::Dtype;
use safetensors::tensor::TensorView;

const K: usize = 4096;
const N: usize = 256;
const PREFIX: &str = "model.layers.0.mlp.up_proj";

/// A GPTQ v1 4-bit g128 checkpoint of one random `[N, K]` linear (N * K = 2^20
/// elements: the race's threshold).
fn write_gptq(dir: &std::path::Path) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    let g = K / 128;
    let scales: Vec<u8> = (0..g * N)
        .flat_map(|i| (0x1800u16 + (i % 3000) as u16).to_le_bytes())
        .collect();
    let tensors = [
        ("qweight", Dtype::I32, vec![K / 8, N], bytes(K / 8 * N * 4)),
        ("qzeros", Dtype::I32, vec![g, N / 8], bytes(g * N / 8 * 4)),
        ("scales", Dtype::F16, vec![g, N], scales),
    ];
    let views = tensors.iter().map(|(f, d, s, b)| {
        (
            format!("{PREFIX}.{f}"),
            TensorView::new(*d, s.clone(), b).unwrap(),
        )
    });
    let file = safetensors::serialize(views, None).unwrap();
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
    let config = r#"{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": false, "checkpoint_format": "gptq"}}"#;
    std::fs::write(dir.join("config.json"), config).unwrap();
}

#[test]
fn auto_races_then_keeps_one_backend_with_the_same_bits() {
    let dir = tempfile::tempdir().unwrap();
    write_gptq(dir.path());
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let l = ckpt.linear(PREFIX).unwrap();
    const { assert!(N * K >= race::MIN_ELEMENTS) };
    let mut want = vec![bf16::ZERO; N * K];
    let reference = Options::new()
        .with_backend(Backend::Reference)
        .with_threads(2);
    l.dequantize(&mut want, &reference).unwrap();
    let want: Vec<u16> = want.iter().map(|y| y.to_bits()).collect();
    let bf16_kinds =
        |s: &[(String, race::Pick)]| s.iter().filter(|(k, _)| k.contains("bf16")).count();
    assert_eq!(
        bf16_kinds(&race::settled()),
        0,
        "no race before the first call"
    );
    for call in 0..2 * race::ROUNDS + 2 {
        let mut got = vec![bf16::from_f32(7.0); N * K];
        let auto = Options::new()
            .with_backend(Backend::Auto)
            .with_threads(1 + call % 2);
        l.dequantize(&mut got, &auto).unwrap();
        let first = got.iter().zip(&want).position(|(g, w)| g.to_bits() != *w);
        assert_eq!(first, None, "call {call}: auto differs from the reference");
    }
    // The race is between the generated driver and the JIT: none without it.
    #[cfg(feature = "jit")]
    {
        let settled = race::settled();
        assert_eq!(bf16_kinds(&settled), 1, "one race settled: {settled:?}");
    }
}
