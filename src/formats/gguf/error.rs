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
    /// A `split.*` key that is not a non-negative integer.
    #[error("split key `{key}` must be a non-negative integer, found a {found}")]
    SplitKeyType {
        /// The key.
        key: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// A `split.count` of more than one part without `split.no` or
    /// `split.tensors.count`.
    #[error("split.count {count} without `{key}`")]
    SplitKeyMissing {
        /// The key missing.
        key: &'static str,
        /// The part count.
        count: u64,
    },
    /// `split.count` outside 1..=65535, or `split.no` not below it.
    #[error(
        "split.no {no} and split.count {count} do not name a part (split.no counts from 0 to split.count - 1, split.count from 1 to 65535)"
    )]
    SplitRange {
        /// `split.no` (0 when absent).
        no: u64,
        /// `split.count`.
        count: u64,
    },
    /// A part of a split set whose file name does not say where the other parts are.
    #[error(
        "part {part} of a {count}-part split set, but its file name is not NAME-{part:05}-of-{count:05}.gguf: the other parts cannot be found"
    )]
    SplitName {
        /// The part's number, from 1.
        part: u32,
        /// Parts in the set.
        count: u16,
    },
    /// A part of a split set that cannot be read (missing, most often).
    #[error("split part {part} of {count}: {path}: {source}", path = path.display())]
    SplitPartIo {
        /// The part's number, from 1.
        part: u32,
        /// Parts in the set.
        count: u16,
        /// Its file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A part of a split set that is not a valid GGUF file.
    #[error("split part {part} of {count}{}: {source}", in_file(path.as_deref()))]
    SplitPart {
        /// The part's number, from 1.
        part: u32,
        /// Parts in the set.
        count: u16,
        /// Its file (none for bytes in memory).
        path: Option<PathBuf>,
        /// What is wrong with it.
        source: Box<GgufError>,
    },
    /// A file in a part's place whose split keys place it elsewhere.
    #[error(
        "split part {part} of {count}{} belongs to another split set: it says {found} (expected split.no {no}, split.count {count}, split.tensors.count {tensors})",
        in_file(path.as_deref()),
        no = part - 1
    )]
    ForeignPart {
        /// The part's number, from 1.
        part: u32,
        /// Parts in the set.
        count: u16,
        /// `split.tensors.count` of the set.
        tensors: u64,
        /// Its file (none for bytes in memory).
        path: Option<PathBuf>,
        /// What its keys say.
        found: String,
    },
    /// Parts of a split set that hold more or fewer tensors than the set says.
    #[error("split.tensors.count says {expected} tensors, the {count} parts hold {found}")]
    SplitTensorCount {
        /// `split.tensors.count`.
        expected: u64,
        /// Tensors in the parts.
        found: u64,
        /// Parts in the set.
        count: u16,
    },
}

/// ` (PATH)`, or nothing.
fn in_file(path: Option<&std::path::Path>) -> String {
    path.map_or_else(String::new, |p| format!(" ({})", p.display()))
}

/// Results of this module.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;
