//! HuggingFace linears on the JIT (`dq_jit::linear`: one Cranelift function per
//! linear shape): bit for bit against the real packers' reference outputs on every
//! fixture (f32, f16, bf16; the facade on 1-3 threads), and against the generated
//! driver and `Linear::value` on random linears: widths, packings and field orders,
//! strides, offsets, zero points or none, scale types with zeros, subnormals,
//! infinities and NaNs, group sizes (odd ones too) and per-input group indices,
//! odd shapes and row ranges.

use crate::support;
use dq::formats::hf::Checkpoint;
use dq::{Backend, Options};
use dq_runtime::linear::{Groups, Linear, Out, Packed, Packing, ScaleType, Scales};
use half::{bf16, f16};
use proptest::prelude::*;
use support::Rng;
use support::hf::{CASES, expected, fixtures};

/// Output bits of three types: f32, f16, bf16.
type Bits = [Vec<u32>; 3];

/// The f32 values `want` as (f32, f16, bf16) bits, each rounded once.
fn rounded(want: &[u32]) -> Bits {
    let f = |w: &u32| f32::from_bits(*w);
    [
        want.to_vec(),
        want.iter()
            .map(|w| u32::from(f16::from_f32(f(w)).to_bits()))
            .collect(),
        want.iter()
            .map(|w| u32::from(bf16::from_f32(f(w)).to_bits()))
            .collect(),
    ]
}

/// Asserts `got == want` per output type, naming the first differing element.
fn assert_bits(got: &Bits, want: &Bits, k: usize, what: &str) {
    for (t, name) in ["f32", "f16", "bf16"].iter().enumerate() {
        assert_eq!(got[t].len(), want[t].len(), "{what} {name}");
        if let Some(i) = (0..want[t].len()).find(|&i| got[t][i] != want[t][i]) {
            panic!(
                "{what} {name}: element [{}, {}] is 0x{:08x}, want 0x{:08x}",
                i / k.max(1),
                i % k.max(1),
                got[t][i],
                want[t][i]
            );
        }
    }
}

/// An output element's bits.
trait ToBits: Out + Default {
    fn to_u32(self) -> u32;
}

impl ToBits for f32 {
    fn to_u32(self) -> u32 {
        self.to_bits()
    }
}

impl ToBits for f16 {
    fn to_u32(self) -> u32 {
        u32::from(self.to_bits())
    }
}

impl ToBits for bf16 {
    fn to_u32(self) -> u32 {
        u32::from(self.to_bits())
    }
}

/// Bits of an output buffer.
fn bits<T: ToBits>(out: &[T]) -> Vec<u32> {
    out.iter().map(|&y| y.to_u32()).collect()
}

/// Rows `rows` of `l` through the JIT, as f32, f16 and bf16 bits. f16 goes
/// through both the host's F16C tables and the function's own rounding, which
/// must agree.
fn jit(l: &Linear<'_>, rows: std::ops::Range<usize>) -> Bits {
    static OWN: std::sync::OnceLock<dq_jit::LinearJit> = std::sync::OnceLock::new();
    let own = OWN.get_or_init(|| dq_jit::LinearJit::new().with_f16_conversion(false));
    let len = rows.len() * l.k();
    let j = dq_jit::linear();
    let mut a = vec![0f32; len];
    j.run(l, rows.clone(), &mut a).unwrap();
    let mut b = vec![f16::ZERO; len];
    j.run(l, rows.clone(), &mut b).unwrap();
    let mut b2 = vec![f16::ZERO; len];
    own.run(l, rows.clone(), &mut b2).unwrap();
    assert_eq!(
        bits(&b),
        bits(&b2),
        "f16 by F16C tables and by the function's rounding"
    );
    let mut c = vec![bf16::ZERO; len];
    j.run(l, rows, &mut c).unwrap();
    [bits(&a), bits(&b), bits(&c)]
}

/// Rows `rows` of `l` through the generated driver.
fn generated(l: &Linear<'_>, rows: std::ops::Range<usize>) -> Bits {
    let len = rows.len() * l.k();
    let mut a = vec![0f32; len];
    l.run(rows.clone(), &mut a).unwrap();
    let mut b = vec![f16::ZERO; len];
    l.run(rows.clone(), &mut b).unwrap();
    let mut c = vec![bf16::ZERO; len];
    l.run(rows, &mut c).unwrap();
    [bits(&a), bits(&b), bits(&c)]
}

#[test]
fn every_fixture_linear_through_the_jit_equals_the_reference_outputs() {
    // Forced chunks: the facade's thread counts split these small tensors too.
    let _chunks = support::paths::force_chunks(256);
    for case in CASES {
        let path = fixtures().join(case);
        let ckpt = Checkpoint::open(&path).unwrap();
        for l in ckpt.linears() {
            let want = rounded(&expected(&path, l.name()));
            let plan = l.plan().unwrap();
            let what = format!("{case} {} on the JIT", l.name());
            assert_bits(&jit(&plan, 0..l.n()), &want, l.k(), &what);
            // The facade: Backend::Jit on 1..=3 threads, every output type.
            for threads in 1..=3 {
                let opts = Options::new()
                    .with_backend(Backend::Jit)
                    .with_threads(threads);
                let mut a = vec![0f32; l.n() * l.k()];
                l.dequantize(&mut a, &opts).unwrap();
                let mut b = vec![f16::ZERO; a.len()];
                l.dequantize(&mut b, &opts).unwrap();
                let mut c = vec![bf16::ZERO; a.len()];
                l.dequantize(&mut c, &opts).unwrap();
                let got = [bits(&a), bits(&b), bits(&c)];
                let what = format!("{case} {} jit {threads} threads", l.name());
                assert_bits(&got, &want, l.k(), &what);
            }
        }
    }
}

/// Random scale bits: mostly finite values, with zeros, subnormals, negatives,
/// infinities and NaNs (quiet and signalling).
fn scale_bytes(rng: &mut Rng, dtype: ScaleType, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..count {
        let special = rng.below(8);
        let sign = rng.below(2) as u32;
        match dtype {
            ScaleType::F32 => {
                let bits: u32 = match special {
                    0 => rng.pick(&[
                        0,
                        0x7f80_0000,
                        0x7fc0_0001,
                        0x7f80_0001,
                        0x7f7f_ffff,
                        0x7fff_ffff,
                    ]),
                    1 => rng.below(0x80_0000) as u32,
                    _ => rng.below(1 << 30) as u32 + 0x3000_0000,
                } | sign << 31;
                out.extend(bits.to_le_bytes());
            }
            ScaleType::BF16 => {
                let bits: u16 = match special {
                    0 => rng.pick(&[0, 0x7f80, 0x7fc1, 0x7f81, 0x7f7f]),
                    1 => rng.below(0x80) as u16,
                    _ => rng.below(0x1000) as u16 + 0x3800,
                } | (sign as u16) << 15;
                out.extend(bits.to_le_bytes());
            }
            ScaleType::F16 => {
                let bits: u16 = match special {
                    0 => rng.pick(&[0, 0x7c00, 0x7e01, 0x7c01, 0x7bff]),
                    1 => rng.below(0x400) as u16,
                    _ => rng.below(0x3000) as u16 + 0x1000,
                } | (sign as u16) << 15;
                out.extend(bits.to_le_bytes());
            }
        }
    }
    out
}

/// Zero points: packing, strides, offset, words.
type Zeros = (Packing, (usize, usize), i32, Vec<u8>);

/// The buffers of one random linear.
struct Case {
    n: usize,
    k: usize,
    groups: usize,
    bits: u32,
    packing: Packing,
    strides: (usize, usize),
    offset: i32,
    words: Vec<u8>,
    zeros: Option<Zeros>,
    scale: ScaleType,
    scale_strides: (usize, usize),
    scales: Vec<u8>,
    map: Result<usize, Vec<u32>>,
}

/// A random permutation of `0..w` in the first `w` of 8 entries.
fn order(rng: &mut Rng, w: usize) -> [u8; 8] {
    let mut o: [u8; 8] = core::array::from_fn(|i| i as u8);
    for i in (1..w).rev() {
        o.swap(i, rng.below(i as u64 + 1) as usize);
    }
    o
}

/// Word strides (row, column) for `rows x cols` fields packed `packing`: column
/// major (GPTQ, AWQ), row major (compressed-tensors), or either with padding.
/// Returns the strides and the number of words.
fn layout(
    rng: &mut Rng,
    packing: Packing,
    w: usize,
    rows: usize,
    cols: usize,
) -> ((usize, usize), usize) {
    let (r, c) = match packing {
        Packing::Inner => (rows, cols.div_ceil(w)),
        Packing::Outer { .. } => (rows.div_ceil(w), cols),
    };
    let pad = if rng.one_in(4) {
        1 + rng.below(3) as usize
    } else {
        0
    };
    let strides = if rng.one_in(2) {
        (1, r + pad)
    } else {
        (c + pad, 1)
    };
    let words = if r == 0 || c == 0 {
        0
    } else {
        (r - 1) * strides.0 + (c - 1) * strides.1 + 1
    };
    (strides, words)
}

fn random_case(rng: &mut Rng) -> Case {
    let bits = if rng.one_in(3) { 8 } else { 4 };
    let w = 32 / bits as usize;
    let big = rng.one_in(4);
    // Big cases cross the JIT's tiles (64 rows, or 128 for 4-bit words along N,
    // 1024 where AWQ-like word columns are staged) and its chunks (2048 inputs,
    // 1024 staged).
    let n = 1 + match (big, rng.one_in(3)) {
        (true, true) => 1000 + rng.below(1200),
        (true, false) => rng.below(700),
        _ => rng.below(40),
    } as usize;
    let k = match rng.below(4) {
        0 => 1 + rng.below(40) as usize,
        1 => 1024 + rng.below(3200) as usize,
        _ => 1 + rng.below(400) as usize,
    };
    let size = match rng.below(4) {
        0 => k,
        1 => 1 + rng.below(40) as usize,
        _ => rng.pick(&[8, 16, 32, 64, 128]),
    };
    let groups = k.div_ceil(size) + rng.below(2) as usize;
    let map = if rng.one_in(4) {
        Err((0..k).map(|_| rng.below(groups as u64) as u32).collect())
    } else {
        Ok(size)
    };
    let packing = if rng.one_in(2) {
        Packing::Inner
    } else {
        Packing::Outer {
            order: order(rng, w),
        }
    };
    let (strides, count) = layout(rng, packing, w, n, k);
    let words = rng.bytes(4 * count);
    let offset = rng.below(17) as i32 - 8;
    let zeros = (!rng.one_in(3)).then(|| {
        let zp = if rng.one_in(4) {
            Packing::Inner
        } else {
            Packing::Outer {
                order: order(rng, w),
            }
        };
        let (zs, zc) = layout(rng, zp, w, n, groups);
        (zp, zs, rng.below(5) as i32 - 2, rng.bytes(4 * zc))
    });
    let scale = rng.pick(&[ScaleType::F16, ScaleType::BF16, ScaleType::F32]);
    let scale_strides = if rng.one_in(2) { (1, n) } else { (groups, 1) };
    let scales = scale_bytes(rng, scale, n * groups);
    Case {
        n,
        k,
        groups,
        bits,
        packing,
        strides,
        offset,
        words,
        zeros,
        scale,
        scale_strides,
        scales,
        map,
    }
}

impl Case {
    fn linear(&self) -> Linear<'_> {
        let weights = Packed {
            words: &self.words,
            bits: self.bits,
            packing: self.packing,
            row_stride: self.strides.0,
            col_stride: self.strides.1,
            offset: self.offset,
        };
        let zeros = self.zeros.as_ref().map(|(p, s, o, words)| Packed {
            words,
            bits: self.bits,
            packing: *p,
            row_stride: s.0,
            col_stride: s.1,
            offset: *o,
        });
        let scales = Scales {
            bytes: &self.scales,
            dtype: self.scale,
            row_stride: self.scale_strides.0,
            col_stride: self.scale_strides.1,
        };
        let map = match &self.map {
            Ok(s) => Groups::Size(*s),
            Err(ix) => Groups::Index(ix),
        };
        Linear::new(self.n, self.k, self.groups, weights, zeros, scales, map).unwrap()
    }
}

/// One random linear through the JIT against the generated driver and the formula,
/// for every row and a random range of rows.
fn check_random(seed: u64) {
    let mut rng = Rng::new(seed);
    let case = random_case(&mut rng);
    let l = case.linear();
    let (n, k) = (l.n(), l.k());
    let a = rng.below(n as u64 + 1) as usize;
    let b = a + rng.below((n - a) as u64 + 1) as usize;
    for rows in [0..n, a..b] {
        let what = format!(
            "seed {seed}: {n}x{k} {}-bit {:?} {:?} groups {:?} zeros {} scales {:?}, rows {rows:?}",
            case.bits,
            case.packing,
            case.strides,
            case.map.as_ref().map_err(|_| "index"),
            case.zeros.is_some(),
            case.scale,
        );
        let got = jit(&l, rows.clone());
        assert_bits(
            &got,
            &generated(&l, rows.clone()),
            k,
            &format!("{what} vs generated"),
        );
        let values: Vec<u32> = rows
            .clone()
            .flat_map(|r| (0..k).map(move |c| (r, c)))
            .map(|(r, c)| l.value(r, c).to_bits())
            .collect();
        assert_bits(&got, &rounded(&values), k, &format!("{what} vs value"));
    }
}

proptest! {
    #![proptest_config(support::seeded_config(file!(), support::proptest_cases(64)))]

    #[test]
    fn random_linears_through_the_jit_equal_the_generated_driver(seed in any::<u64>()) {
        check_random(seed);
    }
}

#[test]
fn fixed_random_linears_through_the_jit() {
    for seed in 0..48 {
        check_random(0x11_0000 + seed);
    }
}

#[test]
fn functions_are_compiled_once_per_shape_and_verified() {
    let jit = dq_jit::LinearJit::new();
    let mut rng = Rng::new(3);
    let case = random_case(&mut rng);
    let l = case.linear();
    let mut out = vec![bf16::ZERO; l.n() * l.k()];
    jit.run(&l, 0..l.n(), &mut out).unwrap();
    jit.run(&l, 0..l.n(), &mut out).unwrap();
    let s = jit.stats();
    assert_eq!((s.compiled, s.reused, s.kernels), (1, 1, 1));
    let mut f = vec![0f32; l.n() * l.k()];
    jit.run(&l, 0..l.n(), &mut f).unwrap();
    assert_eq!(
        jit.stats().compiled,
        2,
        "another output type, another function"
    );
    for seed in 0..24 {
        let c = random_case(&mut Rng::new(seed));
        for t in [dq::DType::F32, dq::DType::F16, dq::DType::BF16] {
            jit.verify(&c.linear(), t).unwrap();
        }
    }
    // Rows and output lengths are checked before any code runs.
    assert!(jit.run(&l, 0..l.n() + 1, &mut out).is_err());
    assert!(jit.run(&l, 0..l.n(), &mut out[1..]).is_err());
}
