//! Checking a float-weight linear's tensors against its format ([`float`](super::float)).

use safetensors::Dtype;

use super::checkpoint::TensorRef;
use super::error::{HfError, Result};
use super::float::{self, FloatFormat};
use super::float_config::FloatScales;
use super::linear::{LinearInfo, Scheme, Tensors, rank2, shape};

const E4M3: &[Dtype] = &[Dtype::F8_E4M3];
const U8: &[Dtype] = &[Dtype::U8];
const F32: &[Dtype] = &[Dtype::F32];
/// `weight_scale_inv` of `quant_method: "fp8"`.
const FP8_SCALES: &[Dtype] = &[Dtype::F32, Dtype::BF16, Dtype::F8_E8M0];
/// compressed-tensors' FP8 `weight_scale`.
const CT_SCALES: &[Dtype] = &[Dtype::F32, Dtype::BF16, Dtype::F16];

const FP8_FIELDS: &[&str] = &["weight", "weight_scale_inv"];
const CT_FP8_FIELDS: &[&str] = &["weight", "weight_scale"];
const CT_NVFP4_FIELDS: &[&str] = &["weight_packed", "weight_scale", "weight_global_scale"];
const MODELOPT_FIELDS: &[&str] = &["weight", "weight_scale", "weight_scale_2"];

/// The tensor whose presence makes a prefix a linear of `format`.
pub(super) fn anchor(format: FloatFormat) -> &'static str {
    match format {
        FloatFormat::Fp8 => "weight_scale_inv",
        FloatFormat::CtFp8 => "weight_scale",
        FloatFormat::CtNvfp4 => "weight_packed",
        FloatFormat::ModelOptNvfp4 => "weight_scale_2",
    }
}

/// `quant_method: "fp8"`: `weight` `[N, K]`, one scale per `block`.
pub(super) fn fp8(t: &Tensors<'_, '_>, block: [usize; 2]) -> Result<LinearInfo> {
    let weight = t.require("weight", E4M3)?;
    let [n, k] = rank2(&weight)?;
    let scales = t.require("weight_scale_inv", FP8_SCALES)?;
    shape(&scales, &[n.div_ceil(block[0]), k.div_ceil(block[1])])?;
    info(
        FloatFormat::Fp8,
        [n, k],
        block,
        &weight,
        &scales,
        None,
        FP8_FIELDS,
    )
}

/// compressed-tensors `float-quantized`: `weight` `[N, K]`, `weight_scale` as `scales`.
pub(super) fn ct_fp8(t: &Tensors<'_, '_>, scales: FloatScales) -> Result<LinearInfo> {
    let weight = t.require("weight", E4M3)?;
    let [n, k] = rank2(&weight)?;
    let s = t.require("weight_scale", CT_SCALES)?;
    let (block, want) = match scales {
        FloatScales::Tensor => ([n.max(1), k.max(1)], vec![1]),
        FloatScales::Channel => ([1, k.max(1)], vec![n, 1]),
        FloatScales::Group(g) => ([1, g], vec![n, k.div_ceil(g)]),
        FloatScales::Block(b) => (b, vec![n.div_ceil(b[0]), k.div_ceil(b[1])]),
    };
    // A per-tensor scale is `[1]` (compressed-tensors) or a scalar `[]`.
    if !(scales == FloatScales::Tensor && s.shape().is_empty()) {
        shape(&s, &want)?;
    }
    info(
        FloatFormat::CtFp8,
        [n, k],
        block,
        &weight,
        &s,
        None,
        CT_FP8_FIELDS,
    )
}

/// NVFP4: `packed` U8 `[N, K/2]`, `weight_scale` F8_E4M3 `[N, K/16]`, a global f32.
pub(super) fn nvfp4(t: &Tensors<'_, '_>, format: FloatFormat) -> Result<LinearInfo> {
    let (packed, global, fields) = match format {
        FloatFormat::CtNvfp4 => ("weight_packed", "weight_global_scale", CT_NVFP4_FIELDS),
        _ => ("weight", "weight_scale_2", MODELOPT_FIELDS),
    };
    let weight = t.require(packed, U8)?;
    let [n, half] = rank2(&weight)?;
    let k = 2 * half;
    let scales = t.require("weight_scale", E4M3)?;
    if !k.is_multiple_of(16) {
        return Err(HfError::NotAMultiple {
            tensor: weight.name().to_owned(),
            dim: 1,
            value: half,
            multiple: 8,
        });
    }
    shape(&scales, &[n, k / 16])?;
    let g = t.require(global, F32)?;
    if g.shape().iter().product::<usize>() != 1 || g.shape().len() > 1 {
        shape(&g, &[1])?;
    }
    let value = float::scale(g, 0);
    info(
        format,
        [n, k],
        [1, 16],
        &weight,
        &scales,
        Some(value),
        fields,
    )
}

fn info(
    format: FloatFormat,
    [n, k]: [usize; 2],
    [block_n, block_k]: [usize; 2],
    weight: &TensorRef<'_>,
    scales: &TensorRef<'_>,
    global_scale: Option<f32>,
    fields: &'static [&'static str],
) -> Result<LinearInfo> {
    // Blocks are u32 in the scheme: a larger one (a per-tensor scale over more than
    // 2^32 rows or inputs) is refused, not truncated.
    let size = |b: usize| {
        u32::try_from(b).map_err(|_| HfError::InvalidConfigField {
            field: "block size",
            value: b.to_string(),
        })
    };
    Ok(LinearInfo {
        scheme: Scheme::Float {
            format,
            block_n: size(block_n)?,
            block_k: size(block_k)?,
        },
        n,
        k,
        groups: k.div_ceil(block_k),
        group_size: block_k,
        g_idx: None,
        packed: weight.name().to_owned(),
        scales: scales.name().to_owned(),
        zeros: None,
        global_scale,
        fields,
        coded: None,
    })
}
