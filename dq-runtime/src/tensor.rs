//! Tensor descriptors and views over caller buffers (SPEC §2).

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result, Role};

/// Dtype, shape and layout of a tensor, without its data.
///
/// Strides are in elements; `None` means dense row-major. For 4-bit tensors a stride
/// counts nibbles, and the element at physical offset `o` is nibble `o` (SPEC §1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Dimensions; empty for a scalar.
    pub shape: Vec<usize>,
    /// Per-dimension strides in elements, or `None` for dense row-major.
    pub strides: Option<Vec<usize>>,
}

impl TensorDesc {
    /// A dense row-major tensor.
    pub fn new(dtype: DType, shape: &[usize]) -> Self {
        TensorDesc {
            dtype,
            shape: shape.to_vec(),
            strides: None,
        }
    }

    /// The same tensor with explicit strides (in elements).
    pub fn with_strides(mut self, strides: &[usize]) -> Self {
        self.strides = Some(strides.to_vec());
        self
    }

    /// Number of elements, `None` on overflow.
    pub fn numel(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    /// Dense row-major strides for `shape` (any overflow can only occur past a
    /// dimension that already overflows [`numel`](Self::numel)).
    pub fn dense_strides(shape: &[usize]) -> Vec<usize> {
        let mut s = vec![0; shape.len()];
        fill_dense(shape, &mut s);
        s
    }

    /// Calls `f` with the strides in force, without allocating for ranks up to 8
    /// (binding a plan to buffers runs on every call).
    pub(crate) fn visit_strides<R>(&self, f: impl FnOnce(&[usize]) -> R) -> R {
        if let Some(s) = &self.strides {
            return f(s);
        }
        let mut buf = [0usize; 8];
        match buf.get_mut(..self.shape.len()) {
            Some(b) => {
                fill_dense(&self.shape, b);
                f(b)
            }
            None => f(&Self::dense_strides(&self.shape)),
        }
    }

    /// The strides in force: explicit ones or dense row-major.
    pub fn strides_or_dense(&self) -> Vec<usize> {
        self.strides
            .clone()
            .unwrap_or_else(|| Self::dense_strides(&self.shape))
    }

    /// True when the layout is dense row-major (explicit strides that equal it count).
    pub fn is_dense(&self) -> bool {
        match &self.strides {
            None => true,
            Some(s) => self
                .shape
                .iter()
                .zip(s)
                .zip(Self::dense_strides(&self.shape))
                .all(|((&d, &s), dense)| d <= 1 || s == dense),
        }
    }

    /// Bytes the buffer must hold for this view: one past the furthest element.
    ///
    /// # Errors
    /// [`Error::StridesRank`] for a strides list of the wrong length, [`Error::Overflow`]
    /// when the arithmetic overflows `usize`.
    pub fn required_bytes(&self, role: Role) -> Result<usize> {
        let overflow = || Error::Overflow {
            role,
            shape: self.shape.clone(),
        };
        let numel = self.numel().ok_or_else(overflow)?;
        if let Some(s) = &self.strides
            && s.len() != self.shape.len()
        {
            return Err(Error::StridesRank {
                role,
                expected: self.shape.len(),
                got: s.len(),
            });
        }
        if numel == 0 {
            return Ok(0);
        }
        let elems = self.visit_strides(|strides| {
            let mut last = 0usize;
            for (&d, &s) in self.shape.iter().zip(strides) {
                last = last.checked_add((d - 1).checked_mul(s)?)?;
            }
            last.checked_add(1)
        });
        elems
            .and_then(|e| self.dtype.bytes_for(e))
            .ok_or_else(overflow)
    }

    /// `dtype[shape]` or `dtype[shape]/strides`, for messages.
    pub fn describe(&self) -> String {
        match &self.strides {
            None => format!("{}{:?}", self.dtype, self.shape),
            Some(s) => format!("{}{:?} strides {:?}", self.dtype, self.shape, s),
        }
    }
}

/// Writes the dense row-major strides of `shape` into `out` (same length).
fn fill_dense(shape: &[usize], out: &mut [usize]) {
    let mut acc = 1usize;
    for (o, &d) in out.iter_mut().zip(shape).rev() {
        *o = acc;
        acc = acc.saturating_mul(d);
    }
}

/// A Rust element type that maps to a [`DType`], for typed constructors.
pub trait Element: bytemuck::Pod {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Its Rust name, for messages.
    const NAME: &'static str;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            const NAME: &'static str = stringify!($t);
        }
    )*};
}
element!(i8 => S8, u8 => U8, i32 => S32, i64 => S64, f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);

/// A read-only tensor: a descriptor and the caller's bytes.
#[derive(Clone, Debug)]
pub struct Tensor<'a> {
    /// Dtype, shape and layout.
    pub desc: TensorDesc,
    /// The data, little-endian (4-bit packed two per byte).
    pub data: &'a [u8],
}

impl<'a> Tensor<'a> {
    /// A dense tensor over raw little-endian bytes of `dtype` (4-bit packed).
    pub fn from_bytes(dtype: DType, shape: &[usize], data: &'a [u8]) -> Self {
        Tensor {
            desc: TensorDesc::new(dtype, shape),
            data,
        }
    }

    /// A dense tensor over a typed slice; the dtype follows the element type.
    ///
    /// ```
    /// use dq_runtime::{DType, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// assert_eq!(t.desc.dtype, DType::F32);
    /// ```
    pub fn from_slice<T: Element>(data: &'a [T], shape: &[usize]) -> Self {
        Self::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(data))
    }

    /// The same data seen with explicit strides (in elements).
    pub fn with_strides(mut self, strides: &[usize]) -> Self {
        self.desc = self.desc.with_strides(strides);
        self
    }
}

/// A writable tensor: a descriptor and the caller's output bytes.
#[derive(Debug)]
pub struct TensorMut<'a> {
    /// Dtype, shape and layout.
    pub desc: TensorDesc,
    /// The output bytes, little-endian.
    pub data: &'a mut [u8],
}

impl<'a> TensorMut<'a> {
    /// A dense output over raw bytes of `dtype`.
    pub fn from_bytes(dtype: DType, shape: &[usize], data: &'a mut [u8]) -> Self {
        TensorMut {
            desc: TensorDesc::new(dtype, shape),
            data,
        }
    }

    /// A dense output over a typed slice; the dtype follows the element type.
    ///
    /// ```
    /// use dq_runtime::{DType, TensorMut};
    /// let mut out = vec![half::bf16::ZERO; 4];
    /// let t = TensorMut::from_slice(&mut out, &[2, 2]);
    /// assert_eq!(t.desc.dtype, DType::BF16);
    /// ```
    pub fn from_slice<T: Element>(data: &'a mut [T], shape: &[usize]) -> Self {
        Self::from_bytes(T::DTYPE, shape, bytemuck::cast_slice_mut(data))
    }

    /// The same buffer seen with explicit strides (in elements).
    pub fn with_strides(mut self, strides: &[usize]) -> Self {
        self.desc = self.desc.with_strides(strides);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_bytes_dense_and_strided() {
        let d = TensorDesc::new(DType::U4, &[3, 3]);
        assert_eq!(d.required_bytes(Role::Src), Ok(5));
        let t = TensorDesc::new(DType::F32, &[2, 3]).with_strides(&[1, 2]);
        assert_eq!(t.required_bytes(Role::Src), Ok(24));
        assert!(!t.is_dense());
        let e = TensorDesc::new(DType::F32, &[0, 5]);
        assert_eq!(e.required_bytes(Role::Dst), Ok(0));
        let s = TensorDesc::new(DType::S8, &[]);
        assert_eq!(s.required_bytes(Role::Src), Ok(1));
    }

    #[test]
    fn overflow_is_an_error() {
        let d = TensorDesc::new(DType::F32, &[usize::MAX / 2, 3]);
        assert_eq!(
            d.required_bytes(Role::Src),
            Err(Error::Overflow {
                role: Role::Src,
                shape: vec![usize::MAX / 2, 3]
            })
        );
        let s = TensorDesc::new(DType::F32, &[2]).with_strides(&[1, 1]);
        assert!(matches!(
            s.required_bytes(Role::Dst),
            Err(Error::StridesRank {
                expected: 1,
                got: 2,
                ..
            })
        ));
    }
}
