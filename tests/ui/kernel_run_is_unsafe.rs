// Calling a kernel directly skips the checks of `Job::run`: only in `unsafe` code.
use dq::{DynamicDequantize, Plan, Tensor, TensorMut};
use dq::kernel::{Kernel, Reference};

fn main() {
    let src = Tensor::from_slice(&[1i8, 2, 3, 4], &[4]);
    let scales = Tensor::from_slice(&[0.5f32], &[1]);
    let mut out = [0f32; 4];
    let mut dst = TensorMut::from_slice(&mut out, &[4]);
    let op = DynamicDequantize::per_tensor().into();
    let plan = Plan::new(&op, &src.desc, Some(&scales.desc), None, &dst.desc).unwrap();
    let job = plan.bind(&src, Some(&scales), None, &mut dst).unwrap();
    let kernel = Reference::default();
    std::thread::scope(|s| {
        let (job, kernel) = (&job, &kernel);
        s.spawn(move || kernel.run(job, 0..3));
        s.spawn(move || kernel.run(job, 1..4));
    });
}
