//! The store strategy per plan and backend, chosen by timing the plan's own calls.
//!
//! The process-wide calibration times plain copies; a kernel's best strategy also
//! depends on its own work. Measured on AMD EPYC (Zen 3): s8 -> f32 ran faster
//! with non-temporal stores than with prefetching, u4 -> f16 (group 1x128) the
//! other way round (BENCHMARKS.md). So while no override is in force (`DQ_STORE`, or a test's), the first
//! large calls of each (plan, backend) take every strategy in turn, [`ROUNDS`]
//! timed calls each, and the fastest is kept for that key (and remembered for the
//! next run, [`crate::races::memory`]).

use core::cell::Cell;

use super::StoreStrategy;
use crate::races::{self, Races, Rules, Stat};

/// Timed calls per strategy before a key's choice is made.
pub const ROUNDS: usize = 3;

/// A strategy replaces the process-wide one for a key only when its median time
/// per element is lower by more than this many percent (timing noise).
pub const MARGIN_PERCENT: f64 = 5.0;

const RULES: Rules = Rules {
    rounds: ROUNDS,
    margin_percent: MARGIN_PERCENT,
    stat: Stat::Median,
};

/// ns per element of each strategy's timed calls, in [`StoreStrategy::ALL`] order.
type Samples = [Vec<f64>; 3];

/// The races, by key (candidates in [`StoreStrategy::ALL`] order).
/// Remembered between runs ([`crate::races::memory`]) under the plan's key.
static RACES: Races<u64, 3> = Races::remembered(RULES, super::MEMORY_RACE, |k| format!("{k:016x}"));

thread_local! {
    /// The strategy of the call running on this thread, if one was set.
    static CALL: Cell<Option<StoreStrategy>> = const { Cell::new(None) };
}

/// The strategy the calling thread's current call runs with, if set.
pub(super) fn call_store() -> Option<StoreStrategy> {
    CALL.with(Cell::get)
}

/// Runs `f` with large outputs stored as `s` on this thread (restored after).
pub(crate) fn with_call_store<R>(s: Option<StoreStrategy>, f: impl FnOnce() -> R) -> R {
    let before = CALL.with(|c| c.replace(s));
    let r = f();
    CALL.with(|c| c.set(before));
    r
}

/// The strategy for the next call of `key` and whether to time it: the chosen
/// one, untimed, once the race is over; else the strategy with the fewest
/// timings so far.
pub fn next(key: u64) -> (StoreStrategy, bool) {
    let (i, timed) = RACES.next(&key);
    (StoreStrategy::ALL[i], timed)
}

/// The choice made for `key`, once its race is over.
pub fn chosen(key: u64) -> Option<StoreStrategy> {
    RACES.chosen(&key).map(|i| StoreStrategy::ALL[i])
}

/// Records a timed call of `key` with `s`; the last timing needed decides, with
/// `default` (the process-wide strategy) kept unless another beats it.
pub fn report(key: u64, s: StoreStrategy, ns_per_element: f64, default: StoreStrategy) {
    RACES.report(&key, s as usize, ns_per_element, default as usize);
}

/// The fastest strategy by median, unless it beats `default` by no more than
/// [`MARGIN_PERCENT`].
pub fn choose(default: StoreStrategy, samples: &Samples) -> StoreStrategy {
    StoreStrategy::ALL[races::choose(&RULES, samples, default as usize)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use StoreStrategy::*;

    fn samples(plain: f64, prefetch: f64, nt: f64) -> Samples {
        [
            vec![plain, plain * 2.0, plain * 0.9],
            vec![prefetch, prefetch * 2.0, prefetch * 0.9],
            vec![nt, nt * 2.0, nt * 0.9],
        ]
    }

    #[test]
    fn the_fastest_median_wins_beyond_the_margin() {
        assert_eq!(choose(NonTemporal, &samples(1.0, 0.6, 0.9)), Prefetch);
        assert_eq!(choose(Prefetch, &samples(1.0, 0.9, 0.6)), NonTemporal);
        assert_eq!(choose(NonTemporal, &samples(0.5, 0.6, 0.9)), Plain);
    }

    #[test]
    fn within_the_margin_the_default_stays() {
        assert_eq!(choose(NonTemporal, &samples(1.0, 0.96, 1.0)), NonTemporal);
        assert_eq!(choose(NonTemporal, &samples(1.0, 0.94, 1.0)), Prefetch);
    }

    #[test]
    fn each_strategy_is_timed_rounds_times_then_the_choice_sticks() {
        let key = 0x5eed_0001;
        let ns = |s: StoreStrategy| match s {
            Plain => 3.0,
            Prefetch => 1.0,
            NonTemporal => 2.0,
        };
        let mut seen = [0; 3];
        for _ in 0..3 * ROUNDS {
            assert_eq!(chosen(key), None);
            let (s, timed) = next(key);
            assert!(timed);
            seen[s as usize] += 1;
            report(key, s, ns(s), NonTemporal);
        }
        assert_eq!(seen, [ROUNDS; 3]);
        assert_eq!(next(key), (Prefetch, false));
        assert_eq!(chosen(key), Some(Prefetch));
        // Late reports (calls already running) change nothing.
        report(key, Plain, 0.1, NonTemporal);
        assert_eq!(next(key), (Prefetch, false));
    }

    #[test]
    fn the_call_store_is_per_thread_and_restored() {
        assert_eq!(call_store(), None);
        with_call_store(Some(Plain), || {
            assert_eq!(call_store(), Some(Plain));
            std::thread::spawn(|| assert_eq!(call_store(), None))
                .join()
                .unwrap();
            with_call_store(Some(NonTemporal), || {
                assert_eq!(call_store(), Some(NonTemporal))
            });
            assert_eq!(call_store(), Some(Plain));
        });
        assert_eq!(call_store(), None);
    }
}
