//! Generated kernels vs the reference, beside a memcpy yardstick, single thread.
//!
//! Metric: GB/s = (src bytes + dst bytes) / median time per call (scales and zero
//! points are not counted). The memcpy group copies a buffer the size of the
//! largest dst of its size class and counts read + write bytes (2 x its size), so
//! "% of memcpy" = dq GB/s / memcpy GB/s from the same run. Sizes: 64K elements
//! (cache-resident) and 16M elements (memory-bound, dst bigger than the LLC).
//! `avx2-intrinsics` is a hand-written AVX2 loop for s8 -> f32 per-channel: the
//! cache-resident yardstick.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Bencher, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dq::case::{Case, OwnedTensor};
use dq::kernel::{Kernel, Reference};
use dq::{DType, DynamicDequantize, Op, Plan, TensorDesc, TensorMut};

const SMALL: (usize, usize) = (256, 256);
const LARGE: (usize, usize) = (4096, 4096);

struct Bench {
    name: &'static str,
    op: Op,
    src: DType,
    zps: Option<DType>,
    dst: DType,
    scale_shape: fn(usize, usize) -> Vec<usize>,
}

fn cases() -> Vec<Bench> {
    vec![
        Bench {
            name: "s8-f32/per_channel",
            op: DynamicDequantize::per_channel(1).into(),
            src: DType::S8,
            zps: None,
            dst: DType::F32,
            scale_shape: |_, c| vec![c],
        },
        Bench {
            name: "u8-f32/per_tensor_zp",
            op: DynamicDequantize::per_tensor().into(),
            src: DType::U8,
            zps: Some(DType::U8),
            dst: DType::F32,
            scale_shape: |_, _| vec![1],
        },
        Bench {
            name: "s4-f32/group128",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::S4,
            zps: None,
            dst: DType::F32,
            scale_shape: |r, c| vec![r, c.div_ceil(128)],
        },
        Bench {
            name: "u4-bf16/group128_zp",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            zps: Some(DType::U4),
            dst: DType::BF16,
            scale_shape: |r, c| vec![r, c.div_ceil(128)],
        },
        Bench {
            name: "u4-f16/group128",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            zps: None,
            dst: DType::F16,
            scale_shape: |r, c| vec![r, c.div_ceil(128)],
        },
    ]
}

/// One case with random data, its plan and a dst buffer.
struct Data {
    case: Case,
    plan: Plan,
    dst: Vec<u8>,
    bytes: u64,
}

fn data(b: &Bench, (rows, cols): (usize, usize)) -> Data {
    let shape = [rows, cols];
    let ss = (b.scale_shape)(rows, cols);
    let case = Case::generate(
        b.op.clone(),
        TensorDesc::new(b.src, &shape),
        Some(TensorDesc::new(b.dst, &ss)),
        b.zps.map(|z| TensorDesc::new(z, &ss)),
        TensorDesc::new(b.dst, &shape),
        1,
    )
    .unwrap();
    let plan = case.plan().unwrap();
    let dst = case.dst.data.clone();
    Data {
        bytes: (case.src.data.len() + dst.len()) as u64,
        case,
        plan,
        dst,
    }
}

/// Times `k` on `d`: binding the plan to the buffers (validation) and running it,
/// per call; the tensor views are built once, as a caller reusing buffers would.
fn time_kernel(bn: &mut Bencher<'_>, d: &mut Data, k: &dyn Kernel) {
    let Data {
        case, plan, dst, ..
    } = d;
    let src = case.src.view();
    let sc = case.scales.as_ref().map(OwnedTensor::view);
    let zp = case.zps.as_ref().map(OwnedTensor::view);
    let mut dst = TensorMut {
        desc: plan.dst().clone(),
        data: dst,
    };
    bn.iter(|| {
        let mut job = plan.bind(&src, sc.as_ref(), zp.as_ref(), &mut dst).unwrap();
        job.run(k).unwrap();
    });
}

/// The hand-written AVX2 s8 -> f32 per-channel loop (the cache-resident yardstick).
///
/// # Safety
/// The CPU has AVX2; `cols` is a multiple of 8; buffers hold `rows * cols` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_s8_f32(src: &[i8], scales: &[f32], dst: &mut [f32], cols: usize) {
    use std::arch::x86_64::*;
    for (row_in, row_out) in src.chunks_exact(cols).zip(dst.chunks_exact_mut(cols)) {
        for j in (0..cols).step_by(8) {
            // SAFETY: j + 8 <= cols, inside the row slices and the scales.
            unsafe {
                let q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(row_in.as_ptr().add(j).cast()));
                let s = _mm256_loadu_ps(scales.as_ptr().add(j));
                let y = _mm256_mul_ps(_mm256_cvtepi32_ps(q), s);
                _mm256_storeu_ps(row_out.as_mut_ptr().add(j), y);
            }
        }
    }
}

fn memcpy(c: &mut Criterion) {
    let mut g = c.benchmark_group("memcpy");
    for (label, n) in [
        ("64K", SMALL.0 * SMALL.1 * 4),
        ("16M", LARGE.0 * LARGE.1 * 4),
    ] {
        let src = vec![1u8; n];
        let mut dst = vec![0u8; n];
        g.throughput(Throughput::Bytes(2 * n as u64));
        g.bench_function(BenchmarkId::new("copy", label), |b| {
            b.iter(|| dst.copy_from_slice(black_box(&src)))
        });
    }
    g.finish();
}

fn kernels(c: &mut Criterion) {
    let generated: &dyn Kernel = &dq::generated::standard;
    let reference = Reference::default();
    for b in cases() {
        let mut g = c.benchmark_group(b.name);
        for (label, size) in [("64K", SMALL), ("16M", LARGE)] {
            let mut d = data(&b, size);
            g.throughput(Throughput::Bytes(d.bytes));
            g.bench_function(BenchmarkId::new("generated", label), |bn| {
                time_kernel(bn, &mut d, generated)
            });
            // The reference is slow: the small size only, and 16M for the first case
            // at a smaller sample count.
            if label == "64K" || b.name == "s8-f32/per_channel" {
                g.bench_function(BenchmarkId::new("reference", label), |bn| {
                    time_kernel(bn, &mut d, &reference)
                });
            }
            #[cfg(target_arch = "x86_64")]
            if b.name == "s8-f32/per_channel" && std::arch::is_x86_feature_detected!("avx2") {
                // The same buffers as the generated kernel: only the code differs.
                let Data { case, dst, .. } = &mut d;
                let src: &[i8] = bytemuck::cast_slice(&case.src.data);
                let scales: &[f32] = bytemuck::cast_slice(&case.scales.as_ref().unwrap().data);
                let out: &mut [f32] = bytemuck::cast_slice_mut(dst);
                g.bench_function(BenchmarkId::new("avx2-intrinsics", label), |bn| {
                    // SAFETY: AVX2 detected; cols is a multiple of 8.
                    bn.iter(|| unsafe { avx2_s8_f32(black_box(src), scales, out, size.1) })
                });
            }
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = memcpy, kernels
}
criterion_main!(benches);
