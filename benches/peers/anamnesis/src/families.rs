//! The float and coded checkpoint families anamnesis also reads: DeepSeek FP8
//! (128 x 128 f32 block scales), ModelOpt NVFP4, bitsandbytes NF4 with double
//! quantization and LLM.int8, N x K as `benches/checkpoints.rs` makes them (the
//! same generator, `benches/checkpoints/families.rs`): one checkpoint folder each,
//! read by dq (`QuantLinear::dequantize` into a reused buffer) and the same
//! tensor bytes handed to anamnesis' `dequantize_fp8`, `dequantize_nvfp4`,
//! `dequantize_bnb4_double_quant`, `dequantize_bnb_int8`.
//!
//! Both write the `[N, K]` weight in the same order, and each formula is the
//! library's own (DeepSeek's `x · s`, ModelOpt's `e2m1 · (scale · scale_2)`,
//! bitsandbytes' nested absmax, `(q · SCB) / 127`), so the bits are compared
//! element for element. Left out: compressed-tensors NVFP4 (anamnesis reads
//! ModelOpt's convention only: it would multiply by the global scale that
//! compressed-tensors divides by), MLX and MXFP4 (anamnesis reads neither),
//! bitsandbytes FP4 (anamnesis writes -0.0 for code 8 on purpose, where
//! bitsandbytes writes +0.0).

use std::cell::RefCell;
use std::path::Path;

use dq::Options;
use dq::buffer::zeroed;
use dq::formats::hf::{Checkpoint, QuantLinear};
use half::bf16;
use safetensors::tensor::TensorView;

use crate::checkpoint_families as shared;
use crate::gguf::BACKENDS;
use crate::linears::Setup;
use crate::out::{Out, compare};
use crate::report::{Bits, Row};
use crate::timing::{Call, Memcpy, advise_huge, interleaved};

const PREFIX: &str = "model.layers.0.mlp.up_proj";

/// The families both read.
const BOTH: [&str; 4] = [
    "fp8-block128",
    "modelopt-nvfp4",
    "bnb-nf4-double",
    "bnb-int8",
];

/// The rows of every family both read, bf16 and f32, at 1 thread and at dq's
/// default; the checkpoints live under `dir` (removed by the caller).
pub fn rows(setup: &Setup, dir: &Path, memcpy: &mut Memcpy) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (name, config, tensors) in shared::all(setup.n, setup.k) {
        if !BOTH.contains(&name) {
            continue;
        }
        let sub = dir.join(name);
        write(&sub, &config, &tensors).map_err(|e| format!("{}: {e}", sub.display()))?;
        drop(tensors);
        let ckpt = Checkpoint::open(&sub).map_err(|e| e.to_string())?;
        let l = ckpt.linear(PREFIX).ok_or("the linear this program wrote")?;
        let mut threads = vec![1];
        if setup.threads > 1 {
            threads.push(setup.threads);
        }
        for &t in &threads {
            rows.push(row::<bf16>(name, &ckpt, &l, setup, t, memcpy));
            rows.push(row::<f32>(name, &ckpt, &l, setup, t, memcpy));
        }
    }
    Ok(rows)
}

fn write(dir: &Path, config: &str, tensors: &[shared::Tensor]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let views = tensors.iter().map(|(n, d, s, b)| {
        let v = TensorView::new(*d, s.clone(), b).expect("a consistent tensor");
        (format!("{PREFIX}.{n}"), v)
    });
    let bytes = safetensors::serialize(views, None).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("model.safetensors"), bytes)?;
    std::fs::write(dir.join("config.json"), config)
}

/// The bytes of tensor `field` of the linear.
fn tensor<'a>(ckpt: &'a Checkpoint, field: &str) -> &'a [u8] {
    ckpt.tensor(&format!("{PREFIX}.{field}"))
        .map_or(&[], |t| t.data())
}

fn f32_of(b: &[u8]) -> f32 {
    b.get(..4)
        .map_or(f32::NAN, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// bitsandbytes' `nested_offset` from the linear's quant state.
fn nested_offset(ckpt: &Checkpoint) -> Result<f32, String> {
    let state = tensor(ckpt, "weight.quant_state.bitsandbytes__nf4");
    let v: serde_json::Value = serde_json::from_slice(state).map_err(|e| e.to_string())?;
    v["nested_offset"]
        .as_f64()
        .map(|x| x as f32)
        .ok_or_else(|| "no nested_offset".into())
}

/// anamnesis' dequantization of family `name` in `ckpt`, a new `[N, K]` Vec.
fn amn<T: Out>(name: &str, ckpt: &Checkpoint, s: &Setup) -> Result<Vec<u8>, String> {
    let t = |f: &str| tensor(ckpt, f);
    let (n, k) = (s.n, s.k);
    match name {
        "fp8-block128" => anamnesis::dequantize_fp8::<T::Amn>(
            t("weight"),
            t("weight_scale_inv"),
            n,
            k,
            anamnesis::Dtype::F32,
        ),
        "modelopt-nvfp4" => anamnesis::dequantize_nvfp4::<T::Amn>(
            t("weight"),
            t("weight_scale"),
            f32_of(t("weight_scale_2")),
            n,
            k,
        ),
        "bnb-nf4-double" => anamnesis::dequantize_bnb4_double_quant::<T::Amn>(
            t("weight"),
            t("weight.absmax"),
            t("weight.quant_map"),
            t("weight.nested_absmax"),
            t("weight.nested_quant_map"),
            nested_offset(ckpt)?,
            n * k,
            64,
            256,
        ),
        _ => anamnesis::dequantize_bnb_int8::<T::Amn>(t("weight"), t("SCB"), n, k),
    }
    .map_err(|e| e.to_string())
}

fn row<T: Out>(
    name: &'static str,
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
        std::hint::black_box(amn::<T>(name, ckpt, s)?);
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
    let source: usize = ckpt
        .tensors()
        .filter(|t| t.name().starts_with(PREFIX) && !t.name().ends_with("input_scale"))
        .map(|t| t.data().len())
        .sum();
    Row {
        kind: "linear",
        case: format!("{name} {}x{}", s.n, s.k),
        dtype: T::NAME,
        amn_threads: 1,
        dq_threads: threads,
        bytes: (source + out_bytes) as u64,
        amn: amn_s,
        dq: BACKENDS
            .iter()
            .map(|b| b.name().to_owned())
            .zip(times)
            .collect(),
        memcpy: memcpy_s.map(|t| 2.0 * out_bytes as f64 / t / 1e9),
        bits: check::<T>(name, ckpt, l, s, threads, &mut ours.borrow_mut()),
    }
}

/// Each dq backend's `[N, K]` output against anamnesis' (the same order).
fn check<T: Out>(
    name: &str,
    ckpt: &Checkpoint,
    l: &QuantLinear<'_>,
    s: &Setup,
    threads: usize,
    ours: &mut [T],
) -> Bits {
    let Ok(theirs) = amn::<T>(name, ckpt, s) else {
        return Bits::Unchecked;
    };
    let mut ran = false;
    for b in BACKENDS {
        ours.fill(T::default());
        let opts = Options::new().with_backend(b).with_threads(threads);
        if l.dequantize(ours, &opts).is_err() {
            continue;
        }
        ran = true;
        if let Some(m) = compare(ours, &theirs, |i| i) {
            return Bits::Mismatch(format!("dq {b}: {m}"));
        }
    }
    if ran { Bits::Equal } else { Bits::Unchecked }
}
