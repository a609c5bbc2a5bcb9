//! The loop levels, outermost first: the entry (return on an empty range,
//! unravel `start`, peel an odd first nibble), the run loop over stretches of the
//! innermost loop and the carries into the outer loops, the src/dst/scale bases
//! of a run, and the segments of one scale and zero point, each handed to vector,
//! table or scalar code.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value, types};
use dq_runtime::DType;

use super::vector::{Scales, Steps};
use super::{Lut, Params, Run, Translator};
use crate::host_lut::HostTable;

impl<'a, 'f> Translator<'a, 'f> {
    /// Entry: return on an empty range, else unravel `start` and enter the run loop.
    pub(super) fn emit_entry(&mut self, start: Value, end: Value) {
        let ret = self.b.create_block();
        let body = self.b.create_block();
        let empty = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, start, end);
        self.b.ins().brif(empty, ret, &[], body, &[]);
        self.b.switch_to_block(body);
        let start = if self.peel_at_entry() {
            self.emit_entry_peel(start, end, ret)
        } else {
            start
        };
        if self.spec.loops.len() == 1 {
            // One loop holds every element, and the caller checks `end <= numel`:
            // the range is a single run.
            let base = self.emit_bases(&[]);
            self.emit_inner(start, end, base);
            self.b.ins().jump(ret, &[]);
            self.b.switch_to_block(ret);
            self.b.ins().return_(&[]);
            return;
        }
        let remaining = self.b.ins().isub(end, start);
        let idx = self.unravel(start);
        let run = self.b.create_block();
        for _ in 0..=self.spec.loops.len() {
            self.b.append_block_param(run, types::I64);
        }
        let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
        args.push(remaining.into());
        self.b.ins().jump(run, &args);
        self.emit_runs(run, ret);
        self.b.switch_to_block(ret);
        self.b.ins().return_(&[]);
    }

    /// One index per loop (outermost first) of logical element `l < numel`.
    fn unravel(&mut self, l: Value) -> Vec<Value> {
        let n = self.spec.loops.len();
        let mut idx = vec![l; n];
        let mut rest = l;
        for k in (1..n).rev() {
            let len = self.spec.loops[k].len as i64;
            idx[k] = self.urem_imm(rest, len);
            rest = self.udiv_imm(rest, len);
        }
        idx[0] = rest;
        idx
    }

    /// True when only the first element of a call can sit on an odd nibble, so the
    /// 4-bit vector code peels it once at entry instead of checking every segment:
    /// contiguous inner loop of even length, even outer src strides, and segments
    /// (groups along the inner loop) of even length. Not with
    /// [`table_scalar`](Self::table_scalar) segments, whose odd first element is
    /// a table lookup.
    pub(super) fn peel_at_entry(&self) -> bool {
        let n = self.spec.loops.len();
        let inner = self.inner();
        self.spec.src.is_4bit()
            && !self.table_scalar()
            && inner.src_stride == 1
            && inner.len.is_multiple_of(2)
            && (inner.is_constant() || inner.group.is_multiple_of(2) || inner.group == 1)
            && self.spec.loops[..n - 1]
                .iter()
                .all(|l| l.src_stride.is_multiple_of(2) || l.len == 1)
    }

    /// Under [`peel_at_entry`](Self::peel_at_entry): computes element `start` alone
    /// when it is odd (its nibble is then odd), and returns the first element left
    /// (branching to `ret` when none is).
    fn emit_entry_peel(&mut self, start: Value, end: Value, ret: Block) -> Value {
        let odd = self.b.ins().band_imm_s(start, 1);
        let (one, join, more) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let s = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(odd, one, &[], join, &[start.into()]);
        self.b.switch_to_block(one);
        let idx = self.unravel(start);
        let n = idx.len();
        let base = self.emit_bases(&idx[..n - 1]);
        self.emit_scalar_elem(idx[n - 1], base, Params::PerElem { base: base.scale });
        let next = self.add_imm(start, 1);
        self.b.ins().jump(join, &[next.into()]);
        self.b.switch_to_block(join);
        let left = self.b.ins().icmp(IntCC::UnsignedLessThan, s, end);
        self.b.ins().brif(left, more, &[], ret, &[]);
        self.b.switch_to_block(more);
        s
    }

    /// The run loop: `run`'s params are the loop indices (outermost first) and the
    /// number of elements left.
    fn emit_runs(&mut self, run: Block, ret: Block) {
        let n = self.spec.loops.len();
        let p = self.b.block_params(run).to_vec();
        let (idx, remaining) = (&p[..n], p[n]);
        self.b.switch_to_block(run);
        let inner = self.inner();
        let room = {
            let len = self.iconst(inner.len as i64);
            self.b.ins().isub(len, idx[n - 1])
        };
        let cnt = self.b.ins().umin(room, remaining);
        let base = self.emit_bases(&idx[..n - 1]);
        let j1 = self.add(idx[n - 1], cnt);
        self.emit_inner(idx[n - 1], j1, base);
        let left = self.b.ins().isub(remaining, cnt);
        let adv = self.b.create_block();
        self.b.ins().brif(left, adv, &[], ret, &[]);
        self.b.switch_to_block(adv);
        self.emit_advance(n - 1, idx, left, run);
    }

    /// Carries into loop `k - 1` after loop `k` wrapped (the innermost always wraps
    /// after a run). `left > 0` guarantees the outermost never overflows.
    fn emit_advance(&mut self, k: usize, idx: &[Value], left: Value, run: Block) {
        let zero = self.iconst(0);
        if k == 0 {
            // The outermost loop wrapped: unreachable while `left > 0` (single-loop
            // specs never get here), but the block needs a terminator.
            let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
            args[0] = zero.into();
            args.push(left.into());
            self.b.ins().jump(run, &args);
            return;
        }
        let next = self.add_imm(idx[k - 1], 1);
        let wrap = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, next, self.spec.loops[k - 1].len as i64);
        let go = self.b.create_block();
        let carry = self.b.create_block();
        self.b.ins().brif(wrap, carry, &[], go, &[]);
        self.b.switch_to_block(go);
        let mut args: Vec<_> = idx.iter().map(|&v| v.into()).collect();
        args[k - 1] = next.into();
        for a in &mut args[k..] {
            *a = zero.into();
        }
        args.push(left.into());
        self.b.ins().jump(run, &args);
        self.b.switch_to_block(carry);
        self.emit_advance(k - 1, idx, left, run);
    }

    /// Src, dst and scale bases of the outer loop indices.
    fn emit_bases(&mut self, outer: &[Value]) -> Run {
        let mut r = Run {
            src: self.iconst(0),
            dst: self.iconst(0),
            scale: self.iconst(0),
        };
        for (k, &i) in outer.iter().enumerate() {
            let l = self.spec.loops[k];
            let s = self.mul_imm(i, l.src_stride as i64);
            r.src = self.add(r.src, s);
            let d = self.mul_imm(i, l.dst_stride as i64);
            r.dst = self.add(r.dst, d);
            if !l.is_constant() {
                let g = self.udiv_imm(i, l.group as i64);
                let g = self.mul_imm(g, l.scale_stride as i64);
                r.scale = self.add(r.scale, g);
            }
        }
        r
    }

    /// Inner elements `j0..j1` of one run.
    fn emit_inner(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        if inner.group == 1 && !inner.is_constant() {
            self.emit_per_elem(j0, j1, run);
        } else {
            self.emit_segments(j0, j1, run);
        }
    }

    /// Groups along the innermost loop: one scale and zero point per segment.
    fn emit_segments(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        // Segment loop params: first element, then (groups along the loop) the
        // next group boundary and the scale index. The group of `j0` is divided
        // out once per run; segments then step by a group.
        let constant = inner.is_constant();
        let head = self.b.create_block();
        let j = self.b.append_block_param(head, types::I64);
        let exit = self.b.create_block();
        let (seg_end, next, sidx) = if constant {
            self.b.ins().jump(head, &[j0.into()]);
            self.b.switch_to_block(head);
            (j1, j1, run.scale)
        } else {
            let g = self.udiv_imm(j0, inner.group as i64);
            let next0 = self.add_imm(g, 1);
            let next0 = self.mul_imm(next0, inner.group as i64);
            let off = self.mul_imm(g, inner.scale_stride as i64);
            let sidx0 = self.add(run.scale, off);
            let next = self.b.append_block_param(head, types::I64);
            let sidx = self.b.append_block_param(head, types::I64);
            self.b
                .ins()
                .jump(head, &[j0.into(), next0.into(), sidx0.into()]);
            self.b.switch_to_block(head);
            (self.b.ins().umin(next, j1), next, sidx)
        };
        let s = self.load_scale(sidx);
        let zidx = if self.spec.zps_broadcast {
            self.iconst(0)
        } else {
            sidx
        };
        let z = self.load_zp(zidx);
        let full = (!constant && self.full_segments()).then(|| {
            let len = self.b.ins().isub(seg_end, j);
            self.b
                .ins()
                .icmp_imm_s(IntCC::Equal, len, inner.group as i64)
        });
        self.emit_elems(j, seg_end, run, Params::Fixed { s, z }, full);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, seg_end, j1);
        let mut args: Vec<BlockArg> = vec![seg_end.into()];
        if !constant {
            let next = self.add_imm(next, inner.group as i64);
            let sidx = self.add_imm(sidx, inner.scale_stride as i64);
            args.extend([BlockArg::from(next), BlockArg::from(sidx)]);
        }
        self.b.ins().brif(more, head, &args, exit, &[]);
        self.b.switch_to_block(exit);
    }

    /// Innermost group of 1: a scale per element.
    fn emit_per_elem(&mut self, j0: Value, j1: Value, run: Run) {
        let inner = self.inner();
        let z_ok = match self.spec.zps {
            None => true,
            Some(_) if self.spec.zps_broadcast => true,
            Some(t) => matches!(t, DType::S8 | DType::U8),
        };
        let contiguous = inner.src_stride == 1 && inner.dst_stride == 1 && inner.scale_stride == 1;
        // e8m0 scales are decoded in lanes with a byte shuffle.
        let s_ok = self.spec.scales != DType::E8M0 || self.lut == Lut::Pshufb;
        let params = Params::PerElem { base: run.scale };
        if !(self.an.vector && z_ok && s_ok && contiguous) {
            self.emit_scalar_loop(j0, j1, run, params);
            return;
        }
        let zb = if self.spec.zps_broadcast {
            let zero = self.iconst(0);
            Some(self.load_zp(zero))
        } else {
            None
        };
        let tail = self.enter_vector(zb, j0);
        self.emit_vector_loop((j0, j1), run, tail, Steps::Indexed, |t, j, sp, dp| {
            let s = Scales::At(t.scale_addr(run.scale, j));
            let z = match zb {
                Some(z) => [t.vec_z(z); 4],
                None => match t.spec.zps {
                    None => [t.no_z(); 4],
                    Some(zt) => {
                        let off = t.b.ins().iadd(run.scale, j);
                        t.load_zp_vec(zt, off)
                    }
                },
            };
            t.emit_vector_step(sp, dp, s, z);
        });
        self.emit_scalar_loop_at(tail, j1, run, params);
    }

    /// True when table segments that are a whole group enter the table loop
    /// directly (see [`emit_full_entry`](Self::emit_full_entry)): vector code,
    /// contiguous inner loop, groups of whole 16-element steps, and even outer src
    /// strides (a group then starts on a byte), with no run-time zero-point check.
    fn full_segments(&self) -> bool {
        let n = self.spec.loops.len();
        let inner = self.inner();
        self.an.vector
            && self.table_scalar()
            && inner.src_stride == 1
            && inner.dst_stride == 1
            && inner.group.is_multiple_of(16)
            && self.spec.loops[..n - 1]
                .iter()
                .all(|l| l.src_stride.is_multiple_of(2) || l.len == 1)
    }

    /// Elements `j0..j1` with a fixed scale and zero point: vector steps when the
    /// inner loop is contiguous, then a scalar tail. `full`, when given, is the
    /// condition that the segment is a whole group: it then skips the peel and
    /// the loop's bounds (see [`emit_full_entry`](Self::emit_full_entry)).
    fn emit_elems(&mut self, j0: Value, j1: Value, run: Run, p: Params, full: Option<Value>) {
        let inner = self.inner();
        let Params::Fixed { s, z } = p else {
            unreachable!("segments have fixed params")
        };
        if !(self.an.vector && inner.src_stride == 1 && inner.dst_stride == 1) {
            self.emit_scalar_loop(j0, j1, run, p);
            return;
        }
        let tail = self.enter_vector(Some(z), j0);
        let sv = self.b.ins().splat(types::F32X4, s);
        let zv = self.vec_z(z);
        let mut p = p;
        if self.exp_tables_pay() {
            // A scale in range takes the exponent tables, any other the byte
            // table or the vector decode below.
            let ok = self.exp_tables_ok(s);
            let (fast, slow) = (self.b.create_block(), self.b.create_block());
            self.b.ins().brif(ok, fast, &[], slow, &[]);
            self.b.switch_to_block(fast);
            let tabs = self.exp_tables(sv);
            let steps = Steps::Double { full: None };
            self.emit_vector_loop((j0, j1), run, tail, steps, |t, _, sp, dp| {
                t.emit_exp_steps(tabs, sp, dp)
            });
            self.b.switch_to_block(slow);
        }
        if self.byte_table_pays() {
            let tab = self.byte_table(sv);
            self.emit_vector_loop((j0, j1), run, tail, Steps::Plain, |t, _, sp, dp| {
                t.emit_byte_lookups(tab, sp, dp)
            });
        } else if self.lut_pays() {
            let (tab, entries, full) = if self.host_rounds(full.is_some()) {
                // A whole group's run rounds its table on the host; partial
                // segments round theirs here too.
                let ys = self.local_consts(|t| t.lut_values(sv, zv));
                let full = self.branch_full(full);
                let (tab, entries) = self.local_consts(|t| t.lut_bytes(ys));
                self.host_table = Some(match self.spec.dst {
                    DType::F16 => HostTable::F16(ys),
                    _ => HostTable::Bf16(ys),
                });
                (tab, entries, full)
            } else {
                let (tab, entries) = if self.pow2_tables_pay() {
                    self.pow2_or_lut_table(s, (sv, zv))
                } else {
                    self.local_consts(|t| t.lut_table(sv, zv))
                };
                let full = self.branch_full(full);
                // The host's lookups take the 16 entries in registers.
                let table = if self.spec.out() == DType::F32 {
                    HostTable::F32([entries[0], entries[1], entries[2], entries[3]])
                } else {
                    HostTable::Halves([entries[0], entries[1]])
                };
                self.host_table = self.spec.host_lookups.map(|_| table);
                (tab, entries, full)
            };
            if self.table_scalar() {
                // Only the partial segments' single elements read the table
                // back: a whole group has none.
                let addr = self.store_table(&entries);
                p = Params::Table { addr };
                self.table = Some(addr);
            }
            self.emit_lut_loop((j0, j1), run, &tab, tail, full);
            self.table = None;
            self.host_table = None;
        } else {
            self.emit_vector_loop((j0, j1), run, tail, Steps::Plain, |t, _, sp, dp| {
                t.emit_vector_step(sp, dp, Scales::Splat(sv), [zv; 4])
            });
        }
        self.emit_scalar_loop_at(tail, j1, run, p);
    }
}
