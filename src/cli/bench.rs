//! `dq bench`: median time and GB/s of every available backend on generated data,
//! beside a memcpy yardstick measured in the same run.
//!
//! GB/s counts src + dst bytes for a backend, and read + write bytes of a copy as
//! large as dst for memcpy. JIT compile time comes from the JIT kernel's stats.

use std::time::{Duration, Instant};

use dq::{Backend, DType, Kernel, Op, Plan, Qtype, Role, Tensor, TensorDesc, TensorMut};
use serde_json::{Value, json};

use super::args::{BenchArgs, CaseArgs, IntList, OpName, Shape};
use super::case::Case;
use super::data::Rng;
use super::error::CliError;

/// Most samples taken per backend.
const MAX_SAMPLES: usize = 1000;

/// One timed backend.
struct Row {
    backend: String,
    samples: Vec<f64>,
    bytes: usize,
}

impl Row {
    fn median(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }
    fn min(&self) -> f64 {
        self.samples.iter().copied().fold(f64::INFINITY, f64::min)
    }
    fn gbps(&self) -> f64 {
        self.bytes as f64 / self.median() / 1e9
    }
}

/// Generated tensors of a case.
struct Data {
    src: Vec<u8>,
    scales: Option<(TensorDesc, Vec<u8>)>,
    zps: Option<(TensorDesc, Vec<u8>)>,
}

/// Runs `dq bench`.
///
/// # Errors
/// Invalid case flags, an explicitly chosen backend that is unavailable, zero threads.
pub fn bench(a: &BenchArgs) -> Result<(), CliError> {
    if a.case.threads == 0 {
        return Err(dq::Error::ZeroThreads.into());
    }
    let (case, static_zps) = bench_case(&a.case)?;
    let mut rng = Rng::new(a.seed);
    let (case, data) = generate(case, static_zps, &mut rng)?;
    let scales = data.scales.as_ref().map(super::io::view);
    let zps = data.zps.as_ref().map(super::io::view);
    let src = Tensor {
        desc: case.src.clone(),
        data: &data.src,
    };
    let plan = Plan::new(
        &case.op,
        &src.desc,
        scales.as_ref().map(|t| &t.desc),
        zps.as_ref().map(|t| &t.desc),
        &case.dst,
    )?;
    let dst_bytes = case.dst.required_bytes(Role::Dst)?;
    let mut out = vec![0xffu8; dst_bytes];
    let call_bytes = data.src.len() + dst_bytes;
    let explicit = !a.backend.is_empty();
    let choices = if explicit {
        a.backend.clone()
    } else {
        vec![Backend::Generated, Backend::Jit, Backend::Reference]
    };
    let min_time = Duration::from_secs_f64(a.min_time.max(0.0));
    let backends = dq::backends();
    let mut rows = Vec::new();
    let mut jit_compile_us = None;
    for choice in choices {
        // `select` runs `supports`, which is where the JIT compiles: count from here.
        let before = backends.jit.and_then(|k| k.stats());
        let kernel = match backends.select(choice, &plan) {
            Ok(k) => k,
            Err(e) if explicit => return Err(e.into()),
            Err(e) => {
                if !a.json {
                    eprintln!("note: {e}");
                }
                continue;
            }
        };
        let name = match choice {
            Backend::Auto => kernel.name().to_string(),
            c => c.name().to_string(),
        };
        let mut dst = TensorMut {
            desc: case.dst.clone(),
            data: &mut out,
        };
        let job = plan.bind(&src, scales.as_ref(), zps.as_ref(), &mut dst)?;
        let mut call = || job.run_parallel(kernel, a.case.threads);
        call()?; // warm-up
        if name == "jit" && jit_compile_us.is_none() {
            jit_compile_us = compile_us(kernel, before);
        }
        let samples = sample(&mut call, a.reps, min_time)?;
        rows.push(Row {
            backend: name,
            samples,
            bytes: call_bytes,
        });
    }
    let copy_src = rng.bytes(dst_bytes);
    let mut copy_dst = vec![0u8; dst_bytes];
    let mut copy = || {
        parallel_copy(&copy_src, &mut copy_dst, a.case.threads);
        Ok(())
    };
    copy()?;
    rows.push(Row {
        backend: "memcpy".into(),
        samples: sample(&mut copy, a.reps, min_time)?,
        bytes: 2 * dst_bytes,
    });
    let case_json = case_json(&case, &plan, a, data.src.len(), dst_bytes);
    if a.json {
        let report = json!({
            "case": case_json,
            "backends": rows.iter().map(|r| json!({
                "backend": r.backend,
                "median_s": r.median(),
                "min_s": r.min(),
                "gbps": r.gbps(),
                "bytes": r.bytes,
                "reps": r.samples.len(),
            })).collect::<Vec<_>>(),
            "jit_compile_us": jit_compile_us,
        });
        println!("{report}");
    } else {
        print_table(&case_json, &rows, jit_compile_us);
    }
    Ok(())
}

/// The JIT's compile time since `before`, in microseconds.
fn compile_us(kernel: &dyn Kernel, before: Option<dq::KernelStats>) -> Option<f64> {
    let after = kernel.stats()?;
    let before = before.unwrap_or_default();
    Some(after.compile_ns.saturating_sub(before.compile_ns) as f64 / 1e3)
}

/// Times `f` at least `reps` times and for at least `min_time`.
fn sample(
    f: &mut dyn FnMut() -> dq::Result<()>,
    reps: usize,
    min_time: Duration,
) -> Result<Vec<f64>, CliError> {
    let start = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < reps.max(1) || (start.elapsed() < min_time && samples.len() < MAX_SAMPLES)
    {
        let t = Instant::now();
        f()?;
        samples.push(t.elapsed().as_secs_f64());
    }
    Ok(samples)
}

/// `dst.copy_from_slice(src)` split over `threads` scoped threads.
fn parallel_copy(src: &[u8], dst: &mut [u8], threads: usize) {
    if threads <= 1 || src.len() < 1 << 16 {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = src.len().div_ceil(threads).next_multiple_of(64);
    std::thread::scope(|s| {
        for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            s.spawn(move || d.copy_from_slice(c));
        }
    });
}

/// The case flags with the bench defaults filled in, and whether the static op
/// gets generated zero points.
fn bench_case(a: &CaseArgs) -> Result<(Case, bool), CliError> {
    let mut a = a.clone();
    if a.op.is_none() {
        // The default case: the int4 weight format of LLM checkpoints.
        a.op = Some(OpName::Dynamic);
        a.src_type.get_or_insert(DType::U4);
        a.dst_type.get_or_insert(DType::BF16);
        if a.qtype.is_none() {
            a.qtype = Some(Qtype::PerGroup);
            a.group_shape.get_or_insert(IntList(vec![1, 128]));
        }
        a.zps_type.get_or_insert(DType::U4);
    }
    a.shape.get_or_insert(Shape(vec![4096, 4096]));
    let mut static_zps = false;
    if a.op == Some(OpName::Dequantize) {
        match a.zps_type.take() {
            None => {}
            Some(DType::S64) => static_zps = true,
            Some(_) => {
                return Err(CliError::BadList {
                    flag: "zps-type",
                    reason:
                        "--op dequantize takes s64 zero points (attributes): use --zps-type s64"
                            .into(),
                });
            }
        }
    }
    let lists = (a.op == Some(OpName::Dequantize)).then(|| (Vec::new(), None));
    Ok((Case::new(&a, lists)?, static_zps))
}

/// Generates src, scales and zero points for `case` (filling the static op's lists).
fn generate(mut case: Case, static_zps: bool, rng: &mut Rng) -> Result<(Case, Data), CliError> {
    let src = rng.ints(case.src.dtype, case.src.required_bytes(Role::Src)?);
    let pshape = case.param_shape();
    let n: usize = pshape.iter().product();
    let (scales, zps) = match &mut case.op {
        Op::Dequantize(o) => {
            o.scales = rng
                .scales(DType::F32, n)
                .chunks(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect();
            if static_zps {
                o.zps = Some(
                    (0..n)
                        .map(|_| (rng.next_u64() % 201) as i64 - 100)
                        .collect(),
                );
            }
            (None, None)
        }
        op => {
            let dst_t = case.dst.dtype;
            let scales = (TensorDesc::new(dst_t, &pshape), rng.scales(dst_t, n));
            let zps_t = match op {
                Op::Axes(_) => Some(case.zps_type.unwrap_or(case.src.dtype)),
                _ => case.zps_type,
            };
            let zps = zps_t.map(|t| {
                let bytes = t.bytes_for(n).unwrap_or(0);
                (TensorDesc::new(t, &pshape), rng.ints(t, bytes))
            });
            (Some(scales), zps)
        }
    };
    Ok((case, Data { src, scales, zps }))
}

fn case_json(case: &Case, plan: &Plan, a: &BenchArgs, src_bytes: usize, dst_bytes: usize) -> Value {
    let (qtype, axis, group_shape, axes) = match &case.op {
        Op::Dequantize(o) => (Some(o.qtype), Some(o.axis), None, None),
        Op::Dynamic(o) => (Some(o.qtype), Some(o.axis), o.group_shape.clone(), None),
        Op::Axes(o) => (None, None, None, Some(o.axes.clone())),
    };
    json!({
        "op": case.op_name.name(),
        "src_type": case.src.dtype.name(),
        "dst_type": case.dst.dtype.name(),
        "zps_type": plan.zps().map(|z| z.dtype.name()),
        "shape": case.src.shape,
        "qtype": qtype.map(Qtype::name),
        "axis": axis,
        "group_shape": group_shape,
        "axes": axes,
        "src_strides": case.src.strides,
        "dst_strides": case.dst.strides,
        "elements": plan.numel(),
        "src_bytes": src_bytes,
        "dst_bytes": dst_bytes,
        "threads": a.case.threads,
        "seed": a.seed,
    })
}

fn print_table(case: &Value, rows: &[Row], jit_compile_us: Option<f64>) {
    let c = |k: &str| case[k].to_string().replace('"', "");
    println!(
        "case: {} {} -> {}, qtype {}, group_shape {}, axes {}, zps {}, shape {}, {} thread(s)",
        c("op"),
        c("src_type"),
        c("dst_type"),
        c("qtype"),
        c("group_shape"),
        c("axes"),
        c("zps_type"),
        c("shape"),
        c("threads"),
    );
    println!(
        "bytes per call: src {} + dst {} (memcpy: read + write of dst)",
        c("src_bytes"),
        c("dst_bytes")
    );
    let copy = rows.last().map_or(f64::NAN, Row::gbps);
    println!(
        "{:<10} {:>12} {:>12} {:>9} {:>10} {:>6}",
        "backend", "median ms", "min ms", "GB/s", "vs memcpy", "reps"
    );
    for r in rows {
        println!(
            "{:<10} {:>12.3} {:>12.3} {:>9.2} {:>9.2}x {:>6}",
            r.backend,
            r.median() * 1e3,
            r.min() * 1e3,
            r.gbps(),
            r.gbps() / copy,
            r.samples.len()
        );
    }
    match jit_compile_us {
        Some(us) => println!("jit compile: {us:.1} us"),
        None => println!("jit compile: n/a (no JIT run)"),
    }
}
