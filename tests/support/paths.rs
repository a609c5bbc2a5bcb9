//! The switches tests flip to reach a path (the store strategy for large outputs,
//! the large-output threshold, forced parallel chunks): a `Tuning` entered on the
//! test's thread (the executor's pool threads take it with the work), restored on
//! drop, so concurrent tests do not see each other's; what the CPU really has,
//! from facts the library does not compute; and a record of the paths that ran,
//! printed where libtest does not capture it.

use std::cell::RefCell;
use std::sync::Mutex;

use dq::arch::Isa;
use dq::policy::{Entered, StoreStrategy, Tuning};

/// While alive: outputs above `large_above` bytes (`None`: the per-core L2 cache)
/// are large on this thread, and outputs are stored with the chosen strategy.
pub struct StoreSwitch {
    _tuning: Entered,
}

/// Sets this thread's store strategy (and threshold) until the result is dropped.
pub fn store_switch(store: StoreStrategy, large_above: Option<usize>) -> StoreSwitch {
    let t = Tuning::current().with_store(store);
    let t = large_above.map_or(t, |b| t.with_large_above(b));
    StoreSwitch { _tuning: t.enter() }
}

/// While alive: `Job::run_parallel` on this thread cuts chunks of exactly the chosen
/// length (so it splits at every size); dropping restores.
pub struct ChunkSwitch {
    base: Tuning,
    tuning: RefCell<Option<Entered>>,
}

/// Forces `run_parallel` chunks of `elements` until the result is dropped.
pub fn force_chunks(elements: usize) -> ChunkSwitch {
    let base = Tuning::current();
    let tuning = RefCell::new(Some(base.with_chunk(elements).enter()));
    ChunkSwitch { base, tuning }
}

/// The executor's own chunking (no forced length) on this thread, for a test whose
/// work must split naturally: the tuning is per thread, so this only names it.
pub fn default_chunks() -> ChunkSwitch {
    let base = Tuning::current();
    assert_eq!(
        base.chunk(),
        None,
        "a forced chunk is in force on this thread"
    );
    ChunkSwitch {
        base,
        tuning: RefCell::new(None),
    }
}

impl ChunkSwitch {
    /// Changes the forced length (the switch stays held).
    pub fn set(&self, elements: usize) {
        let mut t = self.tuning.borrow_mut();
        // Restore the base first, then enter the new length over it.
        drop(t.take());
        *t = Some(self.base.with_chunk(elements).enter());
    }
}

/// True when this CPU runs `isa`, from the kernel's `/proc/cpuinfo` flags on Linux
/// (facts independent of the library's CPUID detection), else std's detection.
pub fn cpu_has(isa: Isa) -> bool {
    let need: &[&str] = match isa {
        Isa::Portable => return true,
        Isa::Avx2 => &["avx2", "f16c"],
        Isa::Avx512 => &["avx512f", "avx512bw", "avx512vl", "avx512dq"],
    };
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    match cpuinfo_flags() {
        Some(flags) => need.iter().all(|f| flags.iter().any(|g| g == f)),
        None => std_detects(isa),
    }
}

fn cpuinfo_flags() -> Option<Vec<String>> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("flags"))?;
    Some(
        line.split(':')
            .nth(1)?
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

#[cfg(target_arch = "x86_64")]
fn std_detects(isa: Isa) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match isa {
        Isa::Portable => true,
        Isa::Avx2 => has!("avx2") && has!("f16c"),
        Isa::Avx512 => has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn std_detects(_isa: Isa) -> bool {
    false
}

/// Notes that `path` ran (once per process): a `PATH RAN` line on stderr, which
/// libtest does not capture, so every log shows the ISAs and store strategies tested.
pub fn ran(path: &str) {
    use std::io::Write;
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|s| s == path) {
        seen.push(path.to_string());
        let _ = writeln!(std::io::stderr(), "PATH RAN: {path}");
    }
}
