//! A declaration's codebook [`Grid`] in the JIT: per run of 8 elements, the rows'
//! indices and the sign mask assembled by scalar code from the block's bytes, the
//! run's lanes (one row of 8 bytes or two of 4) loaded from the `'static` table as
//! one 64-bit word or two 32-bit ones, shifted to the grid's place, the mask's bits
//! spread over the lanes and the negated lanes flipped (`(v ^ m) - m`), for a chunk
//! of one or two runs in I8X16 byte lanes.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::block::{BlockDecl, Field, Grid};

use super::lower::{Emit, dot};
use super::{lanes, mem};

/// Why `d`'s grid cannot be lowered, if it cannot: rows of 8 lanes (one 64-bit
/// load a run).
pub(super) fn check(d: &BlockDecl) -> Result<(), &'static str> {
    match d.grid {
        Some(_) if d.inner() != 8 => Err("a grid's runs must be 8 elements"),
        _ => Ok(()),
    }
}

/// The least and greatest value `g`'s rows give, signs applied.
pub(super) fn range(g: &Grid) -> (i64, i64) {
    let lo = g
        .table
        .values
        .iter()
        .map(|&x| i64::from(x))
        .min()
        .unwrap_or(0);
    let hi = g
        .table
        .values
        .iter()
        .map(|&x| i64::from(x))
        .max()
        .unwrap_or(0);
    let m = lo.abs().max(hi.abs()) << g.at;
    (-m, m)
}

impl Emit<'_> {
    /// The grid's values of elements `e0..e0 + width` (one or two runs of 8) of the
    /// block at `blk`, in the low `width` byte lanes of an I8X16.
    pub(super) fn grid(
        &mut self,
        d: &BlockDecl,
        g: &Grid,
        blk: Value,
        e0: usize,
        width: usize,
    ) -> Value {
        let inner = d.inner();
        let mut rows = self.splat_c(types::I64X2, 0);
        let mut masks = self.b.ins().iconst(types::I32, 0);
        for k in 0..width / inner {
            let r = e0 / inner + k;
            let row = self.run_lanes(d, g, blk, r);
            rows = self.b.ins().insertlane(rows, row, k as u8);
            let s = self.run_bits(d, g.signs, blk, r);
            let m = match g.sign_table {
                Some(t) => {
                    let m = self.table_load(t.values, s, types::I8, 1);
                    self.b.ins().uextend(types::I32, m)
                }
                None => s,
            };
            let m = self.b.ins().ishl_imm_s(m, 8 * k as i64);
            masks = self.b.ins().bor(masks, m);
        }
        let v = self.b.ins().bitcast(types::I8X16, lanes(), rows);
        // `BlockDecl::check`: `at <= 4`, and `lower::check` holds the shifted
        // values to a signed byte.
        let v = self.vshl(v, i64::from(g.at));
        // Lane `i` gets mask byte `i / 8`, tested against its bit `i % 8`.
        let mv = self.b.ins().splat(types::I32X4, masks);
        let mv = self.b.ins().bitcast(types::I8X16, lanes(), mv);
        let mv = self.shuffle_bytes(mv, (0..16).map(|i| (i / 8) as u8).collect());
        let bit = self.vconst_bytes(types::I8X16, (0..16).map(|i| 1u8 << (i % 8)).collect());
        let hit = self.b.ins().band(mv, bit);
        let neg = self.b.ins().icmp(IntCC::Equal, hit, bit);
        let x = self.b.ins().bxor(v, neg);
        self.b.ins().isub(x, neg)
    }

    /// Run `r`'s lanes (I64): its rows side by side, row `k` from the index
    /// fields `g.index[k]` (`BlockDecl::check`: rows of `8 / rows` lanes).
    fn run_lanes(&mut self, d: &BlockDecl, g: &Grid, blk: Value, r: usize) -> Value {
        let lanes = g.table.lanes;
        let ty = match lanes {
            8 => types::I64,
            4 => types::I32,
            2 => types::I16,
            _ => types::I8,
        };
        let mut v = self.b.ins().iconst(types::I64, 0);
        for (k, index) in g.index.iter().enumerate() {
            let idx = self.run_bits(d, index, blk, r);
            let row = self.table_load(g.table.values, idx, ty, lanes as i64);
            let row = if ty == types::I64 {
                row
            } else {
                self.b.ins().uextend(types::I64, row)
            };
            let row = self.b.ins().ishl_imm_s(row, (8 * lanes * k) as i64);
            v = self.b.ins().bor(v, row);
        }
        v
    }

    /// Entry `idx` (I32) of `values`, `size` bytes of type `ty` at
    /// `values + idx * size`.
    fn table_load(
        &mut self,
        values: &'static [i8],
        idx: Value,
        ty: types::Type,
        size: i64,
    ) -> Value {
        // The table is `'static`: it outlives the compiled code. `BlockDecl::check`
        // holds `idx` to the table: a row per index pattern, a mask per sign pattern.
        let base = self.b.ins().iconst(types::I64, values.as_ptr() as i64);
        let off = self.b.ins().uextend(types::I64, idx);
        let off = self.b.ins().imul_imm_s(off, size);
        let at = self.b.ins().iadd(base, off);
        self.b.ins().load(ty, mem(), at, 0)
    }

    /// Run `r`'s run-constant `fields`, assembled (I32), byte by byte: a field's
    /// bytes lie in the block (`BlockDecl::check`), the 32 bits past them may not.
    fn run_bits(&mut self, d: &BlockDecl, fields: &[Field], blk: Value, r: usize) -> Value {
        let mut v = self.b.ins().iconst(types::I32, 0);
        for f in fields {
            let byte = f.byte + dot(d.digits, |k| f.byte_stride[k], r);
            let shift = usize::from(f.shift) + dot(d.digits, |k| usize::from(f.shift_stride[k]), r);
            let (first, low) = (byte + shift / 8, shift % 8);
            let bytes = (low + usize::from(f.bits)).div_ceil(8);
            let mut w = self.b.ins().iconst(types::I32, 0);
            for j in 0..bytes {
                let x = self
                    .b
                    .ins()
                    .uload8(types::I32, mem(), blk, (first + j) as i32);
                let x = self.b.ins().ishl_imm_s(x, 8 * j as i64);
                w = self.b.ins().bor(w, x);
            }
            let w = self.b.ins().ushr_imm_s(w, low as i64);
            let w = self.b.ins().band_imm_s(w, (1i64 << f.bits) - 1);
            let w = self.b.ins().ishl_imm_s(w, i64::from(f.at));
            v = self.b.ins().bor(v, w);
        }
        v
    }
}
