//! `dq demo`: two built-in single-tensor cases (int4 per-group and int8 per-channel
//! weights, `--size` square), timed on one backend and checked bit for bit against
//! the reference. `dq model` runs a whole model's weights.

use std::process::ExitCode;
use std::time::Instant;

use dq::case::Case;
use dq::kernel::Reference;
use dq::{DType, DynamicDequantize, Op, TensorDesc};

use super::args::DemoArgs;
use super::error::CliError;

/// Timed runs per case.
const REPS: usize = 3;
/// A run slower than this (seconds) is not repeated (the scalar reference on 4096^2).
const SLOW: f64 = 1.0;

/// One built-in case.
struct DemoCase {
    title: &'static str,
    op: Op,
    src: DType,
    dst: DType,
    zps: Option<DType>,
    /// Scales shape for an `n x n` src.
    scales: fn(usize) -> Vec<usize>,
}

fn cases() -> [DemoCase; 2] {
    [
        DemoCase {
            title: "u4 -> bf16 per_group 1x128 with u4 zero points (int4 LLM weights)",
            op: DynamicDequantize::per_group(vec![1, 128]).into(),
            src: DType::U4,
            dst: DType::BF16,
            zps: Some(DType::U4),
            scales: |n| vec![n, n.div_ceil(128)],
        },
        DemoCase {
            title: "s8 -> f32 per_channel on axis 0 (int8 weights)",
            op: DynamicDequantize::per_channel(0).into(),
            src: DType::S8,
            dst: DType::F32,
            zps: None,
            scales: |n| vec![n],
        },
    ]
}

/// Runs `dq demo`: exit 0 when every case matched the reference bit for bit, 1 if not.
///
/// # Errors
/// An unavailable backend, zero threads.
pub fn demo(a: &DemoArgs) -> Result<ExitCode, CliError> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let n = a.size;
    println!(
        "dq demo: {n}x{n} matrices, backend {}, {threads} thread(s)",
        a.backend
    );
    let mut all_ok = true;
    for (i, c) in cases().iter().enumerate() {
        let sshape = (c.scales)(n);
        let case = Case::generate(
            c.op.clone(),
            TensorDesc::new(c.src, &[n, n]),
            Some(TensorDesc::new(c.dst, &sshape)),
            c.zps.map(|t| TensorDesc::new(t, &sshape)),
            TensorDesc::new(c.dst, &[n, n]),
            i as u64 + 1,
        )?;
        let plan = case.plan()?;
        let kernel = dq::backends().select(a.backend, &plan)?;
        let (src_bytes, dst_bytes) = (case.src.data.len(), case.dst.data.len());
        let run =
            |k: &dyn dq::kernel::Kernel, threads: usize| -> Result<(Vec<u8>, f64), CliError> {
                let mut out = vec![0u8; dst_bytes];
                let secs = case.with_job(&plan, &mut out, |job| {
                    let start = Instant::now();
                    job.run_parallel(k, threads)
                        .map(|()| start.elapsed().as_secs_f64())
                })??;
                Ok((out, secs))
            };
        let mut times = Vec::new();
        let mut out = Vec::new();
        for _ in 0..REPS {
            let (o, s) = run(kernel, threads)?;
            times.push(s);
            out = o;
            if s > SLOW {
                break;
            }
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let reps = times.len();
        let (want, ref_secs) = run(&Reference::default(), threads)?;
        let ok = out == want;
        all_ok &= ok;
        let gbps = (src_bytes + dst_bytes) as f64 / median / 1e9;
        println!("case {}: {}", i + 1, c.title);
        println!(
            "  {} elements, {} src + {} dst bytes; backend {}: {:.2} ms median of {reps} ({gbps:.2} GB/s src+dst)",
            plan.numel(),
            src_bytes,
            dst_bytes,
            kernel.name(),
            median * 1e3,
        );
        println!(
            "  bit-exact vs the reference on {threads} thread(s) ({:.2} ms): {}",
            ref_secs * 1e3,
            if ok { "yes" } else { "NO" }
        );
    }
    println!(
        "{}",
        if all_ok {
            "demo: all cases bit-exact"
        } else {
            "demo: MISMATCH against the reference"
        }
    );
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
