//! HuggingFace linears on the generated backend (their plans through the tiled
//! driver, `dq_runtime::linear`), on every ISA and output type: bit for bit against
//! the real packers' reference outputs on the fixtures, and against the scalar
//! reference (`formats::hf::reference`) on random words, scales (zero, subnormal,
//! negative, inf, NaN), group maps, shapes and row ranges.

use crate::support;
use dq::arch::Isa;
use dq::formats::hf::{Checkpoint, CtStrategy, Dtype, QuantConfig, QuantLinear, reference};
use dq::{Backend, Options};
use half::{bf16, f16};
use proptest::prelude::*;
use support::Rng;
use support::hf::{CASES, Tensor, UP, copy_case, expected, fixtures, read_tensors, write_tensors};

/// Runs `l`'s plan on `isa` for rows `rows`, as f32 bits, f16 bits and bf16 bits;
/// `None` (reported) when this CPU cannot run `isa`.
fn run_plan(l: &QuantLinear<'_>, isa: Isa, rows: std::ops::Range<usize>) -> Option<[Vec<u32>; 3]> {
    if !isa.available() {
        support::isa_unavailable(isa, &format!("linear plan on {}", isa.name()));
        return None;
    }
    let plan = l.plan().unwrap();
    let len = rows.len() * l.k();
    let mut a = vec![0f32; len];
    plan.run_on(isa, rows.clone(), &mut a).unwrap();
    let mut b = vec![f16::ZERO; len];
    plan.run_on(isa, rows.clone(), &mut b).unwrap();
    let mut c = vec![bf16::ZERO; len];
    plan.run_on(isa, rows, &mut c).unwrap();
    Some([
        a.iter().map(|y| y.to_bits()).collect(),
        b.iter().map(|y| u32::from(y.to_bits())).collect(),
        c.iter().map(|y| u32::from(y.to_bits())).collect(),
    ])
}

/// The f32 values `want` as (f32, f16, bf16) bits, each rounded once.
fn rounded(want: &[u32]) -> [Vec<u32>; 3] {
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
fn assert_bits(got: &[Vec<u32>; 3], want: &[Vec<u32>; 3], k: usize, what: &str) {
    for (t, name) in ["f32", "f16", "bf16"].iter().enumerate() {
        if let Some(i) = (0..want[t].len()).find(|&i| got[t][i] != want[t][i]) {
            panic!(
                "{what} {name}: element [{}, {}] is 0x{:08x}, the reference gives 0x{:08x}",
                i / k,
                i % k,
                got[t][i],
                want[t][i]
            );
        }
        assert_eq!(got[t].len(), want[t].len(), "{what} {name}");
    }
}

#[test]
fn every_fixture_linear_on_every_isa_equals_the_reference_outputs() {
    // Forced chunks: the facade's thread counts split these small tensors too.
    let _chunks = support::paths::force_chunks(256);
    for case in CASES {
        let path = fixtures().join(case);
        let ckpt = Checkpoint::open(&path).unwrap();
        for l in ckpt.linears() {
            let want = rounded(&expected(&path, l.name()));
            for isa in Isa::ALL {
                let what = format!("{case} {} on {}", l.name(), isa.name());
                if let Some(got) = run_plan(&l, isa, 0..l.n()) {
                    assert_bits(&got, &want, l.k(), &what);
                }
            }
            // The facade: Generated (and Auto) on 1..=5 threads, every output type.
            for threads in 1..=5 {
                let opts = Options::new()
                    .with_backend(Backend::Generated)
                    .with_threads(threads);
                let mut a = vec![0f32; l.n() * l.k()];
                l.dequantize(&mut a, &opts).unwrap();
                let mut b = vec![bf16::ZERO; a.len()];
                l.dequantize(
                    &mut b,
                    &Options::new()
                        .with_backend(Backend::Auto)
                        .with_threads(threads),
                )
                .unwrap();
                let mut c = vec![f16::ZERO; a.len()];
                l.dequantize(&mut c, &opts).unwrap();
                let got = [
                    a.iter().map(|y| y.to_bits()).collect(),
                    c.iter().map(|y| u32::from(y.to_bits())).collect(),
                    b.iter().map(|y| u32::from(y.to_bits())).collect(),
                ];
                assert_bits(
                    &got,
                    &want,
                    l.k(),
                    &format!("{case} {} {threads} threads", l.name()),
                );
            }
        }
    }
}

/// Random scale bits: mostly finite values, with zeros, subnormals, negatives,
/// infinities and NaNs.
fn scale_bytes(rng: &mut Rng, dtype: Dtype, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..count {
        let special = rng.below(8);
        match dtype {
            Dtype::F32 => {
                let bits: u32 = match special {
                    0 => rng.pick(&[
                        0,
                        0x8000_0000,
                        0x7f80_0000,
                        0xff80_0000,
                        0x7fc0_0001,
                        0x7f80_0001,
                    ]),
                    1 => rng.below(0x80_0000) as u32 | (rng.below(2) as u32) << 31,
                    _ => (rng.below(1 << 30) as u32 + 0x3000_0000) | (rng.below(2) as u32) << 31,
                };
                out.extend(bits.to_le_bytes());
            }
            _ => {
                let bf = dtype == Dtype::BF16;
                let sign = 0x8000 * rng.below(2) as u16;
                let bits: u16 = match special {
                    0 if bf => rng.pick(&[0, 0x8000, 0x7f80, 0xff80, 0x7fc1, 0x7f81]),
                    0 => rng.pick(&[0, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0x7c01]),
                    1 if bf => rng.below(0x80) as u16 | sign,
                    1 => rng.below(0x400) as u16 | sign,
                    _ if bf => (rng.below(0x1000) as u16 + 0x3800) | sign,
                    _ => (rng.below(0x3000) as u16 + 0x1000) | sign,
                };
                out.extend(bits.to_le_bytes());
            }
        }
    }
    out
}

/// Replaces the tensors of linear `UP` in `tensors` by random ones of a random shape
/// that `config` admits.
fn randomize(tensors: &mut Vec<Tensor>, config: &QuantConfig, rng: &mut Rng) {
    let has = |t: &Vec<Tensor>, f: &str| t.iter().any(|x| x.0 == format!("{UP}.{f}"));
    let dtype_of =
        |t: &Vec<Tensor>, f: &str| t.iter().find(|x| x.0 == format!("{UP}.{f}")).unwrap().1;
    let scale_field = if has(tensors, "scales") {
        "scales"
    } else {
        "weight_scale"
    };
    let sdtype = dtype_of(tensors, scale_field);
    let g_idx = has(tensors, "g_idx");
    let mut put: Vec<Tensor> = Vec::new();
    let mut words = |name: &str, shape: Vec<usize>, rng: &mut Rng| {
        let bytes = rng.bytes(shape.iter().product::<usize>() * 4);
        put.push((format!("{UP}.{name}"), Dtype::I32, shape, bytes));
    };
    let mut extra: Vec<Tensor> = Vec::new();
    match *config {
        QuantConfig::Gptq {
            bits, group_size, ..
        } => {
            let w = 32 / bits as usize;
            // Any N; any K with a g_idx (its length), else whole words (GPTQModel pads).
            let n = 1 + rng.below(24 * w as u64) as usize;
            let k = match g_idx {
                true => 1 + rng.below(150 * w as u64) as usize,
                false => w * (1 + rng.below(150) as usize),
            };
            let groups = group_size.map_or(1, |g| k.div_ceil(g));
            words("qweight", vec![k.div_ceil(w), n], rng);
            words("qzeros", vec![groups, n.div_ceil(w)], rng);
            extra.push((
                format!("{UP}.scales"),
                sdtype,
                vec![groups, n],
                scale_bytes(rng, sdtype, groups * n),
            ));
            if g_idx {
                let ix: Vec<u8> = (0..k)
                    .flat_map(|_| (rng.below(groups as u64) as i32).to_le_bytes())
                    .collect();
                extra.push((format!("{UP}.g_idx"), Dtype::I32, vec![k], ix));
            }
        }
        QuantConfig::Awq { group_size } => {
            let g = group_size.unwrap();
            let (n, k) = (
                8 * (1 + rng.below(40) as usize),
                g * (1 + rng.below(40) as usize),
            );
            words("qweight", vec![k, n / 8], rng);
            words("qzeros", vec![k / g, n / 8], rng);
            extra.push((
                format!("{UP}.scales"),
                sdtype,
                vec![k / g, n],
                scale_bytes(rng, sdtype, k / g * n),
            ));
        }
        QuantConfig::CompressedTensors {
            bits,
            strategy,
            symmetric,
        } => {
            let w = 32 / bits as usize;
            let n = 1 + rng.below(40) as usize;
            let (k, groups) = match strategy {
                CtStrategy::Channel => (1 + rng.below(700) as usize, 1),
                CtStrategy::Group(g) => {
                    let m = 1 + rng.below(12) as usize;
                    (g * m, m)
                }
            };
            words("weight_packed", vec![n, k.div_ceil(w)], rng);
            if !symmetric {
                words("weight_zero_point", vec![n.div_ceil(w), groups], rng);
            }
            extra.push((
                format!("{UP}.weight_scale"),
                sdtype,
                vec![n, groups],
                scale_bytes(rng, sdtype, n * groups),
            ));
            let sd = dtype_of(tensors, "weight_shape");
            let shape: Vec<u8> = if sd == Dtype::I64 {
                [n as i64, k as i64]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            } else {
                [n as i32, k as i32]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            };
            extra.push((format!("{UP}.weight_shape"), sd, vec![2], shape));
        }
        // Float weights (hf_float.rs) and the coded families (hf_coded.rs) have
        // their own tests.
        other => {
            panic!("{other:?}: not a packed-integer fixture")
        }
    }
    put.extend(extra);
    for t in put {
        let slot = tensors
            .iter_mut()
            .find(|x| x.0 == t.0)
            .expect("the fixture has this tensor");
        *slot = t;
    }
}

/// Opens a copy of `case` whose linear `UP` is random, and checks it.
fn check_random(case: &str, seed: u64) {
    let dir = copy_case(case);
    let file = dir.path().join("model.safetensors");
    let config = *Checkpoint::open(dir.path()).unwrap().config().unwrap();
    let (mut tensors, metadata) = read_tensors(&file);
    let mut rng = Rng::new(seed);
    randomize(&mut tensors, &config, &mut rng);
    write_tensors(&file, &tensors, metadata);
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let want = reference::dequantize_f32(&l);
    let (n, k) = (l.n(), l.k());
    let a = rng.below(n as u64 + 1) as usize;
    let b = a + rng.below((n - a) as u64 + 1) as usize;
    for rows in [0..n, a..b] {
        let part = rounded(
            &want[rows.start * k..rows.end * k]
                .iter()
                .map(|y| y.to_bits())
                .collect::<Vec<_>>(),
        );
        for isa in Isa::ALL {
            let what = format!(
                "{case} random seed {seed} ({n}x{k}) rows {rows:?} on {}",
                isa.name()
            );
            if let Some(got) = run_plan(&l, isa, rows.clone()) {
                assert_bits(&got, &part, k, &what);
            }
        }
    }
}

/// The fixtures in one `model.safetensors` (the sharded AWQ one is the same scheme
/// as `awq-4bit-g32`).
fn directory_cases() -> Vec<&'static str> {
    let one_file = |c: &&str| fixtures().join(c).join("model.safetensors").is_file();
    CASES.iter().copied().filter(one_file).collect()
}

proptest! {
    #![proptest_config(support::seeded_config(file!(), support::proptest_cases(48)))]

    #[test]
    fn random_linears_on_every_isa_equal_the_scalar_reference(case in 0usize..10, seed in any::<u64>()) {
        let cases = directory_cases();
        check_random(cases[case % cases.len()], seed);
    }
}

#[test]
fn every_scheme_is_drawn_by_the_random_test() {
    // Each directory fixture once, so no scheme depends on the proptest's draws.
    for (i, case) in directory_cases().into_iter().enumerate() {
        check_random(case, 0x5eed + i as u64);
    }
}

/// The generated driver's AVX-512 VBMI fast path for 4-bit linears
/// (`dq_runtime::linear::wide`): its unit tests there skip on a CPU without it;
/// under `DQ_REQUIRE_ALL_PATHS=1` (CI) that is a failure, here.
#[test]
fn the_wide_linear_path_runs_here() {
    #[cfg(target_arch = "x86_64")]
    let runs =
        dq::arch::Isa::Avx512.available() && std::arch::is_x86_feature_detected!("avx512vbmi");
    #[cfg(not(target_arch = "x86_64"))]
    let runs = false;
    if !runs {
        support::path_unavailable("linear::wide fast path (AVX-512 VBMI): its unit tests skipped");
    }
}
