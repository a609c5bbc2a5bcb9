//! What the criterion benches share.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Throughput};
use dq::buffer::zeroed;

/// The memcpy yardstick in `group` (id `memcpy`): a copy of `bytes` bytes,
/// counted read + write, between buffers on huge pages (`dq::buffer`), as
/// `dq bench`'s.
pub fn memcpy(group: &mut BenchmarkGroup<'_, WallTime>, bytes: usize) {
    let mut src: Vec<u8> = zeroed(bytes);
    src.fill(1);
    let mut dst: Vec<u8> = zeroed(bytes);
    group.throughput(Throughput::Bytes(2 * bytes as u64));
    group.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
}
