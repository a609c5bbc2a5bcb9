//! Hostile GGUF split sets: the `model` fixture set (`tests/fixtures/gguf/split`)
//! with its split keys forged (values and value types), parts cut short, removed,
//! swapped or taken from the other set, then opened by `Gguf::open` in process and
//! by `dq inspect` (whole and `--part-only`) and `dq convert` from any part, under
//! the same checks as [`super::headers`]: exit 0 or 2 with one line, never a panic
//! or a signal, nothing left behind by a failed convert. A set the library opens
//! converts, to the unsplit model's bytes; one it refuses, the CLI refuses.
//! Cases: `DQ_FILE_FUZZ_CASES` / 5 (default 60).

use std::path::{Path, PathBuf};
use std::time::Instant;

use proptest::prelude::*;

use super::headers::check_run;
use crate::files;

const KEYS: [(&str, usize); 3] = [
    ("split.no", 2),
    ("split.count", 2),
    ("split.tensors.count", 4),
];

#[derive(Clone, Debug)]
enum Mutation {
    /// Part `.0`'s key `.1` (of [`KEYS`]) set to a value (its low bytes).
    Key(usize, usize, u64),
    /// Part `.0`'s key `.1` given another value type id.
    KeyType(usize, usize, u32),
    /// Part `.0` cut at this fraction (per mille) of its length.
    Truncate(usize, u16),
    /// Part `.0` deleted.
    Remove(usize),
    /// Part `.0` replaced by part `.1` of this set.
    Swap(usize, usize),
    /// Part `.0` replaced by part `.1` of the other set (`lean`).
    Foreign(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let value = prop_oneof![
        0u64..5,
        Just(65535),
        Just(u64::MAX),
        Just(1 << 31),
        any::<u64>()
    ];
    prop_oneof![
        4 => (0usize..3, 0usize..3, value).prop_map(|(p, k, v)| Mutation::Key(p, k, v)),
        1 => (0usize..3, 0usize..3, 0u32..14).prop_map(|(p, k, t)| Mutation::KeyType(p, k, t)),
        2 => (0usize..3, 0u16..1000).prop_map(|(p, f)| Mutation::Truncate(p, f)),
        1 => (0usize..3).prop_map(Mutation::Remove),
        1 => (0usize..3, 0usize..3).prop_map(|(p, q)| Mutation::Swap(p, q)),
        1 => (0usize..3, 0usize..3).prop_map(|(p, q)| Mutation::Foreign(p, q)),
    ]
}

fn fixture(stem: &str, k: usize) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf/split");
    std::fs::read(dir.join(format!("{stem}-{:05}-of-00003.gguf", k + 1))).unwrap()
}

/// The offset of `key`'s value type id.
fn key_at(bytes: &[u8], key: &str) -> Option<usize> {
    let k = key.as_bytes();
    let at = bytes.windows(k.len()).position(|w| w == k)?;
    Some(at + k.len())
}

fn apply(parts: &mut [Option<Vec<u8>>; 3], m: &Mutation) {
    let poke = |b: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        if at + bytes.len() <= b.len() {
            b[at..at + bytes.len()].copy_from_slice(bytes);
        }
    };
    match *m {
        Mutation::Key(p, k, v) => {
            let (key, width) = KEYS[k];
            if let Some(b) = &mut parts[p]
                && let Some(at) = key_at(b, key)
            {
                poke(b, at + 4, &v.to_le_bytes()[..width]);
            }
        }
        Mutation::KeyType(p, k, t) => {
            if let Some(b) = &mut parts[p]
                && let Some(at) = key_at(b, KEYS[k].0)
            {
                poke(b, at, &t.to_le_bytes());
            }
        }
        Mutation::Truncate(p, f) => {
            if let Some(b) = &mut parts[p] {
                b.truncate(f as usize * b.len() / 1000);
            }
        }
        Mutation::Remove(p) => parts[p] = None,
        Mutation::Swap(p, q) => parts[p] = Some(fixture("model", q)),
        Mutation::Foreign(p, q) => parts[p] = Some(fixture("lean", q)),
    }
}

fn run_case(parts: &[Option<Vec<u8>>; 3], given: usize, unsplit: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = |k: usize| dir.path().join(format!("m-{:05}-of-00003.gguf", k + 1));
    for (k, b) in parts.iter().enumerate() {
        if let Some(b) = b {
            std::fs::write(path(k), b).unwrap();
        }
    }
    let input: PathBuf = path(given);
    let opened = dq::formats::gguf::Gguf::open(&input);
    if let Ok(g) = &opened {
        for t in g.tensors() {
            let d = g.tensor_data(t).map_err(|e| e.to_string())?;
            assert_eq!(Some(d.len()), t.byte_size());
        }
    }
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let output = out_dir.join("o.safetensors");
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    for args in [
        vec!["inspect", i],
        vec!["inspect", "--json", i],
        vec!["inspect", "--part-only", i],
        vec!["convert", i, o, "--threads", "2"],
    ] {
        let t = Instant::now();
        let out = files::dq_limited(&args, Some(super::AS_LIMIT));
        check_run(&format!("{args:?}"), &out, t.elapsed().as_secs_f64())?;
        if args[0] == "convert" {
            let left = files::entries(&out_dir);
            match (out.status.code(), &opened) {
                (Some(0), Ok(_)) if std::fs::read(&output).unwrap() == unsplit => {}
                (Some(0), _) => return Err(format!("convert: {left:?}, open: {opened:?}")),
                (_, Err(_)) if left.is_empty() => {}
                _ => {
                    let err = files::text(&out.stderr);
                    return Err(format!("convert: {err} {left:?}, open: {opened:?}"));
                }
            }
        }
    }
    Ok(())
}

/// The unsplit model converted by `dq convert`.
fn unsplit() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf/split/model.gguf");
    let out = dir.path().join("o.safetensors");
    let o = files::dq(&["convert", input.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", files::text(&o.stderr));
    std::fs::read(out).unwrap()
}

fn config() -> ProptestConfig {
    let cases = std::env::var("DQ_FILE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(60, |n| n.div_ceil(5));
    ProptestConfig {
        max_shrink_iters: 50,
        ..crate::support::seeded_config(file!(), cases)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_split_sets_exit_0_or_2_and_leave_nothing(
        given in 0usize..3,
        muts in prop::collection::vec(mutation(), 1..3),
    ) {
        let mut parts = [0, 1, 2].map(|k| Some(fixture("model", k)));
        for m in &muts {
            apply(&mut parts, m);
        }
        if let Err(e) = run_case(&parts, given, &unsplit()) {
            return Err(TestCaseError::fail(format!("{e}\nmutations: {muts:?}")));
        }
    }
}

/// The unmutated set converts from every part (the harness sees a success).
#[test]
fn unmutated_set_converts_from_every_part() {
    let parts = [0, 1, 2].map(|k| Some(fixture("model", k)));
    let unsplit = unsplit();
    for given in 0..3 {
        run_case(&parts, given, &unsplit).unwrap();
    }
}
