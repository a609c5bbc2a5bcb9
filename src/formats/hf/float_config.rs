//! `quantization_config`s of the float-weight formats ([`float`](super::float)):
//! - `quant_method: "fp8"` (transformers' `FineGrainedFP8Config`, as DeepSeek-V3,
//!   Kimi-K2 and Qwen3-*-FP8 write it): `{"quant_method": "fp8", "fmt": "e4m3",
//!   "activation_scheme": "dynamic", "weight_block_size": [128, 128]}`;
//! - compressed-tensors `float-quantized` (weights `num_bits: 8, type: "float"`, strategy
//!   `tensor`, `channel`, `group` or `block` with `block_structure`) and
//!   `nvfp4-pack-quantized` (`num_bits: 4, type: "float", strategy: "tensor_group",
//!   group_size: 16`);
//! - NVIDIA ModelOpt: `{"quant_method": "modelopt", "quant_algo": "NVFP4",
//!   "group_size": 16}`.

use serde_json::{Map, Value};

use super::config::{QuantConfig, QuantMethod, invalid, unsupported};
use super::error::{HfError, Result};

/// How a float weight's scales cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatScales {
    /// One scale (`[1]` or `[]`).
    Tensor,
    /// One per output row (`[N, 1]`).
    Channel,
    /// One per output row and `g` inputs (`[N, ceil(K / g)]`).
    Group(usize),
    /// One per `[rows, inputs]` block (`[ceil(N / rows), ceil(K / inputs)]`).
    Block([usize; 2]),
}

/// Reads an `fp8` config: `fmt` (absent or `e4m3`) and `weight_block_size`.
pub(super) fn fp8(obj: &Map<String, Value>) -> Result<QuantConfig> {
    if let Some(fmt) = obj.get("fmt").filter(|v| !v.is_null())
        && fmt.as_str() != Some("e4m3")
    {
        return Err(unsupported(QuantMethod::Fp8, "fmt", fmt));
    }
    let size = obj
        .get("weight_block_size")
        .filter(|v| !v.is_null())
        .ok_or(HfError::MissingConfigField {
            field: "weight_block_size",
        })?;
    let block = pair(size).ok_or_else(|| invalid("weight_block_size", size))?;
    Ok(QuantConfig::Fp8 { block })
}

/// Reads a ModelOpt config: `quant_algo: "NVFP4"` with `group_size` 16 (or absent).
pub(super) fn modelopt(obj: &Map<String, Value>) -> Result<QuantConfig> {
    let method = QuantMethod::ModelOpt;
    let algo = obj.get("quant_algo").ok_or(HfError::MissingConfigField {
        field: "quant_algo",
    })?;
    if algo.as_str() != Some("NVFP4") {
        return Err(unsupported(method, "quant_algo", algo));
    }
    if let Some(g) = obj.get("group_size").filter(|v| !v.is_null())
        && g.as_u64() != Some(16)
    {
        return Err(unsupported(method, "group_size", g));
    }
    Ok(QuantConfig::ModelOptNvfp4)
}

/// A compressed-tensors group's `weights` in `format` (`float-quantized` or
/// `nvfp4-pack-quantized`).
pub(super) fn ct_float(format: &str, w: &Map<String, Value>) -> Result<QuantConfig> {
    let method = QuantMethod::CompressedTensors;
    let field = |k: &'static str| w.get(k).filter(|v| !v.is_null());
    if let Some(t) = field("type").filter(|t| t.as_str() != Some("float")) {
        return Err(unsupported(method, "type", t));
    }
    if let Some(s) = field("symmetric").filter(|s| s.as_bool() != Some(true)) {
        return Err(unsupported(method, "symmetric", s));
    }
    // Act-order would map inputs to groups by a `weight_g_idx`: not read for floats.
    if let Some(a) = field("actorder") {
        return Err(unsupported(method, "actorder", a));
    }
    let bits = field("num_bits").ok_or(HfError::MissingConfigField { field: "num_bits" })?;
    let strategy = field("strategy").ok_or(HfError::MissingConfigField { field: "strategy" })?;
    let group = || -> Result<usize> {
        let g = field("group_size").ok_or(HfError::MissingConfigField {
            field: "group_size",
        })?;
        g.as_u64()
            .and_then(|g| usize::try_from(g).ok())
            .filter(|&g| g > 0)
            .ok_or_else(|| invalid("group_size", g))
    };
    if format == "nvfp4-pack-quantized" {
        if bits.as_u64() != Some(4) {
            return Err(unsupported(method, "num_bits", bits));
        }
        if strategy.as_str() != Some("tensor_group") {
            return Err(unsupported(method, "strategy", strategy));
        }
        return match group()? {
            16 => Ok(QuantConfig::CtNvfp4),
            _ => Err(unsupported(method, "group_size", &w["group_size"])),
        };
    }
    if bits.as_u64() != Some(8) {
        return Err(unsupported(method, "num_bits", bits));
    }
    let scales = match strategy.as_str() {
        Some("tensor") => FloatScales::Tensor,
        Some("channel") => FloatScales::Channel,
        Some("group") => FloatScales::Group(group()?),
        Some("block") => {
            let b = field("block_structure").ok_or(HfError::MissingConfigField {
                field: "block_structure",
            })?;
            FloatScales::Block(pair(b).ok_or_else(|| invalid("block_structure", b))?)
        }
        _ => return Err(unsupported(method, "strategy", strategy)),
    };
    Ok(QuantConfig::CtFp8 { scales })
}

/// Two positive sizes `[a, b]`.
fn pair(v: &Value) -> Option<[usize; 2]> {
    let size = |d: &Value| {
        d.as_u64()
            .and_then(|d| usize::try_from(d).ok())
            .filter(|&d| d > 0)
    };
    match v.as_array()?.as_slice() {
        [a, b] => Some([size(a)?, size(b)?]),
        _ => None,
    }
}
