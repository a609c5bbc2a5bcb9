//! The process-wide switches tests flip to reach a path (the store strategy for large
//! outputs, the large-output threshold, forced parallel chunks and splits), each
//! serialized by a mutex and restored on drop; what the CPU really has, from facts
//! the library does not compute; and a record of the paths that ran, printed where
//! libtest does not capture it.
//!
//! Tests of one binary run side by side: a test that sets one of these globals, or
//! whose assertions depend on its default, holds its switch ([`store_switch`] or
//! [`store_defaults`]; [`force_chunks`] or [`default_chunks`]) for as long as it
//! sets or reads it. Results are the same bits under any setting, so a test that
//! only compares bits needs neither. A test holding both kinds takes the store
//! switch first, so no two tests wait on each other.

use std::sync::{Mutex, MutexGuard};

use dq::arch::Isa;
use dq::policy::{self, StoreStrategy};

fn lock(m: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// While alive: outputs above `large_above` bytes (`None`: half the last-level cache)
/// are large, and large outputs are stored with the chosen strategy. Tests holding one
/// run one at a time; dropping it restores the previous strategy (where it was
/// changed) and the default threshold.
pub struct StoreSwitch {
    prev: Option<StoreStrategy>,
    _lock: MutexGuard<'static, ()>,
}

static STORE: Mutex<()> = Mutex::new(());

/// Sets the store strategy (and threshold) of the process until the result is dropped.
pub fn store_switch(store: StoreStrategy, large_above: Option<usize>) -> StoreSwitch {
    let guard = lock(&STORE);
    let prev = policy::large_store();
    policy::set_large_store(store);
    policy::set_large_output(large_above);
    StoreSwitch {
        prev: Some(prev),
        _lock: guard,
    }
}

/// Holds the process's own store strategy and large-output threshold until the
/// result is dropped, for a test whose work must see them while others switch them.
pub fn store_defaults() -> StoreSwitch {
    let guard = lock(&STORE);
    policy::set_large_output(None);
    StoreSwitch {
        prev: None,
        _lock: guard,
    }
}

impl StoreSwitch {
    /// Changes the large-output threshold (the switch stays held).
    pub fn set_large_output(&self, large_above: Option<usize>) {
        policy::set_large_output(large_above);
    }
}

impl Drop for StoreSwitch {
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            policy::set_large_store(prev);
        }
        policy::set_large_output(None);
    }
}

/// While alive: `Job::run_parallel` cuts chunks of exactly the chosen length (so it
/// splits at every size), or splits as [`ChunkSwitch::force_split`] says. Tests
/// holding one run one at a time; dropping restores. Other tests of the binary
/// running meanwhile see the forced chunks too (the same bits either way); one that
/// needs the executor's own holds [`default_chunks`].
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

    /// `dq::exec::force_split`: `run_parallel` splits over every requested thread
    /// (no probe) while `on` (the switch stays held; dropping it turns this off).
    pub fn force_split(&self, on: bool) {
        dq::exec::force_split(on);
    }
}

impl Drop for ChunkSwitch {
    fn drop(&mut self) {
        dq::exec::force_chunk(None);
        dq::exec::force_split(false);
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
