//! bitsandbytes (NF4/FP4, double quantization, LLM.int8), MLX affine and gpt-oss
//! MXFP4: their configs, and each linear's tensors checked against the format
//! (SPEC §11). Their weights are coded: a code per element, a value per code and a
//! scale per group ([`coded`](super::coded)).

use serde_json::{Map, Value};

use super::checkpoint::TensorRef;
use super::config::{QuantConfig, QuantMethod, flag, invalid};
use super::error::{HfError, Result};
use super::linear::{LinearInfo, Scheme};
use safetensors::Dtype;

/// bitsandbytes' 4-bit code books.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BnbType {
    /// NormalFloat4.
    Nf4,
    /// bitsandbytes' FP4 (sign, 2-bit exponent, 1-bit mantissa, scaled to ±1).
    Fp4,
}

/// What a coded linear holds beyond the common views.
#[derive(Clone, Debug)]
pub(crate) struct CodedInfo {
    /// Every tensor of the linear (members of no other list).
    pub members: Vec<String>,
    /// Extra tensors, by slot: bnb 4-bit `quant_map`, `nested_absmax`,
    /// `nested_quant_map`; MLX `biases`.
    pub aux: Vec<String>,
    /// Codes per group (bnb blocksize, MLX group size, 32, K for int8).
    pub block: usize,
    /// bnb double quantization: blocks per nested scale, and the offset.
    pub nested: Option<(usize, f32)>,
    /// The output tensor's name and shape.
    pub out_name: String,
    pub out_shape: Vec<usize>,
}

const FLOATS: &[Dtype] = &[Dtype::F16, Dtype::BF16, Dtype::F32];
const F32: &[Dtype] = &[Dtype::F32];
const U8: &[Dtype] = &[Dtype::U8];
const I8: &[Dtype] = &[Dtype::I8];
const U32: &[Dtype] = &[Dtype::U32];

/// transformers' `BitsAndBytesConfig`: `load_in_4bit` or `load_in_8bit`.
pub(super) fn bnb_config(obj: &Map<String, Value>) -> Result<QuantConfig> {
    let four = flag(obj, "load_in_4bit", false)? || flag(obj, "_load_in_4bit", false)?;
    let eight = flag(obj, "load_in_8bit", false)? || flag(obj, "_load_in_8bit", false)?;
    let bits = match (four, eight) {
        (true, false) => 4,
        (false, true) => 8,
        _ => return Err(invalid("load_in_4bit", &Value::from(four))),
    };
    if let Some(s) = obj.get("bnb_4bit_quant_storage").filter(|s| !s.is_null())
        && s.as_str() != Some("uint8")
    {
        return Err(HfError::UnsupportedConfig {
            method: QuantMethod::Bitsandbytes,
            field: "bnb_4bit_quant_storage",
            value: s.to_string(),
        });
    }
    Ok(QuantConfig::Bitsandbytes { bits })
}

/// mlx-lm's `quantization` object: `{"group_size", "bits"}` (affine mode only).
pub(crate) fn mlx_config(q: &Value) -> Result<QuantConfig> {
    let obj = q.as_object().ok_or_else(|| invalid("quantization", q))?;
    let num = |key: &'static str| {
        let v = obj
            .get(key)
            .ok_or(HfError::MissingConfigField { field: key })?;
        v.as_u64().filter(|&b| b > 0).ok_or_else(|| invalid(key, v))
    };
    let bits = num("bits")?;
    let group_size = usize::try_from(num("group_size")?).map_err(|_| invalid("group_size", q))?;
    if ![2, 3, 4, 6, 8].contains(&bits) {
        return Err(HfError::UnsupportedBits {
            method: QuantMethod::Mlx,
            bits,
            supported: "2, 3, 4, 6 and 8",
        });
    }
    let unsupported = |field: &'static str, value: &Value| HfError::UnsupportedConfig {
        method: QuantMethod::Mlx,
        field,
        value: value.to_string(),
    };
    if let Some(mode) = obj.get("mode").filter(|m| m.as_str() != Some("affine")) {
        return Err(unsupported("mode", mode));
    }
    if let Some(v) = obj.values().find(|v| v.is_object() || v.is_boolean()) {
        return Err(unsupported("per-layer quantization", v));
    }
    Ok(QuantConfig::Mlx {
        bits: bits as u32,
        group_size,
    })
}

/// Whether the config's linears are coded (handled here).
pub(crate) fn is_coded(config: &QuantConfig) -> bool {
    matches!(
        config,
        QuantConfig::Bitsandbytes { .. } | QuantConfig::Mlx { .. } | QuantConfig::Mxfp4
    )
}

/// The prefixes of the coded linears: `P.weight.quant_state.bitsandbytes__*`,
/// `P.SCB`, `P.biases` beside a U32 `P.weight`, `P_blocks`.
pub(crate) fn prefixes<'n>(
    config: &QuantConfig,
    names: impl Iterator<Item = &'n String>,
) -> Vec<String> {
    names
        .filter_map(|n| match config {
            QuantConfig::Bitsandbytes { bits: 4 } => n
                .strip_suffix(".weight.quant_state.bitsandbytes__nf4")
                .or_else(|| n.strip_suffix(".weight.quant_state.bitsandbytes__fp4")),
            QuantConfig::Bitsandbytes { .. } => n.strip_suffix(".SCB"),
            QuantConfig::Mlx { .. } => n.strip_suffix(".biases"),
            _ => n.strip_suffix("_blocks"),
        })
        .map(str::to_owned)
        .collect()
}

/// Tensors only a coded linear has, present without their anchor: the anchor is
/// missing.
///
/// # Errors
/// [`HfError::MissingTensor`] naming the anchor.
pub(crate) fn orphans<'n>(
    config: &QuantConfig,
    names: impl Iterator<Item = &'n String>,
    is_linear: impl Fn(&str) -> bool,
) -> Result<()> {
    let (owned, anchor): (&[&str], &str) = match config {
        QuantConfig::Bitsandbytes { bits: 4 } => (
            &[
                ".weight.absmax",
                ".weight.quant_map",
                ".weight.nested_absmax",
            ],
            ".weight.quant_state.bitsandbytes__nf4",
        ),
        QuantConfig::Bitsandbytes { .. } => (&[".weight_format"], ".SCB"),
        QuantConfig::Mlx { .. } => (&[".scales"], ".biases"),
        _ => (&["_scales"], "_blocks"),
    };
    for name in names {
        if let Some(prefix) = owned.iter().find_map(|o| name.strip_suffix(o))
            && !is_linear(prefix)
        {
            return Err(HfError::MissingTensor {
                linear: prefix.to_owned(),
                tensor: format!("{prefix}{anchor}"),
            });
        }
    }
    Ok(())
}

/// Checks the coded linear `prefix`; `get` looks tensors up by name.
pub(crate) fn build<'a>(
    prefix: &str,
    config: &QuantConfig,
    get: &dyn Fn(&str) -> Option<TensorRef<'a>>,
) -> Result<LinearInfo> {
    let t = Tensors { prefix, get };
    match *config {
        QuantConfig::Bitsandbytes { bits: 4 } => bnb4(&t),
        QuantConfig::Bitsandbytes { .. } => bnb8(&t),
        QuantConfig::Mlx { bits, group_size } => mlx(&t, bits, group_size),
        _ => mxfp4(&t),
    }
}

/// `P.weight` u8 `[ceil(N·K/2), 1]`, `absmax` f32 per block (u8 when nested, with
/// `nested_absmax` f32 and `nested_quant_map` f32 `[256]`), `quant_map` f32 `[16]`,
/// and the quant state JSON (`quant_type`, `blocksize`, `shape`, `nested_*`).
fn bnb4(t: &Tensors<'_, '_>) -> Result<LinearInfo> {
    let (state, kind) = match t.optional(".weight.quant_state.bitsandbytes__nf4", U8)? {
        Some(s) => (s, BnbType::Nf4),
        None => (
            t.require(".weight.quant_state.bitsandbytes__fp4", U8)?,
            BnbType::Fp4,
        ),
    };
    let bad = |why: String| HfError::InvalidQuantState {
        tensor: state.name().to_owned(),
        why,
    };
    let json: Value =
        serde_json::from_slice(state.data()).map_err(|e| bad(format!("not JSON: {e}")))?;
    let field = |k: &str| json.get(k).ok_or_else(|| bad(format!("no `{k}`")));
    let size = |k: &str| -> Result<usize> {
        let v = field(k)?;
        v.as_u64()
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&b| b > 0)
            .ok_or_else(|| bad(format!("`{k}` = {v}")))
    };
    let want = match kind {
        BnbType::Nf4 => "nf4",
        BnbType::Fp4 => "fp4",
    };
    if field("quant_type")?.as_str() != Some(want) {
        return Err(bad(format!("`quant_type` = {}", field("quant_type")?)));
    }
    let block = size("blocksize")?;
    let shape: Vec<usize> = field("shape")?
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect()
        })
        .filter(|s: &Vec<usize>| s.len() == 2)
        .ok_or_else(|| bad(format!("`shape` = {}", json["shape"])))?;
    let (n, k) = (shape[0], shape[1]);
    let elements = n
        .checked_mul(k)
        .ok_or_else(|| bad(format!("`shape` = {shape:?}")))?;
    let weight = t.require(".weight", U8)?;
    t.shape(&weight, &[elements.div_ceil(2), 1])?;
    let blocks = elements.div_ceil(block);
    let quant_map = t.require(".weight.quant_map", F32)?;
    t.shape(&quant_map, &[16])?;
    let mut aux = vec![quant_map.name().to_owned()];
    let nested = match json.get("nested_blocksize") {
        None => {
            let absmax = t.require(".weight.absmax", F32)?;
            t.shape(&absmax, &[blocks])?;
            None
        }
        Some(_) => {
            let nb = size("nested_blocksize")?;
            let offset = field("nested_offset")?
                .as_f64()
                .ok_or_else(|| bad(format!("`nested_offset` = {}", json["nested_offset"])))?;
            let absmax = t.require(".weight.absmax", U8)?;
            t.shape(&absmax, &[blocks])?;
            let nested_absmax = t.require(".weight.nested_absmax", F32)?;
            t.shape(&nested_absmax, &[blocks.div_ceil(nb)])?;
            let nested_map = t.require(".weight.nested_quant_map", F32)?;
            t.shape(&nested_map, &[256])?;
            aux.push(nested_absmax.name().to_owned());
            aux.push(nested_map.name().to_owned());
            // bitsandbytes keeps the offset as an f32 tensor; JSON holds its f64 value.
            Some((nb, offset as f32))
        }
    };
    let scheme = Scheme::Bnb4 {
        kind,
        nested: nested.is_some(),
    };
    let members = [".weight", ".weight.absmax"]
        .iter()
        .map(|f| format!("{}{f}", t.prefix))
        .chain([state.name().to_owned()])
        .chain(aux.iter().cloned())
        .collect();
    Ok(t.info(
        scheme,
        (n, k, blocks),
        &weight,
        ".weight.absmax",
        aux,
        block,
        nested,
        members,
    ))
}

/// LLM.int8: `P.weight` i8 `[N, K]`, `P.SCB` f32 `[N]` (and `P.weight_format`).
fn bnb8(t: &Tensors<'_, '_>) -> Result<LinearInfo> {
    let weight = t.require(".weight", I8)?;
    let [n, k] = t.rank2(&weight)?;
    let scb = t.require(".SCB", F32)?;
    t.shape(&scb, &[n])?;
    let mut members = vec![weight.name().to_owned(), scb.name().to_owned()];
    if let Some(f) = t.optional(".weight_format", &[Dtype::U8])? {
        members.push(f.name().to_owned());
    }
    Ok(t.info(
        Scheme::Bnb8,
        (n, k, n),
        &weight,
        ".SCB",
        Vec::new(),
        k.max(1),
        None,
        members,
    ))
}

/// MLX: `P.weight` u32 `[N, K·b/32]` (codes LSB first), `P.scales` and `P.biases`
/// `[N, K/group_size]`, f16, bf16 or f32 alike.
fn mlx(t: &Tensors<'_, '_>, bits: u32, group_size: usize) -> Result<LinearInfo> {
    let weight = t.require(".weight", U32)?;
    let [n, words] = t.rank2(&weight)?;
    let scales = t.require(".scales", FLOATS)?;
    let [_, groups] = t.rank2(&scales)?;
    let k = groups.saturating_mul(group_size);
    t.shape(&scales, &[n, groups])?;
    let want_words = k.checked_mul(bits as usize).map(|b| b.div_ceil(32));
    if want_words != Some(words) || !(k * bits as usize).is_multiple_of(32) {
        return Err(HfError::WrongShape {
            tensor: weight.name().to_owned(),
            expected: vec![n, want_words.unwrap_or(0)],
            got: weight.shape().to_vec(),
        });
    }
    let biases = t.require(".biases", FLOATS)?;
    t.shape(&biases, &[n, groups])?;
    if biases.dtype() != scales.dtype() {
        return Err(HfError::WrongDtype {
            tensor: biases.name().to_owned(),
            expected: match scales.dtype() {
                Dtype::F16 => &FLOATS[..1],
                Dtype::BF16 => &FLOATS[1..2],
                _ => &FLOATS[2..],
            },
            got: biases.dtype(),
        });
    }
    let aux = vec![biases.name().to_owned()];
    let members = vec![
        weight.name().to_owned(),
        scales.name().to_owned(),
        biases.name().to_owned(),
    ];
    let scheme = Scheme::Mlx { bits };
    Ok(t.info(
        scheme,
        (n, k, n * groups),
        &weight,
        ".scales",
        aux,
        group_size,
        None,
        members,
    ))
}

/// gpt-oss: `P_blocks` u8 `[E, N, K/32, 16]` (two e2m1 codes per byte, low nibble
/// first), `P_scales` u8 `[E, N, K/32]` (e8m0). The output is transformers' `P`,
/// `[E, K, N]`.
fn mxfp4(t: &Tensors<'_, '_>) -> Result<LinearInfo> {
    let blocks = t.require("_blocks", U8)?;
    let [e, n, g, b] = match *blocks.shape() {
        [e, n, g, b] => [e, n, g, b],
        _ => {
            return Err(HfError::WrongRank {
                tensor: blocks.name().to_owned(),
                expected: 4,
                got: blocks.shape().to_vec(),
            });
        }
    };
    if b != 16 {
        t.shape(&blocks, &[e, n, g, 16])?;
    }
    let scales = t.require("_scales", U8)?;
    t.shape(&scales, &[e, n, g])?;
    let k = g * 32;
    let members = vec![blocks.name().to_owned(), scales.name().to_owned()];
    let mut info = t.info(
        Scheme::Mxfp4,
        (e * k, n, e * n * g),
        &blocks,
        "_scales",
        Vec::new(),
        32,
        None,
        members,
    );
    if let Some(c) = info.coded.as_mut() {
        c.out_name = t.prefix.to_owned();
        c.out_shape = vec![e, k, n];
    }
    Ok(info)
}

/// A linear's tensors by suffix.
struct Tensors<'p, 'a> {
    prefix: &'p str,
    get: &'p dyn Fn(&str) -> Option<TensorRef<'a>>,
}

impl<'a> Tensors<'_, 'a> {
    fn optional(&self, suffix: &str, dtypes: &'static [Dtype]) -> Result<Option<TensorRef<'a>>> {
        let Some(t) = (self.get)(&format!("{}{suffix}", self.prefix)) else {
            return Ok(None);
        };
        if !dtypes.contains(&t.dtype()) {
            return Err(HfError::WrongDtype {
                tensor: t.name().to_owned(),
                expected: dtypes,
                got: t.dtype(),
            });
        }
        Ok(Some(t))
    }

    fn require(&self, suffix: &str, dtypes: &'static [Dtype]) -> Result<TensorRef<'a>> {
        self.optional(suffix, dtypes)?
            .ok_or_else(|| HfError::MissingTensor {
                linear: self.prefix.to_owned(),
                tensor: format!("{}{suffix}", self.prefix),
            })
    }

    fn shape(&self, t: &TensorRef<'_>, expected: &[usize]) -> Result<()> {
        if t.shape() == expected {
            return Ok(());
        }
        Err(HfError::WrongShape {
            tensor: t.name().to_owned(),
            expected: expected.to_vec(),
            got: t.shape().to_vec(),
        })
    }

    fn rank2(&self, t: &TensorRef<'_>) -> Result<[usize; 2]> {
        match *t.shape() {
            [a, b] => Ok([a, b]),
            _ => Err(HfError::WrongRank {
                tensor: t.name().to_owned(),
                expected: 2,
                got: t.shape().to_vec(),
            }),
        }
    }

    /// The linear's record: `(n, k, groups)` of its 2-D output view.
    #[allow(clippy::too_many_arguments)]
    fn info(
        &self,
        scheme: Scheme,
        (n, k, groups): (usize, usize, usize),
        packed: &TensorRef<'_>,
        scales: &str,
        aux: Vec<String>,
        block: usize,
        nested: Option<(usize, f32)>,
        members: Vec<String>,
    ) -> LinearInfo {
        let coded = CodedInfo {
            members,
            aux,
            block,
            nested,
            out_name: format!("{}.weight", self.prefix),
            out_shape: vec![n, k],
        };
        LinearInfo::coded(
            scheme,
            n,
            k,
            groups,
            packed.name(),
            &format!("{}{scales}", self.prefix),
            coded,
        )
    }
}
