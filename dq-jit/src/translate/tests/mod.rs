//! The translator against [`Reference`], bit for bit.
//!
//! A table of plans (every src, zero-point and dst dtype; per-tensor, per-channel
//! and per-group with group remainders; transposed and padded src and dst; lengths
//! around the vector step, the 4-bit table step and odd nibbles), each compiled
//! with the Cranelift verifier on and run on random bytes (NaN, infinite and
//! subnormal scales, extreme zero points) over the whole range, random sub-ranges
//! and single elements. The whole dst buffer is compared, so a write outside the
//! range fails too. `dynamic` holds the dynamic op's table, `axes_static` the
//! other two ops', `formulas` the custom formulas', `float_src` the float src
//! types' (SPEC §10).

use core::ops::Range;

use dq_runtime::{
    DType, DynamicDequantize, FormulaIr, Op, Plan, Reference, Tensor, TensorDesc, TensorMut,
};

use crate::Jit;

mod axes_static;
mod byte_table;
mod dynamic;
mod float_src;
mod formulas;

use dq_runtime::rng::Rng;

/// A plan's op and tensor descriptors; data is drawn per check.
#[derive(Debug)]
struct Case {
    op: Op,
    src: TensorDesc,
    scales: Option<TensorDesc>,
    zps: Option<TensorDesc>,
    dst: TensorDesc,
}

impl Case {
    /// A dynamic op over `shape` with scales (and zero points of `zps`) of `scale_shape`.
    fn dynamic(
        op: DynamicDequantize,
        (src, zps, dst): (DType, Option<DType>, DType),
        shape: &[usize],
        scale_shape: &[usize],
    ) -> Case {
        Case {
            op: op.into(),
            src: TensorDesc::new(src, shape),
            scales: Some(TensorDesc::new(dst, scale_shape)),
            zps: zps.map(|t| TensorDesc::new(t, scale_shape)),
            dst: TensorDesc::new(dst, shape),
        }
    }

    /// One scale (and zero point) for all of `shape`.
    fn per_tensor(dtypes: (DType, Option<DType>, DType), shape: &[usize]) -> Case {
        Case::dynamic(DynamicDequantize::per_tensor(), dtypes, shape, &[1])
    }

    /// Per-group with group shape `groups` (the scale shape rounds up: remainders).
    fn per_group(dtypes: (DType, Option<DType>, DType), shape: &[usize], groups: &[usize]) -> Case {
        let ss: Vec<usize> = shape
            .iter()
            .zip(groups)
            .map(|(&d, &g)| d.div_ceil(g))
            .collect();
        let gs = groups.iter().map(|&g| g as i64).collect();
        Case::dynamic(DynamicDequantize::per_group(gs), dtypes, shape, &ss)
    }

    /// One zero point for every element.
    fn zp_broadcast(mut self) -> Case {
        self.zps = self.zps.map(|z| TensorDesc::new(z.dtype, &[1]));
        self
    }

    /// With src and/or dst stored with their last two dims transposed.
    fn transposed(mut self, src: bool, dst: bool) -> Case {
        let s = transposed_strides(&self.src.shape);
        if src {
            self.src = self.src.with_strides(&s);
        }
        if dst {
            self.dst = self.dst.with_strides(&s);
        }
        self
    }

    /// With src rows `pad` elements longer than the shape's (4-bit: an odd `pad`
    /// starts every other row on an odd nibble).
    fn padded_src(mut self, pad: usize) -> Case {
        let s = padded_strides(&self.src.shape, pad);
        self.src = self.src.with_strides(&s);
        self
    }

    /// The case's plan (every case is valid).
    fn plan(&self) -> Plan {
        let (scales, zps) = (self.scales.as_ref(), self.zps.as_ref());
        Plan::new(&self.op, &self.src, scales, zps, &self.dst)
            .unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }
}

/// Strides of `shape` stored with its last two dims swapped.
fn transposed_strides(shape: &[usize]) -> Vec<usize> {
    let r = shape.len();
    assert!(r >= 2, "transposing needs two dims");
    let mut phys = shape.to_vec();
    phys.swap(r - 1, r - 2);
    let mut s = TensorDesc::dense_strides(&phys);
    s.swap(r - 1, r - 2);
    s
}

/// Strides of `shape` with each row (last dim) padded by `pad` elements.
fn padded_strides(shape: &[usize], pad: usize) -> Vec<usize> {
    let mut phys = shape.to_vec();
    *phys.last_mut().expect("a row to pad") += pad;
    TensorDesc::dense_strides(&phys)
}

/// Elements a (possibly strided) view spans in its buffer.
fn span(d: &TensorDesc) -> usize {
    if d.numel() == Some(0) {
        return 0;
    }
    let strides = d.strides_or_dense();
    1 + d
        .shape
        .iter()
        .zip(&strides)
        .map(|(&n, &s)| (n - 1) * s)
        .sum::<usize>()
}

/// A scale's bits in float dtype `t` (little-endian bytes): NaNs (quiet and
/// signalling), infinities, signed zero, subnormals, the largest finite value,
/// any bit pattern, and ordinary values.
fn scale_bytes(t: DType, r: &mut Rng, out: &mut Vec<u8>) {
    // (quiet NaN, signalling NaN, +inf, sign bit, largest finite)
    let (qnan, snan, inf, sign, max): (u64, u64, u64, u64, u64) = match t {
        DType::F16 => (0x7e00, 0x7c01, 0x7c00, 0x8000, 0x7bff),
        DType::BF16 => (0x7fc0, 0x7f81, 0x7f80, 0x8000, 0x7f7f),
        DType::F32 => (0x7fc0_0000, 0x7f80_0001, 0x7f80_0000, 1 << 31, 0x7f7f_ffff),
        _ => (
            0x7ff8 << 48,
            (0x7ff0 << 48) | 1,
            0x7ff0 << 48,
            1 << 63,
            0x7fef_ffff_ffff_ffff,
        ),
    };
    if t == DType::E8M0 {
        // Any exponent; 0 (2^-127, subnormal), 254 (2^127) and 255 (NaN) planted.
        let e = match r.below(4) {
            0 => r.pick(&[0u8, 1, 127, 254, 255]),
            _ => r.next_u64() as u8,
        };
        out.push(e);
        return;
    }
    let ordinary = (r.below(2001) as f64 - 1000.0) / 97.0;
    let bits = match r.below(16) {
        0 => qnan | (sign * r.below(2)),
        1 => snan | (r.next_u64() & 0x3f),
        2 => inf,
        3 => inf | sign,
        4 => sign,
        5 => 1 + r.below(3),
        6 => sign | 1,
        7 => max,
        8 | 9 => r.next_u64(),
        _ => match t {
            DType::F16 => half::f16::from_f64(ordinary).to_bits() as u64,
            DType::BF16 => half::bf16::from_f64(ordinary).to_bits() as u64,
            DType::F32 => (ordinary as f32).to_bits() as u64,
            _ => ordinary.to_bits(),
        },
    };
    out.extend(&bits.to_le_bytes()[..t.bits() / 8]);
}

/// Random bytes for `n` integers of dtype `t`, its extremes planted (s32: both ends
/// of i32, both sides of the vector path's limit 2^22 and of 2^24).
fn int_bytes(t: DType, n: usize, r: &mut Rng) -> Vec<u8> {
    let len = t.bytes_for(n).expect("a small tensor");
    let mut b: Vec<u8> = (0..len).map(|_| r.next_u64() as u8).collect();
    if n == 0 {
        return b;
    }
    if t == DType::S32 {
        const ENDS: [i32; 12] = [
            i32::MIN,
            i32::MAX,
            1 << 22,
            -(1 << 22),
            (1 << 22) + 1,
            -(1 << 22) - 1,
            (1 << 22) - 1,
            1 << 24,
            -(1 << 24),
            (1 << 24) - 1,
            -8,
            15,
        ];
        for _ in 0..n.div_ceil(3) {
            let i = r.below(n as u64) as usize;
            b[4 * i..4 * i + 4].copy_from_slice(&r.pick(&ENDS).to_le_bytes());
        }
    } else {
        // As bytes or nibble pairs: 0, -1/15, 127/7 and -128/-8.
        for _ in 0..len.div_ceil(4) {
            let i = r.below(len as u64) as usize;
            b[i] = r.pick(&[0x00, 0xff, 0x77, 0x88, 0x7f, 0x80, 0x08, 0xf0]);
        }
    }
    b
}

/// One draw of a case's src, scales and zero-point bytes.
struct Data {
    src: Vec<u8>,
    scales: Vec<u8>,
    zps: Vec<u8>,
}

impl Data {
    /// Random bytes for every buffer `c` reads.
    fn random(c: &Case, r: &mut Rng) -> Data {
        let src = int_bytes(c.src.dtype, span(&c.src), r);
        let mut scales = Vec::new();
        if let Some(d) = &c.scales {
            for _ in 0..d.numel().expect("small") {
                scale_bytes(d.dtype, r, &mut scales);
            }
        }
        let zps = c.zps.as_ref().map_or_else(Vec::new, |d| {
            int_bytes(d.dtype, d.numel().expect("small"), r)
        });
        Data { src, scales, zps }
    }

    /// The dst buffer (filled with 0xa5 first) after `run` on the bound job.
    fn run(
        &self,
        c: &Case,
        plan: &Plan,
        run: impl FnOnce(&mut dq_runtime::Job<'_>) -> dq_runtime::Result<()>,
    ) -> Vec<u8> {
        let bytes = c.dst.dtype.bytes_for(span(&c.dst)).expect("small");
        let mut out = vec![0xa5u8; bytes];
        let src = Tensor::from_bytes(c.src.dtype, &c.src.shape, &self.src)
            .with_strides(&c.src.strides_or_dense());
        let scales = c
            .scales
            .as_ref()
            .map(|d| Tensor::from_bytes(d.dtype, &d.shape, &self.scales));
        let zps = c
            .zps
            .as_ref()
            .map(|d| Tensor::from_bytes(d.dtype, &d.shape, &self.zps));
        let mut dst = TensorMut::from_bytes(c.dst.dtype, &c.dst.shape, &mut out)
            .with_strides(&c.dst.strides_or_dense());
        let mut job = plan
            .bind(&src, scales.as_ref(), zps.as_ref(), &mut dst)
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
        run(&mut job).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        out
    }
}

/// The first dst element (buffer order) whose `dtype` bytes differ, if any.
fn first_difference(got: &[u8], want: &[u8], dtype: DType) -> Option<usize> {
    assert_eq!(got.len(), want.len(), "dst buffer lengths");
    (0..got.len())
        .find(|&i| got[i] != want[i])
        .map(|i| i / (dtype.bits() / 8))
}

/// Verifies and compiles `c` on `jit`, then compares it with the reference on
/// `draws` draws of random data, each over the whole range, random sub-ranges and
/// a single element at an odd index.
fn check(jit: &Jit, c: &Case, r: &mut Rng, draws: usize) {
    let plan = c.plan();
    jit.verify(&plan).unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let kernel = jit.kernel(&plan).unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let reference = Reference {
        formula: jit.formula(),
    };
    let n = plan.numel();
    for _ in 0..draws {
        let data = Data::random(c, r);
        let mut ranges: Vec<Range<usize>> = Vec::with_capacity(5);
        ranges.push(0..n);
        for _ in 0..3 {
            let (a, b) = (
                r.below(n as u64 + 1) as usize,
                r.below(n as u64 + 1) as usize,
            );
            ranges.push(a.min(b)..a.max(b));
        }
        let odd = r.below(n as u64) as usize | 1;
        if odd < n {
            ranges.push(odd..odd + 1);
        }
        for range in ranges {
            let want = data.run(c, &plan, |job| job.run_range(&reference, range.clone()));
            let got = data.run(c, &plan, |job| kernel.run(job, range.clone()));
            if let Some(i) = first_difference(&got, &want, c.dst.dtype) {
                let w = c.dst.dtype.bits() / 8;
                panic!(
                    "{c:?}\nrange {range:?}, dst element {i} (buffer order): got {:02x?}, want \
                     {:02x?}\nloops {:?}",
                    &got[i * w..i * w + w],
                    &want[i * w..i * w + w],
                    plan.loops()
                );
            }
        }
    }
}

/// The JITs a case runs on: for f16 dst, with F16C block conversion (where the
/// host has it) and with the kernels' own integer rounding.
fn jits_for(dst: DType, formula: &'static FormulaIr) -> Vec<Jit> {
    let mut v = vec![Jit::new(formula, 16)];
    if dst == DType::F16 {
        v.push(Jit::new(formula, 16).with_f16_conversion(false));
    }
    v
}

/// The 4-bit src dtypes.
const SRC_4BIT: [DType; 2] = [DType::S4, DType::U4];
/// The dynamic op's src, dst and zero-point dtypes.
const DYN_SRC: [DType; 4] = [DType::S8, DType::U8, DType::S4, DType::U4];
const DYN_DST: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const DYN_ZPS: [Option<DType>; 6] = [
    None,
    Some(DType::S4),
    Some(DType::U4),
    Some(DType::S8),
    Some(DType::U8),
    Some(DType::S32),
];
