//! Interleaved medians: every contender of a row runs once per round, rounds repeat
//! for at least the minimum time, and each contender's median is its time.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// One timed call; `Err` is its one-line failure (the contender is then left out).
pub type Call<'a> = Box<dyn FnMut() -> Result<(), String> + 'a>;

/// Fewest rounds, whatever the minimum time.
const MIN_ROUNDS: usize = 5;

/// Median seconds of each call, run in interleaved rounds for at least `min` (and
/// [`MIN_ROUNDS`] rounds) after one untimed warm-up each; round `r` starts at call
/// `r % calls.len()`, so no call always follows the same one (a large copy leaves
/// memory busy for whatever runs next). A call that fails its warm-up or any round
/// gives that error and is not run again.
pub fn interleaved(min: Duration, calls: &mut [Call<'_>]) -> Vec<Result<f64, String>> {
    let mut times: Vec<Result<Vec<f64>, String>> =
        calls.iter_mut().map(|c| c().map(|()| Vec::new())).collect();
    let start = Instant::now();
    let mut rounds = 0;
    while (rounds < MIN_ROUNDS || start.elapsed() < min) && times.iter().any(Result::is_ok) {
        let count = calls.len();
        for i in (0..count).map(|i| (i + rounds) % count) {
            let Ok(v) = &mut times[i] else { continue };
            let at = Instant::now();
            match calls[i]() {
                Ok(()) => v.push(at.elapsed().as_secs_f64()),
                Err(e) => times[i] = Err(e),
            }
        }
        rounds += 1;
    }
    times.into_iter().map(|t| t.map(median)).collect()
}

/// The median (upper middle) of `v`, not empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A memcpy yardstick: copies `bytes` between two buffers on huge pages when
/// `huge`; counts read + written bytes (`2 * bytes`).
pub struct Memcpy {
    src: Vec<u8>,
    dst: Vec<u8>,
}

impl Memcpy {
    /// Buffers for copies of up to `bytes`.
    pub fn new(bytes: usize, huge: bool) -> Memcpy {
        let (mut src, mut dst) = (vec![0u8; bytes], vec![0u8; bytes]);
        advise_huge(&mut src, huge);
        advise_huge(&mut dst, huge);
        src.fill(1);
        dst.fill(2);
        Memcpy { src, dst }
    }

    /// A call copying the first `bytes`.
    pub fn call(&mut self, bytes: usize) -> Call<'_> {
        let (src, dst) = (&self.src[..bytes], &mut self.dst[..bytes]);
        Box::new(move || {
            dst.copy_from_slice(black_box(src));
            Ok(())
        })
    }
}

/// With `huge`, advises `v` for transparent huge pages before its first touch
/// (`dq::buffer`; both tools' outputs and the memcpy buffers get the same advice).
pub fn advise_huge<T>(v: &mut [T], huge: bool) {
    if huge {
        dq::buffer::advise_huge_pages(v);
    }
}
