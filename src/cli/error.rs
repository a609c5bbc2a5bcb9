//! Errors of the command-line tool. Every one is printed as one line and exits with 2.

use std::path::{Path, PathBuf};

use dq::DType;

/// Everything `dq run` / `dq bench` can reject.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A rule of the contract (validation, binding, backend choice).
    #[error(transparent)]
    Dq(#[from] dq::Error),
    /// The command line itself (clap's first line).
    #[error("{0}")]
    Usage(String),
    /// A flag that this op does not take.
    #[error("--{flag} is not used by --op {op}")]
    FlagNotForOp {
        /// The flag.
        flag: &'static str,
        /// The op.
        op: &'static str,
    },
    /// A flag this op needs.
    #[error("--op {op} needs --{flag}")]
    MissingFlag {
        /// The flag.
        flag: &'static str,
        /// The op.
        op: &'static str,
    },
    /// A list that does not parse.
    #[error("--{flag}: {reason}")]
    BadList {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A file name whose extension is neither .bin nor .npy.
    #[error("{path}: unknown file type (expected a .bin or .npy file)", path = path.display())]
    Extension {
        /// The file.
        path: PathBuf,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A .bin file whose size does not fit its tensor.
    #[error("{path}: {role} file has {got} bytes, expected {expected} ({what})", path = path.display())]
    FileSize {
        /// The file.
        path: PathBuf,
        /// Which tensor.
        role: &'static str,
        /// Bytes expected.
        expected: usize,
        /// Bytes found.
        got: u64,
        /// The tensor expected, e.g. `bf16[4, 2]`.
        what: String,
    },
    /// A malformed .npy file.
    #[error("{path}: bad .npy file: {source}", path = path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: dq::npy::Error,
    },
    /// A .npy dtype that differs from the one the flags say.
    #[error("{path}: .npy holds {got} but {flag} is {expected}", path = path.display())]
    NpyDType {
        /// The file.
        path: PathBuf,
        /// The flag that fixes the dtype.
        flag: &'static str,
        /// The dtype of the flag.
        expected: DType,
        /// The dtype in the file.
        got: DType,
    },
    /// A .npy input whose shape differs from --shape.
    #[error("{path}: .npy has shape {got:?} but --shape is {expected:?}", path = path.display())]
    NpyShape {
        /// The file.
        path: PathBuf,
        /// --shape.
        expected: Vec<usize>,
        /// The file's shape.
        got: Vec<usize>,
    },
    /// A dtype NumPy cannot store.
    /// The memcpy yardstick's thread pool could not start.
    #[error("cannot start {threads} threads for the memcpy yardstick: {source}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// rayon's reason.
        source: rayon::ThreadPoolBuildError,
    },
    #[error("{path}: NumPy has no {dtype} dtype; use a .bin file", path = path.display())]
    NoNumpyDType {
        /// The file.
        path: PathBuf,
        /// The dtype.
        dtype: DType,
    },
}

impl CliError {
    /// A `.npy` reading error of `path`: I/O errors as [`CliError::Io`], the rest as
    /// [`CliError::Npy`].
    pub fn npy(path: &Path, e: dq::npy::Error) -> CliError {
        match e {
            dq::npy::Error::Io(source) => CliError::Io {
                path: path.to_owned(),
                source,
            },
            source => CliError::Npy {
                path: path.to_owned(),
                source,
            },
        }
    }
}
