//! The `dq` binary: success cases compared bit for bit with the conformance vectors
//! and library calls, one test per error class (exit code 2, one line on stderr, no
//! output file created or modified), `dq bench --json` and `dq demo`.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;
use dq::{DType, DynamicDequantize, Options, Tensor, TensorMut};
use serde_json::Value;
use support::conformance::case_dirs;

fn dq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", "off")
        .args(args)
        .output()
        .expect("running the dq binary")
}

/// `dq run` with `flags` (split at spaces) and `(flag, path)` pairs.
fn dq_run(flags: &str, files: &[(&str, &Path)]) -> Output {
    let mut args: Vec<&str> = vec!["run"];
    args.extend(flags.split_whitespace());
    for (flag, path) in files {
        args.extend([*flag, p(path)]);
    }
    dq(&args)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_ok(o: &Output) {
    assert!(o.status.success(), "dq failed: {}", stderr(o));
}

/// Writes a `.npy` file the way NumPy 1.x does (version 1.0, 64-byte aligned header).
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let file = dq::npy::with_header(&dq::npy::header(descr, shape), data);
    std::fs::write(path, file).unwrap();
}

/// Reads a `.npy` written by dq: (header text, data).
fn read_npy(path: &Path) -> (String, Vec<u8>) {
    npy_parts(&std::fs::read(path).unwrap())
}

/// The (header text, data) of a `.npy` file's bytes written by dq.
fn npy_parts(b: &[u8]) -> (String, Vec<u8>) {
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    assert_eq!((10 + hlen) % 64, 0, "header is 64-byte aligned");
    (
        String::from_utf8(b[10..10 + hlen].to_vec()).unwrap(),
        b[10 + hlen..].to_vec(),
    )
}

/// The CLI flags of one conformance case (scales / zps read from its folder).
fn case_args(dir: &Path) -> (Vec<String>, DType) {
    let j: Value = serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let s = |k: &str| j[k].as_str().unwrap().to_string();
    let shape: Vec<String> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.to_string())
        .collect();
    let shape = if shape.is_empty() {
        "scalar".into()
    } else {
        shape.join("x")
    };
    let mut a: Vec<String> = vec![
        "run".into(),
        "--op".into(),
        s("op"),
        "--src-type".into(),
        s("src_type"),
        "--dst-type".into(),
        s("dst_type"),
        "--shape".into(),
        shape,
        "--input".into(),
        dir.join("src.bin").to_str().unwrap().into(),
    ];
    let mut push = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    let list = |v: &Value, x: &str| -> String {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(x)
    };
    if let Some(q) = j.get("qtype").and_then(Value::as_str) {
        push("qtype", q.into());
    }
    if let Some(ax) = j.get("axis").and_then(Value::as_i64) {
        push("axis", ax.to_string());
    }
    if let Some(g) = j.get("group_shape") {
        let empty = g.as_array().unwrap().is_empty();
        push(
            "group-shape",
            if empty { "scalar".into() } else { list(g, "x") },
        );
    }
    if let Some(ax) = j.get("axes") {
        push(
            "axes",
            if ax.as_array().unwrap().is_empty() {
                "none".into()
            } else {
                list(ax, ",")
            },
        );
    }
    if j["op"] == "dequantize" {
        let scales: Vec<String> = j["scales"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| format!("{:?}", x.as_f64().unwrap() as f32))
            .collect();
        push("scales", scales.join(","));
        if !j["zps"].is_null() {
            push("zps", list(&j["zps"], ","));
        }
    } else {
        push("scales", dir.join("scales.bin").to_str().unwrap().into());
        if let Some(z) = j["zps_type"].as_str() {
            push("zps", dir.join("zps.bin").to_str().unwrap().into());
            push("zps-type", z.into());
        }
    }
    (a, s("dst_type").parse().unwrap())
}

#[test]
fn run_reproduces_every_conformance_vector() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = case_dirs();
    assert_eq!(dirs.len(), 60);
    for (i, dir) in dirs.iter().enumerate() {
        let (mut args, dst_t) = case_args(dir);
        let out = tmp.path().join(format!("out{i}.bin"));
        args.extend([
            "--output".into(),
            p(&out).into(),
            "--backend".into(),
            "reference".into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = dq(&args);
        assert!(o.status.success(), "{}: {}", dir.display(), stderr(&o));
        let want = std::fs::read(dir.join("dst.bin")).unwrap();
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got, want, "{}", dir.display());
        // Every other backend, and the default (auto) on two threads: the reference's
        // bits exactly, NaN payloads included (the reference matched the vector's
        // bits above on this machine, so there is no platform NaN left to excuse).
        let last = args.len() - 2;
        for backend in ["generated", "jit", "auto"]
            .into_iter()
            .filter(|b| support::in_build(b))
        {
            let mut args = args.clone();
            args.truncate(last);
            args.extend(["--backend", backend]);
            if backend == "auto" {
                args.extend(["--threads", "2"]);
            }
            let o = dq(&args);
            assert!(
                o.status.success(),
                "{} {backend}: {}",
                dir.display(),
                stderr(&o)
            );
            assert_eq!(
                std::fs::read(&out).unwrap(),
                want,
                "{} {backend} ({dst_t})",
                dir.display()
            );
        }
    }
}

/// A dynamic u8 -> f32 per-channel case written as .npy files, with the expected
/// output from a library call.
struct NpyCase {
    dir: tempfile::TempDir,
    want: Vec<u8>,
}

fn npy_case() -> NpyCase {
    let dir = tempfile::tempdir().unwrap();
    let src: Vec<u8> = (0..24).map(|i| (i * 11) as u8).collect();
    let scales = [0.5f32, -0.25, 0.125, 3.0];
    let zps = [1u8, 2, 3, 4];
    write_npy(&dir.path().join("src.npy"), "|u1", &[6, 4], &src);
    write_npy(
        &dir.path().join("scales.npy"),
        "<f4",
        &[4],
        bytemuck::cast_slice(&scales),
    );
    write_npy(&dir.path().join("zps.npy"), "|u1", &[4], &zps);
    let mut want = vec![0f32; 24];
    dq::dequantize(
        &DynamicDequantize::per_channel(1).into(),
        &Tensor::from_slice(&src, &[6, 4]),
        Some(&Tensor::from_slice(&scales, &[4])),
        Some(&Tensor::from_slice(&zps, &[4])),
        &mut TensorMut::from_slice(&mut want, &[6, 4]),
        &Options::default(),
    )
    .unwrap();
    NpyCase {
        dir,
        want: bytemuck::cast_slice(&want).to_vec(),
    }
}

/// Rewrites the version 1.0 `.npy` file at `path` as version `major`.0 (a 4-byte
/// header length, the header padded again to a multiple of 64 bytes).
fn rewrite_npy_version(path: &Path, major: u8) {
    let (header, data) = npy_parts(&std::fs::read(path).unwrap());
    let mut h = header.trim_end().as_bytes().to_vec();
    while !(12 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut f = b"\x93NUMPY".to_vec();
    f.extend([major, 0]);
    f.extend((h.len() as u32).to_le_bytes());
    f.extend(h);
    f.extend(data);
    std::fs::write(path, f).unwrap();
}

/// Inputs in `.npy` format versions 2.0 and 3.0 (as NumPy writes for long or
/// UTF-8 headers) read as version 1.0 does.
#[test]
fn run_reads_npy_versions_2_and_3() {
    for major in [2, 3] {
        let c = npy_case();
        let d = c.dir.path();
        for f in ["src.npy", "scales.npy", "zps.npy"] {
            rewrite_npy_version(&d.join(f), major);
            assert_eq!(std::fs::read(d.join(f)).unwrap()[6], major);
        }
        let out = d.join("out.bin");
        assert_ok(&dq_run(
            "--op dynamic --src-type u8 --dst-type f32 --shape 6x4 --qtype per_channel --axis -1",
            &[
                ("--input", &d.join("src.npy")),
                ("--scales", &d.join("scales.npy")),
                ("--zps", &d.join("zps.npy")),
                ("--output", &out),
            ],
        ));
        assert_eq!(std::fs::read(&out).unwrap(), c.want, "version {major}");
    }
}

#[test]
fn run_with_npy_files_in_and_out() {
    let c = npy_case();
    let d = c.dir.path();
    let out = d.join("out.npy");
    assert_ok(&dq_run(
        "--op dynamic --src-type u8 --dst-type f32 --shape 6x4 --qtype per_channel --axis -1",
        &[
            ("--input", &d.join("src.npy")),
            ("--scales", &d.join("scales.npy")),
            ("--zps", &d.join("zps.npy")),
            ("--output", &out),
        ],
    ));
    let (header, data) = read_npy(&out);
    assert!(
        header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (6, 4), }"),
        "{header}"
    );
    assert!(header.ends_with('\n'));
    assert_eq!(data, c.want);
}

#[test]
fn run_static_op_with_lists_to_npy() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("src.bin");
    std::fs::write(&input, [0u8, 10, 20, 30]).unwrap();
    let out = tmp.path().join("out.npy");
    assert_ok(&dq_run(
        "--op dequantize --src-type u8 --dst-type f32 --shape 4 --scales 0.1 --zps 10",
        &[("--input", &input), ("--output", &out)],
    ));
    let (header, data) = read_npy(&out);
    assert!(header.contains("'shape': (4,)"), "{header}");
    let want: Vec<u8> = [-10f32 * 0.1, 0.0, 10f32 * 0.1, 20f32 * 0.1]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(data, want);
    // Per-channel with a negative axis and negative / special scales.
    let out = tmp.path().join("out.bin");
    assert_ok(&dq_run(
        "--op dequantize --src-type s8 --dst-type f32 --shape 2x2 --qtype per_channel --axis -2 --scales -0.5,inf",
        &[("--input", &input), ("--output", &out)],
    ));
    let got: Vec<f32> = f32s(&std::fs::read(&out).unwrap());
    assert_eq!(got[..3], [-0.0, -5.0, f32::INFINITY]);
    assert!(got[0].is_sign_negative());
    assert_eq!(got[3], 30.0 * f32::INFINITY);
}

#[test]
fn run_axes_op_with_f64_npy_output_and_scalar() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("src.bin"), (-5i32).to_le_bytes()).unwrap();
    std::fs::write(d.join("scales.bin"), 0.1f64.to_le_bytes()).unwrap();
    std::fs::write(d.join("zps.bin"), 2i32.to_le_bytes()).unwrap();
    let out = d.join("out.npy");
    assert_ok(&dq_run(
        "--op axes --src-type s32 --dst-type f64 --shape scalar",
        &[
            ("--input", &d.join("src.bin")),
            ("--scales", &d.join("scales.bin")),
            ("--zps", &d.join("zps.bin")),
            ("--output", &out),
        ],
    ));
    let (header, data) = read_npy(&out);
    assert!(
        header.contains("'descr': '<f8'") && header.contains("'shape': ()"),
        "{header}"
    );
    assert_eq!(data, (-7.0f64 * 0.1).to_le_bytes());
}

#[test]
fn run_strided_src_and_dst_and_4bit_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // u4 physical [5, 3] seen transposed as [3, 5]; per_group [1, 2] (remainder group),
    // one broadcast u4 zero point, bf16 out written transposed.
    let nibbles: Vec<i8> = (0..15).map(|i| (i * 7 % 16) as i8).collect();
    let packed = dq::dtype::pack_4bit(&nibbles);
    std::fs::write(d.join("src.bin"), &packed).unwrap();
    let scales: Vec<half::bf16> = (0..9)
        .map(|i| half::bf16::from_f32(0.5 + i as f32))
        .collect();
    std::fs::write(d.join("scales.bin"), bytemuck::cast_slice::<_, u8>(&scales)).unwrap();
    std::fs::write(d.join("zps.bin"), [0xf3u8]).unwrap(); // zp 3, padding nibble f
    let out = d.join("out.bin");
    assert_ok(&dq_run(
        "--op dynamic --src-type u4 --dst-type bf16 --shape 3x5 --qtype per_group --group-shape 1x2 --src-strides 1x3 --dst-strides 1x3 --zps-type u4 --threads 2",
        &[
            ("--input", &d.join("src.bin")),
            ("--scales", &d.join("scales.bin")),
            ("--zps", &d.join("zps.bin")),
            ("--output", &out),
        ],
    ));
    let mut want = vec![half::bf16::ZERO; 15];
    dq::dequantize(
        &DynamicDequantize::per_group(vec![1, 2]).into(),
        &Tensor::from_bytes(DType::U4, &[3, 5], &packed).with_strides(&[1, 3]),
        Some(&Tensor::from_slice(&scales, &[3, 3])),
        Some(&Tensor::from_bytes(DType::U4, &[1], &[0xf3])),
        &mut TensorMut::from_slice(&mut want, &[3, 5]).with_strides(&[1, 3]),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        bytemuck::cast_slice::<_, u8>(&want)
    );
}

#[test]
fn zero_sized_shape_writes_an_empty_output() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("src.bin"), []).unwrap();
    std::fs::write(d.join("scales.bin"), 1.0f32.to_le_bytes()).unwrap();
    let out = d.join("out.npy");
    assert_ok(&dq_run(
        "--op dynamic --src-type s8 --dst-type f32 --shape 0x3",
        &[
            ("--input", &d.join("src.bin")),
            ("--scales", &d.join("scales.bin")),
            ("--output", &out),
        ],
    ));
    let (header, data) = read_npy(&out);
    assert!(header.contains("'shape': (0, 3)"), "{header}");
    assert!(data.is_empty());
}

/// `dq run` with `args` plus `--backend B --output out` for every backend `B` that is
/// built in (one that is not is reported through `path_unavailable`): the output
/// bytes per backend.
fn run_on_every_backend(args: &[&str], out: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let mut got = Vec::new();
    for b in ["reference", "generated", "jit", "auto"]
        .into_iter()
        .filter(|b| support::in_build(b))
    {
        let _ = std::fs::remove_file(out);
        let mut a = args.to_vec();
        a.extend(["--backend", b, "--output", p(out)]);
        let o = dq(&a);
        if o.status.code() == Some(2)
            && stderr(&o).contains(&format!("backend `{b}` is unavailable"))
        {
            support::path_unavailable(&format!("dq run --backend {b}: {}", stderr(&o)));
            continue;
        }
        assert!(o.status.success(), "{b}: {}", stderr(&o));
        got.push((b, std::fs::read(out).unwrap()));
    }
    got
}

#[test]
fn run_rank0_per_group_with_group_shape_scalar() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let f = |name: &str| p(&d.join(name)).to_string();
    // s8 -7, zero point 3, scale 0.25 -> -2.5, to a rank-0 .npy.
    std::fs::write(d.join("q.bin"), [-7i8 as u8]).unwrap();
    std::fs::write(d.join("s.bin"), 0.25f32.to_le_bytes()).unwrap();
    std::fs::write(d.join("z.bin"), [3u8]).unwrap();
    let (q, s, z) = (f("q.bin"), f("s.bin"), f("z.bin"));
    let args = [
        "run",
        "--op",
        "dynamic",
        "--src-type",
        "s8",
        "--dst-type",
        "f32",
        "--shape",
        "scalar",
        "--qtype",
        "per_group",
        "--group-shape",
        "scalar",
        "--input",
        &q,
        "--scales",
        &s,
        "--zps",
        &z,
        "--zps-type",
        "s8",
    ];
    let out = d.join("y.npy");
    for (b, file) in run_on_every_backend(&args, &out) {
        let (header, data) = npy_parts(&file);
        assert!(header.contains("'shape': ()"), "{b}: {header}");
        assert_eq!(data, (-2.5f32).to_le_bytes(), "{b}");
    }
    // u4 11 (padding nibble 0), u4 zero point 3, bf16 scale 0.5 -> 4.0 = bf16 0x4080.
    std::fs::write(d.join("q.bin"), [0x0bu8]).unwrap();
    std::fs::write(d.join("s.bin"), half::bf16::from_f32(0.5).to_le_bytes()).unwrap();
    std::fs::write(d.join("z.bin"), [0x03u8]).unwrap();
    let mut args = args;
    args[4] = "u4";
    args[6] = "bf16";
    args[20] = "u4";
    let out = d.join("y.bin");
    for (b, file) in run_on_every_backend(&args, &out) {
        assert_eq!(file, [0x80, 0x40], "{b}");
    }
}

#[test]
fn run_static_op_with_empty_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("q.bin"), []).unwrap();
    let q = p(&d.join("q.bin")).to_string();
    let static_args = |shape: &'static str, axis: &'static str| {
        vec![
            "run",
            "--op",
            "dequantize",
            "--src-type",
            "s8",
            "--dst-type",
            "f32",
            "--shape",
            shape,
            "--qtype",
            "per_channel",
            "--axis",
            axis,
            "--input",
            &q,
            "--scales",
            "",
        ]
    };
    // Per channel over the zero-sized axis 0, empty zero-point list too.
    let mut args = static_args("0x3", "0");
    args.extend(["--zps", ""]);
    let out = d.join("y.npy");
    for (b, file) in run_on_every_backend(&args, &out) {
        let (header, data) = npy_parts(&file);
        assert!(header.contains("'shape': (0, 3)"), "{b}: {header}");
        assert!(data.is_empty(), "{b}");
    }
    // Axis -1 of [2, 0], no zero points, to .bin: an empty file.
    let out = d.join("y.bin");
    for (b, file) in run_on_every_backend(&static_args("2x0", "-1"), &out) {
        assert!(file.is_empty(), "{b}");
    }
}

// --- errors: exit 2, one line, nothing written -----------------------------------

/// A valid dynamic u8 -> f32 per_tensor case in a temp dir, plus a pre-existing
/// output file `old.bin` to check that failures leave it alone.
struct ErrCase {
    dir: tempfile::TempDir,
}

const OLD: &[u8] = b"previous output";

impl ErrCase {
    fn new() -> ErrCase {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("src.bin"), [1u8, 2, 3, 4]).unwrap();
        std::fs::write(dir.path().join("scales.bin"), 0.5f32.to_le_bytes()).unwrap();
        std::fs::write(dir.path().join("zps.bin"), [1u8]).unwrap();
        std::fs::write(dir.path().join("old.bin"), OLD).unwrap();
        ErrCase { dir }
    }

    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    /// The valid argument list with `edit` applied (flag -> new value, or removed).
    fn args(&self, output: &str, edits: &[(&str, Option<&str>)]) -> Vec<String> {
        let mut flags: Vec<(String, String)> = [
            ("--op", "dynamic".to_string()),
            ("--src-type", "u8".into()),
            ("--dst-type", "f32".into()),
            ("--shape", "4".into()),
            ("--input", p(&self.path("src.bin")).into()),
            ("--scales", p(&self.path("scales.bin")).into()),
            ("--zps", p(&self.path("zps.bin")).into()),
            ("--zps-type", "u8".into()),
            ("--output", p(&self.path(output)).into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in edits {
            match (flags.iter().position(|(f, _)| f == k), v) {
                (Some(i), Some(v)) => flags[i].1 = v.to_string(),
                (Some(i), None) => {
                    flags.remove(i);
                }
                (None, Some(v)) => flags.push((k.to_string(), v.to_string())),
                (None, None) => {}
            }
        }
        std::iter::once("run".to_string())
            .chain(flags.into_iter().flat_map(|(k, v)| [k, v]))
            .collect()
    }

    /// Runs with `edits` twice (new output, existing output) and checks the failure.
    fn fails(&self, edits: &[(&str, Option<&str>)], message: &str) {
        self.fails_with(edits, message, dq);
    }

    /// [`fails`](Self::fails), running the binary through `run`.
    fn fails_with(
        &self,
        edits: &[(&str, Option<&str>)],
        message: &str,
        run: impl Fn(&[&str]) -> Output,
    ) {
        let before: Vec<PathBuf> = self.listing();
        for output in ["new.bin", "old.bin"] {
            let args = self.args(output, edits);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = run(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
            assert!(err.starts_with("dq: error: "), "{err}");
            assert!(err.contains(message), "expected {message:?} in {err:?}");
            assert!(o.stdout.is_empty());
            assert!(!self.path("new.bin").exists(), "output created on error");
            assert_eq!(
                std::fs::read(self.path("old.bin")).unwrap(),
                OLD,
                "output modified"
            );
            assert_eq!(self.listing(), before, "stray files left behind");
        }
    }

    fn listing(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }
}

#[test]
fn the_valid_error_case_succeeds() {
    let c = ErrCase::new();
    let args = c.args("new.bin", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_ok(&dq(&args));
    let got: Vec<f32> = f32s(&std::fs::read(c.path("new.bin")).unwrap());
    assert_eq!(got, [0.0, 0.5, 1.0, 1.5]);
}

#[test]
fn error_validation_rule() {
    ErrCase::new().fails(
        &[("--qtype", Some("per_channel")), ("--axis", Some("3"))],
        "axis 3 is out of range for rank 1 (expected -1 to 0)",
    );
}

#[test]
fn error_dtype_not_supported_by_op() {
    ErrCase::new().fails(
        &[("--dst-type", Some("f64"))],
        "DynamicDequantize: dst dtype f64 is not supported",
    );
}

#[test]
fn error_unknown_dtype() {
    ErrCase::new().fails(&[("--src-type", Some("i8"))], "unknown dtype `i8`");
}

#[test]
fn error_unknown_qtype() {
    ErrCase::new().fails(&[("--qtype", Some("per_row"))], "unknown qtype `per_row`");
}

#[test]
fn error_missing_required_flag() {
    ErrCase::new().fails(
        &[("--shape", None)],
        "required arguments were not provided: --shape",
    );
}

#[test]
fn error_unknown_flag() {
    ErrCase::new().fails(
        &[("--frobnicate", Some("1"))],
        "unexpected argument '--frobnicate'",
    );
}

#[test]
fn error_bad_shape() {
    ErrCase::new().fails(&[("--shape", Some("4xq"))], "`q` is not a size");
}

#[test]
fn error_bad_static_list() {
    ErrCase::new().fails(
        &[
            ("--op", Some("dequantize")),
            ("--zps-type", None),
            ("--zps", None),
            ("--scales", Some("0.5,abc")),
        ],
        "--scales: `abc` is not a number",
    );
}

#[test]
fn error_empty_static_list_where_one_scale_is_needed() {
    ErrCase::new().fails(
        &[
            ("--op", Some("dequantize")),
            ("--zps-type", None),
            ("--zps", None),
            ("--scales", Some("")),
        ],
        "Dequantize (per_tensor): expected 1 scales, got 0",
    );
}

#[test]
fn error_flag_not_for_op() {
    ErrCase::new().fails(
        &[("--axes", Some("0"))],
        "--axes is not used by --op dynamic",
    );
}

#[test]
fn error_missing_zps_type() {
    ErrCase::new().fails(&[("--zps-type", None)], "--op dynamic needs --zps-type");
}

#[test]
fn error_missing_input_file() {
    ErrCase::new().fails(
        &[("--input", Some("/nonexistent/src.bin"))],
        "/nonexistent/src.bin: No such file",
    );
}

#[test]
fn error_list_given_where_a_file_is_needed() {
    ErrCase::new().fails(
        &[("--scales", Some("0.5"))],
        "--scales: `0.5` is not a .bin or .npy file (--op dynamic reads scales from a file",
    );
}

#[test]
fn error_unknown_extension() {
    let c = ErrCase::new();
    std::fs::write(c.path("src.txt"), [1u8, 2, 3, 4]).unwrap();
    let input = c.path("src.txt");
    c.fails(
        &[("--input", Some(p(&input)))],
        "unknown file type (expected a .bin or .npy file)",
    );
}

#[test]
fn error_src_file_size() {
    let c = ErrCase::new();
    c.fails(
        &[("--shape", Some("3"))],
        "src file has 4 bytes, expected 3",
    );
    c.fails(
        &[("--shape", Some("5"))],
        "src buffer too small: u8 [5] needs 5 bytes, got 4",
    );
}

#[test]
fn error_param_shape() {
    ErrCase::new().fails(
        &[("--qtype", Some("per_channel")), ("--axis", Some("0"))],
        "scales shape [1] is wrong for per_channel on axis 0: expected [4]",
    );
}

#[test]
fn error_forged_npy_header() {
    let c = ErrCase::new();
    // Declares 2^40 elements but holds 4 bytes: rejected before any allocation.
    write_npy(
        &c.path("big.npy"),
        "|u1",
        &[1 << 20, 1 << 20],
        &[1, 2, 3, 4],
    );
    let big = c.path("big.npy");
    c.fails(
        &[("--input", Some(p(&big)))],
        "bad .npy file: header declares u8[1048576, 1048576]",
    );
    // Header length past the end of the file.
    let mut b = b"\x93NUMPY\x01\x00\xff\xff{".to_vec();
    b.extend_from_slice(&[b' '; 20]);
    std::fs::write(c.path("cut.npy"), b).unwrap();
    let cut = c.path("cut.npy");
    c.fails(
        &[("--input", Some(p(&cut)))],
        "header length 65535 does not fit the file",
    );
    std::fs::write(c.path("junk.npy"), b"not numpy at all").unwrap();
    let junk = c.path("junk.npy");
    c.fails(
        &[("--input", Some(p(&junk)))],
        "missing the \\x93NUMPY magic string",
    );
    write_npy(&c.path("be.npy"), ">i4", &[1], &[0, 0, 0, 1]);
    let be = c.path("be.npy");
    c.fails(
        &[("--scales", Some(p(&be)))],
        "only little-endian is supported",
    );
}

#[test]
fn error_npy_dtype_or_shape_differs_from_flags() {
    let c = ErrCase::new();
    write_npy(&c.path("s8.npy"), "|i1", &[4], &[1, 2, 3, 4]);
    let f = c.path("s8.npy");
    c.fails(
        &[("--input", Some(p(&f)))],
        ".npy holds s8 but --src-type is u8",
    );
    write_npy(&c.path("u8.npy"), "|u1", &[2, 2], &[1, 2, 3, 4]);
    let f = c.path("u8.npy");
    c.fails(
        &[("--input", Some(p(&f)))],
        ".npy has shape [2, 2] but --shape is [4]",
    );
    // Scales in a .npy bring their own dtype: validation names the rule.
    write_npy(&c.path("s64.npy"), "<f8", &[1], &0.5f64.to_le_bytes());
    let f = c.path("s64.npy");
    c.fails(
        &[("--scales", Some(p(&f)))],
        "scales dtype f64 is neither the dst dtype f32 nor e8m0",
    );
}

#[test]
fn error_numpy_has_no_bf16() {
    let c = ErrCase::new();
    std::fs::write(
        c.path("scales16.bin"),
        half::bf16::from_f32(0.5).to_le_bytes(),
    )
    .unwrap();
    let s = c.path("scales16.bin");
    let out = c.path("out.npy");
    c.fails(
        &[
            ("--dst-type", Some("bf16")),
            ("--scales", Some(p(&s))),
            ("--output", Some(p(&out))),
        ],
        "NumPy has no bf16 dtype; use a .bin file",
    );
    assert!(!out.exists());
}

/// Runs `dq` in a process that may not make memory executable (Linux's
/// memory-deny-write-execute, `PR_SET_MDWE`, as hardened services run): the JIT
/// cannot finalize its code there. `None` when the kernel lacks the control.
#[cfg(all(target_os = "linux", feature = "jit"))]
fn dq_without_exec_memory(args: &[&str]) -> Option<Output> {
    use std::os::unix::process::CommandExt;
    const PR_SET_MDWE: libc::c_int = 65;
    const PR_MDWE_REFUSE_EXEC_GAIN: libc::c_ulong = 1;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dq"));
    cmd.env("DQ_TUNING", "off");
    cmd.args(args);
    // SAFETY: the closure only calls prctl, which is async-signal-safe and touches
    // no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match cmd.output() {
        Ok(o) => Some(o),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
        Err(e) => panic!("running dq under PR_SET_MDWE: {e}"),
    }
}

/// `--backend jit` where the JIT cannot run: exit 2 with the JIT's reason, no
/// output; `auto` falls back to a compiled-in backend there and gives the bits.
#[test]
#[cfg(all(target_os = "linux", feature = "jit"))]
fn error_backend_unavailable() {
    let c = ErrCase::new();
    if dq_without_exec_memory(&["--help"]).is_none() {
        support::path_unavailable("jit refusal under PR_SET_MDWE (kernel older than 6.3)");
        return;
    }
    let run = |a: &[&str]| dq_without_exec_memory(a).unwrap();
    c.fails_with(
        &[("--backend", Some("jit"))],
        "backend `jit` is unavailable: Cranelift finalize: ",
        run,
    );
    let args = c.args("auto.bin", &[("--backend", Some("auto"))]);
    let o = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ok(&o);
    // src 1, 2, 3, 4 minus zero point 1, times 0.5.
    assert_eq!(
        f32s(&std::fs::read(c.path("auto.bin")).unwrap()),
        [0.0, 0.5, 1.0, 1.5]
    );
}

#[test]
fn error_zero_threads() {
    ErrCase::new().fails(
        &[("--threads", Some("0"))],
        "thread count must be at least 1",
    );
}

#[test]
fn error_output_folder_missing() {
    ErrCase::new().fails(
        &[("--output", Some("/nonexistent-dir/out.bin"))],
        "/nonexistent-dir/out.bin: No such file",
    );
}

// --- other subcommands -----------------------------------------------------------

#[test]
fn no_arguments_prints_help() {
    let o = dq(&[]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Usage: dq <COMMAND>") && out.contains("run") && out.contains("bench"),
        "{out}"
    );
}

#[test]
fn bench_json_has_every_field() {
    let o = dq(&[
        "bench",
        "--shape",
        "64x256",
        "--reps",
        "2",
        "--min-time",
        "0",
        "--threads",
        "2",
        "--json",
    ]);
    assert_ok(&o);
    let j: Value = serde_json::from_slice(&o.stdout).expect("bench --json prints JSON");
    let case = &j["case"];
    for k in [
        "op",
        "src_type",
        "dst_type",
        "zps_type",
        "shape",
        "qtype",
        "group_shape",
        "elements",
        "src_bytes",
        "dst_bytes",
        "threads",
    ] {
        assert!(case.get(k).is_some(), "case.{k} missing: {case}");
    }
    assert_eq!(case["op"], "dynamic");
    assert_eq!(case["src_type"], "u4");
    assert_eq!(case["dst_type"], "bf16");
    assert_eq!(case["elements"], 64 * 256);
    assert_eq!(case["src_bytes"], 64 * 256 / 2);
    assert_eq!(case["dst_bytes"], 64 * 256 * 2);
    let rows = j["backends"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["backend"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"reference") && names.contains(&"memcpy"),
        "{names:?}"
    );
    // Exactly the backends that can run this case (u4 -> bf16 per_group 1x128, u4 zps).
    let src = dq::TensorDesc::new(DType::U4, &[64, 256]);
    let params = dq::TensorDesc::new(DType::BF16, &[64, 2]);
    let zps = dq::TensorDesc::new(DType::U4, &[64, 2]);
    let dst = dq::TensorDesc::new(DType::BF16, &[64, 256]);
    let op = DynamicDequantize::per_group(vec![1, 128]).into();
    let plan = dq::Plan::new(&op, &src, Some(&params), Some(&zps), &dst).unwrap();
    let b = dq::backends();
    for (choice, name) in [
        (dq::Backend::Generated, "generated"),
        (dq::Backend::Jit, "jit"),
    ] {
        assert_eq!(
            names.contains(&name),
            b.select(choice, &plan).is_ok(),
            "{name}"
        );
    }
    for r in rows {
        let (t, g) = (r["median_s"].as_f64().unwrap(), r["gbps"].as_f64().unwrap());
        assert!(t > 0.0 && g > 0.0, "{r}");
        let name = r["backend"].as_str().unwrap();
        let bytes = if name == "memcpy" {
            2 * 64 * 256 * 2
        } else if name.starts_with("write:") {
            // The write roofline: dst alone.
            64 * 256 * 2
        } else {
            64 * 256 / 2 + 64 * 256 * 2
        };
        assert_eq!(r["bytes"], bytes);
        assert!((g - bytes as f64 / t / 1e9).abs() <= 1e-9 * g.max(1.0));
        assert!(r["reps"].as_u64().unwrap() >= 2);
        assert!(r["paired_ratio"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["vs_roofline"].as_f64().unwrap() > 0.0, "{r}");
    }
    // Every store strategy's write is timed; the roofline is the fastest of them.
    let writes: Vec<&Value> = (rows.iter())
        .filter(|r| r["backend"].as_str().unwrap().starts_with("write:"))
        .collect();
    assert_eq!(writes.len(), 3, "{j}");
    let best = (writes.iter())
        .min_by(|a, b| {
            a["median_s"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["median_s"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(j["roofline"], best["backend"]);
    assert_eq!(best["vs_roofline"].as_f64(), Some(1.0));
    // Ratios are paired with the first backend: its own is exactly 1.
    assert_eq!(j["paired_base"], rows[0]["backend"]);
    assert_eq!(rows[0]["paired_ratio"].as_f64(), Some(1.0));
    assert!(j.get("jit_compile_us").is_some());
    if names.contains(&"jit") {
        // A fresh process compiles the case's kernel once: a real, positive time.
        assert!(j["jit_compile_us"].as_f64().unwrap() > 0.0, "{j}");
    } else {
        assert!(j["jit_compile_us"].is_null());
    }
    assert_eq!(j["machine"]["pages"], "huge (MADV_HUGEPAGE)");
}

/// `dq bench` of the default case at `shape`, one quick round, plus `extra`.
fn quick_bench(shape: &str, extra: &[&str]) -> Output {
    let mut args = vec!["bench", "--shape", shape, "--reps", "1", "--min-time", "0"];
    args.extend(extra);
    dq(&args)
}

#[test]
fn bench_base_pages_is_said() {
    let quick = |extra: &[&str]| quick_bench("8x128", extra);
    let o = quick(&[]);
    assert_ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("buffers: huge (MADV_HUGEPAGE) pages"), "{out}");
    let o = quick(&["--base-pages", "--json"]);
    assert_ok(&o);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["machine"]["pages"], "base");
}

#[test]
fn bench_dst_offset_places_dst_and_says_where() {
    let quick = |extra: &[&str]| quick_bench("64x128", extra);
    for off in ["0", "16", "63"] {
        let o = quick(&["--dst-offset", off]);
        assert_ok(&o);
        let out = String::from_utf8_lossy(&o.stdout);
        let said = format!("dst {off} bytes past a 64-byte line");
        assert!(out.contains(&said), "{out}");
        let o = quick(&["--dst-offset", off, "--json"]);
        let j: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["machine"]["dst_line_offset"], off.parse::<u64>().unwrap());
    }
    let o = quick(&["--dst-offset", "64"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn bench_no_memcpy_times_the_backends_alone() {
    let o = quick_bench(
        "64x128",
        &["--backend", "generated", "--no-memcpy", "--json"],
    );
    assert_ok(&o);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = (j["backends"].as_array().unwrap().iter())
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["generated"]);
    let o = quick_bench("64x128", &["--backend", "generated", "--no-memcpy"]);
    assert_ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("generated")).unwrap();
    assert!(row.contains(" - "), "no ratio to a memcpy not run: {out}");
    assert!(!out.lines().any(|l| l.starts_with("memcpy")), "{out}");
    let o = quick_bench("64x128", &["--backend", "generated"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().any(|l| l.starts_with("memcpy")),
        "by default: {out}"
    );
}

#[test]
fn bench_limits_backends_and_rejects_unavailable_ones() {
    let o = dq(&[
        "bench",
        "--op",
        "axes",
        "--src-type",
        "s32",
        "--dst-type",
        "f64",
        "--shape",
        "8x8",
        "--axes",
        "1",
        "--backend",
        "reference",
        "--reps",
        "1",
        "--min-time",
        "0",
        "--json",
    ]);
    assert_ok(&o);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = j["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["backend"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "reference",
            "memcpy",
            "write:plain",
            "write:prefetch",
            "write:nontemporal"
        ]
    );
    assert_eq!(j["case"]["axes"], serde_json::json!([1]));
    if dq::backends().get(dq::Backend::Jit).is_none() {
        let o = dq(&["bench", "--shape", "8x128", "--backend", "jit"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("backend `jit` is unavailable"));
    }
    let o = dq(&["bench", "--shape", "8x128", "--group-shape", "1x0"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim(),
        "dq: error: group_shape entry 0 for dimension 1 is below 1"
    );
}

#[test]
fn demo_checks_bit_exactness() {
    let o = dq(&["demo", "--size", "64"]);
    assert_ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.matches("bit-exact vs the reference on").count(),
        2,
        "{out}"
    );
    assert!(out.contains("demo: all cases bit-exact"), "{out}");
}
