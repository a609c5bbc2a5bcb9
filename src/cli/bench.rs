//! `dq bench`: median time and GB/s of every available backend on generated data,
//! beside a memcpy yardstick measured in the same run.
//!
//! GB/s counts src + dst bytes for a backend, and read + write bytes of a copy as
//! large as dst for memcpy. The write roofline ([`super::roofline`]) writes dst
//! alone with each store strategy; its fastest is the least time a kernel writing
//! this output could take here, and `t/roofline` is each row's median time over
//! that one's. JIT compile time comes from the JIT kernel's stats.

use std::time::{Duration, Instant};

use dq::case::{Case, OwnedTensor};
use dq::kernel::Kernel;
use dq::{Backend, DType, Op, Plan, Qtype, Tensor, TensorDesc, TensorMut};
use serde_json::{Value, json};

use dq::policy::StoreStrategy;

use super::args::{BenchArgs, CaseArgs, IntList, OpName, Shape};
use super::case::CaseFlags;
use super::error::CliError;

/// Most samples taken per backend.
const MAX_SAMPLES: usize = 1000;

/// About how long one sample's batch of calls runs.
const BATCH: Duration = Duration::from_millis(1);

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
    /// The median over rounds of this row's time over `base`'s in the same round.
    fn paired(&self, base: &Row) -> f64 {
        let mut r: Vec<f64> = self
            .samples
            .iter()
            .zip(&base.samples)
            .map(|(a, b)| a / b)
            .collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    }
}

/// Runs `dq bench`.
///
/// # Errors
/// Invalid case flags, an explicitly chosen backend that is unavailable, zero threads.
pub fn bench(a: &BenchArgs) -> Result<(), CliError> {
    if a.case.threads == 0 {
        return Err(dq::Error::ZeroThreads.into());
    }
    let (flags, static_zps) = bench_case(&a.case)?;
    let case = generate(&flags, static_zps, a.seed)?;
    let plan = case.plan()?;
    let dst_bytes = case.dst.data.len();
    let call_bytes = case.src.data.len() + dst_bytes;
    let explicit = !a.backend.is_empty();
    let choices = if explicit {
        a.backend.clone()
    } else {
        vec![Backend::Generated, Backend::Jit, Backend::Reference]
    };
    let backends = dq::backends();
    let mut kernels: Vec<(String, &dyn Kernel)> = Vec::new();
    let mut jit_compile_us = None;
    for choice in choices {
        // `select` runs `supports`, which is where a compiling backend (the JIT)
        // compiles: count from here.
        let before: Vec<_> = (backends.kernels().iter())
            .map(|k| (k.backend(), k.stats()))
            .collect();
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
        let before = (before.iter())
            .find(|(b, _)| *b == kernel.backend())
            .and_then(|&(_, s)| s);
        jit_compile_us = jit_compile_us.or_else(|| compile_us(kernel, before));
        let name = match choice {
            Backend::Auto => kernel.name().to_string(),
            c => c.name().to_string(),
        };
        kernels.push((name, kernel));
    }
    // One dst buffer per backend, bound once; memcpy copies into its own. All
    // on huge pages unless `--base-pages` (see `dq::buffer`).
    let huge = !a.base_pages;
    let buf = |len, byte| {
        let mut v = if huge {
            dq::buffer::zeroed(len)
        } else {
            vec![0u8; len]
        };
        v.fill(byte);
        v
    };
    let mut src = buf(case.src.data.len(), 0);
    src.copy_from_slice(&case.src.data);
    let room = if a.dst_offset.is_some() { 128 } else { 0 };
    let mut outs: Vec<Vec<u8>> = kernels
        .iter()
        .map(|_| buf(dst_bytes + room, 0xff))
        .collect();
    let mut dsts: Vec<TensorMut> = outs
        .iter_mut()
        .map(|out| {
            // `--dst-offset`: from the buffer's first line, within its 128 spare bytes.
            let at = a
                .dst_offset
                .map_or(0, |o| out.as_ptr().align_offset(64) + usize::from(o));
            TensorMut {
                desc: case.dst.desc.clone(),
                data: &mut out[at..at + dst_bytes],
            }
        })
        .collect();
    let src = Tensor {
        desc: case.src.desc.clone(),
        data: &src,
    };
    let (scales, zps) = (case.scales.as_ref(), case.zps.as_ref());
    let (scales, zps) = (scales.map(OwnedTensor::view), zps.map(OwnedTensor::view));
    let line_offset = dsts.first().map(|d| d.data.as_ptr() as usize % 64);
    let mut jobs = Vec::with_capacity(kernels.len());
    for dst in &mut dsts {
        jobs.push(plan.bind(&src, scales.as_ref(), zps.as_ref(), dst)?);
    }
    let threads = a.case.threads;
    // The memcpy yardstick's buffers and pool, unless `--no-memcpy`.
    let mut copy = if a.no_memcpy {
        None
    } else {
        Some((buf(dst_bytes, 1), buf(dst_bytes, 0), copy_pool(threads)?))
    };
    // The roofline's buffer: one per strategy (each written in its own batch).
    let block = super::roofline::block();
    let mut roof: Vec<Vec<u8>> = match &copy {
        Some(_) => StoreStrategy::ALL
            .iter()
            .map(|_| buf(dst_bytes, 0))
            .collect(),
        None => Vec::new(),
    };
    let mut calls: Vec<Box<dyn FnMut() -> dq::Result<()> + '_>> = Vec::new();
    for (job, (_, kernel)) in jobs.iter_mut().zip(&kernels) {
        calls.push(Box::new(move || job.run_parallel(*kernel, threads)));
    }
    if let Some((copy_src, copy_dst, pool)) = copy.as_mut() {
        let pool = pool.as_ref();
        calls.push(Box::new(move || {
            parallel_copy(pool, copy_src, copy_dst);
            Ok(())
        }));
        for (s, dst) in StoreStrategy::ALL.into_iter().zip(&mut roof) {
            let block = &block;
            calls.push(Box::new(move || {
                super::roofline::write(pool, s, block, dst);
                Ok(())
            }));
        }
    }
    let budget = Duration::from_secs_f64(a.min_time.max(0.0) * calls.len() as f64);
    let samples = sample_rounds(&mut calls, a.reps, budget)?;
    let mut rows: Vec<Row> = kernels
        .iter()
        .map(|(backend, _)| Row {
            backend: backend.clone(),
            samples: Vec::new(),
            bytes: call_bytes,
        })
        .collect();
    if !a.no_memcpy {
        rows.push(Row {
            backend: "memcpy".into(),
            samples: Vec::new(),
            bytes: 2 * dst_bytes,
        });
        for s in StoreStrategy::ALL {
            rows.push(Row {
                backend: super::roofline::row_name(s),
                samples: Vec::new(),
                bytes: dst_bytes,
            });
        }
    }
    for (row, s) in rows.iter_mut().zip(samples) {
        row.samples = s;
    }
    let case_json = case_json(&flags, &plan, a, case.src.data.len(), dst_bytes);
    let auto = (kernels.iter().find(|(_, k)| k.backend() == Backend::Auto))
        .map(|_| auto_json(backends, &plan));
    let mut machine = machine_json(dst_bytes);
    machine["pages"] = json!(if huge { "huge (MADV_HUGEPAGE)" } else { "base" });
    machine["dst_line_offset"] = json!(line_offset);
    machine["store_per_backend"] = (kernels.iter())
        .map(|(name, k)| {
            let s = dq::exec::raced_store(&plan, *k).map(|s| s.name());
            (name.clone(), json!(s))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
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
                "paired_ratio": r.paired(&rows[0]),
                "vs_roofline": roofline(&rows).map(|w| r.median() / w.median()),
            })).collect::<Vec<_>>(),
            "roofline": roofline(&rows).map(|w| w.backend.clone()),
            "paired_base": rows[0].backend,
            "jit_compile_us": jit_compile_us,
            "auto": auto,
            "machine": machine,
        });
        println!("{report}");
    } else {
        print_machine(&machine);
        print_table(&case_json, &rows, jit_compile_us);
        if let Some(auto) = &auto {
            println!("auto: {}", auto_line(auto));
        }
    }
    Ok(())
}

/// The write roofline: the fastest `write:*` row by median, if timed.
fn roofline(rows: &[Row]) -> Option<&Row> {
    (rows.iter())
        .filter(|r| super::roofline::strategy_of(&r.backend).is_some())
        .min_by(|a, b| a.median().total_cmp(&b.median()))
}

/// The CPU model (from /proc/cpuinfo) and the store strategy in force for outputs
/// as large as `dst_bytes`, with how it was chosen.
fn machine_json(dst_bytes: usize) -> Value {
    use dq::policy::{self, StoreSource, StoreStrategy};
    let (large, source) = policy::large_store_choice();
    let (how, ns) = match source {
        StoreSource::Env => ("env", None),
        StoreSource::Remembered => ("remembered", None),
        StoreSource::Measured { ns } => ("measured", Some(ns)),
    };
    let measured = ns.map(|ns| {
        (StoreStrategy::ALL.iter().zip(ns))
            .map(|(s, t)| (s.name().to_string(), json!(t)))
            .collect::<serde_json::Map<_, _>>()
    });
    json!({
        "cpu": cpu_model(),
        "llc_bytes": dq::arch::llc_bytes(),
        "large_above_bytes": dq::arch::l2_bytes(),
        "large_store": large.name(),
        "large_store_source": how,
        "large_store_ns_per_4mib": measured,
        "store_for_this_output": policy::store_for(dst_bytes).name(),
    })
}

/// The `model name` line of /proc/cpuinfo, or "unknown".
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    (info.lines())
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown".into(), |(_, m)| m.trim().to_string())
}

fn print_machine(m: &Value) {
    let s = |k: &str| m[k].as_str().unwrap_or("?").to_string();
    println!("cpu: {}", s("cpu"));
    println!(
        "buffers: {} pages; dst {} bytes past a 64-byte line",
        s("pages"),
        m["dst_line_offset"]
            .as_u64()
            .map_or("?".into(), |o| o.to_string())
    );
    let how = match m["large_store_ns_per_4mib"].as_object() {
        Some(ns) => {
            let t: Vec<String> = (ns.iter())
                .map(|(k, v)| format!("{k} {:.0} us", v.as_f64().unwrap_or(0.0) / 1e3))
                .collect();
            format!("measured per 4 MiB: {}", t.join(", "))
        }
        None if s("large_store_source") == "remembered" => {
            let file = dq::races::memory::file().map(|f| f.display().to_string());
            let file = file.unwrap_or_default();
            format!(
                "measured by an earlier run, remembered in {file}; DQ_TUNING=off measures afresh"
            )
        }
        None => s("large_store_source"),
    };
    println!(
        "store: {} for outputs over {} KiB, the L2 ({how}); default for this output: {}",
        s("large_store"),
        m["large_above_bytes"].as_u64().unwrap_or(0) >> 10,
        s("store_for_this_output"),
    );
    // The per-plan races (large outputs, strategy not fixed by DQ_STORE).
    let raced: Vec<String> = (m["store_per_backend"].as_object().into_iter().flatten())
        .filter_map(|(k, v)| Some(format!("{k} {}", v.as_str()?)))
        .collect();
    if !raced.is_empty() {
        println!("store raced on this plan: {}", raced.join(", "));
    }
}

/// What `auto` chose for `plan`, and the race's times when it raced.
fn auto_json(backends: &dq::kernel::Backends, plan: &Plan) -> Value {
    let Some(race) = backends.race(plan) else {
        let k = backends.select(Backend::Auto, plan).ok();
        return json!({ "kernel": k.map(|k| k.name()), "raced": false });
    };
    let times: serde_json::Map<_, _> = (race.kernels().iter().zip(race.times()))
        .map(|(k, t)| (k.name().to_string(), json!(t)))
        .collect();
    json!({
        "kernel": race.winner().map(|k| k.name()),
        "raced": true,
        "ps_per_element": times,
    })
}

fn auto_line(auto: &Value) -> String {
    let kernel = auto["kernel"].as_str().unwrap_or("still racing");
    match auto["ps_per_element"].as_object() {
        Some(t) => {
            let t: Vec<String> = (t.iter()).map(|(k, v)| format!("{k} {v} ps")).collect();
            format!(
                "{kernel} (raced; fastest call per element: {})",
                t.join(", ")
            )
        }
        None => format!("{kernel} (the only kernel that pays)"),
    }
}

/// A compiling backend's (the JIT's) compile time since `before`, in microseconds;
/// `None` for a backend that does not compile.
fn compile_us(kernel: &dyn Kernel, before: Option<dq::kernel::KernelStats>) -> Option<f64> {
    let after = kernel.stats()?;
    let before = before.unwrap_or_default();
    Some(after.compile_ns.saturating_sub(before.compile_ns) as f64 / 1e3)
}

/// Times every call of `calls` in rounds, at least `reps` rounds and until `budget`
/// is spent, so a noisy machine slows every backend alike. In a round each call
/// runs as a batch of back-to-back calls lasting about [`BATCH`] (sized by an
/// untimed warm-up call), so short calls run on warm caches as they would alone;
/// a sample is the batch's time per call. Returns the samples per call.
fn sample_rounds(
    calls: &mut [Box<dyn FnMut() -> dq::Result<()> + '_>],
    reps: usize,
    budget: Duration,
) -> Result<Vec<Vec<f64>>, CliError> {
    let mut batch = Vec::with_capacity(calls.len());
    for f in calls.iter_mut() {
        // A first call may build a thread pool or race its kernels: size the
        // batch by the second.
        f()?;
        let t = Instant::now();
        f()?;
        let once = t.elapsed().as_secs_f64().max(1e-9);
        batch.push((BATCH.as_secs_f64() / once).clamp(1.0, 10_000.0) as usize);
    }
    let start = Instant::now();
    let mut samples = vec![Vec::new(); calls.len()];
    let mut rounds = 0;
    while rounds < reps.max(1) || (start.elapsed() < budget && rounds < MAX_SAMPLES) {
        for ((f, s), &n) in calls.iter_mut().zip(&mut samples).zip(&batch) {
            let t = Instant::now();
            for _ in 0..n {
                f()?;
            }
            s.push(t.elapsed().as_secs_f64() / n as f64);
        }
        rounds += 1;
    }
    Ok(samples)
}

/// `dst.copy_from_slice(src)` split over `pool`'s threads (built once per bench, as
/// the kernels' pool is: the yardstick pays no thread start-up per call) when it
/// is at least [`SPLIT_COPY`] bytes.
fn parallel_copy(pool: Option<&rayon::ThreadPool>, src: &[u8], dst: &mut [u8]) {
    split_over(pool, dst, |at, d| d.copy_from_slice(&src[at..at + d.len()]));
}

/// `f(offset, piece)` over `dst` cut into one 64-byte aligned piece per thread of
/// `pool`, run on the pool, from [`SPLIT_COPY`] bytes up; else `f(0, dst)` here.
/// The yardsticks' (memcpy, write roofline) split.
pub(super) fn split_over(
    pool: Option<&rayon::ThreadPool>,
    dst: &mut [u8],
    f: impl Fn(usize, &mut [u8]) + Sync,
) {
    use rayon::prelude::*;
    let Some(pool) = pool.filter(|_| dst.len() >= SPLIT_COPY) else {
        f(0, dst);
        return;
    };
    let chunk = dst
        .len()
        .div_ceil(pool.current_num_threads())
        .next_multiple_of(64);
    pool.install(|| {
        dst.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, d)| f(i * chunk, d));
    });
}

/// The smallest copy the memcpy yardstick splits over threads. On a 2-vCPU AMD
/// EPYC (Zen 4) VM a 256 KiB copy took several times longer on two threads than
/// on one, and the pool's threads, spinning after each split, slowed the kernels'
/// calls timed next to it (BENCHMARKS.md).
const SPLIT_COPY: usize = 4 << 20;

/// A pool of `threads` threads for the memcpy yardstick; `None` for one thread.
fn copy_pool(threads: usize) -> Result<Option<rayon::ThreadPool>, CliError> {
    if threads <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map(Some)
        .map_err(|source| CliError::Threads { threads, source })
}

/// The case flags with the bench defaults filled in, and whether the static op
/// gets generated zero points.
fn bench_case(a: &CaseArgs) -> Result<(CaseFlags, bool), CliError> {
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
    Ok((CaseFlags::new(&a, lists)?, static_zps))
}

/// The case of the flags with data generated from `seed`: scales and zero points of
/// the shape the flags imply, the static op's lists filled (zero points when
/// `static_zps`).
fn generate(flags: &CaseFlags, static_zps: bool, seed: u64) -> Result<Case, CliError> {
    let pshape = flags.param_shape();
    let mut op = flags.op.clone();
    let (scales, zps) = match &mut op {
        Op::Dequantize(o) => {
            o.zps = static_zps.then(Vec::new);
            (None, None)
        }
        op => {
            let zps_t = match op {
                Op::Axes(_) => Some(flags.zps_type.unwrap_or(flags.src.dtype)),
                _ => flags.zps_type,
            };
            let scales = TensorDesc::new(flags.scales_type, &pshape);
            (Some(scales), zps_t.map(|t| TensorDesc::new(t, &pshape)))
        }
    };
    let (src, dst) = (flags.src.clone(), flags.dst.clone());
    Ok(Case::generate(op, src, scales, zps, dst, seed)?)
}

fn case_json(
    case: &CaseFlags,
    plan: &Plan,
    a: &BenchArgs,
    src_bytes: usize,
    dst_bytes: usize,
) -> Value {
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
    let copy = (rows.iter()).find(|r| r.backend == "memcpy").map(Row::gbps);
    let roof = roofline(rows);
    let paired = format!("vs {}", rows[0].backend);
    println!(
        "{:<16} {:>12} {:>12} {:>9} {:>10} {:>11} {:>14} {:>6}",
        "backend", "median ms", "min ms", "GB/s", "vs memcpy", "t/roofline", paired, "reps"
    );
    for r in rows {
        let vs = copy.map_or("-".to_string(), |c| format!("{:.2}x", r.gbps() / c));
        let t = roof.map_or("-".to_string(), |w| {
            format!("{:.2}x", r.median() / w.median())
        });
        println!(
            "{:<16} {:>12.3} {:>12.3} {:>9.2} {:>10} {:>11} {:>13.3}x {:>6}",
            r.backend,
            r.median() * 1e3,
            r.min() * 1e3,
            r.gbps(),
            vs,
            t,
            r.paired(&rows[0]),
            r.samples.len()
        );
    }
    println!(
        "(backends timed in interleaved rounds; vs {}: median of per-round time ratios)",
        rows[0].backend
    );
    if let Some(w) = roof {
        println!(
            "(write:*: dst written alone, no source, GB/s of dst bytes; the roofline is {}, \
             t/roofline: a row's median time over its)",
            w.backend
        );
    }
    match jit_compile_us {
        Some(us) => println!("jit compile: {us:.1} us"),
        None => println!("jit compile: n/a (no JIT run)"),
    }
}
