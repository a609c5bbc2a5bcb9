//! An element's integer, `offset + sum(field << at)`, for a chunk of 8 or 16
//! consecutive elements of a block at once, in I8X16 byte lanes, biased by 128
//! (every declared GGUF type's integer fits a signed byte; [`range`] proves it per
//! declaration before lowering), then spread into F32X4 as exact floats.
//!
//! Where each lane's bits sit (byte and shift) is known at compile time. A field's
//! bytes for a chunk are one 16-byte window of the block, put in lane order by one
//! byte shuffle (none when already in order); its bits are shifted down and masked
//! (one-bit fields at per-lane positions: a lane mask and a compare). Bytes too
//! far apart for a window are gathered lane by lane.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use dq_runtime::block::{BlockDecl, Field};

use super::lower::{Emit, dot};
use super::{lanes, mem};

/// The least and greatest integer `d`'s fields and offset can assemble.
pub(super) fn range(d: &BlockDecl) -> (i64, i64) {
    let (mut lo, mut hi) = (i64::from(d.offset), i64::from(d.offset));
    for f in d.fields {
        let (a, b) = match (f.table, f.signed) {
            _ if f.base3 => (0, 2),
            (Some(t), _) => (
                t.values.iter().map(|&x| i64::from(x)).min().unwrap_or(0),
                t.values.iter().map(|&x| i64::from(x)).max().unwrap_or(0),
            ),
            (None, true) => (-(1i64 << (f.bits - 1)), (1i64 << (f.bits - 1)) - 1),
            (None, false) => (0, (1i64 << f.bits) - 1),
        };
        lo += a << f.at;
        hi += b << f.at;
    }
    if let Some(g) = &d.grid {
        let (a, b) = super::grid::range(g);
        lo += a;
        hi += b;
    }
    (lo, hi)
}

/// Byte and bit shift of field `f` for element `e` of a block of `d`.
fn position(d: &BlockDecl, f: &Field, e: usize) -> (usize, usize) {
    let n = d.digits.len();
    let (r, l) = (e / d.inner(), e % d.inner());
    let byte = f.byte + dot(d.digits, |k| f.byte_stride[k], r) + l * f.byte_stride[n - 1];
    let shift = usize::from(f.shift)
        + dot(d.digits, |k| usize::from(f.shift_stride[k]), r)
        + l * usize::from(f.shift_stride[n - 1]);
    // A shift past the first byte is a later byte (`Field`: bits never cross one).
    (byte + shift / 8, shift % 8)
}

/// What [`Emit::assemble`] adds to `d`'s integers to make them a byte: 0 where
/// they are never negative (spread by one conversion), else 128.
pub(super) fn bias(d: &BlockDecl) -> i64 {
    if range(d).0 >= 0 { 0 } else { 128 }
}

/// `2^23 + 128` as f32: a biased byte `u` in the mantissa of 2^23 minus it is
/// `u - 128`, exactly.
const MAGIC_128: f32 = 8_388_736.0;

impl Emit<'_> {
    /// The integers of elements `e0..e0 + width` of the block at `blk`, plus
    /// [`bias`]`(d)`, in the low `width` byte lanes of an I8X16 (the others hold
    /// garbage).
    pub(super) fn assemble(&mut self, d: &BlockDecl, blk: Value, e0: usize, width: usize) -> Value {
        let mut q = None;
        for f in d.fields {
            let pos: Vec<(usize, usize)> = (e0..e0 + width).map(|e| position(d, f, e)).collect();
            let placed = if f.base3 {
                Some(self.trits(d, blk, &pos))
            } else {
                self.placed(d, f, blk, &pos)
            };
            let v = match placed {
                Some(v) => v,
                None => {
                    let v = self.field(d, f, blk, &pos);
                    self.vshl(v, i64::from(f.at))
                }
            };
            q = Some(match q {
                None => v,
                Some(q) => self.b.ins().iadd(q, v),
            });
        }
        if let Some(g) = &d.grid {
            let v = self.grid(d, g, blk, e0, width);
            q = Some(match q {
                None => v,
                Some(q) => self.b.ins().iadd(q, v),
            });
        }
        let k = (i64::from(d.offset) + bias(d)) as u8;
        match q {
            Some(q) if k == 0 => q,
            Some(q) => {
                let k = self.splat_c(types::I8X16, u64::from(k));
                self.b.ins().iadd(q, k)
            }
            None => self.splat_c(types::I8X16, u64::from(k)),
        }
    }

    /// Byte lanes `4j..4j + 4` of `qb` (integers plus [`bias`]) as the F32X4 of
    /// their integers: each byte shuffled into the low byte of a lane of zeros,
    /// then, for unsigned integers (bias 0), converted (`cvtdq2ps`); otherwise
    /// or'ed into the mantissa of 2^23, minus 2^23 + 128. Both exact.
    pub(super) fn spread(&mut self, d: &BlockDecl, qb: Value, j: usize) -> Value {
        let idx: Vec<u8> = (0..16)
            .map(|i| {
                if i % 4 == 0 {
                    (4 * j + i / 4) as u8
                } else {
                    0x80
                }
            })
            .collect();
        let x = self.shuffle_bytes(qb, idx);
        let x = self.b.ins().bitcast(types::I32X4, lanes(), x);
        if bias(d) == 0 {
            return self.b.ins().fcvt_from_sint(types::F32X4, x);
        }
        let magic = self.splat_c(types::I32X4, 0x4B00_0000);
        let x = self.b.ins().bor(x, magic);
        let x = self.b.ins().bitcast(types::F32X4, lanes(), x);
        let bias = self.splat_c(types::F32X4, u64::from(MAGIC_128.to_bits()));
        self.b.ins().fsub(x, bias)
    }

    /// A plain field (no table, not signed) whose lanes sit in one 16-byte window,
    /// put straight at its place `at`, without [`field`](Self::field)'s emulated
    /// byte shifts; `None` for any other field.
    /// - Lanes at one shift: the bits masked where they are, then moved by one
    ///   16-bit shift. Nothing crosses into the next byte: the mask keeps bits
    ///   `shift..shift + bits` and `at + bits <= 8`.
    /// - A one-bit field at per-lane shifts: each lane's byte tested against its
    ///   bit (`hit == bit`), the all-ones result masked to `1 << at`.
    fn placed(
        &mut self,
        d: &BlockDecl,
        f: &Field,
        blk: Value,
        pos: &[(usize, usize)],
    ) -> Option<Value> {
        let (bits, at) = (usize::from(f.bits), usize::from(f.at));
        let lo = pos.iter().map(|p| p.0).min()?;
        let hi = pos.iter().map(|p| p.0).max()?;
        let same_shift = pos.iter().all(|p| p.1 == pos[0].1);
        let fits = pos.iter().all(|p| p.1 + bits <= 8) && at + bits <= 8;
        let plain = f.table.is_none() && !f.signed;
        if !plain || !fits || hi - lo >= 16 || d.block_bytes < 16 || !(same_shift || bits == 1) {
            return None;
        }
        let v = self.window(d, blk, pos, lo);
        if same_shift {
            let shift = pos[0].1;
            let m = self.splat_c(types::I8X16, ((1u64 << bits) - 1) << shift);
            let v = self.b.ins().band(v, m);
            return Some(self.shift16(v, at as i64 - shift as i64));
        }
        let sel: Vec<u8> = (0..16)
            .map(|l| pos.get(l).map_or(0, |p| 1u8 << p.1))
            .collect();
        let sel = self.vconst_bytes(types::I8X16, sel);
        let hit = self.b.ins().band(v, sel);
        let set = self.b.ins().icmp(IntCC::Equal, hit, sel);
        let at = self.splat_c(types::I8X16, 1u64 << at);
        Some(self.b.ins().band(set, at))
    }

    /// `v`'s 16-bit lanes shifted left by `by` (right for a negative `by`).
    fn shift16(&mut self, v: Value, by: i64) -> Value {
        if by == 0 {
            return v;
        }
        let w = self.b.ins().bitcast(types::I16X8, lanes(), v);
        let w = if by > 0 {
            self.vshl(w, by)
        } else {
            self.vushr(w, -by)
        };
        self.b.ins().bitcast(types::I8X16, lanes(), w)
    }

    /// The bytes at `pos` in lane order, from the 16-byte window of the block that
    /// starts at `lo` (or ends at the block's end).
    fn window(&mut self, d: &BlockDecl, blk: Value, pos: &[(usize, usize)], lo: usize) -> Value {
        // A window of 16 bytes inside the block (`BlockDecl::check`: every lane's
        // byte is in the block) that holds every lane's byte (callers check).
        let s = lo.min(d.block_bytes - 16);
        let w = self.b.ins().load(types::I8X16, mem(), blk, s as i32);
        let idx: Vec<u8> = (0..16)
            .map(|l| pos.get(l).map_or(0x80, |p| (p.0 - s) as u8))
            .collect();
        let in_order = pos.iter().enumerate().all(|(l, p)| p.0 - s == l);
        if in_order {
            w
        } else {
            self.shuffle_bytes(w, idx)
        }
    }

    /// Field `f`'s value (bits, sign-extended or looked up) for lanes at byte and
    /// shift `pos`, in I8X16 byte lanes.
    fn field(&mut self, d: &BlockDecl, f: &Field, blk: Value, pos: &[(usize, usize)]) -> Value {
        let bits = usize::from(f.bits);
        let lo = pos.iter().map(|p| p.0).min().expect("a chunk has lanes");
        let hi = pos.iter().map(|p| p.0).max().expect("a chunk has lanes");
        let same_shift = pos.iter().all(|p| p.1 == pos[0].1);
        let v = if hi - lo < 16 && d.block_bytes >= 16 && (same_shift || bits == 1) {
            let v = self.window(d, blk, pos, lo);
            if same_shift {
                self.bits_of(v, pos[0].1, bits)
            } else {
                // One bit a lane, each at its own position: test it.
                let sel: Vec<u8> = (0..16)
                    .map(|l| pos.get(l).map_or(0, |p| 1u8 << p.1))
                    .collect();
                let sel = self.vconst_bytes(types::I8X16, sel);
                let hit = self.b.ins().band(v, sel);
                let zero = self.splat_c(types::I8X16, 0);
                let set = self.b.ins().icmp(IntCC::NotEqual, hit, zero);
                let one = self.splat_c(types::I8X16, 1);
                self.b.ins().band(set, one)
            }
        } else {
            // Lane by lane: any positions a declaration allows.
            let mask = (1i64 << bits) - 1;
            let mut v = self.splat_c(types::I8X16, 0);
            for (l, &(byte, shift)) in pos.iter().enumerate() {
                let x = self.b.ins().uload8(types::I32, mem(), blk, byte as i32);
                let x = self.b.ins().ushr_imm_s(x, shift as i64);
                let x = self.b.ins().band_imm_s(x, mask);
                let x = self.b.ins().ireduce(types::I8, x);
                v = self.b.ins().insertlane(v, x, l as u8);
            }
            v
        };
        match (f.table, f.signed) {
            (Some(t), _) => {
                // `lower::check`: a table of at most 16 entries, one byte shuffle.
                let mut bytes: Vec<u8> = t.values.iter().map(|&x| x as u8).collect();
                bytes.resize(16, 0);
                let table = self.vconst_bytes(types::I8X16, bytes);
                self.lookup(table, v)
            }
            (None, true) if bits < 8 => {
                let up = self.vshl(v, 8 - bits as i64);
                self.vsshr(up, 8 - bits as i64)
            }
            _ => v,
        }
    }

    /// A base-3 field's digits (`Field::base3`): lane `l`'s byte at `pos[l].0`, its
    /// digit place `pos[l].1` (a shift below 8 is the place, `position`), as
    /// `((b * 3^p) & 0xFF) * 3 >> 8` in 16-bit lanes, narrowed back to bytes (0..=2).
    fn trits(&mut self, d: &BlockDecl, blk: Value, pos: &[(usize, usize)]) -> Value {
        let lo = pos.iter().map(|p| p.0).min().expect("a chunk has lanes");
        let hi = pos.iter().map(|p| p.0).max().expect("a chunk has lanes");
        let v = if hi - lo < 16 && d.block_bytes >= 16 {
            self.window(d, blk, pos, lo)
        } else {
            let mut v = self.splat_c(types::I8X16, 0);
            for (l, &(byte, _)) in pos.iter().enumerate() {
                let x = self.b.ins().load(types::I8, mem(), blk, byte as i32);
                v = self.b.ins().insertlane(v, x, l as u8);
            }
            v
        };
        let pow = |half: usize| -> Vec<u8> {
            (0..8)
                .flat_map(|l| {
                    let p = pos.get(8 * half + l).map_or(0, |p| p.1 as u32);
                    3u16.pow(p).to_le_bytes()
                })
                .collect()
        };
        let mut halves = Vec::with_capacity(2);
        for half in 0..2 {
            let x = if half == 0 {
                self.b.ins().uwiden_low(v)
            } else {
                self.b.ins().uwiden_high(v)
            };
            let m = self.vconst_bytes(types::I16X8, pow(half));
            let x = self.b.ins().imul(x, m);
            let low = self.splat_c(types::I16X8, 0xFF);
            let x = self.b.ins().band(x, low);
            let three = self.splat_c(types::I16X8, 3);
            let x = self.b.ins().imul(x, three);
            halves.push(self.vushr(x, 8));
        }
        self.b.ins().snarrow(halves[0], halves[1])
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
