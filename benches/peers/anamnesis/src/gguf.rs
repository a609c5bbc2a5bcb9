//! Per GGUF block type both tools read: one tensor of the same random blocks,
//! anamnesis' streaming dequantization (`dequantize_gguf_blocks`, each block copied
//! into a reused buffer, as its own `dequantize_gguf` appends it to a Vec) against
//! dq's `Gguf::dequantize` into a reused buffer, per backend, with a memcpy of the
//! output's size in the same rounds.

use std::cell::RefCell;
use std::time::Duration;

use anamnesis::GgufType;
use dq::block::{ParamNode, gguf};
use dq::buffer::zeroed;
use dq::case::Rng;
use dq::formats::gguf::{GgmlType, Gguf, one_tensor_file};
use dq::{Backend, Options};
use half::bf16;

use crate::out::{Out, compare};
use crate::report::{Bits, Row};
use crate::timing::{Call, Memcpy, advise_huge, interleaved};

/// dq's backends in every row.
pub const BACKENDS: [Backend; 3] = [Backend::Generated, Backend::Jit, Backend::Auto];

/// anamnesis' block types (the ones `dequantize_gguf` has a kernel for).
const AMN_TYPES: [GgufType; 27] = {
    use GgufType::*;
    [
        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS, IQ2_XS,
        IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0,
        Q2_0,
    ]
};

/// What the GGUF rows run on.
pub struct Setup {
    /// Elements per tensor (a multiple of 256 and of the column count).
    pub n: usize,
    /// Minimum time per row.
    pub min_time: Duration,
    /// Output buffers on huge pages.
    pub huge: bool,
    /// dq's default threads (available cores).
    pub threads: usize,
    /// Only these types (GGUF names), if given.
    pub only: Option<Vec<String>>,
}

/// The block types both tools read, as (dq type, anamnesis type); and the names of
/// dq's types that anamnesis does not dequantize.
pub fn common_types() -> (Vec<(GgmlType, GgufType)>, Vec<&'static str>) {
    let (mut both, mut dq_only) = (Vec::new(), Vec::new());
    for ty in GgmlType::ALL.into_iter().filter(|t| t.is_supported()) {
        match AMN_TYPES.iter().find(|a| a.to_string() == ty.name()) {
            Some(&a) => both.push((ty, a)),
            None => dq_only.push(ty.name()),
        }
    }
    (both, dq_only)
}

/// Random blocks of `ty` for `n` elements whose f16 and e8m0 parameters are finite
/// normals (as `benches/gguf.rs` makes them).
pub fn blocks(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    let k = gguf::kernel(ty.name()).expect("a type dq decodes");
    let mut bytes = rng.bytes(n / k.block_elems * k.block_bytes);
    let params = k.decl.map_or(&[][..], |d| d.params);
    for block in bytes.chunks_exact_mut(k.block_bytes) {
        for p in params {
            match *p {
                ParamNode::F16(at) => {
                    let h = 0x2000u16 + rng.below(0x1000) as u16;
                    block[at..at + 2].copy_from_slice(&h.to_le_bytes());
                }
                ParamNode::E8m0Half(at) => block[at] = 120 + rng.below(16) as u8,
                _ => {}
            }
        }
    }
    bytes
}

/// The rows of every common type (or of `setup.only`): bf16 and f32, at 1 thread
/// and at each tool's default.
pub fn rows(setup: &Setup, memcpy: &mut Memcpy) -> Vec<Row> {
    let mut rng = Rng::new(39);
    let mut rows = Vec::new();
    let (types, _) = common_types();
    let wanted = |ty: GgmlType| {
        setup
            .only
            .as_ref()
            .is_none_or(|o| o.iter().any(|t| t.eq_ignore_ascii_case(ty.name())))
    };
    for (ty, amn) in types.into_iter().filter(|(t, _)| wanted(*t)) {
        let data = blocks(&mut rng, ty, setup.n);
        let cols = 4096.min(setup.n) as u64;
        let file = one_tensor_file("w", ty, &[cols, setup.n as u64 / cols], &data);
        let g = Gguf::from_bytes(&file).expect("the GGUF this program wrote");
        let case = Case {
            name: ty.name(),
            g: &g,
            amn,
        };
        let mut threads = vec![1];
        if setup.threads > 1 {
            threads.push(setup.threads);
        }
        for &t in &threads {
            rows.push(case.row::<bf16>(setup, t, memcpy));
            rows.push(case.row::<f32>(setup, t, memcpy));
        }
    }
    rows
}

/// One tensor, as both tools see it.
struct Case<'a> {
    name: &'static str,
    g: &'a Gguf<&'a [u8]>,
    amn: GgufType,
}

impl Case<'_> {
    /// anamnesis (its one thread: it threads a model by tensor, never one tensor)
    /// against dq at `threads`, output `T`.
    fn row<T: Out>(&self, setup: &Setup, threads: usize, memcpy: &mut Memcpy) -> Row {
        let (n, info) = (setup.n, &self.g.tensors()[0]);
        let data = self.g.tensor_data(info).expect("the tensor's bytes");
        let out_bytes = n * size_of::<T>();
        let mut theirs: Vec<u8> = zeroed(out_bytes);
        advise_huge(&mut theirs, setup.huge);
        let ours = RefCell::new(zeroed::<T>(n));
        advise_huge(&mut ours.borrow_mut(), setup.huge);
        let amn = self.amn;
        let mut calls: Vec<Call<'_>> = vec![Box::new(|| amn_into::<T>(data, amn, n, &mut theirs))];
        for b in BACKENDS {
            let opts = Options::new().with_backend(b).with_threads(threads);
            let (g, ours) = (self.g, &ours);
            calls.push(Box::new(move || {
                g.dequantize(info, &mut ours.borrow_mut(), &opts)
                    .map_err(|e| e.to_string())
            }));
        }
        calls.push(memcpy.call(out_bytes));
        let mut times = interleaved(setup.min_time, &mut calls);
        drop(calls);
        let memcpy_s = times.pop().expect("the memcpy call").ok();
        let amn_s = times.remove(0);
        let bits = self.check::<T>(amn_s.is_ok(), &theirs, &mut ours.borrow_mut(), threads);
        Row {
            kind: "gguf",
            case: self.name.to_owned(),
            dtype: T::NAME,
            amn_threads: 1,
            dq_threads: threads,
            bytes: (data.len() + out_bytes) as u64,
            amn: amn_s,
            dq: BACKENDS
                .iter()
                .map(|b| b.name().to_owned())
                .zip(times)
                .collect(),
            memcpy: memcpy_s.map(|s| 2.0 * out_bytes as f64 / s / 1e9),
            bits,
        }
    }

    /// Each dq backend's output against anamnesis' `theirs`.
    fn check<T: Out>(&self, amn_ran: bool, theirs: &[u8], ours: &mut [T], threads: usize) -> Bits {
        if !amn_ran {
            return Bits::Unchecked;
        }
        let info = &self.g.tensors()[0];
        let mut ran = false;
        for b in BACKENDS {
            let opts = Options::new().with_backend(b).with_threads(threads);
            ours.fill(T::default());
            if self.g.dequantize(info, ours, &opts).is_err() {
                continue;
            }
            ran = true;
            if let Some(m) = compare(ours, theirs, |i| i) {
                return Bits::Mismatch(format!("dq {b}: {m}"));
            }
        }
        if ran { Bits::Equal } else { Bits::Unchecked }
    }
}

/// anamnesis' streaming dequantization of `data` into `out`, block by block.
fn amn_into<T: Out>(data: &[u8], ty: GgufType, n: usize, out: &mut [u8]) -> Result<(), String> {
    let mut at = 0;
    anamnesis::dequantize_gguf_blocks::<T::Amn, _>(data, ty, n, |block| {
        let end = at + block.len();
        out.get_mut(at..end)
            .ok_or_else(|| anamnesis::AnamnesisError::Parse {
                reason: "more output than elements".into(),
            })?
            .copy_from_slice(block);
        at = end;
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if at != out.len() {
        return Err(format!("anamnesis wrote {at} of {} bytes", out.len()));
    }
    Ok(())
}
