//! Resource bounds of a compiling backend (the JIT): under a stream of distinct
//! shapes its kernel cache stays bounded, and the code memory of evicted kernels is
//! really returned (the process's mapped bytes stop growing).
//!
//! Works on any backend of `dq::backends()` whose `Kernel::stats()` is `Some`.
mod support;

use dq::case::{Case, OwnedTensor};
use dq::{DType, DynamicDequantize, Kernel, KernelStats, TensorDesc};
use support::reference;

/// The process's mapped bytes (`VmSize` in /proc/self/status), when readable.
fn vm_size() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs one small per-channel plan of a shape made distinct by `i` and checks it.
fn run_distinct(kernel: &dyn Kernel, i: usize) {
    let shape = [1 + i % 7, 3 + i];
    let n = shape[0] * shape[1];
    let src_b: Vec<u8> = (0..n).map(|x| (x * 37 + i) as u8).collect();
    let scales: Vec<u8> = (0..shape[1])
        .flat_map(|c| (0.25 + c as f32).to_le_bytes())
        .collect();
    let case = Case {
        op: DynamicDequantize::per_channel(-1).into(),
        src: OwnedTensor::new(TensorDesc::new(DType::U8, &shape), src_b),
        scales: Some(OwnedTensor::new(
            TensorDesc::new(DType::F32, &[shape[1]]),
            scales,
        )),
        zps: None,
        dst: OwnedTensor::new(TensorDesc::new(DType::F32, &shape), vec![0u8; n * 4]),
    };
    let run = |k: &dyn Kernel| case.run(k).unwrap();
    assert_eq!(run(kernel), run(reference()), "shape {shape:?}");
}

/// Every backend variant that reports compile statistics.
fn compiling_backends() -> Vec<(&'static str, &'static dyn Kernel)> {
    let b = dq::backends();
    let v: Vec<_> = (b.kernels().iter())
        .filter(|k| k.stats().is_some())
        .map(|&k| (k.name(), k))
        .collect();
    if v.is_empty() {
        eprintln!("SKIPPED: no backend with compile statistics (the JIT) in this build");
    }
    v
}

#[test]
fn cache_stays_bounded_and_code_memory_is_freed() {
    for (name, k) in compiling_backends() {
        let stats = || -> KernelStats { k.stats().unwrap() };
        // Fill the cache well past any plausible capacity, watching its size.
        let mut max_cached = 0;
        let mut i = 0;
        let mut plateau = 0;
        while plateau < 300 && i < 5000 {
            run_distinct(k, i);
            let c = stats().cached;
            if c > max_cached {
                max_cached = c;
                plateau = 0;
            } else {
                plateau += 1;
            }
            i += 1;
        }
        assert!(
            plateau >= 300,
            "{name}: cache still growing after {i} distinct shapes ({max_cached} cached)"
        );
        let code_full = stats().code_bytes;
        let vm_full = vm_size();
        // Another long stream of new shapes: counts, code bytes and mapped memory
        // must not grow (evicted code is unmapped, not leaked).
        let before = stats().compiled;
        for j in 0..2000 {
            run_distinct(k, i + j);
        }
        let after = stats();
        assert!(
            after.compiled >= before + 2000,
            "{name}: shapes were not new"
        );
        assert!(after.cached <= max_cached, "{name}: {after:?}");
        assert!(
            after.code_bytes <= code_full + code_full / 4,
            "{name}: code bytes {code_full} -> {}",
            after.code_bytes
        );
        if let (Some(a), Some(b)) = (vm_full, vm_size()) {
            let grown = b.saturating_sub(a);
            eprintln!(
                "{name}: {max_cached} kernels cached, {code_full} code bytes; VmSize {a} -> {b} after 2000 more compiles"
            );
            assert!(
                grown < 32 << 20,
                "{name}: mapped memory grew by {grown} bytes over 2000 evicting compiles"
            );
        }
    }
}
