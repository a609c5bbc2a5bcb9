//! `auto`'s choice by speed: the real calls of one plan run on each candidate
//! kernel in turn, timed, until each has run [`Race::ROUNDS`] times; the fastest per
//! element is the plan's kernel from then on, except that the preferred kernel
//! (the first generated one, else the first) keeps the plan unless another beats
//! it by more than [`Race::MARGIN_PERCENT`]: two kernels within timing noise of
//! each other would otherwise flip from run to run.
//!
//! Stores: each candidate's calls take part in that candidate's own store race
//! ([`crate::policy::race_store`]), and only calls at its settled strategy are timed for
//! this race, so each kernel is compared at its best strategy. Once the winner is
//! chosen, `auto` stores as the winner does ([`Kernel::store_backend`]).

use core::ops::Range;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::backend::Backend;
use crate::error::Result;
use crate::exec::{Job, Kernel, KernelStats, run_raced};
use crate::plan::Plan;

/// Kernels racing for one plan; itself a kernel that runs each call on one of them.
pub struct Race {
    kernels: Vec<&'static dyn Kernel>,
    /// Per kernel: the fastest timed call, in picoseconds per element
    /// (`u64::MAX` before any).
    best: Vec<AtomicU64>,
    /// Per kernel: timed calls so far.
    timed: Vec<AtomicUsize>,
    /// Calls so far (which kernel runs next).
    calls: AtomicUsize,
    /// The winner's index once chosen, else `usize::MAX`.
    winner: AtomicUsize,
}

impl Race {
    /// Timed calls each kernel gets (the fastest of them counts).
    pub const ROUNDS: usize = 3;

    /// How much faster (in percent of its time) a kernel must be than the
    /// preferred one to win: more than the run-to-run noise of timed calls.
    pub const MARGIN_PERCENT: u64 = 5;

    /// A race between `kernels` (at least one), none timed yet.
    pub fn new(kernels: Vec<&'static dyn Kernel>) -> Race {
        let n = kernels.len();
        Race {
            kernels,
            best: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            timed: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            calls: AtomicUsize::new(0),
            winner: AtomicUsize::new(usize::MAX),
        }
    }

    /// The kernels racing.
    pub fn kernels(&self) -> &[&'static dyn Kernel] {
        &self.kernels
    }

    /// The fastest timed call of each kernel so far, in picoseconds per element
    /// (`None` before any).
    pub fn times(&self) -> Vec<Option<u64>> {
        (self.best.iter())
            .map(|b| Some(b.load(Ordering::Relaxed)).filter(|&t| t != u64::MAX))
            .collect()
    }

    /// Records a call of kernel `i` that took `ps_per_element`; once every kernel
    /// has [`ROUNDS`](Self::ROUNDS) calls, the winner is chosen (the preferred
    /// kernel unless another beats it by [`MARGIN_PERCENT`](Self::MARGIN_PERCENT)).
    pub fn record(&self, i: usize, ps_per_element: u64) {
        self.best[i].fetch_min(ps_per_element, Ordering::Relaxed);
        self.timed[i].fetch_add(1, Ordering::Relaxed);
        let done = (self.timed.iter()).all(|t| t.load(Ordering::Relaxed) >= Self::ROUNDS);
        if done {
            self.winner.store(self.choose(), Ordering::Relaxed);
        }
    }

    /// The preferred kernel (the first generated one, else the first) unless the
    /// fastest (the first on a tie) takes less than its time by more than
    /// [`MARGIN_PERCENT`](Self::MARGIN_PERCENT).
    fn choose(&self) -> usize {
        let time = |k: usize| self.best[k].load(Ordering::Relaxed) as u128;
        let n = self.kernels.len();
        let fastest = (0..n).min_by_key(|&k| time(k)).unwrap_or(0);
        let preferred = (0..n)
            .find(|&k| self.kernels[k].backend() == Backend::Generated)
            .unwrap_or(0);
        let beats = time(fastest) * (100 + Self::MARGIN_PERCENT as u128) < time(preferred) * 100;
        if beats { fastest } else { preferred }
    }

    /// The winning kernel, once chosen.
    pub fn winner(&self) -> Option<&'static dyn Kernel> {
        self.kernels
            .get(self.winner.load(Ordering::Relaxed))
            .copied()
    }
}

impl Kernel for Race {
    fn backend(&self) -> Backend {
        Backend::Auto
    }

    fn supports(&self, plan: &Plan) -> Result<()> {
        self.kernels.iter().try_for_each(|k| k.supports(plan))
    }

    unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
        if let Some(k) = self.winner() {
            // SAFETY: the caller's contract; `supports` said yes for every kernel.
            return unsafe { k.run(job, range) };
        }
        let i = self.calls.fetch_add(1, Ordering::Relaxed) % self.kernels.len();
        let len = range.len().max(1) as u128;
        let t = Instant::now();
        // Each candidate stores as its own store race says (and takes part in
        // it); only calls at a settled strategy count, so each candidate is
        // timed at its best, not at whatever its store race is trying.
        // SAFETY: as above.
        let settled = unsafe { run_raced(job, self.kernels[i], range) };
        let ps = t.elapsed().as_nanos() * 1000 / len;
        if settled {
            self.record(i, ps.min(u64::MAX as u128 - 1) as u64);
        }
    }

    fn stats(&self) -> Option<KernelStats> {
        self.kernels.iter().find_map(|k| k.stats())
    }

    /// The winner's store race once it is chosen: `auto` then stores as its
    /// winner does. Before, calls alternate between kernels, so a store race of
    /// their own would time a mix of them and could settle on a strategy that
    /// suits neither.
    fn store_backend(&self) -> Option<Backend> {
        self.winner().and_then(|k| k.store_backend())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::Reference;

    static A: Reference = Reference {
        formula: &crate::formula::STANDARD,
    };
    static B: Reference = Reference {
        formula: &crate::formula::STANDARD,
    };

    fn is(k: Option<&'static dyn Kernel>, want: &'static Reference) -> bool {
        k.is_some_and(|k| core::ptr::addr_eq(k, want))
    }

    #[test]
    fn the_faster_measured_kernel_wins_after_every_round() {
        let race = Race::new(vec![&A, &B]);
        // A: 500, 90, 300 ps an element; B: 100, 120, 110.
        for (a, b) in [(500, 100), (90, 120)] {
            race.record(0, a);
            race.record(1, b);
            assert!(race.winner().is_none(), "still racing");
        }
        race.record(0, 300);
        assert!(race.winner().is_none(), "B has two calls");
        race.record(1, 110);
        assert!(is(race.winner(), &A), "A's fastest call, 90, beats B's 100");
        assert_eq!(race.times(), [Some(90), Some(100)]);
    }

    #[test]
    fn the_slower_first_kernel_loses_by_more_than_the_margin() {
        let race = Race::new(vec![&A, &B]);
        for _ in 0..Race::ROUNDS {
            race.record(0, 200);
            race.record(1, 190);
        }
        // 200 > 190 * 1.05 = 199.5.
        assert!(is(race.winner(), &B));
    }

    #[test]
    fn the_first_kernel_keeps_a_win_within_the_margin() {
        let race = Race::new(vec![&A, &B]);
        for _ in 0..Race::ROUNDS {
            race.record(0, 200);
            race.record(1, 191);
        }
        // 200 <= 191 * 1.05 = 200.55: noise, the preferred first kernel stays.
        assert!(is(race.winner(), &A));
    }

    /// A kernel of backend `.0` (the reference's bits).
    struct Named(Backend);

    impl Kernel for Named {
        fn backend(&self) -> Backend {
            self.0
        }
        fn supports(&self, _plan: &Plan) -> Result<()> {
            Ok(())
        }
        unsafe fn run(&self, job: &Job<'_>, range: Range<usize>) {
            // SAFETY: the caller's contract.
            unsafe { A.run(job, range) }
        }
    }

    static JIT: Named = Named(Backend::Jit);
    static GEN: Named = Named(Backend::Generated);

    fn race_of(jit: u64, generated: u64) -> Option<&'static dyn Kernel> {
        // The facade's order: the JIT first.
        let race = Race::new(vec![&JIT, &GEN]);
        for _ in 0..Race::ROUNDS {
            race.record(0, jit);
            race.record(1, generated);
        }
        race.winner()
    }

    fn is_named(k: Option<&'static dyn Kernel>, want: &'static Named) -> bool {
        k.is_some_and(|k| core::ptr::addr_eq(k, want))
    }

    #[test]
    fn generated_is_preferred_within_the_margin_wherever_it_is_listed() {
        // The JIT 4.5% faster: noise, generated stays.
        assert!(is_named(race_of(1000, 1045), &GEN));
        assert!(is_named(race_of(1000, 1050), &GEN));
        // The JIT more than 5% faster wins.
        assert!(is_named(race_of(1000, 1051), &JIT));
        assert!(is_named(race_of(500, 1000), &JIT));
        // Generated faster, by any amount, wins.
        assert!(is_named(race_of(1000, 999), &GEN));
        assert!(is_named(race_of(1000, 100), &GEN));
    }

    #[test]
    fn auto_stores_as_its_winner_once_chosen() {
        let race = Race::new(vec![&JIT, &GEN]);
        assert_eq!(GEN.store_backend(), Some(Backend::Generated));
        for _ in 0..Race::ROUNDS {
            assert_eq!(
                race.store_backend(),
                None,
                "racing: no store race of its own"
            );
            race.record(0, 500);
            race.record(1, 1000);
        }
        assert_eq!(race.store_backend(), Some(Backend::Jit));
    }
}
