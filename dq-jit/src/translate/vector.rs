//! The vector path: the bottom-tested vector loop (16 elements a step, 32 for
//! tables) with its peel and its second entry for whole groups, the run-time
//! zero-point check before it, one 16-element step (four F32X4 of results), and
//! zero points as vector code takes them (I32X4 or biased F32X4 splats).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value, types};
use dq_runtime::DType;

use super::eval::Ints;
use super::float_src::Codes;
use super::lane_loads::{MAGIC, bias};
use super::{Params, Run, STEP, Translator, lanes, mem};
use crate::spec::Z_LIMIT;

/// The steps of [`Translator::emit_vector_loop`].
#[derive(Clone, Copy)]
pub(super) enum Steps {
    /// 16 elements a step.
    Plain,
    /// 16 elements a step, the step given its first element's index.
    Indexed,
    /// 32 elements a step (4-bit table lookups); `full`, when given, is an
    /// empty block from which a whole group enters the loop directly (see
    /// [`Translator::emit_full_entry`]).
    Double { full: Option<Block> },
    /// As `Double`, but one call of `step` covers all of a run's steps: it gets
    /// the src end in place of the index and the loop does not loop (the
    /// host's lookups, [`crate::host_lut`]).
    Whole { full: Option<Block> },
}

/// The scales of a vector step.
#[derive(Clone, Copy)]
pub(super) enum Scales {
    /// One scale for all 16 elements (a splat).
    Splat(Value),
    /// Per element, contiguous from this byte address (dst dtype).
    At(Value),
}

impl<'a, 'f> Translator<'a, 'f> {
    /// Branches to a fresh block where the zero point may take the vector path, or
    /// to `tail(j0)` when it may not; returns `tail` (its param is the first index
    /// the vector code left). Without a run-time check there is no branch.
    pub(super) fn enter_vector(&mut self, z: Option<Value>, j0: Value) -> Block {
        let tail = self.b.create_block();
        self.b.append_block_param(tail, types::I64);
        if let Some(z) = z.filter(|_| self.an.z_checked) {
            let z = self.as_i64(z);
            let biased = self.add_imm(z, Z_LIMIT);
            let ok = self
                .b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, biased, 2 * Z_LIMIT);
            let vec = self.b.create_block();
            self.b.ins().brif(ok, vec, &[], tail, &[j0.into()]);
            self.b.switch_to_block(vec);
        }
        tail
    }

    /// Zero point `v` as I64 (an I128 one holds a sign-extended s64: exact).
    fn as_i64(&mut self, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == types::I128 {
            self.b.ins().ireduce(types::I64, v)
        } else {
            v
        }
    }

    /// A segment's zero point `z` (|z| <= Z_LIMIT) as vector code takes it: an
    /// I32X4 splat, or when [`biased`](Self::biased) the F32X4 splat of
    /// `z + 2^23 + bias(src)` (exact: below 2^24).
    pub(super) fn vec_z(&mut self, z: Value) -> Value {
        if self.spec.zps.is_none() {
            return self.no_z();
        }
        let z = self.as_i64(z);
        if self.biased {
            let c = self.add_imm(z, MAGIC + bias(self.spec.src));
            let c = self.b.ins().fcvt_from_sint(types::F32, c);
            return self.b.ins().splat(types::F32X4, c);
        }
        let z = self.b.ins().ireduce(types::I32, z);
        self.b.ins().splat(types::I32X4, z)
    }

    /// Vector zero points without zero points: never read, any constant will do.
    pub(super) fn no_z(&mut self) -> Value {
        if self.biased {
            self.bias_splat(self.spec.src)
        } else {
            self.vconst(types::I32X4, 0)
        }
    }

    /// 16 per-element zero points of dtype `zt` (8-bit) from element `o`, as
    /// [`vec_z`](Self::vec_z) makes them.
    pub(super) fn load_zp_vec(&mut self, zt: DType, o: Value) -> [Value; 4] {
        if !self.biased {
            return self.load_int_vec(zt, self.zps, o);
        }
        let addr = self.add(self.zps, o);
        let mut z = self.load_biased_at(zt, addr);
        let shift = bias(self.spec.src) - bias(zt);
        if shift != 0 {
            let c = self.vconst(types::F32X4, (shift as f32).to_bits() as u64);
            for x in &mut z {
                *x = self.b.ins().fadd(*x, c);
            }
        }
        z
    }

    /// The vector loop from `j0` while a step's elements remain before `j1`;
    /// then jumps to `exit` with the first index not done. A 4-bit src starting
    /// on an odd nibble peels one element first (unless the function did at
    /// entry), so vector loads start on a byte.
    ///
    /// The loop is bottom-tested and counts with the src address alone; `step`
    /// gets the element index only for [`Steps::Indexed`] (the src end for
    /// [`Steps::Whole`], else `j0`, meaningless).
    pub(super) fn emit_vector_loop(
        &mut self,
        (j0, j1): (Value, Value),
        run: Run,
        exit: Block,
        steps: Steps,
        step: impl Fn(&mut Self, Value, Value, Value),
    ) {
        let (elems, with_j, full) = match steps {
            Steps::Plain => (STEP, false, None),
            Steps::Indexed => (STEP, true, None),
            Steps::Double { full } | Steps::Whole { full } => (2 * STEP, false, full),
        };
        let start = j0;
        let j0 = if self.spec.src.is_4bit() && !self.peel_at_entry() {
            self.emit_peel(j0, j1, run)
        } else {
            j0
        };
        let j0 = if self.spec.stream_lines {
            self.emit_line_peel(j0, j1, run)
        } else {
            j0
        };
        // Elements the vector steps cover, and the first index after them.
        let len = self.b.ins().isub(j1, j0);
        let covered = self.b.ins().band_imm_s(len, -elems);
        let jv = self.add(j0, covered);
        // Src and dst addresses of element `j0`, carried along.
        let src_step = (self.spec.src.bits() as i64 * elems) / 8;
        let (sp, dp) = self.vector_addrs(run, j0);
        let src_len = if self.spec.src.is_4bit() {
            self.b.ins().ushr_imm_s(covered, 1)
        } else {
            covered
        };
        let send = self.add(sp, src_len);
        let w = self.spec.out_bytes() as i64;
        let body = self.b.create_block();
        let sp_p = self.b.append_block_param(body, types::I64);
        let dp_p = self.b.append_block_param(body, types::I64);
        let mut args: Vec<BlockArg> = vec![sp.into(), dp.into()];
        let j = if with_j {
            args.push(j0.into());
            self.b.append_block_param(body, types::I64)
        } else {
            j0
        };
        // With a second entry, the loop's end and exit index are params too.
        let (send_p, jv_p) = match full {
            Some(_) => {
                args.extend([BlockArg::from(send), BlockArg::from(jv)]);
                (
                    self.b.append_block_param(body, types::I64),
                    self.b.append_block_param(body, types::I64),
                )
            }
            None => (send, jv),
        };
        self.b.ins().brif(covered, body, &args, exit, &[jv.into()]);
        let (send, jv) = (send_p, jv_p);
        if let Some(full) = full {
            self.b.switch_to_block(full);
            self.emit_full_entry(start, run, body);
        }
        self.b.switch_to_block(body);
        if let Steps::Whole { .. } = steps {
            step(self, send, sp_p, dp_p);
            self.b.ins().jump(exit, &[jv.into()]);
            return;
        }
        step(self, j, sp_p, dp_p);
        let spn = self.add_imm(sp_p, src_step);
        let dpn = self.add_imm(dp_p, elems * w);
        let mut args: Vec<BlockArg> = vec![spn.into(), dpn.into()];
        if with_j {
            args.push(self.add_imm(j, elems).into());
        }
        if full.is_some() {
            args.extend([BlockArg::from(send), BlockArg::from(jv)]);
        }
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, spn, send);
        self.b.ins().brif(more, body, &args, exit, &[jv.into()]);
    }

    /// Under [`Spec::stream_lines`](crate::Spec::stream_lines): the elements of
    /// `j0..j1` before the first one that starts a 64-byte line of dst, one by
    /// one, so the vector steps after them start lines (and stream them).
    /// Returns the first element left. A 4-bit src peels only an even count (its
    /// steps start on a byte); its steps then start lines or never do.
    fn emit_line_peel(&mut self, j0: Value, j1: Value, run: Run) -> Value {
        let (_, dp) = self.vector_addrs(run, j0);
        let neg = self.b.ins().ineg(dp);
        let bytes = self.b.ins().band_imm_s(neg, 63);
        let k = self.b.ins().ushr_imm_s(bytes, 2);
        let k = if self.spec.src.is_4bit() {
            let odd = self.b.ins().band_imm_s(k, 1);
            let zero = self.iconst(0);
            self.b.ins().select(odd, zero, k)
        } else {
            k
        };
        let left = self.b.ins().isub(j1, j0);
        let k = self.b.ins().umin(k, left);
        let jp = self.add(j0, k);
        self.emit_scalar_loop(j0, jp, run, Params::PerElem { base: run.scale });
        jp
    }

    /// Enters the table loop `body` (params: src and dst address, src end, exit
    /// index) for a whole group from `j0`: it starts on a byte (see
    /// [`full_segments`](Self::full_segments)), so no peel, and its bounds are
    /// constants.
    fn emit_full_entry(&mut self, j0: Value, run: Run, body: Block) {
        let covered = self.inner().group as i64 / 32 * 32;
        let (sp, dp) = self.vector_addrs(run, j0);
        let send = self.add_imm(sp, covered / 2);
        let jv = self.add_imm(j0, covered);
        let args = [sp, dp, send, jv].map(BlockArg::from);
        self.b.ins().jump(body, &args);
    }

    /// Src and dst byte addresses of element `j` of a contiguous run (4-bit src:
    /// `j` on a byte, an even nibble).
    pub(super) fn vector_addrs(&mut self, run: Run, j: Value) -> (Value, Value) {
        let so = self.add(run.src, j);
        let so = if self.spec.src.is_4bit() {
            self.b.ins().ushr_imm_s(so, 1)
        } else {
            so
        };
        let sp = self.add(self.src, so);
        let dof = self.add(run.dst, j);
        (sp, self.dst_addr(dof))
    }

    /// One vector step: 16 elements from src byte address `sp` to dst byte address
    /// `dp` with scales `s` and zero points `z` (four lanes groups each).
    /// `z` is as [`vec_z`](Self::vec_z) makes it.
    ///
    /// Lane group by lane group, each scale loaded just before its use (the
    /// backend then folds the load into the multiply) and each f32 result stored
    /// at once: fewer registers live, so no spills in per-element loops.
    pub(super) fn emit_vector_step(&mut self, sp: Value, dp: Value, s: Scales, z: [Value; 4]) {
        if self.spec.src.is_float_src() {
            return self.emit_float_step(sp, dp, s);
        }
        let ints: [Ints; 4] = if self.biased {
            let fq = self.load_biased_at(self.spec.src, sp);
            let k = Some(self.bias_splat(self.spec.src));
            std::array::from_fn(|i| Ints::Biased {
                fq: fq[i],
                fz: z[i],
                k,
            })
        } else {
            let q = self.load_int_vec_at(self.spec.src, sp);
            std::array::from_fn(|i| Ints::Plain { q: q[i], z: z[i] })
        };
        let mut ys = [sp; 4];
        for i in 0..4 {
            let si = self.step_scale(s, i);
            ys[i] = self.eval(ints[i], si, true);
            self.store_f32_group(dp, i, ys[i]);
        }
        self.store_step(dp, ys);
    }

    /// The stores of a step not made group by group: 16-bit results, or a
    /// streamed line ([`Spec::stream_lines`](crate::Spec::stream_lines)).
    fn store_step(&mut self, dp: Value, ys: [Value; 4]) {
        if self.spec.stream_lines {
            self.stream_step(dp, ys);
        } else if self.spec.out() != DType::F32 {
            self.store_vec_at(dp, ys);
        }
    }

    /// The 16 f32 results `ys` at `dp`: one non-temporal line where `dp` is
    /// 64-byte aligned (the line is then wholly this step's, inside dst), else
    /// plain stores.
    fn stream_step(&mut self, dp: Value, ys: [Value; 4]) {
        let xs = ys.map(|y| {
            let x = self.f32_bits(y);
            self.b.ins().bitcast(types::I8X16, lanes(), x)
        });
        let (line, plain, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let off = self.b.ins().band_imm_s(dp, 63);
        self.b.ins().brif(off, plain, &[], line, &[]);
        self.b.switch_to_block(line);
        crate::host_store::line(&mut self.b, dp, xs);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(plain);
        for (k, x) in xs.into_iter().enumerate() {
            self.b.ins().store(mem(), x, dp, 16 * k as i32);
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
    }

    /// [`emit_vector_step`](Self::emit_vector_step) for a float src: each lane
    /// group decoded just before its formula and store.
    fn emit_float_step(&mut self, sp: Value, dp: Value, s: Scales) {
        let codes = self.load_float_codes(sp);
        self.emit_float_codes(codes, dp, s);
    }

    /// The 16 float src `codes`' results with scales `s` to dst byte address `dp`.
    pub(super) fn emit_float_codes(&mut self, codes: Codes, dp: Value, s: Scales) {
        let mut ys = [dp; 4];
        for (i, y) in ys.iter_mut().enumerate() {
            *y = self.float_group(&codes, i, s);
            self.store_f32_group(dp, i, *y);
        }
        self.store_step(dp, ys);
    }

    /// The 16 float src `codes`' results with scales `s` as four F32X4.
    pub(super) fn float_codes_f32(&mut self, codes: Codes, s: Scales) -> [Value; 4] {
        let mut ys = [codes_any(&codes); 4];
        for (i, y) in ys.iter_mut().enumerate() {
            *y = self.float_group(&codes, i, s);
        }
        ys
    }

    /// Lane group `i` of the float src `codes`' results with scales `s` (F32X4).
    fn float_group(&mut self, codes: &Codes, i: usize, s: Scales) -> Value {
        let d = self.decode_group(codes, i);
        let si = self.step_scale(s, i);
        let y = self.eval(Ints::Float(d.x), si, true);
        self.float_src_nan(d.nan, y)
    }

    /// Lane group `i`'s scales: each loaded just before its use (the backend
    /// then folds the load into the multiply).
    fn step_scale(&mut self, s: Scales, i: usize) -> Value {
        match s {
            Scales::Splat(v) => v,
            Scales::At(addr) => self.load_scale_lanes(addr, i),
        }
    }

    /// Lane group `i`'s f32 results stored at once (f32 output not streamed by
    /// line): fewer registers live.
    fn store_f32_group(&mut self, dp: Value, i: usize, y: Value) {
        if self.spec.out() == DType::F32 && !self.spec.stream_lines {
            let x = self.f32_bits(y);
            self.b.ins().store(mem(), x, dp, 16 * i as i32);
        }
    }
}

/// Some value of `codes` (an array's filler).
fn codes_any(codes: &Codes) -> Value {
    match *codes {
        Codes::Bytes(v) => v,
        Codes::Tops(t) => t[0],
    }
}
