//! HuggingFace checkpoints: the reference dequantizers against the fixtures that
//! `scripts/make_hf_fixtures.py` made with the real packers and dequantizers, and the
//! reader's errors on malformed checkpoints (one clear error, no panic, bounded memory).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use dq::DType;
use dq::formats::hf::{
    Checkpoint, Dtype, GptqVersion, HfError, QuantConfig, QuantMethod, Scheme, reference,
};
use half::{bf16, f16};
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;

const UP: &str = "model.layers.0.mlp.up_proj";
const DOWN: &str = "model.layers.0.mlp.down_proj";
const Q: &str = "model.layers.0.self_attn.q_proj";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

/// A fixture: its folder (or file), scheme, and linears `(prefix, N, K, groups)`.
struct Case {
    path: &'static str,
    scheme: Scheme,
    act_order: bool,
    linears: &'static [(&'static str, usize, usize, usize)],
}

const V1_4: Scheme = Scheme::Gptq {
    bits: 4,
    version: GptqVersion::V1,
};
const V1_8: Scheme = Scheme::Gptq {
    bits: 8,
    version: GptqVersion::V1,
};
const V2_4: Scheme = Scheme::Gptq {
    bits: 4,
    version: GptqVersion::V2,
};
const V2_8: Scheme = Scheme::Gptq {
    bits: 8,
    version: GptqVersion::V2,
};
const CT4: Scheme = Scheme::CompressedTensors { bits: 4 };
const CT8: Scheme = Scheme::CompressedTensors { bits: 8 };

#[rustfmt::skip]
const CASES: &[Case] = &[
    // K = 96 with group 64: a short last group.
    Case { path: "gptq-v1-4bit-g64-asym", scheme: V1_4, act_order: false,
           linears: &[(UP, 32, 96, 2), (DOWN, 32, 64, 1)] },
    Case { path: "gptq-v1-4bit-perchannel-sym", scheme: V1_4, act_order: false,
           linears: &[(UP, 32, 64, 1)] },
    Case { path: "gptq-v1-4bit-g16-actorder-bf16", scheme: V1_4, act_order: true,
           linears: &[(UP, 32, 64, 4), (Q, 64, 32, 2)] },
    Case { path: "gptq-v1-8bit-g32-asym", scheme: V1_8, act_order: false,
           linears: &[(UP, 32, 64, 2)] },
    Case { path: "gptq-v2-4bit-g64-actorder", scheme: V2_4, act_order: true,
           linears: &[(UP, 32, 96, 2), (DOWN, 32, 64, 1)] },
    Case { path: "gptq-v2-8bit-perchannel-sym", scheme: V2_8, act_order: false,
           linears: &[(UP, 32, 32, 1)] },
    Case { path: "awq-4bit-g32", scheme: Scheme::Awq, act_order: false,
           linears: &[(UP, 32, 64, 2), (DOWN, 64, 32, 1)] },
    Case { path: "awq-4bit-g16-sharded", scheme: Scheme::Awq, act_order: false,
           linears: &[(UP, 32, 48, 3), (DOWN, 32, 32, 2), (Q, 64, 16, 1)] },
    Case { path: "ct-4bit-group-sym", scheme: CT4, act_order: false,
           linears: &[(UP, 8, 64, 2), (DOWN, 6, 96, 3)] },
    // K = 100: the packed rows end in a padded word.
    Case { path: "ct-4bit-channel-asym", scheme: CT4, act_order: false,
           linears: &[(UP, 12, 100, 1)] },
    Case { path: "ct-8bit-group-asym", scheme: CT8, act_order: false,
           linears: &[(UP, 6, 48, 3), (DOWN, 4, 32, 2)] },
    Case { path: "ct-8bit-channel-sym", scheme: CT8, act_order: false,
           linears: &[(UP, 5, 36, 1)] },
    Case { path: "single-file/gptq-v2.safetensors", scheme: V2_4, act_order: false,
           linears: &[(Q, 32, 64, 4)] },
];

/// `expected/<prefix>.bin` beside the checkpoint: raw little-endian f32 `[N, K]`.
fn expected(case_path: &Path, prefix: &str) -> Vec<u32> {
    let dir = if case_path.is_dir() {
        case_path
    } else {
        case_path.parent().unwrap()
    };
    let bytes = fs::read(dir.join("expected").join(format!("{prefix}.bin"))).unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn expected_names(case_path: &Path) -> BTreeSet<String> {
    let dir = if case_path.is_dir() {
        case_path
    } else {
        case_path.parent().unwrap()
    };
    fs::read_dir(dir.join("expected"))
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".bin").unwrap().to_owned()
        })
        .collect()
}

#[test]
fn every_fixture_linear_equals_the_reference_implementations_bit_for_bit() {
    for case in CASES {
        let path = fixtures().join(case.path);
        let ckpt = Checkpoint::open(&path).unwrap_or_else(|e| panic!("{}: {e}", case.path));
        let names: BTreeSet<String> = ckpt.linears().map(|l| l.name().to_owned()).collect();
        let table: BTreeSet<String> = case.linears.iter().map(|l| l.0.to_owned()).collect();
        assert_eq!(names, table, "{}", case.path);
        assert_eq!(names, expected_names(&path), "{}", case.path);
        for &(prefix, n, k, groups) in case.linears {
            let l = ckpt.linear(prefix).unwrap();
            let what = format!("{} {prefix}", case.path);
            assert_eq!(l.scheme(), case.scheme, "{what}");
            assert_eq!((l.n(), l.k(), l.groups()), (n, k, groups), "{what}");
            let shuffled = l.g_idx().is_some_and(|g| !g.is_sorted());
            assert_eq!(shuffled, case.act_order && groups > 1, "{what}");
            let want = expected(&path, prefix);
            let got: Vec<u32> = reference::dequantize_f32(&l)
                .iter()
                .map(|y| y.to_bits())
                .collect();
            assert_eq!(got.len(), n * k, "{what}");
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{what}: element [{}, {}] is {} (0x{:08x}), the reference gives {} (0x{:08x})",
                    i / k,
                    i % k,
                    f32::from_bits(got[i]),
                    got[i],
                    f32::from_bits(want[i]),
                    want[i]
                );
            }
            assert_eq!(got, want, "{what}");
            check_16_bit_outputs(&l, &want, &what);
        }
    }
}

/// f16/bf16 outputs are the f32 values rounded once, nearest-even.
fn check_16_bit_outputs(l: &dq::formats::hf::QuantLinear<'_>, want: &[u32], what: &str) {
    let mut f32_out = vec![0u8; want.len() * 4];
    reference::dequantize_into(l, DType::F32, &mut f32_out).unwrap();
    let f32_bits: Vec<u32> = f32_out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f32_bits, want, "{what} f32 bytes");
    for dtype in [DType::F16, DType::BF16] {
        let mut out = vec![0u8; want.len() * 2];
        reference::dequantize_into(l, dtype, &mut out).unwrap();
        let got: Vec<u16> = out
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let rounded: Vec<u16> = want
            .iter()
            .map(|&w| {
                let y = f32::from_bits(w);
                if dtype == DType::F16 {
                    f16::from_f32(y).to_bits()
                } else {
                    bf16::from_f32(y).to_bits()
                }
            })
            .collect();
        assert_eq!(got, rounded, "{what} {dtype}");
    }
}

#[test]
fn configs_are_read_as_written() {
    let open = |p: &str| Checkpoint::open(fixtures().join(p)).unwrap();
    assert_eq!(
        open("gptq-v1-4bit-g16-actorder-bf16").config(),
        Some(&QuantConfig::Gptq {
            bits: 4,
            group_size: Some(16),
            desc_act: true,
            sym: false,
            version: GptqVersion::V1
        })
    );
    assert_eq!(
        open("gptq-v2-8bit-perchannel-sym").config(),
        Some(&QuantConfig::Gptq {
            bits: 8,
            group_size: None,
            desc_act: false,
            sym: true,
            version: GptqVersion::V2
        })
    );
    assert_eq!(
        open("awq-4bit-g16-sharded").config(),
        Some(&QuantConfig::Awq {
            group_size: Some(16)
        })
    );
    let ct = open("ct-4bit-channel-asym");
    assert_eq!(
        ct.config().map(QuantConfig::method),
        Some(QuantMethod::CompressedTensors)
    );
    assert_eq!(
        ct.config(),
        Some(&QuantConfig::CompressedTensors {
            bits: 4,
            strategy: dq::formats::hf::CtStrategy::Channel,
            symmetric: false
        })
    );
}

#[test]
fn other_tensors_are_listed_with_their_dtypes() {
    let ckpt = Checkpoint::open(fixtures().join("gptq-v1-4bit-g64-asym")).unwrap();
    let others: Vec<(String, Dtype, Vec<usize>)> = ckpt
        .others()
        .map(|t| (t.name().to_owned(), t.dtype(), t.shape().to_vec()))
        .collect();
    assert_eq!(
        others,
        [
            ("lm_head.weight".to_owned(), Dtype::F32, vec![3, 8]),
            (
                "model.embed_tokens.weight".to_owned(),
                Dtype::F16,
                vec![6, 8]
            ),
            (format!("{DOWN}.bias"), Dtype::F16, vec![32]),
            (format!("{UP}.bias"), Dtype::F16, vec![32]),
            ("model.norm.weight".to_owned(), Dtype::BF16, vec![8]),
        ]
    );
    // The sharded checkpoint spans both files, and its linears straddle them.
    let sharded = Checkpoint::open(fixtures().join("awq-4bit-g16-sharded")).unwrap();
    assert_eq!(sharded.files().count(), 2);
    assert_eq!(sharded.others().count(), 3);
    assert_eq!(sharded.tensors().count(), 3 + 3 * 3);
}

// ---------------------------------------------------------------------------
// Malformed checkpoints: one clear error each.

/// A tensor to write back: name, dtype, shape, bytes.
type Tensor = (String, Dtype, Vec<usize>, Vec<u8>);

fn read_tensors(path: &Path) -> (Vec<Tensor>, Option<HashMap<String, String>>) {
    let bytes = fs::read(path).unwrap();
    let (_, metadata) = SafeTensors::read_metadata(&bytes).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<Tensor> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    (tensors, metadata.metadata().clone())
}

fn write_tensors(path: &Path, tensors: &[Tensor], metadata: Option<HashMap<String, String>>) {
    let views = tensors
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()));
    fs::write(path, safetensors::serialize(views, metadata).unwrap()).unwrap();
}

/// A copy of fixture `case` in a temporary folder.
fn copy_case(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in fs::read_dir(fixtures().join(case)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
    }
    dir
}

/// Edits `model.safetensors` of a copy of `case` and opens it.
fn open_edited(case: &str, edit: impl FnOnce(&mut Vec<Tensor>)) -> Result<Checkpoint, HfError> {
    let dir = copy_case(case);
    let file = dir.path().join("model.safetensors");
    let (mut tensors, metadata) = read_tensors(&file);
    edit(&mut tensors);
    write_tensors(&file, &tensors, metadata);
    Checkpoint::open(dir.path())
}

/// An edit of a `quantization_config`.
type ConfigEdit = Box<dyn FnOnce(&mut serde_json::Value)>;

fn open_with_config(
    case: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Result<Checkpoint, HfError> {
    let dir = copy_case(case);
    let file = dir.path().join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    edit(&mut config["quantization_config"]);
    fs::write(&file, config.to_string()).unwrap();
    Checkpoint::open(dir.path())
}

fn remove(name: String) -> impl FnOnce(&mut Vec<Tensor>) {
    move |t| t.retain(|x| x.0 != name)
}

fn replace(name: String, dtype: Dtype, shape: Vec<usize>) -> impl FnOnce(&mut Vec<Tensor>) {
    move |t| {
        let x = t.iter_mut().find(|x| x.0 == name).unwrap();
        let size = shape.iter().product::<usize>() * if dtype == Dtype::F16 { 2 } else { 4 };
        *x = (name, dtype, shape, vec![0; size]);
    }
}

fn err<T>(r: Result<T, HfError>) -> HfError {
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
fn a_missing_tensor_is_named() {
    for (case, field) in [
        ("gptq-v1-4bit-g64-asym", "qzeros"),
        ("gptq-v1-4bit-g64-asym", "scales"),
        ("gptq-v1-4bit-g16-actorder-bf16", "g_idx"),
        ("awq-4bit-g32", "qzeros"),
        ("ct-4bit-channel-asym", "weight_zero_point"),
        ("ct-4bit-group-sym", "weight_scale"),
        ("ct-4bit-group-sym", "weight_shape"),
    ] {
        let tensor = format!("{UP}.{field}");
        match err(open_edited(case, remove(tensor.clone()))) {
            HfError::MissingTensor { linear, tensor: t } => {
                assert_eq!((linear.as_str(), &t), (UP, &tensor), "{case}");
            }
            e => panic!("{case} without {field}: {e}"),
        }
    }
    // Without its packed weight, the linear's zero points name what is missing.
    for (case, anchor) in [
        ("gptq-v2-4bit-g64-actorder", "qweight"),
        ("ct-8bit-group-asym", "weight_packed"),
    ] {
        match err(open_edited(case, remove(format!("{UP}.{anchor}")))) {
            HfError::MissingTensor { tensor, .. } => assert_eq!(tensor, format!("{UP}.{anchor}")),
            e => panic!("{case} without {anchor}: {e}"),
        }
    }
}

#[test]
fn wrong_shapes_and_dtypes_are_named() {
    let shape_err = |case: &str, field: &str, dtype: Dtype, shape: Vec<usize>| {
        err(open_edited(
            case,
            replace(format!("{UP}.{field}"), dtype, shape),
        ))
    };
    match shape_err("gptq-v1-4bit-g64-asym", "qzeros", Dtype::I32, vec![3, 4]) {
        HfError::WrongShape {
            tensor,
            expected,
            got,
        } => {
            assert_eq!(
                (tensor, expected, got),
                (format!("{UP}.qzeros"), vec![2, 4], vec![3, 4])
            );
        }
        e => panic!("{e}"),
    }
    match shape_err("gptq-v1-4bit-g64-asym", "scales", Dtype::I32, vec![2, 32]) {
        HfError::WrongDtype { tensor, got, .. } => {
            assert_eq!((tensor, got), (format!("{UP}.scales"), Dtype::I32))
        }
        e => panic!("{e}"),
    }
    match shape_err("awq-4bit-g32", "qweight", Dtype::I32, vec![64 * 4]) {
        HfError::WrongRank {
            tensor,
            expected: 2,
            ..
        } => assert_eq!(tensor, format!("{UP}.qweight")),
        e => panic!("{e}"),
    }
    // AWQ: K = 40 is not a multiple of the group size 32.
    match shape_err("awq-4bit-g32", "qweight", Dtype::I32, vec![40, 4]) {
        HfError::NotAMultiple {
            tensor,
            dim: 0,
            value: 40,
            multiple: 32,
        } => assert_eq!(tensor, format!("{UP}.qweight")),
        e => panic!("{e}"),
    }
    // GPTQ: N = 12 does not pack 8 to a word.
    match shape_err("gptq-v1-4bit-g64-asym", "qweight", Dtype::I32, vec![12, 12]) {
        HfError::NotAMultiple {
            dim: 1,
            value: 12,
            multiple: 8,
            ..
        } => {}
        e => panic!("{e}"),
    }
    match shape_err(
        "ct-4bit-channel-asym",
        "weight_packed",
        Dtype::I32,
        vec![12, 12],
    ) {
        HfError::WrongShape { expected, .. } => assert_eq!(expected, [12, 13]),
        e => panic!("{e}"),
    }
    match shape_err("ct-4bit-channel-asym", "weight_shape", Dtype::F16, vec![2]) {
        HfError::WrongDtype {
            got: Dtype::F16, ..
        } => {}
        e => panic!("{e}"),
    }
    // A g_idx entry past the last group, and a negative CT weight shape.
    let bad_g_idx = open_edited("gptq-v2-4bit-g64-actorder", |t| {
        let x = t.iter_mut().find(|x| x.0 == format!("{UP}.g_idx")).unwrap();
        x.3[4 * 5..4 * 6].copy_from_slice(&2i32.to_le_bytes());
    });
    match err(bad_g_idx) {
        HfError::GroupIndexOutOfRange {
            index: 5,
            value: 2,
            groups: 2,
            ..
        } => {}
        e => panic!("{e}"),
    }
    let negative = open_edited("ct-8bit-channel-sym", |t| {
        let x = t
            .iter_mut()
            .find(|x| x.0 == format!("{UP}.weight_shape"))
            .unwrap();
        x.3[..8].copy_from_slice(&(-5i64).to_le_bytes());
    });
    match err(negative) {
        HfError::InvalidWeightShape { value, .. } => assert_eq!(value, [-5, 36]),
        e => panic!("{e}"),
    }
}

#[test]
fn bad_configs_are_reported() {
    let dir = copy_case("awq-4bit-g32");
    fs::write(
        dir.path().join("config.json"),
        "{\"quantization_config\": {",
    )
    .unwrap();
    assert!(matches!(
        err(Checkpoint::open(dir.path())),
        HfError::Json {
            what: "config.json",
            ..
        }
    ));

    use serde_json::json;
    let cases: Vec<(&str, ConfigEdit)> = vec![
        (
            "gptq-v1-4bit-g64-asym",
            Box::new(|q| q["quant_method"] = json!("hqq")),
        ),
        (
            "gptq-v1-4bit-g64-asym",
            Box::new(|q| q["bits"] = json!("four")),
        ),
        (
            "gptq-v1-4bit-g64-asym",
            Box::new(|q| q["group_size"] = json!(0)),
        ),
        (
            "gptq-v1-4bit-g64-asym",
            Box::new(|q| {
                q.as_object_mut().unwrap().remove("bits");
            }),
        ),
        (
            "gptq-v1-4bit-g64-asym",
            Box::new(|q| q["checkpoint_format"] = json!("marlin")),
        ),
        ("awq-4bit-g32", Box::new(|q| q["version"] = json!("gemv"))),
        ("awq-4bit-g32", Box::new(|q| q["zero_point"] = json!(false))),
        (
            "ct-4bit-group-sym",
            Box::new(|q| q["config_groups"]["group_0"]["format"] = json!("float-quantized")),
        ),
        (
            "ct-4bit-group-sym",
            Box::new(|q| q["config_groups"]["group_0"]["weights"]["strategy"] = json!("tensor")),
        ),
        (
            "ct-4bit-group-sym",
            Box::new(|q| q["config_groups"]["group_0"]["weights"]["type"] = json!("float")),
        ),
    ];
    let mut kinds = Vec::new();
    for (case, edit) in cases {
        kinds.push(match err(open_with_config(case, edit)) {
            HfError::UnknownQuantMethod { method } => format!("unknown {method}"),
            HfError::InvalidConfigField { field, .. } => format!("invalid {field}"),
            HfError::MissingConfigField { field } => format!("missing {field}"),
            HfError::UnsupportedConfig { field, .. } => format!("unsupported {field}"),
            e => panic!("{case}: {e}"),
        });
    }
    assert_eq!(
        kinds,
        [
            "unknown hqq",
            "invalid bits",
            "invalid group_size",
            "missing bits",
            "unsupported checkpoint_format",
            "unsupported version",
            "unsupported zero_point",
            "unsupported format",
            "unsupported strategy",
            "unsupported type",
        ]
    );
    // Quantized tensors without a config.
    let dir = copy_case("ct-8bit-channel-sym");
    fs::remove_file(dir.path().join("config.json")).unwrap();
    assert!(matches!(
        err(Checkpoint::open(dir.path())),
        HfError::NoQuantizationConfig { .. }
    ));
}

#[test]
fn two_and_three_bit_gptq_is_unsupported() {
    for (case, b) in [("gptq-2bit", 2), ("gptq-3bit", 3)] {
        match err(Checkpoint::open(fixtures().join(case))) {
            HfError::UnsupportedBits {
                method: QuantMethod::Gptq,
                bits,
                ..
            } => assert_eq!(bits, b),
            e => panic!("{case}: {e}"),
        }
    }
    let e = err(Checkpoint::open(fixtures().join("gptq-3bit")));
    assert_eq!(
        e.to_string(),
        "gptq: 3-bit weights are unsupported (dq reads 4 and 8)"
    );
}

#[test]
fn truncated_headers_and_offsets_past_the_end_are_reported() {
    let dir = copy_case("ct-8bit-channel-sym");
    let file = dir.path().join("model.safetensors");
    let bytes = fs::read(&file).unwrap();
    let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    for (len, needed) in [
        (0, 8),
        (5, 8),
        (8, header_end),
        (header_end - 1, header_end),
    ] {
        fs::write(&file, &bytes[..len]).unwrap();
        match err(Checkpoint::open(dir.path())) {
            HfError::TruncatedHeader {
                file_len,
                needed: n,
                ..
            } => {
                assert_eq!((file_len, n), (len as u64, needed as u64));
            }
            e => panic!("{len} bytes: {e}"),
        }
    }
    // Cut into the data: the last tensor (by offset) runs past the end.
    fs::write(&file, &bytes[..bytes.len() - 3]).unwrap();
    match err(Checkpoint::open(dir.path())) {
        HfError::OffsetsPastEnd { end, data_len, .. } => assert_eq!(end, data_len + 3),
        e => panic!("{e}"),
    }
    let mut longer = bytes.clone();
    longer.extend([0; 4]);
    fs::write(&file, &longer).unwrap();
    assert!(matches!(
        err(Checkpoint::open(dir.path())),
        HfError::TrailingData { .. }
    ));
    // A header length past the safetensors limit.
    let mut forged = bytes.clone();
    forged[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    fs::write(&file, &forged).unwrap();
    assert!(matches!(
        err(Checkpoint::open(dir.path())),
        HfError::HeaderTooLarge { .. }
    ));
}

#[test]
fn shard_index_problems_are_reported() {
    let index = |edit: &dyn Fn(&mut serde_json::Value)| {
        let dir = copy_case("awq-4bit-g16-sharded");
        let file = dir.path().join("model.safetensors.index.json");
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        edit(&mut v["weight_map"]);
        fs::write(&file, v.to_string()).unwrap();
        Checkpoint::open(dir.path())
    };
    let up = format!("{UP}.qweight");
    let first = "model-00001-of-00002.safetensors";
    let second = "model-00002-of-00002.safetensors";
    assert!(index(&|_| {}).unwrap().tensor(&up).is_some());
    match err(index(&|m| {
        m["x"] = serde_json::json!("../escape.safetensors")
    })) {
        HfError::BadShardName { shard, .. } => assert_eq!(shard, "../escape.safetensors"),
        e => panic!("{e}"),
    }
    assert!(matches!(
        err(index(
            &|m| m["x"] = serde_json::json!("model-gone.safetensors")
        )),
        HfError::Io { .. }
    ));
    // The index names the wrong shard for a tensor.
    let e = err(index(&|m| {
        let file = m[&up].as_str().unwrap().to_owned();
        m[&up] = serde_json::json!(if file == first { second } else { first });
    }));
    assert!(
        matches!(e, HfError::NotInShard { ref tensor, .. } if *tensor == up),
        "{e}"
    );
    assert!(matches!(
        err(index(&|m| m["x"] = serde_json::json!(7))),
        HfError::Json {
            what: "the shard index",
            ..
        }
    ));
    // No weights at all.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        err(Checkpoint::open(empty.path())),
        HfError::NoWeights { .. }
    ));
}

#[test]
fn a_tensor_in_two_shards_is_reported() {
    let dir = copy_case("awq-4bit-g16-sharded");
    let a = dir.path().join("model-00001-of-00002.safetensors");
    let b = dir.path().join("model-00002-of-00002.safetensors");
    let (ta, _) = read_tensors(&a);
    let (mut tb, mb) = read_tensors(&b);
    tb.push(ta[0].clone());
    write_tensors(&b, &tb, mb);
    match err(Checkpoint::open(dir.path())) {
        HfError::DuplicateTensor { tensor, .. } => assert_eq!(tensor, ta[0].0),
        e => panic!("{e}"),
    }
}

#[test]
fn a_single_file_needs_metadata_naming_the_format() {
    let src = fixtures().join("single-file/gptq-v2.safetensors");
    let (tensors, metadata) = read_tensors(&src);
    assert!(
        metadata
            .as_ref()
            .unwrap()
            .contains_key("quantization_config")
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.safetensors");
    write_tensors(&file, &tensors, None);
    assert!(matches!(
        err(Checkpoint::open(&file)),
        HfError::NoQuantizationConfig { .. }
    ));
    // AutoGPTQ's own metadata keys say the same as the quantization_config.
    let keys = [
        ("format", "pt"),
        ("gptq_bits", "4"),
        ("gptq_group_size", "16"),
        ("gptq_desc_act", "False"),
        ("gptq_checkpoint_format", "gptq_v2"),
        ("gptq_quant_method", "gptq"),
    ];
    let md = keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    write_tensors(&file, &tensors, Some(md));
    let ckpt = Checkpoint::open(&file).unwrap();
    let l = ckpt.linear(Q).unwrap();
    assert_eq!(l.scheme(), V2_4);
    let want = expected(&src, Q);
    let got: Vec<u32> = reference::dequantize_f32(&l)
        .iter()
        .map(|y| y.to_bits())
        .collect();
    assert_eq!(got, want);
    // Bad values in those keys.
    let md = [("gptq_bits".to_string(), "four".to_string())]
        .into_iter()
        .collect();
    write_tensors(&file, &tensors, Some(md));
    assert!(matches!(
        err(Checkpoint::open(&file)),
        HfError::InvalidConfigField {
            field: "gptq_bits",
            ..
        }
    ));
}

#[test]
fn output_buffers_are_checked() {
    let ckpt = Checkpoint::open(fixtures().join("awq-4bit-g32")).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let mut out = vec![0u8; 32 * 64 * 2 - 1];
    assert!(matches!(
        reference::dequantize_into(&l, DType::F16, &mut out),
        Err(HfError::OutputSize {
            expected: 4096,
            got: 4095
        })
    ));
    assert!(matches!(
        reference::dequantize_into(&l, DType::S8, &mut out),
        Err(HfError::UnsupportedOutput { dtype: DType::S8 })
    ));
}

// ---------------------------------------------------------------------------
// Mutations of a small file's bytes: never a panic, memory bounded.

/// The system allocator, counting this thread's live bytes and their peak.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + delta;
        live.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and
// only adds bookkeeping in thread-locals that never allocate (const-initialised `Cell`s).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// `f()` and the peak of heap bytes this thread held during it beyond what it held before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, (PEAK.with(Cell::get) - base).max(0) as usize)
}

/// Peak heap for opening a ~1 KB checkpoint, whatever its bytes say.
const BUDGET: usize = 1 << 20;

#[test]
fn truncations_and_forged_header_lengths_never_panic_and_stay_small() {
    let dir = copy_case("ct-8bit-channel-sym");
    let file = dir.path().join("model.safetensors");
    let bytes = fs::read(&file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let open = |data: &[u8]| {
        fs::write(&file, data).unwrap();
        let (r, peak) = peak_during(|| Checkpoint::open(dir.path()).map(|c| c.linears().count()));
        assert!(peak < BUDGET, "{} bytes: {peak} bytes of heap", data.len());
        r
    };
    assert_eq!(open(&bytes).unwrap(), 1);
    for len in 0..bytes.len() {
        assert!(open(&bytes[..len]).is_err(), "truncated to {len} bytes");
    }
    let lengths = [
        0,
        1,
        2,
        n - 1,
        n + 1,
        n + 8,
        bytes.len() as u64,
        1 << 32,
        100_000_000,
        100_000_001,
        u64::MAX,
    ];
    for forged in lengths {
        let mut b = bytes.clone();
        b[..8].copy_from_slice(&forged.to_le_bytes());
        assert!(open(&b).is_err(), "header length {forged}");
    }
    // Every header byte replaced by a few others: an error or a valid checkpoint, no panic.
    for i in 8..8 + n as usize {
        for v in [b'0', b'9', b'-', b'"', b'}', b'[', 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            let _ = open(&b);
        }
    }
}
