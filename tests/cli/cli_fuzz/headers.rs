//! Hostile GGUF and safetensors headers: small valid files (built here, and the
//! committed fixtures) mutated — truncated anywhere, counts, string lengths, dims,
//! types and offsets forged (huge, zero, off by one), the safetensors header length
//! and JSON forged (shapes, offsets, dtypes, names with terminal escapes), bytes
//! flipped — then read by the parsers in process and by `dq inspect`, `dq inspect
//! --json` and `dq convert` under a 1 GiB address-space limit.
//!
//! Each run must exit 0 or 2 (never a panic or a signal) within the hang guard, with
//! exactly one stderr line on exit 2, no raw control character on stdout or stderr,
//! and for `convert` an output folder holding the output on success and nothing on
//! failure; the largest child's peak RSS (`getrusage(RUSAGE_CHILDREN)`) stays under
//! 1 GB. Cases: `DQ_FILE_FUZZ_CASES` (default 300).

use std::path::Path;
use std::process::Output;
use std::time::Instant;

use proptest::prelude::*;
use safetensors::Dtype;

use super::files::{self, Kv, Tensor};

/// A seed file: its bytes, the GGUF field offsets (empty for the others), extension.
type Seed = (Vec<u8>, Vec<(usize, usize)>, &'static str);

/// The seeds.
fn seeds() -> Vec<Seed> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |p: &str| std::fs::read(fixtures.join(p)).unwrap();
    let mut q8 = vec![0x00, 0x3C];
    q8.extend(0..32u8);
    let kvs = [
        Kv::string("general.architecture", "llama"),
        Kv {
            key: b"general.alignment".to_vec(),
            ty: 4,
            value: 32u32.to_le_bytes().to_vec(),
        },
        Kv {
            key: b"tokens".to_vec(),
            ty: 9,
            value: [
                8u32.to_le_bytes().as_slice(),
                &2u64.to_le_bytes(),
                &1u64.to_le_bytes(),
                b"a",
                &1u64.to_le_bytes(),
                b"b",
            ]
            .concat(),
        },
    ];
    let tensors = [
        Tensor::new("blk.0.q8", &[32, 2], files::Q8_0, [q8.clone(), q8].concat()),
        Tensor::new(
            "blk.0.f16",
            &[4],
            files::F16,
            vec![0, 0x3C, 0, 0xC0, 0, 0x7C, 1, 0],
        ),
        Tensor::new("blk.0.q4", &[32], files::Q4_0, vec![0x11; 18]),
        Tensor::new("blk.0.f32", &[2], files::F32, vec![0; 8]),
    ];
    let (built, fields) = files::gguf_fields(&kvs, &tensors);
    let st = files::safetensors(
        &[
            ("a.weight", Dtype::F16, vec![2, 3], vec![0x3C; 12]),
            ("b.bias", Dtype::F32, vec![3], vec![0; 12]),
            ("c.idx", Dtype::I32, vec![2], vec![1; 8]),
            ("d.bf16", Dtype::BF16, vec![1, 2], vec![0x80, 0x3F, 0, 0]),
        ],
        None,
    );
    vec![
        (built, fields, "gguf"),
        (read("gguf/metadata.gguf"), Vec::new(), "gguf"),
        (st, Vec::new(), "safetensors"),
        (
            read("hf/single-file/gptq-v2.safetensors"),
            Vec::new(),
            "safetensors",
        ),
    ]
}

/// Values a forged field takes.
fn forged() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        Just(5),
        Just(31),
        Just(1 << 30),
        Just(1 << 32),
        Just((1 << 32) + 1),
        Just(1 << 62),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        Just(u32::MAX as u64),
        any::<u64>(),
        0u64..4096,
    ]
}

/// Text that must reach the terminal escaped.
fn evil_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\u{1b}[2J\u{1b}]0;x\u{7}".to_string()),
        Just("\u{9b}31m".to_string()),
        Just("\u{202e}".to_string()),
        Just("\n\r\t\u{7f}".to_string()),
        (1usize..70_000).prop_map(|n| "n".repeat(n)),
    ]
}

/// One mutation.
#[derive(Clone, Debug)]
enum Mutation {
    /// Cut the file at this fraction (per mille) of its length.
    Truncate(u16),
    /// A GGUF field (by index) set to a value.
    Field(usize, u64),
    /// Any 8 (or 4) bytes at a fraction of the header.
    Word(u16, u64, bool),
    /// One byte flipped.
    Flip(u16, u8),
    /// Text inserted at a fraction of the header.
    Insert(u16, String),
    /// safetensors: the header length prefix forged.
    StLen(u64),
    /// safetensors: one tensor's JSON entry edited.
    StJson(usize, JsonEdit),
}

#[derive(Clone, Debug)]
enum JsonEdit {
    Shape(Vec<u64>),
    Offsets(u64, u64),
    Dtype(String),
    Rename(String),
    Metadata(String, String),
    Junk(String),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        prop::collection::vec(forged(), 0..5).prop_map(JsonEdit::Shape),
        (forged(), forged()).prop_map(|(a, b)| JsonEdit::Offsets(a, b)),
        prop_oneof![
            Just("F64"),
            Just("U8"),
            Just("I64"),
            Just("BOOL"),
            Just("F8_E4M3"),
            Just("Q4"),
            Just(""),
            Just("F4")
        ]
        .prop_map(|s| JsonEdit::Dtype(s.into())),
        evil_text().prop_map(JsonEdit::Rename),
        (
            prop_oneof![Just("format"), Just("quant_method"), Just("bits")],
            prop_oneof![
                Just("gptq".to_string()),
                Just("awq".to_string()),
                evil_text()
            ],
        )
            .prop_map(|(k, v)| JsonEdit::Metadata(k.into(), v)),
        "[\\[\\]{}\",:0-9a-z ]{0,12}".prop_map(JsonEdit::Junk),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0u16..1000;
    prop_oneof![
        2 => at.clone().prop_map(Mutation::Truncate),
        4 => (any::<usize>(), forged()).prop_map(|(i, v)| Mutation::Field(i, v)),
        2 => (at.clone(), forged(), any::<bool>()).prop_map(|(a, v, w)| Mutation::Word(a, v, w)),
        1 => (at.clone(), 1u8..=255).prop_map(|(a, x)| Mutation::Flip(a, x)),
        1 => (at, evil_text()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        1 => forged().prop_map(Mutation::StLen),
        4 => (any::<usize>(), json_edit()).prop_map(|(i, e)| Mutation::StJson(i, e)),
    ]
}

/// Where the header ends (what mutations aim at): GGUF's first data byte as built,
/// safetensors' `8 + n`.
fn header_len(bytes: &[u8], ext: &str) -> usize {
    if ext == "safetensors" && bytes.len() >= 8 {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        n.saturating_add(8).min(bytes.len() as u64) as usize
    } else {
        bytes.len().min(1024)
    }
}

/// Applies `m`; `fields` are the GGUF seed's field offsets.
fn apply(bytes: &mut Vec<u8>, fields: &[(usize, usize)], ext: &str, m: &Mutation) {
    let len = bytes.len();
    let head = header_len(bytes, ext).max(1);
    let at = |f: u16| f as usize * head / 1000;
    match m {
        Mutation::Truncate(f) => bytes.truncate(*f as usize * len / 1000),
        Mutation::Field(i, v) if !fields.is_empty() => {
            let (off, w) = fields[i % fields.len()];
            if off + w <= len {
                bytes[off..off + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        Mutation::Word(f, v, wide) => {
            let (off, w) = (at(*f), if *wide { 8 } else { 4 });
            if off + w <= len {
                bytes[off..off + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        Mutation::Flip(f, x) if at(*f) < len => bytes[at(*f)] ^= x,
        Mutation::Insert(f, t) => {
            let off = at(*f).min(len);
            bytes.splice(off..off, t.bytes());
        }
        Mutation::StLen(v) if ext == "safetensors" && len >= 8 => {
            bytes[..8].copy_from_slice(&v.to_le_bytes());
        }
        Mutation::StJson(i, e) if ext == "safetensors" => edit_json(bytes, *i, e),
        _ => {}
    }
}

/// Rewrites the safetensors header with one entry edited (the length prefix fixed).
fn edit_json(bytes: &mut Vec<u8>, i: usize, e: &JsonEdit) {
    let head = header_len(bytes, "safetensors");
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes[8.min(head)..head]) else {
        return;
    };
    let Some(obj) = v.as_object_mut() else {
        return;
    };
    let names: Vec<String> = obj
        .keys()
        .filter(|k| *k != "__metadata__")
        .cloned()
        .collect();
    if names.is_empty() {
        return;
    }
    let name = names[i % names.len()].clone();
    let mut text = None;
    match e {
        JsonEdit::Shape(s) => obj[&name]["shape"] = serde_json::json!(s),
        JsonEdit::Offsets(a, b) => obj[&name]["data_offsets"] = serde_json::json!([a, b]),
        JsonEdit::Dtype(d) => obj[&name]["dtype"] = serde_json::json!(d),
        JsonEdit::Rename(t) => {
            let entry = obj.remove(&name).unwrap();
            obj.insert(format!("{name}{t}"), entry);
        }
        JsonEdit::Metadata(k, val) => {
            obj.entry("__metadata__").or_insert(serde_json::json!({}))[k] = serde_json::json!(val);
        }
        JsonEdit::Junk(j) => {
            let s = serde_json::to_string(&v).unwrap();
            let cut = i % (s.len() + 1);
            text = Some(format!("{}{j}{}", &s[..cut], &s[cut..]));
        }
    }
    let text = text.unwrap_or_else(|| serde_json::to_string(&v).unwrap());
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text.as_bytes());
    out.extend(&bytes[head..]);
    *bytes = out;
}

/// The parsers in process: a result, never a panic, and views that fit.
fn parse_in_process(bytes: &[u8], path: &Path, ext: &str) {
    if ext == "gguf" {
        if let Ok(g) = dq::formats::gguf::Gguf::from_bytes(bytes) {
            for t in g.tensors() {
                if let Ok(d) = g.tensor_data(t) {
                    assert_eq!(Some(d.len()), t.byte_size());
                }
            }
            let _ = g.metadata().count();
        }
    } else if let Ok(c) = dq::formats::hf::Checkpoint::open(path) {
        for t in c.tensors() {
            let _ = t.data().len();
        }
        let _ = c.linears().count();
    }
}

/// The largest peak RSS of any child waited for so far, in bytes.
fn children_max_rss() -> u64 {
    // SAFETY: an all-zero `rusage` is valid for getrusage to fill.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is valid for writing.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) };
    r.ru_maxrss as u64 * 1024
}

/// Checks one run's outcome.
pub(super) fn check_run(what: &str, o: &Output, secs: f64) -> Result<(), String> {
    use std::os::unix::process::ExitStatusExt;
    let err = files::text(&o.stderr);
    for (name, out) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if let Some(c) = files::text(out).chars().find(|&c| files::is_raw_control(c)) {
            return Err(format!("{what}: raw {c:?} on {name}"));
        }
    }
    match o.status.code() {
        Some(0) => {}
        Some(2) if err.lines().count() == 1 && err.starts_with("dq: error: ") => {}
        Some(2) => return Err(format!("{what}: exit 2 needs one line, got {err:?}")),
        code => {
            return Err(format!(
                "{what}: exit {code:?} signal {:?}: {err}",
                o.status.signal()
            ));
        }
    }
    let rss = children_max_rss();
    if rss >= 1_000_000_000 {
        return Err(format!("{what}: a child's peak RSS was {rss} bytes"));
    }
    if secs > 20.0 {
        return Err(format!("{what}: took {secs:.1} s"));
    }
    Ok(())
}

fn run_case(bytes: &[u8], ext: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join(format!("in.{ext}"));
    std::fs::write(&input, bytes).unwrap();
    parse_in_process(bytes, &input, ext);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let output = out_dir.join("out.safetensors");
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    let limit = Some(super::AS_LIMIT);
    for args in [
        vec!["inspect", i],
        vec!["inspect", "--json", i],
        vec!["convert", i, o, "--threads", "2"],
    ] {
        let t = Instant::now();
        let out = files::dq_limited(&args, limit);
        check_run(&format!("{args:?}"), &out, t.elapsed().as_secs_f64())?;
        if args[0] == "convert" {
            let left = files::entries(&out_dir);
            match out.status.code() {
                Some(0) if left == ["out.safetensors"] => {
                    let b = std::fs::read(&output).unwrap();
                    safetensors::SafeTensors::deserialize(&b)
                        .map_err(|e| format!("convert wrote an unreadable file: {e}"))?;
                }
                Some(0) => return Err(format!("convert succeeded, folder holds {left:?}")),
                _ if left.is_empty() => {}
                _ => return Err(format!("convert failed, folder holds {left:?}")),
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("DQ_FILE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    ProptestConfig {
        max_shrink_iters: 100,
        ..crate::support::seeded_config(file!(), cases)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_headers_exit_0_or_2_and_leave_nothing(
        seed in 0usize..4,
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let seeds = seeds();
        let (mut bytes, fields, ext) = seeds[seed].clone();
        for m in &muts {
            apply(&mut bytes, &fields, ext, m);
        }
        if let Err(e) = run_case(&bytes, ext) {
            return Err(TestCaseError::fail(format!("{e}\nmutations: {muts:?}")));
        }
    }
}

/// The seeds themselves convert (the harness can see a success).
#[test]
fn unmutated_seeds_convert() {
    for (bytes, _, ext) in seeds() {
        run_case(&bytes, ext).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join(format!("in.{ext}"));
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.path().join("o.safetensors");
        let o = files::dq(&["convert", input.to_str().unwrap(), out.to_str().unwrap()]);
        assert!(o.status.success(), "{ext}: {}", files::text(&o.stderr));
    }
}
