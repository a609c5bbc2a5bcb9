//! Which form of a block kernel runs, per type and ISA, chosen by timing real calls.
//!
//! The two forms of a declared type (integers through an array, or fused with the
//! formula) give the same bits, but which one LLVM vectorizes better depends on
//! the declaration and the CPU: measured on AMD EPYC (Zen 3), one thread, 16M
//! elements, the array form ran Q4_0 at 19.5 GB/s against 10.5 fused, and Q5_1 at
//! 8.2 against 11.9 fused. So the first large calls of each (type, ISA) take the
//! forms in turn, [`ROUNDS`] timed calls each, and the faster by median is kept.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::arch::Isa;

/// Calls of fewer elements are not timed (their times are noise): they run
/// [`untimed_form`].
pub const MIN_ELEMENTS: usize = 1 << 16;

/// The form untimed calls run before the race of their (type, ISA) is over: the
/// fused one. Measured on AMD EPYC (Zen 4), one thread, 16M elements, it was the
/// faster for every declared type on both the AVX2 and the AVX-512 code (array
/// form 1.1-9.4 GB/s, fused 9-22), so a small tensor no longer pays up to 15x
/// for coming first.
pub const UNRACED_FORM: usize = 1;

/// Timed calls per form before the choice is made.
pub const ROUNDS: usize = 3;

/// The fused form replaces the array form only when its median time per element
/// is lower by more than this many percent.
pub const MARGIN_PERCENT: f64 = 5.0;

/// ns per element of each form's timed calls.
type Samples = [Vec<f64>; 2];

/// The races by (type, ISA): the samples so far, or the form chosen.
type Races = HashMap<(&'static str, Isa), Result<usize, Samples>>;

static RACES: Mutex<Option<Races>> = Mutex::new(None);

/// The form for the next call of `name` on `isa`, and whether to time it.
pub(super) fn next(name: &'static str, isa: Isa) -> (usize, bool) {
    let mut races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    match races.get_or_insert_with(HashMap::new).get(&(name, isa)) {
        Some(Ok(form)) => (*form, false),
        Some(Err(s)) => (usize::from(s[1].len() < s[0].len()), true),
        None => (0, true),
    }
}

/// The form an untimed call of `name` on `isa` runs: the race's choice once it is
/// over, else [`UNRACED_FORM`].
pub(super) fn untimed_form(name: &'static str, isa: Isa) -> usize {
    chosen(name, isa).unwrap_or(UNRACED_FORM)
}

/// Records a timed call; the last timing needed decides.
pub(super) fn report(name: &'static str, isa: Isa, form: usize, ns_per_element: f64) {
    let mut races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    let entry = (races.get_or_insert_with(HashMap::new))
        .entry((name, isa))
        .or_insert_with(|| Err(Default::default()));
    if let Err(s) = entry {
        s[form & 1].push(ns_per_element);
        if s.iter().all(|v| v.len() >= ROUNDS) {
            *entry = Ok(choose(s));
        }
    }
}

/// The form `name` settled on for `isa`, once its race is over.
pub fn chosen(name: &'static str, isa: Isa) -> Option<usize> {
    let races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    match races.as_ref()?.get(&(name, isa))? {
        Ok(form) => Some(*form),
        Err(_) => None,
    }
}

/// 1 (fused) when its median beats the array form's by more than the margin.
pub fn choose(s: &Samples) -> usize {
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::INFINITY)
    };
    usize::from(median(&s[1]) < median(&s[0]) * (1.0 - MARGIN_PERCENT / 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fused_form_wins_only_beyond_the_margin() {
        let s = |a: f64, b: f64| [vec![a, a * 3.0, a], vec![b, b, b * 3.0]];
        assert_eq!(choose(&s(1.0, 0.5)), 1);
        assert_eq!(choose(&s(1.0, 0.96)), 0);
        assert_eq!(choose(&s(1.0, 0.94)), 1);
        assert_eq!(choose(&s(0.5, 1.0)), 0);
    }

    #[test]
    fn both_forms_are_timed_then_the_choice_sticks() {
        let (name, isa) = ("race-test", Isa::Portable);
        let mut seen = [0; 2];
        for _ in 0..2 * ROUNDS {
            assert_eq!(chosen(name, isa), None);
            let (form, timed) = next(name, isa);
            assert!(timed);
            seen[form] += 1;
            report(name, isa, form, if form == 1 { 1.0 } else { 2.0 });
        }
        assert_eq!(untimed_form(name, isa), UNRACED_FORM, "before the choice");
        assert_eq!(seen, [ROUNDS; 2]);
        assert_eq!(next(name, isa), (1, false));
        assert_eq!(chosen(name, isa), Some(1));
        report(name, isa, 0, 0.1);
        assert_eq!(chosen(name, isa), Some(1));
    }

    #[test]
    fn untimed_calls_follow_a_settled_race() {
        let (name, isa) = ("race-test-array", Isa::Portable);
        assert_eq!(untimed_form(name, isa), 1);
        for _ in 0..ROUNDS {
            for form in 0..2 {
                report(name, isa, form, if form == 0 { 1.0 } else { 2.0 });
            }
        }
        assert_eq!(chosen(name, isa), Some(0));
        assert_eq!(untimed_form(name, isa), 0);
    }
}
