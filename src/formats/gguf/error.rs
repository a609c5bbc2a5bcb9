//! Everything the GGUF reader and the reference decoders reject.

use std::path::PathBuf;

/// A GGUF file that cannot be read, or a tensor that cannot be decoded.
///
/// Offsets are byte offsets from the start of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// Opening or mapping the file failed.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file (starts with \"{}\", expected \"GGUF\")", found.escape_ascii())]
    BadMagic {
        /// The first bytes (fewer when the file is shorter).
        found: Vec<u8>,
    },
    /// A version other than 2 or 3.
    #[error("unsupported GGUF version {version} (dq reads versions 2 and 3)")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// A big-endian GGUF file (its version field reads byte-swapped).
    #[error("big-endian GGUF file (version {version}); dq reads little-endian files only")]
    BigEndian {
        /// The version, byte-swapped back.
        version: u32,
    },
    /// The file ends inside a field.
    #[error("truncated file: {what} at byte {offset} needs {needed} bytes, {available} left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },
    /// A count (of tensors, keys or array elements) larger than the rest of the file
    /// could hold: the file is cut short or the count forged.
    #[error(
        "truncated or corrupt file: {what} count {count} at byte {offset} does not fit in the {available} bytes left"
    )]
    CountTooLarge {
        /// `tensor`, `metadata key` or `metadata array element`.
        what: &'static str,
        /// Where the count is.
        offset: u64,
        /// The count.
        count: u64,
        /// Bytes left after the count.
        available: u64,
    },
    /// A metadata key or tensor name that is not UTF-8.
    #[error("{what} at byte {offset} is not UTF-8")]
    InvalidUtf8 {
        /// `metadata key` or `tensor name`.
        what: &'static str,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// A metadata value type id that GGUF does not define.
    #[error("metadata key `{key}`: unknown value type {id} at byte {offset}")]
    UnknownValueType {
        /// The key.
        key: String,
        /// The type id.
        id: u32,
        /// Where the type id is.
        offset: u64,
    },
    /// A bool byte other than 0 or 1.
    #[error("metadata key `{key}`: bool byte {value} at byte {offset} is neither 0 nor 1")]
    InvalidBool {
        /// The key.
        key: String,
        /// The byte.
        value: u8,
        /// Where it is.
        offset: u64,
    },
    /// Arrays nested deeper than [`super::MAX_NESTING`].
    #[error("metadata key `{key}`: arrays nested deeper than {max} at byte {offset}")]
    NestingTooDeep {
        /// The key.
        key: String,
        /// The limit.
        max: usize,
        /// Where the innermost array starts.
        offset: u64,
    },
    /// The same metadata key twice.
    #[error("duplicate metadata key `{key}`")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// `general.alignment` of a type other than u32.
    #[error("general.alignment must be a u32, found a {found}")]
    AlignmentType {
        /// The type found.
        found: &'static str,
    },
    /// `general.alignment` zero or not a power of two.
    #[error("general.alignment {alignment} is not a nonzero power of two")]
    BadAlignment {
        /// The value.
        alignment: u32,
    },
    /// The same tensor name twice.
    #[error("duplicate tensor name `{name}`")]
    DuplicateTensor {
        /// The name.
        name: String,
    },
    /// More than four dimensions.
    #[error("tensor `{name}` has {n_dims} dimensions (GGUF allows at most 4)")]
    TooManyDims {
        /// The tensor.
        name: String,
        /// Its dimension count.
        n_dims: u32,
    },
    /// Dimensions whose element or byte count overflows (or a dim beyond `i64::MAX`).
    #[error("tensor `{name}`: dimensions {ne:?} overflow")]
    ShapeOverflow {
        /// The tensor.
        name: String,
        /// Its `ne` (fastest first).
        ne: Vec<u64>,
    },
    /// A row length (`ne[0]`) that is not a whole number of blocks.
    #[error("tensor `{name}`: row of {ne0} elements is not a multiple of {ty}'s block of {block}")]
    PartialBlock {
        /// The tensor.
        name: String,
        /// Its type.
        ty: super::GgmlType,
        /// `ne[0]`.
        ne0: u64,
        /// Elements per block.
        block: usize,
    },
    /// A tensor offset that is not a multiple of the alignment.
    #[error("tensor `{name}`: data offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// The tensor.
        name: String,
        /// Its offset in the data section.
        offset: u64,
        /// The alignment.
        alignment: u32,
    },
    /// Tensor data that does not lie inside the file's data section.
    #[error(
        "tensor `{name}`: data at offset {offset} ({size} bytes) ends past the data section ({data_len} bytes)"
    )]
    DataOutOfFile {
        /// The tensor.
        name: String,
        /// Its offset in the data section.
        offset: u64,
        /// Its size in bytes (0 for a tensor of unknown type).
        size: u64,
        /// Bytes in the data section.
        data_len: u64,
    },
    /// Two tensors whose bytes overlap.
    #[error("tensors `{first}` and `{second}` overlap in the data section")]
    Overlap {
        /// The tensor at the lower offset.
        first: String,
        /// The other.
        second: String,
    },
    /// A tensor of a type dq does not decode (or does not know).
    #[error("unsupported GGUF type {ty} for tensor {name}")]
    UnsupportedType {
        /// The tensor (empty when decoding bare blocks).
        name: String,
        /// The type's name, or `id <id>` for an unknown id.
        ty: String,
    },
    /// A backend that cannot run this block type (yet).
    #[error(
        "backend {backend} cannot run GGUF type {ty} yet (tensor {name}); use reference or auto"
    )]
    BackendCannotRun {
        /// The backend asked for.
        backend: dq_runtime::Backend,
        /// The tensor's type.
        ty: super::GgmlType,
        /// The tensor.
        name: String,
    },
    /// The JIT could not compile the kernel of a block type (Cranelift failed, or
    /// the host cannot run JIT code).
    #[error("backend jit cannot compile GGUF type {ty} (tensor {name}): {source}")]
    Jit {
        /// The tensor's type.
        ty: super::GgmlType,
        /// The tensor.
        name: String,
        /// The JIT's reason (boxed: it keeps the error small).
        source: Box<crate::formats::jit::JitError>,
    },
    /// An output buffer whose length is not the tensor's element count.
    #[error("tensor {name}: output holds {got} elements, the tensor has {expected}")]
    OutputLength {
        /// The tensor.
        name: String,
        /// The tensor's element count.
        expected: u64,
        /// The output's length.
        got: usize,
    },
    /// Block bytes and an output whose lengths do not match.
    #[error(
        "{ty}: {bytes} bytes of blocks do not decode into {elements} elements ({block} elements per {type_size}-byte block)",
        block = ty.block_size(),
        type_size = ty.type_size()
    )]
    Length {
        /// The type decoded.
        ty: super::GgmlType,
        /// Bytes of blocks given.
        bytes: usize,
        /// Elements of output given.
        elements: usize,
    },
}

/// Results of this module.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;
