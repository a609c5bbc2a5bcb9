//! The loops: walk a plan's loop nest over a range of logical elements and
//! evaluate the formula on each innermost run, in vectors where the run is
//! contiguous, element by element (exact integers) everywhere else.
// The vector loops have x86-64 ISAs only: elsewhere only the exact path runs.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

mod lines;

use core::ops::Range;

use super::dtypes::{FloatType, IntType};
use super::lanes::{ExactInt, Formula, Scalar, apply, float_src};
use crate::arch::Simd;
use crate::dtype::{DType, load_int, nibble, s4_value};
use crate::job::Job;
use crate::lowering::Loop;
use crate::policy::{self, LUT_MIN, StoreStrategy};

/// Raw views of a job's buffers. Offsets computed from the plan's loops stay
/// inside them: `Plan::bind` checked every buffer against its view.
struct Ctx {
    src: *const u8,
    scales: *const u8,
    zps: *const u8,
    dst: *mut u8,
    zps_broadcast: bool,
    /// Prefetch dst lines ahead of the stores (vector paths).
    prefetch: bool,
}

impl Ctx {
    fn new(job: &Job<'_>) -> Ctx {
        Ctx {
            src: job.src().as_ptr(),
            scales: job.scales().as_ptr(),
            zps: job.zps().as_ptr(),
            dst: job.dst_ptr(),
            zps_broadcast: job.plan().zps_broadcast(),
            prefetch: false,
        }
    }
}

/// One innermost run: offsets of the outer loops, and its inner index range.
#[derive(Clone, Copy)]
struct Row {
    src: usize,
    dst: usize,
    scale: usize,
    i0: usize,
    i1: usize,
}

/// Where a walk stands in one outer loop.
#[derive(Clone, Copy, Default)]
struct Pos {
    /// Index along the loop.
    i: usize,
    /// Index within the current group.
    within: usize,
    /// Group index.
    g: usize,
}

/// Calls `f` for each innermost run of logical elements `range`, in order.
/// Offsets are updated incrementally (no division per run). `f` has one call
/// site: it is inlined once per instantiation.
#[inline(always)]
fn walk(loops: &[Loop], range: Range<usize>, mut f: impl FnMut(Row)) {
    let Some((inner, outer)) = loops.split_last() else {
        return;
    };
    if range.is_empty() {
        return;
    }
    // No allocation for nests of up to 8 loops.
    let (mut small, mut big) = ([Pos::default(); 8], Vec::new());
    let pos: &mut [Pos] = match small.get_mut(..outer.len()) {
        Some(p) => p,
        None => {
            big.resize(outer.len(), Pos::default());
            &mut big
        }
    };
    let (mut src, mut dst, mut scale) = (0, 0, 0);
    let mut l = range.start / inner.len;
    for (p, lp) in pos.iter_mut().zip(outer).rev() {
        let i = l % lp.len;
        l /= lp.len;
        *p = Pos {
            i,
            within: i % lp.group,
            g: i / lp.group,
        };
        src += i * lp.src_stride;
        dst += i * lp.dst_stride;
        scale += p.g * lp.scale_stride;
    }
    let mut i0 = range.start % inner.len;
    let mut left = range.len();
    loop {
        let i1 = inner.len.min(i0 + left);
        f(Row {
            src,
            dst,
            scale,
            i0,
            i1,
        });
        left -= i1 - i0;
        if left == 0 {
            return;
        }
        i0 = 0;
        for (p, lp) in pos.iter_mut().zip(outer).rev() {
            p.i += 1;
            p.within += 1;
            src += lp.src_stride;
            dst += lp.dst_stride;
            if p.within == lp.group {
                p.within = 0;
                p.g += 1;
                scale += lp.scale_stride;
            }
            if p.i < lp.len {
                break;
            }
            // Wrap: take back what this loop added.
            src -= lp.len * lp.src_stride;
            dst -= lp.len * lp.dst_stride;
            scale -= p.g * lp.scale_stride;
            *p = Pos::default();
        }
    }
}

/// The portable path, and the exact one for wide integers and f64: one element
/// at a time with exact integers, any strides.
///
/// # Safety
/// `range` is inside `0..numel` and no concurrent call writes any of its dst
/// elements (the contract of `Kernel::run`).
pub unsafe fn run_exact<S: IntType, Z: IntType, D: FloatType, F: Formula>(
    job: &Job<'_>,
    range: Range<usize>,
) {
    let c = Ctx::new(job);
    let loops = job.plan().loops();
    let Some(inner) = loops.last().copied() else {
        return;
    };
    // SAFETY: the rows come from the plan's loop nest restricted to `range`, so
    // every offset is inside the buffers `bind` checked, and the dst elements
    // are this call's own (this function's contract).
    walk(loops, range, |r| unsafe {
        exact_row::<S, Z::Exact, D, F>(&c, &inner, r, |zi| Z::load(c.zps, zi))
    });
}

/// One run element by element; `zp` reads zero point `zi`.
///
/// # Safety
/// `r` is a run of the plan's loop nest inside the job's range; `zp` is safe to
/// call with the zero-point indices of its elements.
#[inline(always)]
unsafe fn exact_row<S, E, D, F>(c: &Ctx, inner: &Loop, r: Row, zp: impl Fn(usize) -> i64)
where
    S: IntType,
    E: ExactInt,
    D: FloatType,
    F: Formula,
{
    for i in r.i0..r.i1 {
        let si = r.scale + i / inner.group * inner.scale_stride;
        let zi = if c.zps_broadcast { 0 } else { si };
        // SAFETY: in-view offsets (caller).
        unsafe {
            let s = D::load(c.scales, si);
            let so = r.src + i * inner.src_stride;
            elem::<S, E, D, F>(c, so, c.dst, r.dst + i * inner.dst_stride, zp(zi), s);
        }
    }
}

/// One element, scalar and exact (`E` wide enough for `q - z`).
///
/// # Safety
/// `so` is the in-view src offset of an element of this call's range, `dst`
/// plus `dof` elements where its result goes (in view, or a tile).
#[inline(always)]
unsafe fn elem<S: IntType, E: ExactInt, D: FloatType, F: Formula>(
    c: &Ctx,
    so: usize,
    dst: *mut u8,
    dof: usize,
    z: i64,
    s: D::Work,
) {
    let l = Scalar::<E, D::Work>::default();
    // SAFETY: in-view offsets (caller).
    unsafe {
        let q = S::load(c.src, so);
        let y = apply::<S, F, E, D::Work>(l, E::from_i64(q), E::from_i64(z), s);
        D::store(dst, dof, y);
    }
}

/// Zero points beyond this magnitude could make `q - z` leave the i32 lanes.
const ZP_LIMIT: i64 = i32::MAX as i64 - 256;

/// True when the job's zero points keep every `q - z` (8-bit or 4-bit `q`) in
/// the vector kernels' i32 lanes.
pub fn zps_fit_i32(job: &Job<'_>) -> bool {
    match job.plan().zps().map(|z| z.dtype) {
        Some(DType::S64) => false,
        Some(DType::S32) => job
            .zps()
            .chunks_exact(4)
            .all(|b| (i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64).abs() <= ZP_LIMIT),
        _ => true,
    }
}

/// Zero points as the vector kernels read them (their dtype known at run time).
#[derive(Clone, Copy)]
enum Zp<'a> {
    /// One value for every element (0 when absent).
    Const(i64),
    /// One per scale index, of this dtype.
    Each(DType, &'a [u8]),
}

impl<'a> Zp<'a> {
    fn new(job: &Job<'a>) -> Zp<'a> {
        let plan = job.plan();
        match plan.zps() {
            None => Zp::Const(0),
            Some(d) if plan.zps_broadcast() => Zp::Const(load_int(d.dtype, job.zps(), 0)),
            Some(d) => Zp::Each(d.dtype, job.zps()),
        }
    }

    /// Zero point of scale index `si` (bounds-checked; the small dtypes inline,
    /// as per-group runs read one per group).
    #[inline(always)]
    fn at(&self, si: usize) -> i64 {
        match *self {
            Zp::Const(z) => z,
            Zp::Each(DType::U4, b) => nibble(b, si) as i64,
            Zp::Each(DType::S4, b) => s4_value(nibble(b, si)) as i64,
            Zp::Each(DType::U8, b) => b[si] as i64,
            Zp::Each(DType::S8, b) => b[si] as i8 as i64,
            Zp::Each(d, b) => load_int(d, b, si),
        }
    }
}

/// Per-element zero points widened to i32, so the vector loop loads them like
/// s32: the last window asked for, kept while later runs fall inside it (runs
/// along a broadcast outer dim all read the same zero points).
#[derive(Default)]
struct Widened {
    lo: usize,
    vals: Vec<i32>,
}

impl Widened {
    /// The zero points of scale indices `si..si + n`.
    fn slice(&mut self, zp: Zp<'_>, si: usize, n: usize) -> &[i32] {
        let inside = si >= self.lo && si + n <= self.lo + self.vals.len();
        if !inside {
            self.lo = si;
            self.vals.clear();
            self.vals.extend((si..si + n).map(|i| zp.at(i) as i32));
        }
        &self.vals[si - self.lo..si - self.lo + n]
    }
}

/// What a vector kernel knows of its job.
struct VecCtx<'a> {
    c: Ctx,
    zp: Zp<'a>,
    widened: Widened,
}

/// The vector path for ISA `V` (zero points of any dtype that fits i32 lanes,
/// see [`zps_fit_i32`]).
///
/// # Safety
/// Called with a job and a range inside `0..numel` (Kernel::run contract); `S` is
/// an 8-bit or 4-bit type, `D::VECTOR`, and [`zps_fit_i32`] holds.
#[inline(always)]
pub unsafe fn run_vector<V: Simd, S: IntType, D: FloatType, F: Formula>(
    v: V,
    job: &Job<'_>,
    range: Range<usize>,
) {
    let plan = job.plan();
    let Some(inner) = plan.loops().last().copied() else {
        return;
    };
    let store = policy::store_for(plan.lowering().output_bytes());
    let streaming = store == StoreStrategy::NonTemporal;
    let mut vc = VecCtx {
        c: Ctx {
            prefetch: store == StoreStrategy::Prefetch,
            ..Ctx::new(job)
        },
        zp: Zp::new(job),
        widened: Widened::default(),
    };
    let shape = Shape::of(&inner, vc.zp);
    // The closures must inline into the caller's `#[target_feature]` function, or
    // every intrinsic becomes a call.
    // SAFETY (shared_rows and all walks): rows of the plan's loop nest inside
    // `range` (see run_exact).
    let shared = (!streaming)
        .then(|| unsafe { shared_rows::<V, S, D, F>(v, &vc, shape, plan.loops(), &range) })
        .flatten();
    let parts = shared.unwrap_or([range, 0..0]);
    // One walk per shape, so the per-run code has no shape branches.
    macro_rules! rows {
        ($part:ident, $($k:ident)*) => {
            match shape {
                $(Shape::$k => walk(
                    plan.loops(),
                    $part,
                    #[inline(always)]
                    |r| unsafe {
                        row::<V, S, D, F, { Shape::$k as u8 }>(v, &mut vc, &inner, r, streaming)
                    },
                ),)*
            }
        };
    }
    for part in parts {
        rows!(part, Strided Const ElemZero ElemConst ElemEach Group);
    }
    if streaming {
        v.fence();
    }
}

/// Whole rows of a two-loop nest with a scale per element and one zero point,
/// all reading the same scales: one tight loop over the rows (no per-row
/// setup, parameters hoisted). Returns the partial rows left at either end of
/// `range`, or `None` when the job is not of that form.
///
/// # Safety
/// As [`run_vector`]; `vc` is the job's.
#[inline(always)]
unsafe fn shared_rows<V: Simd, S: IntType, D: FloatType, F: Formula>(
    v: V,
    vc: &VecCtx<'_>,
    shape: Shape,
    loops: &[Loop],
    range: &Range<usize>,
) -> Option<[Range<usize>; 2]> {
    let [outer, inner] = loops else {
        return None;
    };
    let n = inner.len;
    let (r0, r1) = (range.start.div_ceil(n), range.end / n);
    let same_scales = outer.is_constant() || outer.scale_stride == 0;
    let elem = matches!(shape, Shape::ElemZero | Shape::ElemConst);
    if !(elem && same_scales && r0 < r1) {
        return None;
    }
    let c = &vc.c;
    // Row r's src and dst offsets.
    let at = |r: usize| (r * outer.src_stride, r * outer.dst_stride);
    // SAFETY: rows r0..r1 are whole rows inside `range`; each reads scales
    // 0..n (the outer loop adds no scale offset).
    unsafe {
        if shape == Shape::ElemZero {
            let p = ElemP::<V, D, true>::new(v, c, 0, 0);
            seg_rows::<V, S, D, F, _>(v, c, r0..r1, at, n, &p);
        } else {
            let p = ElemP::<V, D, false>::new(v, c, vc.zp.at(0), 0);
            seg_rows::<V, S, D, F, _>(v, c, r0..r1, at, n, &p);
        }
    }
    Some([range.start..r0 * n, r1 * n..range.end])
}

/// [`seg`] over rows `rows` of `n` elements each, at the offsets `at` gives,
/// all with parameters `p`.
///
/// # Safety
/// Every row is a whole run of the job's range that `p` describes.
#[inline(always)]
unsafe fn seg_rows<V, S, D, F, P>(
    v: V,
    c: &Ctx,
    rows: Range<usize>,
    at: impl Fn(usize) -> (usize, usize),
    n: usize,
    p: &P,
) where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
    P: Params<V, D::Work>,
{
    for r in rows {
        let (so, dof) = at(r);
        // SAFETY: a whole run of the job's range (caller).
        unsafe { seg::<V, S, D, F, _>(v, c, so, (c.dst, dof), n, p) };
    }
}

/// The loop shape of a job's innermost runs, decided once per call.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Shape {
    /// Not contiguous in src or dst: element by element.
    Strided,
    /// One scale for each whole run.
    Const,
    /// A scale per element, no zero point (or zero).
    ElemZero,
    /// A scale per element, one zero point for all.
    ElemConst,
    /// A scale and a zero point per element.
    ElemEach,
    /// A scale per group along the run.
    Group,
}

impl Shape {
    fn of(inner: &Loop, zp: Zp<'_>) -> Shape {
        if inner.src_stride != 1 || inner.dst_stride != 1 {
            Shape::Strided
        } else if inner.group >= inner.len {
            Shape::Const
        } else if inner.group == 1 && inner.scale_stride == 1 {
            match zp {
                Zp::Const(0) => Shape::ElemZero,
                Zp::Const(_) => Shape::ElemConst,
                Zp::Each(..) => Shape::ElemEach,
            }
        } else {
            Shape::Group
        }
    }
}

/// Bytes of the tile a streamed run is computed in (stays in L1).
const TILE: usize = 4096;

/// A streamed run's tile: [`TILE`] bytes after up to a line of skew (see
/// [`row`]).
#[repr(C, align(64))]
struct Tile([u8; TILE + 64]);

/// One innermost run of shape `SHAPE`. With `streaming` (a large output), 4-bit
/// runs whose lookups are whole lines stream them from registers
/// ([`lines::stream_lines`]); any other contiguous run is computed a tile at a
/// time in L1 and each tile streamed to dst with non-temporal stores; tiles end
/// at 64-byte aligned dst addresses, so no cache line gets both kinds of store.
/// One inlined [`vec_row`] serves both.
///
/// # Safety
/// As [`vec_row`].
#[inline(always)]
unsafe fn row<V: Simd, S: IntType, D: FloatType, F: Formula, const SHAPE: u8>(
    v: V,
    vc: &mut VecCtx<'_>,
    inner: &Loop,
    r: Row,
    streaming: bool,
) {
    let tiled = streaming && SHAPE != Shape::Strided as u8;
    let lookups = SHAPE == Shape::Const as u8 || SHAPE == Shape::Group as u8;
    // SAFETY: as this function's (the run's results go to dst).
    if tiled && lookups && unsafe { lines::stream_lines::<V, S, D, F, SHAPE>(v, vc, inner, r) } {
        return;
    }
    let mut tile = core::mem::MaybeUninit::<Tile>::uninit();
    let row = vc.c.dst.wrapping_add(r.dst * D::SIZE);
    // Groups whole lines long start at one offset within a line of dst: the
    // tile is written from that offset's complement, so every group's vectors
    // are stored on whole lines of it (the copy then reads across lines).
    let skew = if SHAPE == Shape::Group as u8 && (inner.group * D::SIZE).is_multiple_of(64) {
        (64 - row as usize % 64) % 64
    } else {
        0
    };
    let buf = tile.as_mut_ptr().cast::<u8>().wrapping_add(skew);
    let mut i = r.i0;
    loop {
        let (end, out) = if tiled {
            // Up to TILE bytes, ending at an aligned address when that leaves some.
            let start = row as usize + i * D::SIZE;
            let lim = (start + TILE) & !63;
            let end = match (lim.saturating_sub(row as usize) / D::SIZE).min(r.i1) {
                e if e > i => e,
                _ => (i + TILE / D::SIZE).min(r.i1),
            };
            (end, (buf, 0))
        } else {
            (r.i1, (vc.c.dst, r.dst + i))
        };
        let part = Row {
            i0: i,
            i1: end,
            ..r
        };
        // SAFETY: elements i..end of the run go to dst, or to the tile (at most
        // TILE bytes) and then to their dst bytes, which are in view and this
        // call's own.
        unsafe {
            vec_row::<V, S, D, F, SHAPE>(v, vc, inner, part, out);
            if tiled {
                v.stream_copy(row.add(i * D::SIZE), buf, (end - i) * D::SIZE);
            }
        }
        i = end;
        if i >= r.i1 {
            return;
        }
    }
}

/// One innermost run of shape `SHAPE` (a [`Shape`] as u8), results to `out`
/// plus an element offset.
///
/// # Safety
/// `r` is a run of the plan's loop nest inside the job's range, of that shape.
#[inline(always)]
unsafe fn vec_row<V: Simd, S: IntType, D: FloatType, F: Formula, const SHAPE: u8>(
    v: V,
    vc: &mut VecCtx<'_>,
    inner: &Loop,
    r: Row,
    (out, out0): (*mut u8, usize),
) {
    let c = &vc.c;
    let (so, n) = (r.src + r.i0, r.i1 - r.i0);
    // SAFETY (all arms): the segments cover exactly the run's elements, their
    // results going to `out` (caller).
    unsafe {
        if SHAPE == Shape::Strided as u8 {
            // (d) general strided fallback; zero-point indices are the job's.
            exact_row::<S, i64, D, F>(c, inner, r, |zi| vc.zp.at(zi))
        } else if SHAPE == Shape::Const as u8 {
            // (a) one scale for the whole contiguous run.
            let p = const_p::<V, S, D>(v, vc, r.scale);
            const_seg::<V, S, D, F>(v, c, so, (out, out0), n, &p);
        } else if SHAPE == Shape::ElemZero as u8 {
            // (b) a scale per element; symmetric: a zero the compiler sees.
            let p = ElemP::<V, D, true>::new(v, c, 0, r.scale + r.i0);
            seg::<V, S, D, F, _>(v, c, so, (out, out0), n, &p);
        } else if SHAPE == Shape::ElemConst as u8 {
            let p = ElemP::<V, D, false>::new(v, c, vc.zp.at(0), r.scale + r.i0);
            seg::<V, S, D, F, _>(v, c, so, (out, out0), n, &p);
        } else if SHAPE == Shape::ElemEach as u8 {
            let si = r.scale + r.i0;
            let zps = vc.widened.slice(vc.zp, si, n);
            let p = ElemZ::<V, D> {
                zps,
                p: ElemP::new(v, c, 0, si),
            };
            seg::<V, S, D, F, _>(v, c, so, (out, out0), n, &p);
        } else {
            // (c) a scale per group; the run may start and end mid-group.
            let g = inner.group;
            let (mut i, mut j) = (r.i0, r.i0 / g);
            while i < r.i1 {
                let end = r.i1.min((j + 1) * g);
                let p = const_p::<V, S, D>(v, vc, r.scale + j * inner.scale_stride);
                let dof = out0 + (i - r.i0);
                const_seg::<V, S, D, F>(v, c, r.src + i, (out, dof), end - i, &p);
                i = end;
                j += 1;
            }
        }
    }
}

/// Where a segment's zero points and scales come from.
trait Params<V: Simd, W>: Copy {
    /// Zero points and scales of elements `k..k + LANES`.
    ///
    /// # Safety
    /// Those elements are in the segment.
    unsafe fn vec(&self, v: V, k: usize) -> (V::Int, V::Float);
    /// Zero point and scale of element `k`.
    ///
    /// # Safety
    /// Element `k` is in the segment.
    unsafe fn scalar(&self, k: usize) -> (i64, W);
}

/// One zero point and scale for the whole segment.
#[derive(Clone, Copy)]
struct ConstP<V: Simd, W> {
    zv: V::Int,
    sv: V::Float,
    z: i64,
    s: W,
}

/// The parameters of scale index `si`.
///
/// # Safety
/// `si` is a valid scale index of the job.
#[inline(always)]
unsafe fn const_p<V: Simd, S: IntType, D: FloatType>(
    v: V,
    vc: &VecCtx<'_>,
    si: usize,
) -> ConstP<V, D::Work> {
    // SAFETY: valid scale index (caller).
    let s = unsafe { D::load(vc.c.scales, si) };
    // A float src has no zero points (validation).
    let z = if S::DECODE.is_some() { 0 } else { vc.zp.at(si) };
    ConstP {
        zv: v.splat_int(z as i32),
        sv: v.splat_float(D::work_f32(s)),
        z,
        s,
    }
}

impl<V: Simd, W: Copy> Params<V, W> for ConstP<V, W> {
    #[inline(always)]
    unsafe fn vec(&self, _v: V, _k: usize) -> (V::Int, V::Float) {
        (self.zv, self.sv)
    }
    #[inline(always)]
    unsafe fn scalar(&self, _k: usize) -> (i64, W) {
        (self.z, self.s)
    }
}

/// A scale per element from scale index `si`, one zero point for all (0 when
/// `ZERO`).
struct ElemP<V: Simd, D, const ZERO: bool> {
    scales: *const u8,
    si: usize,
    zv: V::Int,
    z: i64,
    _d: core::marker::PhantomData<D>,
}

// Copy without `D: Copy` (derive would ask for it).
impl<V: Simd, D, const ZERO: bool> Clone for ElemP<V, D, ZERO> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V: Simd, D, const ZERO: bool> Copy for ElemP<V, D, ZERO> {}
impl<V: Simd, D> Clone for ElemZ<'_, V, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V: Simd, D> Copy for ElemZ<'_, V, D> {}

impl<V: Simd, D: FloatType, const ZERO: bool> ElemP<V, D, ZERO> {
    #[inline(always)]
    fn new(v: V, c: &Ctx, z: i64, si: usize) -> Self {
        ElemP {
            scales: c.scales,
            si,
            zv: v.splat_int(z as i32),
            z,
            _d: core::marker::PhantomData,
        }
    }
}

impl<V: Simd, D: FloatType, const ZERO: bool> Params<V, D::Work> for ElemP<V, D, ZERO> {
    #[inline(always)]
    unsafe fn vec(&self, v: V, k: usize) -> (V::Int, V::Float) {
        let z = if ZERO { v.splat_int(0) } else { self.zv };
        // SAFETY: elements of the segment (caller).
        unsafe { (z, D::load_vec(v, self.scales, self.si + k)) }
    }
    #[inline(always)]
    unsafe fn scalar(&self, k: usize) -> (i64, D::Work) {
        // SAFETY: an element of the segment (caller).
        unsafe { (self.z, D::load(self.scales, self.si + k)) }
    }
}

/// A scale and a zero point per element: `zps` holds the segment's, widened.
struct ElemZ<'a, V: Simd, D> {
    zps: &'a [i32],
    p: ElemP<V, D, true>,
}

impl<V: Simd, D: FloatType> Params<V, D::Work> for ElemZ<'_, V, D> {
    #[inline(always)]
    unsafe fn vec(&self, v: V, k: usize) -> (V::Int, V::Float) {
        // SAFETY: elements k..k + LANES of the segment (caller), which `zps` covers.
        unsafe {
            let z = v.load_s32(self.zps.as_ptr().add(k).cast());
            (z, self.p.vec(v, k).1)
        }
    }
    #[inline(always)]
    unsafe fn scalar(&self, k: usize) -> (i64, D::Work) {
        // SAFETY: an element of the segment (caller), which `zps` covers.
        unsafe { (*self.zps.get_unchecked(k) as i64, self.p.scalar(k).1) }
    }
}

const fn is_4bit(d: Option<DType>) -> bool {
    matches!(d, Some(t) if t.is_4bit())
}

/// Splits a contiguous segment of `n` elements from src offset `so` into
/// vectors of `step` elements: calls `vector(k)` on each start `k` and
/// `scalar(k)` on elements no vector covers. The last vector may overlap its
/// predecessor (rewriting the same values) instead of leaving a scalar tail.
/// Vectors of 4-bit src start at even nibbles.
///
/// Stores are not aligned: measured, a head to align dst costs more per run
/// than the cache-line splits it saves, even for outputs far beyond the caches.
#[inline(always)]
fn split_seg<S: IntType>(
    (so, n): (usize, usize),
    step: usize,
    align: usize,
    mut vector: impl FnMut(usize),
    mut scalar: impl FnMut(usize),
) {
    let four = is_4bit(S::DTYPE);
    // An odd first nibble cannot start a vector.
    let first = usize::from(four && !so.is_multiple_of(2));
    if n < first + step {
        for k in 0..n {
            scalar(k);
        }
        return;
    }
    for k in 0..first {
        scalar(k);
    }
    let last = n - step;
    let mut k = first;
    if align > 0 && !four && align < step && n >= first + ALIGN_MIN_STEPS * step {
        // An overlapping first vector, then whole vectors from `align` on.
        vector(k);
        k += align;
    }
    while k <= last {
        vector(k);
        k += step;
    }
    if k < n {
        // 4-bit: back to an even nibble (still > first, as so + first is even).
        let last = last - usize::from(four && !(so + last).is_multiple_of(2));
        vector(last);
        for k in last + step..n {
            scalar(k);
        }
    }
}

/// Fewest vectors a segment must span for [`split_seg`] to spend one more on
/// aligning the rest: on AMD EPYC Zen 4, segments of 2 vectors (s8 -> f32 groups
/// of 32) ran slower aligned; of 8 (groups of 128) and of 256 (rows of 4096)
/// aligning won (BENCHMARKS.md). Groups whole lines long now start on lines of
/// the tile anyway ([`row`]'s skew); this serves the others (rows of 4097 f32).
const ALIGN_MIN_STEPS: usize = 8;

/// Elements from `dof` of `out` to its next 64-byte line (0 when on one, or when
/// the element size does not divide the way there).
#[inline(always)]
fn line_head<D: FloatType>(out: *mut u8, dof: usize) -> usize {
    let off = (out as usize).wrapping_add(dof * D::SIZE) % 64;
    let gap = (64 - off) % 64;
    if gap.is_multiple_of(D::SIZE) {
        gap / D::SIZE
    } else {
        0
    }
}

/// How far ahead of the stores dst lines are prefetched, in bytes.
const PREFETCH_AHEAD: usize = 1024;

/// Prefetches the dst line `PREFETCH_AHEAD` bytes past element `i`, when `on`
/// (outputs beyond the caches: the stores then wait on fetching each line).
#[inline(always)]
fn prefetch_dst<V: Simd, D: FloatType>(v: V, on: bool, dst: *mut u8, i: usize) {
    if on {
        v.prefetch(dst.wrapping_add(i * D::SIZE + PREFETCH_AHEAD));
    }
}

/// A segment with one zero point and scale: 4-bit src long enough to pay for a
/// table goes through [`lut_seg`], the rest through [`seg`].
///
/// # Safety
/// As [`seg`].
#[inline(always)]
unsafe fn const_seg<V, S, D, F>(
    v: V,
    c: &Ctx,
    so: usize,
    out: (*mut u8, usize),
    n: usize,
    p: &ConstP<V, D::Work>,
) where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
{
    // SAFETY: forwarded.
    unsafe {
        if is_4bit(S::DTYPE) && n >= LUT_MIN {
            lut_seg::<V, S, D, F>(v, c, so, out, n, p)
        } else {
            seg::<V, S, D, F, _>(v, c, so, out, n, p)
        }
    }
}

/// The dst encodings of the formula at each of the 16 values of 4-bit `S`, with
/// the segment's zero point and scale, as a register table. Computed by the same
/// vector code as [`seg`], so the lookups give its bits.
///
/// # Safety
/// `S` is 4-bit and `D::VECTOR`.
#[inline(always)]
unsafe fn table<V, S, D, F>(v: V, p: &ConstP<V, D::Work>) -> D::Tab<V>
where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
{
    /// The nibbles 0..16 packed low nibble first.
    const NIBBLES: [u8; 8] = [0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe];
    #[repr(align(64))]
    struct Buf([u8; 64]);
    // SAFETY: the loads read nibbles k..k + LANES of NIBBLES (16 nibbles) or
    // entries k..k + LANES of a 256-entry table.
    let at = |k: usize| unsafe {
        match S::DECODE {
            // The values of nibbles k..k + LANES: the table's entries.
            Some(t) => float_src::<S, F, V>(v, v.load_f32(t.as_ptr().add(k).cast()), p.sv),
            None => F::eval(v, S::load_vec(v, NIBBLES.as_ptr(), k), p.zv, p.sv),
        }
    };
    if D::PAIR {
        // One vector holds all 16 entries, or two do.
        let y = at(0);
        return D::tab2(v, [y, if V::LANES >= 16 { y } else { at(V::LANES) }]);
    }
    let mut buf = Buf([0; 64]);
    // SAFETY: the stores write elements k..k + LANES of 16 into 64 bytes (at
    // most 4 each).
    unsafe {
        let mut k = 0;
        while k < 16 {
            D::store_vec::<V>(v, buf.0.as_mut_ptr(), k, at(k), F::QUIET);
            k += V::LANES;
        }
        D::tab(v, buf.0.as_ptr())
    }
}

/// A constant-parameter segment of 4-bit src by table lookup: whole steps when
/// it splits into them exactly, else scalar head and tail as in [`seg`] with
/// whole vectors of dst in between.
///
/// # Safety
/// As [`seg`]; `S` is 4-bit.
#[inline(always)]
unsafe fn lut_seg<V, S, D, F>(
    v: V,
    c: &Ctx,
    so: usize,
    (dst, dof): (*mut u8, usize),
    n: usize,
    p: &ConstP<V, D::Work>,
) where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
{
    // SAFETY: `split_seg` passes elements of the segment (caller): scalar ones,
    // and lookups of `step` elements from an even nibble.
    unsafe {
        let t = table::<V, S, D, F>(v, p);
        let step = D::lut_step::<V>();
        if so.is_multiple_of(2) && n.is_multiple_of(step) {
            // Whole steps (typically a whole group): no head or tail to split.
            let mut k = 0;
            while k < n {
                lut_at::<V, D>(v, c, t, so + k, (dst, dof + k));
                k += step;
            }
            return;
        }
        split_seg::<S>(
            (so, n),
            step,
            0,
            #[inline(always)]
            move |k| lut_at::<V, D>(v, c, t, so + k, (dst, dof + k)),
            #[inline(always)]
            move |k| elem::<S, i64, D, F>(c, so + k, dst, dof + k, p.z, p.s),
        );
    }
}

/// One table step: [`FloatType::lut_step`] elements from src nibble `so` (even)
/// to dst element `dof`.
///
/// # Safety
/// Those elements are in view, in the job's range, and share the table's
/// parameters.
#[inline(always)]
unsafe fn lut_at<V: Simd, D: FloatType>(
    v: V,
    c: &Ctx,
    t: D::Tab<V>,
    so: usize,
    (dst, dof): (*mut u8, usize),
) {
    prefetch_dst::<V, D>(v, c.prefetch, dst, dof);
    // SAFETY: in view (caller); `so` even, so the step starts on a byte.
    unsafe { D::lut::<V>(v, t, c.src.add(so / 2), dst.add(dof * D::SIZE)) }
}

/// The formula on the `V::LANES` elements of src `S` from offset `o`.
///
/// # Safety
/// Those elements are in view (from an even nibble for 4-bit src).
#[inline(always)]
unsafe fn vec_at<V: Simd, S: IntType, F: Formula>(
    v: V,
    src: *const u8,
    o: usize,
    z: V::Int,
    s: V::Float,
) -> V::Float {
    // SAFETY: in view (caller).
    unsafe {
        if S::DECODE.is_some() {
            float_src::<S, F, V>(v, S::load_float(v, src, o), s)
        } else {
            F::eval(v, S::load_vec(v, src, o), z, s)
        }
    }
}

/// A contiguous segment of `n` elements from src offset `so` and dst offset `dof`:
/// a scalar head for an odd first nibble, whole vectors, and an overlapping last
/// vector or a scalar tail (see [`split_seg`]).
///
/// # Safety
/// The segment's elements are in view and in the job's range; `p` describes them.
#[inline(always)]
unsafe fn seg<V, S, D, F, P>(
    v: V,
    c: &Ctx,
    so: usize,
    (dst, dof): (*mut u8, usize),
    n: usize,
    p: &P,
) where
    V: Simd,
    S: IntType,
    D: FloatType,
    F: Formula,
    P: Params<V, D::Work>,
{
    // SAFETY: `split_seg` and `pairs` pass elements of the segment (caller):
    // scalar ones, and vectors of `LANES` elements (from an even nibble for
    // 4-bit src).
    unsafe {
        let (src, pf) = (c.src, c.prefetch);
        if let (true, true, Some(t)) = (D::PAIR && V::NAN_MASKS, S::NAN, S::DTYPE)
            && n >= 2 * V::LANES
        {
            // An f8 src with NaN codes: they are found from the codes and
            // replaced as the results are stored, not decoded as NaNs.
            return pairs::<V>(
                n,
                #[inline(always)]
                |k| prefetch_dst::<V, D>(v, pf, dst, dof + k),
                #[inline(always)]
                |k| F::eval_float(v, v.load_f8_any(t, src.add(so + k)), p.vec(v, k).1),
                #[inline(always)]
                |k, y| {
                    let nan = v.nan_codes(t, src.add(so + k));
                    D::store_vec2_nan::<V>(v, dst, dof + k, y, nan)
                },
            );
        }
        if D::PAIR && !is_4bit(S::DTYPE) && n >= 2 * V::LANES {
            return pairs::<V>(
                n,
                #[inline(always)]
                |k| prefetch_dst::<V, D>(v, pf, dst, dof + k),
                #[inline(always)]
                |k| {
                    let (z, s) = p.vec(v, k);
                    vec_at::<V, S, F>(v, src, so + k, z, s)
                },
                #[inline(always)]
                |k, y| D::store_vec2::<V>(v, dst, dof + k, y, F::QUIET),
            );
        }
        // Into a streamed run's tile (not dst itself), a long segment starting
        // mid-line stores its vectors on whole lines after an overlapping first
        // one (vector stores across lines are slow; see `ALIGN_MIN_STEPS`).
        let align = if dst != c.dst {
            line_head::<D>(dst, dof)
        } else {
            0
        };
        split_seg::<S>(
            (so, n),
            V::LANES,
            align,
            #[inline(always)]
            move |k| {
                prefetch_dst::<V, D>(v, pf, dst, dof + k);
                let (z, s) = p.vec(v, k);
                let y = vec_at::<V, S, F>(v, src, so + k, z, s);
                D::store_vec::<V>(v, dst, dof + k, y, F::QUIET)
            },
            #[inline(always)]
            move |k| {
                let (z, s) = p.scalar(k);
                elem::<S, i64, D, F>(c, so + k, dst, dof + k, z, s)
            },
        );
    }
}

/// The `n >= 2 * LANES` elements of a segment two vectors a step: `vec(k)` the
/// results of elements `k..k + LANES`, `store(k, [vec(k), vec(k + LANES)])`;
/// a last pair that would pass `n` ends at `n` instead, overlapping its
/// predecessor (rewriting the same values). `at(k)` first, for each step.
#[inline(always)]
fn pairs<V: Simd>(
    n: usize,
    at: impl Fn(usize),
    vec: impl Fn(usize) -> V::Float,
    store: impl Fn(usize, [V::Float; 2]),
) {
    let step = 2 * V::LANES;
    let mut k = 0;
    loop {
        at(k);
        store(k, [vec(k), vec(k + V::LANES)]);
        k += step;
        if k >= n {
            return;
        }
        k = k.min(n - step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets (src, dst, scale) of logical element `l`, by full decomposition.
    fn offsets(loops: &[Loop], mut l: usize) -> (usize, usize, usize) {
        let mut o = (0, 0, 0);
        for lp in loops.iter().rev() {
            let i = l % lp.len;
            l /= lp.len;
            o.0 += i * lp.src_stride;
            o.1 += i * lp.dst_stride;
            o.2 += i / lp.group * lp.scale_stride;
        }
        o
    }

    fn nest(dims: usize, seed: u64) -> Vec<Loop> {
        let mut x = seed;
        let mut next = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        (0..dims)
            .map(|_| {
                let len = 1 + next(4);
                Loop {
                    len,
                    src_stride: next(50),
                    dst_stride: next(50),
                    group: 1 + next(len + 1),
                    scale_stride: next(7),
                }
            })
            .collect()
    }

    /// Every element of every range, in order, at the offsets a full
    /// decomposition gives; nests of up to 8 outer loops and beyond.
    #[test]
    fn walk_visits_each_element_at_its_offsets() {
        for (dims, seed) in [(1, 1), (2, 2), (3, 3), (9, 4), (10, 5), (12, 6)] {
            let loops = nest(dims, seed);
            let numel: usize = loops.iter().map(|l| l.len).product();
            let inner = *loops.last().unwrap();
            for (a, b) in [(0, numel), (1, numel), (numel / 3, numel / 2 + 1), (0, 0)] {
                let mut seen = Vec::new();
                walk(&loops, a..b, |r| {
                    for i in r.i0..r.i1 {
                        seen.push((
                            r.src + i * inner.src_stride,
                            r.dst + i * inner.dst_stride,
                            r.scale + i / inner.group * inner.scale_stride,
                        ));
                    }
                });
                let want: Vec<_> = (a..b).map(|l| offsets(&loops, l)).collect();
                assert_eq!(seen, want, "{dims} loops, range {a}..{b}");
            }
        }
    }
}
