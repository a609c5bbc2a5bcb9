//! HuggingFace linears of every family dq reads, 4096x11008, one thread: the
//! 4-bit integer ones (GPTQ v1 with its sorted `g_idx`, AWQ GEMM,
//! compressed-tensors; group 128) -> the bf16 `[N, K]` weight per backend
//! (generated, JIT, auto, reference), and -> f32 (`-f32`, generated and JIT);
//! the float and coded ones (`families`: FP8 block-scaled, compressed-tensors
//! and ModelOpt NVFP4, bitsandbytes NF4 double-quant and LLM.int8, MLX 4-bit,
//! gpt-oss MXFP4) -> bf16 and f32, generated and JIT. Beside them in the same
//! run, the yardsticks of each output size: memcpy (`memcpy`, `memcpy-f32`)
//! and the write roofline (`write:STRATEGY`, `write:STRATEGY-f32`: dst alone,
//! as `dq bench`'s rows).
//!
//! Metric: GB/s = (the linear's tensors' bytes + output bytes) / median time
//! per call (for the integer ones: packed weights + zero points + scales, the
//! definition of `benches/peers/checkpoints_numpy.py`, the NumPy peer). The
//! memcpy group copies a buffer of the output's size and counts read + write
//! bytes; the roofline counts dst bytes. Output and memcpy buffers are on huge pages (`dq::buffer`), as in
//! `dq bench`. The output is measured off a 64-byte cache line (as `zeroed`'s
//! large allocations come, 16 bytes past one) and, for generated and JIT, from a
//! line (`-line`), where the JIT writes whole lines with non-temporal stores.
//! `cargo bench --bench checkpoints [-- FILTER]`, e.g. `-- mxfp4`.

#[path = "checkpoints/families.rs"]
mod families;
mod support;

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dq::buffer::zeroed;
use dq::case::Rng;
use dq::formats::hf::Checkpoint;
use dq::{Backend, Options};
use half::bf16;
use safetensors::Dtype;
use safetensors::tensor::TensorView;

const K: usize = 4096;
const N: usize = 11008;
const GROUP: usize = 128;
const PREFIX: &str = "model.layers.0.mlp.up_proj";

/// A tensor of the linear: field name, dtype, shape.
type Field = (&'static str, Dtype, Vec<usize>);

/// Writes `tensors` (names after `prefix`: `.NAME`, or `_NAME` as written)
/// and `config` as a checkpoint in `dir`.
fn write_family(dir: &Path, config: &str, prefix: &str, tensors: &[families::Tensor]) {
    let views = tensors.iter().map(|(n, d, s, b)| {
        let name = match n.strip_prefix('_') {
            Some(_) => format!("{prefix}{n}"),
            None => format!("{prefix}.{n}"),
        };
        (name, TensorView::new(*d, s.clone(), b).unwrap())
    });
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
}

/// Writes a checkpoint of one random linear in `dir` with `config`.
fn write(dir: &Path, config: &str, tensors: Vec<Field>) {
    let mut rng = Rng::new(7);
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(f, d, shape)| {
            let count: usize = shape.iter().product();
            let bytes = match (f, d) {
                // f16 scales in [2^-10, 2^-7): positive normals.
                (_, Dtype::F16) => (0..count)
                    .flat_map(|_| (0x1800u16 + rng.below(0xc00) as u16).to_le_bytes())
                    .collect(),
                ("g_idx", _) => (0..count)
                    .flat_map(|k| ((k / GROUP) as i32).to_le_bytes())
                    .collect(),
                ("weight_shape", _) => [N as i64, K as i64]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                _ => rng.bytes(count * 4),
            };
            (format!("{PREFIX}.{f}"), d, shape, bytes)
        })
        .collect();
    let views = data
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()));
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
}

fn checkpoints(root: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let (g, cols) = (K / GROUP, N / 8);
    let gptq = r#"{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": false, "checkpoint_format": "gptq"}}"#;
    let awq = r#"{"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"}}"#;
    let ct = r#"{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}}}}}"#;
    let cases: Vec<(&str, &str, Vec<Field>)> = vec![
        (
            "gptq-v1",
            gptq,
            vec![
                ("qweight", Dtype::I32, vec![K / 8, N]),
                ("qzeros", Dtype::I32, vec![g, cols]),
                ("scales", Dtype::F16, vec![g, N]),
                ("g_idx", Dtype::I32, vec![K]),
            ],
        ),
        (
            "awq",
            awq,
            vec![
                ("qweight", Dtype::I32, vec![K, cols]),
                ("qzeros", Dtype::I32, vec![g, cols]),
                ("scales", Dtype::F16, vec![g, N]),
            ],
        ),
        (
            "ct-sym",
            ct,
            vec![
                ("weight_packed", Dtype::I32, vec![N, K / 8]),
                ("weight_scale", Dtype::F16, vec![N, g]),
                ("weight_shape", Dtype::I64, vec![2]),
            ],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, config, tensors)| {
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            write(&dir, config, tensors);
            (name, dir)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("checkpoints");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    let out_bytes = N * K * 2;
    support::memcpy(&mut group, out_bytes);
    support::write_roofline(&mut group, out_bytes, "");
    support::memcpy_as(&mut group, "memcpy-f32", 2 * out_bytes);
    support::write_roofline(&mut group, 2 * out_bytes, "-f32");
    let mut f32s: Vec<f32> = zeroed(N * K);
    for (name, dir) in checkpoints(root.path()) {
        let ckpt = Checkpoint::open(&dir).unwrap();
        let l = ckpt.linear(PREFIX).unwrap();
        let packed = l.packed().data().len() + l.scales().data().len();
        let src = packed + l.zeros().map_or(0, |z| z.data().len());
        group.throughput(Throughput::Bytes((src + out_bytes) as u64));
        // The output as `zeroed` gives it (16 bytes past a cache line here), and
        // from a line (`-line`: the JIT streams whole lines).
        let mut buf: Vec<bf16> = zeroed(N * K + 32);
        let line = (64 - buf.as_ptr() as usize % 64) % 64 / 2;
        for (suffix, at) in [("", 8 * usize::from(line == 0)), ("-line", line)] {
            let out = &mut buf[at..at + N * K];
            for backend in [
                Backend::Generated,
                Backend::Jit,
                Backend::Auto,
                Backend::Reference,
            ] {
                if suffix == "-line" && matches!(backend, Backend::Auto | Backend::Reference) {
                    continue;
                }
                let opts = Options::new().with_backend(backend).with_threads(1);
                let id = format!("{name}-bf16{suffix}/{}", backend.name());
                group.bench_function(id, |b| b.iter(|| l.dequantize(&mut *out, &opts).unwrap()));
            }
        }
        rows(&mut group, &l, name, "-f32", src, &mut f32s);
    }
    let mut bf16s: Vec<bf16> = zeroed(N * K);
    for (name, config, tensors) in families::all(N, K) {
        let dir = root.path().join(name);
        let prefix = if name == "mxfp4" { EXPERTS } else { PREFIX };
        write_family(&dir, &config, prefix, &tensors);
        let src: usize = tensors.iter().map(|t| t.3.len()).sum();
        drop(tensors);
        let ckpt = Checkpoint::open(&dir).unwrap();
        let l = ckpt.linears().next().expect("one linear");
        rows(&mut group, &l, name, "-bf16", src, &mut bf16s);
        rows(&mut group, &l, name, "-f32", src, &mut f32s);
    }
    group.finish();
}

/// gpt-oss' experts' down projection (MXFP4 tensors `P_blocks`, `P_scales`).
const EXPERTS: &str = "model.layers.0.mlp.experts.down_proj";

/// Times `l` into `out` on the generated backend and the JIT (ids
/// `NAME{suffix}/BACKEND`), `src` bytes read per call.
fn rows<T: dq::formats::Element>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    l: &dq::formats::hf::QuantLinear<'_>,
    name: &str,
    suffix: &str,
    src: usize,
    out: &mut [T],
) {
    group.throughput(Throughput::Bytes((src + size_of_val(out)) as u64));
    for backend in [Backend::Generated, Backend::Jit] {
        let opts = Options::new().with_backend(backend).with_threads(1);
        let id = format!("{name}{suffix}/{}", backend.name());
        group.bench_function(id, |b| b.iter(|| l.dequantize(&mut *out, &opts).unwrap()));
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
