//! Random valid cases: every op kind, the dtype combinations of SPEC §4, rank
//! 0-6 shapes with zero-sized dims, every granularity, strided views, and data bytes
//! that hit NaN/inf/subnormal scales and extreme zero points; running a case split
//! over threads.

use std::ops::Range;

pub use dq::case::Case;
use dq::case::OwnedTensor;
use dq::kernel::Kernel;
use dq::rules::{AXES, DYNAMIC, STATIC};
use dq::{AxesDequantize, DType, Dequantize, DynamicDequantize, Op, OpKind, Role, TensorDesc};
use proptest::prelude::*;

use super::Rng;

/// Granularity of a generated case (raw choices, fitted to the shape later).
#[derive(Clone, Debug)]
pub enum Gran {
    /// One scale; `scalar_scale` gives the scales tensor shape `[]` instead of `[1]`.
    PerTensor { scalar_scale: bool },
    /// Per channel along `axis` (may be negative).
    PerChannel { axis: i64 },
    /// Per group with raw group sizes (fitted per dim to `1..=D+2`).
    PerGroup { raw: Vec<u16> },
    /// nGraph axes form with axes chosen by `mask`, listed in `order`.
    Axes { mask: u8, order: Vec<usize> },
}

/// A layout choice for src or dst.
#[derive(Clone, Debug)]
pub enum Layout {
    /// `strides: None`.
    Dense,
    /// Explicit strides equal to the dense ones.
    ExplicitDense,
    /// Dims laid out in the order `perm` (outermost first) with `pads` extra
    /// elements per stride; `zero` (src only) marks dims given stride 0.
    Strided {
        perm: Vec<usize>,
        pads: Vec<u8>,
        zero: u8,
    },
}

/// The structure of a case: everything but the data bytes.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Op kind.
    pub kind: OpKind,
    /// Src shape.
    pub shape: Vec<usize>,
    /// Src dtype choice index.
    pub src_pick: u8,
    /// Dst dtype choice index.
    pub dst_pick: u8,
    /// Zps dtype choice index (0 = none where allowed).
    pub zps_pick: u8,
    /// Granularity.
    pub gran: Gran,
    /// Zero point broadcast (one element, shape chosen by the value) where allowed.
    pub zps_one: u8,
    /// Src layout.
    pub src_layout: Layout,
    /// Dst layout.
    pub dst_layout: Layout,
    /// Data mode (0 random bits, 1 specials mixed in, 2 well-scaled values).
    pub mode: u8,
    /// Seed for every byte.
    pub seed: u64,
}

/// Max elements of a generated shape of each rank (keeps the cases fast).
const MAX_DIM: [usize; 7] = [1, 300, 40, 12, 7, 5, 4];

/// A shape of rank 0-6, zero-sized dims now and then.
pub fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    (0usize..=6).prop_flat_map(|rank| {
        let dim = prop_oneof![1 => Just(0usize), 30 => 1..=MAX_DIM[rank]];
        prop::collection::vec(dim, rank)
    })
}

fn layout_strategy(allow_zero: bool) -> impl Strategy<Value = Layout> {
    let strided = (
        Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
        prop::collection::vec(prop_oneof![3 => Just(0u8), 1 => 1u8..4], 6),
        if allow_zero {
            prop_oneof![3 => Just(0u8), 1 => any::<u8>()].boxed()
        } else {
            Just(0u8).boxed()
        },
    )
        .prop_map(|(perm, pads, zero)| Layout::Strided { perm, pads, zero });
    prop_oneof![
        3 => Just(Layout::Dense),
        1 => Just(Layout::ExplicitDense),
        3 => strided,
    ]
}

fn gran_strategy() -> impl Strategy<Value = Gran> {
    prop_oneof![
        any::<bool>().prop_map(|scalar_scale| Gran::PerTensor { scalar_scale }),
        (-6i64..6).prop_map(|axis| Gran::PerChannel { axis }),
        prop::collection::vec(any::<u16>(), 6).prop_map(|raw| Gran::PerGroup { raw }),
    ]
}

fn axes_strategy() -> impl Strategy<Value = Gran> {
    (
        any::<u8>(),
        Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
    )
        .prop_map(|(mask, order)| Gran::Axes { mask, order })
}

/// A random valid case of `kind` (or any kind).
pub fn case_strategy(kind: Option<OpKind>) -> impl Strategy<Value = Case> {
    let kind = match kind {
        Some(k) => Just(k).boxed(),
        None => prop_oneof![
            Just(OpKind::Dequantize),
            Just(OpKind::Dynamic),
            Just(OpKind::Axes)
        ]
        .boxed(),
    };
    (
        kind,
        shape_strategy(),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        (gran_strategy(), axes_strategy()),
        (layout_strategy(true), layout_strategy(false)),
        (0u8..3, any::<u64>()),
    )
        .prop_map(
            |(
                kind,
                shape,
                (src_pick, dst_pick, zps_pick, zps_one),
                (g, a),
                (sl, dl),
                (mode, seed),
            )| {
                Shape {
                    kind,
                    shape,
                    src_pick,
                    dst_pick,
                    zps_pick,
                    gran: if kind == OpKind::Axes { a } else { g },
                    zps_one,
                    src_layout: sl,
                    dst_layout: dl,
                    mode,
                    seed,
                }
                .materialize()
            },
        )
}

fn pick<T: Copy>(xs: &[T], i: u8) -> T {
    xs[i as usize % xs.len()]
}

/// Strides for `layout` over `shape`.
pub fn strides_for(shape: &[usize], layout: &Layout) -> Option<Vec<usize>> {
    match layout {
        Layout::Dense => None,
        Layout::ExplicitDense => Some(TensorDesc::dense_strides(shape)),
        Layout::Strided { perm, pads, zero } => {
            let rank = shape.len();
            let order: Vec<usize> = perm.iter().copied().filter(|&d| d < rank).collect();
            let mut strides = vec![0usize; rank];
            let mut acc = 1usize;
            for &d in order.iter().rev() {
                if zero >> d & 1 == 1 {
                    continue; // a broadcast (stride 0) src dim
                }
                strides[d] = acc + pads[d] as usize;
                acc = strides[d] * shape[d].max(1);
            }
            Some(strides)
        }
    }
}

impl Shape {
    /// Fits the raw choices to the shape and fills every buffer from the seed.
    pub fn materialize(self) -> Case {
        let mut rng = Rng::new(self.seed);
        let rank = self.shape.len();
        let shape = &self.shape;
        let (op, src_t, dst_t, zps_t, scale_shape, zps_shape): (Op, _, _, _, Vec<usize>, _);
        match self.kind {
            OpKind::Dequantize => {
                src_t = pick(STATIC.src.list(), self.src_pick);
                dst_t = pick(STATIC.dst.list(), self.dst_pick);
                let (mut o, n) = match self.gran {
                    Gran::PerChannel { axis } if rank > 0 => {
                        let a = fit_axis(axis, rank);
                        let o = Dequantize::new(vec![]).per_channel(a);
                        (o, shape[dq_runtime::plan::normalize_axis(a, rank).unwrap()])
                    }
                    _ => (Dequantize::new(vec![]), 1),
                };
                o.scales = (0..n).map(|_| f32_value(&mut rng, self.mode)).collect();
                // A float src (SPEC §10) takes no zero points.
                if !self.zps_pick.is_multiple_of(3) && !src_t.is_float_src() {
                    o.zps = Some((0..n).map(|_| static_zp(&mut rng)).collect());
                }
                op = o.into();
                zps_t = None;
                scale_shape = vec![];
                zps_shape = vec![];
            }
            OpKind::Dynamic => {
                src_t = pick(DYNAMIC.src.list(), self.src_pick);
                dst_t = pick(DYNAMIC.dst.list(), self.dst_pick);
                zps_t = pick(&DYNAMIC.zps_choices(src_t), self.zps_pick);
                let (o, ss) = match &self.gran {
                    Gran::PerChannel { axis } if rank > 0 => {
                        let a = fit_axis(*axis, rank);
                        let n = shape[dq_runtime::plan::normalize_axis(a, rank).unwrap()];
                        (DynamicDequantize::per_channel(a), vec![n])
                    }
                    Gran::PerGroup { raw } => {
                        let g: Vec<usize> = (0..rank)
                            .map(|d| 1 + raw[d] as usize % (shape[d] + 2))
                            .collect();
                        let ss = shape.iter().zip(&g).map(|(&d, &g)| d.div_ceil(g)).collect();
                        let gi = g.iter().map(|&g| g as i64).collect();
                        (DynamicDequantize::per_group(gi), ss)
                    }
                    Gran::PerTensor { scalar_scale: true } => {
                        (DynamicDequantize::per_tensor(), vec![])
                    }
                    _ => (DynamicDequantize::per_tensor(), vec![1]),
                };
                op = o.into();
                zps_shape = if self.zps_one.is_multiple_of(4) {
                    vec![1; self.zps_one as usize / 4 % 4] // broadcast: [] .. [1, 1, 1]
                } else {
                    ss.clone()
                };
                scale_shape = ss;
            }
            OpKind::Axes => {
                src_t = pick(AXES.src.list(), self.src_pick);
                dst_t = pick(AXES.dst.list(), self.dst_pick);
                zps_t = Some(src_t);
                let (mask, order) = match &self.gran {
                    Gran::Axes { mask, order } => (*mask, order.clone()),
                    _ => (0, vec![]),
                };
                let axes: Vec<i64> = order
                    .iter()
                    .filter(|&&d| d < rank && mask >> d & 1 == 1)
                    .map(|&d| d as i64)
                    .collect();
                let mut sorted = axes.clone();
                sorted.sort();
                scale_shape = sorted.iter().map(|&a| shape[a as usize]).collect();
                zps_shape = scale_shape.clone();
                op = AxesDequantize::new(axes).into();
            }
        }
        let src = TensorDesc {
            dtype: src_t,
            shape: shape.clone(),
            strides: strides_for(shape, &self.src_layout),
        };
        let dst = TensorDesc {
            dtype: dst_t,
            shape: shape.clone(),
            strides: strides_for(shape, &self.dst_layout),
        };
        let n = needed(&src) + extra(&mut rng);
        let src_bytes = int_bytes(&mut rng, src_t, n);
        let n = needed(&dst) + extra(&mut rng);
        let dst_bytes = rng.bytes(n);
        let (scales, zps) = if self.kind == OpKind::Dequantize {
            (None, None)
        } else {
            let sd = TensorDesc::new(dst_t, &scale_shape);
            let sb = float_bytes(&mut rng, dst_t, needed(&sd), self.mode);
            let zps = zps_t.map(|t| {
                let zd = TensorDesc::new(t, &zps_shape);
                let zb = int_bytes(&mut rng, t, needed(&zd));
                OwnedTensor::new(zd, zb)
            });
            (Some(OwnedTensor::new(sd, sb)), zps)
        };
        Case {
            op,
            src: OwnedTensor::new(src, src_bytes),
            scales,
            zps,
            dst: OwnedTensor::new(dst, dst_bytes),
        }
    }
}

/// An axis in `[-rank, rank)` from a raw value.
fn fit_axis(raw: i64, rank: usize) -> i64 {
    let r = rank as i64;
    raw.rem_euclid(2 * r) - r
}

fn needed(d: &TensorDesc) -> usize {
    d.required_bytes(Role::Src).expect("generated views fit")
}

fn extra(rng: &mut Rng) -> usize {
    if rng.one_in(2) {
        0
    } else {
        rng.below(3) as usize
    }
}

/// Integer data: random bits, with s32 extremes mixed in.
pub fn int_bytes(rng: &mut Rng, t: DType, n: usize) -> Vec<u8> {
    let mut b = rng.bytes(n);
    if t == DType::S32 {
        for c in b.chunks_exact_mut(4) {
            if rng.one_in(3) {
                let v = rng.pick(&[i32::MIN, i32::MAX, i32::MIN + 1, i32::MAX - 1, 0, -1, 1]);
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    b
}

/// A static zero point: s64 extremes, s32 edges, 8-bit edges, small values.
fn static_zp(rng: &mut Rng) -> i64 {
    match rng.below(4) {
        0 => rng.pick(&[
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            i32::MIN as i64,
            i32::MAX as i64,
            i32::MAX as i64 + 1,
            i32::MIN as i64 - 1,
            -128,
            127,
            255,
            0,
        ]),
        1 => rng.next_u64() as i64,
        _ => (rng.below(512) as i64) - 256,
    }
}

const F32_SPECIAL: [u32; 16] = [
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x7f80_0001, // signalling NaN
    0x7fa1_2345, // NaN with payload
    0x0000_0001, // smallest subnormal
    0x807f_ffff, // largest subnormal, negative
    0x0080_0000, // smallest normal
    0x7f7f_ffff, // largest finite
    0x3f80_0000,
    0x477f_f000, // 65520: rounds to f16 inf
    0x3380_0000, // 2^-24: f16 subnormal territory
    0x3c00_0000,
];
const H16_SPECIAL: [u16; 10] = [
    0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0x0001, 0x83ff, 0x7bff, 0x3c00,
];
const BF16_SPECIAL: [u16; 10] = [
    0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0001, 0x807f, 0x7f7f, 0x3f80,
];
const F64_SPECIAL: [u64; 10] = [
    0,
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    1,
    0x000f_ffff_ffff_ffff,
    0x7fef_ffff_ffff_ffff,
    0x3ff0_0000_0000_0000,
];

/// One f32 scale value for `mode`.
pub fn f32_value(rng: &mut Rng, mode: u8) -> f32 {
    f32::from_bits(match mode {
        0 => rng.next_u64() as u32,
        1 if rng.one_in(3) => rng.pick(&F32_SPECIAL),
        1 => rng.next_u64() as u32,
        // Well-scaled: |s| in [2^-10, 2^6), random mantissa and sign.
        _ => {
            let r = rng.next_u64();
            (r as u32 & 0x807f_ffff) | ((117 + (r >> 40) as u32 % 16) << 23)
        }
    })
}

/// `n` bytes of float scales of dtype `t` for `mode`.
pub fn float_bytes(rng: &mut Rng, t: DType, n: usize, mode: u8) -> Vec<u8> {
    let w = t.bits() / 8;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n / w {
        let special = mode == 1 && rng.one_in(3);
        match t {
            DType::F32 => out.extend(f32_value(rng, mode).to_le_bytes()),
            DType::F16 if special => out.extend(rng.pick(&H16_SPECIAL).to_le_bytes()),
            DType::BF16 if special => out.extend(rng.pick(&BF16_SPECIAL).to_le_bytes()),
            DType::F64 if special => out.extend(rng.pick(&F64_SPECIAL).to_le_bytes()),
            DType::F16 if mode == 2 => {
                let r = rng.next_u64() as u16;
                out.extend(((r & 0x83ff) | ((8 + (r >> 10) % 16) << 10)).to_le_bytes())
            }
            DType::BF16 if mode == 2 => {
                out.extend(((f32_value(rng, 2).to_bits() >> 16) as u16).to_le_bytes())
            }
            DType::F64 if mode == 2 => out.extend((f32_value(rng, 2) as f64).to_le_bytes()),
            _ => out.extend(rng.bytes(w)),
        }
    }
    out
}

/// What the tests add to [`Case`].
pub trait CaseExt {
    /// Number of elements.
    fn numel(&self) -> usize;

    /// Runs `kernel` over `ranges` (contiguous, in order, covering `0..numel`), each
    /// a part of the job (`JobPart`) on its own thread at the same time.
    fn run_split(&self, kernel: &dyn Kernel, ranges: &[Range<usize>]) -> Vec<u8>;
}

impl CaseExt for Case {
    fn numel(&self) -> usize {
        self.src.desc.numel().unwrap()
    }

    fn run_split(&self, kernel: &dyn Kernel, ranges: &[Range<usize>]) -> Vec<u8> {
        let plan = self.plan().expect("generated cases are valid");
        let mut out = self.dst.data.clone();
        self.with_job(&plan, &mut out, |job| {
            let mut rest = job.as_part();
            let mut parts = Vec::new();
            for r in ranges {
                let (part, tail) = rest.split_at(r.end).expect("cut inside the job");
                assert_eq!(part.range(), *r, "ranges must be contiguous and in order");
                parts.push(part);
                rest = tail;
            }
            assert!(rest.range().is_empty(), "ranges must cover the job");
            // Each part on its own thread, under the caller's tuning.
            let tuning = dq::policy::Tuning::current();
            std::thread::scope(|s| {
                for mut part in parts {
                    s.spawn(move || tuning.scope(|| part.run(kernel).expect("JobPart::run")));
                }
            })
        })
        .expect("generated buffers bind");
        out
    }
}

/// Contiguous ranges covering `0..n`, cut at `cuts` (each taken modulo `n + 1`).
pub fn split_ranges(n: usize, cuts: &[u32]) -> Vec<Range<usize>> {
    let mut c: Vec<usize> = cuts.iter().map(|&x| x as usize % (n + 1)).collect();
    c.push(0);
    c.push(n);
    c.sort_unstable();
    c.windows(2).map(|w| w[0]..w[1]).collect()
}

/// Panics with the first differing dst element when `got != want` (exact bits,
/// including bytes outside the view, which must keep their sentinel values).
pub fn assert_bits(case: &Case, got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let w = case.dst.desc.dtype.bits() / 8;
    let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    let e = i / w;
    panic!(
        "{what}: dst differs at byte {i} (element slot {e}): got {:02x?} want {:02x?}\n{case:?}",
        &got[e * w..(e * w + w).min(got.len())],
        &want[e * w..(e * w + w).min(want.len())],
    );
}
