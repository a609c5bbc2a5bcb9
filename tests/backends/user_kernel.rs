//! `#[dequant_kernel]` used as a user crate would: through `dq::dequant_kernel`,
//! with formulas of its own, checked bit for bit against the reference
//! interpreting the same IR, on every ISA this machine has. Also the trybuild
//! UI tests (`tests/ui`) of every diagnostic, and of the execution API refusing,
//! in safe code, to run overlapping ranges of one job at once.

use crate::support;
use dq::case::{Case, OwnedTensor};
use dq::kernel::{FormulaIr, GeneratedKernel, Kernel, Node, Reference};
use dq::{
    AxesDequantize, DType, DynamicDequantize, Op, Plan, Tensor, TensorDesc, TensorMut,
    dequant_kernel,
};
use support::{Rng, pinned};

/// A fused variant a user might want: dequantize, then ReLU.
#[dequant_kernel(src = [s4, u4], zps = [none, u4], dst = [bf16])]
fn dequantize_relu(q: int, z: int, s: float) {
    max((q - z) * s, 0.0)
}

/// Every DSL feature at once: `let`, `z - q`, unary minus, literals, abs, min, +.
#[dequant_kernel(src = [s8, u8], zps = [none, s8, s32], dst = [f32, f16]; src = [s32], zps = [s32], dst = [f64])]
pub fn everything(q: int, z: int, s: float) {
    let d = z - q;
    let y = -(d * s) + 0.5;
    min(abs(y), 3.0) - q * 0.25
}

fn random_scales(rng: &mut Rng, t: DType, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let v = ((rng.next_u64() % 2001) as f32 - 1000.0) / 256.0;
            let v = if i % 17 == 3 { f32::NAN } else { v };
            match t {
                DType::F32 => v.to_le_bytes().to_vec(),
                DType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                DType::BF16 => half::bf16::from_f32(v).to_le_bytes().to_vec(),
                _ => (v as f64).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

/// Runs `k` (every ISA) and the reference on `formula` over random data; same bits.
fn check(
    k: &GeneratedKernel,
    op: &Op,
    key: (DType, Option<DType>, DType),
    shape: &[usize],
    ss: &[usize],
) {
    let mut rng = Rng::new(99 + shape.iter().sum::<usize>() as u64);
    let (s_t, z_t, d_t) = key;
    let n: usize = shape.iter().product();
    let sn: usize = ss.iter().product();
    let src_b: Vec<u8> = (0..s_t.bytes_for(n).unwrap())
        .map(|_| rng.next_u64() as u8)
        .collect();
    let sc_b = random_scales(&mut rng, d_t, sn);
    let zp_b: Option<Vec<u8>> = z_t.map(|z| {
        let mut b: Vec<u8> = (0..z.bytes_for(sn).unwrap())
            .map(|_| rng.next_u64() as u8)
            .collect();
        if z == DType::S32 {
            b[..4].copy_from_slice(&i32::MIN.to_le_bytes()); // q - z leaves i32
        }
        b
    });
    let case = Case {
        op: op.clone(),
        src: OwnedTensor::new(TensorDesc::new(s_t, shape), src_b),
        scales: Some(OwnedTensor::new(TensorDesc::new(d_t, ss), sc_b)),
        zps: z_t.map(|z| OwnedTensor::new(TensorDesc::new(z, ss), zp_b.unwrap())),
        dst: OwnedTensor::new(
            TensorDesc::new(d_t, shape),
            vec![0u8; d_t.bytes_for(n).unwrap()],
        ),
    };
    let plan = case.plan().unwrap();
    let run = |kernel: &dyn Kernel| {
        let mut buf = case.dst.data.clone();
        case.with_job(&plan, &mut buf, |job| {
            job.run_range(kernel, 0..n / 3).unwrap();
            job.run_range(kernel, n / 3..n).unwrap();
        })
        .unwrap();
        buf
    };
    let want = run(&Reference { formula: k.ir() });
    for (isa, p) in pinned(k) {
        assert_eq!(
            run(&p),
            want,
            "{} {key:?} {shape:?} on {}",
            k.ir().name,
            isa.name()
        );
    }
}

#[test]
fn relu_ir_is_max_of_the_standard_formula_and_zero() {
    let ir: &FormulaIr = dequantize_relu.ir();
    assert_eq!(ir.name, "dequantize_relu");
    let mut nodes = dq::kernel::STANDARD.nodes.to_vec();
    nodes.push(Node::Lit(0f64.to_bits()));
    nodes.push(Node::Max(5, 6));
    assert_eq!(ir.nodes, nodes);
    assert_eq!(dequantize_relu.table().len(), 4);
}

#[test]
fn relu_matches_the_reference_on_every_isa() {
    for s in [DType::S4, DType::U4] {
        for z in [None, Some(DType::U4)] {
            for (op, ss) in [
                (DynamicDequantize::per_group(vec![1, 32]).into(), vec![7, 5]),
                (DynamicDequantize::per_channel(1).into(), vec![131]),
                (DynamicDequantize::per_tensor().into(), vec![1]),
            ] {
                let shape = [7, 131];
                let op: Op = op;
                let ss = if matches!(op, Op::Dynamic(ref d) if d.qtype == dq::Qtype::PerGroup) {
                    vec![7, 5]
                } else {
                    ss
                };
                check(&dequantize_relu, &op, (s, z, DType::BF16), &shape, &ss);
            }
        }
    }
}

#[test]
fn relu_output_is_never_negative() {
    let src = Tensor::from_bytes(DType::S4, &[64], &[0x9f; 32]);
    let half_scale = [half::bf16::from_f32(0.5)];
    let sc = Tensor::from_slice(&half_scale, &[1]);
    let mut out = [half::bf16::ZERO; 64];
    let mut dst = TensorMut::from_slice(&mut out, &[64]);
    let op: Op = DynamicDequantize::per_tensor().into();
    let plan = Plan::new(&op, &src.desc, Some(&sc.desc), None, &dst.desc).unwrap();
    plan.bind(&src, Some(&sc), None, &mut dst)
        .unwrap()
        .run(&dequantize_relu)
        .unwrap();
    // Nibbles 0xf = -1 -> relu 0, 0x9 = -7 -> 0.
    assert!(out.iter().all(|v| v.to_bits() == 0), "{out:?}");
}

#[test]
fn every_dsl_feature_matches_the_reference_on_every_isa() {
    for e in everything.table() {
        let (s, z, d) = e.key();
        if s == DType::S32 {
            let op: Op = AxesDequantize::new(vec![1]).into();
            check(&everything, &op, e.key(), &[3, 45], &[45]);
        } else {
            let op: Op = DynamicDequantize::per_channel(-1).into();
            check(&everything, &op, (s, z, d), &[5, 77], &[77]);
        }
    }
}

/// The macro's diagnostics, and the overlapping runs the execution API rejects.
#[test]
fn diagnostics() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    // The JIT's API (cargo feature `jit`): specs cannot be forged or retargeted.
    #[cfg(feature = "jit")]
    t.compile_fail("tests/ui/jit/*.rs");
}

/// A diagnostic's UI case and rendered fragment, or why it cannot be emitted.
type UiCase = Result<(&'static str, &'static str), &'static str>;

/// Every diagnostic `#[dequant_kernel]` can emit, by a fragment of its message in
/// dq-macros' source: the UI case showing it and a fragment of the rendered error
/// (`Err`: unreachable, with why).
const DIAGNOSTICS: &[(&str, UiCase)] = &[
    (
        "the dtype sets list a float src",
        Ok((
            "int_value_with_float_src",
            "the dtype sets list a float src (f8_e4m3, f8_e5m2, f4_e2m1)",
        )),
    ),
    (
        "is a float src's value, but the dtype sets list an integer src",
        Ok((
            "float_value_with_int_src",
            "`q: float` is a float src's value, but the dtype sets list an integer src",
        )),
    ),
    (
        "expected dtype sets",
        Ok(("no_dtype_sets", "expected dtype sets")),
    ),
    ("unknown key `", Ok(("unknown_key", "unknown key `zp`"))),
    (
        "duplicate key `",
        Ok(("duplicate_key", "duplicate key `src`")),
    ),
    ("lists no dtype", Ok(("empty_list", "`zps` lists no dtype"))),
    (
        "unknown dtype `",
        Ok(("unknown_dtype", "unknown dtype `i8`")),
    ),
    (
        "is not allowed in `",
        Ok(("dtype_not_allowed_in_key", "`f32` is not allowed in `src`")),
    ),
    (
        "duplicate dtype `",
        Ok(("duplicate", "duplicate dtype `s8` in `src`")),
    ),
    (
        "missing `{key} = [...]`",
        Ok(("missing_key", "missing `dst = [...]`")),
    ),
    (
        "no op allows the combination",
        Ok(("bad_combination", "no op allows the combination src = s32")),
    ),
    (
        "duplicate combination",
        Ok(("duplicate", "duplicate combination src = s8")),
    ),
    (
        "expected 3 parameters",
        Ok(("wrong_param_count", "expected 3 parameters")),
    ),
    (
        "duplicate parameter `",
        Ok(("duplicate_parameter", "duplicate parameter `q`")),
    ),
    (
        "the DSL fixes parameter types",
        Ok(("parameter_type", "write `q: int`")),
    ),
    ("the body is empty", Ok(("empty_body", "the body is empty"))),
    (
        "the body must end with an expression",
        Ok((
            "ends_with_statement",
            "the body must end with an expression",
        )),
    ),
    (
        "integer-only formula",
        Ok(("integer_only", "integer-only formula")),
    ),
    (
        "unsupported statement",
        Ok(("unsupported_statement", "unsupported statement")),
    ),
    (
        "must name one variable",
        Ok(("let_pattern", "a `let` binding must name one variable")),
    ),
    (
        "needs a value",
        Ok(("let_without_value", "a `let` binding needs a value")),
    ),
    (
        "must be `let name = expr;`",
        Ok(("let_mut", "a `let` binding must be `let name = expr;`")),
    ),
    ("unknown name `", Ok(("unknown_name", "unknown name `zp`"))),
    (
        "unsupported path",
        Ok(("unsupported_path", "unsupported path")),
    ),
    (
        "self.bad(f, err.to_string())",
        Err("a float literal the lexer accepts always parses as f64 (too large: inf)"),
    ),
    (
        "without a suffix",
        Ok((
            "float_literal_suffix",
            "write float literals without a suffix",
        )),
    ),
    (
        "integer literal `",
        Ok((
            "integer_literal",
            "integer literal `2`: write a float literal such as `2.0`",
        )),
    ),
    (
        "unsupported literal",
        Ok(("unsupported_literal", "unsupported literal")),
    ),
    (
        "unsupported operator; ",
        Ok(("unsupported_unary_operator", "unsupported operator; ")),
    ),
    (
        "unsupported expression",
        Ok(("several_mistakes", "unsupported expression")),
    ),
    (
        "unsupported operator `",
        Ok(("unsupported_operator", "unsupported operator `/`")),
    ),
    (
        "unsupported function `",
        Ok(("unsupported_function", "unsupported function `sqrt`")),
    ),
    (
        "argument{}, found",
        Ok(("function_arity", "`min` takes 2 arguments, found 1")),
    ),
];

/// [`DIAGNOSTICS`] lists every diagnostic site of dq-macros (a new one fails this
/// until it has a UI case), and each UI case's `.stderr` shows its message.
#[test]
fn every_macro_diagnostic_has_a_ui_case() {
    let src: String = ["ast.rs", "expand.rs", "lib.rs", "validate.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(format!("dq-macros/src/{f}")).unwrap())
        .collect();
    // The sites: `errors.at(..)`, `self.bad(..)` and `syn::Error::new(..)` calls,
    // less the one `.at(` inside `bad` itself.
    let sites = [".at(", ".bad(", "syn::Error::new("]
        .iter()
        .map(|p| src.matches(p).count())
        .sum::<usize>()
        - 1;
    assert_eq!(
        sites,
        DIAGNOSTICS.len(),
        "a diagnostic site without an entry"
    );
    for (fragment, case) in DIAGNOSTICS {
        assert_eq!(
            src.matches(fragment).count(),
            1,
            "{fragment:?} in dq-macros/src"
        );
        let Ok((file, shown)) = case else { continue };
        let stderr = std::fs::read_to_string(format!("tests/ui/{file}.stderr")).unwrap();
        assert!(stderr.contains(shown), "{file}.stderr lacks {shown:?}");
        assert!(
            stderr.contains(&format!("--> tests/ui/{file}.rs:")),
            "{file}: span"
        );
    }
}
