//! The process-wide switches tests flip to reach a path (the store strategy for large
//! outputs, the large-output threshold, forced parallel chunks), each serialized by a
//! mutex and restored on drop; what the CPU really has, from facts the library does
//! not compute; and a record of the paths that ran, printed where libtest does not
//! capture it.

use std::sync::{Mutex, MutexGuard};

use dq::arch::Isa;
use dq::policy::{self, StoreStrategy};

fn lock(m: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// While alive: outputs above `large_above` bytes (`None`: half the last-level cache)
/// are large, and large outputs are stored with the chosen strategy. Tests holding one
/// run one at a time; dropping it restores the previous strategy and threshold.
pub struct StoreSwitch {
    prev: StoreStrategy,
    _lock: MutexGuard<'static, ()>,
}

/// Sets the store strategy (and threshold) of the process until the result is dropped.
pub fn store_switch(store: StoreStrategy, large_above: Option<usize>) -> StoreSwitch {
    static STORE: Mutex<()> = Mutex::new(());
    let guard = lock(&STORE);
    let prev = policy::large_store();
    policy::set_large_store(store);
    policy::set_large_output(large_above);
    StoreSwitch { prev, _lock: guard }
}

impl Drop for StoreSwitch {
    fn drop(&mut self) {
        policy::set_large_store(self.prev);
        policy::set_large_output(None);
    }
}

/// While alive: `Job::run_parallel` cuts chunks of exactly the chosen length (so it
/// splits at every size). Tests holding one run one at a time; dropping restores.
/// Other tests of the binary running meanwhile see the forced chunks too (the same
/// bits either way); one that needs the executor's own holds [`default_chunks`].
pub struct ChunkSwitch {
    _lock: MutexGuard<'static, ()>,
}

/// Forces `run_parallel` chunks of `elements` until the result is dropped.
pub fn force_chunks(elements: usize) -> ChunkSwitch {
    static CHUNK: Mutex<()> = Mutex::new(());
    let guard = lock(&CHUNK);
    dq::exec::force_chunk(Some(elements.max(1)));
    ChunkSwitch { _lock: guard }
}

/// Holds the executor's own chunking (no forced length) until the result is dropped,
/// for a test whose work must split naturally while others force chunks.
pub fn default_chunks() -> ChunkSwitch {
    let switch = force_chunks(1);
    dq::exec::force_chunk(None);
    switch
}

impl ChunkSwitch {
    /// Changes the forced length (the switch stays held).
    pub fn set(&self, elements: usize) {
        dq::exec::force_chunk(Some(elements.max(1)));
    }
}

impl Drop for ChunkSwitch {
    fn drop(&mut self) {
        dq::exec::force_chunk(None);
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
