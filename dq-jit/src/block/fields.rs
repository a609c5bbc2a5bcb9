//! An element's integer, `offset + sum(field << at)`, for 8 or 16 lanes of a run
//! at once in I8X16 byte lanes (the integers of every declared GGUF type fit a
//! signed byte; [`range`] proves it per declaration before lowering).
//!
//! A field's bytes for the lanes of a chunk are contiguous (inner byte stride 1: one
//! 8- or 16-byte load), or one byte for every lane (stride 0: a splat), or else
//! gathered lane by lane. Its bits are then shifted down and masked, per lane when
//! the inner shift stride is not 0 (one-bit fields: a lane mask and a compare).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::block::{BlockDecl, Field};

use super::lower::{Emit, dot};
use super::{lanes, mem};

/// The least and greatest integer `d`'s fields and offset can assemble.
pub(super) fn range(d: &BlockDecl) -> (i64, i64) {
    let (mut lo, mut hi) = (i64::from(d.offset), i64::from(d.offset));
    for f in d.fields {
        let (a, b) = match (f.lut, f.signed) {
            (Some(t), _) => (
                t.iter().map(|&x| i64::from(x)).min().unwrap_or(0),
                t.iter().map(|&x| i64::from(x)).max().unwrap_or(0),
            ),
            (None, true) => (-(1i64 << (f.bits - 1)), (1i64 << (f.bits - 1)) - 1),
            (None, false) => (0, (1i64 << f.bits) - 1),
        };
        lo += a << f.at;
        hi += b << f.at;
    }
    (lo, hi)
}

impl Emit<'_> {
    /// The integers of lanes `c..c + width` of run `r` of the block at `blk`, in
    /// the low `width` byte lanes of an I8X16 (the others hold garbage).
    pub(super) fn assemble(
        &mut self,
        d: &BlockDecl,
        blk: Value,
        r: usize,
        c: usize,
        width: usize,
    ) -> Value {
        let mut q = None;
        for f in d.fields {
            let v = self.field(d, f, blk, r, c, width);
            let v = self.vshl(v, i64::from(f.at));
            q = Some(match q {
                None => v,
                Some(q) => self.b.ins().iadd(q, v),
            });
        }
        let q = match q {
            Some(q) => q,
            None => self.splat_c(types::I8X16, 0),
        };
        if d.offset == 0 {
            q
        } else {
            let k = self.splat_c(types::I8X16, u64::from(d.offset as i8 as u8));
            self.b.ins().iadd(q, k)
        }
    }

    /// Field `f`'s value (bits, sign-extended or looked up) for lanes `c..c + width`
    /// of run `r`, in I8X16 byte lanes.
    fn field(
        &mut self,
        d: &BlockDecl,
        f: &Field,
        blk: Value,
        r: usize,
        c: usize,
        width: usize,
    ) -> Value {
        let n = d.digits.len();
        let (bs, ss) = (f.byte_stride[n - 1], usize::from(f.shift_stride[n - 1]));
        let byte = f.byte + dot(d.digits, |k| f.byte_stride[k], r) + c * bs;
        let shift = usize::from(f.shift) + dot(d.digits, |k| usize::from(f.shift_stride[k]), r) + c * ss;
        let bits = usize::from(f.bits);
        let mask = (1u64 << bits) - 1;
        // `check` of the declaration: bytes `byte + l * bs` for the run's lanes lie
        // in the block, and bits `shift + l * ss .. + bits` in their byte.
        let v = match (bs, ss) {
            (1, 0) => {
                let v = if width == 16 {
                    self.b.ins().load(types::I8X16, mem(), blk, byte as i32)
                } else {
                    let w = self.b.ins().load(types::I64, mem(), blk, byte as i32);
                    let w = self.b.ins().scalar_to_vector(types::I64X2, w);
                    self.b.ins().bitcast(types::I8X16, lanes(), w)
                };
                self.bits_of(v, shift, bits)
            }
            (0, 0) => {
                let v = self.splat_byte(blk, byte);
                self.bits_of(v, shift, bits)
            }
            (0, _) if bits == 1 => {
                // Lane `l` tests bit `shift + l * ss` of the same byte.
                let v = self.splat_byte(blk, byte);
                let sel: Vec<u8> = (0..16)
                    .map(|l| if l < width { 1u8 << (shift + l * ss) } else { 0 })
                    .collect();
                let sel = self.vconst_bytes(types::I8X16, sel);
                let hit = self.b.ins().band(v, sel);
                let zero = self.splat_c(types::I8X16, 0);
                let set = self.b.ins().icmp(IntCC::NotEqual, hit, zero);
                let one = self.splat_c(types::I8X16, 1);
                self.b.ins().band(set, one)
            }
            _ => {
                // Lane by lane: any strides a declaration allows.
                let mut v = self.splat_c(types::I8X16, 0);
                for l in 0..width {
                    let x = self
                        .b
                        .ins()
                        .uload8(types::I32, mem(), blk, (byte + l * bs) as i32);
                    let x = self.b.ins().ushr_imm_s(x, (shift + l * ss) as i64);
                    let x = self.b.ins().band_imm_s(x, mask as i64);
                    let x = self.b.ins().ireduce(types::I8, x);
                    v = self.b.ins().insertlane(v, x, l as u8);
                }
                v
            }
        };
        match (f.lut, f.signed) {
            (Some(t), _) => {
                let table = self.vconst_bytes(types::I8X16, t.iter().map(|&x| x as u8).collect());
                self.b.ins().swizzle(table, v)
            }
            (None, true) if bits < 8 => {
                let up = self.vshl(v, 8 - bits as i64);
                self.vsshr(up, 8 - bits as i64)
            }
            _ => v,
        }
    }

    /// Byte `byte` of the block in every lane.
    fn splat_byte(&mut self, blk: Value, byte: usize) -> Value {
        let x = self.b.ins().load(types::I8, mem(), blk, byte as i32);
        self.b.ins().splat(types::I8X16, x)
    }

    /// Bits `shift..shift + bits` of every byte lane of `v`.
    fn bits_of(&mut self, v: Value, shift: usize, bits: usize) -> Value {
        let v = self.vushr(v, shift as i64);
        if shift + bits < 8 {
            let m = self.splat_c(types::I8X16, (1u64 << bits) - 1);
            self.b.ins().band(v, m)
        } else {
            v
        }
    }
}
