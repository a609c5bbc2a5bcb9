//! Quantized linears: a prefix's packed tensors, checked against the format (SPEC §11).

use std::fmt;
use std::path::Path;

use safetensors::Dtype;

use super::checkpoint::TensorRef;
use super::config::{CtStrategy, GptqVersion, QuantConfig};
use super::error::{HfError, Result};
use super::families::{self, BnbType, CodedInfo};
use super::float::FloatFormat;
use super::float_build;
use dq_runtime::DType;

/// Scale dtypes accepted for every format.
const FLOATS: &[Dtype] = &[Dtype::F16, Dtype::BF16, Dtype::F32];
const I32: &[Dtype] = &[Dtype::I32];
const I32_I64: &[Dtype] = &[Dtype::I32, Dtype::I64];

/// GPTQ and AWQ tensor names, after the linear's prefix.
const GPTQ_FIELDS: &[&str] = &["qweight", "qzeros", "scales", "g_idx"];
/// compressed-tensors tensor names, after the linear's prefix.
const CT_FIELDS: &[&str] = &[
    "weight_packed",
    "weight_scale",
    "weight_zero_point",
    "weight_shape",
    "weight_g_idx",
];

/// How a linear's integers are packed and offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// GPTQ: `qweight` i32 `[ceil(K·b/32), N]` (weight `(k, n)` at bit `b·(k % (32/b))` of
    /// word `(k / (32/b), n)`), `qzeros` i32 `[G, ceil(N·b/32)]` packed the same way along N;
    /// the fields past K or N in a last word are padding (GPTQModel), never read.
    Gptq {
        /// 4 or 8.
        bits: u32,
        /// v1 adds 1 to the stored zero point.
        version: GptqVersion,
    },
    /// AWQ GEMM 4-bit: `qweight` i32 `[K, N/8]`, nibble `i` of a word holds column
    /// `8c + [0, 2, 4, 6, 1, 3, 5, 7][i]`; `qzeros` `[G, N/8]` the same.
    Awq,
    /// compressed-tensors pack-quantized: `weight_packed` i32 `[N, ceil(K·b/32)]`, element k
    /// of row n at bit `b·(k % (32/b))`, stored as `q + 2^(b-1)`; `weight_zero_point` i32
    /// `[ceil(N·b/32), G]` packed along N with the same offset.
    CompressedTensors {
        /// 4 or 8.
        bits: u32,
    },
    /// Float weights (FP8 e4m3, NVFP4 e2m1) with one f32-valued scale per
    /// `[block_n, block_k]` block ([`FloatFormat`]): `x * s` (SPEC §11).
    Float {
        /// Which format.
        format: FloatFormat,
        /// Rows per scale block (1 per channel or group; N per tensor).
        block_n: u32,
        /// Inputs per scale block.
        block_k: u32,
    },
    /// bitsandbytes 4-bit: `P.weight` u8, two codes a byte (high nibble first) of the
    /// flattened weight, `quant_map[code] · absmax[block]`.
    Bnb4 {
        /// NF4 or FP4.
        kind: BnbType,
        /// `absmax` double-quantized (u8 codes, `nested_absmax`, `nested_quant_map`).
        nested: bool,
    },
    /// bitsandbytes LLM.int8: `(weight · SCB[n]) · (1/127)`.
    Bnb8,
    /// MLX affine: `weight` u32 codes LSB first, `code · scale + bias` per group.
    Mlx {
        /// 2, 3, 4, 6 or 8.
        bits: u32,
    },
    /// gpt-oss MXFP4: e2m1 codes (low nibble first) times `2^(e - 127)` per 32.
    Mxfp4,
}

impl fmt::Display for Scheme {
    /// `GPTQ v1 4-bit`, `AWQ 4-bit`, `compressed-tensors 8-bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scheme::Gptq { bits, version } => {
                let v = match version {
                    GptqVersion::V1 => "v1",
                    GptqVersion::V2 => "v2",
                };
                write!(f, "GPTQ {v} {bits}-bit")
            }
            Scheme::Awq => f.write_str("AWQ 4-bit"),
            Scheme::CompressedTensors { bits } => write!(f, "compressed-tensors {bits}-bit"),
            Scheme::Float { format, .. } => f.write_str(match format {
                FloatFormat::Fp8 => "FP8 e4m3",
                FloatFormat::CtFp8 => "compressed-tensors FP8 e4m3",
                FloatFormat::CtNvfp4 => "compressed-tensors NVFP4",
                FloatFormat::ModelOptNvfp4 => "ModelOpt NVFP4",
            }),
            Scheme::Bnb4 { kind, nested } => {
                let kind = match kind {
                    BnbType::Nf4 => "NF4",
                    BnbType::Fp4 => "FP4",
                };
                let dq = if nested { " double-quant" } else { "" };
                write!(f, "bitsandbytes {kind}{dq}")
            }
            Scheme::Bnb8 => f.write_str("bitsandbytes LLM.int8"),
            Scheme::Mlx { bits } => write!(f, "MLX affine {bits}-bit"),
            Scheme::Mxfp4 => f.write_str("MXFP4"),
        }
    }
}

impl Scheme {
    /// Bits per weight.
    pub fn bits(&self) -> u32 {
        match *self {
            Scheme::Gptq { bits, .. }
            | Scheme::CompressedTensors { bits }
            | Scheme::Mlx { bits } => bits,
            Scheme::Awq | Scheme::Bnb4 { .. } | Scheme::Mxfp4 => 4,
            Scheme::Bnb8 => 8,
            Scheme::Float { format, .. } if format.element() == DType::F4E2M1 => 4,
            Scheme::Float { .. } => 8,
        }
    }
}

/// What `build` found out about a linear (owned; the views are made on demand).
pub(crate) struct LinearInfo {
    pub scheme: Scheme,
    pub n: usize,
    pub k: usize,
    pub groups: usize,
    /// Inputs per group when there is no `g_idx` (K, at least 1, per channel).
    pub group_size: usize,
    pub g_idx: Option<Vec<u32>>,
    pub packed: String,
    pub scales: String,
    pub zeros: Option<String>,
    /// NVFP4's per-tensor scale, read at open.
    pub global_scale: Option<f32>,
    pub fields: &'static [&'static str],
    /// A coded linear's extra record (bitsandbytes, MLX, MXFP4).
    pub coded: Option<CodedInfo>,
}

impl LinearInfo {
    /// The names this linear may hold (present or not).
    pub fn tensor_names<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = String> + 'a {
        let coded = self.coded.iter().flat_map(|c| c.members.iter().cloned());
        self.fields
            .iter()
            .map(move |f| join(prefix, f))
            .chain(coded)
    }

    /// A coded linear's record.
    pub fn coded(
        scheme: Scheme,
        n: usize,
        k: usize,
        groups: usize,
        packed: &str,
        scales: &str,
        coded: CodedInfo,
    ) -> LinearInfo {
        LinearInfo {
            scheme,
            n,
            k,
            groups,
            group_size: coded.block,
            g_idx: None,
            packed: packed.to_owned(),
            scales: scales.to_owned(),
            zeros: None,
            fields: &[],
            global_scale: None,
            coded: Some(coded),
        }
    }
}

/// A quantized linear's packed tensors, with its dimensions: the weight is `[N, K]`
/// (`nn.Linear`'s `[out_features, in_features]`).
#[derive(Clone, Copy, Debug)]
pub struct QuantLinear<'a> {
    name: &'a str,
    scheme: Scheme,
    n: usize,
    k: usize,
    groups: usize,
    group_size: usize,
    g_idx: Option<&'a [u32]>,
    packed: TensorRef<'a>,
    scales: TensorRef<'a>,
    zeros: Option<TensorRef<'a>>,
    /// 1 where the format has none (an `Option` would make the view larger).
    global_scale: f32,
    coded: Option<&'a CodedInfo>,
    aux: [Option<TensorRef<'a>>; 3],
}

impl<'a> QuantLinear<'a> {
    pub(crate) fn new(
        name: &'a str,
        info: &'a LinearInfo,
        packed: TensorRef<'a>,
        scales: TensorRef<'a>,
        zeros: Option<TensorRef<'a>>,
        aux: [Option<TensorRef<'a>>; 3],
    ) -> Self {
        QuantLinear {
            name,
            scheme: info.scheme,
            n: info.n,
            k: info.k,
            groups: info.groups,
            group_size: info.group_size,
            g_idx: info.g_idx.as_deref(),
            packed,
            scales,
            zeros,
            global_scale: info.global_scale.unwrap_or(1.0),
            coded: info.coded.as_ref(),
            aux,
        }
    }

    /// The output tensor's name: `<prefix>.weight`, or gpt-oss' `<prefix>` (the name
    /// without `_blocks`).
    pub fn weight_name(&self) -> String {
        self.coded
            .map_or_else(|| format!("{}.weight", self.name), |c| c.out_name.clone())
    }

    /// The output tensor's shape: `[N, K]`, or gpt-oss' `[E, K, N]` (transformers'
    /// orientation; [`n`](Self::n) is then `E·K` rows of `N`).
    pub fn shape(&self) -> Vec<usize> {
        self.coded
            .map_or_else(|| vec![self.n, self.k], |c| c.out_shape.clone())
    }

    pub(crate) fn coded_info(&self) -> Option<&'a CodedInfo> {
        self.coded
    }

    /// Extra tensor `slot` of a coded linear (see [`CodedInfo::aux`]).
    pub(crate) fn aux(&self, slot: usize) -> Option<TensorRef<'a>> {
        self.aux.get(slot).copied().flatten()
    }

    /// The prefix (`model.layers.0.mlp.up_proj`); the dequantized weight is `<prefix>.weight`.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The packing scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Output features (rows of the weight).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features (columns of the weight).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Number of groups along K (rows of GPTQ/AWQ `scales`, columns of compressed-tensors'
    /// `weight_scale`).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Inputs per group (the config's group size; K, at least 1, per channel). With a
    /// `g_idx`, [`group_of`](Self::group_of) reads the group from it instead.
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// The act-order group of each input, when the checkpoint has one (validated: every
    /// entry is below [`groups`](Self::groups)).
    pub fn g_idx(&self) -> Option<&'a [u32]> {
        self.g_idx
    }

    /// The group of input `k`: `g_idx[k]`, else `k / group_size`.
    pub fn group_of(&self, k: usize) -> usize {
        match self.g_idx {
            Some(g) => g[k] as usize,
            None => k / self.group_size,
        }
    }

    /// The packed integers (`qweight` or `weight_packed`).
    pub fn packed(&self) -> TensorRef<'a> {
        self.packed
    }

    /// The scales (`scales` or `weight_scale`): f16, bf16 or f32.
    pub fn scales(&self) -> TensorRef<'a> {
        self.scales
    }

    /// The packed zero points (`qzeros` or `weight_zero_point`; `None` when symmetric).
    pub fn zeros(&self) -> Option<TensorRef<'a>> {
        self.zeros
    }

    /// NVFP4's per-tensor scale as stored (compressed-tensors' `weight_global_scale`,
    /// divided by; ModelOpt's `weight_scale_2`, multiplied by); `None` otherwise.
    pub fn global_scale(&self) -> Option<f32> {
        match self.scheme {
            Scheme::Float {
                format: FloatFormat::CtNvfp4 | FloatFormat::ModelOptNvfp4,
                ..
            } => Some(self.global_scale),
            _ => None,
        }
    }
}

/// The prefixes of the quantized linears: those with an anchor tensor (`qweight`, or
/// `weight_packed`).
///
/// # Errors
/// [`HfError::NoQuantizationConfig`] when anchors exist but no config says their format.
pub(crate) fn prefixes<'n>(
    config: Option<&QuantConfig>,
    mut names: impl Iterator<Item = &'n String>,
    path: &Path,
) -> Result<Vec<String>> {
    if let Some(c) = config.filter(|c| families::is_coded(c)) {
        return Ok(families::prefixes(c, names));
    }
    let anchor = match config {
        None if names.any(|n| matches!(split(n).1, "qweight" | "weight_packed")) => {
            return Err(HfError::NoQuantizationConfig {
                path: path.to_owned(),
            });
        }
        None => return Ok(Vec::new()),
        Some(QuantConfig::CompressedTensors { .. }) => "weight_packed",
        Some(c) => match c.float_format() {
            Some(f) => float_build::anchor(f),
            None => "qweight",
        },
    };
    Ok(names
        .map(|n| split(n))
        .filter(|&(_, f)| f == anchor)
        .map(|(p, _)| p.to_owned())
        .collect())
}

/// Tensors that only a quantized linear has (`qzeros`, `weight_shape`, ...): present
/// without their anchor, the anchor is missing.
///
/// # Errors
/// [`HfError::MissingTensor`] naming the anchor.
pub(crate) fn orphans<'n>(
    config: &QuantConfig,
    names: impl Iterator<Item = &'n String>,
    is_linear: impl Fn(&str) -> bool,
) -> Result<()> {
    let (anchor, owned): (&str, &[&str]) = match config {
        QuantConfig::CompressedTensors { .. } => {
            ("weight_packed", &["weight_shape", "weight_zero_point"])
        }
        QuantConfig::CtNvfp4 => ("weight_packed", &["weight_global_scale"]),
        QuantConfig::Fp8 { .. } | QuantConfig::CtFp8 { .. } | QuantConfig::ModelOptNvfp4 => {
            return Ok(());
        }
        c if families::is_coded(c) => return families::orphans(c, names, is_linear),
        _ => ("qweight", &["qzeros"]),
    };
    for name in names {
        let (prefix, field) = split(name);
        if owned.contains(&field) && !is_linear(prefix) {
            return Err(HfError::MissingTensor {
                linear: prefix.to_owned(),
                tensor: join(prefix, anchor),
            });
        }
    }
    Ok(())
}

/// Checks the linear `prefix` against `config`; `get` looks tensors up by name.
pub(crate) fn build<'a>(
    prefix: &str,
    config: &QuantConfig,
    get: &dyn Fn(&str) -> Option<TensorRef<'a>>,
) -> Result<LinearInfo> {
    let t = Tensors { prefix, get };
    match *config {
        QuantConfig::Gptq {
            bits,
            group_size,
            desc_act,
            version,
            ..
        } => gptq(&t, bits, group_size, desc_act, version),
        QuantConfig::Awq { group_size } => awq(&t, group_size),
        QuantConfig::CompressedTensors {
            bits,
            strategy,
            symmetric,
        } => compressed_tensors(&t, bits, strategy, symmetric),
        QuantConfig::Fp8 { block } => float_build::fp8(&t, block),
        QuantConfig::CtFp8 { scales } => float_build::ct_fp8(&t, scales),
        QuantConfig::CtNvfp4 => float_build::nvfp4(&t, FloatFormat::CtNvfp4),
        QuantConfig::ModelOptNvfp4 => float_build::nvfp4(&t, FloatFormat::ModelOptNvfp4),
        _ => families::build(prefix, config, get),
    }
}

fn gptq(
    t: &Tensors<'_, '_>,
    bits: u32,
    group_size: Option<usize>,
    desc_act: bool,
    version: GptqVersion,
) -> Result<LinearInfo> {
    let per_word = (32 / bits) as usize;
    let qweight = t.require("qweight", I32)?;
    let [rows, n] = rank2(&qweight)?;
    let g_idx_t = t.optional("g_idx", I32)?;
    let k = gptq_k(rows, per_word, g_idx_t.as_ref());
    let (groups, group_size) = groups_ceil(k, group_size);
    let qzeros = t.require("qzeros", I32)?;
    shape(&qzeros, &[groups, n.div_ceil(per_word)])?;
    let scales = t.require("scales", FLOATS)?;
    shape(&scales, &[groups, n])?;
    let g_idx = match g_idx_t {
        Some(g) => g_idx(&g, k, groups, false)?,
        None if desc_act => return Err(t.missing("g_idx")),
        None => None,
    };
    Ok(LinearInfo {
        scheme: Scheme::Gptq { bits, version },
        n,
        k,
        groups,
        group_size,
        g_idx,
        packed: qweight.name().to_owned(),
        scales: scales.name().to_owned(),
        zeros: Some(qzeros.name().to_owned()),
        global_scale: None,
        fields: GPTQ_FIELDS,
        coded: None,
    })
}

fn awq(t: &Tensors<'_, '_>, group_size: Option<usize>) -> Result<LinearInfo> {
    let qweight = t.require("qweight", I32)?;
    let [k, cols] = rank2(&qweight)?;
    let n = cols * 8;
    let (groups, group_size) = match group_size {
        Some(g) => {
            multiple(&qweight, 0, g)?;
            (k / g, g)
        }
        None => (1, k.max(1)),
    };
    let qzeros = t.require("qzeros", I32)?;
    shape(&qzeros, &[groups, cols])?;
    let scales = t.require("scales", FLOATS)?;
    shape(&scales, &[groups, n])?;
    Ok(LinearInfo {
        scheme: Scheme::Awq,
        n,
        k,
        groups,
        group_size,
        g_idx: None,
        packed: qweight.name().to_owned(),
        scales: scales.name().to_owned(),
        zeros: Some(qzeros.name().to_owned()),
        global_scale: None,
        fields: &GPTQ_FIELDS[..3],
        coded: None,
    })
}

fn compressed_tensors(
    t: &Tensors<'_, '_>,
    bits: u32,
    strategy: CtStrategy,
    symmetric: bool,
) -> Result<LinearInfo> {
    let per_word = (32 / bits) as usize;
    let weight_shape = t.require("weight_shape", I32_I64)?;
    let [n, k] = ct_weight_shape(&weight_shape)?;
    let packed = t.require("weight_packed", I32)?;
    shape(&packed, &[n, k.div_ceil(per_word)])?;
    let (groups, group_size) = match strategy {
        CtStrategy::Channel => (1, k.max(1)),
        CtStrategy::Group(g) if !k.is_multiple_of(g) => {
            return Err(HfError::NotAMultiple {
                tensor: weight_shape.name().to_owned(),
                dim: 1,
                value: k,
                multiple: g,
            });
        }
        CtStrategy::Group(g) => (k / g, g),
    };
    let scales = t.require("weight_scale", FLOATS)?;
    shape(&scales, &[n, groups])?;
    let zeros = if symmetric {
        None
    } else {
        let z = t.require("weight_zero_point", I32)?;
        shape(&z, &[n.div_ceil(per_word), groups])?;
        Some(z.name().to_owned())
    };
    // compressed-tensors reads a g_idx holding -1 as "column order" (no act-order).
    let g_idx = match t.optional("weight_g_idx", I32)? {
        Some(g) => g_idx(&g, k, groups, true)?,
        None => None,
    };
    Ok(LinearInfo {
        scheme: Scheme::CompressedTensors { bits },
        n,
        k,
        groups,
        group_size,
        g_idx,
        packed: packed.name().to_owned(),
        scales: scales.name().to_owned(),
        zeros,
        global_scale: None,
        fields: CT_FIELDS,
        coded: None,
    })
}

/// GPTQ's K: `g_idx`'s length where its packed rows are `qweight`'s (GPTQModel pads
/// the last word of a K that is not a multiple of `32 / b`), else every field of the rows.
fn gptq_k(rows: usize, per_word: usize, g_idx: Option<&TensorRef<'_>>) -> usize {
    match g_idx.map(TensorRef::shape) {
        Some(&[k]) if k.div_ceil(per_word) == rows => k,
        _ => rows * per_word,
    }
}

/// Groups of `group_size` along K, the last one possibly short (`None`: one group).
fn groups_ceil(k: usize, group_size: Option<usize>) -> (usize, usize) {
    match group_size {
        Some(g) => (k.div_ceil(g), g),
        None => (1, k.max(1)),
    }
}

/// A linear's tensors by field name.
pub(super) struct Tensors<'p, 'a> {
    prefix: &'p str,
    get: &'p dyn Fn(&str) -> Option<TensorRef<'a>>,
}

impl<'a> Tensors<'_, 'a> {
    fn missing(&self, field: &str) -> HfError {
        HfError::MissingTensor {
            linear: self.prefix.to_owned(),
            tensor: join(self.prefix, field),
        }
    }

    fn optional(&self, field: &str, dtypes: &'static [Dtype]) -> Result<Option<TensorRef<'a>>> {
        let Some(t) = (self.get)(&join(self.prefix, field)) else {
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

    pub(super) fn require(&self, field: &str, dtypes: &'static [Dtype]) -> Result<TensorRef<'a>> {
        self.optional(field, dtypes)?
            .ok_or_else(|| self.missing(field))
    }
}

pub(super) fn shape(t: &TensorRef<'_>, expected: &[usize]) -> Result<()> {
    if t.shape() == expected {
        return Ok(());
    }
    Err(HfError::WrongShape {
        tensor: t.name().to_owned(),
        expected: expected.to_vec(),
        got: t.shape().to_vec(),
    })
}

pub(super) fn rank2(t: &TensorRef<'_>) -> Result<[usize; 2]> {
    match *t.shape() {
        [a, b] => Ok([a, b]),
        _ => Err(HfError::WrongRank {
            tensor: t.name().to_owned(),
            expected: 2,
            got: t.shape().to_vec(),
        }),
    }
}

fn multiple(t: &TensorRef<'_>, dim: usize, of: usize) -> Result<()> {
    let value = t.shape()[dim];
    if value.is_multiple_of(of) {
        return Ok(());
    }
    Err(HfError::NotAMultiple {
        tensor: t.name().to_owned(),
        dim,
        value,
        multiple: of,
    })
}

/// `weight_shape` `[N, K]` (i32 or i64 as torch wrote it).
fn ct_weight_shape(t: &TensorRef<'_>) -> Result<[usize; 2]> {
    shape(t, &[2])?;
    let value: Vec<i64> = match t.dtype() {
        Dtype::I64 => t
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect(),
        _ => t
            .data()
            .chunks_exact(4)
            .map(|c| i64::from(le_i32(c)))
            .collect(),
    };
    let dim = |v: i64| usize::try_from(v).ok();
    match (dim(value[0]), dim(value[1])) {
        (Some(n), Some(k)) => Ok([n, k]),
        _ => Err(HfError::InvalidWeightShape {
            tensor: t.name().to_owned(),
            value,
        }),
    }
}

/// A `g_idx` `[K]` whose entries all lie in `0..groups`. With `minus_one_is_none`, one
/// entry of -1 makes it `None` (compressed-tensors' "column order": no act-order).
fn g_idx(
    t: &TensorRef<'_>,
    k: usize,
    groups: usize,
    minus_one_is_none: bool,
) -> Result<Option<Vec<u32>>> {
    shape(t, &[k])?;
    let values: Vec<i32> = t.data().chunks_exact(4).map(le_i32).collect();
    if minus_one_is_none && values.contains(&-1) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(k);
    for (i, &v) in values.iter().enumerate() {
        match u32::try_from(v) {
            Ok(g) if (g as usize) < groups => out.push(g),
            _ => return Err(out_of_range(t, i, i64::from(v), groups)),
        }
    }
    Ok(Some(out))
}

fn out_of_range(t: &TensorRef<'_>, index: usize, value: i64, groups: usize) -> HfError {
    HfError::GroupIndexOutOfRange {
        tensor: t.name().to_owned(),
        index,
        value,
        groups,
    }
}

/// A little-endian i32 from 4 bytes.
pub(crate) fn le_i32(c: &[u8]) -> i32 {
    i32::from_le_bytes(c.try_into().unwrap_or_default())
}

/// `prefix.field` (just `field` for an empty prefix).
fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

/// `(prefix, field)` at the last dot (`("", name)` without one).
fn split(name: &str) -> (&str, &str) {
    name.rsplit_once('.').unwrap_or(("", name))
}
