//! `auto`'s choice by speed: the real calls of one plan run on each candidate
//! kernel in turn, timed, until each has run [`Race::ROUNDS`] times; the fastest
//! call per element counts, and the preferred kernel (the first generated one, else
//! the first) keeps the plan unless another beats it by more than
//! [`Race::MARGIN_PERCENT`]: two kernels within timing noise of each other would
//! otherwise flip from run to run. A keyless [`races::Race`] runs it.
//!
//! Stores: each candidate's calls take part in that candidate's own store race
//! ([`crate::policy::race_store`]), and only calls at its settled strategy are timed for
//! this race, so each kernel is compared at its best strategy. Once the winner is
//! chosen, `auto` stores as the winner does ([`Kernel::store_backend`]).
//!
//! A race made [`for_plan`](Race::for_plan) is remembered between runs
//! ([`races::memory`]) under the plan and its candidates, so the next run keeps
//! the same kernel.

use core::num::NonZeroUsize;
use core::ops::Range;
use std::time::Instant;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::exec::{Job, Kernel, KernelStats, run_raced};
use crate::plan::Plan;
use crate::races::{self, Rules, Stat};

/// Kernels racing for one plan; itself a kernel that runs each call on one of them.
pub struct Race {
    kernels: Vec<&'static dyn Kernel>,
    race: races::Race,
    /// The kernel kept unless another beats it by the margin.
    preferred: usize,
}

impl Race {
    /// Timed calls each kernel gets (the fastest of them counts).
    pub const ROUNDS: usize = 3;

    /// How much faster (in percent of its time) a kernel must be than the
    /// preferred one to win: more than the run-to-run noise of timed calls.
    pub const MARGIN_PERCENT: f64 = 5.0;

    /// The rules of every such race.
    pub const RULES: Rules = Rules {
        rounds: Self::ROUNDS,
        margin_percent: Self::MARGIN_PERCENT,
        stat: Stat::Fastest,
    };

    /// A race between `kernels`, none timed yet.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when `kernels` is empty.
    pub fn new(kernels: Vec<&'static dyn Kernel>) -> Result<Race> {
        let n = NonZeroUsize::new(kernels.len()).ok_or_else(|| Error::BackendUnavailable {
            backend: Backend::Auto.name(),
            reason: "no kernels to race".into(),
        })?;
        let preferred = (kernels.iter())
            .position(|k| k.backend() == Backend::Generated)
            .unwrap_or(0);
        Ok(Race {
            kernels,
            race: races::Race::new(Self::RULES, n),
            preferred,
        })
    }

    /// A race between `kernels` for `plan`, remembered between runs as
    /// `auto PLAN-HASH BACKENDS` ([`races::memory`]): decided from the start
    /// where an earlier run decided it.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn for_plan(kernels: Vec<&'static dyn Kernel>, plan: &Plan) -> Result<Race> {
        use std::hash::{Hash, Hasher};
        let mut r = Race::new(kernels)?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        plan.hash(&mut h);
        let names: Vec<&str> = r.kernels.iter().map(|k| k.backend().name()).collect();
        let key = format!("{:016x} {}", h.finish(), names.join(","));
        let n = NonZeroUsize::new(r.kernels.len()).unwrap_or(NonZeroUsize::MIN);
        r.race = races::Race::remembered(Self::RULES, n, "auto", key);
        Ok(r)
    }

    /// The kernels racing.
    pub fn kernels(&self) -> &[&'static dyn Kernel] {
        &self.kernels
    }

    /// The fastest timed call of each kernel so far, in picoseconds per element
    /// (`None` before any).
    pub fn times(&self) -> Vec<Option<u64>> {
        let ps = |ns: f64| (ns * 1000.0).round() as u64;
        self.race.figures().into_iter().map(|f| f.map(ps)).collect()
    }

    /// Records a call of kernel `i` that took `ns_per_element`; once every kernel
    /// has [`ROUNDS`](Self::ROUNDS) calls, the winner is chosen (the preferred
    /// kernel unless another beats it by [`MARGIN_PERCENT`](Self::MARGIN_PERCENT)).
    pub fn record(&self, i: usize, ns_per_element: f64) {
        self.race.report(i, ns_per_element, self.preferred);
    }

    /// The winning kernel, once chosen.
    pub fn winner(&self) -> Option<&'static dyn Kernel> {
        self.kernels.get(self.race.chosen()?).copied()
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
        let (i, _) = self.race.next();
        let len = range.len().max(1) as f64;
        let t = Instant::now();
        // Each candidate stores as its own store race says (and takes part in
        // it); only calls at a settled strategy count, so each candidate is
        // timed at its best, not at whatever its store race is trying.
        // SAFETY: as above.
        let settled = unsafe { run_raced(job, self.kernels[i], range) };
        if settled {
            self.record(i, t.elapsed().as_nanos() as f64 / len);
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

    fn race(kernels: Vec<&'static dyn Kernel>) -> Race {
        Race::new(kernels).expect("kernels to race")
    }

    #[test]
    fn an_empty_race_is_refused() {
        assert!(matches!(
            Race::new(Vec::new()),
            Err(Error::BackendUnavailable {
                backend: "auto",
                ..
            })
        ));
    }

    #[test]
    fn the_faster_measured_kernel_wins_after_every_round() {
        let race = race(vec![&A, &B]);
        // A: 0.5, 0.09, 0.3 ns an element; B: 0.1, 0.12, 0.11.
        for (a, b) in [(0.5, 0.1), (0.09, 0.12)] {
            race.record(0, a);
            race.record(1, b);
            assert!(race.winner().is_none(), "still racing");
        }
        race.record(0, 0.3);
        assert!(race.winner().is_none(), "B has two calls");
        race.record(1, 0.11);
        assert!(
            is(race.winner(), &A),
            "A's fastest call, 90 ps, beats B's 100"
        );
        assert_eq!(race.times(), [Some(90), Some(100)]);
    }

    #[test]
    fn the_slower_first_kernel_loses_by_more_than_the_margin() {
        let race = race(vec![&A, &B]);
        for _ in 0..Race::ROUNDS {
            race.record(0, 200.0);
            race.record(1, 189.0);
        }
        // 189 < 200 * 0.95 = 190.
        assert!(is(race.winner(), &B));
    }

    #[test]
    fn the_first_kernel_keeps_a_win_within_the_margin() {
        let race = race(vec![&A, &B]);
        for _ in 0..Race::ROUNDS {
            race.record(0, 200.0);
            race.record(1, 190.0);
        }
        // 190 is not below 200 * 0.95: noise, the preferred first kernel stays.
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

    fn race_of(jit: f64, generated: f64) -> Option<&'static dyn Kernel> {
        // The facade's order: the JIT first.
        let race = race(vec![&JIT, &GEN]);
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
        assert!(is_named(race_of(955.0, 1000.0), &GEN));
        assert!(is_named(race_of(950.0, 1000.0), &GEN));
        // The JIT more than 5% faster wins.
        assert!(is_named(race_of(949.0, 1000.0), &JIT));
        assert!(is_named(race_of(500.0, 1000.0), &JIT));
        // Generated faster, by any amount, wins.
        assert!(is_named(race_of(1000.0, 999.0), &GEN));
        assert!(is_named(race_of(1000.0, 100.0), &GEN));
    }

    #[test]
    fn auto_stores_as_its_winner_once_chosen() {
        let race = race(vec![&JIT, &GEN]);
        assert_eq!(GEN.store_backend(), Some(Backend::Generated));
        for _ in 0..Race::ROUNDS {
            assert_eq!(
                race.store_backend(),
                None,
                "racing: no store race of its own"
            );
            race.record(0, 500.0);
            race.record(1, 1000.0);
        }
        assert_eq!(race.store_backend(), Some(Backend::Jit));
    }
}
