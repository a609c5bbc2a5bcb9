//! Which form of a block kernel runs, per type, ISA and output element, chosen by
//! timing real calls.
//!
//! The forms of a declared type ([`form`]) give the same bits, but which one LLVM
//! compiles best depends on the declaration, the ISA and the CPU. Measured in
//! cache, one thread, on AMD EPYC (Zen 4, AVX-512): opaque runs kept Q4_0, Q5_0 and
//! Q2_K much faster than open ones, open runs Q4_1, Q5_1 and MXFP4 faster than
//! opaque ones (BENCHMARKS.md). Each also comes with non-temporal stores for
//! large outputs ([`crate::policy::is_large_output`]), which pay only where writes are
//! the limit. So
//! the first large calls of each (type, ISA) take the forms in turn, [`ROUNDS`]
//! timed calls each, and the fastest by median is kept.

use super::form;
use crate::arch::Isa;
use crate::dtype::DType;
use crate::races::{self, Races, Rules, Stat};

/// Calls of fewer elements are not timed (their times are noise): they run the
/// race's choice once made, else [`UNRACED_FORM`].
pub const MIN_ELEMENTS: usize = 1 << 16;

/// The form untimed calls run before the race of their (type, ISA) is over, and
/// the one another form must beat by [`MARGIN_PERCENT`]: opaque runs (never
/// gathers; at worst somewhat slower than the open runs in the measurements above).
pub const UNRACED_FORM: usize = form::OPAQUE;

/// Timed calls per form before the choice is made.
pub const ROUNDS: usize = 3;

/// Another form replaces [`UNRACED_FORM`] only when its median time per element is
/// lower by more than this many percent.
pub const MARGIN_PERCENT: f64 = 5.0;

const RULES: Rules = Rules {
    rounds: ROUNDS,
    margin_percent: MARGIN_PERCENT,
    stat: Stat::Median,
};

/// ns per element of each form's timed calls.
type Samples = [Vec<f64>; form::COUNT];

/// What a race is run per: the type's name, the ISA and the output element.
pub type Key = (&'static str, Isa, DType);

/// The races by [`Key`].
/// Remembered between runs ([`crate::races::memory`]) as `block-form NAME ISA DTYPE`.
static RACES: Races<Key, { form::COUNT }> =
    Races::remembered(RULES, "block-form", |(name, isa, dt)| {
        format!("{name} {} {dt}", isa.name())
    });

/// The form for the next call of `key`, and whether to time it.
pub(super) fn next(key: Key) -> (usize, bool) {
    RACES.next(&key)
}

/// The form an untimed call of `key` runs: the race's choice once it is over, else
/// [`UNRACED_FORM`].
pub(super) fn untimed_form(key: Key) -> usize {
    chosen(key).unwrap_or(UNRACED_FORM)
}

/// Records a timed call; the last timing needed decides.
pub(super) fn report(key: Key, form: usize, ns_per_element: f64) {
    RACES.report(&key, form, ns_per_element, UNRACED_FORM);
}

/// The form `key` settled on, once its race is over.
pub fn chosen(key: Key) -> Option<usize> {
    RACES.chosen(&key)
}

/// The form with the lowest median, if it beats [`UNRACED_FORM`]'s by more than
/// the margin; else [`UNRACED_FORM`].
pub fn choose(s: &Samples) -> usize {
    races::choose(&RULES, s, UNRACED_FORM)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples whose medians are `m` (each with an outlier that must not count).
    fn samples(m: [f64; form::COUNT]) -> Samples {
        m.map(|x| vec![x, x * 3.0, x])
    }

    #[test]
    fn another_form_wins_only_beyond_the_margin() {
        let u = UNRACED_FORM;
        let with = |other: usize, x: f64| {
            let mut m = [1.0; form::COUNT];
            m[other] = x;
            m
        };
        for other in (0..form::COUNT).filter(|&f| f != u) {
            assert_eq!(choose(&samples(with(other, 0.5))), other);
            assert_eq!(choose(&samples(with(other, 0.96))), u);
            assert_eq!(choose(&samples(with(other, 0.94))), other);
            assert_eq!(choose(&samples(with(other, 2.0))), u);
        }
    }

    #[test]
    fn every_form_is_timed_then_the_choice_sticks() {
        let key = ("race-test", Isa::Portable, DType::F32);
        let mut seen = [0; form::COUNT];
        for _ in 0..form::COUNT * ROUNDS {
            assert_eq!(chosen(key), None);
            assert_eq!(untimed_form(key), UNRACED_FORM, "before the choice");
            let (f, timed) = next(key);
            assert!(timed);
            seen[f] += 1;
            report(key, f, if f == form::OPEN { 1.0 } else { 2.0 });
        }
        assert_eq!(seen, [ROUNDS; form::COUNT]);
        assert_eq!(next(key), (form::OPEN, false));
        assert_eq!(chosen(key), Some(form::OPEN));
        assert_eq!(untimed_form(key), form::OPEN);
        report(key, form::OPAQUE, 0.1);
        assert_eq!(chosen(key), Some(form::OPEN));
    }
}
