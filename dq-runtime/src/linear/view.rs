//! The views of a linear: packed integer fields, scales, and the group map.

use half::bf16;

use super::LinearError;

/// Along which index a tensor of little-endian 32-bit words packs `32 / bits`
/// fields per word. Indices are `(row, col)`: `(n, k)` for weights, `(n, g)` for
/// zero points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Packing {
    /// Along the column: `(r, c)` is field `c % w` of word
    /// `r * row_stride + (c / w) * col_stride` (GPTQ's and compressed-tensors'
    /// weights).
    Inner,
    /// Along the row: `(r, c)` is field `order[r % w]` of word
    /// `(r / w) * row_stride + c * col_stride` (zero points; AWQ's weights, whose
    /// order is `[0, 4, 1, 5, 2, 6, 3, 7]`). Only the first `w` entries are read.
    Outer {
        /// The field holding each row of a word's `w`.
        order: [u8; 8],
    },
}

/// Fields of `bits` bits (4 or 8) packed into little-endian 32-bit words, plus a
/// constant `offset` added to each field (GPTQ v1's zero `+1`, compressed-tensors'
/// `-2^(b-1)`).
#[derive(Clone, Copy, Debug)]
pub struct Packed<'a> {
    /// The words' bytes.
    pub words: &'a [u8],
    /// Bits per field: 4 or 8.
    pub bits: u32,
    /// How the fields are packed.
    pub packing: Packing,
    /// Word step per row (per `w` rows for [`Packing::Outer`]).
    pub row_stride: usize,
    /// Word step per column (per `w` columns for [`Packing::Inner`]).
    pub col_stride: usize,
    /// Added to every field.
    pub offset: i32,
}

impl Packed<'_> {
    /// Fields per word.
    pub fn per_word(&self) -> usize {
        32 / self.bits as usize
    }

    /// Word index and field index of `(r, c)`.
    #[inline(always)]
    pub(super) fn locate(&self, r: usize, c: usize) -> (usize, usize) {
        // `w` is 4 or 8 (checked): shifts and masks, not divisions (a table's
        // parameters are read per row and group, in the fast path's inner loop).
        let shift = if self.bits == 4 { 3 } else { 2 };
        let split = |i: usize| (i >> shift, i & ((1 << shift) - 1));
        match self.packing {
            Packing::Inner => {
                let (word, field) = split(c);
                (r * self.row_stride + word * self.col_stride, field)
            }
            Packing::Outer { order } => {
                let (word, field) = split(r);
                (
                    word * self.row_stride + c * self.col_stride,
                    usize::from(order[field]),
                )
            }
        }
    }

    /// Word `i` (inside the buffer: checked by [`Linear::new`](super::Linear::new)).
    #[inline(always)]
    pub(super) fn word(&self, i: usize) -> u32 {
        let b = &self.words[4 * i..4 * i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The bytes of `count` words from word `first`, `stride` words apart (inside
    /// the buffer: checked by [`Linear::new`](super::Linear::new) for a view's indices).
    #[inline(always)]
    pub(super) fn run(&self, first: usize, count: usize, stride: usize) -> &[u8] {
        let end = if count == 0 {
            first
        } else {
            first + (count - 1) * stride + 1
        };
        &self.words[4 * first..4 * end]
    }

    /// The field at `(r, c)` plus the offset.
    #[inline(always)]
    pub(super) fn get(&self, r: usize, c: usize) -> i32 {
        let (word, field) = self.locate(r, c);
        let mask = (1u32 << self.bits) - 1;
        ((self.word(word) >> (self.bits as usize * field)) & mask) as i32 + self.offset
    }

    /// Checks that `rows x cols` indices stay inside the words.
    pub(super) fn check(
        &self,
        what: &'static str,
        rows: usize,
        cols: usize,
    ) -> Result<(), LinearError> {
        let bad = |why: String| Err(LinearError::View { what, why });
        if self.bits != 4 && self.bits != 8 {
            return bad(format!("{}-bit fields (4 or 8 are supported)", self.bits));
        }
        let w = self.per_word();
        if let Packing::Outer { order } = self.packing {
            let mut seen = [false; 8];
            for &o in &order[..w] {
                if usize::from(o) >= w || std::mem::replace(&mut seen[usize::from(o)], true) {
                    return bad(format!(
                        "field order {:?} is not a permutation of 0..{w}",
                        &order[..w]
                    ));
                }
            }
        }
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        // Indices grow with r and c: the last pair reaches furthest.
        let last = match self.packing {
            Packing::Inner => mul_add(
                (rows - 1, self.row_stride),
                ((cols - 1) / w, self.col_stride),
            ),
            Packing::Outer { .. } => mul_add(
                ((rows - 1) / w, self.row_stride),
                (cols - 1, self.col_stride),
            ),
        };
        let words = self.words.len() / 4;
        match last {
            Some(i) if i < words => Ok(()),
            _ => bad(format!("{rows}x{cols} fields reach past {words} words")),
        }
    }
}

/// `a.0 * a.1 + b.0 * b.1`, `None` on overflow.
fn mul_add(a: (usize, usize), b: (usize, usize)) -> Option<usize> {
    a.0.checked_mul(a.1)?.checked_add(b.0.checked_mul(b.1)?)
}

/// The element type of the scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleType {
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single.
    F32,
}

impl ScaleType {
    /// Bytes per scale.
    pub fn size(self) -> usize {
        match self {
            ScaleType::F16 | ScaleType::BF16 => 2,
            ScaleType::F32 => 4,
        }
    }
}

/// Scales `[rows, groups]` as little-endian floats: `(n, g)` is element
/// `n * row_stride + g * col_stride`.
#[derive(Clone, Copy, Debug)]
pub struct Scales<'a> {
    /// The scales' bytes.
    pub bytes: &'a [u8],
    /// Their type.
    pub dtype: ScaleType,
    /// Element step per row.
    pub row_stride: usize,
    /// Element step per group.
    pub col_stride: usize,
}

impl Scales<'_> {
    /// The scale of row `n`, group `g`, widened exactly to f32.
    #[inline(always)]
    pub(super) fn get(&self, n: usize, g: usize) -> f32 {
        let i = n * self.row_stride + g * self.col_stride;
        let b = self.bytes;
        match self.dtype {
            ScaleType::F16 => {
                crate::convert::f16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]))
            }
            ScaleType::BF16 => bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
            ScaleType::F32 => {
                f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
            }
        }
    }

    pub(super) fn check(&self, rows: usize, groups: usize) -> Result<(), LinearError> {
        if rows == 0 || groups == 0 {
            return Ok(());
        }
        let count = self.bytes.len() / self.dtype.size();
        match mul_add((rows - 1, self.row_stride), (groups - 1, self.col_stride)) {
            Some(i) if i < count => Ok(()),
            _ => Err(LinearError::View {
                what: "scales",
                why: format!("{rows}x{groups} scales reach past {count} elements"),
            }),
        }
    }
}

/// The group of each input `k`.
#[derive(Clone, Copy, Debug)]
pub enum Groups<'a> {
    /// `k / size` (at least 1).
    Size(usize),
    /// `index[k]` (GPTQ's act-order `g_idx`), one entry per input.
    Index(&'a [u32]),
}

impl Groups<'_> {
    /// The group of input `k`.
    #[inline(always)]
    pub(super) fn group(&self, k: usize) -> usize {
        match *self {
            Groups::Size(s) => k / s,
            Groups::Index(ix) => ix[k] as usize,
        }
    }

    pub(super) fn check(&self, k: usize, groups: usize) -> Result<(), LinearError> {
        let bad = |why: String| {
            Err(LinearError::View {
                what: "groups",
                why,
            })
        };
        match *self {
            Groups::Size(0) => bad("group size 0".to_string()),
            Groups::Size(s) if k > 0 && (k - 1) / s >= groups => bad(format!(
                "K = {k} in groups of {s} needs more than {groups} groups"
            )),
            Groups::Index(ix) if ix.len() != k => {
                bad(format!("{} group indices for K = {k}", ix.len()))
            }
            Groups::Index(ix) => match ix.iter().position(|&g| g as usize >= groups) {
                Some(k) => bad(format!("input {k} is in group {} of {groups}", ix[k])),
                None => Ok(()),
            },
            Groups::Size(_) => Ok(()),
        }
    }
}
