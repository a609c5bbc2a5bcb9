//! Reference backend throughput.
//!
//! Metric: GB/s = (src bytes + dst bytes) / median time (criterion `Throughput::Bytes`).
//! The `memcpy` group copies a buffer as large as dst; its bytes count read + write,
//! so the two groups read on the same scale within one run.
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dq::{DType, DynamicDequantize, Op, Plan, Reference, Tensor, TensorDesc, TensorMut};

/// A case: op, dtypes and shape.
struct Case {
    name: &'static str,
    op: Op,
    src: DType,
    dst: DType,
    shape: [usize; 2],
    scales: Vec<usize>,
}

fn cases(rows: usize) -> Vec<Case> {
    vec![
        Case {
            name: "s8-f32/per_channel",
            op: DynamicDequantize::per_channel(0).into(),
            src: DType::S8,
            dst: DType::F32,
            shape: [rows, 256],
            scales: vec![rows],
        },
        Case {
            name: "u4-bf16/group_1x128",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            dst: DType::BF16,
            shape: [rows, 256],
            scales: vec![rows, 2],
        },
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    g.sample_size(10);
    for rows in [256, 4096] {
        for case in cases(rows) {
            let n = rows * 256;
            let src_d = TensorDesc::new(case.src, &case.shape);
            let dst_d = TensorDesc::new(case.dst, &case.shape);
            let sc_d = TensorDesc::new(case.dst, &case.scales);
            let src = vec![0x5au8; src_d.required_bytes(dq::Role::Src).unwrap()];
            let scales = vec![0x3cu8; sc_d.required_bytes(dq::Role::Scales).unwrap()];
            let mut out = vec![0u8; dst_d.required_bytes(dq::Role::Dst).unwrap()];
            let plan = Plan::new(&case.op, &src_d, Some(&sc_d), None, &dst_d).unwrap();
            g.throughput(Throughput::Bytes((src.len() + out.len()) as u64));
            g.bench_function(BenchmarkId::new(case.name, n), |b| {
                b.iter(|| {
                    let s = Tensor {
                        desc: src_d.clone(),
                        data: &src,
                    };
                    let sc = Tensor {
                        desc: sc_d.clone(),
                        data: &scales,
                    };
                    let mut d = TensorMut {
                        desc: dst_d.clone(),
                        data: &mut out,
                    };
                    let mut job = plan.bind(&s, Some(&sc), None, &mut d).unwrap();
                    job.run(&Reference::default()).unwrap();
                })
            });
            let from = vec![1u8; out.len()];
            let mut to = vec![0u8; out.len()];
            g.throughput(Throughput::Bytes(2 * out.len() as u64));
            g.bench_function(BenchmarkId::new(format!("memcpy/{}", case.name), n), |b| {
                b.iter(|| to.copy_from_slice(std::hint::black_box(&from)))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
