//! Resource bounds of the JIT's kernel cache, counted exactly (no timings, no
//! process-wide memory readings): under a stream of distinct shapes a cache of
//! capacity `C` holds exactly `min(n, C)` kernels, its code bytes are exactly those
//! of the kernels it holds, every shape compiles once, and the code memory of the
//! kernels it dropped is unmapped.
mod support;

use std::collections::VecDeque;

use dq::case::{Case, OwnedTensor};
use dq::jit::Jit;
use dq::kernel::{Kernel, STANDARD};
use dq::{DType, DynamicDequantize, TensorDesc};
use support::reference;

const CAPACITY: usize = 8;

/// A small per-channel case of a shape made distinct by `i`.
fn distinct_case(i: usize) -> Case {
    let shape = [1 + i % 7, 3 + i];
    let n = shape[0] * shape[1];
    let src_b: Vec<u8> = (0..n).map(|x| (x * 37 + i) as u8).collect();
    let scales: Vec<u8> = (0..shape[1])
        .flat_map(|c| (0.25 + c as f32).to_le_bytes())
        .collect();
    Case {
        op: DynamicDequantize::per_channel(-1).into(),
        src: OwnedTensor::new(TensorDesc::new(DType::U8, &shape), src_b),
        scales: Some(OwnedTensor::new(
            TensorDesc::new(DType::F32, &[shape[1]]),
            scales,
        )),
        zps: None,
        dst: OwnedTensor::new(TensorDesc::new(DType::F32, &shape), vec![0u8; n * 4]),
    }
}

/// The page holding `addr`.
fn page_of(addr: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    addr & !(page - 1)
}

/// True when the page at `page` is mapped in this process (`msync` answers
/// `ENOMEM` for an unmapped range).
fn mapped(page: usize) -> bool {
    // SAFETY: msync with MS_ASYNC reads no memory and changes no mapping; it only
    // reports whether the range is mapped.
    unsafe { libc::msync(page as *mut libc::c_void, 1, libc::MS_ASYNC) == 0 }
}

#[test]
fn cache_holds_capacity_kernels_and_unmaps_the_code_it_drops() {
    let jit = Jit::new(&STANDARD, CAPACITY);
    let stats = || jit.stats().expect("the JIT reports statistics");
    // The code sizes of the kernels the cache should hold (least recent first; each
    // shape is new, so the least recent is the least recently used).
    let mut held: VecDeque<usize> = VecDeque::new();
    let mut pages = Vec::new();
    let n = 6 * CAPACITY;
    for i in 0..n {
        let case = distinct_case(i);
        let k = jit.kernel(&case.plan().unwrap()).unwrap();
        held.push_back(k.code_bytes());
        if held.len() > CAPACITY {
            held.pop_front();
        }
        let page = page_of(k.entry() as usize);
        assert!(mapped(page), "kernel {i}: its code page is not mapped");
        pages.push(page);
        drop(k);
        assert_eq!(
            case.run(&jit).unwrap(),
            case.run(reference()).unwrap(),
            "{i}"
        );
        let s = stats();
        assert_eq!(
            s.compiled,
            i as u64 + 1,
            "kernel {i}: one compile per shape"
        );
        assert_eq!(s.cached, held.len() as u64, "kernel {i}: cached");
        assert_eq!(
            s.code_bytes,
            held.iter().sum::<usize>() as u64,
            "kernel {i}: code bytes are those of the cached kernels"
        );
    }
    // Nothing holds a kernel now: clearing the cache frees every byte of code and
    // unmaps it (the evicted kernels' pages too, and none is mapped again).
    jit.clear();
    let s = stats();
    assert_eq!((s.cached, s.code_bytes, s.compiled), (0, 0, n as u64));
    for (i, &page) in pages.iter().enumerate() {
        assert!(
            !mapped(page),
            "kernel {i}: code page {page:#x} still mapped"
        );
    }
}
