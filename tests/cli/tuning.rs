//! Races' choices remembered between runs (`DQ_TUNING`, `dq::races::memory`): a
//! `dq convert` whose `auto` races a GGUF type writes its choice to the file and
//! says what it kept; the next run starts from the file's choice, whatever it is;
//! `off` remembers nothing; a damaged file is ignored and replaced.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use super::files::{self, Q4_0, Tensor};

/// Enough 1024x1024 Q4_0 tensors (zero blocks) for `auto`'s race of the type to
/// end within one run (5 timed calls of each backend).
fn model(dir: &Path) -> std::path::PathBuf {
    let bytes = 1024 * 1024 / 32 * 18;
    let tensors: Vec<Tensor> = (0..12)
        .map(|i| Tensor::new(&format!("t{i}"), &[1024, 1024], Q4_0, vec![0; bytes]))
        .collect();
    let path = dir.join("m.gguf");
    fs::write(&path, files::gguf(&[], &tensors)).unwrap();
    path
}

fn convert(input: &Path, out: &Path, tuning: &str) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_dq"))
        .env("DQ_TUNING", tuning)
        .args(["convert", "--dtype", "bf16"])
        .args([input, out])
        .output()
        .expect("running the dq binary");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "dq convert failed: {err}");
    o
}

/// The backend `auto kept` for Q4_0 -> bf16, as the summary says.
fn kept(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("auto kept: "));
    let line = line.unwrap_or_else(|| panic!("no `auto kept` line in {out}"));
    let (_, rest) = line.split_once("gguf Q4_0 bf16: ").expect(line);
    rest.split([',', ' ']).next().unwrap().to_owned()
}

const KIND: &str = "\tbackend\tgguf Q4_0 bf16\t";

/// The file's choice for the kind (0 generated, 1 jit).
fn remembered(file: &Path) -> usize {
    let text = fs::read_to_string(file).unwrap();
    let line = text.lines().find(|l| l.contains(KIND)).expect(&text);
    line.rsplit('\t').next().unwrap().parse().unwrap()
}

#[test]
fn a_choice_is_written_and_the_next_run_starts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = model(dir.path());
    let file = dir.path().join("cache").join("tuning.tsv");
    let tuning = file.to_str().unwrap();
    let first = convert(&input, &dir.path().join("a.safetensors"), tuning);
    let name = ["generated", "jit"];
    let chosen = remembered(&file);
    assert_eq!(kept(&first), name[chosen]);
    assert!(String::from_utf8_lossy(&first.stdout).contains(&format!("remembered in {tuning}")));

    // The other backend in the file: the next run keeps it, untimed.
    let text = fs::read_to_string(&file).unwrap();
    let flip = |c: usize| text.replace(&format!("{KIND}{c}\n"), &format!("{KIND}{}\n", 1 - c));
    fs::write(&file, flip(chosen)).unwrap();
    let second = convert(&input, &dir.path().join("b.safetensors"), tuning);
    assert_eq!(kept(&second), name[1 - chosen]);
    assert_eq!(
        remembered(&file),
        1 - chosen,
        "a remembered choice is not raced again"
    );
    let a = fs::read(dir.path().join("a.safetensors")).unwrap();
    assert_eq!(a, fs::read(dir.path().join("b.safetensors")).unwrap());
}

#[test]
fn off_remembers_nothing_and_a_damaged_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let input = model(dir.path());
    let o = convert(&input, &dir.path().join("a.safetensors"), "off");
    assert!(String::from_utf8_lossy(&o.stdout).contains("not remembered (DQ_TUNING=off)"));
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        2,
        "only the input and output"
    );

    let file = dir.path().join("tuning.tsv");
    fs::write(
        &file,
        b"\xff\xfe garbage\nx\tbackend\tgguf Q4_0 bf16\tnot a number\n",
    )
    .unwrap();
    convert(
        &input,
        &dir.path().join("b.safetensors"),
        file.to_str().unwrap(),
    );
    assert!(remembered(&file) < 2);
}
