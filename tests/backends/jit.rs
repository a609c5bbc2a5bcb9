//! The JIT against the reference, bit for bit: a shape/dtype/granularity table,
//! strided views, extreme zero points, special scales, sub-ranges, custom formulas,
//! randomized shapes (proptest), and the kernel cache.

use std::sync::{Arc, Barrier};

use crate::support;
use dq::arch::Isa;
use dq::jit::{self, HostLookups, Jit};
use dq::kernel::{FormulaIr, Kernel, Node, Reference, STANDARD};
use dq::policy::StoreStrategy;
use dq::rules::{AXES, DYNAMIC, STATIC};
use dq::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Plan, Tensor, TensorDesc, TensorMut,
};
use proptest::prelude::*;
use support::Rng;

/// Scale values worth hitting: specials plus ordinary values.
fn scale_value(r: &mut Rng) -> f64 {
    match r.below(16) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => -0.0,
        4 => 1e-40, // f32 subnormal
        5 => 3e-8,  // f16 subnormal range
        6 => 65504.0 * 1.5,
        7 => f64::from_bits(r.next_u64()), // any f64 (rounded into the dtype)
        _ => (r.below(2001) as f64 - 1000.0) / 97.0,
    }
}

fn encode_float(t: DType, v: f64, out: &mut Vec<u8>) {
    match t {
        DType::F32 => out.extend((v as f32).to_le_bytes()),
        DType::F64 => out.extend(v.to_le_bytes()),
        DType::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
        _ => out.extend(half::bf16::from_f64(v).to_le_bytes()),
    }
}

/// Random bytes for an integer tensor, with the dtype's extremes planted.
fn int_bytes(t: DType, n: usize, r: &mut Rng) -> Vec<u8> {
    let len = t.bytes_for(n).unwrap();
    let mut b: Vec<u8> = (0..len).map(|_| r.next_u64() as u8).collect();
    if t == DType::S32 && n > 0 {
        for (k, v) in [i32::MIN, i32::MAX, i32::MIN + 1, 0]
            .into_iter()
            .enumerate()
        {
            let i = r.below(n as u64) as usize;
            if k == 0 || r.below(2) == 0 {
                b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    b
}

fn float_bytes(t: DType, n: usize, r: &mut Rng) -> Vec<u8> {
    let mut b = Vec::new();
    for _ in 0..n {
        encode_float(t, scale_value(r), &mut b);
    }
    b
}

/// A case: an op with its tensor descriptors (data is generated per seed).
#[derive(Debug)]
struct Case {
    op: Op,
    src: TensorDesc,
    scales: Option<TensorDesc>,
    zps: Option<TensorDesc>,
    dst: TensorDesc,
}

impl Case {
    fn plan(&self) -> dq::Result<Plan> {
        Plan::new(
            &self.op,
            &self.src,
            self.scales.as_ref(),
            self.zps.as_ref(),
            &self.dst,
        )
    }

    /// Runs reference and `jit` on the same data over the full range and a few
    /// sub-ranges, comparing the whole dst buffer (untouched bytes included).
    fn check(&self, jit: &Jit, reference: &Reference, seed: u64) {
        let mut r = Rng::new(seed | 1);
        let src = int_bytes(self.src.dtype, span(&self.src), &mut r);
        let scales = self
            .scales
            .as_ref()
            .map(|d| float_bytes(d.dtype, d.numel().unwrap(), &mut r));
        let zps = self
            .zps
            .as_ref()
            .map(|d| int_bytes(d.dtype, d.numel().unwrap(), &mut r));
        self.check_data(jit, reference, &mut r, (&src, scales, zps));
    }

    /// As [`check`](Self::check) on the given src, scales and zero-point bytes.
    fn check_data(
        &self,
        jit: &Jit,
        reference: &Reference,
        r: &mut Rng,
        (src, scales, zps): (&[u8], Option<Vec<u8>>, Option<Vec<u8>>),
    ) {
        let plan = self.plan().expect("valid case");
        let dst_len = self.dst.dtype.bytes_for(span(&self.dst)).unwrap();
        let n = plan.numel();
        let mut ranges = Vec::with_capacity(4);
        ranges.push(0..n);
        for _ in 0..3 {
            let a = r.below(n as u64 + 1) as usize;
            let b = r.below(n as u64 + 1) as usize;
            ranges.push(a.min(b)..a.max(b));
        }
        for range in ranges {
            let run = |k: &dyn Kernel| {
                let mut out = vec![0xa5u8; dst_len];
                let s = Tensor::from_bytes(self.src.dtype, &self.src.shape, src)
                    .with_strides(&self.src.strides_or_dense());
                let sc = self
                    .scales
                    .as_ref()
                    .map(|d| Tensor::from_bytes(d.dtype, &d.shape, scales.as_ref().unwrap()));
                let z = self
                    .zps
                    .as_ref()
                    .map(|d| Tensor::from_bytes(d.dtype, &d.shape, zps.as_ref().unwrap()));
                let mut d = TensorMut::from_bytes(self.dst.dtype, &self.dst.shape, &mut out)
                    .with_strides(&self.dst.strides_or_dense());
                plan.bind(&s, sc.as_ref(), z.as_ref(), &mut d)
                    .unwrap()
                    .run_range(k, range.clone())
                    .unwrap();
                out
            };
            let want = run(reference);
            let got = run(jit);
            if got != want {
                let w = self.dst.dtype.bits() / 8;
                let i = (0..dst_len).find(|&i| got[i] != want[i]).unwrap() / w;
                panic!(
                    "{:?} {:?} -> {:?} zps {:?} strides {:?}/{:?} range {range:?}: dst element \
                     {i}: got {:02x?} want {:02x?}\nloops {:?}",
                    self.op,
                    self.src.shape,
                    self.dst.dtype,
                    self.zps.as_ref().map(|z| z.dtype),
                    self.src.strides,
                    self.dst.strides,
                    &got[i * w..i * w + w],
                    &want[i * w..i * w + w],
                    plan.loops()
                );
            }
        }
    }
}

/// Elements a (possibly strided) view spans in its buffer.
fn span(d: &TensorDesc) -> usize {
    let n = d.numel().unwrap();
    if n == 0 {
        return 0;
    }
    let s = d.strides_or_dense();
    1 + d
        .shape
        .iter()
        .zip(&s)
        .map(|(&x, &st)| (x - 1) * st)
        .sum::<usize>()
}

/// Strides of a view whose last two dims are stored transposed.
fn transposed(shape: &[usize]) -> Vec<usize> {
    let r = shape.len();
    let mut phys = shape.to_vec();
    if r >= 2 {
        phys.swap(r - 1, r - 2);
    }
    let dense = TensorDesc::dense_strides(&phys);
    let mut s = dense.clone();
    if r >= 2 {
        s.swap(r - 1, r - 2);
    }
    s
}

fn dynamic(
    op: DynamicDequantize,
    src: DType,
    zps: Option<DType>,
    dst: DType,
    shape: &[usize],
    scale_shape: &[usize],
    zp_broadcast: bool,
) -> Case {
    let zshape: &[usize] = if zp_broadcast { &[1] } else { scale_shape };
    Case {
        op: op.into(),
        src: TensorDesc::new(src, shape),
        scales: Some(TensorDesc::new(dst, scale_shape)),
        zps: zps.map(|t| TensorDesc::new(t, zshape)),
        dst: TensorDesc::new(dst, shape),
    }
}

/// The per-tensor case of `shape` (one scale, one zero point when `zps`).
fn per_tensor_case(src: DType, zps: Option<DType>, dst: DType, shape: &[usize]) -> Case {
    dynamic(
        DynamicDequantize::per_tensor(),
        src,
        zps,
        dst,
        shape,
        &[1],
        false,
    )
}

/// Per-tensor, per-channel (first and last axis) and per-group cases of `shape`.
fn granularities(src: DType, zps: Option<DType>, dst: DType, shape: &[usize]) -> Vec<Case> {
    let mut v = vec![per_tensor_case(src, zps, dst, shape)];
    if !shape.is_empty() {
        let last = shape.len() - 1;
        for axis in [0, last] {
            v.push(dynamic(
                DynamicDequantize::per_channel(axis as i64),
                src,
                zps,
                dst,
                shape,
                &[shape[axis]],
                false,
            ));
        }
        v.push(dynamic(
            DynamicDequantize::per_channel(last as i64),
            src,
            zps,
            dst,
            shape,
            &[shape[last]],
            true,
        ));
        for g in [[1usize, 32], [2, 3], [1, 1]] {
            let gs: Vec<i64> = (0..shape.len())
                .map(|d| {
                    if d + 2 >= shape.len() {
                        g[d + 2 - shape.len()] as i64
                    } else {
                        1
                    }
                })
                .map(|x| if shape.len() == 1 { g[1] as i64 } else { x })
                .collect();
            let ss: Vec<usize> = shape
                .iter()
                .zip(&gs)
                .map(|(&d, &g)| d.div_ceil(g as usize))
                .collect();
            v.push(dynamic(
                DynamicDequantize::per_group(gs),
                src,
                zps,
                dst,
                shape,
                &ss,
                false,
            ));
        }
    }
    v
}

fn with_transposed(mut c: Case) -> Case {
    if c.src.shape.len() >= 2 {
        let s = transposed(&c.src.shape);
        c.src = c.src.clone().with_strides(&s);
        c.dst = c.dst.clone().with_strides(&s);
    }
    c
}

/// The dynamic op's integer src dtypes (the rule table's; the float src of SPEC §10
/// take no zero points and run through tests/ops/float_sources.rs and float_props.rs).
const DYN_SRC: &[DType] = &[DType::S8, DType::U8, DType::S4, DType::U4];
const DYN_DST: &[DType] = DYNAMIC.dst.list();

/// `None`, then the dynamic op's zero-point dtypes (the rule table).
fn dyn_zps() -> Vec<Option<DType>> {
    DYNAMIC.zps_choices(DType::S8)
}

#[test]
fn dynamic_table_matches_reference() {
    let jit = jit::standard();
    let reference = Reference::default();
    let shapes: &[&[usize]] = &[
        &[],
        &[1],
        &[0, 3],
        &[7],
        &[33],
        &[3, 5],
        &[2, 3, 37],
        &[4, 130],
    ];
    let mut n = 0;
    for &src in DYN_SRC {
        for &dst in DYN_DST {
            for zps in dyn_zps() {
                for (k, shape) in shapes.iter().enumerate() {
                    for c in granularities(src, zps, dst, shape) {
                        c.check(jit, &reference, 7 + k as u64);
                        with_transposed(c).check(jit, &reference, 11 + k as u64);
                        n += 2;
                    }
                }
            }
        }
    }
    assert!(n > 1000, "{n} cases");
}

#[test]
fn every_length_up_to_130_and_group_remainders() {
    let jit = jit::standard();
    let reference = Reference::default();
    for len in 1..=130usize {
        for (src, zps, dst) in [
            (DType::S8, Some(DType::U8), DType::F32),
            (DType::U4, None, DType::BF16),
            (DType::S4, Some(DType::S4), DType::F16),
            (DType::U8, Some(DType::S32), DType::BF16),
        ] {
            for c in [
                per_tensor_case(src, zps, dst, &[len]),
                dynamic(
                    DynamicDequantize::per_channel(0),
                    src,
                    zps,
                    dst,
                    &[len],
                    &[len],
                    false,
                ),
                dynamic(
                    DynamicDequantize::per_group(vec![1, 19]),
                    src,
                    zps,
                    dst,
                    &[3, len],
                    &[3, len.div_ceil(19)],
                    false,
                ),
            ] {
                c.check(jit, &reference, len as u64);
            }
        }
    }
}

/// Zero points of dtype `t` for `n` groups, extremes planted (s32: both ends of
/// i32, both sides of the vector path's limit 2^22 and of 2^24).
fn extreme_zps(t: DType, n: usize, r: &mut Rng) -> Vec<u8> {
    match t {
        DType::S32 => (0..n)
            .flat_map(|_| {
                let z = match r.below(14) {
                    0 => i32::MIN,
                    1 => i32::MAX,
                    2 => 1 << 24,
                    3 => -(1 << 24),
                    4 => (1 << 22) + 1,
                    5 => -(1 << 22) - 1,
                    6 => 15,
                    7 => -8,
                    8 => 1 << 22,
                    9 => -(1 << 22),
                    10 => (1 << 22) - 1,
                    11 => -(1 << 22) + 1,
                    12 => (1 << 24) - 1,
                    _ => r.next_u64() as i32 >> r.below(32),
                };
                z.to_le_bytes()
            })
            .collect(),
        _ => {
            let mut b = int_bytes(t, n, r);
            // Plant the dtype's extremes (as raw bytes or nibbles) on a few groups.
            let ends: [u8; 4] = [0x00, 0xff, 0x77, 0x88];
            for _ in 0..n.div_ceil(4) {
                let i = r.below(b.len() as u64) as usize;
                b[i] = ends[r.below(4) as usize];
            }
            b
        }
    }
}

/// The 4-bit table-lookup path (constant-parameter segments of at least 32
/// elements; both the host's lookups, where AVX-512 is selected,
/// and Cranelift's) against the reference: every 4-bit src x zps x dst the dynamic op
/// allows, run lengths 31..=300, groups 32/33/64/128 with remainders, odd nibble
/// starts (odd row lengths, sub-ranges), special scales, extreme zero points.
#[test]
fn four_bit_table_lookup_matches_reference() {
    let jit = jit::standard();
    // Cranelift's own lookups, where the standard JIT calls the host's.
    let own = Jit::new(&STANDARD, 64).with_host_lookups(false);
    let reference = Reference::default();
    let mut combos = Vec::new();
    for src in [DType::S4, DType::U4] {
        for zps in dyn_zps() {
            for &dst in DYN_DST {
                combos.push((src, zps, dst));
            }
        }
    }
    let mut r = Rng::new(0x1f2e_3d4c);
    let run = |c: Case, r: &mut Rng| {
        let src = int_bytes(c.src.dtype, span(&c.src), r);
        let nsc = c.scales.as_ref().unwrap().numel().unwrap();
        let scales = float_bytes(c.dst.dtype, nsc, r);
        let zps = c
            .zps
            .as_ref()
            .map(|d| extreme_zps(d.dtype, d.numel().unwrap(), r));
        for jit in [jit, &own] {
            c.check_data(
                jit,
                &reference,
                r,
                (&src, Some(scales.clone()), zps.clone()),
            );
        }
    };
    // Run lengths: every length for a few combos in turn, a fixed set for all.
    for len in 31..=300usize {
        for k in 0..3 {
            let (src, zps, dst) = combos[(len * 7 + k * 13) % combos.len()];
            run(per_tensor_case(src, zps, dst, &[len]), &mut r);
            // Rows of `len` (odd lengths start rows on odd nibbles), a scale per row.
            let rows = DynamicDequantize::per_channel(0);
            let c = dynamic(rows, src, zps, dst, &[3, len], &[3], false);
            run(c, &mut r);
        }
    }
    for &(src, zps, dst) in &combos {
        for len in [31, 32, 33, 47, 63, 64, 65, 129, 300] {
            let c = per_tensor_case(src, zps, dst, &[len]);
            run(c, &mut r);
        }
        for g in [32usize, 33, 64, 128] {
            for cols in [g, 2 * g + 1, 3 * g + 17, 5 * g - 1] {
                let rows = 3;
                let ss = [rows, cols.div_ceil(g)];
                for bcast in [false, true] {
                    let op = DynamicDequantize::per_group(vec![1, g as i64]);
                    let c = dynamic(
                        op,
                        src,
                        zps,
                        dst,
                        &[rows, cols],
                        &ss,
                        bcast && zps.is_some(),
                    );
                    run(c, &mut r);
                }
            }
            // Groups spanning two rows: segments are runs of the inner loop.
            let op = DynamicDequantize::per_group(vec![2, g as i64]);
            let c = dynamic(op, src, zps, dst, &[4, 2 * g + 3], &[2, 3], false);
            run(c, &mut r);
        }
    }
}

/// The JIT's host lookups (4-bit src by AVX-512 permutes), both forms: streamed
/// straight to dst (a large output) and stored (a small one). s4 and u4 to
/// every dst dtype, with and without zero points, dst at every
/// even byte of a line (16-byte aligned steps stream, the others store), groups
/// with remainders, odd row lengths, one scale per row, whole runs and random
/// sub-ranges. Fails where AVX-512 is selected but a spec lacks the lookups.
#[test]
fn host_lookups_match_reference_at_every_dst_offset() {
    if !(support::paths::cpu_has(Isa::Avx512) && dq::arch::selected() == Isa::Avx512) {
        support::path_unavailable("JIT host lookups (AVX-512 not selected)");
        return;
    }
    let reference = Reference::default();
    let mut r = Rng::new(0x9e37_79b9);
    let forms = [
        (StoreStrategy::NonTemporal, HostLookups::Stream),
        (StoreStrategy::Plain, HostLookups::Store),
    ];
    for (store, form) in forms {
        let _switch = support::paths::store_switch(store, Some(1024));
        // A fresh JIT: its kernels' specs follow the switch.
        let jit = Jit::new(&STANDARD, 64);
        for (src, zps, dst) in [
            (DType::S4, None, DType::F16),
            (DType::U4, Some(DType::U4), DType::BF16),
            (DType::U4, None, DType::F16),
            (DType::S4, Some(DType::S8), DType::BF16),
            (DType::S4, None, DType::F32),
            (DType::U4, Some(DType::U4), DType::F32),
        ] {
            let cases = [
                (
                    [4, 512],
                    DynamicDequantize::per_group(vec![1, 128]),
                    vec![4, 4],
                ),
                ([3, 1000], DynamicDequantize::per_channel(0), vec![3]),
                (
                    [5, 333],
                    DynamicDequantize::per_group(vec![1, 64]),
                    vec![5, 6],
                ),
            ];
            for (shape, op, ss) in cases {
                let c = dynamic(op, src, zps, dst, &shape, &ss, false);
                let plan = c.plan().expect("valid case");
                let spec = jit.spec(&plan).expect("spec");
                assert_eq!(
                    spec.host_lookups(),
                    Some(form),
                    "{shape:?} {src:?} -> {dst:?}"
                );
                for at in (0..64).step_by(2) {
                    check_at(&c, &jit, &reference, &mut r, at);
                }
            }
        }
        support::paths::ran(&format!("jit host lookups: {form:?}"));
    }
}

/// The JIT's streamed lines (`Spec::stream_lines`): a large dense f32 output,
/// while large outputs stream, is written straight to dst, each 16-element step
/// on a 64-byte line as one non-temporal line, the others plainly; stored
/// plainly while they do not. s8, u8 and short-group 4-bit src, dst at every
/// 4-byte offset of a line (so steps start lines or never do), groups with
/// remainders, odd row lengths, whole runs and random sub-ranges.
#[test]
fn streamed_lines_match_reference_at_every_dst_offset() {
    if !cfg!(target_arch = "x86_64") {
        support::path_unavailable("JIT streamed lines (x86-64 only)");
        return;
    }
    let reference = Reference::default();
    let mut r = Rng::new(0x0005_1ea3);
    let per_group = |g| DynamicDequantize::per_group(vec![1, g]);
    // (src, zps, shape, op, scales' shape, streams lines while large outputs stream)
    let cases = [
        (
            DType::S8,
            None,
            [3, 2048],
            DynamicDequantize::per_channel(0),
            vec![3],
            true,
        ),
        (
            DType::S8,
            None,
            [4, 512],
            DynamicDequantize::per_channel(0),
            vec![4],
            false,
        ),
        (
            DType::S8,
            Some(DType::S8),
            [3, 1000],
            DynamicDequantize::per_channel(1),
            vec![1000],
            true,
        ),
        (
            DType::S4,
            Some(DType::S8),
            [6, 250],
            DynamicDequantize::per_channel(1),
            vec![250],
            true,
        ),
        (
            DType::U8,
            Some(DType::U8),
            [3, 2500],
            per_group(1024),
            vec![3, 3],
            true,
        ),
        (
            DType::U8,
            Some(DType::U8),
            [5, 333],
            per_group(64),
            vec![5, 6],
            false,
        ),
    ];
    for store in [StoreStrategy::NonTemporal, StoreStrategy::Plain] {
        let _switch = support::paths::store_switch(store, Some(1024));
        // A fresh JIT: its kernels' specs follow the switch.
        let jit = Jit::new(&STANDARD, 64);
        for (src, zps, shape, op, ss, lines) in cases.clone() {
            let c = dynamic(op, src, zps, DType::F32, &shape, &ss, false);
            let plan = c.plan().expect("valid case");
            let spec = jit.spec(&plan).expect("spec");
            let want = lines && store == StoreStrategy::NonTemporal;
            assert_eq!(
                spec.stream_lines(),
                want,
                "{shape:?} {src:?} under {store:?}"
            );
            for at in (0..64).step_by(4) {
                check_at(&c, &jit, &reference, &mut r, at);
            }
        }
        support::paths::ran(&format!("jit streamed lines under {store:?}"));
    }
}

/// `Jit::spec` and `Jit::clif` describe the kernel the cache holds, not the one
/// the current globals would make: a kernel compiled while large outputs are
/// stored plainly keeps its ordinary host lookups after the strategy turns
/// non-temporal (which a fresh JIT's spec follows), and keeps its bits.
#[test]
fn spec_and_clif_describe_the_cached_kernel_after_a_global_changes() {
    if !(support::paths::cpu_has(Isa::Avx512) && dq::arch::selected() == Isa::Avx512) {
        support::path_unavailable("JIT host lookups (AVX-512 not selected)");
        return;
    }
    let op = DynamicDequantize::per_group(vec![1, 128]);
    let c = dynamic(op, DType::S4, None, DType::F16, &[4, 512], &[4, 4], false);
    let plan = c.plan().expect("valid case");
    let jit = Jit::new(&STANDARD, 4);
    let (kernel, clif) = {
        let _switch = support::paths::store_switch(StoreStrategy::Plain, Some(1024));
        (jit.kernel(&plan).unwrap(), jit.clif(&plan).unwrap())
    };
    assert_eq!(kernel.spec().host_lookups(), Some(HostLookups::Store));
    let _switch = support::paths::store_switch(StoreStrategy::NonTemporal, Some(1024));
    let fresh = Jit::new(&STANDARD, 4);
    let now = fresh.spec(&plan).unwrap();
    assert_eq!(
        now.host_lookups(),
        Some(HostLookups::Stream),
        "the global changed"
    );
    let cached = jit.spec(&plan).unwrap();
    assert_eq!(cached.host_lookups(), kernel.spec().host_lookups());
    assert_eq!(cached.lowering(), kernel.spec().lowering());
    assert_eq!(jit.clif(&plan).unwrap(), clif, "the cached kernel's CLIF");
    assert_ne!(fresh.clif(&plan).unwrap(), clif, "a fresh kernel's differs");
    let mut r = Rng::new(0x5eed);
    check_at(&c, &jit, &Reference::default(), &mut r, 0);
    support::paths::ran("jit spec of a cached kernel after a global change");
}

/// Reference and `jit` on random data into a dst that starts `at` bytes into a
/// 64-byte line, over the whole range and over random pieces in turn; compares
/// the dst and the 64 bytes either side.
fn check_at(c: &Case, jit: &Jit, reference: &Reference, r: &mut Rng, at: usize) {
    let plan = c.plan().expect("valid case");
    let n = plan.numel();
    let src = int_bytes(c.src.dtype, span(&c.src), r);
    let sd = c.scales.as_ref().expect("dynamic");
    let scales = float_bytes(sd.dtype, sd.numel().unwrap(), r);
    let zps = c
        .zps
        .as_ref()
        .map(|d| int_bytes(d.dtype, d.numel().unwrap(), r));
    let mut cuts: Vec<usize> = (0..3).map(|_| r.below(n as u64 + 1) as usize).collect();
    cuts.extend([0, n]);
    cuts.sort();
    let len = c.dst.dtype.bytes_for(n).unwrap();
    let run = |k: &dyn Kernel, ranges: &[std::ops::Range<usize>]| {
        let mut buf = vec![0xa5u8; len + 192];
        let off = 64 + support::to_line_at(buf.as_ptr() as usize, at);
        let s = Tensor::from_bytes(c.src.dtype, &c.src.shape, &src);
        let sc = Tensor::from_bytes(sd.dtype, &sd.shape, &scales);
        let z = c
            .zps
            .as_ref()
            .map(|d| Tensor::from_bytes(d.dtype, &d.shape, zps.as_ref().unwrap()));
        let out = &mut buf[off..off + len];
        let mut d = TensorMut::from_bytes(c.dst.dtype, &c.dst.shape, out);
        let mut job = plan.bind(&s, Some(&sc), z.as_ref(), &mut d).unwrap();
        for range in ranges {
            job.run_range(k, range.clone()).unwrap();
        }
        buf[off - 64..off + len + 64].to_vec()
    };
    let whole = [std::ops::Range { start: 0, end: n }];
    let want = run(reference, &whole);
    let pieces: Vec<_> = cuts.windows(2).map(|w| w[0]..w[1]).collect();
    for ranges in [whole.to_vec(), pieces] {
        let got = run(jit, &ranges);
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{:?} {:?} -> {:?} zps {:?}, dst {at} bytes into a line, ranges {ranges:?}: \
                 byte {i} of the window (dst starts at 64): got {:#04x} want {:#04x}",
                c.op,
                c.src.shape,
                c.dst.dtype,
                c.zps.as_ref().map(|z| z.dtype),
                got[i],
                want[i]
            );
        }
    }
}

#[test]
fn large_shapes_match_reference() {
    // Non-temporal stores for large outputs (held while the test runs: other tests
    // switch the strategy too), so the block copy path runs here.
    let _switch = support::paths::store_switch(StoreStrategy::NonTemporal, None);
    let jit = &Jit::new(&STANDARD, 4);
    let reference = Reference::default();
    // Outputs over the per-core L2 cache take the streaming path; odd row
    // counts leave a partial last block.
    let l2 = dq::arch::l2_bytes();
    for (src, dst) in [
        (DType::S8, DType::F32),
        (DType::U4, DType::BF16),
        (DType::S8, DType::F16),
    ] {
        let rows = l2 / (dst.bits() / 8) / 1024 + 3;
        let c = dynamic(
            DynamicDequantize::per_group(vec![1, 128]),
            src,
            Some(DType::U8),
            dst,
            &[rows, 1024],
            &[rows, 8],
            false,
        );
        let plan = c.plan().unwrap();
        let k = jit.kernel(&plan).unwrap();
        assert!(k.streams(plan.numel()), "{src:?}->{dst:?} should stream");
        c.check(jit, &reference, 5);
        let c = dynamic(
            DynamicDequantize::per_channel(0),
            src,
            None,
            dst,
            &[rows, 1024],
            &[rows],
            false,
        );
        c.check(jit, &reference, 6);
    }
}

#[test]
fn static_op_with_extreme_zero_points() {
    let jit = jit::standard();
    let reference = Reference::default();
    let zps_sets: [Vec<i64>; 7] = [
        vec![0, 0, 0],
        vec![i32::MIN as i64, i32::MAX as i64, 5],
        vec![i64::MIN, i64::MAX, -1],
        vec![i64::MAX - 100, i64::MIN + 100, 1 << 40],
        vec![(1 << 24) + 1, -(1 << 24) - 1, 1 << 24],
        vec![(1 << 22) + 1, -(1 << 22) - 1, 1 << 22],
        vec![(1 << 22) - 1, -(1 << 22), (1 << 24) - 1],
    ];
    for &src in STATIC.src.list().iter().filter(|s| !s.is_float_src()) {
        for zps in &zps_sets {
            for shape in [&[3usize, 40][..], &[3, 1, 17]] {
                let scales = vec![0.5f32, -3.25, 1e-30];
                let per_channel = Dequantize::new(scales.clone())
                    .per_channel(0)
                    .zps(zps.clone());
                let per_tensor = Dequantize::new(vec![-0.75]).zps(vec![zps[1]]);
                for op in [per_channel.into(), Op::from(per_tensor)] {
                    let c = Case {
                        op,
                        src: TensorDesc::new(src, shape),
                        scales: None,
                        zps: None,
                        dst: TensorDesc::new(DType::F32, shape),
                    };
                    c.check(jit, &reference, 3);
                    with_transposed(c).check(jit, &reference, 4);
                }
            }
        }
    }
}

#[test]
fn axes_form_every_dtype() {
    let jit = jit::standard();
    let reference = Reference::default();
    let shape = [3usize, 4, 21];
    for &src in AXES.src.list() {
        for &dst in AXES.dst.list() {
            for axes in [
                vec![],
                vec![0],
                vec![2],
                vec![0, 2],
                vec![1, 2],
                vec![0, 1, 2],
            ] {
                let ss: Vec<usize> = axes.iter().map(|&a| shape[a as usize]).collect();
                let c = Case {
                    op: AxesDequantize::new(axes).into(),
                    src: TensorDesc::new(src, &shape),
                    scales: Some(TensorDesc::new(dst, &ss)),
                    zps: Some(TensorDesc::new(src, &ss)),
                    dst: TensorDesc::new(dst, &shape),
                };
                c.check(jit, &reference, 9);
                with_transposed(c).check(jit, &reference, 10);
            }
        }
    }
}

#[test]
fn strided_4bit_src_and_odd_offsets() {
    let jit = jit::standard();
    let reference = Reference::default();
    for src in [DType::S4, DType::U4] {
        for shape in [[5usize, 7], [3, 33], [17, 2]] {
            // Every other row of a wider tensor: runs start on odd nibbles.
            let strides = [shape[1] * 2 + 1, 1];
            let c = Case {
                op: DynamicDequantize::per_group(vec![1, 4]).into(),
                src: TensorDesc::new(src, &shape).with_strides(&strides),
                scales: Some(TensorDesc::new(
                    DType::F16,
                    &[shape[0], shape[1].div_ceil(4)],
                )),
                zps: Some(TensorDesc::new(
                    DType::U4,
                    &[shape[0], shape[1].div_ceil(4)],
                )),
                dst: TensorDesc::new(DType::F16, &shape),
            };
            c.check(jit, &reference, 21);
        }
    }
}

/// Even row strides with odd row lengths: the JIT peels an odd start once at entry
/// only when a start's parity is its nibble's, so here (even logical start, odd
/// index in its row) it must keep peeling per segment. Table-lookup runs and
/// 32-element groups, many sub-ranges.
#[test]
fn four_bit_odd_rows_in_even_strides() {
    let jit = jit::standard();
    let reference = Reference::default();
    for src in [DType::S4, DType::U4] {
        for shape in [[4usize, 33], [3, 65], [5, 47]] {
            let strides = [shape[1] + 1, 1];
            let groups = [
                (DynamicDequantize::per_tensor(), vec![1]),
                (
                    DynamicDequantize::per_group(vec![1, 32]),
                    vec![shape[0], shape[1].div_ceil(32)],
                ),
            ];
            for (op, ss) in groups {
                let c = Case {
                    op: op.into(),
                    src: TensorDesc::new(src, &shape).with_strides(&strides),
                    scales: Some(TensorDesc::new(DType::BF16, &ss)),
                    zps: None,
                    dst: TensorDesc::new(DType::BF16, &shape),
                };
                for seed in 0..24 {
                    c.check(jit, &reference, seed);
                }
            }
        }
    }
}

#[test]
fn f16_and_bf16_rounding_over_many_bit_patterns() {
    // Per-channel along the last axis: every scale is its own random bit pattern,
    // so results cover normals, subnormals, overflow, ties and NaN payloads.
    static ONE: [Node; 3] = [Node::S, Node::Lit(0x3ff0_0000_0000_0000), Node::Mul(0, 1)];
    static PASS: FormulaIr = FormulaIr {
        name: "pass_scale",
        nodes: &ONE,
    };
    let jit = jit::for_formula(&PASS);
    let reference = Reference { formula: &PASS };
    // dst f16 with f16 scales is exact either way; f32 results need f32 scales, so
    // use the static-like path through a custom formula on s8 * s.
    for dst in [DType::F16, DType::BF16] {
        let c = dynamic(
            DynamicDequantize::per_channel(0),
            DType::S8,
            None,
            dst,
            &[4096],
            &[4096],
            false,
        );
        for seed in 0..16 {
            c.check(jit, &reference, 1000 + seed);
        }
    }
    // f32 results from q * s cover the f32 -> 16-bit rounding paths.
    for dst in [DType::F16, DType::BF16] {
        let c = dynamic(
            DynamicDequantize::per_channel(1),
            DType::S8,
            Some(DType::S8),
            dst,
            &[64, 512],
            &[512],
            false,
        );
        for seed in 0..8 {
            c.check(jit::standard(), &Reference::default(), 77 + seed);
        }
    }
}

/// The kernels' own f16 rounding (vector, table and scalar code), which hosts with
/// F16C skip for dense outputs: the f16 cases with it forced on.
#[test]
fn integer_f16_code_matches_reference() {
    let jit = Jit::new(&STANDARD, 64).with_f16_conversion(false);
    let reference = Reference::default();
    let mut r = Rng::new(0x16);
    for &src in DYN_SRC {
        for zps in dyn_zps() {
            for shape in [&[5usize, 37][..], &[3, 300], &[130]] {
                for c in granularities(src, zps, DType::F16, shape) {
                    c.check(&jit, &reference, r.next_u64());
                }
            }
        }
    }
    // 4-bit tables: groups of 32 and 128 with remainders, odd starts.
    for src in [DType::S4, DType::U4] {
        for zps in [None, Some(DType::U4), Some(DType::S32)] {
            for (cols, g) in [(97usize, 32usize), (300, 128), (129, 64)] {
                let op = DynamicDequantize::per_group(vec![1, g as i64]);
                let c = dynamic(
                    op,
                    src,
                    zps,
                    DType::F16,
                    &[3, cols],
                    &[3, cols.div_ceil(g)],
                    false,
                );
                c.check(&jit, &reference, r.next_u64());
            }
        }
    }
    // Every scale its own bit pattern: normals, subnormals, overflow, ties, NaNs.
    static ONE: [Node; 3] = [Node::S, Node::Lit(0x3ff0_0000_0000_0000), Node::Mul(0, 1)];
    static PASS: FormulaIr = FormulaIr {
        name: "pass_scale_f16",
        nodes: &ONE,
    };
    let pass = Jit::new(&PASS, 4).with_f16_conversion(false);
    let c = dynamic(
        DynamicDequantize::per_channel(0),
        DType::S8,
        None,
        DType::F16,
        &[4096],
        &[4096],
        false,
    );
    for seed in 0..16 {
        c.check(&pass, &Reference { formula: &PASS }, 1000 + seed);
    }
}

/// bf16 results that may be signalling NaNs (a scale passed through) or carry
/// low payload bits (a NaN literal) keep the NaN rule (`bits >> 16 | 0x40`) on
/// every path: scalar, vector, 4-bit tables.
#[test]
fn bf16_nan_rule_holds_for_pass_through_and_nan_literals() {
    static ONLY_S: [Node; 1] = [Node::S];
    static ADD_NAN: [Node; 3] = [
        Node::S,
        Node::Lit(0x7ff8_1fff_e000_0000), // f32 0x7fc0_ffff: rounds up
        Node::Add(1, 0),
    ];
    static FORMULAS: [FormulaIr; 2] = [
        FormulaIr {
            name: "only_s",
            nodes: &ONLY_S,
        },
        FormulaIr {
            name: "add_nan",
            nodes: &ADD_NAN,
        },
    ];
    for formula in &FORMULAS {
        let jit = jit::for_formula(formula);
        let reference = Reference { formula };
        let cases = [
            dynamic(
                DynamicDequantize::per_group(vec![1, 32]),
                DType::U4,
                Some(DType::U4),
                DType::BF16,
                &[16, 96],
                &[16, 3],
                false,
            ),
            dynamic(
                DynamicDequantize::per_channel(1),
                DType::S8,
                None,
                DType::BF16,
                &[4, 80],
                &[80],
                false,
            ),
            per_tensor_case(DType::S4, None, DType::BF16, &[70]),
        ];
        for c in cases {
            let mut r = Rng::new(7);
            let ns = c.scales.as_ref().unwrap().numel().unwrap();
            // Every third scale a signalling NaN with low payload bits.
            let scales: Vec<u8> = (0..ns)
                .flat_map(|i| {
                    let bits = if i % 3 == 0 {
                        0x7f81u16 | (i as u16 & 0x8000)
                    } else {
                        r.next_u64() as u16
                    };
                    bits.to_le_bytes()
                })
                .collect();
            let src = int_bytes(c.src.dtype, span(&c.src), &mut r);
            let zps = c
                .zps
                .as_ref()
                .map(|d| int_bytes(d.dtype, d.numel().unwrap(), &mut r));
            c.check_data(jit, &reference, &mut r, (&src, Some(scales), zps));
        }
    }
}

/// A clamp-like formula exercising every node kind.
static CUSTOM: [Node; 13] = [
    Node::Q,
    Node::Z,
    Node::IntSub(1, 0),          // z - q
    Node::Float(2),              // 3
    Node::S,                     // 4
    Node::Mul(3, 4),             // 5
    Node::Lit(6.0f64.to_bits()), // 6
    Node::Min(5, 6),             // 7
    Node::Neg(6),                // 8
    Node::Max(8, 7),             // 9
    Node::Abs(9),                // 10
    Node::Sub(10, 4),            // 11
    Node::Add(11, 9),            // 12
];
static CUSTOM_IR: FormulaIr = FormulaIr {
    name: "custom",
    nodes: &CUSTOM,
};

#[test]
fn custom_formula_matches_reference() {
    let jit = jit::for_formula(&CUSTOM_IR);
    let reference = Reference {
        formula: &CUSTOM_IR,
    };
    for &src in DYN_SRC {
        for &dst in DYN_DST {
            for zps in [None, Some(DType::S32), Some(DType::U4)] {
                for c in granularities(src, zps, dst, &[5, 37]) {
                    c.check(jit, &reference, 31);
                    with_transposed(c).check(jit, &reference, 32);
                }
            }
        }
    }
    // min/max signed-zero and NaN rules with f64 work (axes form).
    for dst in [DType::F64, DType::F32] {
        let c = Case {
            op: AxesDequantize::new(vec![1]).into(),
            src: TensorDesc::new(DType::S32, &[4, 50]),
            scales: Some(TensorDesc::new(dst, &[50])),
            zps: Some(TensorDesc::new(DType::S32, &[50])),
            dst: TensorDesc::new(dst, &[4, 50]),
        };
        c.check(jit, &reference, 33);
    }
}

#[test]
fn verifier_accepts_every_table_function() {
    let jit = Jit::new(&STANDARD, 4);
    let mut n = 0;
    for &src in DYN_SRC {
        for &dst in DYN_DST {
            for zps in dyn_zps() {
                for c in granularities(src, zps, dst, &[3, 40]) {
                    jit.verify(&c.plan().unwrap()).unwrap();
                    n += 1;
                }
            }
        }
    }
    assert!(n >= 72 * 7);
}

#[test]
fn malformed_formula_is_refused_not_run() {
    static BAD: [Node; 2] = [Node::Q, Node::Float(5)];
    static BAD_IR: FormulaIr = FormulaIr {
        name: "bad",
        nodes: &BAD,
    };
    let jit = Jit::new(&BAD_IR, 4);
    let c = per_tensor_case(DType::S8, None, DType::F32, &[4]);
    let err = jit.supports(&c.plan().unwrap()).unwrap_err();
    assert!(
        matches!(err, dq::Error::BackendUnavailable { backend: "jit", .. }),
        "{err}"
    );
}

// ---- the cache -------------------------------------------------------------

fn s8_plan(shape: &[usize]) -> Plan {
    per_tensor_case(DType::S8, None, DType::F32, shape)
        .plan()
        .unwrap()
}

#[test]
fn racing_threads_compile_once() {
    let jit = Arc::new(Jit::new(&STANDARD, 8));
    let plan = Arc::new(s8_plan(&[5, 77]));
    let barrier = Arc::new(Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (jit, plan, barrier) = (jit.clone(), plan.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                jit.kernel(&plan).unwrap()
            })
        })
        .collect();
    let kernels: Vec<_> = handles.into_iter().map(|t| t.join().unwrap()).collect();
    let s = jit.stats().unwrap();
    assert_eq!((s.compiled, s.reused, s.cached), (1, 5, 1));
    assert!(kernels.iter().all(|k| Arc::ptr_eq(k, &kernels[0])));
    assert_eq!(s.code_bytes, kernels[0].code_bytes() as u64);
}

#[test]
fn shapes_collapsing_to_the_same_loops_share_a_kernel() {
    let jit = Jit::new(&STANDARD, 8);
    let a = jit.kernel(&s8_plan(&[4, 6])).unwrap();
    let b = jit.kernel(&s8_plan(&[24])).unwrap();
    let c = jit.kernel(&s8_plan(&[2, 1, 12])).unwrap();
    assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
    let s = jit.stats().unwrap();
    assert_eq!((s.compiled, s.reused, s.cached), (1, 2, 1));
    assert!(jit.is_cached(&s8_plan(&[3, 8])));
    assert!(!jit.is_cached(&s8_plan(&[25])));
}

#[test]
fn eviction_frees_code_and_kernels_in_use_stay_valid() {
    let jit = Jit::new(&STANDARD, 2);
    let plans: Vec<Plan> = [10usize, 20, 30].iter().map(|&n| s8_plan(&[n])).collect();
    let held = jit.kernel(&plans[0]).unwrap();
    let b1 = jit.stats().unwrap().code_bytes;
    drop(jit.kernel(&plans[1]).unwrap());
    drop(jit.kernel(&plans[2]).unwrap()); // evicts plans[0]'s slot (least recent)
    let s = jit.stats().unwrap();
    assert_eq!((s.compiled, s.cached), (3, 2));
    assert!(!jit.is_cached(&plans[0]));
    // Still held: its code is still counted and still runs.
    let src: Vec<i8> = (0..10).map(|i| i as i8 - 5).collect();
    let mut out = [0f32; 10];
    {
        let s = Tensor::from_slice(&src, &[10]);
        let sc = Tensor::from_slice(&[2.0f32], &[1]);
        let mut d = TensorMut::from_slice(&mut out, &[10]);
        let mut job = plans[0].bind(&s, Some(&sc), None, &mut d).unwrap();
        held.run(&mut job, 0..10).unwrap();
    }
    assert_eq!(out[0], -10.0);
    assert_eq!(out[9], 8.0);
    let before = jit.stats().unwrap().code_bytes;
    drop(held);
    let after = jit.stats().unwrap().code_bytes;
    assert_eq!(
        before - after,
        b1,
        "the evicted kernel's code is freed on release"
    );
    // Re-requesting recompiles.
    jit.kernel(&plans[0]).unwrap();
    assert_eq!(jit.stats().unwrap().compiled, 4);
    jit.clear();
    let s = jit.stats().unwrap();
    assert_eq!((s.cached, s.code_bytes), (0, 0));
}

#[test]
fn a_kernel_refuses_another_plans_job() {
    let jit = Jit::new(&STANDARD, 2);
    let k = jit.kernel(&s8_plan(&[10])).unwrap();
    let other = s8_plan(&[11]);
    let src = [0i8; 11];
    let mut out = [0f32; 11];
    let s = Tensor::from_slice(&src, &[11]);
    let sc = Tensor::from_slice(&[2.0f32], &[1]);
    let mut d = TensorMut::from_slice(&mut out, &[11]);
    let mut job = other.bind(&s, Some(&sc), None, &mut d).unwrap();
    assert!(k.run(&mut job, 0..11).is_err());
}

#[test]
fn auto_races_the_jit_only_where_it_pays() {
    let backends = dq::backends();
    let small = s8_plan(&[1000, 3]);
    let k = backends.select(dq::Backend::Auto, &small).unwrap();
    if backends.get(dq::Backend::Generated).is_some() {
        assert_eq!(
            k.backend(),
            dq::Backend::Generated,
            "a one-off small plan takes the generated kernels"
        );
    }
    // Where the JIT pays too, auto races it against the generated kernels.
    let racers = |plan: &dq::Plan| -> Vec<dq::Backend> {
        let race = backends.race(plan).expect("a race");
        race.kernels().iter().map(|k| k.backend()).collect()
    };
    let big = s8_plan(&[jit::PAYS_ELEMENTS]);
    let k = backends.select(dq::Backend::Auto, &big).unwrap();
    assert_eq!(k.backend(), dq::Backend::Auto);
    let both = if backends.get(dq::Backend::Generated).is_some() {
        vec![dq::Backend::Jit, dq::Backend::Generated]
    } else {
        vec![dq::Backend::Jit]
    };
    if both.len() == 2 {
        assert_eq!(racers(&big), both);
    } else {
        assert_eq!(k.backend(), dq::Backend::Jit);
    }
    // Once compiled, the small shape pays too.
    jit::standard().kernel(&small).unwrap();
    let k = backends.select(dq::Backend::Auto, &small).unwrap();
    if both.len() == 2 {
        assert_eq!(racers(&small), both);
    } else {
        assert_eq!(k.backend(), dq::Backend::Jit);
    }
}

// ---- randomized ------------------------------------------------------------

fn arb_case() -> impl Strategy<Value = (Case, u64)> {
    let dims = prop::collection::vec(0usize..9, 0..5);
    (
        dims,
        0..DYN_SRC.len(),
        0..DYN_DST.len(),
        0..dyn_zps().len(),
        any::<u64>(),
        0usize..4,
        any::<bool>(),
    )
        .prop_map(|(shape, si, di, zi, seed, gran, strided)| {
            let (src, dst, zps) = (DYN_SRC[si], DYN_DST[di], dyn_zps()[zi]);
            let mut r = Rng::new(seed | 1);
            let cases = granularities(src, zps, dst, &shape);
            let mut c = cases
                .into_iter()
                .nth(gran % 4)
                .unwrap_or_else(|| per_tensor_case(src, zps, dst, &shape));
            if !shape.is_empty() && matches!(c.op, Op::Dynamic(ref o) if o.group_shape.is_some()) {
                // Random group shape.
                let gs: Vec<i64> = shape
                    .iter()
                    .map(|&d| 1 + r.below(d as u64 + 1) as i64)
                    .collect();
                let ss: Vec<usize> = shape
                    .iter()
                    .zip(&gs)
                    .map(|(&d, &g)| d.div_ceil(g as usize))
                    .collect();
                c = dynamic(
                    DynamicDequantize::per_group(gs),
                    src,
                    zps,
                    dst,
                    &shape,
                    &ss,
                    false,
                );
            }
            if strided && shape.len() >= 2 {
                // Random permutation of the physical layout, independently for src/dst.
                for d in [&mut c.src, &mut c.dst] {
                    let mut order: Vec<usize> = (0..shape.len()).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, r.below(i as u64 + 1) as usize);
                    }
                    let mut strides = vec![0; shape.len()];
                    let mut acc = 1;
                    for &k in order.iter().rev() {
                        strides[k] = acc;
                        acc *= shape[k].max(1) + (r.below(2) as usize);
                    }
                    *d = d.clone().with_strides(&strides);
                }
            }
            (c, seed)
        })
}

proptest! {
    #![proptest_config(support::seeded_config(file!(), support::proptest_cases(96)))]
    #[test]
    fn random_shapes_and_strides_match_reference((case, seed) in arb_case()) {
        case.check(jit::standard(), &Reference::default(), seed);
    }
}

#[test]
#[ignore = "prints the machine code of the u4 -> bf16 group-128 kernel (DQ_JIT_DISASM=1)"]
fn disasm_u4_bf16() {
    let c = dynamic(
        DynamicDequantize::per_group(vec![1, 128]),
        DType::U4,
        None,
        DType::BF16,
        &[64, 4096],
        &[64, 32],
        false,
    );
    Jit::new(&STANDARD, 1).kernel(&c.plan().unwrap()).unwrap();
}
