//! `auto`'s backend for a checkpoint tensor, chosen by timing real calls: per kind
//! of work (a GGUF block type, or a linear's scheme and group mapping; and the
//! output type), its first large calls run on the generated backend and the JIT in
//! turn, [`ROUNDS`] timed calls each, and the faster by its fastest call per
//! element is kept (noise only adds time). The generated backend stays unless the
//! JIT beats it by more than [`MARGIN_PERCENT`].
//!
//! Why neither is right for every kind and host, measured on AMD EPYC (Zen 4), one
//! thread:
//! - linears, 4096x11008 g128 -> bf16: before the generated driver's AVX-512 VBMI
//!   fast path the JIT ran GPTQ and AWQ 1.3-1.6x faster than it (and
//!   compressed-tensors 1.4x slower); with it the generated driver runs GPTQ 1.5x
//!   faster than the JIT and AWQ 1.2-1.5x faster (its blocks of 128 inputs and
//!   line-aligned tiles; loaded host, noisy), and CPUs without VBMI still get the
//!   JIT where it wins;
//! - GGUF blocks, 4096x4096 -> f32: the JIT was faster on Q4_0, Q3_K and MXFP4,
//!   slower on Q5_K and Q2_K (`benches/gguf.rs`).

use std::collections::HashMap;
use std::sync::Mutex;

/// Calls of fewer elements run the generated backend, untimed (their times are
/// noise).
pub const MIN_ELEMENTS: usize = 1 << 20;

/// Timed calls per backend before the choice is made.
pub const ROUNDS: usize = 5;

/// The JIT replaces the generated backend only when its fastest time per element is
/// lower by more than this many percent.
pub const MARGIN_PERCENT: f64 = 5.0;

/// A candidate: the generated driver or the JIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The generated backend (block driver or tiled linear driver).
    Generated,
    /// The JIT (block kernel or linear function).
    Jit,
}

/// ns per element of each candidate's timed calls, or the choice.
type Races = HashMap<String, Result<Pick, [Vec<f64>; 2]>>;

static RACES: Mutex<Option<Races>> = Mutex::new(None);

/// The candidate for the next call of kind `key`, and whether to time it.
pub fn next(key: &str) -> (Pick, bool) {
    let mut races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    match races.get_or_insert_with(HashMap::new).get(key) {
        Some(Ok(pick)) => (*pick, false),
        Some(Err(s)) if s[1].len() < s[0].len() => (Pick::Jit, true),
        _ => (Pick::Generated, true),
    }
}

/// Records a timed call; the last timing needed decides.
pub fn report(key: &str, pick: Pick, ns_per_element: f64) {
    let mut races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    let entry = (races.get_or_insert_with(HashMap::new))
        .entry(key.to_owned())
        .or_insert_with(|| Err(Default::default()));
    if let Err(s) = entry {
        s[usize::from(pick == Pick::Jit)].push(ns_per_element);
        if s.iter().all(|v| v.len() >= ROUNDS) {
            *entry = Ok(choose(s));
        }
    }
}

/// What kind `key` settled on, once its race is over.
pub fn chosen(key: &str) -> Option<Pick> {
    let races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    races.as_ref()?.get(key)?.as_ref().ok().copied()
}

/// Every kind whose race is over, with its choice.
pub fn settled() -> Vec<(String, Pick)> {
    let races = RACES.lock().unwrap_or_else(|e| e.into_inner());
    let settled = races.iter().flat_map(|r| r.iter());
    settled
        .filter_map(|(k, v)| v.as_ref().ok().map(|p| (k.clone(), *p)))
        .collect()
}

/// The JIT when its fastest call beats the generated backend's by more than the
/// margin.
pub fn choose(s: &[Vec<f64>; 2]) -> Pick {
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    if fastest(&s[1]) < fastest(&s[0]) * (1.0 - MARGIN_PERCENT / 100.0) {
        Pick::Jit
    } else {
        Pick::Generated
    }
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
