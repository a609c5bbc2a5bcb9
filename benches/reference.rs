//! Reference backend throughput.
//!
//! Metric: GB/s = (src bytes + dst bytes) / median time (criterion `Throughput::Bytes`).
//! The `memcpy` group copies a buffer as large as dst; its bytes count read + write,
//! so the two groups read on the same scale within one run.
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dq::case::Case;
use dq::kernel::Reference;
use dq::{DType, DynamicDequantize, Op, TensorDesc};

/// A case: op, dtypes and shape.
struct Work {
    name: &'static str,
    op: Op,
    src: DType,
    dst: DType,
    shape: [usize; 2],
    scales: Vec<usize>,
}

fn works(rows: usize) -> Vec<Work> {
    vec![
        Work {
            name: "s8-f32/per_channel",
            op: DynamicDequantize::per_channel(0).into(),
            src: DType::S8,
            dst: DType::F32,
            shape: [rows, 256],
            scales: vec![rows],
        },
        Work {
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
        for w in works(rows) {
            let n = rows * 256;
            let case = Case::generate(
                w.op,
                TensorDesc::new(w.src, &w.shape),
                Some(TensorDesc::new(w.dst, &w.scales)),
                None,
                TensorDesc::new(w.dst, &w.shape),
                1,
            )
            .unwrap();
            let plan = case.plan().unwrap();
            let mut out = case.dst.data.clone();
            g.throughput(Throughput::Bytes((case.src.data.len() + out.len()) as u64));
            g.bench_function(BenchmarkId::new(w.name, n), |b| {
                b.iter(|| {
                    case.with_job(&plan, &mut out, |job| job.run(&Reference::default()))
                        .unwrap()
                        .unwrap();
                })
            });
            let from = vec![1u8; out.len()];
            let mut to = vec![0u8; out.len()];
            g.throughput(Throughput::Bytes(2 * out.len() as u64));
            g.bench_function(BenchmarkId::new(format!("memcpy/{}", w.name), n), |b| {
                b.iter(|| to.copy_from_slice(std::hint::black_box(&from)))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
