//! JIT compile time per dtype class, and the cost of a cache hit.
//!
//! `compile/<class>`: a fresh kernel cache per iteration, so each iteration builds
//! IR, compiles, finalizes and frees one kernel (release profile, verifier off).
//! `cache_hit`: looking up a kernel that is already compiled.

use criterion::{Criterion, criterion_group, criterion_main};
use dq::jit::{self, Jit};
use dq::kernel::STANDARD;
use dq::{AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Plan, TensorDesc};

fn dynamic(
    op: DynamicDequantize,
    src: DType,
    zps: Option<DType>,
    dst: DType,
    ss: &[usize],
) -> Plan {
    let shape = [4096, 4096];
    Plan::new(
        &op.into(),
        &TensorDesc::new(src, &shape),
        Some(&TensorDesc::new(dst, ss)),
        zps.map(|t| TensorDesc::new(t, ss)).as_ref(),
        &TensorDesc::new(dst, &shape),
    )
    .unwrap()
}

fn classes() -> Vec<(&'static str, Plan)> {
    let pc = || DynamicDequantize::per_channel(0);
    let pg = || DynamicDequantize::per_group(vec![1, 128]);
    let axes: Op = AxesDequantize::new(vec![1]).into();
    let shape = [64, 4096];
    vec![
        (
            "s8_f32_per_channel",
            dynamic(pc(), DType::S8, None, DType::F32, &[4096]),
        ),
        (
            "u8_f32_zp_s32_per_channel",
            dynamic(pc(), DType::U8, Some(DType::S32), DType::F32, &[4096]),
        ),
        (
            "s8_f32_last_axis",
            dynamic(
                DynamicDequantize::per_channel(1),
                DType::S8,
                Some(DType::S8),
                DType::F32,
                &[4096],
            ),
        ),
        (
            "u4_bf16_group128",
            dynamic(pg(), DType::U4, None, DType::BF16, &[4096, 32]),
        ),
        (
            "s4_f16_group128_zp_s4",
            dynamic(pg(), DType::S4, Some(DType::S4), DType::F16, &[4096, 32]),
        ),
        (
            "axes_s32_f64",
            Plan::new(
                &axes,
                &TensorDesc::new(DType::S32, &shape),
                Some(&TensorDesc::new(DType::F64, &[4096])),
                Some(&TensorDesc::new(DType::S32, &[4096])),
                &TensorDesc::new(DType::F64, &shape),
            )
            .unwrap(),
        ),
        (
            "static_s8_f32_zp_s64",
            Plan::new(
                &Dequantize::new(vec![0.5]).zps(vec![i64::MIN]).into(),
                &TensorDesc::new(DType::S8, &shape),
                None,
                None,
                &TensorDesc::new(DType::F32, &shape),
            )
            .unwrap(),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile");
    for (name, plan) in classes() {
        g.bench_function(name, |b| {
            b.iter(|| Jit::new(&STANDARD, 1).kernel(&plan).unwrap().code_bytes())
        });
    }
    g.finish();
    let (_, plan) = &classes()[0];
    let jit = jit::standard();
    jit.kernel(plan).unwrap();
    c.bench_function("cache_hit", |b| {
        b.iter(|| jit.kernel(std::hint::black_box(plan)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
