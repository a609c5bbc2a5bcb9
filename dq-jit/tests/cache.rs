//! Every JIT kind (elementwise plans, GGUF block types, linear shapes) keeps its
//! kernels in the crate's one cache: at capacity the least recently used kernel
//! is evicted (not all of them, not none), and asking for it again recompiles.

use dq_jit::block::BlockCache;
use dq_jit::{Jit, LinearJit};
use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
use dq_runtime::{DType, DynamicDequantize, Kernel, Plan, STANDARD, TensorDesc};

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
    assert!(blocks.kernel("IQ2_XXS").is_err());
    assert_eq!(blocks.stats().kernels, 2, "an unknown type takes no slot");
}

#[test]
fn linear_kernels_evict_the_least_recently_used() {
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
