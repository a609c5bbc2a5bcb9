//! Choices made by timing real calls, the one mechanism behind every tuning
//! choice dq makes while it runs: per key, each of `N` candidates is timed until
//! every one has [`Rules::rounds`] timings; then one is chosen for the key for
//! good, a default unless another beats it by more than [`Rules::margin_percent`]
//! (timing noise must not flip a choice). Races made with a name remember their
//! choices between runs ([`memory`]), so the next process starts decided.
//!
//! Such races: the block forms ([`crate::block`]), the store strategy per plan
//! ([`crate::policy::race_store`]), `auto`'s kernel per plan
//! ([`crate::backend::Race`], a keyless [`Race`]) and, in the `dq` crate, the
//! backend per kind of checkpoint tensor.
//!
//! ```
//! use dq_runtime::races::{Races, Rules, Stat};
//! static RACES: Races<u64, 2> = Races::new(Rules { rounds: 2, margin_percent: 5.0, stat: Stat::Median });
//! for _ in 0..4 {
//!     let (c, timed) = RACES.next(&7);
//!     assert!(timed);
//!     RACES.report(&7, c, if c == 1 { 1.0 } else { 2.0 }, 0);
//! }
//! assert_eq!(RACES.next(&7), (1, false));
//! ```

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard, OnceLock};

pub mod memory;

/// Which figure of a candidate's timings counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// The fastest call (noise only adds time).
    Fastest,
    /// The median call (one outlier either way does not count).
    Median,
}

/// How a race is run and decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rules {
    /// Timed calls per candidate before the choice.
    pub rounds: usize,
    /// How much faster (percent of the default's time) another candidate must be.
    pub margin_percent: f64,
    /// Which figure of the timings is compared.
    pub stat: Stat,
}

impl Rules {
    /// The figure of `timings` these rules compare (`None` without timings).
    pub fn figure(&self, timings: &[f64]) -> Option<f64> {
        let mut v = timings.to_vec();
        v.sort_by(f64::total_cmp);
        let at = match self.stat {
            Stat::Fastest => 0,
            Stat::Median => v.len() / 2,
        };
        v.get(at).copied()
    }
}

/// One race's timings so far: ns per element, per candidate.
#[derive(Clone, Debug)]
struct Tally(Vec<Vec<f64>>);

impl Tally {
    fn new(candidates: usize) -> Tally {
        Tally(vec![Vec::new(); candidates])
    }

    /// The first candidate with the fewest timings.
    fn next(&self) -> usize {
        (0..self.0.len())
            .min_by_key(|&c| self.0[c].len())
            .unwrap_or(0)
    }

    /// Adds a timing of `candidate` (out of range, or beyond its rounds:
    /// ignored, so concurrent calls of one candidate do not give it more
    /// chances); once every candidate has its rounds, the choice ([`choose`]).
    fn add(&mut self, rules: &Rules, candidate: usize, ns: f64, default: usize) -> Option<usize> {
        let v = self.0.get_mut(candidate)?;
        if v.len() < rules.rounds.max(1) {
            v.push(ns);
        }
        let done = self.0.iter().all(|v| v.len() >= rules.rounds);
        done.then(|| choose(rules, &self.0, default))
    }
}

/// One race between candidates `0..n`: the same protocol as [`Races`] without a
/// key (the race of one thing, e.g. `auto`'s kernels for one plan). Once chosen,
/// [`next`](Self::next) and [`chosen`](Self::chosen) take no lock.
#[derive(Debug)]
pub struct Race {
    rules: Rules,
    tally: Mutex<Tally>,
    choice: OnceLock<usize>,
    /// The race's name and key its choice is remembered under.
    memo: Option<(&'static str, String)>,
}

impl Race {
    /// A race between `candidates` candidates (at least one), none timed yet.
    pub fn new(rules: Rules, candidates: NonZeroUsize) -> Race {
        Race {
            rules,
            tally: Mutex::new(Tally::new(candidates.get())),
            choice: OnceLock::new(),
            memo: None,
        }
    }

    /// A race whose choice is remembered between runs as `key` of `race`
    /// ([`memory`]): decided from the start where it was remembered.
    pub fn remembered(
        rules: Rules,
        candidates: NonZeroUsize,
        race: &'static str,
        key: String,
    ) -> Race {
        let r = Race::new(rules, candidates);
        if let Some(c) = memory::recall(race, &key, candidates.get()) {
            let _ = r.choice.set(c);
        }
        Race {
            memo: Some((race, key)),
            ..r
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rules it runs by.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The candidate for the next call and whether to time it: the choice,
    /// untimed, once made; else the first with the fewest timings.
    pub fn next(&self) -> (usize, bool) {
        match self.chosen() {
            Some(c) => (c, false),
            None => (self.lock().next(), true),
        }
    }

    /// Records a timed call of `candidate`; the last timing needed decides,
    /// keeping `default` unless another beats it ([`choose`]). Late reports
    /// change nothing.
    pub fn report(&self, candidate: usize, ns_per_element: f64, default: usize) {
        if self.chosen().is_some() {
            return;
        }
        let mut tally = self.lock();
        if let Some(c) = tally.add(&self.rules, candidate, ns_per_element, default) {
            // Under the lock: the first decision is the only one.
            let _ = self.choice.set(c);
            if let Some((race, key)) = &self.memo {
                memory::remember(race, key, c);
            }
        }
    }

    /// The choice, once the race is over.
    pub fn chosen(&self) -> Option<usize> {
        self.choice.get().copied()
    }

    /// Each candidate's figure so far by the rules' [`Stat`], in ns per element
    /// (`None` before its first timing).
    pub fn figures(&self) -> Vec<Option<f64>> {
        let tally = self.lock();
        tally.0.iter().map(|v| self.rules.figure(v)).collect()
    }
}

/// The name a race's choices are remembered under, and each key's text.
type Memo<K> = (&'static str, fn(&K) -> String);

/// A key's timings so far, or its choice.
type Entry = Result<usize, Tally>;

/// Races between candidates `0..N` (at least one), by key.
pub struct Races<K, const N: usize> {
    rules: Rules,
    map: Mutex<Option<HashMap<K, Entry>>>,
    /// The name choices are remembered under, and each key's text ([`memory`]).
    memo: Option<Memo<K>>,
}

impl<K: Eq + Hash, const N: usize> Races<K, N> {
    /// No race run yet.
    pub const fn new(rules: Rules) -> Self {
        const { assert!(N > 0, "a race needs a candidate") };
        Races {
            rules,
            map: Mutex::new(None),
            memo: None,
        }
    }

    /// Races whose choices are remembered between runs under the name `race`,
    /// each key as `text` writes it ([`memory`]).
    pub const fn remembered(rules: Rules, race: &'static str, text: fn(&K) -> String) -> Self {
        const { assert!(N > 0, "a race needs a candidate") };
        Races {
            rules,
            map: Mutex::new(None),
            memo: Some((race, text)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<HashMap<K, Entry>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rules its races run by.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The candidate for the next call of `key` and whether to time it: the
    /// choice, untimed, once made (or remembered); else the first with the
    /// fewest timings.
    pub fn next<Q>(&self, key: &Q) -> (usize, bool)
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        match self.entry(&mut self.lock(), key) {
            Ok(c) => (*c, false),
            Err(t) => (t.next(), true),
        }
    }

    /// `key`'s entry, made on first sight: the choice remembered for it (a
    /// remembered race, [`memory`]), else a race not yet timed.
    fn entry<'m, Q>(&self, map: &'m mut Option<HashMap<K, Entry>>, key: &Q) -> &'m mut Entry
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        let map = map.get_or_insert_with(HashMap::new);
        if !map.contains_key(key) {
            let owned = key.to_owned();
            let recalled =
                (self.memo).and_then(|(race, text)| memory::recall(race, &text(&owned), N));
            map.insert(owned, recalled.ok_or_else(|| Tally::new(N)));
        }
        map.get_mut(key).expect("inserted above")
    }

    /// Records a timed call of `candidate` for `key`; the last timing needed
    /// decides, keeping `default` unless another beats it ([`choose`]). Late
    /// reports (calls that were running when the choice was made) change nothing.
    pub fn report<Q>(&self, key: &Q, candidate: usize, ns_per_element: f64, default: usize)
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        let mut map = self.lock();
        let entry = self.entry(&mut map, key);
        if let Err(t) = entry
            && let Some(c) = t.add(&self.rules, candidate, ns_per_element, default)
        {
            *entry = Ok(c);
            if let Some((race, text)) = self.memo {
                memory::remember(race, &text(&key.to_owned()), c);
            }
        }
    }

    /// The choice made (or remembered) for `key`, once its race is over.
    pub fn chosen<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        self.entry(&mut self.lock(), key).as_ref().ok().copied()
    }

    /// Every key whose race is over, with its choice.
    pub fn settled(&self) -> Vec<(K, usize)>
    where
        K: Clone,
    {
        let map = self.lock();
        let settled = map.iter().flat_map(|m| m.iter());
        settled
            .filter_map(|(k, v)| v.as_ref().ok().map(|c| (k.clone(), *c)))
            .collect()
    }
}

/// The candidate chosen from timings `s`: the best by `rules.stat` if it beats
/// `default`'s by more than the margin, else `default`. A candidate without
/// timings counts as infinitely slow.
pub fn choose(rules: &Rules, s: &[Vec<f64>], default: usize) -> usize {
    let f: Vec<f64> = (s.iter())
        .map(|v| rules.figure(v).unwrap_or(f64::INFINITY))
        .collect();
    let best = (0..f.len())
        .min_by(|&a, &b| f[a].total_cmp(&f[b]))
        .unwrap_or(default);
    match (f.get(best), f.get(default)) {
        (Some(b), Some(d)) if *b < d * (1.0 - rules.margin_percent / 100.0) => best,
        (Some(_), None) => best,
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEDIAN: Rules = Rules {
        rounds: 3,
        margin_percent: 5.0,
        stat: Stat::Median,
    };
    const FASTEST: Rules = Rules {
        stat: Stat::Fastest,
        ..MEDIAN
    };

    #[test]
    fn the_figure_is_the_rules_and_the_default_keeps_ties_within_the_margin() {
        // Candidate 1: fastest call 0.5, median 1.5; candidate 0: 1.0 throughout.
        let s = [vec![1.0, 1.0, 1.0], vec![0.5, 1.5, 3.0]];
        assert_eq!(choose(&FASTEST, &s, 0), 1);
        assert_eq!(choose(&MEDIAN, &s, 0), 0);
        // Within 5% the default stays, whichever it is; beyond, the faster wins.
        let s = [vec![1.0], vec![0.96]];
        assert_eq!((choose(&MEDIAN, &s, 0), choose(&MEDIAN, &s, 1)), (0, 1));
        let s = [vec![1.0], vec![0.94]];
        assert_eq!((choose(&MEDIAN, &s, 0), choose(&MEDIAN, &s, 1)), (1, 1));
        // No timings: never chosen over one that has them.
        assert_eq!(choose(&MEDIAN, &[vec![2.0], vec![]], 0), 0);
    }

    #[test]
    fn candidates_take_turns_then_the_choice_sticks() {
        let races: Races<String, 3> = Races::new(MEDIAN);
        let mut seen = [0; 3];
        for _ in 0..3 * MEDIAN.rounds {
            assert_eq!(races.chosen("k"), None);
            let (c, timed) = races.next("k");
            assert!(timed);
            seen[c] += 1;
            races.report("k", c, [3.0, 1.0, 2.0][c], 2);
        }
        assert_eq!(seen, [MEDIAN.rounds; 3]);
        assert_eq!(races.next("k"), (1, false));
        races.report("k", 0, 0.1, 2);
        assert_eq!(races.chosen("k"), Some(1));
        assert_eq!(races.settled(), vec![("k".to_owned(), 1)]);
        assert_eq!(races.next("other"), (0, true));
    }

    #[test]
    fn a_keyless_race_runs_the_same_protocol() {
        let race = Race::new(FASTEST, NonZeroUsize::new(2).unwrap());
        assert_eq!(race.figures(), [None, None]);
        for _ in 0..FASTEST.rounds {
            for c in [0, 1] {
                assert_eq!(race.chosen(), None);
                assert_eq!(race.next(), (c, true));
                race.report(c, [2.0, 1.5][c], 0);
            }
        }
        assert_eq!(race.next(), (1, false));
        assert_eq!(race.figures(), [Some(2.0), Some(1.5)]);
        // Late and out-of-range reports change nothing.
        race.report(0, 0.1, 0);
        race.report(7, 0.1, 0);
        assert_eq!((race.chosen(), race.figures()[0]), (Some(1), Some(2.0)));
    }

    #[test]
    fn timings_beyond_a_candidates_rounds_do_not_count() {
        let race = Race::new(FASTEST, NonZeroUsize::new(2).unwrap());
        // Concurrent calls of candidate 0: only its first rounds count.
        for ns in [3.0, 3.0, 3.0, 0.5] {
            race.report(0, ns, 0);
        }
        assert_eq!(race.next(), (1, true));
        for _ in 0..FASTEST.rounds {
            race.report(1, 1.0, 0);
        }
        assert_eq!(race.chosen(), Some(1));
        assert_eq!(race.figures(), [Some(3.0), Some(1.0)]);
    }
}
