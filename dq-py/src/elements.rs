//! The output element types (`float32`, `float16`, `bfloat16`) over an output's bytes.

use half::{bf16, f16};
use pyo3::PyResult;

use crate::dq_error;

/// An output's bytes seen as its elements.
pub(crate) enum OutSlice<'a> {
    F32(&'a mut [f32]),
    F16(&'a mut [f16]),
    Bf16(&'a mut [bf16]),
}

impl<'a> OutSlice<'a> {
    /// `bytes` as elements of `dtype` (`float32`, `float16` or `bfloat16`).
    ///
    /// # Errors
    /// Another dtype name, or bytes that are not whole aligned elements (NumPy
    /// allocates aligned arrays; a view at an odd offset is refused, not copied).
    pub(crate) fn new(bytes: &'a mut [u8], dtype: &str) -> PyResult<Self> {
        let misaligned = |_| dq_error(format!("the {dtype} output is not aligned"));
        Ok(match dtype {
            "float32" => OutSlice::F32(bytemuck::try_cast_slice_mut(bytes).map_err(misaligned)?),
            "float16" => OutSlice::F16(bytemuck::try_cast_slice_mut(bytes).map_err(misaligned)?),
            "bfloat16" => OutSlice::Bf16(bytemuck::try_cast_slice_mut(bytes).map_err(misaligned)?),
            _ => {
                return Err(dq_error(format!(
                    "dtype {dtype:?} is not one of float32, float16, bfloat16"
                )));
            }
        })
    }
}

/// Runs `$body` with `$out` bound to the typed slice of an [`OutSlice`].
macro_rules! each_out {
    ($slice:expr, |$out:ident| $body:expr) => {
        match $slice {
            $crate::elements::OutSlice::F32($out) => $body,
            $crate::elements::OutSlice::F16($out) => $body,
            $crate::elements::OutSlice::Bf16($out) => $body,
        }
    };
}
pub(crate) use each_out;
