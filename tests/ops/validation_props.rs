//! Hostile descriptors never panic: arbitrary ops, dtypes (invalid ones too), shapes
//! up to overflow sizes, strides, wrong scale/zps shapes and buffers one byte short go
//! through `Plan::new`, `bind` and every backend. Each call ends in an `Err` with dst
//! untouched (it is filled with a sentinel and checked), or in an `Ok` whose bytes the
//! reference reproduces. A panic is caught and turned into a failure naming the input.
//!
//! Cases per property: `DQ_PROPTEST_CASES` (default 750).
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::support;
use dq::{
    AxesDequantize, Backend, DType, Dequantize, DynamicDequantize, Op, Options, Plan, Qtype, Role,
    Tensor, TensorDesc, TensorMut,
};
use proptest::prelude::*;
use support::cases::case_strategy;
use support::{Rng, all_variants, proptest_cases, reference};

/// Largest buffer a case may allocate; views needing more get a small buffer.
const CAP: usize = 1 << 18;
const SENTINEL: u8 = 0xa5;

/// One hostile call.
#[derive(Clone, Debug)]
struct Input {
    op: Op,
    src: TensorDesc,
    scales: Option<TensorDesc>,
    zps: Option<TensorDesc>,
    dst: TensorDesc,
    /// Descriptors handed to `bind` when they differ from the plan's.
    bind_override: Option<(usize, TensorDesc)>,
    /// Per buffer (src, scales, zps, dst): `None` = exact size, else a byte delta.
    len_delta: [i8; 4],
    threads: usize,
    backend: Backend,
    seed: u64,
}

fn dtype_any() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

fn dim_any() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..5,
        4 => 0usize..40,
        1 => Just(usize::MAX),
        1 => Just(usize::MAX / 2 + 1),
        1 => Just(1usize << 32),
        1 => Just((1usize << 61) + 1),
        1 => any::<usize>(),
    ]
}

fn shape_any() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim_any(), 0..=9)
}

fn strides_any() -> impl Strategy<Value = Option<Vec<usize>>> {
    prop_oneof![
        2 => Just(None),
        1 => prop::option::of(prop::collection::vec(dim_any(), 0..=9)),
    ]
}

fn desc_any() -> impl Strategy<Value = TensorDesc> {
    (dtype_any(), shape_any(), strides_any()).prop_map(|(dtype, shape, strides)| TensorDesc {
        dtype,
        shape,
        strides,
    })
}

fn i64_any() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -10i64..10,
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => Just(i32::MAX as i64 + 1),
        1 => any::<i64>(),
    ]
}

fn qtype_any() -> impl Strategy<Value = Qtype> {
    prop_oneof![
        Just(Qtype::PerTensor),
        Just(Qtype::PerChannel),
        Just(Qtype::PerGroup)
    ]
}

fn op_any() -> impl Strategy<Value = Op> {
    let list = || prop::collection::vec(i64_any(), 0..=9);
    prop_oneof![
        (
            qtype_any(),
            i64_any(),
            prop::collection::vec(any::<f32>(), 0..5),
            prop::option::of(list()),
            prop::option::of(list())
        )
            .prop_map(|(qtype, axis, scales, zps, group_shape)| {
                Op::Dequantize(Dequantize {
                    qtype,
                    axis,
                    scales,
                    zps,
                    group_shape,
                })
            }),
        (qtype_any(), i64_any(), prop::option::of(list())).prop_map(
            |(qtype, axis, group_shape)| {
                Op::Dynamic(DynamicDequantize {
                    qtype,
                    axis,
                    group_shape,
                })
            }
        ),
        list().prop_map(|axes| Op::Axes(AxesDequantize { axes })),
    ]
}

fn backend_any() -> impl Strategy<Value = Backend> {
    prop::sample::select(support::built_backends())
}

fn delta_any() -> impl Strategy<Value = [i8; 4]> {
    prop::array::uniform4(prop_oneof![6 => Just(0i8), 2 => Just(-1i8), 1 => -3i8..3])
}

/// Fully arbitrary descriptors.
fn arbitrary_input() -> impl Strategy<Value = Input> {
    (
        op_any(),
        desc_any(),
        prop::option::of(desc_any()),
        prop::option::of(desc_any()),
        desc_any(),
        (delta_any(), 0usize..4, backend_any(), any::<u64>()),
    )
        .prop_map(
            |(op, src, scales, zps, dst, (len_delta, threads, backend, seed))| Input {
                op,
                src,
                scales,
                zps,
                dst,
                bind_override: None,
                len_delta,
                threads,
                backend,
                seed,
            },
        )
}

/// One thing wrong with a valid case.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    Dtype(usize, DType),
    Dim(usize, usize, usize),
    DropDim(usize),
    AddDim(usize, usize),
    Strides(usize, Vec<usize>),
    DstStrideZero(usize),
    Axis(i64),
    GroupShape(Vec<i64>),
    Axes(Vec<i64>),
    Qtype(Qtype),
    DropTensor(usize),
    AddTensor(usize, TensorDesc),
    BindOverride(usize, TensorDesc),
}

fn mutation_any() -> impl Strategy<Value = Mutation> {
    let which = 0usize..4;
    prop_oneof![
        2 => Just(Mutation::None),
        2 => (which.clone(), dtype_any()).prop_map(|(w, d)| Mutation::Dtype(w, d)),
        2 => (which.clone(), 0usize..8, dim_any()).prop_map(|(w, i, d)| Mutation::Dim(w, i, d)),
        1 => which.clone().prop_map(Mutation::DropDim),
        1 => (which.clone(), dim_any()).prop_map(|(w, d)| Mutation::AddDim(w, d)),
        2 => (which.clone(), prop::collection::vec(dim_any(), 0..=7))
            .prop_map(|(w, s)| Mutation::Strides(w, s)),
        1 => (0usize..8).prop_map(Mutation::DstStrideZero),
        1 => i64_any().prop_map(Mutation::Axis),
        1 => prop::collection::vec(i64_any(), 0..=7).prop_map(Mutation::GroupShape),
        1 => prop::collection::vec(i64_any(), 0..=7).prop_map(Mutation::Axes),
        1 => qtype_any().prop_map(Mutation::Qtype),
        1 => which.clone().prop_map(Mutation::DropTensor),
        1 => (which.clone(), desc_any()).prop_map(|(w, d)| Mutation::AddTensor(w, d)),
        2 => (which, desc_any()).prop_map(|(w, d)| Mutation::BindOverride(w, d)),
    ]
}

/// A valid case with one mutation (or none) and possibly short buffers.
fn near_valid_input() -> impl Strategy<Value = Input> {
    (
        case_strategy(None),
        mutation_any(),
        (delta_any(), 0usize..4, backend_any()),
    )
        .prop_map(|(case, m, (len_delta, threads, backend))| {
            let mut input = Input {
                op: case.op.clone(),
                src: case.src.desc.clone(),
                scales: case.scales.as_ref().map(|s| s.desc.clone()),
                zps: case.zps.as_ref().map(|z| z.desc.clone()),
                dst: case.dst.desc.clone(),
                bind_override: None,
                len_delta,
                threads,
                backend,
                seed: case.src.data.len() as u64 * 31 + case.dst.data.len() as u64,
            };
            mutate(&mut input, m);
            input
        })
}

fn desc_mut(input: &mut Input, w: usize) -> Option<&mut TensorDesc> {
    match w {
        0 => Some(&mut input.src),
        1 => input.scales.as_mut(),
        2 => input.zps.as_mut(),
        _ => Some(&mut input.dst),
    }
}

fn mutate(input: &mut Input, m: Mutation) {
    match m {
        Mutation::None => {}
        Mutation::Dtype(w, d) => {
            if let Some(t) = desc_mut(input, w) {
                t.dtype = d;
            }
        }
        Mutation::Dim(w, i, d) => {
            if let Some(x) = desc_mut(input, w).and_then(|t| t.shape.get_mut(i)) {
                *x = d;
            }
        }
        Mutation::DropDim(w) => {
            if let Some(t) = desc_mut(input, w) {
                t.shape.pop();
            }
        }
        Mutation::AddDim(w, d) => {
            if let Some(t) = desc_mut(input, w) {
                t.shape.push(d);
            }
        }
        Mutation::Strides(w, s) => {
            if let Some(t) = desc_mut(input, w) {
                t.strides = Some(s);
            }
        }
        Mutation::DstStrideZero(i) => {
            let mut s = input.dst.strides_or_dense();
            if let Some(x) = s.get_mut(i) {
                *x = 0;
            }
            input.dst.strides = Some(s);
        }
        Mutation::Axis(a) => match &mut input.op {
            Op::Dequantize(o) => o.axis = a,
            Op::Dynamic(o) => o.axis = a,
            Op::Axes(o) => o.axes.push(a),
        },
        Mutation::GroupShape(g) => match &mut input.op {
            Op::Dequantize(o) => o.group_shape = Some(g),
            Op::Dynamic(o) => o.group_shape = Some(g),
            Op::Axes(o) => o.axes = g,
        },
        Mutation::Axes(a) => {
            if let Op::Axes(o) = &mut input.op {
                o.axes = a;
            }
        }
        Mutation::Qtype(q) => match &mut input.op {
            Op::Dequantize(o) => o.qtype = q,
            Op::Dynamic(o) => o.qtype = q,
            Op::Axes(_) => {}
        },
        Mutation::DropTensor(w) => match w {
            1 => input.scales = None,
            _ => input.zps = None,
        },
        Mutation::AddTensor(w, d) => match w {
            1 => input.scales = Some(d),
            _ => input.zps = Some(d),
        },
        Mutation::BindOverride(w, d) => input.bind_override = Some((w, d)),
    }
}

/// Buffer length for `desc` with `delta`, capped so a forged size never allocates.
fn buf_len(desc: Option<&TensorDesc>, role: Role, delta: i8, rng: &mut Rng) -> usize {
    let need = desc.and_then(|d| d.required_bytes(role).ok());
    match need {
        Some(n) if n <= CAP => n.saturating_add_signed(delta as isize),
        _ => rng.below(64) as usize,
    }
}

/// Everything the call produced: `None` for an error at some stage.
type Outcome = Option<Vec<u8>>;

impl Input {
    fn bind_desc(&self, w: usize) -> Option<TensorDesc> {
        match &self.bind_override {
            Some((o, d)) if *o == w => Some(d.clone()),
            _ => match w {
                0 => Some(self.src.clone()),
                1 => self.scales.clone(),
                2 => self.zps.clone(),
                _ => Some(self.dst.clone()),
            },
        }
    }

    /// The same call with the bind-time descriptors used for the plan as well.
    fn folded(&self) -> Input {
        let mut i = self.clone();
        i.src = self.bind_desc(0).unwrap();
        i.scales = self.bind_desc(1);
        i.zps = self.bind_desc(2);
        i.dst = self.bind_desc(3).unwrap();
        i.bind_override = None;
        i
    }

    /// Runs the call through the plan path with `kernel`; checks dst on error.
    fn run_plan(&self, kernel: &dyn dq::kernel::Kernel, bufs: &Buffers) -> Result<Outcome, String> {
        let Ok(plan) = Plan::new(
            &self.op,
            &self.src,
            self.scales.as_ref(),
            self.zps.as_ref(),
            &self.dst,
        ) else {
            return Ok(None);
        };
        let mut out = bufs.dst.clone();
        let res = {
            let (src, scales, zps) = bufs.tensors(self);
            let mut dst = TensorMut {
                desc: self.bind_desc(3).unwrap(),
                data: &mut out,
            };
            match plan.bind(&src, scales.as_ref(), zps.as_ref(), &mut dst) {
                Err(_) => Err(()),
                Ok(mut job) => match self.threads {
                    1 => job.run(kernel).map_err(drop),
                    t => job.run_parallel(kernel, t).map_err(drop),
                },
            }
        };
        match res {
            Ok(()) => Ok(Some(out)),
            Err(()) if out == bufs.dst => Ok(None),
            Err(()) => Err(format!("{}: dst written on error", kernel.name())),
        }
    }

    /// Runs the call through `dq::dequantize`; checks dst on error.
    fn run_api(&self, bufs: &Buffers) -> Result<Outcome, String> {
        let mut out = bufs.dst.clone();
        let res = {
            let (src, scales, zps) = bufs.tensors(self);
            let mut dst = TensorMut {
                desc: self.bind_desc(3).unwrap(),
                data: &mut out,
            };
            let opts = Options::new()
                .with_backend(self.backend)
                .with_threads(self.threads);
            dq::dequantize(
                &self.op,
                &src,
                scales.as_ref(),
                zps.as_ref(),
                &mut dst,
                &opts,
            )
        };
        match res {
            Ok(()) => Ok(Some(out)),
            Err(_) if out == bufs.dst => Ok(None),
            Err(e) => Err(format!("dequantize: dst written on error {e}")),
        }
    }
}

/// The caller's buffers for an input.
struct Buffers {
    src: Vec<u8>,
    scales: Vec<u8>,
    zps: Vec<u8>,
    dst: Vec<u8>,
}

impl Buffers {
    fn new(input: &Input) -> Buffers {
        let mut rng = Rng::new(input.seed);
        let d = input.len_delta;
        let mut mk = |w: usize, role: Role| {
            let n = buf_len(input.bind_desc(w).as_ref(), role, d[w], &mut rng);
            rng.bytes(n)
        };
        let src = mk(0, Role::Src);
        let scales = mk(1, Role::Scales);
        let zps = mk(2, Role::Zps);
        let n = buf_len(input.bind_desc(3).as_ref(), Role::Dst, d[3], &mut rng);
        Buffers {
            src,
            scales,
            zps,
            dst: vec![SENTINEL; n],
        }
    }

    fn tensors<'a>(
        &'a self,
        input: &Input,
    ) -> (Tensor<'a>, Option<Tensor<'a>>, Option<Tensor<'a>>) {
        let t = |d: Option<TensorDesc>, data: &'a [u8]| d.map(|desc| Tensor { desc, data });
        (
            t(input.bind_desc(0), &self.src).unwrap(),
            t(input.bind_desc(1), &self.scales),
            t(input.bind_desc(2), &self.zps),
        )
    }
}

/// The whole check for one input; `Err` describes a violation.
fn check(input: &Input) -> Result<(), String> {
    let bufs = Buffers::new(input);
    let want = input.run_plan(reference(), &bufs)?;
    // Every backend gives the reference's outcome exactly: the same bits, or the
    // same refusal (no backend refuses a call the reference runs).
    for v in all_variants() {
        let got = input.run_plan(v.kernel, &bufs)?;
        if got != want {
            return Err(format!("{}: {}", v.name, differs(&got, &want)));
        }
    }
    // `dequantize` builds its plan from the tensors it is given (the overrides).
    let folded = input.folded();
    let want = folded.run_plan(reference(), &bufs)?;
    let got = input.run_api(&bufs)?;
    if got != want {
        return Err(format!("dequantize: {}", differs(&got, &want)));
    }
    Ok(())
}

/// How an outcome differs from the reference's.
fn differs(got: &Outcome, want: &Outcome) -> &'static str {
    match (got, want) {
        (Some(_), Some(_)) => "Ok but differs from the reference",
        (None, Some(_)) => "refused a call the reference runs",
        (Some(_), None) => "ran a call the reference refuses",
        (None, None) => unreachable!("equal outcomes"),
    }
}

/// `check` with panics turned into failures that print the input.
fn check_no_panic(input: &Input) -> Result<(), TestCaseError> {
    match catch_unwind(AssertUnwindSafe(|| check(input))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(msg)) => Err(TestCaseError::fail(format!("{msg}\ninput: {input:#?}"))),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(TestCaseError::fail(format!(
                "PANIC: {msg}\ninput: {input:#?}"
            )))
        }
    }
}

fn config() -> ProptestConfig {
    support::seeded_config(file!(), proptest_cases(750))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_descriptors_never_panic(input in arbitrary_input()) {
        check_no_panic(&input)?;
    }

    #[test]
    fn near_valid_descriptors_never_panic(input in near_valid_input()) {
        check_no_panic(&input)?;
    }
}

/// The near-valid strategy reaches both outcomes often (all-`Err` would make the
/// property vacuous, all-`Ok` would miss the errors).
#[test]
fn near_valid_inputs_hit_ok_and_err() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = near_valid_input();
    let (mut ok, mut err, mut short) = (0, 0, 0);
    for _ in 0..400 {
        let input = strat.new_tree(&mut runner).unwrap().current();
        let bufs = Buffers::new(&input);
        match input.run_plan(reference(), &bufs).unwrap() {
            Some(_) => ok += 1,
            None => err += 1,
        }
        short += input.len_delta.contains(&-1) as usize;
    }
    assert!(ok > 60 && err > 60, "ok {ok}, err {err}");
    assert!(short > 60, "short buffers {short}");
}

/// Regression table of hostile inputs found worth keeping (each must be an `Err`).
#[test]
fn known_hostile_inputs_are_errors() {
    let cases: Vec<Input> = vec![hostile_overflow_shape(), hostile_short_4bit_src()];
    for input in cases {
        check_no_panic(&input).unwrap();
        let bufs = Buffers::new(&input);
        assert_eq!(input.run_plan(reference(), &bufs), Ok(None), "{input:#?}");
    }
}

fn base_input(op: Op, src: TensorDesc, scales: Option<TensorDesc>, dst: TensorDesc) -> Input {
    Input {
        op,
        src,
        scales,
        zps: None,
        dst,
        bind_override: None,
        len_delta: [0; 4],
        threads: 1,
        backend: Backend::Auto,
        seed: 7,
    }
}

fn hostile_overflow_shape() -> Input {
    let shape = [usize::MAX / 2 + 1, 2];
    base_input(
        DynamicDequantize::per_tensor().into(),
        TensorDesc::new(DType::S8, &shape),
        Some(TensorDesc::new(DType::F32, &[1])),
        TensorDesc::new(DType::F32, &shape),
    )
}

fn hostile_short_4bit_src() -> Input {
    let mut i = base_input(
        DynamicDequantize::per_tensor().into(),
        TensorDesc::new(DType::U4, &[7]),
        Some(TensorDesc::new(DType::F32, &[1])),
        TensorDesc::new(DType::F32, &[7]),
    );
    i.len_delta = [-1, 0, 0, 0];
    i
}
