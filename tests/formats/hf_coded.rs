//! bitsandbytes (NF4/FP4, double quantization, LLM.int8), MLX affine and gpt-oss
//! MXFP4 checkpoints: every backend (the JIT included), f32/f16/bf16, bit for bit against the values the
//! libraries themselves produced (`scripts/make_hf_fixtures_b.py`); mutations of each
//! layout (nibble order, scale convention) fail; malformed checkpoints are one-line
//! errors.

use crate::support;
use dq::arch::Isa;
use dq::formats::hf::{
    BnbType, Checkpoint, Dtype, HfError, QuantConfig, QuantLinear, Scheme, TensorRef,
};
use dq::linear::ScaleType;
use dq::linear::coded::{BitOrder, Coded, Codes, Post, Scale};
use dq::{Backend, Options};
use half::{bf16, f16};
use support::hf::{
    DOWN, Q, Tensor, UP, copy_case, expected, fixtures, read_tensors, write_tensors,
};

const EXPERTS: &str = "model.layers.0.mlp.experts.";

/// A fixture: folder, scheme, and `(output name, output shape)` of each linear.
struct Case {
    path: &'static str,
    scheme: Scheme,
    outputs: &'static [(&'static str, &'static [usize])],
}

const NF4: Scheme = Scheme::Bnb4 {
    kind: BnbType::Nf4,
    nested: false,
};
const NF4_DQ: Scheme = Scheme::Bnb4 {
    kind: BnbType::Nf4,
    nested: true,
};
const FP4: Scheme = Scheme::Bnb4 {
    kind: BnbType::Fp4,
    nested: false,
};
const FP4_DQ: Scheme = Scheme::Bnb4 {
    kind: BnbType::Fp4,
    nested: true,
};

#[rustfmt::skip]
const CASES: &[Case] = &[
    // K = 96: blocks of 64 of the flattened weight straddle rows.
    Case { path: "bnb-nf4", scheme: NF4,
           outputs: &[("model.layers.0.mlp.up_proj.weight", &[32, 96]), ("model.layers.0.mlp.down_proj.weight", &[16, 64])] },
    // 320 blocks: two nested blocks of 256, the last one short.
    Case { path: "bnb-nf4-double", scheme: NF4_DQ,
           outputs: &[("model.layers.0.mlp.up_proj.weight", &[160, 128]), ("model.layers.0.self_attn.q_proj.weight", &[32, 96])] },
    Case { path: "bnb-fp4", scheme: FP4, outputs: &[("model.layers.0.mlp.up_proj.weight", &[32, 96])] },
    Case { path: "bnb-fp4-double", scheme: FP4_DQ, outputs: &[("model.layers.0.mlp.up_proj.weight", &[160, 128])] },
    Case { path: "bnb-int8", scheme: Scheme::Bnb8,
           outputs: &[("model.layers.0.mlp.up_proj.weight", &[32, 96]), ("model.layers.0.mlp.down_proj.weight", &[24, 40])] },
    Case { path: "mlx-4bit-g64", scheme: Scheme::Mlx { bits: 4 },
           outputs: &[("model.layers.0.mlp.up_proj.weight", &[16, 128]), ("model.layers.0.mlp.down_proj.weight", &[8, 64])] },
    Case { path: "mlx-4bit-g32-bf16", scheme: Scheme::Mlx { bits: 4 }, outputs: &[("model.layers.0.mlp.up_proj.weight", &[16, 96])] },
    Case { path: "mlx-8bit-g64-f32", scheme: Scheme::Mlx { bits: 8 }, outputs: &[("model.layers.0.mlp.up_proj.weight", &[8, 128])] },
    Case { path: "mlx-2bit-g32", scheme: Scheme::Mlx { bits: 2 }, outputs: &[("model.layers.0.mlp.up_proj.weight", &[8, 64])] },
    Case { path: "mlx-3bit-g32-bf16", scheme: Scheme::Mlx { bits: 3 }, outputs: &[("model.layers.0.mlp.up_proj.weight", &[8, 96])] },
    Case { path: "mlx-6bit-g64", scheme: Scheme::Mlx { bits: 6 }, outputs: &[("model.layers.0.mlp.up_proj.weight", &[8, 128])] },
    // Output [E, K, N], as transformers loads it.
    Case { path: "mxfp4-gpt-oss", scheme: Scheme::Mxfp4,
           outputs: &[("model.layers.0.mlp.experts.down_proj", &[2, 96, 64]), ("model.layers.0.mlp.experts.gate_up_proj", &[2, 64, 48])] },
];

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

fn assert_bits(got: &[Vec<u32>; 3], want: &[Vec<u32>; 3], what: &str) {
    for (t, name) in ["f32", "f16", "bf16"].iter().enumerate() {
        if let Some(i) = (0..want[t].len()).find(|&i| got[t][i] != want[t][i]) {
            panic!(
                "{what} {name}: element {i} is 0x{:08x}, the library gives 0x{:08x}",
                got[t][i], want[t][i]
            );
        }
    }
}

/// The linear through `dequantize` on `backend` with 3 threads, as bits per type.
fn dequantize(l: &QuantLinear<'_>, backend: Backend) -> Result<[Vec<u32>; 3], HfError> {
    let opts = Options::new().with_backend(backend).with_threads(3);
    let len = l.n() * l.k();
    let mut a = vec![0f32; len];
    l.dequantize(&mut a, &opts)?;
    let mut b = vec![f16::ZERO; len];
    l.dequantize(&mut b, &opts)?;
    let mut c = vec![bf16::ZERO; len];
    l.dequantize(&mut c, &opts)?;
    Ok([
        a.iter().map(|y| y.to_bits()).collect(),
        b.iter().map(|y| u32::from(y.to_bits())).collect(),
        c.iter().map(|y| u32::from(y.to_bits())).collect(),
    ])
}

/// The linear's declarations run on `isa`, rows in two uneven parts per plan.
fn run_plans(l: &QuantLinear<'_>, isa: Isa) -> Option<[Vec<u32>; 3]> {
    if !isa.available() {
        support::isa_unavailable(isa, &format!("coded plan on {}", isa.name()));
        return None;
    }
    let mut out: [Vec<u32>; 3] = Default::default();
    for plan in l.coded_plans().unwrap() {
        let (n, k) = (plan.n(), plan.k());
        for rows in [0..n / 3, n / 3..n] {
            let len = rows.len() * k;
            let mut a = vec![0f32; len];
            plan.run_on(isa, rows.clone(), &mut a).unwrap();
            let mut b = vec![f16::ZERO; len];
            plan.run_on(isa, rows.clone(), &mut b).unwrap();
            let mut c = vec![bf16::ZERO; len];
            plan.run_on(isa, rows, &mut c).unwrap();
            out[0].extend(a.iter().map(|y| y.to_bits()));
            out[1].extend(b.iter().map(|y| u32::from(y.to_bits())));
            out[2].extend(c.iter().map(|y| u32::from(y.to_bits())));
        }
    }
    Some(out)
}

#[test]
fn every_backend_equals_the_library_on_every_fixture() {
    for case in CASES {
        let dir = fixtures().join(case.path);
        let ckpt = Checkpoint::open(&dir).unwrap();
        let linears: Vec<QuantLinear<'_>> = ckpt.linears().collect();
        let mut names: Vec<String> = linears.iter().map(|l| l.weight_name()).collect();
        names.sort();
        let mut want_names: Vec<String> = case.outputs.iter().map(|o| o.0.to_owned()).collect();
        want_names.sort();
        assert_eq!(names, want_names, "{}", case.path);
        for l in &linears {
            let what = format!("{} {}", case.path, l.weight_name());
            assert_eq!(l.scheme(), case.scheme, "{what}");
            let shape = case
                .outputs
                .iter()
                .find(|o| o.0 == l.weight_name())
                .unwrap()
                .1;
            assert_eq!(l.shape(), shape, "{what}");
            assert_eq!(l.n() * l.k(), shape.iter().product::<usize>(), "{what}");
            let want = rounded(&expected(&dir, &l.weight_name()));
            assert_bits(
                &dequantize(l, Backend::Reference).unwrap(),
                &want,
                &format!("{what} reference"),
            );
            assert_bits(
                &dequantize(l, Backend::Generated).unwrap(),
                &want,
                &format!("{what} generated"),
            );
            assert_bits(
                &dequantize(l, Backend::Auto).unwrap(),
                &want,
                &format!("{what} auto"),
            );
            for isa in Isa::ALL {
                if let Some(got) = run_plans(l, isa) {
                    assert_bits(&got, &want, &format!("{what} {}", isa.name()));
                }
            }
            if support::in_build("jit") {
                assert_bits(
                    &dequantize(l, Backend::Jit).unwrap(),
                    &want,
                    &format!("{what} jit"),
                );
            } else {
                let e = dequantize(l, Backend::Jit).unwrap_err();
                assert!(matches!(e, HfError::Jit { .. }), "{what}: {e}");
            }
        }
        // Everything else is left as it is, and no linear tensor is listed twice.
        assert!(
            ckpt.others().any(|t| t.name() == "model.norm.weight"),
            "{}",
            case.path
        );
        for t in ckpt.others() {
            assert!(
                !t.name().contains("absmax") && !t.name().ends_with("SCB"),
                "{}",
                t.name()
            );
            assert!(
                !t.name().ends_with("_blocks") && !t.name().ends_with(".biases"),
                "{}",
                t.name()
            );
        }
    }
}

#[test]
fn configs_name_the_families() {
    let config = |p: &str| {
        *Checkpoint::open(fixtures().join(p))
            .unwrap()
            .config()
            .unwrap()
    };
    assert_eq!(config("bnb-nf4"), QuantConfig::Bitsandbytes { bits: 4 });
    assert_eq!(config("bnb-int8"), QuantConfig::Bitsandbytes { bits: 8 });
    assert_eq!(
        config("mlx-3bit-g32-bf16"),
        QuantConfig::Mlx {
            bits: 3,
            group_size: 32
        }
    );
    assert_eq!(config("mxfp4-gpt-oss"), QuantConfig::Mxfp4);
}

/// A declaration over the fixture's tensors with one part of its layout changed.
fn mutated<'a>(
    l: &QuantLinear<'a>,
    order: BitOrder,
    base: &[f32],
    scale: Scale<'a>,
    post: Post<'a>,
    strides: (usize, usize, usize),
    group: usize,
) -> Vec<u32> {
    let bits = l.scheme().bits();
    let codes = Codes {
        bytes: l.packed().data(),
        bits,
        order,
    };
    let rows = l.n();
    let plan = Coded::new(rows, l.k(), codes, strides, group, base, scale, post).unwrap();
    run_both(&plan)
}

/// The declaration's f32 bits on the generated driver, checked equal on the JIT
/// (so each mutation reaches both).
fn run_both(plan: &Coded<'_>) -> Vec<u32> {
    let len = plan.n() * plan.k();
    let mut out = vec![0f32; len];
    plan.run(0..plan.n(), &mut out).unwrap();
    let bits: Vec<u32> = out.iter().map(|y| y.to_bits()).collect();
    #[cfg(feature = "jit")]
    {
        let mut jit = vec![0f32; len];
        dq::jit::coded().run(plan, 0..plan.n(), &mut jit).unwrap();
        let jit: Vec<u32> = jit.iter().map(|y| y.to_bits()).collect();
        assert!(jit == bits, "the JIT differs from the driver");
    }
    bits
}

fn f32s(t: TensorRef<'_>) -> Vec<f32> {
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn floats<'a>(t: TensorRef<'a>) -> Scale<'a> {
    let dtype = match t.dtype() {
        Dtype::F16 => ScaleType::F16,
        Dtype::BF16 => ScaleType::BF16,
        _ => ScaleType::F32,
    };
    Scale::Floats {
        bytes: t.data(),
        dtype,
    }
}

#[test]
fn mutated_layouts_fail_against_the_library() {
    // bitsandbytes: the right layout matches; the low nibble first, or another block
    // size, do not.
    let dir = fixtures().join("bnb-nf4");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let book = f32s(ckpt.tensor(&format!("{UP}.weight.quant_map")).unwrap());
    let want = expected(&dir, &l.weight_name());
    let k = l.k();
    let run = |order, strides, group| {
        mutated(
            &l,
            order,
            &book,
            floats(l.scales()),
            Post::None,
            strides,
            group,
        )
    };
    assert_eq!(run(BitOrder::HighNibbleFirst, (0, k, 1), 64), want);
    assert_ne!(run(BitOrder::Lsb, (0, k, 1), 64), want, "low nibble first");
    // A wrong block size reads the wrong absmax.
    assert_ne!(
        run(BitOrder::HighNibbleFirst, (0, k, 1), 128),
        want,
        "blocks of 128"
    );

    // Double quantization: without the offset the values move.
    let dir = fixtures().join("bnb-nf4-double");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let want = expected(&dir, &l.weight_name());
    let t = |f: &str| ckpt.tensor(&format!("{UP}.weight.{f}")).unwrap();
    let book = f32s(t("quant_map"));
    let nested = |offset| Scale::Nested {
        codes: t("absmax").data(),
        book: t("nested_quant_map").data(),
        absmax: t("nested_absmax").data(),
        block: 256,
        offset,
    };
    let state: serde_json::Value =
        serde_json::from_slice(t("quant_state.bitsandbytes__nf4").data()).unwrap();
    let offset = state["nested_offset"].as_f64().unwrap() as f32;
    let strides = (0, l.k(), 1);
    let run = |scale| {
        mutated(
            &l,
            BitOrder::HighNibbleFirst,
            &book,
            scale,
            Post::None,
            strides,
            64,
        )
    };
    assert_eq!(run(nested(offset)), want);
    assert_ne!(run(nested(0.0)), want, "offset left out");

    // LLM.int8: `(q · SCB) / 127` as one multiply by SCB / 127 rounds differently.
    let dir = fixtures().join("bnb-int8");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let want = expected(&dir, &l.weight_name());
    let base: Vec<f32> = (0..=255u8).map(|q| f32::from(q as i8)).collect();
    let k = l.k();
    let inv = 7.874_016e-3f32;
    let run = |scale, post| mutated(&l, BitOrder::Lsb, &base, scale, post, (0, k, 1), k);
    assert_eq!(run(floats(l.scales()), Post::Mul(inv)), want);
    let folded: Vec<u8> = f32s(l.scales())
        .iter()
        .flat_map(|s| (s * inv).to_le_bytes())
        .collect();
    let folded = Scale::Floats {
        bytes: &folded,
        dtype: ScaleType::F32,
    };
    assert_ne!(run(folded, Post::None), want, "scale folded with 1/127");

    // MLX with bf16 scales: its arithmetic rounds to bf16 after the multiply and the
    // add; in f32 (one rounding at the end) the values differ.
    let dir = fixtures().join("mlx-4bit-g32-bf16");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let l = ckpt.linear(UP).unwrap();
    let want = expected(&dir, &l.weight_name());
    let biases = ckpt.tensor(&format!("{UP}.biases")).unwrap();
    let base: Vec<f32> = (0..16).map(|q| q as f32).collect();
    let k = l.k();
    let run = |order, scales: Scale<'_>, biases: &[u8], dtype| {
        let post = Post::Add {
            bytes: biases,
            dtype,
        };
        mutated(&l, order, &base, scales, post, (0, k, 1), 32)
    };
    assert_eq!(
        run(
            BitOrder::Lsb,
            floats(l.scales()),
            biases.data(),
            ScaleType::BF16
        ),
        want
    );
    // The same values widened to f32, the arithmetic in f32.
    let wide = |t: TensorRef<'_>| -> Vec<u8> {
        let v = t
            .data()
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32());
        v.flat_map(f32::to_le_bytes).collect()
    };
    let (s32, b32) = (wide(l.scales()), wide(biases));
    let s32 = Scale::Floats {
        bytes: &s32,
        dtype: ScaleType::F32,
    };
    let f32_post = run(BitOrder::Lsb, s32, &b32, ScaleType::F32);
    let differ = f32_post
        .iter()
        .zip(&want)
        .any(|(a, b)| bf16::from_f32(f32::from_bits(*a)) != bf16::from_f32(f32::from_bits(*b)));
    assert!(differ, "MLX's bf16 arithmetic");
    assert_ne!(
        run(
            BitOrder::HighNibbleFirst,
            floats(l.scales()),
            biases.data(),
            ScaleType::BF16
        ),
        want,
        "high nibble first"
    );

    // MXFP4: low nibble first, 2^(e - 127); high first or 2^(e - 128) fail.
    let dir = fixtures().join("mxfp4-gpt-oss");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let l = ckpt.linear(&format!("{EXPERTS}down_proj")).unwrap();
    let want = expected(&dir, &l.weight_name());
    let plans = l.coded_plans().unwrap();
    assert_eq!(plans.len(), 2);
    let e2m1: Vec<f32> = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
        .iter()
        .chain(&[-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
        .copied()
        .collect();
    let (kk, rows) = (96, 64);
    let pow2 = Scale::Pow2 {
        bytes: l.scales().data(),
    };
    let one = |order, base: &[f32]| {
        let codes = Codes {
            bytes: l.packed().data(),
            bits: 4,
            order,
        };
        let plan = Coded::new(kk, rows, codes, (0, 1, kk), 32, base, pow2, Post::None).unwrap();
        run_both(&plan)
    };
    assert_eq!(one(BitOrder::Lsb, &e2m1), want[..kk * rows]);
    assert_ne!(
        one(BitOrder::HighNibbleFirst, &e2m1),
        want[..kk * rows],
        "high nibble first"
    );
    let halved: Vec<f32> = e2m1.iter().map(|v| v / 2.0).collect();
    assert_ne!(
        one(BitOrder::Lsb, &halved),
        want[..kk * rows],
        "2^(e - 128)"
    );
}

/// Edits `model.safetensors` of a copy of `case` and opens it.
fn open_edited(case: &str, edit: impl FnOnce(&mut Vec<Tensor>)) -> Result<Checkpoint, HfError> {
    let dir = copy_case(case);
    let file = dir.path().join("model.safetensors");
    let (mut tensors, metadata) = read_tensors(&file);
    edit(&mut tensors);
    write_tensors(&file, &tensors, metadata);
    Checkpoint::open(dir.path())
}

fn err(r: Result<Checkpoint, HfError>) -> String {
    match r {
        Ok(_) => panic!("opened"),
        Err(e) => {
            let s = e.to_string();
            assert!(!s.contains('\n'), "one line: {s}");
            s
        }
    }
}

fn set(
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
) -> impl FnOnce(&mut Vec<Tensor>) {
    move |t| {
        t.retain(|x| x.0 != name);
        t.push((name, dtype, shape, bytes));
    }
}

#[test]
fn malformed_checkpoints_are_one_line_errors() {
    let state = format!("{UP}.weight.quant_state.bitsandbytes__nf4");
    let e = err(open_edited(
        "bnb-nf4",
        set(state.clone(), Dtype::U8, vec![3], b"{\"q".to_vec()),
    ));
    assert!(e.contains(&state) && e.contains("not JSON"), "{e}");
    let json = br#"{"quant_type": "fp4", "blocksize": 64, "shape": [32, 96], "dtype": "float32"}"#;
    let e = err(open_edited(
        "bnb-nf4",
        set(state.clone(), Dtype::U8, vec![json.len()], json.to_vec()),
    ));
    assert!(e.contains("quant_type"), "{e}");
    let json = br#"{"quant_type": "nf4", "blocksize": 0, "shape": [32, 96]}"#;
    let e = err(open_edited(
        "bnb-nf4",
        set(state.clone(), Dtype::U8, vec![json.len()], json.to_vec()),
    ));
    assert!(e.contains("blocksize"), "{e}");
    // Scales that do not cover the weight.
    let absmax = format!("{UP}.weight.absmax");
    let e = err(open_edited(
        "bnb-nf4",
        set(absmax.clone(), Dtype::F32, vec![47], vec![0; 188]),
    ));
    assert!(e.contains(&absmax) && e.contains("[48]"), "{e}");
    let nested = format!("{UP}.weight.nested_absmax");
    let e = err(open_edited(
        "bnb-nf4-double",
        set(nested.clone(), Dtype::F32, vec![1], vec![0; 4]),
    ));
    assert!(e.contains(&nested), "{e}");
    let e = err(open_edited("bnb-nf4-double", move |t| {
        t.retain(|x| !x.0.ends_with("up_proj.weight.nested_quant_map"))
    }));
    assert!(e.contains("nested_quant_map"), "{e}");
    let scb = format!("{DOWN}.SCB");
    let e = err(open_edited(
        "bnb-int8",
        set(scb.clone(), Dtype::F16, vec![24], vec![0; 48]),
    ));
    assert!(e.contains(&scb) && e.contains("F16"), "{e}");
    let e = err(open_edited(
        "mlx-4bit-g64",
        set(
            format!("{UP}.weight"),
            Dtype::U32,
            vec![16, 15],
            vec![0; 960],
        ),
    ));
    assert!(e.contains(&format!("{UP}.weight")), "{e}");
    let e = err(open_edited(
        "mlx-4bit-g64",
        set(
            format!("{UP}.biases"),
            Dtype::BF16,
            vec![16, 2],
            vec![0; 64],
        ),
    ));
    assert!(e.contains("biases"), "{e}");
    let e = err(open_edited("mlx-4bit-g64", move |t| {
        t.retain(|x| x.0 != format!("{DOWN}.scales"))
    }));
    assert!(e.contains(&format!("{DOWN}.scales")), "{e}");
    // Tensors of a linear whose anchor is gone.
    let e = err(open_edited("bnb-nf4", move |t| {
        t.retain(|x| !x.0.starts_with(&format!("{DOWN}.weight.quant_state")))
    }));
    assert!(e.contains("quant_state"), "{e}");
    let scales = format!("{EXPERTS}down_proj_scales");
    let e = err(open_edited(
        "mxfp4-gpt-oss",
        set(scales.clone(), Dtype::U8, vec![2, 64, 2], vec![0; 256]),
    ));
    assert!(e.contains(&scales) && e.contains("[2, 64, 3]"), "{e}");
    let e = err(open_edited("mxfp4-gpt-oss", move |t| {
        t.retain(|x| x.0 != format!("{EXPERTS}down_proj_scales"))
    }));
    assert!(e.contains("down_proj_scales"), "{e}");
}

#[test]
fn bad_configs_are_reported() {
    let edit = |case: &str, key: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let dir = copy_case(case);
        let file = dir.path().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        f(&mut config[key]);
        std::fs::write(&file, config.to_string()).unwrap();
        err(Checkpoint::open(dir.path()))
    };
    let e = edit("bnb-nf4", "quantization_config", &|q| {
        q["load_in_4bit"] = false.into();
        q["_load_in_4bit"] = false.into();
    });
    assert!(e.contains("load_in_4bit"), "{e}");
    let e = edit("bnb-nf4", "quantization_config", &|q| {
        q["bnb_4bit_quant_storage"] = "bfloat16".into()
    });
    assert!(e.contains("bnb_4bit_quant_storage"), "{e}");
    let e = edit("mlx-4bit-g64", "quantization", &|q| q["bits"] = 5.into());
    assert!(e.contains("5-bit"), "{e}");
    let e = edit("mlx-4bit-g64", "quantization", &|q| {
        q["mode"] = "mxfp4".into()
    });
    assert!(e.contains("mode"), "{e}");
    let e = edit("mlx-4bit-g64", "quantization", &|q| {
        q[Q] = serde_json::json!({"bits": 8, "group_size": 64})
    });
    assert!(e.contains("per-layer"), "{e}");
    let e = edit("mxfp4-gpt-oss", "quantization_config", &|q| {
        q["quant_method"] = "mxfp5".into()
    });
    assert!(e.contains("mxfp5"), "{e}");
}
