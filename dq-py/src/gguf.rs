//! `dq.gguf.dequantize`: whole GGUF blocks outside any file.

use dq::formats::gguf::{GgmlType, dequantize_blocks};
use numpy::{PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::prelude::*;

use crate::elements::{OutSlice, each_out};
use crate::{bytes, bytes_mut, dq_error, options};

/// Decodes the blocks `data` of GGUF type id `qtype` into `out` (the bytes of their
/// elements of `dtype`), on `threads` threads (None: every core).
#[pyfunction]
#[pyo3(signature = (data, qtype, out, dtype, threads=None, backend="auto"))]
pub(crate) fn gguf_dequantize(
    py: Python<'_>,
    data: PyReadonlyArrayDyn<'_, u8>,
    qtype: u32,
    mut out: PyReadwriteArrayDyn<'_, u8>,
    dtype: &str,
    threads: Option<usize>,
    backend: &str,
) -> PyResult<()> {
    let ty = GgmlType::from_id(qtype)
        .ok_or_else(|| dq_error(format!("GGUF type id {qtype} is not a ggml type")))?;
    let opts = options(threads, backend)?;
    let src = bytes(&data, "data")?;
    let dst = OutSlice::new(bytes_mut(&mut out, "out")?, dtype)?;
    py.detach(|| each_out!(dst, |o| dequantize_blocks(ty, src, o, &opts)))
        .map_err(dq_error)
}

/// Every ggml type: `(id, name, elements per block, bytes per block, dq decodes it)`.
#[pyfunction]
pub(crate) fn gguf_types() -> Vec<(u32, &'static str, usize, usize, bool)> {
    GgmlType::ALL
        .iter()
        .map(|t| {
            let r = t.traits();
            (t.id(), r.name, r.block_size, r.type_size, r.supported)
        })
        .collect()
}
