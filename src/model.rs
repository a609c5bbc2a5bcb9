//! The main job: dequantize every weight tensor of a quantized decoder model, as a
//! model loader does, with each backend, and report what it cost.
//!
//! Weights are synthetic (deterministic from a seed: [`Case::generate`]) but shaped
//! and packed exactly as real checkpoints are: linear weights are
//! `[out_features, in_features]`, int4 groups run along the input dimension
//! (`group_shape = [1, g]`), two 4-bit values per byte low nibble first, scales
//! `[out, ceil(in / g)]` in the dst dtype, and int8 weights carry one f32 scale per
//! output channel.

use std::time::Instant;

use crate::case::{Case, OwnedTensor};
use crate::kernel::Kernel;
use crate::{Backend, DType, DynamicDequantize, Op, Plan, Result, TensorDesc};

/// One weight tensor of a layer: its name and `[out_features, in_features]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    /// Name inside a decoder layer (`q_proj`, ...).
    pub name: &'static str,
    /// Output features (rows).
    pub out: usize,
    /// Input features (columns, the quantization-group direction).
    pub inp: usize,
}

/// A model preset: the weights of one decoder layer and the layer count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The name used by `--preset`.
    pub name: &'static str,
    /// What it models.
    pub about: &'static str,
    /// Decoder layers in the full model.
    pub layers: usize,
    /// The linear weights of one layer.
    pub weights: &'static [Weight],
}

const fn w(name: &'static str, out: usize, inp: usize) -> Weight {
    Weight { name, out, inp }
}

/// The built-in presets.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "llama2-7b",
        about: "Llama-2-7B: hidden 4096, MLP 11008, 32 heads, 32 layers",
        layers: 32,
        weights: &[
            w("q_proj", 4096, 4096),
            w("k_proj", 4096, 4096),
            w("v_proj", 4096, 4096),
            w("o_proj", 4096, 4096),
            w("gate_proj", 11008, 4096),
            w("up_proj", 11008, 4096),
            w("down_proj", 4096, 11008),
        ],
    },
    Preset {
        name: "llama-1b",
        about: "Llama-3.2-1B: hidden 2048, MLP 8192, 32 heads / 8 KV heads of 64, 16 layers",
        layers: 16,
        weights: &[
            w("q_proj", 2048, 2048),
            w("k_proj", 512, 2048),
            w("v_proj", 512, 2048),
            w("o_proj", 2048, 2048),
            w("gate_proj", 8192, 2048),
            w("up_proj", 8192, 2048),
            w("down_proj", 2048, 8192),
        ],
    },
    Preset {
        name: "tiny",
        about: "a toy decoder for tests: hidden 256, MLP 688 (not a multiple of 128), 2 layers",
        layers: 2,
        weights: &[
            w("q_proj", 256, 256),
            w("k_proj", 64, 256),
            w("v_proj", 64, 256),
            w("o_proj", 256, 256),
            w("gate_proj", 688, 256),
            w("up_proj", 688, 256),
            w("down_proj", 256, 688),
        ],
    },
];

/// Finds a preset by name.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// A quantization scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// u4 weights with u4 zero points per group, to bf16 (AWQ/GPTQ-style asymmetric).
    U4Bf16,
    /// u4 weights with u4 zero points per group, to f16.
    U4F16,
    /// s4 symmetric per group, to bf16.
    S4Bf16,
    /// s4 symmetric per group, to f16.
    S4F16,
    /// s8 per output channel, symmetric, to f32.
    S8F32,
}

impl Scheme {
    /// Every scheme, `--scheme` order.
    pub const ALL: [Scheme; 5] = [
        Scheme::U4Bf16,
        Scheme::U4F16,
        Scheme::S4Bf16,
        Scheme::S4F16,
        Scheme::S8F32,
    ];

    /// The `--scheme` spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::U4Bf16 => "u4-bf16",
            Scheme::U4F16 => "u4-f16",
            Scheme::S4Bf16 => "s4-bf16",
            Scheme::S4F16 => "s4-f16",
            Scheme::S8F32 => "s8-f32",
        }
    }

    /// Parses the `--scheme` spelling.
    pub fn parse(s: &str) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|x| x.name() == s)
    }

    /// (src, zero points, dst) dtypes.
    pub const fn dtypes(self) -> (DType, Option<DType>, DType) {
        match self {
            Scheme::U4Bf16 => (DType::U4, Some(DType::U4), DType::BF16),
            Scheme::U4F16 => (DType::U4, Some(DType::U4), DType::F16),
            Scheme::S4Bf16 => (DType::S4, None, DType::BF16),
            Scheme::S4F16 => (DType::S4, None, DType::F16),
            Scheme::S8F32 => (DType::S8, None, DType::F32),
        }
    }

    /// True for the per-group int4 schemes.
    pub const fn grouped(self) -> bool {
        !matches!(self, Scheme::S8F32)
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The model.
    pub preset: &'static Preset,
    /// The quantization scheme.
    pub scheme: Scheme,
    /// Group size along the input dimension (int4 schemes).
    pub group: usize,
    /// Layers to load (at most the preset's count is not enforced: layers repeat).
    pub layers: usize,
    /// Backends to run, in order; the first is the one timed for the headline.
    pub backends: Vec<Backend>,
    /// Worker threads per call.
    pub threads: usize,
    /// Compare every backend's output bit for bit (adds the reference when absent).
    pub verify: bool,
    /// Seed of the synthetic weights.
    pub seed: u64,
}

/// What one backend did over the whole model.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct BackendReport {
    /// Backend name.
    pub backend: String,
    /// True when the backend chosen (explicitly, not `auto`) compiles kernels: the
    /// counters below are its own (not in the JSON).
    #[serde(skip)]
    pub compiles: bool,
    /// JIT kernels compiled during this run.
    pub kernels_compiled: u64,
    /// JIT kernels taken from the cache during this run.
    pub kernels_reused: u64,
    /// Time spent compiling kernels, milliseconds.
    pub compile_ms: f64,
    /// Time spent dequantizing (excludes compile and data generation), seconds.
    pub dequant_s: f64,
    /// (src + dst bytes) / dequant_s, in GB/s (1e9 bytes).
    pub gbps: f64,
}

/// The result of a model run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ModelReport {
    /// Preset name.
    pub preset: String,
    /// Scheme name.
    pub scheme: String,
    /// Group size (0 for per-channel).
    pub group: usize,
    /// Layers loaded.
    pub layers: usize,
    /// Weight tensors dequantized (per backend).
    pub tensors: usize,
    /// Elements dequantized (per backend).
    pub elements: u64,
    /// Bytes read (src, scales, zps) per backend.
    pub src_bytes: u64,
    /// Bytes written per backend.
    pub dst_bytes: u64,
    /// Threads per call.
    pub threads: usize,
    /// One entry per backend run.
    pub backends: Vec<BackendReport>,
    /// `Some(true)` when verified and every backend agreed bit for bit.
    pub verified: Option<bool>,
    /// Tensors on which some backend differed from the first (empty when verified).
    pub mismatches: Vec<String>,
}

impl ModelConfig {
    /// The call for one weight, with synthetic data from the seed and the tensor's
    /// position in the model.
    fn case(&self, wt: &Weight, index: u64) -> Result<Case> {
        let (s, z, d) = self.scheme.dtypes();
        let shape = [wt.out, wt.inp];
        let (op, sshape): (Op, Vec<usize>) = if self.scheme.grouped() {
            let g = self.group as i64;
            // A zero group is left to validation, which names it.
            let cols = wt.inp.div_ceil(self.group.max(1));
            (
                DynamicDequantize::per_group(vec![1, g]).into(),
                vec![wt.out, cols],
            )
        } else {
            (DynamicDequantize::per_channel(0).into(), vec![wt.out])
        };
        Case::generate(
            op,
            TensorDesc::new(s, &shape),
            Some(TensorDesc::new(d, &sshape)),
            z.map(|z| TensorDesc::new(z, &sshape)),
            TensorDesc::new(d, &shape),
            self.seed ^ index.wrapping_mul(0x2545_f491_4f6c_dd1d),
        )
    }
}

/// Runs the model through every configured backend.
///
/// `progress(done, total, name)` is called after each tensor.
///
/// # Errors
/// A backend that is unavailable or refuses a tensor
/// ([`Error::BackendUnavailable`](crate::Error::BackendUnavailable)), or a validation
/// error for a bad group size.
pub fn run(cfg: &ModelConfig, mut progress: impl FnMut(usize, usize, &str)) -> Result<ModelReport> {
    let mut backends = cfg.backends.clone();
    if cfg.verify && !backends.contains(&Backend::Reference) {
        backends.push(Backend::Reference);
    }
    let table = crate::backends();
    let weights: Vec<(usize, &Weight)> = (0..cfg.layers)
        .flat_map(|l| cfg.preset.weights.iter().map(move |w| (l, w)))
        .collect();
    let mut rep = ModelReport {
        preset: cfg.preset.name.into(),
        scheme: cfg.scheme.name().into(),
        group: if cfg.scheme.grouped() { cfg.group } else { 0 },
        layers: cfg.layers,
        threads: cfg.threads,
        backends: backends
            .iter()
            .map(|&b| BackendReport {
                backend: b.name().into(),
                compiles: table.get(b).is_some_and(|k| k.stats().is_some()),
                ..Default::default()
            })
            .collect(),
        verified: cfg.verify.then_some(true),
        ..Default::default()
    };
    let mut outs: Vec<Vec<u8>> = vec![Vec::new(); backends.len()];
    for (i, (layer, wt)) in weights.iter().enumerate() {
        let case = cfg.case(wt, i as u64)?;
        let plan = case.plan()?;
        let dst_bytes = case.dst.data.len();
        // Each tensor starts with the next backend in turn: the first to run
        // on a freshly made tensor pays for its data's way out of the cache
        // (measured: 15-25% of its time on Llama-2-7B's tensors).
        for k in (0..backends.len()).map(|j| (i + j) % backends.len()) {
            let b = backends[k];
            outs[k].resize(dst_bytes, 0);
            let kernel = select(table, b, &plan, &mut rep.backends[k])?;
            // Only the run is timed: not the data, the compile or the binding.
            let secs = case.with_job(&plan, &mut outs[k], |job| {
                let t = Instant::now();
                job.run_parallel(kernel, cfg.threads)
                    .map(|()| t.elapsed().as_secs_f64())
            })??;
            rep.backends[k].dequant_s += secs;
        }
        let name = format!("layers.{layer}.{}", wt.name);
        if cfg.verify && outs.iter().any(|o| o != &outs[0]) {
            rep.verified = Some(false);
            rep.mismatches.push(name.clone());
        }
        rep.tensors += 1;
        rep.elements += plan.numel() as u64;
        let input = |t: Option<&OwnedTensor>| t.map_or(0, |t| t.data.len());
        rep.src_bytes +=
            (case.src.data.len() + input(case.scales.as_ref()) + input(case.zps.as_ref())) as u64;
        rep.dst_bytes += dst_bytes as u64;
        progress(i + 1, weights.len(), &name);
    }
    for b in &mut rep.backends {
        b.gbps = (rep.src_bytes + rep.dst_bytes) as f64 / b.dequant_s.max(1e-12) / 1e9;
    }
    Ok(rep)
}

/// Selects `backend`'s kernel for `plan` (the JIT compiles it or takes it from its
/// cache), adding the JIT's compile work to its report.
fn select<'t>(
    table: &'t crate::Backends,
    backend: Backend,
    plan: &Plan,
    rep: &mut BackendReport,
) -> Result<&'t dyn Kernel> {
    // `select` runs `supports`, which is where a compiling backend (the JIT)
    // compiles or hits its cache: count from before it.
    let before: Vec<_> = (table.kernels().iter())
        .map(|k| (k.backend(), k.stats()))
        .collect();
    let kernel: &dyn Kernel = table.select(backend, plan)?;
    if let Some(after) = kernel.stats() {
        let before = (before.iter())
            .find(|(b, _)| *b == kernel.backend())
            .and_then(|&(_, s)| s)
            .unwrap_or_default();
        let compiled = after.compiled - before.compiled;
        rep.kernels_compiled += compiled;
        rep.kernels_reused += u64::from(compiled == 0);
        rep.compile_ms += (after.compile_ns - before.compile_ns) as f64 / 1e6;
    }
    Ok(kernel)
}
