//! GPTQ (v1, sorted `g_idx`) and AWQ (GEMM) 4-bit linears, K x N group G, as
//! `benches/checkpoints.rs` makes them: one checkpoint folder each, read by dq
//! (`Checkpoint::open`, `QuantLinear::dequantize` into a reused buffer) and the same
//! tensor bytes handed to anamnesis' `dequantize_gptq` / `dequantize_awq`.
//!
//! anamnesis returns a new Vec per call (it has no call into a caller's buffer),
//! so its times include allocating and first touching the output; and it writes
//! the GEMM-native `[K, N]` weight where dq writes `[N, K]` (the bits check
//! compares element (n, k) of each).

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use dq::Options;
use dq::buffer::zeroed;
use dq::case::Rng;
use dq::formats::hf::{Checkpoint, QuantLinear};
use half::bf16;
use safetensors::Dtype;
use safetensors::tensor::TensorView;

use crate::gguf::BACKENDS;
use crate::out::{Out, compare};
use crate::report::{Bits, Row};
use crate::timing::{Call, Memcpy, advise_huge, interleaved};

const PREFIX: &str = "model.layers.0.mlp.up_proj";

/// What the linear rows run on.
pub struct Setup {
    /// Input features.
    pub k: usize,
    /// Output features.
    pub n: usize,
    /// Input features per group.
    pub group: usize,
    /// Minimum time per row.
    pub min_time: Duration,
    /// Output buffers on huge pages.
    pub huge: bool,
    /// dq's default threads (available cores).
    pub threads: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Scheme {
    Gptq,
    Awq,
}

/// The GPTQ and AWQ rows, bf16 and f32, at 1 thread and at each tool's default;
/// the checkpoints live in a temporary folder under `dir`, removed at the end.
pub fn rows(setup: &Setup, dir: &Path, memcpy: &mut Memcpy) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for scheme in [Scheme::Gptq, Scheme::Awq] {
        let sub = dir.join(scheme.name());
        std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
        write(&sub, scheme, setup).map_err(|e| format!("{}: {e}", sub.display()))?;
        let ckpt = Checkpoint::open(&sub).map_err(|e| e.to_string())?;
        let l = ckpt.linear(PREFIX).ok_or("the linear this program wrote")?;
        let mut threads = vec![1];
        if setup.threads > 1 {
            threads.push(setup.threads);
        }
        for &t in &threads {
            rows.push(row::<bf16>(scheme, &ckpt, &l, setup, t, memcpy));
            rows.push(row::<f32>(scheme, &ckpt, &l, setup, t, memcpy));
        }
    }
    Ok(rows)
}

impl Scheme {
    fn name(self) -> &'static str {
        match self {
            Scheme::Gptq => "gptq",
            Scheme::Awq => "awq",
        }
    }

    fn config(self, group: usize) -> String {
        match self {
            Scheme::Gptq => format!(
                r#"{{"quantization_config": {{"quant_method": "gptq", "bits": 4, "group_size": {group}, "desc_act": false, "sym": false, "checkpoint_format": "gptq"}}}}"#
            ),
            Scheme::Awq => format!(
                r#"{{"quantization_config": {{"quant_method": "awq", "bits": 4, "group_size": {group}, "zero_point": true, "version": "gemm"}}}}"#
            ),
        }
    }

    /// The tensors: field, dtype, shape.
    fn fields(self, s: &Setup) -> Vec<(&'static str, Dtype, Vec<usize>)> {
        let (g, cols) = (s.k / s.group, s.n / 8);
        let qweight = match self {
            Scheme::Gptq => vec![s.k / 8, s.n],
            Scheme::Awq => vec![s.k, cols],
        };
        let mut f = vec![
            ("qweight", Dtype::I32, qweight),
            ("qzeros", Dtype::I32, vec![g, cols]),
            ("scales", Dtype::F16, vec![g, s.n]),
        ];
        if self == Scheme::Gptq {
            f.push(("g_idx", Dtype::I32, vec![s.k]));
        }
        f
    }
}

/// Writes `model.safetensors` (random words, f16 scales in [2^-10, 2^-7), sorted
/// `g_idx`) and `config.json` into `dir`.
fn write(dir: &Path, scheme: Scheme, s: &Setup) -> std::io::Result<()> {
    let mut rng = Rng::new(7);
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = scheme
        .fields(s)
        .into_iter()
        .map(|(f, d, shape)| {
            let count: usize = shape.iter().product();
            let bytes = match (f, d) {
                (_, Dtype::F16) => (0..count)
                    .flat_map(|_| (0x1800u16 + rng.below(0xc00) as u16).to_le_bytes())
                    .collect(),
                ("g_idx", _) => (0..count)
                    .flat_map(|k| ((k / s.group) as i32).to_le_bytes())
                    .collect(),
                _ => rng.bytes(count * 4),
            };
            (format!("{PREFIX}.{f}"), d, shape, bytes)
        })
        .collect();
    let views = data.iter().map(|(n, d, shape, b)| {
        let v = TensorView::new(*d, shape.clone(), b).expect("a consistent tensor");
        (n.clone(), v)
    });
    let bytes = safetensors::serialize(views, None).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("model.safetensors"), bytes)?;
    std::fs::write(dir.join("config.json"), scheme.config(s.group))
}

/// The bytes of tensor `field` of the linear.
fn tensor<'a>(ckpt: &'a Checkpoint, field: &str) -> &'a [u8] {
    ckpt.tensor(&format!("{PREFIX}.{field}"))
        .map_or(&[], |t| t.data())
}

/// anamnesis' dequantization of the linear in `ckpt`, a new `[K, N]` Vec.
fn amn<T: Out>(scheme: Scheme, ckpt: &Checkpoint, s: &Setup) -> Result<Vec<u8>, String> {
    let (qw, sc, qz) = (
        tensor(ckpt, "qweight"),
        tensor(ckpt, "scales"),
        tensor(ckpt, "qzeros"),
    );
    let f16 = anamnesis::Dtype::F16;
    match scheme {
        Scheme::Gptq => {
            let g_idx = Some(tensor(ckpt, "g_idx"));
            anamnesis::dequantize_gptq::<T::Amn>(qw, sc, qz, g_idx, s.k, s.n, s.group, 4, f16)
        }
        Scheme::Awq => anamnesis::dequantize_awq::<T::Amn>(qw, sc, qz, s.k, s.n, s.group, 4, f16),
    }
    .map_err(|e| e.to_string())
}

fn row<T: Out>(
    scheme: Scheme,
    ckpt: &Checkpoint,
    l: &QuantLinear<'_>,
    s: &Setup,
    threads: usize,
    memcpy: &mut Memcpy,
) -> Row {
    let out_bytes = s.n * s.k * size_of::<T>();
    let ours = RefCell::new(zeroed::<T>(s.n * s.k));
    advise_huge(&mut ours.borrow_mut(), s.huge);
    let mut calls: Vec<Call<'_>> = vec![Box::new(|| {
        std::hint::black_box(amn::<T>(scheme, ckpt, s)?);
        Ok(())
    })];
    for b in BACKENDS {
        let (opts, ours) = (Options::new().with_backend(b).with_threads(threads), &ours);
        calls.push(Box::new(move || {
            l.dequantize(&mut ours.borrow_mut(), &opts)
                .map_err(|e| e.to_string())
        }));
    }
    calls.push(memcpy.call(out_bytes));
    let mut times = interleaved(s.min_time, &mut calls);
    drop(calls);
    let memcpy_s = times.pop().expect("the memcpy call").ok();
    let amn_s = times.remove(0);
    let source = l.packed().data().len() + l.scales().data().len();
    let zeros = l.zeros().map_or(0, |z| z.data().len());
    Row {
        kind: "linear",
        case: format!("{} {}x{} g{}", scheme.name(), s.k, s.n, s.group),
        dtype: T::NAME,
        amn_threads: 1,
        dq_threads: threads,
        bytes: (source + zeros + out_bytes) as u64,
        amn: amn_s,
        dq: BACKENDS
            .iter()
            .map(|b| b.name().to_owned())
            .zip(times)
            .collect(),
        memcpy: memcpy_s.map(|t| 2.0 * out_bytes as f64 / t / 1e9),
        bits: check::<T>(scheme, ckpt, l, s, threads, &mut ours.borrow_mut()),
    }
}

/// Each dq backend's `[N, K]` output against anamnesis' `[K, N]` one.
fn check<T: Out>(
    scheme: Scheme,
    ckpt: &Checkpoint,
    l: &QuantLinear<'_>,
    s: &Setup,
    threads: usize,
    ours: &mut [T],
) -> Bits {
    let Ok(theirs) = amn::<T>(scheme, ckpt, s) else {
        return Bits::Unchecked;
    };
    let (k, n) = (s.k, s.n);
    let mut ran = false;
    for b in BACKENDS {
        ours.fill(T::default());
        let opts = Options::new().with_backend(b).with_threads(threads);
        if l.dequantize(ours, &opts).is_err() {
            continue;
        }
        ran = true;
        if let Some(m) = compare(ours, &theirs, |i| (i % k) * n + i / k) {
            return Bits::Mismatch(format!("dq {b}: {m}"));
        }
    }
    if ran { Bits::Equal } else { Bits::Unchecked }
}
