//! Tuning choices both fast backends follow, each made here once: when a 4-bit
//! segment pays for a lookup table, and how outputs are stored.
//!
//! Results are the same bits whatever these choose; only speed differs.

use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::arch;

/// Shortest constant-parameter 4-bit segment (elements) worth computing a 16-entry
/// table for; shorter ones are computed element by element.
pub const LUT_MIN: usize = 32;

/// How a kernel writes its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreStrategy {
    /// Ordinary stores.
    Plain,
    /// Ordinary stores, with dst lines prefetched ahead of them (the generated
    /// kernels; the JIT stores plainly).
    Prefetch,
    /// Non-temporal stores from a small buffer: the output is written without
    /// first reading each destination line.
    NonTemporal,
}

impl StoreStrategy {
    /// Every strategy.
    pub const ALL: [StoreStrategy; 3] = [
        StoreStrategy::Plain,
        StoreStrategy::Prefetch,
        StoreStrategy::NonTemporal,
    ];

    /// The strategy for large outputs unless set otherwise: prefetching. On the
    /// machine dq is tuned on (a 2-vCPU Sapphire Rapids VM) one thread's
    /// non-temporal stores reach less bandwidth than ordinary stores with their
    /// line reads: 16M s8 -> f32 per channel took 15.5 ms streamed, 11.4 ms with
    /// ordinary stores and 9.2 ms with prefetching (BENCHMARKS.md).
    pub const DEFAULT: StoreStrategy = StoreStrategy::Prefetch;

    /// The `DQ_STORE` spelling.
    pub const fn name(self) -> &'static str {
        match self {
            StoreStrategy::Plain => "plain",
            StoreStrategy::Prefetch => "prefetch",
            StoreStrategy::NonTemporal => "nontemporal",
        }
    }

    /// Parses a `DQ_STORE` value.
    pub fn parse(name: &str) -> Option<StoreStrategy> {
        StoreStrategy::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The strategy for outputs larger than half the last-level cache, for the whole
/// process: [`set_large_store`], else `DQ_STORE=plain|prefetch|nontemporal`
/// (`DQ_STREAM=1` or `on` is the older spelling of `nontemporal`), read once,
/// else [`StoreStrategy::DEFAULT`].
pub fn large_store() -> StoreStrategy {
    if let Some(&s) = StoreStrategy::ALL.get(LARGE_STORE.load(Ordering::Relaxed) as usize) {
        return s;
    }
    let s = from_env().unwrap_or(StoreStrategy::DEFAULT);
    // A racing `set_large_store` wins.
    let _ = LARGE_STORE.compare_exchange(UNSET, s as u8, Ordering::Relaxed, Ordering::Relaxed);
    StoreStrategy::ALL[LARGE_STORE.load(Ordering::Relaxed) as usize]
}

/// Sets the strategy for large outputs for the whole process (overrides the
/// environment).
pub fn set_large_store(s: StoreStrategy) {
    LARGE_STORE.store(s as u8, Ordering::Relaxed);
}

/// The strategy for a whole output of `bytes`: [`large_store`] when it is larger
/// than half the last-level cache (its lines come from memory), else plain stores.
pub fn store_for(bytes: usize) -> StoreStrategy {
    let large = match LARGE_OUTPUT.load(Ordering::Relaxed) {
        usize::MAX => arch::llc_bytes() / 2,
        forced => forced,
    };
    if bytes > large {
        large_store()
    } else {
        StoreStrategy::Plain
    }
}

/// Test hook: outputs larger than `bytes` (not half the last-level cache) count as
/// large in [`store_for`] for the whole process, so the large-output store paths
/// run on small tests; `None` restores the default.
#[doc(hidden)]
pub fn set_large_output(bytes: Option<usize>) {
    LARGE_OUTPUT.store(bytes.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// The [`set_large_output`] threshold, `usize::MAX` when unset.
static LARGE_OUTPUT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// [`StoreStrategy`] as u8, or `UNSET` before the environment is read.
static LARGE_STORE: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = u8::MAX;

fn from_env() -> Option<StoreStrategy> {
    if let Ok(v) = std::env::var("DQ_STORE") {
        return StoreStrategy::parse(&v);
    }
    std::env::var("DQ_STREAM")
        .is_ok_and(|v| matches!(v.as_str(), "1" | "on"))
        .then_some(StoreStrategy::NonTemporal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for s in StoreStrategy::ALL {
            assert_eq!(StoreStrategy::parse(s.name()), Some(s));
        }
        assert_eq!(StoreStrategy::parse("stream"), None);
    }

    #[test]
    fn small_outputs_store_plainly_large_ones_follow_the_switch() {
        let half = arch::llc_bytes() / 2;
        assert_eq!(store_for(half), StoreStrategy::Plain);
        for s in StoreStrategy::ALL {
            set_large_store(s);
            assert_eq!(large_store(), s);
            assert_eq!(store_for(half + 1), s);
            assert_eq!(store_for(usize::MAX), s);
        }
        // The test hook moves the threshold, and restores it.
        set_large_store(StoreStrategy::NonTemporal);
        set_large_output(Some(100));
        assert_eq!(store_for(100), StoreStrategy::Plain);
        assert_eq!(store_for(101), StoreStrategy::NonTemporal);
        set_large_output(None);
        assert_eq!(store_for(101), StoreStrategy::Plain);
        assert_eq!(store_for(half + 1), StoreStrategy::NonTemporal);
        set_large_store(StoreStrategy::DEFAULT);
    }
}
