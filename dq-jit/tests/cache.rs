//! Every JIT kind (elementwise plans, GGUF block types, linear shapes) keeps its
//! kernels in the crate's one cache: at capacity the least recently used kernel
//! is evicted (not all of them, not none), and asking for it again recompiles.
//! The cache's resource bounds, counted exactly: the kernels and code bytes it
//! holds, and the code memory of the kernels it drops unmapped.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use dq_jit::block::BlockCache;
use dq_jit::{Jit, LinearJit};
use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
use dq_runtime::{
    DType, DynamicDequantize, Kernel, Plan, Reference, STANDARD, Tensor, TensorDesc, TensorMut,
};

/// Asks for keys `a, b, a, c` from a cache of capacity 2 through `get`, then
/// `b` again; `cached(key)` and `counts()` (compiled, kernels held) observe it.
fn evicts_least_recently_used<K: Copy>(
    [a, b, c]: [K; 3],
    get: impl Fn(K),
    cached: impl Fn(K) -> bool,
    counts: impl Fn() -> (u64, u64),
) {
    get(a);
    get(b);
    get(a); // b is now the least recently used
    get(c);
    assert_eq!(counts(), (3, 2), "three compiles, two kernels held");
    assert!(cached(a) && cached(c), "the recently used stay");
    assert!(!cached(b), "the least recently used goes");
    get(b);
    assert_eq!(counts(), (4, 2), "an evicted kernel recompiles");
    assert!(!cached(a), "a was then the least recently used");
}

fn plan(n: usize) -> Plan {
    Plan::new(
        &DynamicDequantize::per_tensor().into(),
        &TensorDesc::new(DType::S8, &[n]),
        Some(&TensorDesc::new(DType::F32, &[1])),
        None,
        &TensorDesc::new(DType::F32, &[n]),
    )
    .unwrap()
}

#[test]
fn elementwise_kernels_evict_the_least_recently_used() {
    let _serial = serial();
    let jit = Jit::new(&STANDARD, 2);
    let plans = [plan(3), plan(5), plan(7)];
    evicts_least_recently_used(
        [0, 1, 2],
        |i| drop(jit.kernel(&plans[i]).unwrap()),
        |i| jit.is_cached(&plans[i]),
        || {
            let s = jit.stats().unwrap();
            (s.compiled, s.cached)
        },
    );
}

#[test]
fn block_kernels_evict_the_least_recently_used() {
    let _serial = serial();
    let blocks = BlockCache::new(2);
    evicts_least_recently_used(
        ["Q4_0", "Q8_0", "Q5_0"],
        |name| drop(blocks.kernel(name).unwrap()),
        |name| blocks.is_cached(name),
        || {
            let s = blocks.stats();
            (s.compiled as u64, s.kernels as u64)
        },
    );
    assert!(blocks.kernel("I8").is_err());
    assert_eq!(blocks.stats().kernels, 2, "an unknown type takes no slot");
}

#[test]
fn linear_kernels_evict_the_least_recently_used() {
    let _serial = serial();
    let (word, scale) = ([0x10u8; 4], 1f32.to_le_bytes());
    // Shapes differing only in the weights' offset.
    let linear = |offset| {
        let weights = Packed {
            words: &word,
            bits: 4,
            packing: Packing::Inner,
            row_stride: 1,
            col_stride: 1,
            offset,
        };
        let scales = Scales {
            bytes: &scale,
            dtype: ScaleType::F32,
            row_stride: 1,
            col_stride: 1,
        };
        Linear::new(1, 8, 1, weights, None, scales, Groups::Size(8)).unwrap()
    };
    let jit = LinearJit::new().with_capacity(2);
    if let Err(e) = jit.kernel(&linear(0), DType::F32) {
        // The host lacks the linear JIT's instructions (SSSE3, SSE4.1).
        if std::env::var_os("DQ_REQUIRE_ALL_PATHS").is_some_and(|v| v == "1") {
            panic!("DQ_REQUIRE_ALL_PATHS=1 but the linear JIT cannot run here: {e}");
        }
        eprintln!("SKIPPED (path unavailable): linear JIT cache ({e})");
        return;
    }
    let jit = LinearJit::new().with_capacity(2);
    evicts_least_recently_used(
        [-8, -7, -6],
        |offset| {
            let mut out = [0f32; 8];
            jit.run(&linear(offset), 0..1, &mut out).unwrap();
            // Word bytes 0x10: fields 0, 1, 0, 1, ... plus the offset.
            assert_eq!(out[1], (1 + offset) as f32, "offset {offset}");
        },
        |offset| jit.is_cached(&linear(offset), DType::F32),
        || {
            let s = jit.stats();
            (s.compiled, s.kernels as u64)
        },
    );
}

// ---- resource bounds -------------------------------------------------------
//
// Counted exactly, no timings and no process-wide memory readings, except that
// the code pages of dropped kernels are unmapped: every test of this binary holds
// `serial()`, so no other test maps memory (JIT code, thread stacks) into a page
// freed here before it is checked.

/// Held by every test of this binary: one at a time (see above).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const CAPACITY: usize = 8;

/// A small per-channel u8 -> f32 case of a shape made distinct by `i`: its plan,
/// src bytes and scales.
fn distinct_case(i: usize) -> (Plan, Vec<u8>, Vec<f32>) {
    let shape = [1 + i % 7, 3 + i];
    let n = shape[0] * shape[1];
    let src: Vec<u8> = (0..n).map(|x| (x * 37 + i) as u8).collect();
    let scales: Vec<f32> = (0..shape[1]).map(|c| 0.25 + c as f32).collect();
    let plan = Plan::new(
        &DynamicDequantize::per_channel(-1).into(),
        &TensorDesc::new(DType::U8, &shape),
        Some(&TensorDesc::new(DType::F32, &[shape[1]])),
        None,
        &TensorDesc::new(DType::F32, &shape),
    )
    .unwrap();
    (plan, src, scales)
}

/// The case's dst bits through `kernel`.
fn run_case(case: &(Plan, Vec<u8>, Vec<f32>), kernel: &dyn Kernel) -> Vec<u32> {
    let (plan, src, scales) = case;
    let mut out = vec![f32::NAN; plan.numel()];
    let s = Tensor::from_bytes(DType::U8, &plan.src().shape, src);
    let sc = Tensor::from_slice(scales, &[scales.len()]);
    let mut d = TensorMut::from_slice(&mut out, &plan.dst().shape);
    plan.bind(&s, Some(&sc), None, &mut d)
        .unwrap()
        .run(kernel)
        .unwrap();
    out.iter().map(|y| y.to_bits()).collect()
}

/// The page holding `addr`.
fn page_of(addr: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    addr & !(page - 1)
}

/// True when the page at `page` is mapped executable in this process (the JIT's
/// code), from `/proc/self/maps`. A freed code page may be mapped again for data
/// (the heap, another test's buffers), never executable.
fn mapped(page: usize) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            return false;
        };
        let Some((a, b)) = range.split_once('-') else {
            return false;
        };
        let hex = |x: &str| usize::from_str_radix(x, 16).unwrap_or(0);
        (hex(a)..hex(b)).contains(&page) && perms.contains('x')
    })
}

/// Under a stream of distinct shapes a cache of capacity `C` holds exactly
/// `min(n, C)` kernels, its code bytes are exactly those of the kernels it holds,
/// every shape compiles once, and the code memory of the kernels it dropped is
/// unmapped.
#[test]
fn cache_holds_capacity_kernels_and_unmaps_the_code_it_drops() {
    let _serial = serial();
    let jit = Jit::new(&STANDARD, CAPACITY);
    let reference = Reference::default();
    let stats = || jit.stats().expect("the JIT reports statistics");
    // The code sizes of the kernels the cache should hold (least recent first; each
    // shape is new, so the least recent is the least recently used).
    let mut held: VecDeque<usize> = VecDeque::new();
    let mut pages = Vec::new();
    let n = 6 * CAPACITY;
    for i in 0..n {
        let case = distinct_case(i);
        let k = jit.kernel(&case.0).unwrap();
        held.push_back(k.code_bytes());
        if held.len() > CAPACITY {
            held.pop_front();
        }
        let page = page_of(k.entry() as usize);
        assert!(mapped(page), "kernel {i}: its code page is not mapped");
        pages.push(page);
        drop(k);
        assert_eq!(run_case(&case, &jit), run_case(&case, &reference), "{i}");
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
    // unmaps it (the evicted kernels' pages too: none is executable any more).
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
