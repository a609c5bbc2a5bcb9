//! Hostile input files for the CLI tests: GGUF and safetensors bytes built field by
//! field (any name, key or size), running `dq` with a hang guard and an optional
//! address-space limit, and checks on what reaches the terminal.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A GGUF metadata value as stored: type id and bytes.
pub struct Kv {
    pub key: Vec<u8>,
    pub ty: u32,
    pub value: Vec<u8>,
}

impl Kv {
    /// A string value.
    pub fn string(key: &str, value: &str) -> Kv {
        let mut v = (value.len() as u64).to_le_bytes().to_vec();
        v.extend(value.as_bytes());
        Kv {
            key: key.as_bytes().to_vec(),
            ty: 8,
            value: v,
        }
    }
}

/// A GGUF tensor: name, `ne`, type id, data.
pub struct Tensor {
    pub name: Vec<u8>,
    pub ne: Vec<u64>,
    pub ty: u32,
    pub data: Vec<u8>,
}

impl Tensor {
    pub fn new(name: &str, ne: &[u64], ty: u32, data: Vec<u8>) -> Tensor {
        Tensor {
            name: name.as_bytes().to_vec(),
            ne: ne.to_vec(),
            ty,
            data,
        }
    }
}

/// GGUF type ids used here.
pub const F32: u32 = 0;
pub const F16: u32 = 1;
pub const Q4_0: u32 = 2;
pub const Q8_0: u32 = 8;

/// A GGUF v3 file (alignment 32): header, metadata, tensor infos, then the tensors'
/// data back to back, each aligned to 32.
pub fn gguf(kvs: &[Kv], tensors: &[Tensor]) -> Vec<u8> {
    gguf_fields(kvs, tensors).0
}

/// [`gguf`], and where its count, length, dim, type and offset fields are
/// (`(offset, width in bytes)`), for mutations.
pub fn gguf_fields(kvs: &[Kv], tensors: &[Tensor]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let (mut f, offsets, fields) = layout(kvs, tensors);
    for (t, off) in tensors.iter().zip(offsets) {
        f.resize(f.len().max(off), 0);
        f.extend(&t.data);
    }
    (f, fields)
}

/// The header part of [`gguf`] (up to the aligned data start), and the file offset
/// of each tensor's data.
pub fn gguf_header(kvs: &[Kv], tensors: &[Tensor]) -> (Vec<u8>, Vec<usize>) {
    let (f, offsets, _) = layout(kvs, tensors);
    (f, offsets)
}

fn layout(kvs: &[Kv], tensors: &[Tensor]) -> (Vec<u8>, Vec<usize>, Vec<(usize, usize)>) {
    let mut fields = Vec::new();
    let mut f = b"GGUF".to_vec();
    let put = |f: &mut Vec<u8>, fields: &mut Vec<(usize, usize)>, bytes: &[u8]| {
        fields.push((f.len(), bytes.len()));
        f.extend(bytes);
    };
    put(&mut f, &mut fields, &3u32.to_le_bytes());
    put(&mut f, &mut fields, &(tensors.len() as u64).to_le_bytes());
    put(&mut f, &mut fields, &(kvs.len() as u64).to_le_bytes());
    for kv in kvs {
        put(&mut f, &mut fields, &(kv.key.len() as u64).to_le_bytes());
        f.extend(&kv.key);
        put(&mut f, &mut fields, &kv.ty.to_le_bytes());
        if kv.ty == 8 || kv.ty == 9 {
            // A string's length, or an array's element type.
            fields.push((f.len(), if kv.ty == 8 { 8 } else { 4 }));
        }
        if kv.ty == 9 {
            fields.push((f.len() + 4, 8)); // the array's count
        }
        f.extend(&kv.value);
    }
    let mut offset = 0u64;
    let mut rel = Vec::new();
    for t in tensors {
        put(&mut f, &mut fields, &(t.name.len() as u64).to_le_bytes());
        f.extend(&t.name);
        put(&mut f, &mut fields, &(t.ne.len() as u32).to_le_bytes());
        for n in &t.ne {
            put(&mut f, &mut fields, &n.to_le_bytes());
        }
        put(&mut f, &mut fields, &t.ty.to_le_bytes());
        put(&mut f, &mut fields, &offset.to_le_bytes());
        rel.push(offset);
        offset = (offset + t.data.len() as u64).next_multiple_of(32);
    }
    f.resize(f.len().next_multiple_of(32), 0);
    let start = f.len();
    let offsets = rel.iter().map(|&r| start + r as usize).collect();
    (f, offsets, fields)
}

/// A safetensors file of `(name, dtype, shape, bytes)` tensors, `metadata` in its
/// header.
pub fn safetensors(
    tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)],
    metadata: Option<std::collections::HashMap<String, String>>,
) -> Vec<u8> {
    let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            let v = safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap();
            (*n, v)
        })
        .collect();
    safetensors::serialize(views, metadata).unwrap()
}

/// The binary under test: this package's `dq`, or `DQ_CLI_BIN` when set.
pub fn dq_bin() -> String {
    std::env::var("DQ_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_dq").to_string())
}

/// Longest a `dq` run may take before it counts as a hang.
pub const HANG: Duration = Duration::from_secs(60);

/// Runs `dq` (stdin closed) with a hang guard; with `as_limit`, under that
/// `RLIMIT_AS`.
pub fn dq_limited(args: &[&str], as_limit: Option<u64>) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(dq_bin());
    cmd.env("DQ_TUNING", "off");
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(limit) = as_limit {
        // SAFETY: the closure only calls setrlimit, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd.spawn().expect("running the dq binary");
    wait_guarded(child, args)
}

/// Waits for `child` while reading its output, killing it (and failing) after
/// [`HANG`].
pub fn wait_guarded(child: std::process::Child, args: &[&str]) -> Output {
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(HANG) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: plain kill(2) of our own child, not yet reaped (the reader
            // thread waits for it), so the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let out = rx.recv().unwrap().unwrap();
            panic!("dq {args:?} hangs (killed after {HANG:?}): {out:?}");
        }
    }
}

pub fn dq(args: &[&str]) -> Output {
    dq_limited(args, None)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Characters that must never reach the terminal raw: controls but the newline,
/// bidirectional controls and invisible marks.
pub fn is_raw_control(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Fails when `out` (stdout or stderr) holds a raw control character.
pub fn assert_no_raw_controls(what: &str, out: &[u8]) {
    let s = text(out);
    if let Some((i, c)) = s.char_indices().find(|&(_, c)| is_raw_control(c)) {
        panic!("{what}: raw {c:?} at byte {i}");
    }
}

/// Exit 2, exactly one line on stderr (returned), nothing raw on the terminal.
pub fn assert_refused(o: &Output) -> String {
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout {} stderr {err}",
        text(&o.stdout)
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("dq: error: "), "{err}");
    assert_no_raw_controls("stderr", &o.stderr);
    err
}

/// The names of the entries of `dir`.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}
