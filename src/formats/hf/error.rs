//! The one error type of the checkpoint reader.

use std::path::PathBuf;

use dq_runtime::DType;
use safetensors::{Dtype, SafeTensorError};

use super::config::QuantMethod;

/// What is wrong with a HuggingFace checkpoint (or a call on one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HfError {
    /// A file could not be opened, read or mapped.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// `config.json`, the shard index or a metadata JSON string does not parse.
    #[error("{path}: invalid JSON in {what}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Which JSON (`config.json`, `the shard index`, `metadata quantization_config`).
        what: &'static str,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// Quantized tensors, but no `quantization_config` says their format.
    #[error(
        "{path}: no quantization config (config.json `quantization_config`, or safetensors \
         metadata `quantization_config` / `gptq_bits`)"
    )]
    NoQuantizationConfig {
        /// The checkpoint.
        path: PathBuf,
    },
    /// A required `quantization_config` field is absent.
    #[error("quantization_config: missing `{field}`")]
    MissingConfigField {
        /// The field.
        field: &'static str,
    },
    /// A `quantization_config` field has a value of the wrong kind or range.
    #[error("quantization_config: invalid `{field}`: {value}")]
    InvalidConfigField {
        /// The field.
        field: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// `quant_method` names a method dq does not read.
    #[error(
        "quantization_config: unknown quant_method {method:?} (dq reads gptq, awq, compressed-tensors, bitsandbytes, mxfp4)"
    )]
    UnknownQuantMethod {
        /// The value.
        method: String,
    },
    /// A bit width the format has but dq does not dequantize (2/3-bit GPTQ among them).
    #[error("{method}: {bits}-bit weights are unsupported (dq reads {supported})")]
    UnsupportedBits {
        /// The method.
        method: QuantMethod,
        /// The bit width.
        bits: u64,
        /// What dq reads for this method.
        supported: &'static str,
    },
    /// A configuration dq does not dequantize (AWQ GEMV, compressed-tensors float, ...).
    #[error("{method}: `{field}` = {value} is unsupported")]
    UnsupportedConfig {
        /// The method.
        method: QuantMethod,
        /// The field.
        field: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// A folder with neither `model.safetensors` nor `model.safetensors.index.json`.
    #[error("{dir}: no model.safetensors or model.safetensors.index.json")]
    NoWeights {
        /// The folder.
        dir: PathBuf,
    },
    /// The shard index names a file outside the checkpoint folder.
    #[error("{index}: shard {shard:?} is not a file name in the checkpoint folder")]
    BadShardName {
        /// The index file.
        index: PathBuf,
        /// The shard name as written.
        shard: String,
    },
    /// The shard index lists a tensor that its shard does not hold.
    #[error("{index}: tensor {tensor} is not in its shard {shard}")]
    NotInShard {
        /// The tensor.
        tensor: String,
        /// The index file.
        index: PathBuf,
        /// The shard.
        shard: PathBuf,
    },
    /// Two shards hold a tensor of the same name.
    #[error("tensor {tensor} is in both {first} and {second}")]
    DuplicateTensor {
        /// The tensor.
        tensor: String,
        /// One shard.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// The file ends before its 8-byte length or the JSON header it announces.
    #[error(
        "{path}: truncated safetensors header: the file has {file_len} bytes, the header needs {needed}"
    )]
    TruncatedHeader {
        /// The file.
        path: PathBuf,
        /// The file's length.
        file_len: u64,
        /// The bytes the header needs (8, or 8 + its announced length).
        needed: u64,
    },
    /// The announced header length is beyond the safetensors limit.
    #[error("{path}: safetensors header length {header_len} exceeds the limit of {limit} bytes")]
    HeaderTooLarge {
        /// The file.
        path: PathBuf,
        /// The announced length.
        header_len: u64,
        /// The limit.
        limit: u64,
    },
    /// A tensor's data offsets run past the end of the file.
    #[error(
        "{path}: tensor {tensor} ends at data byte {end}, past the end of the data ({data_len} bytes)"
    )]
    OffsetsPastEnd {
        /// The file.
        path: PathBuf,
        /// The first tensor past the end.
        tensor: String,
        /// Its end offset.
        end: u64,
        /// The data section's length.
        data_len: u64,
    },
    /// Bytes after the last tensor's data (safetensors forbids them).
    #[error("{path}: the tensors end at data byte {end} but the data has {data_len} bytes")]
    TrailingData {
        /// The file.
        path: PathBuf,
        /// The last tensor's end offset.
        end: u64,
        /// The data section's length.
        data_len: u64,
    },
    /// Any other invalid safetensors header (bad JSON, overlapping offsets, ...).
    #[error("{path}: invalid safetensors file: {source}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// The safetensors crate's error.
        #[source]
        source: SafeTensorError,
    },
    /// A bitsandbytes quant state (its JSON tensor) is invalid.
    #[error("tensor {tensor}: invalid quant state: {why}")]
    InvalidQuantState {
        /// The quant state tensor.
        tensor: String,
        /// What is wrong.
        why: String,
    },
    /// A backend has no kernel for a linear's scheme.
    #[error("linear {linear}: the {backend} backend does not run {scheme} weights")]
    NoKernel {
        /// The linear.
        linear: String,
        /// Its scheme.
        scheme: String,
        /// The backend asked for.
        backend: &'static str,
    },
    /// A quantized linear lacks one of its tensors.
    #[error("quantized linear {linear:?}: missing tensor {tensor}")]
    MissingTensor {
        /// The linear's prefix.
        linear: String,
        /// The missing tensor's full name.
        tensor: String,
    },
    /// A tensor's shape does not fit the format and the linear's other tensors.
    #[error("tensor {tensor}: shape {got:?}, expected {expected:?}")]
    WrongShape {
        /// The tensor.
        tensor: String,
        /// The shape the format requires.
        expected: Vec<usize>,
        /// The shape in the file.
        got: Vec<usize>,
    },
    /// A tensor of the wrong rank.
    #[error("tensor {tensor}: shape {got:?}, expected {expected} dimensions")]
    WrongRank {
        /// The tensor.
        tensor: String,
        /// The rank the format requires.
        expected: usize,
        /// The shape in the file.
        got: Vec<usize>,
    },
    /// A tensor's dimension is not a multiple the format requires.
    #[error("tensor {tensor}: dimension {dim} is {value}, not a multiple of {multiple}")]
    NotAMultiple {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// Its size.
        value: usize,
        /// The required multiple.
        multiple: usize,
    },
    /// A tensor's dtype is not one the format allows there.
    #[error("tensor {tensor}: dtype {got}, expected one of {expected:?}")]
    WrongDtype {
        /// The tensor.
        tensor: String,
        /// The allowed dtypes.
        expected: &'static [Dtype],
        /// The dtype in the file.
        got: Dtype,
    },
    /// A `g_idx` entry names no group.
    #[error("tensor {tensor}: entry {index} is {value}, outside 0..{groups}")]
    GroupIndexOutOfRange {
        /// The tensor.
        tensor: String,
        /// The input row.
        index: usize,
        /// Its group index.
        value: i64,
        /// The number of groups.
        groups: usize,
    },
    /// compressed-tensors' `weight_shape` holds a negative or oversized dimension.
    #[error("tensor {tensor}: invalid weight shape {value:?}")]
    InvalidWeightShape {
        /// The tensor.
        tensor: String,
        /// Its values.
        value: Vec<i64>,
    },
    /// The JIT could not compile the linear's function.
    #[error("linear {linear}: {source}")]
    Jit {
        /// The linear's prefix.
        linear: String,
        /// Why.
        source: crate::formats::jit::LinearJitError,
    },
    /// The linear's packed tensors do not form a plan (a view past its data).
    #[error("linear {linear}: {source}")]
    Plan {
        /// The linear's prefix.
        linear: String,
        /// What the plan found.
        source: dq_runtime::linear::LinearError,
    },
    /// The runtime refused a linear's elementwise plan (FP8), or its backend.
    #[error("linear {linear}: {source}")]
    Runtime {
        /// The linear's prefix.
        linear: String,
        /// What the runtime said.
        source: Box<dq_runtime::Error>,
    },
    /// An output buffer whose length is not the weight's `N * K`.
    #[error("linear {linear}: output holds {got} elements, the weight has {expected}")]
    OutputLength {
        /// The linear's prefix.
        linear: String,
        /// `N * K`.
        expected: usize,
        /// The output's length.
        got: usize,
    },
    /// A dequantization output dtype other than f32, f16, bf16.
    #[error("output dtype {dtype}: the reference writes f32, f16 or bf16")]
    UnsupportedOutput {
        /// The dtype asked for.
        dtype: DType,
    },
    /// An output buffer of the wrong length.
    #[error("output buffer: {got} bytes, expected {expected}")]
    OutputSize {
        /// Bytes needed (`N * K * size`).
        expected: usize,
        /// Bytes given.
        got: usize,
    },
}

/// The reader's result.
pub type Result<T, E = HfError> = std::result::Result<T, E>;
