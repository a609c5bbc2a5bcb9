//! Tuning choices both fast backends follow, each made here once: when a 4-bit
//! segment pays for a lookup table, and how outputs are stored.
//!
//! Results are the same bits whatever these choose; only speed differs. A call's
//! own choices ride on a [`Tuning`] value; what is left unset there follows the
//! process default decided here.

use core::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use crate::arch;
use crate::races::memory;

mod calibrate;
mod per_plan;
mod tuning;

pub use calibrate::{calibrate, choose as choose_store, write as write_with};
pub(crate) use per_plan::with_call_store;
pub use per_plan::{MARGIN_PERCENT, ROUNDS, choose as choose_plan_store};
pub use tuning::{Entered, Tuning};

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

    /// The strategy the calibration keeps on a tie: prefetching. On a 2-vCPU
    /// Sapphire Rapids VM one thread's non-temporal stores reach less bandwidth
    /// than ordinary stores with their line reads, and prefetching beats both
    /// (BENCHMARKS.md); on AMD EPYC (Zen) non-temporal stores win.
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

/// How the strategy for large outputs in force was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreSource {
    /// `DQ_STORE` (or `DQ_STREAM`, see [`crate::env`]).
    Env,
    /// Timed on this machine at first use: median ns of one calibration write per
    /// strategy, in [`StoreStrategy::ALL`] order (see [`calibrate`]).
    Measured {
        /// The times.
        ns: [u64; 3],
    },
    /// Measured by an earlier run on this machine and remembered
    /// ([`crate::races::memory`]).
    Remembered,
}

/// The strategy for large outputs on this thread: the current [`Tuning`]'s, else
/// the process's ([`process_store`]).
pub fn large_store() -> StoreStrategy {
    Tuning::current().store().unwrap_or_else(process_store)
}

/// The strategy for large outputs ([`is_large_output`]), for the whole process: `DQ_STORE=plain|prefetch|nontemporal` ([`crate::env`]), else the
/// fastest on this machine, timed once at first use ([`calibrate`]).
pub fn process_store() -> StoreStrategy {
    match StoreStrategy::ALL.get(LARGE_STORE.load(Ordering::Relaxed) as usize) {
        Some(&s) => s,
        None => large_store_choice().0,
    }
}

/// [`process_store`] and how it was chosen (choosing it now if nothing has yet).
pub fn large_store_choice() -> (StoreStrategy, StoreSource) {
    let mut source = SOURCE.lock().unwrap_or_else(|e| e.into_inner());
    let how = *source.get_or_insert_with(|| {
        let env = crate::env::store().and_then(StoreStrategy::parse);
        let recalled = || memory::recall(MEMORY_RACE, "process", 3).map(|i| StoreStrategy::ALL[i]);
        let (s, how) = decide(env, recalled, calibrate::calibrate);
        if let StoreSource::Measured { .. } = how {
            memory::remember(MEMORY_RACE, "process", s as usize);
        }
        LARGE_STORE.store(s as u8, Ordering::Relaxed);
        how
    });
    let s = StoreStrategy::ALL[LARGE_STORE.load(Ordering::Relaxed) as usize];
    (s, how)
}

/// The strategy for a whole output of `bytes`: the one `DQ_STORE` or the current
/// [`Tuning`] fixes, for any size; else, for a large output ([`is_large_output`]),
/// [`large_store`], measured; else plain stores.
///
/// Inside [`with_call_store`] (a call of a plan racing its strategies, see
/// [`race_store`]) a large output takes that call's strategy instead.
pub fn store_for(bytes: usize) -> StoreStrategy {
    if let Some(s) = fixed_store() {
        s
    } else if is_large_output(bytes) {
        per_plan::call_store().unwrap_or_else(large_store)
    } else {
        StoreStrategy::Plain
    }
}

/// The strategy the current [`Tuning`] or `DQ_STORE` fixes, if any.
fn fixed_store() -> Option<StoreStrategy> {
    (Tuning::current().store()).or_else(|| crate::env::store().and_then(StoreStrategy::parse))
}

/// True when an output of `bytes` is large: more than the current [`Tuning`]'s
/// threshold, else more than the per-core L2 cache ([`arch::l2_bytes`]). Such an
/// output's store strategy is measured (the process's [`large_store`], and per
/// plan by [`race_store`]); its lines may come from memory. The threshold never
/// follows the last-level cache the OS reports: a VM may report its host's whole
/// cache (300 MiB on an Emerald Rapids VM), where a 64 MiB output stored plainly
/// ran at a third of the speed of non-temporal stores (BENCHMARKS.md).
pub fn is_large_output(bytes: usize) -> bool {
    let above = Tuning::current().large_above();
    bytes > above.unwrap_or_else(arch::l2_bytes)
}

/// The last-level cache size the OS reports (or the current [`Tuning`] says it
/// does): sizes the calibration's buffer only.
pub fn reported_llc() -> usize {
    Tuning::current()
        .reported_llc()
        .unwrap_or_else(arch::llc_bytes)
}

/// The strategy one call of a plan (`key()`: the plan and backend) with an output
/// of `bytes` runs with, and whether to time it for [`report_store`]; `None` for a
/// small output or while `DQ_STORE` (or the current [`Tuning`]) fixes the strategy.
///
/// The first large calls of each key take plain, prefetch and non-temporal stores
/// in turn ([`ROUNDS`] timed calls each); then the fastest by median is kept for
/// that key, the process-wide [`large_store`] unless another beats it by more than
/// [`MARGIN_PERCENT`]. A kernel's best strategy depends on its own work, not only
/// on the machine: on AMD EPYC (Zen 3) s8 -> f32 is fastest streamed, u4 -> f16
/// with prefetching.
pub fn race_store(bytes: usize, key: impl FnOnce() -> u64) -> Option<(StoreStrategy, bool)> {
    if !is_large_output(bytes) || fixed_store().is_some() {
        return None;
    }
    Some(per_plan::next(key()))
}

/// The strategy [`race_store`]'s `key` settled on, once its race is over.
pub fn chosen_store(key: u64) -> Option<StoreStrategy> {
    per_plan::chosen(key)
}

/// Records one timed call of [`race_store`]'s `key` with strategy `s`.
pub fn report_store(key: u64, s: StoreStrategy, ns_per_element: f64) {
    per_plan::report(key, s, ns_per_element, process_store());
}

/// A thread is woken only when its share of the work takes at least this many
/// times the pool's measured wake-up and join.
pub const WAKE_MULTIPLE: f64 = 2.0;

/// A floor under any kernel's time per output byte on one thread (256 GB/s: one
/// 64-byte store a cycle at 4 GHz): work that cannot pay for a thread's wake-up
/// even at this speed is run without timing it first.
pub const FASTEST_NS_PER_BYTE: f64 = 1.0 / 256.0;

/// How many of `threads` threads to split `elements` over, given the kernel's
/// measured `ns_per_element` on one thread and the pool's measured `wake_ns` (an
/// empty dispatch): the most threads whose shares each take at least
/// [`WAKE_MULTIPLE`] wake-ups, else 1, so a split never costs more than it saves.
pub fn threads_for(elements: usize, ns_per_element: f64, wake_ns: f64, threads: usize) -> usize {
    let work = elements as f64 * ns_per_element;
    (2..=threads)
        .rev()
        .find(|&t| work / t as f64 >= WAKE_MULTIPLE * wake_ns)
        .unwrap_or(1)
}

/// [`StoreStrategy`] as u8, or `u8::MAX` before it is chosen.
static LARGE_STORE: AtomicU8 = AtomicU8::new(u8::MAX);

/// How [`LARGE_STORE`] was chosen; `None` before it is. Held while choosing.
static SOURCE: Mutex<Option<StoreSource>> = Mutex::new(None);

/// The name the process's and the plans' store choices are remembered under.
const MEMORY_RACE: &str = "store";

/// The strategy the environment names (`env`), else the one an earlier run
/// measured (`recall`), else the fastest that `measure` times; and how it was
/// chosen. Each runs only when the ones before give nothing.
fn decide(
    env: Option<StoreStrategy>,
    recall: impl FnOnce() -> Option<StoreStrategy>,
    measure: impl FnOnce() -> [u64; 3],
) -> (StoreStrategy, StoreSource) {
    if let Some(s) = env {
        return (s, StoreSource::Env);
    }
    if let Some(s) = recall() {
        return (s, StoreSource::Remembered);
    }
    let ns = measure();
    (calibrate::choose(ns), StoreSource::Measured { ns })
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
    fn small_outputs_store_plainly_a_fixed_store_takes_every_output() {
        let l2 = arch::l2_bytes();
        assert!(!is_large_output(l2) && is_large_output(l2 + 1));
        if crate::env::store().is_none() {
            assert_eq!(store_for(l2), StoreStrategy::Plain);
        }
        for s in StoreStrategy::ALL {
            Tuning::new().with_store(s).scope(|| {
                assert_eq!(large_store(), s);
                assert_eq!(store_for(1), s);
                assert_eq!(store_for(l2 + 1), s);
                assert_eq!(store_for(usize::MAX), s);
                assert_eq!(
                    race_store(usize::MAX, || 1),
                    None,
                    "a fixed store is not raced"
                );
            });
        }
        // The tuning moves the threshold; outside it the default is back.
        Tuning::new().with_large_above(100).scope(|| {
            assert!(!is_large_output(100));
            assert!(is_large_output(101));
        });
        assert!(!is_large_output(101.min(l2)));
        assert_eq!(large_store(), process_store());
    }

    /// The threshold never follows the reported last-level cache: on a VM that
    /// reports its host's 300 MiB, a 64 MiB output still races its strategies
    /// and keeps the fastest (here non-temporal, by the times reported).
    #[test]
    fn a_huge_reported_cache_does_not_hide_large_outputs() {
        if crate::env::store().is_some() {
            eprintln!("SKIPPED: DQ_STORE fixes the store strategy");
            return;
        }
        let t = Tuning::new().with_reported_llc(300 << 20);
        t.scope(|| {
            assert_eq!(reported_llc(), 300 << 20);
            let bytes = 64 << 20;
            assert!(is_large_output(bytes));
            let key = 0x300_0064;
            let ns = |s: StoreStrategy| match s {
                StoreStrategy::NonTemporal => 0.3,
                StoreStrategy::Prefetch => 0.6,
                StoreStrategy::Plain => 0.8,
            };
            for _ in 0..3 * ROUNDS {
                let (s, timed) = race_store(bytes, || key).expect("a large output races");
                assert!(timed);
                report_store(key, s, ns(s));
            }
            assert_eq!(chosen_store(key), Some(StoreStrategy::NonTemporal));
            assert_eq!(
                race_store(bytes, || key),
                Some((StoreStrategy::NonTemporal, false))
            );
        });
    }

    #[test]
    fn the_environment_overrides_the_measurement() {
        use StoreStrategy::{NonTemporal, Plain, Prefetch};
        let never = || -> [u64; 3] { panic!("measured despite the environment") };
        let nothing = || None;
        let remembered = || Some(Prefetch);
        assert_eq!(
            decide(Some(Plain), remembered, never),
            (Plain, StoreSource::Env)
        );
        assert_eq!(
            decide(None, remembered, never),
            (Prefetch, StoreSource::Remembered)
        );
        let ns = [300, 200, 100];
        let measured = StoreSource::Measured { ns };
        assert_eq!(decide(None, nothing, || ns), (NonTemporal, measured));
        let ns = [300, 100, 200];
        let measured = StoreSource::Measured { ns };
        assert_eq!(decide(None, nothing, || ns), (Prefetch, measured));
    }

    #[test]
    fn a_split_is_taken_only_when_each_share_pays_for_its_wake_up() {
        // 1000 elements of 1 ns against a 100 ns wake-up: shares of 1000 / t ns pay
        // while they are at least 200 ns, so up to 5 threads.
        assert_eq!(threads_for(1000, 1.0, 100.0, 8), 5);
        assert_eq!(threads_for(1000, 1.0, 100.0, 5), 5);
        assert_eq!(threads_for(1000, 1.0, 100.0, 3), 3);
        assert_eq!(threads_for(1000, 1.0, 100.0, 1), 1);
        // Work of one wake-up: never split.
        assert_eq!(threads_for(1000, 0.1, 100.0, 2), 1);
        // Exactly two wake-ups per share at 2 threads: split.
        assert_eq!(threads_for(400, 1.0, 100.0, 2), 2);
        assert_eq!(threads_for(399, 1.0, 100.0, 2), 1);
        // 256x256 at 0.03 ns an element against a 10 us wake-up: one thread.
        assert_eq!(threads_for(65536, 0.03, 10_000.0, 2), 1);
        // 4096x4096 at the same rate: both threads.
        assert_eq!(threads_for(1 << 24, 0.03, 10_000.0, 2), 2);
        assert_eq!(threads_for(0, 1.0, 0.0, 4), 4);
    }
}
