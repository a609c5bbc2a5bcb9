//! `dq.open(path)`: a GGUF file (a split set read whole) or a HuggingFace
//! checkpoint, as `dq convert` reads it (`dq::cli::source::Source`).

use std::path::PathBuf;

use dq::cli::cleanup;
use dq::cli::source::{Item, Kind, Source};
use numpy::PyReadwriteArrayDyn;
use pyo3::prelude::*;

use crate::elements::{OutSlice, each_out};
use crate::{bytes_mut, dq_error, options};

/// An opened checkpoint: its tensors as `dq convert` writes them.
#[pyclass(module = "dq._dq", frozen)]
pub(crate) struct File {
    source: Source,
    path: PathBuf,
    /// `(name, shape, type)` of each tensor, in the input's order.
    tensors: Vec<(String, Vec<usize>, String)>,
}

impl File {
    /// The tensor called `name`.
    fn item(&self, name: &str) -> PyResult<Item<'_>> {
        (self.source.items().into_iter())
            .find(|i| i.name == name)
            .ok_or_else(|| dq_error(format!("{}: no tensor {name:?}", self.path.display())))
    }
}

/// The type shown for a tensor: the GGUF type, the checkpoint's quantization
/// method for a quantized linear, the safetensors dtype otherwise.
fn type_name(item: &Item<'_>, format: &str) -> String {
    match &item.kind {
        Kind::Gguf(_, t) => t.type_name(),
        Kind::Unsupported(ty) => ty.clone(),
        Kind::Linear(_) => format.to_owned(),
        Kind::Float(t) | Kind::Copy(t) => format!("{:?}", t.dtype()),
    }
}

#[pymethods]
impl File {
    /// Opens `path` (memory-mapped; a file truncated meanwhile ends the process
    /// with one line, as the CLI does).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        cleanup::install();
        let source = py.detach(|| Source::open(&path)).map_err(dq_error)?;
        let format = source.format();
        let tensors = (source.items().iter())
            .map(|i| (i.name.clone(), i.shape.clone(), type_name(i, &format)))
            .collect();
        Ok(File {
            source,
            path,
            tensors,
        })
    }

    /// `gguf`, or the checkpoint's quantization method (`hf` when none).
    #[getter]
    fn format(&self) -> String {
        self.source.format()
    }

    /// `(name, shape, type)` of each tensor, in the input's order.
    fn tensors(&self) -> Vec<(String, Vec<usize>, String)> {
        self.tensors.clone()
    }

    /// Writes tensor `name` into `out` (the bytes of its elements of `dtype`).
    #[pyo3(signature = (name, out, dtype, threads=None, backend="auto"))]
    fn dequantize_into(
        &self,
        py: Python<'_>,
        name: &str,
        mut out: PyReadwriteArrayDyn<'_, u8>,
        dtype: &str,
        threads: Option<usize>,
        backend: &str,
    ) -> PyResult<()> {
        let item = self.item(name)?;
        if let Kind::Copy(t) = &item.kind {
            return Err(dq_error(format!(
                "{}: tensor {name:?} is {:?}, neither quantized nor floating point",
                self.path.display(),
                t.dtype()
            )));
        }
        let opts = options(threads, backend)?;
        let dst = OutSlice::new(bytes_mut(&mut out, "out")?, dtype)?;
        let len = each_out!(&dst, |o| o.len());
        if len != item.elements() {
            return Err(dq_error(format!(
                "tensor {name:?} has {} elements, the output {len}",
                item.elements()
            )));
        }
        let path = &self.path;
        py.detach(|| each_out!(dst, |o| item.fill(o, &opts)))
            .map_err(|e| dq_error(format!("{}: {e}", path.display())))
    }
}
