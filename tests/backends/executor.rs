//! One executor for every threaded path: GGUF tensors, checkpoint linears and
//! plans all go through the runtime's pool ([`dq::exec::fill_parallel`],
//! [`dq::Job::run_parallel`]), which runs work too small to pay for a thread's
//! wake-up on the caller's thread. Converting many tiny tensors at 2 threads then
//! costs what it costs at 1: no dispatch at all (a thread spawn per tensor made a
//! GGUF of 200k tiny tensors take 77 s at 2 threads against 0.6 s at 1).
//!
//! The dispatch counter counts this thread's dispatches, and the executor's
//! choices follow this thread's `Tuning`, so tests running beside this one do not
//! move either.

use dq::formats::gguf::{GgmlType, Gguf, one_tensor_file};
use dq::{Backend, Options};
use std::time::Instant;

/// A Q8_0 tensor of `blocks` blocks: d = 1.0, then bytes -16..16.
fn q8_0(blocks: usize) -> Vec<u8> {
    let mut block = vec![0x00, 0x3C];
    block.extend((0..32u8).map(|i| i.wrapping_sub(16)));
    let data = block.repeat(blocks);
    one_tensor_file("w", GgmlType::Q8_0, &[32 * blocks as u64], &data)
}

/// Dequantizes the file's tensor `times` times at `threads` threads; the pool
/// dispatches that took, and the seconds.
fn run(file: &[u8], times: usize, threads: usize, backend: Backend) -> (u64, f64) {
    let g = Gguf::from_bytes(file).unwrap();
    let t = &g.tensors()[0];
    let mut out = vec![0f32; t.element_count() as usize];
    let opts = Options::new().with_backend(backend).with_threads(threads);
    let before = dq::exec::dispatches();
    let start = Instant::now();
    for _ in 0..times {
        g.dequantize(t, &mut out, &opts).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(out[..3], [-16.0, -15.0, -14.0]);
    assert_eq!(out[out.len() - 1], 15.0);
    (dq::exec::dispatches() - before, secs)
}

fn dispatches(file: &[u8], times: usize, threads: usize, backend: Backend) -> u64 {
    run(file, times, threads, backend).0
}

#[test]
fn tiny_tensors_cost_no_dispatch_at_any_thread_count() {
    let tiny = q8_0(4);
    for backend in [Backend::Generated, Backend::Reference, Backend::Auto] {
        assert_eq!(dispatches(&tiny, 50_000, 1, backend), 0, "{backend}");
        assert_eq!(dispatches(&tiny, 50_000, 2, backend), 0, "{backend}");
        assert_eq!(dispatches(&tiny, 1_000, 64, backend), 0, "{backend}");
    }
    // A coarse guard against threads started some other way than the pool (a
    // spawn per tensor took 100x longer): 2 threads within 10x of 1.
    let (_, one) = run(&tiny, 50_000, 1, Backend::Generated);
    let (_, two) = run(&tiny, 50_000, 2, Backend::Generated);
    assert!(two < 10.0 * one + 0.5, "{two} s at 2 threads, {one} s at 1");
    // The counter counts: a split forced over 2 threads dispatches once a call.
    let split = dq::policy::Tuning::new()
        .with_split()
        .scope(|| dispatches(&q8_0(4096), 3, 2, Backend::Generated));
    assert_eq!(split, 3);
}
