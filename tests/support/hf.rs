//! HuggingFace checkpoint fixtures (`tests/fixtures/hf`, made by
//! `scripts/make_hf_fixtures.py`): where they are, what they expect, and copies to edit.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use dq::formats::hf::Dtype;
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;

pub const UP: &str = "model.layers.0.mlp.up_proj";
pub const DOWN: &str = "model.layers.0.mlp.down_proj";
pub const Q: &str = "model.layers.0.self_attn.q_proj";

/// Every fixture with quantized linears (the 2/3-bit ones are refused at open).
pub const CASES: &[&str] = &[
    "gptq-v1-4bit-g64-asym",
    "gptq-v1-4bit-perchannel-sym",
    "gptq-v1-4bit-g16-actorder-bf16",
    "gptq-v1-8bit-g32-asym",
    "gptq-v2-4bit-g64-actorder",
    "gptq-v2-8bit-perchannel-sym",
    "awq-4bit-g32",
    "awq-4bit-g16-sharded",
    "ct-4bit-group-sym",
    "ct-4bit-channel-asym",
    "ct-8bit-group-asym",
    "ct-8bit-channel-sym",
    "single-file/gptq-v2.safetensors",
    "gptq-v2-4bit-g32-n100",
    "gptq-v1-4bit-g16-actorder-n50",
    "gptq-v1-8bit-perchannel-n10",
    "awq-4bit-g16-n40",
];

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

/// `expected/<prefix>.bin` beside the checkpoint: raw little-endian f32 `[N, K]`.
pub fn expected(case_path: &Path, prefix: &str) -> Vec<u32> {
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

/// A tensor to write back: name, dtype, shape, bytes.
pub type Tensor = (String, Dtype, Vec<usize>, Vec<u8>);

pub fn read_tensors(path: &Path) -> (Vec<Tensor>, Option<HashMap<String, String>>) {
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

pub fn write_tensors(path: &Path, tensors: &[Tensor], metadata: Option<HashMap<String, String>>) {
    let views = tensors
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()));
    fs::write(path, safetensors::serialize(views, metadata).unwrap()).unwrap();
}

/// A copy of fixture `case` in a temporary folder.
pub fn copy_case(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in fs::read_dir(fixtures().join(case)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
    }
    dir
}
