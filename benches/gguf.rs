//! GGUF block types, one 4096x4096 tensor each -> f32 into a reused buffer, one
//! thread, per backend (generated, JIT, `auto`), and -> bf16 and f16 (generated,
//! JIT; ids `TYPE/BACKEND/bf16`), beside a memcpy yardstick in the same run.
//!
//! Metric: GB/s = (block bytes + output bytes) / time per call, the definition
//! of the candle peer (`bash benches/peers/run.sh --gguf`, which times candle-core
//! on the same blocks; candle is not built here). The memcpy group copies a buffer
//! of the output's size and counts read + write bytes.
//! Output and memcpy buffers are on huge pages (`dq::buffer`), as in `dq bench`.
//! `cargo bench --bench gguf [-- TYPE]`, e.g. `-- Q4_K`.

mod support;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dq::buffer::zeroed;
use dq::case::Rng;
use dq::formats::Element;
use dq::formats::gguf::{GgmlType, Gguf, TensorInfo, one_tensor_file};
use dq::{Backend, Options};
use dq_runtime::block::{ParamNode, gguf};

const COLS: usize = 4096;
const ROWS: usize = 4096;

/// Random blocks of `ty` whose f16 and e8m0 parameters are finite normals (so no
/// denormal or NaN arithmetic flatters or slows any backend).
fn blocks(rng: &mut Rng, ty: GgmlType) -> Vec<u8> {
    let k = gguf::kernel(ty.name()).expect("a supported type");
    let mut bytes = rng.bytes(COLS * ROWS / k.block_elems * k.block_bytes);
    let params = k.decl.map_or(&[][..], |d| d.params);
    for block in bytes.chunks_exact_mut(k.block_bytes) {
        for p in params {
            match *p {
                ParamNode::F16(at) => {
                    let h = 0x2000u16 + rng.below(0x1000) as u16;
                    block[at..at + 2].copy_from_slice(&h.to_le_bytes());
                }
                ParamNode::E8m0Half(at) => block[at] = 120 + rng.below(16) as u8,
                _ => {}
            }
        }
    }
    if k.decl.is_none() {
        // F16 / BF16 / F32 elements: clear the top exponent bit of each 16 bits.
        bytes.iter_mut().skip(1).step_by(2).for_each(|b| *b &= 0xbf);
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("gguf");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    let out_bytes = COLS * ROWS * 4;
    support::memcpy(&mut group, out_bytes);
    let mut rng = Rng::new(19);
    let mut out: Vec<f32> = zeroed(COLS * ROWS);
    let mut out16: Vec<half::bf16> = zeroed(COLS * ROWS);
    let mut outf16: Vec<half::f16> = zeroed(COLS * ROWS);
    for ty in GgmlType::ALL.into_iter().filter(|t| t.is_supported()) {
        let data = blocks(&mut rng, ty);
        let bytes = one_tensor_file("w", ty, &[COLS as u64, ROWS as u64], &data);
        let g = Gguf::from_bytes(&bytes).expect("the file this bench wrote");
        let t = &g.tensors()[0];
        let all = [Backend::Generated, Backend::Jit, Backend::Auto];
        run(&mut group, &g, t, &mut out, data.len(), &all, "");
        let fast = [Backend::Generated, Backend::Jit];
        run(&mut group, &g, t, &mut out16, data.len(), &fast, "/bf16");
        run(&mut group, &g, t, &mut outf16, data.len(), &fast, "/f16");
    }
    group.finish();
}

/// Times `t` into `out` on each of `backends` (ids `TYPE/BACKEND{suffix}`).
fn run<T: Element>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    g: &Gguf<&[u8]>,
    t: &TensorInfo,
    out: &mut [T],
    src_bytes: usize,
    backends: &[Backend],
    suffix: &str,
) {
    group.throughput(Throughput::Bytes((src_bytes + size_of_val(out)) as u64));
    for &backend in backends {
        let opts = Options::new().with_backend(backend).with_threads(1);
        let id = format!(
            "{}/{backend}{suffix}",
            t.ggml_type().expect("supported").name()
        );
        group.bench_function(id, |b| {
            b.iter(|| g.dequantize(t, out, &opts).expect("a supported type"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
