//! Hostile files through `dq inspect`, `dq convert` and `dq model` (issue 38, items
//! 4-7): names and keys of any length and with terminal escapes, FIFOs and devices
//! in place of files, an input truncated while it is read, and tensors larger than
//! memory. Each ends with exit 0 or 2 and one line, never a panic, a signal or a
//! hang, nothing raw on the terminal and no file left behind.
#![cfg(unix)]

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::files::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One Q8_0 block of scale 1 and values 0..32.
fn q8_block() -> Vec<u8> {
    let mut b = vec![0x00, 0x3C];
    b.extend(0..32u8);
    b
}

const EVIL: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}txt\n.weight";

// ---------------------------------------------------------------------------
// Item 4: names, keys and values of any length, escaped.

#[test]
fn inspect_prints_huge_names_and_keys_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let long_key = format!("k{}\u{1b}[31m", "e".repeat(70_000));
    let long_name = format!("t{}", "n".repeat(70_000));
    let kvs = [
        Kv::string(&long_key, "v"),
        Kv::string("general.architecture", "llama\u{1b}[5m"),
        Kv::string("s", "a\u{1b}[2Jb\u{9b}c"),
    ];
    let tensors = [
        Tensor::new(&long_name, &[32], Q8_0, q8_block()),
        Tensor::new(EVIL, &[32], Q8_0, q8_block()),
    ];
    let path = dir.path().join("evil.gguf");
    fs::write(&path, gguf(&kvs, &tensors)).unwrap();

    let o = dq(&["inspect", s(&path)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_no_raw_controls("stdout", &o.stdout);
    let out = text(&o.stdout);
    assert!(out.contains(&long_name), "the whole name is printed");
    assert!(out.contains(&format!("k{}\\u{{1b}}[31m", "e".repeat(70_000))));
    assert!(
        out.contains("architecture llama\\u{1b}[5m"),
        "{}",
        &out[..200]
    );
    assert!(out.contains("\"a\\u{1b}[2Jb\\u{9b}c\""));
    let evil = "evil\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{9b}31m\\u{202e}txt\\u{a}.weight";
    assert!(out.lines().any(|l| l.starts_with(evil)), "escaped row");

    let o = dq(&["inspect", "--json", s(&path)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_no_raw_controls("stdout", &o.stdout);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tensors"][0]["name"], long_name.as_str());
    assert_eq!(v["tensors"][1]["name"], EVIL, "JSON escapes are lossless");
    assert_eq!(v["metadata"][0]["key"], long_key.as_str());
}

#[test]
fn hf_inspect_prints_huge_and_evil_names_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("model.{}.weight", "x".repeat(70_000));
    let f32s = |n: usize| vec![0u8; 4 * n];
    let file = safetensors(
        &[
            (long.as_str(), safetensors::Dtype::F32, vec![2], f32s(2)),
            (EVIL, safetensors::Dtype::F32, vec![1], f32s(1)),
        ],
        None,
    );
    let path = dir.path().join("m.safetensors");
    fs::write(&path, file).unwrap();
    let o = dq(&["inspect", s(&path)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_no_raw_controls("stdout", &o.stdout);
    let out = text(&o.stdout);
    assert!(out.contains(&long));
    assert!(out.contains("evil\\u{1b}]0;pwned\\u{7}"), "{out:.300}");
    let o = dq(&["inspect", "--json", s(&path)]);
    assert_no_raw_controls("stdout", &o.stdout);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == EVIL)
    );

    // convert writes the names as they are, and says nothing raw.
    let out_path = dir.path().join("out.safetensors");
    let o = dq(&["convert", s(&path), s(&out_path)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let bytes = fs::read(&out_path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert!(st.names().contains(&EVIL));
}

#[test]
fn error_lines_quote_names_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = "dup\n\u{1b}[31mname\u{202e}";
    let path = dir.path().join("dup.gguf");
    let t = || Tensor::new(name, &[32], Q8_0, q8_block());
    fs::write(&path, gguf(&[], &[t(), t()])).unwrap();
    for cmd in ["inspect", "model"] {
        let err = assert_refused(&dq(&[cmd, s(&path)]));
        assert!(err.contains("dup\\u{a}\\u{1b}[31mname\\u{202e}"), "{err}");
    }
    // An unsupported type named on stderr by --skip-unsupported.
    let path = dir.path().join("skip.gguf");
    let tensors = [
        Tensor::new("ok", &[32], Q8_0, q8_block()),
        Tensor::new("x\u{1b}[1m", &[8], 24, vec![0; 8]), // I8
    ];
    fs::write(&path, gguf(&[], &tensors)).unwrap();
    let out = dir.path().join("o.safetensors");
    let o = dq(&["convert", s(&path), s(&out), "--skip-unsupported"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_no_raw_controls("stderr", &o.stderr);
    assert!(text(&o.stderr).contains("skipped x\\u{1b}[1m"));
}

// ---------------------------------------------------------------------------
// Item 5: FIFOs, devices and sockets are refused, symlinks to files followed.

/// `dq args` must be refused quickly with one line naming `kind`.
fn refused_quickly(args: &[&str], kind: &str) {
    let start = Instant::now();
    let err = assert_refused(&dq(args));
    assert!(
        err.contains(&format!("not a regular file (it is {kind})")),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{args:?} took too long"
    );
}

#[test]
fn fifos_and_devices_are_refused_before_opening() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.safetensors");
    for name in ["in.gguf", "in.safetensors", "plain"] {
        let fifo = d.join(name);
        mkfifo(&fifo);
        refused_quickly(&["inspect", s(&fifo)], "a FIFO");
        refused_quickly(&["convert", s(&fifo), s(&out)], "a FIFO");
        refused_quickly(&["model", s(&fifo)], "a FIFO");
    }
    refused_quickly(&["inspect", "/dev/zero"], "a character device");
    let link = d.join("zero.gguf");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    refused_quickly(&["convert", s(&link), s(&out)], "a character device");
    let sock = d.join("sock.gguf");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    refused_quickly(&["inspect", s(&sock)], "a socket");

    // dq run's inputs.
    let fifo = d.join("src.bin");
    mkfifo(&fifo);
    let (scales, o) = (d.join("scales.bin"), d.join("o.bin"));
    fs::write(&scales, 1f32.to_le_bytes()).unwrap();
    let run = [
        "run",
        "--op",
        "dynamic",
        "--src-type",
        "s8",
        "--dst-type",
        "f32",
        "--shape",
        "1",
        "--input",
        s(&fifo),
        "--scales",
        s(&scales),
        "--output",
        s(&o),
    ];
    refused_quickly(&run, "a FIFO");
    assert_eq!(entries(d).iter().filter(|e| e.starts_with('.')).count(), 0);
}

/// A copy of a checkpoint folder whose `file` is replaced by a FIFO.
fn checkpoint_with_fifo(case: &str, file: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("hf").join(case);
    for e in fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
    }
    let path = dir.path().join(file);
    fs::remove_file(&path).unwrap();
    mkfifo(&path);
    dir
}

#[test]
fn a_fifo_shard_config_or_index_is_refused() {
    let case = "awq-4bit-g16-sharded";
    let index: serde_json::Value = serde_json::from_slice(
        &fs::read(
            fixtures()
                .join("hf")
                .join(case)
                .join("model.safetensors.index.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let shard = index["weight_map"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    for file in [
        shard.as_str().unwrap(),
        "config.json",
        "model.safetensors.index.json",
    ] {
        let dir = checkpoint_with_fifo(case, file);
        refused_quickly(&["inspect", s(dir.path())], "a FIFO");
        let out = tempfile::tempdir().unwrap();
        let o = out.path().join("o.safetensors");
        refused_quickly(&["convert", s(dir.path()), s(&o)], "a FIFO");
        assert!(entries(out.path()).is_empty());
    }
}

#[test]
fn symlinks_to_regular_files_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("linked.gguf");
    std::os::unix::fs::symlink(fixtures().join("gguf/metadata.gguf"), &link).unwrap();
    let o = dq(&["inspect", s(&link)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A checkpoint folder made of links, as the HuggingFace cache is.
    let src = fixtures().join("hf/awq-4bit-g32");
    let ckpt = dir.path().join("snapshot");
    fs::create_dir(&ckpt).unwrap();
    for e in fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::os::unix::fs::symlink(e.path(), ckpt.join(e.file_name())).unwrap();
        }
    }
    let out = dir.path().join("out.safetensors");
    let o = dq(&["convert", s(&ckpt), s(&out)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

// ---------------------------------------------------------------------------
// Item 6: an input truncated while it is mapped.

const SIGBUS_LINE: &str = "dq: error: input file changed or shrank while being read (SIGBUS)\n";

/// Runs `dq convert INPUT OUT/out.safetensors extra` and truncates INPUT to
/// `keep` bytes as soon as the temporary output appears; `None` when the
/// conversion finished first.
fn truncate_while_converting(input: &Path, keep: u64, extra: &[&str]) -> Option<()> {
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out.safetensors");
    let mut args = vec!["convert", s(input), s(&out)];
    args.extend(extra);
    let child = std::process::Command::new(dq_bin())
        .env("DQ_TUNING", "off")
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while entries(out_dir.path()).is_empty() && start.elapsed() < HANG {
        std::thread::sleep(Duration::from_micros(200));
    }
    fs::OpenOptions::new()
        .write(true)
        .open(input)
        .unwrap()
        .set_len(keep)
        .unwrap();
    let o = wait_guarded(child, &args);
    if o.status.success() {
        fs::remove_file(&out).unwrap();
        return None;
    }
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // Read by dq: SIGBUS. Copied by the kernel from the map (`write(2)`): EFAULT.
    let efault = format!(
        "dq: error: {}: input file changed or shrank while being read\n",
        input.display()
    );
    let err = text(&o.stderr);
    assert!(err == SIGBUS_LINE || err == efault, "{err}");
    assert_eq!(
        entries(out_dir.path()),
        Vec::<String>::new(),
        "nothing left"
    );
    Some(())
}

/// Tries a few times (the conversion may win the race on a fast machine).
/// Writes `count` tensors of 4 Mi elements of `dtype`, every byte `byte`, as one
/// safetensors file at `path`; returns the header's length (where data starts).
fn write_big_safetensors(path: &Path, count: usize, dtype: safetensors::Dtype, byte: u8) -> u64 {
    let n = 4 << 20;
    let data = vec![byte; dtype.bitsize() / 8 * n];
    let names: Vec<String> = (0..count).map(|i| format!("t{i:02}")).collect();
    let tensors: Vec<_> = (names.iter())
        .map(|name| (name.as_str(), dtype, vec![n], data.clone()))
        .collect();
    let bytes = safetensors(&tensors, None);
    let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap());
    fs::write(path, bytes).unwrap();
    header
}

fn sigbus_race(ext: &str, make: impl Fn(&Path) -> u64, extra: &[&str]) {
    // One at a time: each writes hundreds of MB.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for attempt in 0..4 {
        let input = dir.path().join(format!("in{attempt}.{ext}"));
        let keep = make(&input);
        if truncate_while_converting(&input, keep, extra).is_some() {
            return;
        }
    }
    panic!("the conversion always finished before the input was truncated");
}

#[test]
fn a_gguf_truncated_while_converting_is_one_line_and_leaves_nothing() {
    // 48 Q4_0 tensors of 4 Mi elements: 113 MiB in, decoded by the reference on one
    // thread (seconds), so the truncation lands while tensors remain.
    sigbus_race(
        "gguf",
        |path| {
            let blocks = (4 << 20) / 32;
            let tensors: Vec<Tensor> = (0..48)
                .map(|i| {
                    let mut data = vec![0x11u8; blocks * 18];
                    for b in data.chunks_exact_mut(18) {
                        b[..2].copy_from_slice(&[0x00, 0x3C]);
                    }
                    Tensor::new(&format!("t{i:02}"), &[4 << 20], Q4_0, data)
                })
                .collect();
            let (header, _) = gguf_header(&[], &tensors);
            let bytes = gguf(&[], &tensors);
            fs::write(path, bytes).unwrap();
            header.len() as u64
        },
        &[
            "--backend",
            "reference",
            "--threads",
            "1",
            "--dtype",
            "bf16",
        ],
    );
}

#[test]
fn a_safetensors_file_truncated_while_converting_is_one_line_and_leaves_nothing() {
    // 24 f16 tensors of 4 Mi elements (192 MiB), converted to f32 one at a time.
    sigbus_race(
        "safetensors",
        |path| write_big_safetensors(path, 24, safetensors::Dtype::F16, 0x3C),
        &["--dtype", "f32", "--threads", "1"],
    );
}

#[test]
fn a_safetensors_file_truncated_while_copied_is_one_line_and_leaves_nothing() {
    // 16 f32 tensors of 4 Mi elements (256 MiB), copied as they are: the kernel reads
    // the map (`write(2)` from it), so the truncation shows as EFAULT or SIGBUS.
    sigbus_race(
        "safetensors",
        |path| write_big_safetensors(path, 16, safetensors::Dtype::F32, 0x3F),
        &["--threads", "1"],
    );
}

// ---------------------------------------------------------------------------
// Item 7: a tensor larger than memory is refused before anything is allocated.

/// A sparse GGUF file (604 MB on paper, a page on disk) declaring one Q4_0 tensor
/// of 2^30 elements: 4 GiB as f32.
fn sparse_huge(dir: &Path) -> std::path::PathBuf {
    let t = Tensor::new("huge", &[1 << 30], Q4_0, Vec::new());
    let (header, _) = gguf_header(&[], &[t]);
    let path = dir.join("huge.gguf");
    fs::write(&path, &header).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(header.len() as u64 + (1 << 25) * 18).unwrap();
    path
}

#[test]
fn a_tensor_larger_than_memory_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let input = sparse_huge(dir.path());
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out.safetensors");
    let err = assert_refused(&dq(&["convert", s(&input), s(&out), "--max-memory", "1G"]));
    assert!(
        err.contains("tensor huge needs 4294967296 bytes of memory, more than --max-memory allows (1073741824 bytes)"),
        "{err}"
    );
    assert!(entries(out_dir.path()).is_empty());
    // Under a 1 GiB address-space limit and no flag: the limit is read, not hit.
    let err = assert_refused(&dq_limited(&["convert", s(&input), s(&out)], Some(1 << 30)));
    assert!(err.contains("address-space limit (RLIMIT_AS)"), "{err}");
    assert!(entries(out_dir.path()).is_empty());
    let err = assert_refused(&dq(&["model", s(&input), "--max-memory", "3G"]));
    assert!(err.contains("tensor huge needs 4294967296 bytes"), "{err}");
    // Inspecting it allocates nothing.
    let o = dq_limited(&["inspect", s(&input)], Some(1 << 30));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = assert_refused(&dq(&[
        "convert",
        s(&input),
        s(&out),
        "--max-memory",
        "lots",
    ]));
    assert!(err.contains("`lots` is not a size"), "{err}");
}

#[test]
fn stale_temporary_files_of_dead_processes_are_swept() {
    let out_dir = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let live = format!(".dq-convert-{me}-live.tmp");
    // Above the kernel's largest pid (2^22): no such process runs.
    let stale = ".dq-convert-999999999-stale.tmp";
    for name in [live.as_str(), stale, "keep.txt"] {
        fs::write(out_dir.path().join(name), b"x").unwrap();
    }
    let out = out_dir.path().join("out.safetensors");
    let input = fixtures().join("gguf/metadata.gguf");
    let o = dq(&["convert", s(&input), s(&out)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        entries(out_dir.path()),
        [live.as_str(), "keep.txt", "out.safetensors"]
    );
}
