//! `dq._dq`, the native module of the Python package `dq` (dq-py/python/dq):
//! GGUF blocks ([`gguf`]), checkpoint files and folders ([`file`]), the ops
//! ([`ops`]) and `dq convert`.
//!
//! Every array crosses as a C-contiguous NumPy `uint8` view of the caller's memory
//! (the Python side makes the views and allocates the outputs with their real
//! dtype), so nothing is copied: the kernels read the input and write the output
//! in place, with the GIL released. Every dq error becomes `dq.DqError`
//! (a `ValueError`) carrying dq's one-line message; a panic would become
//! PyO3's `PanicException`, never an abort, but dq's checks come first.

use numpy::{PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod elements;
mod file;
mod gguf;
mod ops;

pyo3::create_exception!(
    _dq,
    DqError,
    PyValueError,
    "An input dq rejects: the message is dq's one line naming the rule broken."
);

/// `DqError(message)`.
pub(crate) fn dq_error(message: impl std::fmt::Display) -> PyErr {
    DqError::new_err(message.to_string())
}

/// The bytes of a C-contiguous `uint8` view.
pub(crate) fn bytes<'a>(a: &'a PyReadonlyArrayDyn<'_, u8>, what: &str) -> PyResult<&'a [u8]> {
    a.as_slice()
        .map_err(|_| dq_error(format!("{what} is not C-contiguous")))
}

/// The bytes of a writable C-contiguous `uint8` view.
pub(crate) fn bytes_mut<'a>(
    a: &'a mut PyReadwriteArrayDyn<'_, u8>,
    what: &str,
) -> PyResult<&'a mut [u8]> {
    a.as_slice_mut()
        .map_err(|_| dq_error(format!("{what} is not C-contiguous")))
}

/// `Options` from the Python arguments: `threads=None` is every core.
pub(crate) fn options(threads: Option<usize>, backend: &str) -> PyResult<dq::Options> {
    let threads = match threads {
        Some(0) => return Err(dq_error("threads must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let backend = backend.parse::<dq::Backend>().map_err(dq_error)?;
    Ok(dq::Options::new()
        .with_backend(backend)
        .with_threads(threads))
}

/// `dq convert ARGS...` as the CLI runs it (`dq::cli::convert_command`), the GIL
/// released; its summary line goes to the process's stdout.
#[pyfunction]
fn convert(py: Python<'_>, args: Vec<String>) -> PyResult<()> {
    py.detach(|| dq::cli::convert_command(args))
        .map_err(dq_error)
}

/// The native module.
#[pymodule]
fn _dq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DqError", m.py().get_type::<DqError>())?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(gguf::gguf_dequantize, m)?)?;
    m.add_function(wrap_pyfunction!(gguf::gguf_types, m)?)?;
    m.add_function(wrap_pyfunction!(ops::dequantize, m)?)?;
    m.add_class::<file::File>()?;
    Ok(())
}
