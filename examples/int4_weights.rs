//! Dequantize a u4 weight matrix with per-group (1 x 128) bf16 scales and u4 zero
//! points, the layout of int4 LLM checkpoints, on every backend, and check that they
//! agree bit for bit.
//!
//! Run: `cargo run --release --example int4_weights`

use dq::{Backend, DType, DynamicDequantize, Options, Tensor, TensorMut, dtype};
use half::bf16;

fn main() -> Result<(), dq::Error> {
    let (rows, cols, group) = (256, 1024, 128);
    let groups = cols / group;
    // Packed u4: two values per byte, low nibble first.
    let values: Vec<i8> = (0..rows * cols)
        .map(|i| ((i * 7 + i / 13) % 16) as i8)
        .collect();
    let packed = dtype::pack_4bit(&values);
    let zp_values: Vec<i8> = (0..rows * groups).map(|i| (i % 16) as i8).collect();
    let packed_zps = dtype::pack_4bit(&zp_values);
    let scales: Vec<bf16> = (0..rows * groups)
        .map(|i| bf16::from_f32(0.01 + (i % 97) as f32 * 1e-4))
        .collect();

    let src = Tensor::from_bytes(DType::U4, &[rows, cols], &packed);
    let zps = Tensor::from_bytes(DType::U4, &[rows, groups], &packed_zps);
    let scales = Tensor::from_slice(&scales, &[rows, groups]);
    let op = DynamicDequantize::per_group(vec![1, group as i64]).into();

    let mut results = Vec::new();
    for backend in [Backend::Reference, Backend::Generated, Backend::Jit] {
        let mut out = vec![bf16::ZERO; rows * cols];
        let mut dst = TensorMut::from_slice(&mut out, &[rows, cols]);
        let opts = Options::new().with_backend(backend).with_threads(2);
        dq::dequantize(&op, &src, Some(&scales), Some(&zps), &mut dst, &opts)?;
        results.push((backend, out));
    }
    let want = &results[0].1;
    for (backend, got) in &results {
        let same = got
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        println!(
            "{backend:?}: {} values, bit-identical to the reference: {same}",
            got.len()
        );
        assert!(same, "{backend:?} differs from the reference");
    }
    // w[0][1] = (7 - 0) * bf16(0.01), rounded once to bf16.
    let expect = bf16::from_f32(7.0 * bf16::from_f32(0.01).to_f32());
    println!("w[0][1] = {} (expected {expect})", want[1]);
    assert_eq!(want[1].to_bits(), expect.to_bits());
    Ok(())
}
