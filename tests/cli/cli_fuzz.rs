//! Hostile command lines and files for `dq run` (the CLI contract of issue 2): random
//! valid cases written as `.bin`/`.npy` files, then mutated — garbage shape strings,
//! lists, strides and enum values, dropped/duplicated/unknown flags, files one byte
//! short or long, forged `.npy` headers (huge shapes, bad descr, bad lengths).
//!
//! Every run happens under an address-space limit (`RLIMIT_AS`, 1 GiB), so a huge
//! allocation from a forged header shows up as an abort, and a hang guard. The
//! outcome must be exit 0 with an output file (bit-exact with the reference when
//! the case was not mutated) or exit 2 with one line on stderr and the output file
//! untouched — never a panic (101), a signal, or any other code.
//!
//! Cases: `DQ_CLI_FUZZ_CASES` (default 150; each case runs the binary). `DQ_CLI_BIN`
//! points the tests at another build of the binary.
//!
//! [`headers`] does the same for input files: mutated GGUF and safetensors headers
//! through the parsers, `dq inspect` and `dq convert` (`DQ_FILE_FUZZ_CASES`).
#![cfg(unix)]
mod headers;
mod split;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dq::npy;
use dq::{Op, OpKind, TensorDesc};
use proptest::prelude::*;

use crate::files;
use crate::support;
use support::cases::{Case, case_strategy};
use support::reference;

const AS_LIMIT: u64 = 1 << 30;
/// A hang guard only, not a speed check: a run takes milliseconds, so this is
/// reached only by a run that never ends.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The binary under test: this package's `dq`, or `DQ_CLI_BIN` when set.
fn dq_bin() -> String {
    std::env::var("DQ_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_dq").to_string())
}

/// Runs `dq` in `dir` under the memory limit and the hang guard.
fn run_dq(dir: &Path, args: &[String]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(dq_bin());
    cmd.env("DQ_TUNING", "off");
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: AS_LIMIT,
                rlim_max: AS_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > HANG_GUARD {
            child.kill().ok();
            let out = child.wait_with_output().unwrap();
            panic!("dq {args:?} hangs (killed after {HANG_GUARD:?}): {out:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// One command line with its files.
#[derive(Clone, Debug)]
struct Invocation {
    /// (flag, value) pairs after `run`; a `None` value is a bare token.
    flags: Vec<(String, Option<String>)>,
    /// Files written to the temp dir before running.
    files: Vec<(String, Vec<u8>)>,
    /// Pre-existing output content, to check it is left alone on error.
    output_before: Option<Vec<u8>>,
    /// The exact output expected (unmutated cases).
    expected: Option<Vec<u8>>,
    /// True when only a refusal (exit 2) is right.
    must_refuse: bool,
}

const OUTPUT: &str = "out.bin";

fn shape_str(shape: &[usize]) -> String {
    if shape.is_empty() {
        "scalar".into()
    } else {
        shape
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("x")
    }
}

/// Turns a valid generated case into a valid `dq run` invocation. `None` where the
/// CLI has no spelling for the case: an empty group shape (rank-0 per_group). An
/// empty static scales/zps list (per_channel over a zero-sized axis) is `""`.
fn invocation(mut case: Case, use_npy: bool, threads: u8, auto: bool) -> Option<Invocation> {
    if let Op::Dynamic(o) = &case.op
        && o.group_shape.as_ref().is_some_and(|g| g.is_empty())
    {
        return None;
    }
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut files = Vec::new();
    let mut flag = |f: &str, v: String| flags.push((format!("--{f}"), Some(v)));
    let shape = case.src.desc.shape.clone();
    // The CLI writes a dense dst; strided src is passed with --src-strides.
    case.dst.desc = TensorDesc::new(case.dst.desc.dtype, &shape);
    case.dst.data = vec![0; case.dst.desc.required_bytes(dq::Role::Dst).unwrap()];
    let need = case.src.desc.required_bytes(dq::Role::Src).unwrap();
    case.src.data.truncate(need);
    let kind = case.op.kind();
    flag(
        "op",
        match kind {
            OpKind::Dequantize => "dequantize",
            OpKind::Dynamic => "dynamic",
            OpKind::Axes => "axes",
        }
        .into(),
    );
    flag("src-type", case.src.desc.dtype.to_string());
    flag("dst-type", case.dst.desc.dtype.to_string());
    flag("shape", shape_str(&shape));
    if let Some(s) = case
        .src
        .desc
        .strides
        .as_ref()
        .filter(|_| !case.src.desc.is_dense())
    {
        flag("src-strides", shape_str(s));
    }
    match &mut case.op {
        Op::Dequantize(o) => {
            flag("qtype", o.qtype.to_string());
            flag("axis", o.axis.to_string());
            // The list goes through text: use the values the CLI will parse.
            for s in &mut o.scales {
                *s = s.to_string().parse().unwrap();
            }
            let list = |v: Vec<String>| v.join(",");
            flag(
                "scales",
                list(o.scales.iter().map(f32::to_string).collect()),
            );
            if let Some(z) = &o.zps {
                flag("zps", list(z.iter().map(i64::to_string).collect()));
            }
        }
        Op::Dynamic(o) => {
            flag("qtype", o.qtype.to_string());
            flag("axis", o.axis.to_string());
            if let Some(g) = &o.group_shape {
                let g: Vec<String> = g.iter().map(i64::to_string).collect();
                flag("group-shape", g.join("x"));
            }
        }
        Op::Axes(o) => {
            let a: Vec<String> = o.axes.iter().map(i64::to_string).collect();
            flag(
                "axes",
                if a.is_empty() {
                    "none".into()
                } else {
                    a.join(",")
                },
            );
        }
    }
    let src_npy = use_npy && case.src.desc.is_dense();
    match src_npy
        .then(|| npy::encode(case.src.desc.dtype, &shape, &case.src.data))
        .flatten()
    {
        Some(f) => {
            files.push(("src.npy".into(), f));
            flag("input", "src.npy".into());
        }
        None => {
            files.push(("src.bin".into(), case.src.data.clone()));
            flag("input", "src.bin".into());
        }
    }
    if let Some(t) = &case.scales {
        let (d, b) = (&t.desc, &t.data);
        match use_npy.then(|| npy::encode(d.dtype, &d.shape, b)).flatten() {
            Some(f) => {
                files.push(("scales.npy".into(), f));
                flag("scales", "scales.npy".into());
            }
            None => {
                files.push(("scales.bin".into(), b.clone()));
                flag("scales", "scales.bin".into());
            }
        }
    }
    if let Some(t) = case.zps.clone() {
        let (d, b) = (t.desc, t.data);
        let same = case
            .scales
            .as_ref()
            .is_some_and(|s| s.desc.shape == d.shape);
        match npy::encode(d.dtype, &d.shape, &b).filter(|_| use_npy || !same) {
            Some(f) => {
                files.push(("zps.npy".into(), f));
                flag("zps", "zps.npy".into());
            }
            None if same => {
                files.push(("zps.bin".into(), b));
                flag("zps", "zps.bin".into());
                flag("zps-type", d.dtype.to_string());
            }
            // A broadcast zero point in a format without a shape: leave it out.
            None => case.zps = None,
        }
    }
    flag("backend", if auto { "auto" } else { "reference" }.into());
    flag("threads", (1 + threads % 4).to_string());
    flag("output", OUTPUT.into());
    let expected = case.run(reference()).expect("run");
    Some(Invocation {
        flags,
        files,
        output_before: None,
        expected: Some(expected),
        must_refuse: false,
    })
}

/// Garbage in the shapes of what the flags take.
fn garbage() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("18446744073709551616".to_string()),
        Just("18446744073709551615".to_string()),
        Just("9223372036854775807".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("4294967296x4294967296".to_string()),
        Just("65536x65536x65536".to_string()),
        Just("".to_string()),
        Just("scalar".to_string()),
        Just("x".to_string()),
        Just("1x".to_string()),
        Just("x1".to_string()),
        Just("1,,2".to_string()),
        Just(",".to_string()),
        Just(" ".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("1e999".to_string()),
        Just("-0".to_string()),
        Just("0".to_string()),
        Just("0x0".to_string()),
        Just("\u{ff11}\u{ff12}".to_string()),
        Just("none".to_string()),
        Just("per_group".to_string()),
        Just("s64".to_string()),
        Just("f64".to_string()),
        "[0-9x,.eE+\\- ]{0,12}",
        "[a-z_0-9]{0,10}",
        any::<i64>().prop_map(|v| v.to_string()),
        prop::collection::vec(0u32..100_000, 0..8).prop_map(|v| v
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("x")),
    ];
    prop::collection::vec(token, 1..3).prop_map(|v| v.concat())
}

/// A forged `.npy` header for the data of `file`.
fn forged_npy() -> impl Strategy<Value = Vec<u8>> {
    let shape = prop_oneof![
        Just("(4294967296, 4294967296)".to_string()),
        Just("(18446744073709551615,)".to_string()),
        Just("(18446744073709551616,)".to_string()),
        Just("(1099511627776,)".to_string()),
        Just("(-1,)".to_string()),
        Just("((2,),)".to_string()),
        Just("(2, 3".to_string()),
        Just("()".to_string()),
        Just("[4]".to_string()),
        (0u64..u64::MAX).prop_map(|n| format!("({n},)")),
        "\\([0-9, ]{0,20}\\)",
    ];
    let descr = prop_oneof![
        Just("<f4"),
        Just("|i1"),
        Just("|u1"),
        Just(">f4"),
        Just("<c8"),
        Just("|b1"),
        Just("<i4"),
        Just(""),
        Just("O"),
    ];
    let order = prop_oneof![Just("False"), Just("True"), Just("1")];
    (
        shape,
        descr,
        order,
        prop::collection::vec(any::<u8>(), 0..64),
        0u8..6,
    )
        .prop_map(|(shape, descr, order, data, corrupt)| {
            let header =
                format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
            let mut f = npy::with_header(&header, &data);
            match corrupt {
                1 => f[8..10].copy_from_slice(&u16::MAX.to_le_bytes()), // header length
                2 => f[6] = 9,                                          // version
                3 => f.truncate(f.len().min(9)),
                4 => f[12] = 0xff, // not UTF-8
                _ => {}
            }
            f
        })
}

/// One mutation of an invocation.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    Value(usize, String),
    Drop(usize),
    Duplicate(usize, String),
    Unknown(String),
    FileLen(usize, i8),
    FileReplace(usize, Vec<u8>),
    FileMissing(usize),
    PreexistingOutput(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::None),
        4 => (any::<usize>(), garbage()).prop_map(|(i, g)| Mutation::Value(i, g)),
        1 => any::<usize>().prop_map(Mutation::Drop),
        1 => (any::<usize>(), garbage()).prop_map(|(i, g)| Mutation::Duplicate(i, g)),
        1 => "--[a-z\\-]{1,12}".prop_map(Mutation::Unknown),
        2 => (any::<usize>(), prop_oneof![Just(-1i8), Just(1i8), -8i8..8])
            .prop_map(|(i, d)| Mutation::FileLen(i, d)),
        3 => (any::<usize>(), forged_npy()).prop_map(|(i, f)| Mutation::FileReplace(i, f)),
        1 => any::<usize>().prop_map(Mutation::FileMissing),
        1 => prop::collection::vec(any::<u8>(), 0..16).prop_map(Mutation::PreexistingOutput),
    ]
}

impl Invocation {
    fn mutate(&mut self, m: &Mutation) {
        let nf = self.flags.len();
        let nfiles = self.files.len();
        if nfiles == 0
            && matches!(
                m,
                Mutation::FileLen(..) | Mutation::FileReplace(..) | Mutation::FileMissing(_)
            )
        {
            return;
        }
        if !matches!(m, Mutation::None | Mutation::PreexistingOutput(_)) {
            self.expected = None;
        }
        match m {
            Mutation::None => {}
            Mutation::Value(i, g) => {
                // Never touch --output: the checks below rely on its name.
                let i = i % nf;
                if self.flags[i].0 != "--output" {
                    self.flags[i].1 = Some(g.clone());
                }
            }
            Mutation::Drop(i) => {
                let i = i % nf;
                if self.flags[i].0 != "--output" {
                    self.flags.remove(i);
                }
            }
            Mutation::Duplicate(i, g) => {
                let f = self.flags[i % nf].0.clone();
                if f != "--output" {
                    self.flags.push((f, Some(g.clone())));
                }
            }
            Mutation::Unknown(f) => self.flags.push((f.clone(), None)),
            Mutation::FileLen(i, d) => {
                let f = &mut self.files[i % nfiles].1;
                let n = f.len().saturating_add_signed(*d as isize);
                f.resize(n, 0x5a);
            }
            Mutation::FileReplace(i, b) => {
                let (name, data) = &mut self.files[i % nfiles];
                if let Some(stem) = name.strip_suffix(".bin") {
                    let new = format!("{stem}.npy");
                    for (_, v) in &mut self.flags {
                        if v.as_deref() == Some(name.as_str()) {
                            *v = Some(new.clone());
                        }
                    }
                    *name = new;
                }
                *data = b.clone();
            }
            Mutation::FileMissing(i) => {
                self.files.remove(i % nfiles);
            }
            Mutation::PreexistingOutput(b) => self.output_before = Some(b.clone()),
        }
    }

    fn args(&self) -> Vec<String> {
        let mut a = vec!["run".to_string()];
        for (f, v) in &self.flags {
            a.push(f.clone());
            if let Some(v) = v {
                a.push(v.clone());
            }
        }
        a
    }

    /// Runs the invocation in a fresh directory and checks the outcome.
    fn check(&self) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        for (name, data) in &self.files {
            std::fs::write(dir.path().join(name), data).unwrap();
        }
        let out_path = dir.path().join(OUTPUT);
        if let Some(b) = &self.output_before {
            std::fs::write(&out_path, b).unwrap();
        }
        let out = run_dq(dir.path(), &self.args());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let output_now = std::fs::read(&out_path).ok();
        match out.status.code() {
            Some(0) if self.must_refuse => Err("exit 0, but this must be refused".into()),
            Some(0) => {
                let got = output_now.ok_or("exit 0 without an output file")?;
                if self.expected.as_ref().is_some_and(|want| &got != want) {
                    return Err("exit 0 but the output differs from the reference".into());
                }
                Ok(())
            }
            Some(2) => {
                let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
                if lines.len() != 1 {
                    return Err(format!("exit 2 needs one stderr line, got {lines:?}"));
                }
                if output_now != self.output_before {
                    return Err("exit 2 but the output file was created or modified".into());
                }
                if self.expected.is_some() {
                    return Err(format!("a valid case was refused: {}", lines[0]));
                }
                Ok(())
            }
            code => Err(format!(
                "exit {code:?} (signal {:?}); stderr: {stderr}",
                std::os::unix::process::ExitStatusExt::signal(&out.status)
            )),
        }
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("DQ_CLI_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    ProptestConfig {
        max_shrink_iters: 200,
        ..support::seeded_config(file!(), cases)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_command_lines_exit_0_or_2(
        case in case_strategy(None),
        (use_npy, threads, auto) in (any::<bool>(), any::<u8>(), any::<bool>()),
        muts in prop::collection::vec(mutation(), 1..3),
    ) {
        let Some(mut inv) = invocation(case, use_npy, threads, auto) else {
            return Ok(());
        };
        for m in &muts {
            inv.mutate(m);
        }
        if let Err(e) = inv.check() {
            return Err(TestCaseError::fail(format!("{e}\nargs: {:?}\n{inv:#?}", inv.args())));
        }
    }
}

/// Forged headers that claim far more data than the file holds are refused quickly,
/// without allocating what they claim.
#[test]
fn forged_npy_headers_are_refused() {
    let headers = [
        "{'descr': '|i1', 'fortran_order': False, 'shape': (1099511627776,), }",
        "{'descr': '|i1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
        "{'descr': '|i1', 'fortran_order': False, 'shape': (18446744073709551615,), }",
        "{'descr': '|i1', 'fortran_order': False, 'shape': (-1,), }",
        "{'descr': '|i1', 'fortran_order': True, 'shape': (4,), }",
        "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': '|i1', 'shape': (4,), }",
        "not a dict at all",
    ];
    for h in headers {
        let inv = Invocation {
            flags: [
                ("--op", "dynamic"),
                ("--src-type", "s8"),
                ("--dst-type", "f32"),
                ("--shape", "4"),
                ("--input", "src.npy"),
                ("--scales", "scales.bin"),
                ("--output", OUTPUT),
            ]
            .iter()
            .map(|(f, v)| (f.to_string(), Some(v.to_string())))
            .collect(),
            files: vec![
                ("src.npy".into(), npy::with_header(h, &[1, 2, 3, 4])),
                ("scales.bin".into(), 1f32.to_le_bytes().to_vec()),
            ],
            output_before: None,
            expected: None,
            must_refuse: true,
        };
        // Refused (exit 2, one line, no output) under the 1 GiB address-space limit:
        // what the header claims (up to 16 EiB) is never allocated.
        inv.check().unwrap_or_else(|e| panic!("{h}: {e}"));
    }
}

/// The harness itself: an unmutated valid case succeeds with the reference's bytes.
#[test]
fn valid_cases_round_trip() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = case_strategy(None);
    for i in 0..20u8 {
        let case = strat.new_tree(&mut runner).unwrap().current();
        let Some(inv) = invocation(case, i % 2 == 0, i, i % 3 == 0) else {
            continue;
        };
        inv.check()
            .unwrap_or_else(|e| panic!("{e}\nargs: {:?}", inv.args()));
    }
}

/// A 1-byte src broadcast (stride 0) to a 16 GiB dst: the output allocation must be
/// refused with exit 2 under the 1 GiB address-space limit, not abort the process.
#[test]
fn huge_output_from_a_tiny_broadcast_src_is_not_an_abort() {
    let inv = Invocation {
        flags: [
            ("--op", "dynamic"),
            ("--src-type", "s8"),
            ("--dst-type", "f32"),
            ("--shape", "65536x65536"),
            ("--src-strides", "0x0"),
            ("--input", "src.bin"),
            ("--scales", "scales.bin"),
            ("--output", OUTPUT),
        ]
        .iter()
        .map(|(f, v)| (f.to_string(), Some(v.to_string())))
        .collect(),
        files: vec![
            ("src.bin".into(), vec![1]),
            ("scales.bin".into(), 1f32.to_le_bytes().to_vec()),
        ],
        output_before: None,
        expected: None,
        must_refuse: true,
    };
    inv.check().unwrap();
}

/// The case of a persisted regression (per_channel over a zero-sized axis, with a
/// previous output file): spelled with empty `--scales ""` and `--zps ""` lists, it
/// runs and writes the reference's (empty) output over the old file.
#[test]
fn empty_static_lists_of_a_zero_sized_axis_round_trip() {
    let flags = [
        ("--op", "dequantize"),
        ("--qtype", "per_channel"),
        ("--axis", "0"),
        ("--src-type", "u8"),
        ("--dst-type", "f32"),
        ("--shape", "0"),
        ("--scales", ""),
        ("--zps", ""),
        ("--input", "src.bin"),
        ("--backend", "reference"),
        ("--output", OUTPUT),
    ];
    let inv = Invocation {
        flags: (flags.iter())
            .map(|(f, v)| (f.to_string(), Some(v.to_string())))
            .collect(),
        files: vec![("src.bin".into(), Vec::new())],
        output_before: Some(vec![59, 178, 112, 20]),
        expected: Some(Vec::new()),
        must_refuse: false,
    };
    inv.check().unwrap();
}
