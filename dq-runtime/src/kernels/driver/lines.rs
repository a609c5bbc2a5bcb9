//! Streamed runs of 4-bit src by table lookup, where each lookup gives one
//! whole 64-byte line of dst in registers (AVX-512: 32 f16/bf16 or 16 f32):
//! the lines go to dst with non-temporal stores straight from registers, spliced
//! across line boundaries where the run's lines start mid-lookup. No tile, no
//! copy out of L1.
//!
//! Measured on AMD EPYC Zen 5 (groups of 128 along rows, dst 16 bytes past a
//! line): these lines run u4 -> f16 and u4 -> bf16 markedly faster than the tile
//! path (lookups into an L1 tile, then a non-temporal copy). BENCHMARKS.md has
//! the runs.

use super::{Row, Shape, VecCtx, const_p, is_4bit, table, vec_row};
use crate::arch::Simd;
use crate::kernels::{FloatType, Formula, IntType};
use crate::lowering::Loop;

/// Fewest whole lines a run must stream for this path (else the tile's).
const MIN_LINES: usize = 2;

/// Streams run `r` of a constant-scale or per-group shape (`SHAPE`) by whole
/// lines: the partial lines at either end go through [`vec_row`] with ordinary
/// stores. Returns false, having written nothing, where the run is not of that
/// form: src or dtypes without line lookups, groups not whole lookups, an odd
/// first nibble, a row start not 4-byte aligned within its line, or too short.
///
/// # Safety
/// As [`vec_row`] for a run whose results go to dst; the shape is `Const` or
/// `Group` (one scale for each run of `inner.group` elements).
#[inline(always)]
pub(super) unsafe fn stream_lines<V, S, D, F, const SHAPE: u8>(
    v: V,
    vc: &mut VecCtx<'_>,
    inner: &Loop,
    r: Row,
) -> bool
where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
{
    if !(is_4bit(S::DTYPE) && D::lut_lines::<V>()) {
        return false;
    }
    let step = D::lut_step::<V>();
    let (dst, src) = (vc.c.dst, vc.c.src);
    let row = dst.wrapping_add(r.dst * D::SIZE);
    let at = row as usize % 64;
    // Lookups per scale: a group's, or the whole run's.
    let per = if SHAPE == Shape::Const as u8 {
        usize::MAX
    } else if inner.group.is_multiple_of(step) {
        inner.group / step
    } else {
        return false;
    };
    if !(r.src.is_multiple_of(2) && at.is_multiple_of(4)) {
        return false;
    }
    // Lookup k gives elements k * step..(k + 1) * step; line m starts `e0`
    // elements after lookup m (0 when rows start on a line), so it takes the
    // tail of lookup m and the head of lookup m + 1.
    let e0 = (64 - at) % 64 / D::SIZE;
    let (first, end) = (r.i0.div_ceil(step), r.i1 / step);
    let lines = end.saturating_sub(first + usize::from(e0 > 0));
    if lines < MIN_LINES {
        return false;
    }
    let (l0, l1) = (e0 + first * step, e0 + (first + lines) * step);
    // SAFETY: elements i0..l0 and l1..i1 are the run's, to their dst; the
    // lookups read the src bytes of elements first * step..(first + lines +
    // (e0 > 0)) * step, all inside i0..i1 (so in view, from an even nibble as
    // r.src and step are even), and the lines written are elements l0..l1, whole
    // 64-byte aligned lines (`e0`'s definition) of dst inside the run.
    unsafe {
        let ends = |i0, i1| Row { i0, i1, ..r };
        vec_row::<V, S, D, F, SHAPE>(v, vc, inner, ends(r.i0, l0), (dst, r.dst + r.i0));
        // Each line: the tail of the previous lookup and the head of this one
        // (all of this one when rows start on a line).
        let idx = v.splice_index(if e0 == 0 { 16 } else { e0 * D::SIZE / 4 });
        let at = |k: usize| src.add((r.src + k * step) / 2);
        let tab = |j: usize| {
            let p = const_p::<V, S, D>(v, vc, r.scale + j * inner.scale_stride);
            table::<V, S, D, F>(v, &p)
        };
        let mut out = row.add(l0 * D::SIZE);
        let last = first + lines + usize::from(e0 > 0);
        let mut j = first / per;
        let mut t = tab(j);
        let mut prev = D::lut_line::<V>(v, t, at(first));
        if e0 == 0 {
            v.stream_line(out, prev);
            out = out.add(64);
        }
        let mut k = first + 1;
        loop {
            // The rest of group j's lookups (or of the run, for one scale).
            let group_end = (j + 1).saturating_mul(per).min(last);
            while k < group_end {
                let y = D::lut_line::<V>(v, t, at(k));
                v.stream_line(out, v.splice(prev, y, idx));
                out = out.add(64);
                prev = y;
                k += 1;
            }
            if k >= last {
                break;
            }
            j += 1;
            t = tab(j);
        }
        vec_row::<V, S, D, F, SHAPE>(v, vc, inner, ends(l1, r.i1), (dst, r.dst + l1));
    }
    true
}
