//! `quantization_config`: which format the packed tensors are in.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use super::error::{HfError, Result};
use super::float::FloatFormat;
use super::float_config::{self, FloatScales};

/// A quantization method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantMethod {
    /// AutoGPTQ / GPTQModel.
    Gptq,
    /// AutoAWQ.
    Awq,
    /// compressed-tensors (llm-compressor).
    CompressedTensors,
    /// FP8 block-scaled (`quant_method: "fp8"`: DeepSeek-V3 and its kin).
    Fp8,
    /// NVIDIA ModelOpt (`quant_method: "modelopt"`), NVFP4.
    ModelOpt,
    /// bitsandbytes (NF4/FP4, LLM.int8).
    Bitsandbytes,
    /// MLX affine (`config.json` `quantization`).
    Mlx,
    /// gpt-oss MXFP4 experts.
    Mxfp4,
}

impl fmt::Display for QuantMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantMethod::Gptq => "gptq",
            QuantMethod::Awq => "awq",
            QuantMethod::CompressedTensors => "compressed-tensors",
            QuantMethod::Fp8 => "fp8",
            QuantMethod::ModelOpt => "modelopt",
            QuantMethod::Bitsandbytes => "bitsandbytes",
            QuantMethod::Mlx => "mlx",
            QuantMethod::Mxfp4 => "mxfp4",
        })
    }
}

/// GPTQ's `checkpoint_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GptqVersion {
    /// `gptq`: `qzeros` holds zero − 1; `z = stored + 1` (no wrap: 1..=2^b).
    V1,
    /// `gptq_v2`: `qzeros` holds the zero point.
    V2,
}

/// compressed-tensors' weight strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtStrategy {
    /// One scale (and zero point) per output row.
    Channel,
    /// One per output row and `group_size` inputs.
    Group(usize),
}

/// A checkpoint's `quantization_config`, reduced to what dequantization needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantConfig {
    /// GPTQ, 4 or 8 bits.
    Gptq {
        /// Bits per weight.
        bits: u32,
        /// Inputs per group; `None` for `-1` (one group per output column).
        group_size: Option<usize>,
        /// Act-order: each linear has a `g_idx`.
        desc_act: bool,
        /// Symmetric (informational: the zero points are stored either way).
        sym: bool,
        /// v1 or v2 zero points.
        version: GptqVersion,
    },
    /// AWQ GEMM, 4 bits, with zero points.
    Awq {
        /// Inputs per group; `None` for `-1`.
        group_size: Option<usize>,
    },
    /// compressed-tensors `pack-quantized`, 4 or 8 bits.
    CompressedTensors {
        /// Bits per weight.
        bits: u32,
        /// Channel or group.
        strategy: CtStrategy,
        /// No `weight_zero_point` when symmetric.
        symmetric: bool,
    },
    /// FP8 e4m3 weights with one scale per `[rows, inputs]` block (`weight_block_size`).
    Fp8 {
        /// `weight_block_size`: rows (outputs) and inputs per scale.
        block: [usize; 2],
    },
    /// compressed-tensors `float-quantized`: FP8 e4m3 weights.
    CtFp8 {
        /// Per tensor, channel, group or block.
        scales: FloatScales,
    },
    /// compressed-tensors `nvfp4-pack-quantized`.
    CtNvfp4,
    /// NVIDIA ModelOpt NVFP4.
    ModelOptNvfp4,
    /// bitsandbytes: 4-bit (NF4/FP4 per linear, from its quant state) or 8-bit LLM.int8.
    Bitsandbytes {
        /// 4 or 8.
        bits: u32,
    },
    /// MLX affine: `w · scale + bias` per group of inputs.
    Mlx {
        /// 2, 3, 4, 6 or 8.
        bits: u32,
        /// Inputs per group.
        group_size: usize,
    },
    /// gpt-oss MXFP4: e2m1 pairs with an e8m0 scale per 32 inputs.
    Mxfp4,
}

impl QuantConfig {
    /// The method.
    pub fn method(&self) -> QuantMethod {
        match self {
            QuantConfig::Gptq { .. } => QuantMethod::Gptq,
            QuantConfig::Awq { .. } => QuantMethod::Awq,
            QuantConfig::CompressedTensors { .. } => QuantMethod::CompressedTensors,
            QuantConfig::Fp8 { .. } => QuantMethod::Fp8,
            QuantConfig::CtFp8 { .. } | QuantConfig::CtNvfp4 => QuantMethod::CompressedTensors,
            QuantConfig::ModelOptNvfp4 => QuantMethod::ModelOpt,
            QuantConfig::Bitsandbytes { .. } => QuantMethod::Bitsandbytes,
            QuantConfig::Mlx { .. } => QuantMethod::Mlx,
            QuantConfig::Mxfp4 => QuantMethod::Mxfp4,
        }
    }

    /// The float-weight format, for the configs that have one.
    pub fn float_format(&self) -> Option<FloatFormat> {
        match self {
            QuantConfig::Fp8 { .. } => Some(FloatFormat::Fp8),
            QuantConfig::CtFp8 { .. } => Some(FloatFormat::CtFp8),
            QuantConfig::CtNvfp4 => Some(FloatFormat::CtNvfp4),
            QuantConfig::ModelOptNvfp4 => Some(FloatFormat::ModelOptNvfp4),
            _ => None,
        }
    }

    /// Bits per weight.
    pub fn bits(&self) -> u32 {
        match *self {
            QuantConfig::Gptq { bits, .. }
            | QuantConfig::CompressedTensors { bits, .. }
            | QuantConfig::Bitsandbytes { bits }
            | QuantConfig::Mlx { bits, .. } => bits,
            QuantConfig::Awq { .. } | QuantConfig::Mxfp4 => 4,
            QuantConfig::Fp8 { .. } | QuantConfig::CtFp8 { .. } => 8,
            QuantConfig::CtNvfp4 | QuantConfig::ModelOptNvfp4 => 4,
        }
    }

    /// Reads a `quantization_config` JSON object.
    ///
    /// # Errors
    /// A missing or invalid field, an unknown method, unsupported bits or options.
    pub fn from_json(config: &Value) -> Result<Self> {
        let obj = config
            .as_object()
            .ok_or_else(|| invalid("quantization_config", config))?;
        let method = obj.get("quant_method").ok_or(HfError::MissingConfigField {
            field: "quant_method",
        })?;
        match method.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("gptq") => gptq(obj),
            Some("awq") => awq(obj),
            Some("compressed-tensors" | "compressed_tensors") => compressed_tensors(obj),
            Some("fp8") => float_config::fp8(obj),
            Some("modelopt") => float_config::modelopt(obj),
            Some("bitsandbytes") => super::families::bnb_config(obj),
            Some("mxfp4") => Ok(QuantConfig::Mxfp4),
            Some(other) => Err(HfError::UnknownQuantMethod {
                method: other.to_owned(),
            }),
            None => Err(invalid("quant_method", method)),
        }
    }

    /// Reads the format from a safetensors file's `__metadata__`: a `quantization_config`
    /// JSON string (dq's convention), or AutoGPTQ's `gptq_bits` / `gptq_group_size` /
    /// `gptq_desc_act` / `gptq_checkpoint_format` keys. `None` when neither is there.
    ///
    /// # Errors
    /// Invalid JSON or fields.
    pub fn from_metadata(metadata: &HashMap<String, String>, path: &Path) -> Result<Option<Self>> {
        if let Some(text) = metadata.get("quantization_config") {
            let value: Value = serde_json::from_str(text).map_err(|source| HfError::Json {
                path: path.to_owned(),
                what: "metadata quantization_config",
                source,
            })?;
            return Self::from_json(&value).map(Some);
        }
        if !metadata.contains_key("gptq_bits") {
            return Ok(None);
        }
        let mut obj = Map::new();
        let method = metadata
            .get("gptq_quant_method")
            .map_or("gptq", String::as_str);
        obj.insert("quant_method".into(), Value::from(method));
        for key in ["bits", "group_size"] {
            if let Some(text) = metadata.get(&format!("gptq_{key}")) {
                let n: i64 = text
                    .trim()
                    .parse()
                    .map_err(|_| HfError::InvalidConfigField {
                        field: if key == "bits" {
                            "gptq_bits"
                        } else {
                            "gptq_group_size"
                        },
                        value: format!("{text:?}"),
                    })?;
                obj.insert(key.into(), Value::from(n));
            }
        }
        if let Some(text) = metadata.get("gptq_desc_act") {
            let b = match text.trim() {
                "True" | "true" => true,
                "False" | "false" => false,
                _ => {
                    return Err(HfError::InvalidConfigField {
                        field: "gptq_desc_act",
                        value: format!("{text:?}"),
                    });
                }
            };
            obj.insert("desc_act".into(), Value::from(b));
        }
        if let Some(text) = metadata.get("gptq_checkpoint_format") {
            obj.insert("checkpoint_format".into(), Value::from(text.as_str()));
        }
        Self::from_json(&Value::Object(obj)).map(Some)
    }
}

pub(super) fn invalid(field: &'static str, value: &Value) -> HfError {
    HfError::InvalidConfigField {
        field,
        value: value.to_string(),
    }
}

pub(super) fn unsupported(method: QuantMethod, field: &'static str, value: &Value) -> HfError {
    HfError::UnsupportedConfig {
        method,
        field,
        value: value.to_string(),
    }
}

/// The first of `keys` present (the HF name, then the library's own).
fn field<'a>(
    obj: &'a Map<String, Value>,
    keys: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    keys.iter().find_map(|&k| obj.get(k).map(|v| (k, v)))
}

pub(super) fn flag(obj: &Map<String, Value>, key: &'static str, default: bool) -> Result<bool> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| invalid(key, v)),
    }
}

/// `-1` is per-channel (`None`); otherwise a positive size.
fn group_size(obj: &Map<String, Value>, keys: &[&'static str]) -> Result<Option<usize>> {
    let (key, v) = field(obj, keys).ok_or(HfError::MissingConfigField { field: keys[0] })?;
    match v.as_i64() {
        Some(-1) => Ok(None),
        Some(g) if g > 0 => usize::try_from(g).map(Some).map_err(|_| invalid(key, v)),
        _ => Err(invalid(key, v)),
    }
}

fn bits(
    obj: &Map<String, Value>,
    keys: &[&'static str],
    method: QuantMethod,
    ok: &[u32],
) -> Result<u32> {
    let (key, v) = field(obj, keys).ok_or(HfError::MissingConfigField { field: keys[0] })?;
    let b = v
        .as_u64()
        .filter(|&b| b > 0)
        .ok_or_else(|| invalid(key, v))?;
    let supported = match method {
        QuantMethod::Awq => "4",
        _ => "4 and 8",
    };
    ok.iter()
        .copied()
        .find(|&o| u64::from(o) == b)
        .ok_or(HfError::UnsupportedBits {
            method,
            bits: b,
            supported,
        })
}

fn gptq(obj: &Map<String, Value>) -> Result<QuantConfig> {
    let method = QuantMethod::Gptq;
    let bits = bits(obj, &["bits"], method, &[4, 8])?;
    let group_size = group_size(obj, &["group_size"])?;
    let version = match field(obj, &["checkpoint_format", "format"]) {
        None | Some((_, Value::Null)) => GptqVersion::V1,
        Some((key, v)) => match v.as_str() {
            Some("gptq") => GptqVersion::V1,
            Some("gptq_v2") => GptqVersion::V2,
            Some(_) => return Err(unsupported(method, key, v)),
            None => return Err(invalid(key, v)),
        },
    };
    if let Some(dynamic) = obj.get("dynamic").filter(|v| !v.is_null())
        && dynamic.as_object().is_none_or(|m| !m.is_empty())
    {
        return Err(unsupported(method, "dynamic", dynamic));
    }
    Ok(QuantConfig::Gptq {
        bits,
        group_size,
        desc_act: flag(obj, "desc_act", false)?,
        sym: flag(obj, "sym", true)?,
        version,
    })
}

fn awq(obj: &Map<String, Value>) -> Result<QuantConfig> {
    let method = QuantMethod::Awq;
    bits(obj, &["bits", "w_bit"], method, &[4])?;
    let group_size = group_size(obj, &["group_size", "q_group_size"])?;
    if !flag(obj, "zero_point", true)? {
        return Err(unsupported(method, "zero_point", &Value::Bool(false)));
    }
    if let Some(v) = obj.get("version").filter(|v| !v.is_null())
        && !v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("gemm"))
    {
        return Err(unsupported(method, "version", v));
    }
    Ok(QuantConfig::Awq { group_size })
}

fn compressed_tensors<'a>(obj: &'a Map<String, Value>) -> Result<QuantConfig> {
    let method = QuantMethod::CompressedTensors;
    let groups = obj
        .get("config_groups")
        .ok_or(HfError::MissingConfigField {
            field: "config_groups",
        })?;
    let groups = groups
        .as_object()
        .ok_or_else(|| invalid("config_groups", groups))?;
    let mut found: Option<QuantConfig> = None;
    for group in groups.values() {
        let group = group
            .as_object()
            .ok_or_else(|| invalid("config_groups", group))?;
        let Some(weights) = group.get("weights").filter(|w| !w.is_null()) else {
            continue;
        };
        // The group's own format, else the checkpoint's (`mixed-precision` has per-group ones).
        let not_null = |f: Option<(&'static str, &'a Value)>| f.filter(|(_, v)| !v.is_null());
        let (_, format) = not_null(field(group, &["format"]))
            .or_else(|| not_null(field(obj, &["format"])))
            .ok_or(HfError::MissingConfigField { field: "format" })?;
        let scheme = match format.as_str() {
            Some("pack-quantized") => ct_weights(weights)?,
            Some(f @ ("float-quantized" | "nvfp4-pack-quantized")) => {
                let w = weights
                    .as_object()
                    .ok_or_else(|| invalid("weights", weights))?;
                float_config::ct_float(f, w)?
            }
            _ => return Err(unsupported(method, "format", format)),
        };
        if found.is_some_and(|f| f != scheme) {
            return Err(unsupported(
                method,
                "config_groups",
                &Value::from("several weight schemes"),
            ));
        }
        found = Some(scheme);
    }
    found.ok_or(HfError::MissingConfigField {
        field: "config_groups.*.weights",
    })
}

fn ct_weights(weights: &Value) -> Result<QuantConfig> {
    let method = QuantMethod::CompressedTensors;
    let w = weights
        .as_object()
        .ok_or_else(|| invalid("weights", weights))?;
    let bits = bits(w, &["num_bits"], method, &[4, 8])?;
    if let Some(t) = w.get("type").filter(|t| t.as_str() != Some("int")) {
        return Err(unsupported(method, "type", t));
    }
    let strategy = w
        .get("strategy")
        .ok_or(HfError::MissingConfigField { field: "strategy" })?;
    let strategy = match strategy.as_str() {
        Some("channel") => CtStrategy::Channel,
        Some("group") => match group_size(w, &["group_size"])? {
            Some(g) => CtStrategy::Group(g),
            None => return Err(invalid("group_size", &Value::from(-1))),
        },
        _ => return Err(unsupported(method, "strategy", strategy)),
    };
    Ok(QuantConfig::CompressedTensors {
        bits,
        strategy,
        symmetric: flag(w, "symmetric", true)?,
    })
}
