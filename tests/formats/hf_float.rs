//! Float-weight checkpoints: FP8 block-scaled (`quant_method: "fp8"`),
//! compressed-tensors `float-quantized` and `nvfp4-pack-quantized`, ModelOpt NVFP4.
//! Every backend, f32/f16/bf16, 1 and 3 threads, against the references as
//! `scripts/hf_fp8.py` and `scripts/hf_ct_float.py` ran them (DeepSeek's
//! `weight_dequant` order in torch, compressed-tensors' own decompressors, ModelOpt's
//! formula); block maps and the two NVFP4 conventions under mutation; and the
//! checkpoints the reader refuses.

use std::fs;

use crate::support;
use dq::formats::hf::{
    Checkpoint, Dtype, FloatFormat, FloatScales, HfError, QuantConfig, QuantMethod, Scheme,
    reference,
};
use dq::{Backend, Options};
use half::{bf16, f16};
use support::hf::{DOWN, Tensor, UP, copy_case, expected, fixtures, read_tensors, write_tensors};

/// A fixture, its format and scale dtype, and its linears `(prefix, N, K, [bn, bk])`.
type Case = (
    &'static str,
    FloatFormat,
    Dtype,
    &'static [(&'static str, usize, usize, [usize; 2])],
);

const FP8: FloatFormat = FloatFormat::Fp8;
const CT: FloatFormat = FloatFormat::CtFp8;

#[rustfmt::skip]
const CASES: &[Case] = &[
    // [128, 128] blocks with partial blocks on both edges (N = 130, K = 136).
    ("fp8-block128-f32", FP8, Dtype::F32, &[(UP, 130, 136, [128, 128])]),
    ("fp8-block16x32-bf16", FP8, Dtype::BF16, &[(UP, 40, 70, [16, 32]), (DOWN, 24, 64, [16, 32])]),
    ("fp8-block32-e8m0", FP8, Dtype::F8_E8M0, &[(UP, 50, 45, [32, 32])]),
    ("ct-fp8-tensor", CT, Dtype::BF16, &[(UP, 24, 40, [24, 40])]),
    ("ct-fp8-channel", CT, Dtype::F32, &[(UP, 20, 36, [1, 36]), (DOWN, 12, 20, [1, 20])]),
    ("ct-fp8-group", CT, Dtype::BF16, &[(UP, 10, 64, [1, 16])]),
    ("ct-fp8-block", CT, Dtype::F32, &[(UP, 40, 96, [16, 32])]),
    ("ct-nvfp4", FloatFormat::CtNvfp4, Dtype::F8_E4M3, &[(UP, 20, 64, [1, 16]), (DOWN, 8, 32, [1, 16])]),
    ("modelopt-nvfp4", FloatFormat::ModelOptNvfp4, Dtype::F8_E4M3, &[(UP, 12, 48, [1, 16])]),
];

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Reference, Backend::Generated, Backend::Auto];
    if cfg!(feature = "jit") {
        b.push(Backend::Jit);
    }
    b
}

/// `out` through `backend` on `threads` threads, as bit patterns.
fn run<T: dq::formats::Element>(
    l: &dq::formats::hf::QuantLinear<'_>,
    backend: Backend,
    threads: usize,
    bits: impl Fn(T) -> u32,
) -> Vec<u32> {
    let mut out = vec![T::default(); l.n() * l.k()];
    let opts = Options::new().with_backend(backend).with_threads(threads);
    l.dequantize(&mut out, &opts)
        .unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    out.into_iter().map(bits).collect()
}

fn first_difference(got: &[u32], want: &[u32], k: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element [{}, {}] is 0x{:08x}, the reference gives 0x{:08x}",
            i / k,
            i % k,
            got[i],
            want[i]
        );
    }
}

#[test]
fn every_float_linear_on_every_backend_equals_its_reference() {
    for &(case, format, scale_dtype, linears) in CASES {
        let path = fixtures().join(case);
        let ckpt = Checkpoint::open(&path).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(ckpt.linears().count(), linears.len(), "{case}");
        assert!(ckpt.others().any(|t| t.name() == "model.norm.weight"));
        assert!(ckpt.others().all(|t| !t.name().contains("weight_scale")));
        for &(prefix, n, k, [bn, bk]) in linears {
            let l = ckpt.linear(prefix).unwrap();
            let what = format!("{case} {prefix}");
            let scheme = Scheme::Float {
                format,
                block_n: bn as u32,
                block_k: bk as u32,
            };
            assert_eq!(l.scheme(), scheme, "{what}");
            assert_eq!((l.n(), l.k(), l.groups()), (n, k, k.div_ceil(bk)), "{what}");
            assert_eq!(l.scales().dtype(), scale_dtype, "{what}");
            let want = expected(&path, prefix);
            let f32s: Vec<u32> = reference::dequantize_f32(&l)
                .iter()
                .map(|y| y.to_bits())
                .collect();
            first_difference(&f32s, &want, k, &format!("{what} reference"));
            let want16 = |round: fn(f32) -> u16| -> Vec<u32> {
                want.iter()
                    .map(|&w| u32::from(round(f32::from_bits(w))))
                    .collect()
            };
            let (want_f16, want_bf16) = (
                want16(|y| f16::from_f32(y).to_bits()),
                want16(|y| bf16::from_f32(y).to_bits()),
            );
            for backend in backends() {
                for threads in [1, 3] {
                    let at = format!("{what} {backend:?} {threads} thread(s)");
                    let got = run::<f32>(&l, backend, threads, f32::to_bits);
                    first_difference(&got, &want, k, &format!("{at} f32"));
                    let got = run::<f16>(&l, backend, threads, |h| u32::from(h.to_bits()));
                    first_difference(&got, &want_f16, k, &format!("{at} f16"));
                    let got = run::<bf16>(&l, backend, threads, |h| u32::from(h.to_bits()));
                    first_difference(&got, &want_bf16, k, &format!("{at} bf16"));
                }
            }
        }
    }
}

#[test]
fn configs_are_read_as_written() {
    let config = |case: &str| {
        *Checkpoint::open(fixtures().join(case))
            .unwrap()
            .config()
            .unwrap()
    };
    let fp8 = config("fp8-block16x32-bf16");
    assert_eq!(fp8, QuantConfig::Fp8 { block: [16, 32] });
    assert_eq!(fp8.method(), QuantMethod::Fp8);
    let ct = |scales| QuantConfig::CtFp8 { scales };
    assert_eq!(config("ct-fp8-tensor"), ct(FloatScales::Tensor));
    assert_eq!(config("ct-fp8-channel"), ct(FloatScales::Channel));
    assert_eq!(config("ct-fp8-group"), ct(FloatScales::Group(16)));
    assert_eq!(config("ct-fp8-block"), ct(FloatScales::Block([16, 32])));
    assert_eq!(config("ct-nvfp4"), QuantConfig::CtNvfp4);
    assert_eq!(config("ct-nvfp4").method(), QuantMethod::CompressedTensors);
    assert_eq!(config("modelopt-nvfp4"), QuantConfig::ModelOptNvfp4);
    assert_eq!(config("modelopt-nvfp4").method(), QuantMethod::ModelOpt);
}

/// The same bytes read with the other NVFP4 convention (compressed-tensors'
/// global scale divides, ModelOpt's multiplies) must not give the reference: a
/// swapped convention fails here.
#[test]
fn the_two_nvfp4_conventions_are_not_interchangeable() {
    for (case, to_other) in [("ct-nvfp4", true), ("modelopt-nvfp4", false)] {
        let dir = copy_case(case);
        let file = dir.path().join("model.safetensors");
        let (mut tensors, metadata) = read_tensors(&file);
        let renames: &[(&str, &str)] = if to_other {
            &[
                ("weight_packed", "weight"),
                ("weight_global_scale", "weight_scale_2"),
            ]
        } else {
            &[
                ("weight_scale_2", "weight_global_scale"),
                ("weight", "weight_packed"),
            ]
        };
        for t in tensors
            .iter_mut()
            .filter(|t| t.0.starts_with("model.layers."))
        {
            for (from, to) in renames {
                if let Some(prefix) = t.0.strip_suffix(&format!(".{from}")) {
                    t.0 = format!("{prefix}.{to}");
                    break;
                }
            }
        }
        write_tensors(&file, &tensors, metadata);
        let other = if to_other {
            r#"{"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}"#
        } else {
            r#"{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "symmetric": true, "strategy": "tensor_group", "group_size": 16}}}}"#
        };
        let config = format!(r#"{{"quantization_config": {other}}}"#);
        fs::write(dir.path().join("config.json"), config).unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let l = ckpt.linear(UP).unwrap();
        let want = expected(&fixtures().join(case), UP);
        for backend in backends() {
            let got = run::<f32>(&l, backend, 1, f32::to_bits);
            let same = got.iter().zip(&want).filter(|(g, w)| g == w).count();
            // Only the zeros (and codes whose scale ratio happens to be 1) agree.
            assert!(
                same < want.len() / 4,
                "{case} {backend:?}: {same} of {} agree",
                want.len()
            );
        }
    }
}

/// ModelOpt's e2m1 table holds +0.0 for code 8 (OCP e2m1: -0.0): with a positive
/// scale its code-8 outputs are +0.0 on every backend, compressed-tensors' -0.0.
#[test]
fn modelopt_code_8_is_a_positive_zero() {
    for (case, field, want) in [
        ("modelopt-nvfp4", "weight", 0u32),
        ("ct-nvfp4", "weight_packed", 0x8000_0000),
    ] {
        let ckpt = Checkpoint::open(fixtures().join(case)).unwrap();
        let l = ckpt.linear(UP).unwrap();
        let codes = ckpt
            .tensor(&format!("{UP}.{field}"))
            .unwrap()
            .data()
            .to_vec();
        let eights: Vec<usize> = (0..2 * codes.len())
            .filter(|&i| (codes[i / 2] >> (4 * (i % 2))) & 15 == 8)
            .collect();
        assert!(eights.len() > 8, "{case}: code 8 occurs");
        for backend in backends() {
            let got = run::<f32>(&l, backend, 2, f32::to_bits);
            for &i in &eights {
                assert_eq!(got[i], want, "{case} {backend:?}: element {i}");
            }
        }
    }
}

/// Doubling the scale of the last (partial) block changes exactly that block's
/// elements, on every backend: the block map is `(n / bn, k / bk)`, not transposed,
/// not shifted.
#[test]
fn a_scale_moves_exactly_its_block() {
    let dir = copy_case("fp8-block128-f32");
    let file = dir.path().join("model.safetensors");
    let (mut tensors, metadata) = read_tensors(&file);
    let s = tensors
        .iter_mut()
        .find(|t| t.0 == format!("{UP}.weight_scale_inv"))
        .unwrap();
    assert_eq!(s.2, [2, 2]);
    // Block (1, 0): rows 128..130, inputs 0..128.
    let v = f32::from_le_bytes(s.3[8..12].try_into().unwrap());
    s.3[8..12].copy_from_slice(&(2.0 * v).to_le_bytes());
    write_tensors(&file, &tensors, metadata);
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let before = expected(&fixtures().join("fp8-block128-f32"), UP);
    for backend in backends() {
        let got = run::<f32>(&l, backend, 2, f32::to_bits);
        for (i, (&g, &b)) in got.iter().zip(&before).enumerate() {
            let (n, k) = (i / 136, i % 136);
            let b = f32::from_bits(b);
            let want = if n >= 128 && k < 128 { 2.0 * b } else { b };
            assert_eq!(g, want.to_bits(), "{backend:?} [{n}, {k}]");
        }
    }
}

/// Edits a copy of `case` and opens it.
fn open_edited(
    case: &str,
    tensors_edit: impl FnOnce(&mut Vec<Tensor>),
    config_edit: impl FnOnce(&mut serde_json::Value),
) -> Result<Checkpoint, HfError> {
    let dir = copy_case(case);
    let file = dir.path().join("model.safetensors");
    let (mut tensors, metadata) = read_tensors(&file);
    tensors_edit(&mut tensors);
    write_tensors(&file, &tensors, metadata);
    let config = dir.path().join("config.json");
    let mut value: serde_json::Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
    config_edit(&mut value["quantization_config"]);
    fs::write(&config, value.to_string()).unwrap();
    Checkpoint::open(dir.path())
}

fn err(r: Result<Checkpoint, HfError>) -> HfError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.is_empty() && !text.contains('\n'), "one line: {text}");
            e
        }
    }
}

#[test]
fn malformed_fp8_checkpoints_are_one_line_errors() {
    let case = "fp8-block128-f32";
    let scale = format!("{UP}.weight_scale_inv");
    // Scales that do not cover the weight: one block row short.
    let short = |t: &mut Vec<Tensor>| {
        let s = t.iter_mut().find(|x| x.0 == scale).unwrap();
        s.2 = vec![1, 2];
        s.3.truncate(8);
    };
    match err(open_edited(case, short, |_| {})) {
        HfError::WrongShape {
            tensor,
            expected,
            got,
        } => assert_eq!(
            (tensor, expected, got),
            (scale.clone(), vec![2, 2], vec![1, 2])
        ),
        e => panic!("{e}"),
    }
    // A weight that is not F8_E4M3.
    let wrong = |t: &mut Vec<Tensor>| {
        let w = t
            .iter_mut()
            .find(|x| x.0 == format!("{UP}.weight"))
            .unwrap();
        w.1 = Dtype::U8;
    };
    assert!(matches!(
        err(open_edited(case, wrong, |_| {})),
        HfError::WrongDtype { got: Dtype::U8, .. }
    ));
    // f16 scales are not a format any release writes.
    let f16_scales = |t: &mut Vec<Tensor>| {
        let s = t.iter_mut().find(|x| x.0 == scale).unwrap();
        s.1 = Dtype::F16;
        s.3.truncate(8);
    };
    assert!(matches!(
        err(open_edited(case, f16_scales, |_| {})),
        HfError::WrongDtype {
            got: Dtype::F16,
            ..
        }
    ));
    // An unknown `fmt`, and block sizes that are not two positive sizes.
    match err(open_edited(case, |_| {}, |q| q["fmt"] = "e5m2".into())) {
        HfError::UnsupportedConfig { field: "fmt", .. } => {}
        e => panic!("{e}"),
    }
    for bad in [
        serde_json::json!([128]),
        serde_json::json!([0, 128]),
        serde_json::json!([128, -1]),
        serde_json::json!("128x128"),
    ] {
        let set = move |q: &mut serde_json::Value| q["weight_block_size"] = bad;
        match err(open_edited(case, |_| {}, set)) {
            HfError::InvalidConfigField {
                field: "weight_block_size",
                ..
            } => {}
            e => panic!("{e}"),
        }
    }
    // compressed-tensors float weights dq does not read: act-order, asymmetric,
    // NVFP4 with another group size.
    let w = |q: &mut serde_json::Value| q["config_groups"]["group_0"]["weights"].clone();
    for (case, key, value) in [
        ("ct-fp8-group", "actorder", serde_json::json!("group")),
        ("ct-fp8-channel", "symmetric", serde_json::json!(false)),
        ("ct-nvfp4", "group_size", serde_json::json!(32)),
    ] {
        let set = move |q: &mut serde_json::Value| {
            let mut weights = w(q);
            weights[key] = value;
            q["config_groups"]["group_0"]["weights"] = weights;
        };
        match err(open_edited(case, |_| {}, set)) {
            HfError::UnsupportedConfig { field, .. } => assert_eq!(field, key, "{case}"),
            e => panic!("{case}: {e}"),
        }
    }
    // NVFP4 scales that do not cover the weight, and a global scale of two values.
    let short = |t: &mut Vec<Tensor>| {
        let s = t
            .iter_mut()
            .find(|x| x.0 == format!("{UP}.weight_scale"))
            .unwrap();
        s.2 = vec![20, 3];
        s.3.truncate(60);
    };
    assert!(matches!(
        err(open_edited("ct-nvfp4", short, |_| {})),
        HfError::WrongShape { .. }
    ));
    let two = |t: &mut Vec<Tensor>| {
        let g = t
            .iter_mut()
            .find(|x| x.0 == format!("{UP}.weight_global_scale"))
            .unwrap();
        g.2 = vec![2];
        g.3.extend_from_slice(&1f32.to_le_bytes());
    };
    assert!(matches!(
        err(open_edited("ct-nvfp4", two, |_| {})),
        HfError::WrongShape { .. }
    ));
    let missing = |q: &mut serde_json::Value| {
        q.as_object_mut().unwrap().remove("weight_block_size");
    };
    assert!(matches!(
        err(open_edited(case, |_| {}, missing)),
        HfError::MissingConfigField {
            field: "weight_block_size"
        }
    ));
}
