//! The CLIF of one tiny specialisation of each JIT kind with golden text
//! (`tests/*.clif`), so changes in emitted code show in review.
//! `DQ_BLESS=1 cargo test -p dq-jit --test clif` rewrites the files.

use dq_jit::{Jit, LinearJit};
use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
use dq_runtime::{DType, DynamicDequantize, Plan, STANDARD, TensorDesc};

/// Compares `text` with the golden file `tests/{name}`; under `DQ_BLESS` (this
/// test's flag, read here only) writes it first.
fn golden(name: &str, text: &str) {
    let path = format!("{}/tests/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("DQ_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("tests/{name} (DQ_BLESS=1 writes it): {e}"));
    assert_eq!(
        text, want,
        "emitted CLIF of tests/{name} changed: review, then rerun with DQ_BLESS=1"
    );
}

/// s8 -> f32, three elements, one f32 scale.
#[test]
fn clif_of_a_tiny_specialisation() {
    let shape = [3];
    let plan = Plan::new(
        &DynamicDequantize::per_tensor().into(),
        &TensorDesc::new(DType::S8, &shape),
        Some(&TensorDesc::new(DType::F32, &[1])),
        None,
        &TensorDesc::new(DType::F32, &shape),
    )
    .unwrap();
    golden("tiny.clif", &Jit::new(&STANDARD, 1).clif(&plan).unwrap());
}

/// 4-bit along K, no zero points, f32 scales, bf16 out.
#[test]
fn clif_of_a_tiny_linear() {
    let (word, scale) = ([0u8; 4], [0u8; 4]);
    let weights = Packed {
        words: &word,
        bits: 4,
        packing: Packing::Inner,
        row_stride: 1,
        col_stride: 1,
        offset: -8,
    };
    let scales = Scales {
        bytes: &scale,
        dtype: ScaleType::F32,
        row_stride: 1,
        col_stride: 1,
    };
    let l = Linear::new(1, 8, 1, weights, None, scales, Groups::Size(8)).unwrap();
    let jit = LinearJit::new();
    jit.verify(&l, DType::BF16).unwrap();
    golden("linear_tiny.clif", &jit.clif(&l, DType::BF16).unwrap());
}
