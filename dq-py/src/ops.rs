//! `dq.dequantize`: the `DynamicDequantize` op (SPEC §4.2) over NumPy arrays.

use dq::{DType, DynamicDequantize, Qtype, Tensor, TensorMut};
use numpy::{PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::prelude::*;

use crate::{bytes, bytes_mut, dq_error, options};

/// One input: its bytes, dtype name (`s8`, `u4`, `bf16`, ...) and shape.
type Input<'py> = (PyReadonlyArrayDyn<'py, u8>, String, Vec<usize>);

/// A dq dtype from its spec name.
fn dtype(name: &str) -> PyResult<DType> {
    name.parse().map_err(dq_error)
}

/// An input's dtype, shape and bytes.
fn tensor<'a>((a, d, shape): &'a Input<'_>, what: &str) -> PyResult<(DType, Vec<usize>, &'a [u8])> {
    Ok((dtype(d)?, shape.clone(), bytes(a, what)?))
}

/// Runs `DynamicDequantize` with `qtype`, `axis` and `group_shape` on `src`,
/// `scales` and `zps`, writing `out` (of dtype `dst`, `src`'s shape).
#[pyfunction]
#[pyo3(signature = (src, scales, zps, out, dst, qtype, axis, group_shape, threads=None, backend="auto"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn dequantize(
    py: Python<'_>,
    src: Input<'_>,
    scales: Input<'_>,
    zps: Option<Input<'_>>,
    mut out: PyReadwriteArrayDyn<'_, u8>,
    dst: &str,
    qtype: &str,
    axis: i64,
    group_shape: Option<Vec<i64>>,
    threads: Option<usize>,
    backend: &str,
) -> PyResult<()> {
    let qtype: Qtype = qtype.parse().map_err(dq_error)?;
    let mut op = DynamicDequantize::per_tensor().qtype(qtype).axis(axis);
    op.group_shape = group_shape;
    let opts = options(threads, backend)?;
    let (sd, ss, sb) = tensor(&src, "src")?;
    let (cd, cs, cb) = tensor(&scales, "scales")?;
    let zps = zps.as_ref().map(|z| tensor(z, "zps")).transpose()?;
    let dst = dtype(dst)?;
    let ob = bytes_mut(&mut out, "out")?;
    py.detach(|| {
        let src = Tensor::from_bytes(sd, &ss, sb);
        let scales = Tensor::from_bytes(cd, &cs, cb);
        let zps = zps.as_ref().map(|(d, s, b)| Tensor::from_bytes(*d, s, b));
        let mut out = TensorMut::from_bytes(dst, &ss, ob);
        dq::dequantize(
            &op.into(),
            &src,
            Some(&scales),
            zps.as_ref(),
            &mut out,
            &opts,
        )
    })
    .map_err(dq_error)
}
