//! What the criterion benches share.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Throughput};
use dq::buffer::zeroed;

/// The memcpy yardstick in `group` (id `memcpy`): a copy of `bytes` bytes,
/// counted read + write, between buffers on huge pages (`dq::buffer`), as
/// `dq bench`'s.
pub fn memcpy(group: &mut BenchmarkGroup<'_, WallTime>, bytes: usize) {
    memcpy_as(group, "memcpy", bytes);
}

/// [`memcpy`] under the id `id`.
pub fn memcpy_as(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, bytes: usize) {
    let mut src: Vec<u8> = zeroed(bytes);
    src.fill(1);
    let mut dst: Vec<u8> = zeroed(bytes);
    group.throughput(Throughput::Bytes(2 * bytes as u64));
    group.bench_function(id, |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
}

/// The write roofline in `group` (ids `write:STRATEGY{suffix}`, as `dq bench`'s
/// rows): `bytes` of dst written alone from a cache-resident 16 KiB block, once
/// per store strategy, counted as dst bytes. The fastest is the least time any
/// kernel writing that output could take here.
#[allow(dead_code)]
pub fn write_roofline(group: &mut BenchmarkGroup<'_, WallTime>, bytes: usize, suffix: &str) {
    use dq::policy::{StoreStrategy, write_with};
    let block = vec![0x5au8; 16 << 10];
    let mut dst: Vec<u8> = zeroed(bytes);
    group.throughput(Throughput::Bytes(bytes as u64));
    for s in StoreStrategy::ALL {
        group.bench_function(format!("write:{}{suffix}", s.name()), |b| {
            b.iter(|| write_with(s, black_box(&mut dst), &block))
        });
    }
}
