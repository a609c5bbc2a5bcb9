//! Declare a fused kernel (dequantize, then ReLU) with `#[dequant_kernel]` and run it
//! through the compile-time generated kernels and the JIT, which compiles the same
//! formula.
//!
//! Run: `cargo run --release --example fused_relu`

use dq::{DynamicDequantize, Plan, Tensor, TensorMut, dequant_kernel};

/// Dequantize, then ReLU.
#[dequant_kernel(src = [s8], zps = [none, s8], dst = [f32])]
fn dequantize_relu(q: int, z: int, s: float) {
    max((q - z) * s, 0.0)
}

fn main() -> Result<(), dq::Error> {
    let q = [-3i8, -1, 0, 2, 5, 127];
    let src = Tensor::from_slice(&q, &[6]);
    let scales = Tensor::from_slice(&[0.5f32], &[1]);
    let zps = Tensor::from_slice(&[1i8], &[1]);
    let op = DynamicDequantize::per_tensor().into();
    let want = [0.0f32, 0.0, 0.0, 0.5, 2.0, 63.0];

    let jit = dq::jit::for_formula(dequantize_relu.ir());
    let kernels: [(&str, &dyn dq::kernel::Kernel); 2] =
        [("generated", &dequantize_relu), ("jit", jit)];
    for (name, kernel) in kernels {
        let mut out = [f32::NAN; 6];
        let mut dst = TensorMut::from_slice(&mut out, &[6]);
        let plan = Plan::new(
            &op,
            &src.desc,
            Some(&scales.desc),
            Some(&zps.desc),
            &dst.desc,
        )?;
        plan.bind(&src, Some(&scales), Some(&zps), &mut dst)?
            .run(kernel)?;
        println!("{name}: {out:?}");
        assert_eq!(out, want);
    }
    Ok(())
}
