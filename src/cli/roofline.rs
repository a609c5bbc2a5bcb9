//! `dq bench`'s write roofline: dst written alone, with no source read, once with
//! each store strategy; the fastest is the least time any kernel writing this
//! output could take on this machine.

use dq::policy::{StoreStrategy, write_with};

/// Bytes of the cache-resident block each line is copied from (as the kernels
/// store a computed block).
const BLOCK: usize = 16 << 10;

/// Writes `dst` with strategy `s`, split over `pool`'s threads as the memcpy
/// yardstick is ([`super::bench::split_over`]).
pub fn write(pool: Option<&rayon::ThreadPool>, s: StoreStrategy, block: &[u8], dst: &mut [u8]) {
    super::bench::split_over(pool, dst, |_, d| write_with(s, d, block));
}

/// The block the roofline's writes copy from.
pub fn block() -> Vec<u8> {
    vec![0x5a; BLOCK]
}

/// The row name of the write with strategy `s`.
pub fn row_name(s: StoreStrategy) -> String {
    format!("write:{}", s.name())
}

/// The strategy of a roofline row name, if it is one.
pub fn strategy_of(row: &str) -> Option<StoreStrategy> {
    StoreStrategy::parse(row.strip_prefix("write:")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_writes_every_byte() {
        let block = block();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for s in StoreStrategy::ALL {
            for (pool, len) in [(None, 100_003), (Some(&pool), (4 << 20) + 65)] {
                let mut dst = vec![0u8; len];
                write(pool, s, &block, &mut dst);
                assert!(dst.iter().all(|&b| b == 0x5a), "{}", s.name());
            }
            assert_eq!(strategy_of(&row_name(s)), Some(s));
        }
        assert_eq!(strategy_of("memcpy"), None);
    }
}
