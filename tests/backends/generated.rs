//! The `generated` backend against the reference, bit for bit: every dtype
//! combination of the standard kernel, every granularity, a table of shapes
//! (0-sized, scalar, 1, odd 4-bit counts, group remainders, 1..=130, large),
//! strided src and dst, extreme zero points, NaN/inf/subnormal scales, random
//! sub-ranges, misaligned dst buffers, and every ISA this machine has.

use std::ops::Range;

use crate::support;
use dq::arch::Isa;
use dq::case::OwnedTensor;
use dq::kernel::Entry;
use dq::kernel::{GeneratedKernel, Kernel, Reference};
use dq::policy::{self, StoreStrategy};
use dq::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Plan, Tensor, TensorDesc, TensorMut,
};
use support::paths::{cpu_has, ran, store_switch};
use support::{Rng, pinned};

/// The standard kernel pinned to every ISA the machine has (loud when one is not),
/// so the suite runs every ISA path in-process, whatever `DQ_ISA` says.
fn kernels() -> Vec<(Isa, GeneratedKernel)> {
    let ks = pinned(standard());
    for (isa, _) in &ks {
        ran(&format!("generated suite on generated/{}", isa.name()));
    }
    ks
}

#[derive(Clone, Debug)]
enum Gran {
    Tensor,
    Channel(i64),
    Group(Vec<i64>),
    Axes(Vec<i64>),
}

/// Which op a combination is tested through.
#[derive(Clone, Copy, Debug, PartialEq)]
enum OpForm {
    Static,
    Dynamic,
    Axes,
}

/// The ops that allow the entry's combination (the rule table).
fn forms(e: &Entry) -> Vec<OpForm> {
    use dq::rules::{AXES, DYNAMIC, STATIC};
    let (s, z, d) = e.key();
    [
        (OpForm::Dynamic, DYNAMIC),
        (OpForm::Static, STATIC),
        (OpForm::Axes, AXES),
    ]
    .into_iter()
    .filter(|(_, r)| r.allows(s, z, d))
    .map(|(f, _)| f)
    .collect()
}

fn norm(a: i64, r: usize) -> usize {
    if a < 0 {
        (a + r as i64) as usize
    } else {
        a as usize
    }
}

fn scale_shape(shape: &[usize], g: &Gran) -> Vec<usize> {
    match g {
        Gran::Tensor => vec![1],
        Gran::Channel(a) => vec![shape[norm(*a, shape.len())]],
        Gran::Group(gs) => shape
            .iter()
            .zip(gs)
            .map(|(&d, &g)| d.div_ceil(g as usize))
            .collect(),
        Gran::Axes(a) => {
            let mut a = a.clone();
            a.sort();
            a.iter().map(|&x| shape[x as usize]).collect()
        }
    }
}

/// Random scales of a float dtype, mixing ordinary values with NaN, inf,
/// subnormals, zeros and values that overflow or underflow 16-bit dsts.
fn scale_bytes(rng: &mut Rng, t: DType, n: usize) -> Vec<u8> {
    let special = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -3e-39,
        6e-8,
        1e-45,
        7e4,
        -1e30,
        3.4e38,
    ];
    let mut out = Vec::new();
    for _ in 0..n {
        let v = if rng.below(4) == 0 {
            rng.pick(&special)
        } else {
            let m = (rng.next_u64() % 2000) as f64 / 1000.0 - 1.0;
            m * 2f64.powi(rng.below(40) as i32 - 30)
        };
        match t {
            DType::F32 => {
                let mut b = (v as f32).to_bits();
                if rng.below(16) == 0 {
                    b = rng.next_u64() as u32; // any pattern, signalling NaNs included
                }
                out.extend(b.to_le_bytes());
            }
            DType::F16 => {
                let mut b = half::f16::from_f64(v).to_bits();
                if rng.below(8) == 0 {
                    b = rng.next_u64() as u16;
                }
                out.extend(b.to_le_bytes());
            }
            DType::BF16 => {
                let mut b = half::bf16::from_f64(v).to_bits();
                if rng.below(8) == 0 {
                    b = rng.next_u64() as u16;
                }
                out.extend(b.to_le_bytes());
            }
            DType::F64 => {
                let mut b = v.to_bits();
                if rng.below(16) == 0 {
                    b = rng.next_u64();
                }
                out.extend(b.to_le_bytes());
            }
            _ => unreachable!(),
        }
    }
    out
}

/// Random integers of `t`: full range, extremes forced in; `extreme` adds s32
/// values whose difference with any q leaves i32.
fn int_bytes(rng: &mut Rng, t: DType, n: usize, extreme: bool) -> Vec<u8> {
    match t {
        DType::S32 => {
            let ext = [
                i32::MIN,
                i32::MAX,
                i32::MIN + 255,
                i32::MAX - 127,
                -(1 << 24) - 1,
            ];
            (0..n)
                .flat_map(|i| {
                    let v = if extreme && (i == 0 || rng.below(3) == 0) {
                        rng.pick(&ext)
                    } else if rng.below(2) == 0 {
                        rng.below(2001) as i32 - 1000
                    } else {
                        (rng.next_u64() as i32) >> rng.below(12)
                    };
                    let v = if extreme {
                        v
                    } else {
                        v.clamp(-(1 << 30), 1 << 30)
                    };
                    v.to_le_bytes()
                })
                .collect()
        }
        _ => {
            let mut b = rng.bytes(t.bytes_for(n).unwrap());
            if let Some(x) = b.first_mut() {
                *x = if rng.below(2) == 0 { 0x80 } else { 0x7f };
            }
            b
        }
    }
}

fn transposed(shape: &[usize]) -> Vec<usize> {
    let r = shape.len();
    let mut st = TensorDesc::dense_strides(shape);
    st[r - 1] = shape[r - 2];
    st[r - 2] = 1;
    st
}

/// One randomized case, checked against the reference on every kernel.
struct Case {
    form: OpForm,
    key: (DType, Option<DType>, DType),
    shape: Vec<usize>,
    gran: Gran,
    src_t: bool,
    dst_t: bool,
    broadcast_zp: bool,
    extreme: bool,
}

impl Case {
    fn op(&self, rng: &mut Rng, scale_n: usize) -> Op {
        match (self.form, &self.gran) {
            (OpForm::Static, g) => {
                let scales: Vec<f32> = scale_bytes(rng, DType::F32, scale_n)
                    .chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                let mut op = Dequantize::new(scales);
                if let Gran::Channel(a) = g {
                    op = op.per_channel(*a);
                }
                if let Some(z) = self.key.1 {
                    let zs = (0..scale_n)
                        .map(|i| match z {
                            DType::S64 if i == 0 || rng.below(2) == 0 => {
                                rng.pick(&[i64::MIN, i64::MAX, 1 << 40, -(1 << 33), i64::MIN + 1])
                            }
                            DType::S64 => rng.next_u64() as i64,
                            _ => (rng.next_u64() as i32 >> rng.below(24)) as i64,
                        })
                        .collect();
                    op = op.zps(zs);
                }
                op.into()
            }
            (OpForm::Dynamic, Gran::Tensor) => DynamicDequantize::per_tensor().into(),
            (OpForm::Dynamic, Gran::Channel(a)) => DynamicDequantize::per_channel(*a).into(),
            (OpForm::Dynamic, Gran::Group(g)) => DynamicDequantize::per_group(g.clone()).into(),
            (OpForm::Axes, Gran::Axes(a)) => AxesDequantize::new(a.clone()).into(),
            _ => unreachable!("granularity filtered by applies()"),
        }
    }

    fn applies(&self) -> bool {
        let no_zps = scale_shape(&self.shape, &self.gran).contains(&0);
        if self.key.1 == Some(DType::S64) && no_zps {
            return false; // no zero points at all: the plan holds them as s32
        }
        match (self.form, &self.gran) {
            (OpForm::Static, Gran::Tensor | Gran::Channel(_)) => true,
            (OpForm::Dynamic, Gran::Axes(_)) | (OpForm::Static, _) => false,
            (OpForm::Axes, g) => matches!(g, Gran::Axes(_)),
            (OpForm::Dynamic, _) => true,
        }
    }

    fn run(&self, rng: &mut Rng, kernels: &[(Isa, GeneratedKernel)]) {
        self.run_at(rng, kernels, None)
    }

    /// As [`run`](Self::run), dst starting `line_at` bytes into a 64-byte line
    /// when given (else anywhere).
    fn run_at(&self, rng: &mut Rng, kernels: &[(Isa, GeneratedKernel)], line_at: Option<usize>) {
        if !self.applies() {
            return;
        }
        let (s_t, z_t, d_t) = self.key;
        let shape = &self.shape;
        let numel: usize = shape.iter().product();
        let sshape = scale_shape(shape, &self.gran);
        let scale_n: usize = sshape.iter().product();
        let op = self.op(rng, scale_n);
        let mut src_desc = TensorDesc::new(s_t, shape);
        if self.src_t {
            src_desc = src_desc.with_strides(&transposed(shape));
        }
        let mut dst_desc = TensorDesc::new(d_t, shape);
        if self.dst_t {
            dst_desc = dst_desc.with_strides(&transposed(shape));
        }
        let src_bytes = int_bytes(rng, s_t, numel, self.extreme);
        let dynamic = self.form != OpForm::Static;
        let scales_desc = TensorDesc::new(d_t, &sshape);
        let scales = scale_bytes(rng, d_t, scale_n);
        let zshape = if self.broadcast_zp && self.form == OpForm::Dynamic {
            vec![1]
        } else {
            sshape.clone()
        };
        let zps_desc = z_t.filter(|_| dynamic).map(|z| TensorDesc::new(z, &zshape));
        let zps = zps_desc
            .as_ref()
            .map(|d| int_bytes(rng, d.dtype, d.numel().unwrap(), self.extreme));
        let case = dq::case::Case {
            op,
            src: OwnedTensor::new(src_desc, src_bytes),
            scales: dynamic.then(|| OwnedTensor::new(scales_desc, scales)),
            zps: zps_desc.zip(zps).map(|(d, b)| OwnedTensor::new(d, b)),
            // Runs write into a misaligned buffer of their own.
            dst: OwnedTensor::new(dst_desc, Vec::new()),
        };
        let plan = case
            .plan()
            .unwrap_or_else(|e| panic!("{}: {e}", self.describe()));
        assert_eq!(plan.kernel_key(), self.key, "{}", self.describe());
        let off = rng.below(5) as usize * d_t.bits() / 8 + rng.below(2) as usize;
        let len = off + d_t.bytes_for(numel).unwrap() + 8;
        let run = |k: &dyn Kernel, ranges: &[std::ops::Range<usize>]| {
            // The window of `len` bytes whose dst (at `off`) is `line_at` into a line.
            let mut buf = vec![0xa5u8; len + 64];
            let w = line_at.map_or(0, |a| support::to_line_at(buf.as_ptr() as usize + off, a));
            case.with_job(&plan, &mut buf[w + off..w + len], |job| {
                for r in ranges {
                    job.run_range(k, r.clone()).unwrap();
                }
            })
            .unwrap();
            buf[w..w + len].to_vec()
        };
        let whole = [Range {
            start: 0,
            end: numel,
        }];
        let want = run(&Reference::default(), &whole);
        for (isa, k) in kernels {
            let got = run(k, &whole);
            self.compare(&want, &got, *isa, "whole");
            let ranges = random_split(rng, numel);
            let got = run(k, &ranges);
            self.compare(&want, &got, *isa, "random ranges");
        }
    }

    fn compare(&self, want: &[u8], got: &[u8], isa: Isa, how: &str) {
        if want != got {
            let i = want.iter().zip(got).position(|(a, b)| a != b).unwrap();
            panic!(
                "{} on {} ({how}): first differing byte {i}: want {:#04x}, got {:#04x}",
                self.describe(),
                isa.name(),
                want[i],
                got[i]
            );
        }
    }

    fn describe(&self) -> String {
        format!(
            "{:?} {:?} shape {:?} {:?} src_t {} dst_t {} bzp {} extreme {}",
            self.form,
            self.key,
            self.shape,
            self.gran,
            self.src_t,
            self.dst_t,
            self.broadcast_zp,
            self.extreme
        )
    }
}

/// `0..n` cut at random points (ranges may be empty or one element).
fn random_split(rng: &mut Rng, n: usize) -> Vec<std::ops::Range<usize>> {
    let mut cuts: Vec<usize> = (0..rng.below(6))
        .map(|_| rng.below(n as u64 + 1) as usize)
        .collect();
    cuts.extend([0, n]);
    cuts.sort();
    cuts.windows(2).map(|w| w[0]..w[1]).collect()
}

/// Granularities to try on `shape` (every axis, negative ones, group remainders on each dim).
fn grans(shape: &[usize]) -> Vec<Gran> {
    let r = shape.len() as i64;
    let mut v = vec![Gran::Tensor];
    for a in -r..r {
        v.push(Gran::Channel(a));
    }
    v.push(Gran::Group(vec![1; shape.len()]));
    for d in 0..shape.len() {
        for g in [2, 3, 4] {
            let mut gs = vec![1; shape.len()];
            gs[d] = g;
            v.push(Gran::Group(gs));
        }
        let mut gs: Vec<i64> = shape.iter().map(|&x| x.max(1) as i64).collect();
        gs[d] = 3;
        v.push(Gran::Group(gs));
    }
    let mut axes = vec![];
    for m in 0u32..(1 << shape.len()) {
        axes.push(Gran::Axes(
            (0..r).filter(|&d| m & (1 << d) != 0).collect::<Vec<_>>(),
        ));
    }
    v.extend(axes);
    v
}

const SHAPES: &[&[usize]] = &[
    &[],
    &[0],
    &[1],
    &[5],
    &[3, 0, 2],
    &[2, 3, 5],
    &[3, 7, 9],
    &[4, 33],
    &[1, 3, 1, 17],
];

fn standard() -> &'static GeneratedKernel {
    &dq::generated::standard
}

#[test]
fn ir_is_the_spec_formula_node_for_node() {
    assert_eq!(standard().ir().nodes, dq::kernel::STANDARD.nodes);
    assert_eq!(standard().ir().name, "standard");
    assert_eq!(standard().name(), "generated");
}

#[test]
fn table_has_every_combination_the_ops_allow() {
    use DType::*;
    let mut want = Vec::new();
    // DynamicDequantize: scales of the dst dtype or e8m0 (SPEC §10).
    for s in [S8, U8, S4, U4] {
        for z in [None, Some(S4), Some(U4), Some(S8), Some(U8), Some(S32)] {
            for d in [F32, F16, BF16] {
                want.push(((s, z, d), d));
                want.push(((s, z, d), E8M0));
            }
        }
    }
    for s in [F8E4M3, F8E5M2, F4E2M1] {
        for d in [F32, F16, BF16] {
            want.push(((s, None, d), d));
            want.push(((s, None, d), E8M0));
        }
    }
    for s in [S8, U8] {
        want.push(((s, Some(S64), F32), F32));
        want.push(((s, Some(s), F64), F64));
    }
    for d in [F16, BF16, F32, F64] {
        want.push(((S32, Some(S32), d), d));
    }
    let mut got: Vec<_> = standard()
        .table()
        .iter()
        .map(|e| (e.key(), e.scales()))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(dq::backends().get(dq::Backend::Generated).is_some());
}

#[test]
fn every_combination_granularity_and_shape() {
    let ks = kernels();
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let mut cases = 0;
    // Entries with e8m0 scales share their key with a dst-scaled one and this
    // harness makes dst-typed scales: tests/ops/float_sources.rs and float_props.rs
    // cover them.
    for e in standard().table().iter().filter(|e| e.scales() == e.dst()) {
        for form in forms(e) {
            for shape in SHAPES {
                for gran in grans(shape) {
                    let layouts: &[(bool, bool)] = if shape.len() >= 2 {
                        &[(false, false), (true, false), (false, true), (true, true)]
                    } else {
                        &[(false, false)]
                    };
                    for &(src_t, dst_t) in layouts {
                        if (src_t || dst_t) && rng.below(3) != 0 {
                            continue; // a third of the strided layouts per case
                        }
                        let c = Case {
                            form,
                            key: e.key(),
                            shape: shape.to_vec(),
                            gran: gran.clone(),
                            src_t,
                            dst_t,
                            broadcast_zp: rng.below(4) == 0,
                            extreme: rng.below(2) == 0,
                        };
                        if c.applies() {
                            c.run(&mut rng, &ks);
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 5000, "only {cases} cases ran");
}

#[test]
fn lengths_1_to_130_on_every_combination() {
    let ks = kernels();
    let mut rng = Rng::new(42);
    // Entries with e8m0 scales share their key with a dst-scaled one and this
    // harness makes dst-typed scales: tests/ops/float_sources.rs and float_props.rs
    // cover them.
    for e in standard().table().iter().filter(|e| e.scales() == e.dst()) {
        for form in forms(e) {
            for n in 1..=130 {
                let grans = match form {
                    OpForm::Axes => vec![Gran::Axes(vec![]), Gran::Axes(vec![1])],
                    OpForm::Static => vec![Gran::Tensor, Gran::Channel(-1)],
                    OpForm::Dynamic => vec![
                        Gran::Tensor,
                        Gran::Channel(-1),
                        Gran::Group(vec![1, 16]),
                        Gran::Group(vec![1, 5]),
                    ],
                };
                for gran in grans {
                    Case {
                        form,
                        key: e.key(),
                        shape: vec![2, n],
                        gran,
                        src_t: false,
                        dst_t: false,
                        broadcast_zp: rng.below(4) == 0,
                        extreme: rng.below(4) == 0,
                    }
                    .run(&mut rng, &ks);
                }
            }
        }
    }
}

/// 4-bit src with one zero point and scale over runs of 32 and more elements goes
/// through a 16-entry table: every 4-bit combination, groups of 32..129 along the
/// innermost dim with remainders, odd row lengths (odd nibble starts), transposed
/// dst (no table), random ranges.
#[test]
fn four_bit_constant_runs_by_table() {
    let ks = kernels();
    let mut rng = Rng::new(99);
    let four_bit = |d: DType| matches!(d, DType::S4 | DType::U4);
    for e in standard().table().iter().filter(|e| four_bit(e.src())) {
        for cols in [31, 32, 33, 63, 64, 65, 97, 128, 129, 257] {
            let mut grans = vec![Gran::Tensor, Gran::Channel(0)];
            for g in [32, 33, 64, 128] {
                grans.push(Gran::Group(vec![1, g]));
            }
            for gran in grans {
                Case {
                    form: OpForm::Dynamic,
                    key: e.key(),
                    shape: vec![3, cols],
                    gran,
                    src_t: false,
                    dst_t: rng.below(6) == 0,
                    broadcast_zp: rng.below(4) == 0,
                    extreme: rng.below(4) == 0,
                }
                .run(&mut rng, &ks);
            }
        }
    }
}

/// Streamed 4-bit runs by whole lines (AVX-512: each lookup one 64-byte line of
/// dst, spliced across lines where rows start mid-line): every 4-bit combination,
/// dst at every even byte of a line (4-byte skews splice, the others take the
/// tile), one scale per row, groups of whole lookups and not, odd row lengths,
/// random ranges.
#[test]
fn four_bit_streamed_lines_at_every_skew() {
    let ks = kernels();
    let _switch = store_switch(StoreStrategy::NonTemporal, Some(4096));
    let mut rng = Rng::new(0x5be0_cd19);
    let four_bit = |d: DType| matches!(d, DType::S4 | DType::U4 | DType::F4E2M1);
    let cases = [
        (vec![5, 512], Gran::Tensor),
        (vec![5, 512], Gran::Channel(0)),
        (vec![5, 512], Gran::Group(vec![1, 32])),
        (vec![3, 1024], Gran::Group(vec![1, 128])),
        (vec![4, 768], Gran::Group(vec![1, 96])),
        (vec![7, 333], Gran::Group(vec![1, 64])),
        (vec![6, 520], Gran::Group(vec![1, 40])),
    ];
    for e in standard().table().iter().filter(|e| four_bit(e.src())) {
        for (shape, gran) in &cases {
            for at in (0..64).step_by(2) {
                let case = Case {
                    form: OpForm::Dynamic,
                    key: e.key(),
                    shape: shape.clone(),
                    gran: gran.clone(),
                    src_t: false,
                    dst_t: false,
                    broadcast_zp: rng.below(4) == 0,
                    extreme: rng.below(4) == 0,
                };
                case.run_at(&mut rng, &ks, Some(at));
            }
        }
    }
}

/// Large outputs: bigger than the per-core L2 cache, under every store
/// strategy: non-temporal (the tile-and-stream path: tiles ending mid-run,
/// unaligned row starts, random ranges starting anywhere), prefetching and plain.
#[test]
fn large_outputs_take_the_streaming_path() {
    let ks = kernels();
    let mut rng = Rng::new(7);
    let l2 = dq::arch::l2_bytes();
    let big = [
        (DType::S8, None, DType::F32, Gran::Channel(1)),
        (
            DType::U4,
            Some(DType::U4),
            DType::BF16,
            Gran::Group(vec![1, 128]),
        ),
        (DType::S4, None, DType::F16, Gran::Tensor),
        (DType::U8, Some(DType::S8), DType::F32, Gran::Channel(1)),
        (
            DType::S8,
            Some(DType::U4),
            DType::BF16,
            Gran::Group(vec![1, 33]),
        ),
    ];
    for store in StoreStrategy::ALL {
        let _switch = store_switch(store, None);
        for (s, z, d, gran) in big.clone() {
            let cols = 4099;
            let rows = (l2 / (d.bits() / 8)) / cols + 3;
            // The case is large enough for the kernels to take `store` (they ask
            // `store_for` of the whole output): fails if the sizes above shrink
            // below the threshold, or the threshold stops following the switch.
            let bytes = d.bytes_for(rows * cols).unwrap();
            assert!(
                policy::is_large_output(bytes),
                "{bytes} bytes is not a large output"
            );
            assert_eq!(policy::store_for(bytes), store, "{bytes} bytes");
            Case {
                form: OpForm::Dynamic,
                key: (s, z, d),
                shape: vec![rows, cols],
                gran,
                src_t: false,
                dst_t: false,
                broadcast_zp: false,
                extreme: false,
            }
            .run(&mut rng, &ks);
        }
        for (isa, _) in &ks {
            ran(&format!("generated/{} store={}", isa.name(), store.name()));
        }
    }
}

#[test]
fn s32_zero_points_near_the_limits_take_the_exact_path() {
    let ks = kernels();
    for (zp, q) in [(i32::MIN, 127i8), (i32::MAX, -128), (i32::MIN + 255, 0)] {
        let qs = [q; 40];
        let zv = [zp];
        let src = Tensor::from_slice(&qs, &[40]);
        let scales = Tensor::from_slice(&[1.0f32], &[1]);
        let zps = Tensor::from_slice(&zv, &[1]);
        let op: Op = DynamicDequantize::per_tensor().into();
        let plan = Plan::new(
            &op,
            &src.desc,
            Some(&scales.desc),
            Some(&zps.desc),
            &TensorDesc::new(DType::F32, &[40]),
        )
        .unwrap();
        let want = (q as i64 - zp as i64) as f32;
        for (isa, k) in &ks {
            let mut out = [0f32; 40];
            let mut dst = TensorMut::from_slice(&mut out, &[40]);
            plan.bind(&src, Some(&scales), Some(&zps), &mut dst)
                .unwrap()
                .run(k)
                .unwrap();
            assert!(
                out.iter().all(|&y| y == want),
                "{}: {out:?} != {want}",
                isa.name()
            );
        }
    }
}

/// The ISA `DQ_ISA=<value>` should select (`None`: unset), from this test's own
/// table of spellings and the CPU's flags (`cpu_has`), not the library's parser.
fn expected_selection(value: Option<&str>) -> Isa {
    let best = *Isa::ALL.iter().rfind(|&&i| cpu_has(i)).unwrap();
    let asked = match value {
        Some("portable") => Isa::Portable,
        Some("avx2") => Isa::Avx2,
        Some("avx512") => Isa::Avx512,
        _ => return best, // unset or not a spelling: ignored
    };
    asked.min(best)
}

/// `hardware()` and pinning agree with the CPU's flags, and `DQ_ISA` (read once per
/// process, so each value in a child process) selects the ISA it names, clamped to
/// what the CPU has; the unpinned generated kernel then runs on it.
#[test]
fn dq_isa_env_is_clamped_to_the_hardware() {
    let best = expected_selection(None);
    assert_eq!(dq::arch::hardware(), best);
    for isa in Isa::ALL {
        assert_eq!(standard().with_isa(isa).is_some(), cpu_has(isa), "{isa:?}");
        assert_eq!(isa.available(), cpu_has(isa), "{isa:?}");
    }
    let own = std::env::var("DQ_ISA").ok();
    assert_eq!(dq::arch::selected(), expected_selection(own.as_deref()));
    for value in [
        None,
        Some("portable"),
        Some("avx2"),
        Some("avx512"),
        Some("sse9"),
    ] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        let name = support::test_name(module_path!(), "print_selected_isa");
        child.args(["--exact", &name, "--ignored", "--nocapture"]);
        child.env_remove("DQ_ISA");
        if let Some(v) = value {
            child.env("DQ_ISA", v);
        }
        let out = child.output().unwrap();
        assert!(out.status.success(), "{value:?}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let want = expected_selection(value).name();
        assert!(
            stdout.contains(&format!("SELECTED ISA {want} {want}\n")),
            "DQ_ISA={value:?}: want {want}, child said: {stdout}"
        );
    }
}

/// Child half of `dq_isa_env_is_clamped_to_the_hardware`: prints the ISA this
/// process selected and the one the unpinned generated kernel runs on.
#[test]
#[ignore = "run by dq_isa_env_is_clamped_to_the_hardware in a child process"]
fn print_selected_isa() {
    println!(
        "SELECTED ISA {} {}",
        dq::arch::selected().name(),
        standard().isa().name()
    );
}
