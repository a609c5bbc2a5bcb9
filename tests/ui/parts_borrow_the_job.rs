// A part keeps its job mutably borrowed: no second part over the same elements, and
// no run of the whole job, while it lives.
use dq::{DynamicDequantize, Plan, Tensor, TensorMut};
use dq::kernel::{Reference};

fn main() {
    let src = Tensor::from_slice(&[1i8, 2, 3, 4], &[4]);
    let scales = Tensor::from_slice(&[0.5f32], &[1]);
    let mut out = [0f32; 4];
    let mut dst = TensorMut::from_slice(&mut out, &[4]);
    let op = DynamicDequantize::per_tensor().into();
    let plan = Plan::new(&op, &src.desc, Some(&scales.desc), None, &dst.desc).unwrap();
    let mut job = plan.bind(&src, Some(&scales), None, &mut dst).unwrap();
    let kernel = Reference::default();
    let (mut head, _) = job.split_at(3).unwrap();
    let (_, mut tail) = job.split_at(1).unwrap();
    job.run(&kernel).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || head.run(&kernel));
        s.spawn(move || tail.run(&kernel));
    });
}
