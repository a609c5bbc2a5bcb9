//! HuggingFace checkpoints the reader refuses: one clear error each, naming the
//! linear, tensor or config key at fault.

use std::fs;

use crate::support;
use dq::DType;
use dq::formats::hf::{Checkpoint, Dtype, GptqVersion, HfError, QuantMethod, Scheme, reference};
use support::hf::{Q, Tensor, UP, copy_case, expected, fixtures, read_tensors, write_tensors};

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
    // GPTQ: N = 12 packs its zero points into 2 words (the last half padding), not 4.
    match shape_err("gptq-v1-4bit-g64-asym", "qweight", Dtype::I32, vec![12, 12]) {
        HfError::WrongShape {
            tensor,
            expected,
            got,
        } => assert_eq!(
            (tensor, expected, got),
            (format!("{UP}.qzeros"), vec![2, 2], vec![2, 4])
        ),
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
            Box::new(|q| q["config_groups"]["group_0"]["format"] = json!("marlin-24")),
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
    let v2_4 = Scheme::Gptq {
        bits: 4,
        version: GptqVersion::V2,
    };
    assert_eq!(l.scheme(), v2_4);
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
