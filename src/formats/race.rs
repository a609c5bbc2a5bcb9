//! `auto`'s backend for a checkpoint tensor, chosen by timing real calls: per kind
//! of work (a GGUF block type, or a linear's scheme and group mapping; and the
//! output type), its first large calls run on the generated backend and the JIT in
//! turn, [`ROUNDS`] timed calls each, and the faster by its fastest call per
//! element is kept (noise only adds time). The generated backend stays unless the
//! JIT beats it by more than [`MARGIN_PERCENT`]. Where choices are remembered
//! ([`dq_runtime::races::memory`]: the CLI's default), the next run starts with
//! this one's, so a kind keeps its backend from run to run.
//!
//! Why neither is right for every kind and host (BENCHMARKS.md):
//! - linears: the generated driver has an AVX-512 VBMI fast path for 4-bit GPTQ
//!   and AWQ into 16-bit outputs, which CPUs without VBMI lack; the JIT streams
//!   whole lines where output rows start on one. Which is faster depends on the
//!   CPU, the scheme and the output's alignment, and is often within the margin;
//! - GGUF blocks: the JIT is faster on some types, the generated driver on others
//!   (`benches/gguf.rs`).

use dq_runtime::races::{self, Races, Rules, Stat};

/// Calls of fewer elements run the generated backend, untimed (their times are
/// noise).
pub const MIN_ELEMENTS: usize = 1 << 20;

/// Timed calls per backend before the choice is made.
pub const ROUNDS: usize = 5;

/// The JIT replaces the generated backend only when its fastest time per element is
/// lower by more than this many percent.
pub const MARGIN_PERCENT: f64 = 5.0;

const RULES: Rules = Rules {
    rounds: ROUNDS,
    margin_percent: MARGIN_PERCENT,
    stat: Stat::Fastest,
};

/// A candidate: the generated driver or the JIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The generated backend (block driver or tiled linear driver).
    Generated,
    /// The JIT (block kernel or linear function).
    Jit,
}

impl Pick {
    fn of(i: usize) -> Pick {
        if i == 1 { Pick::Jit } else { Pick::Generated }
    }

    fn index(self) -> usize {
        usize::from(self == Pick::Jit)
    }
}

/// The races by kind (candidates: generated, JIT), remembered between runs
/// ([`dq_runtime::races::memory`]).
static RACES: Races<String, 2> = Races::remembered(RULES, "backend", String::clone);

/// The candidate for the next call of kind `key`, and whether to time it.
pub fn next(key: &str) -> (Pick, bool) {
    let (i, timed) = RACES.next(key);
    (Pick::of(i), timed)
}

/// Records a timed call; the last timing needed decides.
pub fn report(key: &str, pick: Pick, ns_per_element: f64) {
    RACES.report(key, pick.index(), ns_per_element, Pick::Generated.index());
}

/// What kind `key` settled on, once its race is over.
pub fn chosen(key: &str) -> Option<Pick> {
    RACES.chosen(key).map(Pick::of)
}

/// Every kind whose race is over, with its choice.
pub fn settled() -> Vec<(String, Pick)> {
    let settled = RACES.settled().into_iter();
    settled.map(|(k, i)| (k, Pick::of(i))).collect()
}

/// The JIT when its fastest call beats the generated backend's by more than the
/// margin.
pub fn choose(s: &[Vec<f64>; 2]) -> Pick {
    Pick::of(races::choose(&RULES, s, Pick::Generated.index()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jit_wins_only_beyond_the_margin() {
        let s = |a: f64, b: f64| [vec![a * 3.0, a, a * 2.0], vec![b, b * 3.0, b * 1.5]];
        assert_eq!(choose(&s(1.0, 0.5)), Pick::Jit);
        assert_eq!(choose(&s(1.0, 0.96)), Pick::Generated);
        assert_eq!(choose(&s(1.0, 0.94)), Pick::Jit);
        assert_eq!(choose(&s(0.5, 1.0)), Pick::Generated);
    }

    #[test]
    fn both_are_timed_then_the_choice_sticks() {
        let key = "race-test";
        let mut seen = [0; 2];
        for _ in 0..2 * ROUNDS {
            assert_eq!(chosen(key), None);
            let (pick, timed) = next(key);
            assert!(timed);
            seen[usize::from(pick == Pick::Jit)] += 1;
            report(key, pick, if pick == Pick::Jit { 1.0 } else { 2.0 });
        }
        assert_eq!(seen, [ROUNDS; 2]);
        assert_eq!(next(key), (Pick::Jit, false));
        report(key, Pick::Generated, 0.1);
        assert_eq!(chosen(key), Some(Pick::Jit));
    }
}
