//! The generated backend's block driver: one generic body, monomorphized per
//! declaration (its associated const, folded by LLVM) and compiled once per ISA
//! with `#[target_feature]`.
//!
//! Per block: (a) the parameter program fills per-group f32 scratch; (b) for each
//! run of inner-digit elements (contiguous: vectorizes), each element's integer is
//! assembled from its fields' bits and the formula evaluated node by node with the
//! run's group parameters constant, into the output.
//!
//! An earlier form assembled a whole block's integers into an array before the
//! formula: on AMD EPYC (Zen 4) it was several times slower than the one-pass
//! forms for every declared type on both AVX2 and AVX-512 code, and was removed.

use super::decl::{BlockDecl, BlockNode, MAX_GROUPS, MAX_NODES, MAX_PARAMS};
use super::out::BlockOut;
use super::params;

/// A block type the driver is monomorphized for.
pub trait Block {
    /// The declaration (checked at compile time by the driver).
    const DECL: BlockDecl;
}

/// Longest inner run a declaration may have.
pub const MAX_RUN: usize = 32;

/// The forms a declared type is compiled in (same bits; which is fastest depends on
/// the declaration and the CPU, so [`BlockKernel`](super::BlockKernel) times them).
pub mod form {
    /// Runs indexed opaquely (LLVM cannot vectorize across runs, which on AVX-512
    /// it does with gathers), a field's contiguous bytes copied whole per run.
    pub const OPAQUE: usize = 0;
    /// Runs left to LLVM (vectorized across runs where it chooses).
    pub const OPEN: usize = 1;
    /// [`OPAQUE`] with non-temporal stores for a large output (see [`streams`]).
    pub const OPAQUE_NT: usize = 2;
    /// [`OPEN`] with non-temporal stores for a large output (see [`streams`]).
    pub const OPEN_NT: usize = 3;
    /// How many forms there are.
    pub const COUNT: usize = 4;

    /// True when form `f` writes a large output with non-temporal stores: each run
    /// computed in registers, then stored 16 bytes at a time without first reading
    /// the destination lines.
    pub const fn streams(f: usize) -> bool {
        f >= OPAQUE_NT
    }
}

/// Decodes whole blocks of `D` (`out` holds `bytes`' elements; the caller checked)
/// in form `FORM` (see [`form`]), each run rounded to `O` in registers by the
/// vectors of `V` ([`vectors`](super::vectors)).
#[inline(always)]
pub(crate) fn decode<D: Block, const FORM: usize, O: BlockOut, const V: u8>(
    bytes: &[u8],
    out: &mut [O],
) {
    const {
        assert!(D::DECL.check().is_ok(), "invalid block declaration");
        assert!(D::DECL.inner() <= MAX_RUN, "inner run too long");
        assert!(D::DECL.fields.len() <= MAX_FIELDS, "too many fields");
        assert!(FORM < form::COUNT, "no such form");
    }
    let d = &D::DECL;
    let nt = form::streams(FORM) && stream_ok(d, out);
    let blocks = bytes.chunks_exact(d.block_bytes);
    for (block, out) in blocks.zip(out.chunks_exact_mut(d.block_elems)) {
        fused_parts::<D, O, V>(block, out, FORM % 2 == form::OPAQUE, nt);
    }
    if nt {
        crate::arch::stream_fence();
    }
}

/// True when `out` can take non-temporal 16-byte stores run by run (x86-64, 16-byte
/// aligned, every run of the block and of its parts whole 16-byte vectors, and so
/// each part's start) and is large (its lines come from memory:
/// [`policy::store_for`](crate::policy::store_for) is not plain).
fn stream_ok<O>(d: &BlockDecl, out: &[O]) -> bool {
    let whole = |elems: usize| (elems * size_of::<O>()).is_multiple_of(16);
    cfg!(target_arch = "x86_64")
        && (out.as_ptr() as usize).is_multiple_of(16)
        && whole(d.inner())
        && whole(d.own_elems())
        && d.then
            .iter()
            .all(|p| whole(p.inner()) && whole(p.block_elems))
        && crate::policy::store_for(size_of_val(out)) != crate::policy::StoreStrategy::Plain
}

/// Part `K` of `D`'s declaration ([`BlockDecl::then`]): `D`'s own for 0 (and past
/// its last part, where it is not run).
struct Part<D, const K: usize>(core::marker::PhantomData<D>);

impl<D: Block, const K: usize> Block for Part<D, K> {
    const DECL: BlockDecl = if K == 0 || K > D::DECL.then.len() {
        D::DECL
    } else {
        *D::DECL.then[K - 1]
    };
}

/// A block of `D`: its own elements, then each part's (`BlockDecl::check`: at most
/// [`MAX_PARTS`](super::decl::MAX_PARTS), their elements adding up to the block's).
#[inline(always)]
fn fused_parts<D: Block, O: BlockOut, const V: u8>(
    block: &[u8],
    out: &mut [O],
    opaque: bool,
    nt: bool,
) {
    const { assert!(D::DECL.then.len() <= 2, "at most two parts") };
    let (own, rest) = out.split_at_mut(D::DECL.own_elems());
    fused_block::<D, O, V>(block, own, opaque, nt);
    if !D::DECL.then.is_empty() {
        let (one, two) = rest.split_at_mut(Part::<D, 1>::DECL.block_elems);
        fused_block::<Part<D, 1>, O, V>(block, one, opaque, nt);
        if D::DECL.then.len() > 1 {
            fused_block::<Part<D, 2>, O, V>(block, two, opaque, nt);
        }
    }
}

#[inline(always)]
fn fused_block<D: Block, O: BlockOut, const V: u8>(
    block: &[u8],
    out: &mut [O],
    opaque: bool,
    nt: bool,
) {
    let d = &D::DECL;
    let mut p = [[0f32; MAX_PARAMS]; MAX_GROUPS];
    params::eval::<D>(block, &mut p);
    let inner = d.inner();
    for r in 0..d.own_elems() / inner {
        // Opaque run index, or not: measured on AMD EPYC (Zen 4) AVX-512, in
        // cache, opaque runs kept Q4_0, Q5_0 and Q2_K 3-6x faster, open ones Q4_1,
        // Q5_1 and MXFP4 1.2-1.5x faster.
        let r = if opaque { core::hint::black_box(r) } else { r };
        let out = &mut out[r * inner..][..inner];
        fused_run::<D, O, V>(block, r, &p[group::<D>(r)], out, opaque, nt);
    }
}

/// Most fields a declaration may have.
const MAX_FIELDS: usize = 4;

/// Run `r` of a block: each element's integer (offset plus its fields' bits) and
/// its value in one pass, no integer array in between.
#[inline(always)]
fn fused_run<D: Block, O: BlockOut, const V: u8>(
    block: &[u8],
    r: usize,
    p: &[f32; MAX_PARAMS],
    out: &mut [O],
    copy: bool,
    nt: bool,
) {
    let d = &D::DECL;
    let n = d.digits.len();
    let (mut base, mut shift) = ([0usize; MAX_FIELDS], [0usize; MAX_FIELDS]);
    for (k, f) in d.fields.iter().enumerate() {
        base[k] = f.byte + dot(d.digits, f.byte_stride, r);
        shift[k] = usize::from(f.shift) + dot_u8(d.digits, f.shift_stride, r);
    }
    let mut wide = [0u32; MAX_FIELDS];
    // With `copy`, a field's bytes for the run copied whole when they are
    // contiguous: one vector load, not bytes picked one by one. In cache on AMD
    // Zen 4 (AVX-512, opaque runs) this sped Q4_0 up; with open runs it slowed
    // Q6_K down, so those read the block directly (BENCHMARKS.md).
    let mut run = [[0u8; MAX_RUN]; MAX_FIELDS];
    for (k, f) in d.fields.iter().enumerate() {
        if f.wide(d.digits) {
            wide[k] = window(block, base[k]);
        } else if copy && f.byte_stride[n - 1] == 1 {
            run[k][..out.len()].copy_from_slice(&block[base[k]..base[k] + out.len()]);
        }
    }
    let (rows, mask) = grid_rows(d, block, r);
    let mut vals = [0f32; MAX_RUN];
    let vals = &mut vals[..out.len()];
    for (l, y) in vals.iter_mut().enumerate() {
        let mut q = d.offset;
        if let Some(g) = d.grid {
            // Lanes read straight from the table (a sign-extending vector load per
            // row), negated by `(v ^ m) - m` with `m` all ones where the mask bit is
            // set: no scalar lane extraction or selects (in AVX2 code the earlier
            // `[i8; 8]` copy of the row was taken apart lane by lane).
            let lanes = g.table.lanes;
            let v = i32::from(rows[l / lanes][l % lanes]) << g.at;
            let m = -(((mask >> l) & 1) as i32);
            q += (v ^ m) - m;
        }
        for (k, f) in d.fields.iter().enumerate() {
            let (bs, ss) = (f.byte_stride[n - 1], usize::from(f.shift_stride[n - 1]));
            let s = shift[k] + l * ss;
            let v = if f.wide(d.digits) {
                (wide[k] >> s) as i32
            } else {
                let b = if copy && bs == 1 {
                    run[k][l]
                } else {
                    block[base[k] + l * bs]
                };
                if f.base3 {
                    trit(b, s)
                } else {
                    i32::from(b) >> s
                }
            };
            q += field_value(f, v & ((1 << f.bits) - 1)) << f.at;
        }
        *y = value::<D>(q, p);
    }
    O::put::<V>(out, vals, nt);
}

/// Run `r`'s rows of the declaration's grid (`lanes` values each; empty without a
/// grid; `BlockDecl::check`: at most 2 rows of a run of at most 8) and its sign mask
/// (bit `l` set: lane `l` negated).
#[inline(always)]
fn grid_rows(d: &BlockDecl, block: &[u8], r: usize) -> ([&'static [i8]; 2], u32) {
    let mut rows: [&'static [i8]; 2] = [&[]; 2];
    let Some(g) = d.grid else {
        return (rows, 0);
    };
    let lanes = g.table.lanes;
    for (k, index) in g.index.iter().enumerate().take(2) {
        let idx = run_bits(d, index, block, r);
        // `BlockDecl::check`: a row per index pattern.
        rows[k] = &g.table.values[idx * lanes..][..lanes];
    }
    let signs = run_bits(d, g.signs, block, r);
    let mask = match g.sign_table {
        Some(t) => u32::from(t.values[signs] as u8),
        None => signs as u32,
    };
    (rows, mask)
}

/// The run-constant fields `fields` of run `r`, assembled (see
/// [`Grid`](super::decl::Grid)).
#[inline(always)]
fn run_bits(d: &BlockDecl, fields: &[super::decl::Field], block: &[u8], r: usize) -> usize {
    let mut v = 0;
    for f in fields {
        let byte = f.byte + dot(d.digits, f.byte_stride, r);
        let shift = usize::from(f.shift) + dot_u8(d.digits, f.shift_stride, r);
        let w = window(block, byte + shift / 8) >> (shift % 8);
        v |= ((w & ((1 << f.bits) - 1)) as usize) << f.at;
    }
    v
}

/// Base-3 digit `p` (at most 4, `BlockDecl::check`) of byte `b` as ggml packs
/// TQ1_0: `((b * 3^p) mod 256 * 3) >> 8`.
#[inline(always)]
fn trit(b: u8, p: usize) -> i32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    (i32::from(b.wrapping_mul(POW3[p % 5])) * 3) >> 8
}

/// A field's bits `v` as the integer they stand for (table entry, sign-extended,
/// or as they are).
#[inline(always)]
fn field_value(f: &super::decl::Field, v: i32) -> i32 {
    match (f.table, f.signed) {
        (Some(t), _) if t.values.len() == 16 => {
            // The table as four 32-bit words, an entry picked by selects and a
            // shift: vectorizes in 32-bit lanes, without the gathers an indexed
            // load becomes (slow on AMD Zen 4).
            let t = t.values;
            let word = |h: usize| u32::from_le_bytes(core::array::from_fn(|i| t[4 * h + i] as u8));
            let (lo, hi) = if v & 4 != 0 {
                (word(1), word(3))
            } else {
                (word(0), word(2))
            };
            let w = if v & 8 != 0 { hi } else { lo };
            i32::from((w >> (8 * (v & 3))) as u8 as i8)
        }
        // `BlockDecl::check`: one entry per bit pattern, and `v` is masked to them.
        (Some(t), _) => i32::from(t.values[v as usize]),
        (None, true) => (v << (32 - f.bits)) >> (32 - f.bits),
        (None, false) => v,
    }
}

/// The outer digits of run `r` (innermost first), dotted with `coef`.
#[inline(always)]
fn dot(digits: &[usize], coef: &[usize], r: usize) -> usize {
    let n = digits.len();
    let mut rest = r;
    let mut sum = 0;
    for k in (0..n - 1).rev() {
        sum += (rest % digits[k]) * coef[k];
        rest /= digits[k];
    }
    sum
}

/// The group of run `r`.
#[inline(always)]
fn group<D: Block>(r: usize) -> usize {
    dot(D::DECL.digits, D::DECL.group, r)
}

/// The little-endian 32 bits at `byte` of `block` (zeros past its end).
#[inline(always)]
fn window(block: &[u8], byte: usize) -> u32 {
    // One 4-byte load where the bytes are all in the block (a grid's index and sign
    // fields, run by run); the copy below was a variable-length copy.
    if let Some(w) = block.get(byte..byte + 4) {
        return u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    }
    let mut w = [0u8; 4];
    let bytes = &block[byte..block.len().min(byte + 4)];
    w[..bytes.len()].copy_from_slice(bytes);
    u32::from_le_bytes(w)
}

#[inline(always)]
fn dot_u8(digits: &[usize], coef: &[u8], r: usize) -> usize {
    let n = digits.len();
    let mut rest = r;
    let mut sum = 0;
    for k in (0..n - 1).rev() {
        sum += (rest % digits[k]) * usize::from(coef[k]);
        rest /= digits[k];
    }
    sum
}

/// True when node `i` of `nodes` can be a NaN (anything but an integer or its
/// float).
const fn may_nan(nodes: &[BlockNode], i: u16) -> bool {
    !matches!(nodes[i as usize], BlockNode::Q | BlockNode::Float(_))
}

/// `a + b` or `a * b` where a NaN `a` wins (quieted) even when `b` is NaN too; LLVM
/// may commute a plain `+` or `*`.
#[inline(always)]
fn first_nan(a: f32, r: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | 0x0040_0000)
    } else {
        r
    }
}

/// The formula at one element: the node loop is over a constant declaration, so it
/// unrolls into straight-line code and the values stay in registers (the element
/// loops around it vectorize).
#[inline(always)]
fn value<D: Block>(q: i32, p: &[f32; MAX_PARAMS]) -> f32 {
    let nodes = D::DECL.formula.nodes;
    let mut v = [0f32; MAX_NODES];
    for (i, node) in nodes.iter().enumerate() {
        v[i] = match *node {
            BlockNode::Q => 0.0,
            BlockNode::Float(_) => q as f32,
            BlockNode::Param(k) => p[k as usize],
            BlockNode::Mul(a, b) => {
                let (x, z) = (v[a as usize], v[b as usize]);
                let both = may_nan(nodes, a) && may_nan(nodes, b);
                if both { first_nan(x, x * z) } else { x * z }
            }
            BlockNode::Add(a, b) => {
                let (x, z) = (v[a as usize], v[b as usize]);
                let both = may_nan(nodes, a) && may_nan(nodes, b);
                if both { first_nan(x, x + z) } else { x + z }
            }
            BlockNode::Sub(a, b) => v[a as usize] - v[b as usize],
            BlockNode::FlipSign(a, b) => {
                let sign = v[b as usize].to_bits() & 0x8000_0000;
                f32::from_bits(v[a as usize].to_bits() ^ sign)
            }
        };
    }
    v[nodes.len() - 1]
}
