//! Files and lists: reading `.bin` / `.npy` tensors, parsing attribute lists, and
//! writing the output atomically (temp file in the same folder, then rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use dq::{DType, npy};

use super::cleanup::TempFile;
use super::error::CliError;

/// The two file formats, chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Raw little-endian (4-bit packed two per byte, low nibble first).
    Bin,
    /// NumPy `.npy`.
    Npy,
}

/// The format of `path` from its extension.
///
/// # Errors
/// [`CliError::Extension`] for anything but `.bin` / `.npy`.
pub fn format_of(path: &Path) -> Result<Format, CliError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("bin") => Ok(Format::Bin),
        Some("npy") => Ok(Format::Npy),
        _ => Err(CliError::Extension {
            path: path.to_owned(),
        }),
    }
}

/// A tensor read from a file: the dtype and shape a `.npy` declares, and the bytes.
#[derive(Debug)]
pub struct FileTensor {
    /// The file it came from.
    pub path: PathBuf,
    /// Format read.
    pub format: Format,
    /// Dtype declared by a `.npy` header (`None` for `.bin`).
    pub dtype: Option<DType>,
    /// Shape declared by a `.npy` header (`None` for `.bin`).
    pub shape: Option<Vec<usize>>,
    /// Raw little-endian bytes.
    pub data: Vec<u8>,
}

/// Reads a `.bin` or `.npy` file.
///
/// # Errors
/// Unknown extension, I/O errors, malformed `.npy`.
pub fn read_tensor(path: &Path) -> Result<FileTensor, CliError> {
    let format = format_of(path)?;
    let (dtype, shape, data) = match format {
        Format::Bin => {
            let data = dq::formats::input::read(path).map_err(|source| CliError::Io {
                path: path.to_owned(),
                source,
            })?;
            (None, None, data)
        }
        Format::Npy => {
            let n = npy::read(path).map_err(|e| CliError::npy(path, e))?;
            (Some(n.dtype), Some(n.shape), n.data)
        }
    };
    Ok(FileTensor {
        path: path.to_owned(),
        format,
        dtype,
        shape,
        data,
    })
}

/// Parses a comma-separated list of f32 (`nan`, `inf` and `-inf` allowed).
///
/// # Errors
/// [`CliError::BadList`] naming the entry that is not a number.
pub fn parse_f32_list(flag: &'static str, s: &str) -> Result<Vec<f32>, CliError> {
    s.split(',')
        .map(|v| {
            v.trim().parse::<f32>().map_err(|_| CliError::BadList {
                flag,
                reason: format!("`{v}` is not a number (expected a comma-separated list)"),
            })
        })
        .collect()
}

/// Parses a comma-separated list of i64.
///
/// # Errors
/// [`CliError::BadList`] naming the entry that is not an integer.
pub fn parse_i64_list(flag: &'static str, s: &str) -> Result<Vec<i64>, CliError> {
    super::args::parse_ints(s, ',').map_err(|reason| CliError::BadList {
        flag,
        reason: format!("{reason} (expected a comma-separated list)"),
    })
}

/// Checks, before any work, that `path` can hold a `dtype` output.
///
/// # Errors
/// Unknown extension, or `.npy` for a dtype NumPy lacks (bf16).
pub fn check_output(path: &Path, dtype: DType) -> Result<Format, CliError> {
    let format = format_of(path)?;
    if format == Format::Npy && npy::descr(dtype).is_none() {
        return Err(CliError::NoNumpyDType {
            path: path.to_owned(),
            dtype,
        });
    }
    Ok(format)
}

/// Writes `data` (raw `dtype` of `shape`) to `path` in the format of its extension,
/// through a temporary file in the same folder that is renamed over `path` at the end:
/// on any error `path` is neither created nor modified.
///
/// # Errors
/// Format or I/O errors.
pub fn write_output(
    path: &Path,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
) -> Result<(), CliError> {
    let io = |source| CliError::Io {
        path: path.to_owned(),
        source,
    };
    let encoded;
    let bytes = match check_output(path, dtype)? {
        Format::Bin => data,
        Format::Npy => {
            encoded = npy::encode(dtype, shape, data).expect("checked by check_output");
            &encoded[..]
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The one temporary-file guard of the CLI: registered for the SIGBUS handler,
    // deleted on every error, swept by pid like convert's.
    let (tmp, mut file) = TempFile::new(dir, ".dq-out-").map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    tmp.persist(path).map_err(io)
}
