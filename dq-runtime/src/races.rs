//! Choices made by timing real calls: per key, each of `N` candidates is timed
//! until every one has [`Rules::rounds`] timings; then one is chosen for the key
//! for good, a default unless another beats it by more than
//! [`Rules::margin_percent`] (timing noise must not flip a choice).
//!
//! The block forms ([`crate::block`]), the store strategy per plan
//! ([`crate::policy::race_store`]) and, in the `dq` crate, the backend per kind
//! of checkpoint tensor are such races.
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
use std::sync::{Mutex, MutexGuard};

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

/// A key's timings so far (ns per element, per candidate), or its choice.
type Entry<const N: usize> = Result<usize, [Vec<f64>; N]>;

/// Races between candidates `0..N`, by key.
pub struct Races<K, const N: usize> {
    rules: Rules,
    map: Mutex<Option<HashMap<K, Entry<N>>>>,
}

impl<K: Eq + Hash, const N: usize> Races<K, N> {
    /// No race run yet.
    pub const fn new(rules: Rules) -> Self {
        Races {
            rules,
            map: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<HashMap<K, Entry<N>>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The candidate for the next call of `key` and whether to time it: the
    /// choice, untimed, once made; else the first with the fewest timings.
    pub fn next<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> (usize, bool)
    where
        K: Borrow<Q>,
    {
        match self.lock().as_ref().and_then(|m| m.get(key)) {
            Some(Ok(c)) => (*c, false),
            Some(Err(s)) => ((0..N).min_by_key(|&c| s[c].len()).unwrap_or(0), true),
            None => (0, true),
        }
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
        let map = map.get_or_insert_with(HashMap::new);
        if !map.contains_key(key) {
            map.insert(key.to_owned(), Err(std::array::from_fn(|_| Vec::new())));
        }
        let Some(entry) = map.get_mut(key) else {
            return;
        };
        if let Err(s) = entry {
            s[candidate % N].push(ns_per_element);
            if s.iter().all(|v| v.len() >= self.rules.rounds) {
                *entry = Ok(choose(&self.rules, s, default));
            }
        }
    }

    /// The choice made for `key`, once its race is over.
    pub fn chosen<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        self.lock().as_ref()?.get(key)?.as_ref().ok().copied()
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
    let figure = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let at = match rules.stat {
            Stat::Fastest => 0,
            Stat::Median => v.len() / 2,
        };
        v.get(at).copied().unwrap_or(f64::INFINITY)
    };
    let f: Vec<f64> = s.iter().map(|v| figure(v)).collect();
    let best = (0..f.len())
        .min_by(|&a, &b| f[a].total_cmp(&f[b]))
        .unwrap_or(default);
    if f[best] < f[default] * (1.0 - rules.margin_percent / 100.0) {
        best
    } else {
        default
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
}
