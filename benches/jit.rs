//! JIT throughput next to the generated kernels, the reference and memcpy.
//!
//! Metric: GB/s = (src bytes + dst bytes) / median time, one thread. `memcpy` copies
//! a buffer of the dst's size (read + write counted) in the same run as the yardstick.
//! `jit` runs with the process's store strategy for large outputs
//! (`dq::policy::large_store`); the other variant (`jit_stream`, or `jit_plain` when
//! that strategy is non-temporal) flips it: non-temporal block copies of large dense
//! outputs against ordinary stores. `generated` appears when the build has the generated backend.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dq::case::Case;
use dq::jit;
use dq::kernel::{Kernel, Reference};
use dq::policy::{self, StoreStrategy};
use dq::{DType, DynamicDequantize, Op, TensorDesc, TensorMut};

struct Work {
    name: &'static str,
    op: Op,
    src: DType,
    dst: DType,
    shape: [usize; 2],
    scale_shape: Vec<usize>,
    zps: Option<DType>,
}

fn works() -> Vec<Work> {
    let big = [4096, 4096];
    vec![
        Work {
            name: "s8_f32_per_channel_16M",
            op: DynamicDequantize::per_channel(0).into(),
            src: DType::S8,
            dst: DType::F32,
            shape: big,
            scale_shape: vec![4096],
            zps: Some(DType::S8),
        },
        Work {
            name: "u4_bf16_group128_16M",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            dst: DType::BF16,
            shape: big,
            scale_shape: vec![4096, 32],
            zps: None,
        },
        Work {
            name: "s8_f32_per_channel_64K",
            op: DynamicDequantize::per_channel(0).into(),
            src: DType::S8,
            dst: DType::F32,
            shape: [256, 256],
            scale_shape: vec![256],
            zps: Some(DType::S8),
        },
        Work {
            name: "u4_bf16_group128_64K",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            dst: DType::BF16,
            shape: [256, 256],
            scale_shape: vec![256, 2],
            zps: None,
        },
        Work {
            name: "u4_f16_group128_16M",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            dst: DType::F16,
            shape: big,
            scale_shape: vec![4096, 32],
            zps: None,
        },
    ]
}

fn bench(c: &mut Criterion) {
    let backends = dq::backends();
    for w in works() {
        let n = w.shape[0] * w.shape[1];
        let case = Case::generate(
            w.op.clone(),
            TensorDesc::new(w.src, &w.shape),
            Some(TensorDesc::new(w.dst, &w.scale_shape)),
            w.zps.map(|t| TensorDesc::new(t, &w.scale_shape)),
            TensorDesc::new(w.dst, &w.shape),
            1,
        )
        .unwrap();
        let plan = case.plan().unwrap();
        let dst_bytes = case.dst.data.len();
        let mut out = case.dst.data.clone();

        let mut g = c.benchmark_group(w.name);
        g.throughput(Throughput::Bytes((case.src.data.len() + dst_bytes) as u64));
        if n > 1 << 20 {
            g.sample_size(20);
        }
        let copy_src = vec![1u8; dst_bytes];
        let mut copy_dst = vec![0u8; dst_bytes];
        g.bench_function(BenchmarkId::new("memcpy", dst_bytes), |b| {
            b.iter(|| copy_dst.copy_from_slice(std::hint::black_box(&copy_src)))
        });
        let jit = jit::standard();
        let mut kernels: Vec<(&str, &dyn Kernel)> = vec![("jit", jit)];
        if let Some(generated) = backends.get(dq::Backend::Generated) {
            kernels.push(("generated", generated));
        }
        if n <= 1 << 16 {
            kernels.push((
                "reference",
                &Reference {
                    formula: &dq::kernel::STANDARD,
                },
            ));
        }
        for (name, k) in kernels {
            let mut d = TensorMut::from_bytes(w.dst, &w.shape, &mut out);
            let mut job = case.bind(&plan, &mut d).unwrap();
            job.run(k).unwrap();
            g.bench_function(name, |b| b.iter(|| job.run(k).unwrap()));
            if k.backend() == dq::Backend::Jit && n > 1 << 20 {
                let default = policy::large_store();
                let (other, label) = if default == StoreStrategy::NonTemporal {
                    (StoreStrategy::Plain, "jit_plain")
                } else {
                    (StoreStrategy::NonTemporal, "jit_stream")
                };
                let _other = policy::Tuning::new().with_store(other).enter();
                g.bench_function(label, |b| b.iter(|| job.run(k).unwrap()));
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
