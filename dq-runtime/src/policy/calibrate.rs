//! Timing the store strategies on this machine, once per process, to choose the one
//! for large outputs.
//!
//! Each strategy writes 4 MiB windows of a buffer twice the last-level cache, the
//! way the kernels store a computed block (64-byte lines from a cache-resident
//! block; prefetch [`PREFETCH_AHEAD`] bytes ahead; non-temporal stores), in
//! interleaved rounds; the median time of each counts. A window is rewritten only
//! after more than the cache's size of other writes, so every timed line comes from
//! memory, as a large output's do. Once per process, on the first large output.

use std::time::Instant;

use super::StoreStrategy;
use crate::arch;

/// Timed writes per strategy; the median counts.
const REPS: usize = 3;

/// A strategy other than prefetching is chosen only when faster by more than this
/// fraction (a tie keeps prefetching).
const TIE: f64 = 0.02;

/// How far ahead of the stores dst lines are prefetched (as the generated kernels).
const PREFETCH_AHEAD: usize = 1024;

/// Bytes of the cache-resident block each write repeats.
const BLOCK: usize = 16 << 10;

/// Windows the buffer is cut into.
const WINDOWS: usize = 16;

/// The median of `reps` (at least 1) times that `time` takes for each strategy, in
/// [`StoreStrategy::ALL`] order; rounds are interleaved so drift slows each alike.
pub fn measure(mut time: impl FnMut(StoreStrategy) -> u64, reps: usize) -> [u64; 3] {
    let mut times: [Vec<u64>; 3] = Default::default();
    for _ in 0..reps.max(1) {
        for (t, s) in times.iter_mut().zip(StoreStrategy::ALL) {
            t.push(time(s));
        }
    }
    times.map(|mut t| {
        t.sort_unstable();
        t[t.len() / 2]
    })
}

/// The fastest strategy of `ns` (times in [`StoreStrategy::ALL`] order); prefetching
/// unless another is faster by more than 2%.
pub fn choose(ns: [u64; 3]) -> StoreStrategy {
    let prefetch = ns[StoreStrategy::Prefetch as usize] as f64;
    let (best, t) = (StoreStrategy::ALL.into_iter().zip(ns))
        .min_by_key(|&(_, t)| t)
        .unwrap_or((StoreStrategy::Prefetch, 0));
    if (t as f64) < prefetch * (1.0 - TIE) {
        best
    } else {
        StoreStrategy::Prefetch
    }
}

/// Times each strategy on this machine: median ns per 4 MiB window written, in
/// [`StoreStrategy::ALL`] order.
pub fn calibrate() -> [u64; 3] {
    let total = (2 * super::reported_llc()).clamp(WINDOWS << 20, 64 << 20);
    let window = total / WINDOWS;
    let mut buf = vec![0u8; total];
    // Fault every page in, untimed.
    buf.fill(1);
    let block = vec![0x5au8; BLOCK];
    let mut next = 0;
    measure(
        |s| {
            let w = &mut buf[next * window..(next + 1) * window];
            next = (next + 1) % WINDOWS;
            let t = Instant::now();
            write(s, w, &block);
            t.elapsed().as_nanos() as u64
        },
        REPS,
    )
}

/// Fills `dst` with copies of `block` stored as `s` says, the way the kernels store
/// a computed block (64-byte lines from a cache-resident block; prefetch
/// [`PREFETCH_AHEAD`] bytes ahead; non-temporal stores, fenced at the end): what
/// the calibration times, and `dq bench`'s write roofline.
///
/// # Panics
/// If `block` is empty.
pub fn write(s: StoreStrategy, dst: &mut [u8], block: &[u8]) {
    for d in dst.chunks_mut(block.len()) {
        let b = &block[..d.len()];
        match s {
            StoreStrategy::NonTemporal => {
                // SAFETY: `d` is writable for `b.len()` bytes and does not overlap `b`.
                unsafe { arch::stream_copy(d.as_mut_ptr(), b) }
            }
            _ => {
                let prefetch = s == StoreStrategy::Prefetch;
                for (dl, bl) in d.chunks_mut(64).zip(b.chunks(64)) {
                    if prefetch {
                        arch::prefetch_write(dl.as_ptr().wrapping_add(PREFETCH_AHEAD));
                    }
                    dl.copy_from_slice(bl);
                }
            }
        }
    }
    if s == StoreStrategy::NonTemporal {
        arch::stream_fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StoreStrategy::{NonTemporal, Plain, Prefetch};

    #[test]
    fn the_median_of_each_strategy_counts() {
        // Three rounds: plain 5, 9, 1; prefetch 4, 4, 100; non-temporal 7, 6, 8.
        let mut fake = [5, 4, 7, 9, 4, 6, 1, 100, 8].into_iter();
        let mut asked = Vec::new();
        let ns = measure(
            |s| {
                asked.push(s);
                fake.next().unwrap()
            },
            3,
        );
        assert_eq!(ns, [5, 4, 7]);
        assert_eq!(asked[..3], StoreStrategy::ALL, "rounds interleave");
        assert_eq!(asked.len(), 9);
    }

    #[test]
    fn the_fastest_wins_ties_keep_prefetching() {
        assert_eq!(choose([100, 120, 130]), Plain);
        assert_eq!(choose([130, 120, 100]), NonTemporal);
        assert_eq!(choose([130, 100, 120]), Prefetch);
        // Within 2% of prefetching: a tie.
        assert_eq!(choose([99, 100, 101]), Prefetch);
        assert_eq!(choose([100, 100, 100]), Prefetch);
        assert_eq!(choose([100, 100, 97]), NonTemporal);
        assert_eq!(choose([0, 0, 0]), Prefetch);
    }

    #[test]
    fn calibration_times_every_strategy() {
        let ns = calibrate();
        assert!(ns.iter().all(|&t| t > 0), "{ns:?}");
    }
}
