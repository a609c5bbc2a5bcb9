//! The float and coded checkpoint families of one random `N x K` linear each:
//! DeepSeek FP8 (128 x 128 f32 block scales), compressed-tensors and ModelOpt
//! NVFP4, bitsandbytes NF4 with double quantization and LLM.int8, MLX 4-bit
//! (bf16 scales and biases, groups of 64) and gpt-oss MXFP4 (one expert).
//! Scales are finite positive normals and FP8 weights hold no NaN code, so no
//! special-value arithmetic flatters or slows any backend.

use dq::case::Rng;
use safetensors::Dtype;

/// A tensor: name (after the linear's prefix), dtype, shape, bytes.
pub type Tensor = (String, Dtype, Vec<usize>, Vec<u8>);

/// A family's checkpoint: id, config.json, tensors.
pub type Family = (&'static str, String, Vec<Tensor>);

/// NF4's code book (bitsandbytes' `quant_map`).
const NF4: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

fn f32s(v: impl IntoIterator<Item = f32>) -> Vec<u8> {
    v.into_iter().flat_map(f32::to_le_bytes).collect()
}

/// `count` f32 in `[lo, lo·2)`.
fn pos_f32(rng: &mut Rng, count: usize, lo: f32) -> Vec<u8> {
    f32s((0..count).map(|_| lo * (1.0 + rng.below(1 << 20) as f32 / (1 << 20) as f32)))
}

/// `count` bf16 of either sign, magnitudes in `[2^-8, 2^-4)`.
fn bf16s(rng: &mut Rng, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|_| {
            let sign = if rng.one_in(2) { 0x8000 } else { 0 };
            (sign | (0x3b80u16 + rng.below(0x200) as u16)).to_le_bytes()
        })
        .collect()
}

/// e4m3 scales: positive normals (exponent 1..14).
fn e4m3s(rng: &mut Rng, count: usize) -> Vec<u8> {
    (0..count).map(|_| 0x08 + rng.below(0x70) as u8).collect()
}

/// Random e4m3 weights without NaN codes (0x7f, 0xff).
fn fp8_weights(rng: &mut Rng, count: usize) -> Vec<u8> {
    let mut w = rng.bytes(count);
    w.iter_mut()
        .filter(|b| **b & 0x7f == 0x7f)
        .for_each(|b| *b &= 0xfe);
    w
}

fn t(name: &str, d: Dtype, shape: &[usize], bytes: Vec<u8>) -> Tensor {
    (name.to_owned(), d, shape.to_vec(), bytes)
}

/// The families of an `n x k` linear (`k` a multiple of 128, `n · k` of 16384).
pub fn all(n: usize, k: usize) -> Vec<Family> {
    let mut rng = Rng::new(11);
    let r = &mut rng;
    let blocks = n * k / 64;
    let nested = blocks.div_ceil(256);
    let state = format!(
        r#"{{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [{n}, {k}], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0137}}"#
    );
    let nested_book: Vec<f32> = (0..256).map(|i| (i as f32 - 127.5) / 128.0).collect();
    vec![
        (
            "fp8-block128",
            r#"{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}"#.into(),
            vec![
                t("weight", Dtype::F8_E4M3, &[n, k], fp8_weights(r, n * k)),
                t("weight_scale_inv", Dtype::F32, &[n.div_ceil(128), k / 128], pos_f32(r, n.div_ceil(128) * k / 128, 1e-4)),
            ],
        ),
        (
            "ct-nvfp4",
            r#"{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "quantization_status": "compressed", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "symmetric": true, "group_size": 16, "strategy": "tensor_group", "dynamic": false, "scale_dtype": "torch.float8_e4m3fn"}, "input_activations": null, "format": "nvfp4-pack-quantized"}}, "ignore": ["lm_head"]}}"#.into(),
            vec![
                t("weight_packed", Dtype::U8, &[n, k / 2], r.bytes(n * k / 2)),
                t("weight_scale", Dtype::F8_E4M3, &[n, k / 16], e4m3s(r, n * k / 16)),
                t("weight_global_scale", Dtype::F32, &[1], f32s([448.0 * 6.0 / 3.5])),
            ],
        ),
        (
            "modelopt-nvfp4",
            r#"{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]}}"#.into(),
            vec![
                t("weight", Dtype::U8, &[n, k / 2], r.bytes(n * k / 2)),
                t("weight_scale", Dtype::F8_E4M3, &[n, k / 16], e4m3s(r, n * k / 16)),
                t("weight_scale_2", Dtype::F32, &[], f32s([3.5e-4])),
                t("input_scale", Dtype::F32, &[], f32s([0.01])),
            ],
        ),
        (
            "bnb-nf4-double",
            r#"{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": false, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8"}}"#.into(),
            vec![
                t("weight", Dtype::U8, &[n * k / 2, 1], r.bytes(n * k / 2)),
                t("weight.absmax", Dtype::U8, &[blocks], r.bytes(blocks)),
                t("weight.quant_map", Dtype::F32, &[16], f32s(NF4)),
                t("weight.nested_absmax", Dtype::F32, &[nested], pos_f32(r, nested, 0.05)),
                t("weight.nested_quant_map", Dtype::F32, &[256], f32s(nested_book)),
                t("weight.quant_state.bitsandbytes__nf4", Dtype::U8, &[state.len()], state.into_bytes()),
            ],
        ),
        (
            "bnb-int8",
            r#"{"torch_dtype": "float16", "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": false, "load_in_8bit": true, "llm_int8_threshold": 6.0}}"#.into(),
            vec![
                t("weight", Dtype::I8, &[n, k], r.bytes(n * k)),
                t("SCB", Dtype::F32, &[n], pos_f32(r, n, 0.01)),
            ],
        ),
        (
            "mlx-4bit-g64",
            r#"{"quantization": {"group_size": 64, "bits": 4}, "quantization_config": {"group_size": 64, "bits": 4}}"#.into(),
            vec![
                t("weight", Dtype::U32, &[n, k / 8], r.bytes(n * k / 2)),
                t("scales", Dtype::BF16, &[n, k / 64], bf16s(r, n * k / 64)),
                t("biases", Dtype::BF16, &[n, k / 64], bf16s(r, n * k / 64)),
            ],
        ),
        (
            "mxfp4",
            r#"{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}}"#.into(),
            vec![
                t("_blocks", Dtype::U8, &[1, n, k / 32, 16], r.bytes(n * k / 2)),
                t("_scales", Dtype::U8, &[1, n, k / 32], (0..n * k / 32).map(|_| 118 + r.below(12) as u8).collect()),
            ],
        ),
    ]
}
