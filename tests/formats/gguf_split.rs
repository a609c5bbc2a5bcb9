//! gguf-split sets (`scripts/make_gguf_split_fixtures.py`: gguf-py 0.19.0's own
//! splitting): any part opens the whole model, equal to the unsplit file tensor for
//! tensor, byte for byte; a part reads alone on request; a missing part, a part of
//! another set, forged split keys and bad parts are clear errors.

use std::path::{Path, PathBuf};

use dq::formats::gguf::{Gguf, GgufError, MetaValue, Split};
use dq::{Backend, Options};

use crate::support::gguf::fixtures;

fn split_dir() -> PathBuf {
    fixtures().join("split")
}

fn part(stem: &str, k: u32) -> PathBuf {
    split_dir().join(format!("{stem}-{k:05}-of-00003.gguf"))
}

fn whole() -> Gguf {
    Gguf::open(split_dir().join("model.gguf")).unwrap()
}

/// The set has the unsplit model's tensors (name, type, shape, bytes) in its order,
/// and its metadata plus the three split keys.
fn assert_same_model<B: AsRef<[u8]>>(set: &Gguf<B>, parts_tensors: &[usize]) {
    let one = whole();
    assert_eq!(set.part_count(), 3);
    assert_eq!(set.tensors().len(), one.tensors().len());
    for (a, b) in set.tensors().iter().zip(one.tensors()) {
        assert_eq!(
            (a.name(), a.ggml_type(), a.ne()),
            (b.name(), b.ggml_type(), b.ne())
        );
        assert_eq!(set.tensor_data(a).unwrap(), one.tensor_data(b).unwrap());
    }
    let per_part: Vec<usize> = (0..3)
        .map(|k| set.tensors().iter().filter(|t| t.part() == k).count())
        .collect();
    assert_eq!(per_part, parts_tensors);
    for (key, value) in one.metadata() {
        assert_eq!(set.get(key), Some(value), "{key}");
    }
    assert_eq!(set.metadata_len(), one.metadata_len() + 3);
    assert_eq!(set.get("split.no"), Some(MetaValue::U16(0)));
    assert_eq!(set.get("split.tensors.count"), Some(MetaValue::I32(7)));
    let split = Split {
        no: 0,
        count: 3,
        tensors: 7,
    };
    assert_eq!(set.split(), Some(split));
}

#[test]
fn any_part_opens_the_whole_set() {
    for (stem, per_part) in [("model", [3, 3, 1]), ("lean", [0, 4, 3])] {
        for k in 1..=3 {
            assert_same_model(&Gguf::open(part(stem, k)).unwrap(), &per_part);
            // SAFETY: the fixtures are not modified while mapped.
            let mapped = unsafe { Gguf::map(part(stem, k)) }.unwrap();
            assert_same_model(&mapped, &per_part);
        }
        let bytes: Vec<Vec<u8>> = (1..=3)
            .map(|k| std::fs::read(part(stem, k)).unwrap())
            .collect();
        assert_same_model(&Gguf::from_parts(bytes).unwrap(), &per_part);
    }
    assert_eq!(whole().split(), None);
    assert_eq!(whole().part_count(), 1);
}

#[test]
fn a_set_dequantizes_as_the_unsplit_model() {
    let (set, one) = (Gguf::open(part("model", 3)).unwrap(), whole());
    for backend in [Backend::Reference, Backend::Generated, Backend::Auto] {
        let opts = Options::new().with_backend(backend).with_threads(2);
        for t in set.tensors() {
            let n = t.element_count() as usize;
            let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
            set.dequantize(t, &mut a, &opts).unwrap();
            let u = one.tensor(t.name()).unwrap();
            one.dequantize(u, &mut b, &opts).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "{} on {backend}", t.name());
            assert!(
                a.iter().any(|x| *x != 0.0),
                "{}: decodes to numbers",
                t.name()
            );
        }
    }
}

#[test]
fn a_part_reads_alone_on_request() {
    let p = Gguf::open_part(part("model", 2)).unwrap();
    assert_eq!(p.part_count(), 1);
    let s = p.split().unwrap();
    assert_eq!((s.no, s.part(), s.count, s.tensors), (1, 2, 3, 7));
    let names: Vec<&str> = p.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "blk.0.ffn_down.weight",
            "blk.0.ffn_up.weight",
            "blk.0.ffn_norm.weight"
        ]
    );
    assert!(p.tensors().iter().all(|t| t.part() == 0));
    // Parts after the first hold the split keys only.
    let keys: Vec<&str> = p.metadata().map(|(k, _)| k).collect();
    assert_eq!(keys, ["split.no", "split.count", "split.tensors.count"]);
    // From bytes too (one buffer is that file, as it is).
    let bytes = std::fs::read(part("model", 2)).unwrap();
    assert_eq!(Gguf::from_bytes(&bytes).unwrap().tensors().len(), 3);
    assert!(matches!(
        Gguf::from_parts(vec![&bytes[..]]),
        Err(GgufError::ForeignPart { part: 1, .. })
    ));
}

/// A temporary folder holding the `model` set's parts (`names[k]` for part k+1,
/// `None` leaves it out), the bytes passed through `edit(k, bytes)`.
fn copy_set(names: [Option<&str>; 3], edit: impl Fn(u32, &mut Vec<u8>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (k, name) in (1..=3).zip(names) {
        if let Some(name) = name {
            let mut b = std::fs::read(part("model", k)).unwrap();
            edit(k, &mut b);
            std::fs::write(dir.path().join(name), b).unwrap();
        }
    }
    dir
}

const NAMES: [Option<&str>; 3] = [
    Some("m-00001-of-00003.gguf"),
    Some("m-00002-of-00003.gguf"),
    Some("m-00003-of-00003.gguf"),
];

/// The offset of `key`'s value type id in a GGUF file's bytes.
fn key_at(bytes: &[u8], key: &str) -> usize {
    let k = key.as_bytes();
    let at = bytes.windows(k.len()).position(|w| w == k).unwrap();
    at + k.len()
}

/// Sets `key`'s value (of `width` bytes after the type id) to `v`.
fn set_key(bytes: &mut [u8], key: &str, v: u64, width: usize) {
    let at = key_at(bytes, key) + 4;
    bytes[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
}

fn open_err(dir: &Path, name: &str) -> GgufError {
    let e = Gguf::open(dir.join(name)).unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    e
}

#[test]
fn missing_and_foreign_parts_are_errors() {
    // Part 2 missing, from either neighbour.
    let dir = copy_set([NAMES[0], None, NAMES[2]], |_, _| {});
    for given in [NAMES[0], NAMES[2]] {
        let e = open_err(dir.path(), given.unwrap());
        assert!(
            matches!(&e, GgufError::SplitPartIo { part: 2, count: 3, path, .. }
                if path.ends_with("m-00002-of-00003.gguf")),
            "{e}"
        );
        assert!(e.to_string().starts_with("split part 2 of 3: "), "{e}");
    }
    // Another set's part 2 in its place (same keys, other tensors): duplicates.
    let dir = copy_set(NAMES, |_, _| {});
    std::fs::copy(part("lean", 2), dir.path().join(NAMES[1].unwrap())).unwrap();
    let e = open_err(dir.path(), NAMES[0].unwrap());
    assert!(
        matches!(&e, GgufError::DuplicateTensor { name } if name == "token_embd.weight"),
        "{e}"
    );
    // A part of a 4-part set, or of another place, named as part 2 of 3.
    for (key, v) in [
        ("split.count", 4),
        ("split.no", 0),
        ("split.tensors.count", 8),
    ] {
        let width = if key == "split.tensors.count" { 4 } else { 2 };
        let dir = copy_set(NAMES, |k, b| {
            if k == 2 {
                set_key(b, key, v, width)
            }
        });
        let e = open_err(dir.path(), NAMES[0].unwrap());
        assert!(
            matches!(
                &e,
                GgufError::ForeignPart {
                    part: 2,
                    count: 3,
                    tensors: 7,
                    ..
                }
            ),
            "{key}: {e}"
        );
        assert!(
            e.to_string().contains("belongs to another split set"),
            "{e}"
        );
    }
    // A split.tensors.count that every part agrees on but the parts do not hold.
    let dir = copy_set(NAMES, |_, b| set_key(b, "split.tensors.count", 9, 4));
    let e = open_err(dir.path(), NAMES[1].unwrap());
    assert!(
        matches!(
            e,
            GgufError::SplitTensorCount {
                expected: 9,
                found: 7,
                count: 3
            }
        ),
        "{e}"
    );
    // A part that is not a valid GGUF file.
    let dir = copy_set(NAMES, |k, b| {
        if k == 3 {
            // Into the last tensor's bytes (the file ends with 16 bytes of padding).
            b.truncate(b.len() - 32)
        }
    });
    let e = open_err(dir.path(), NAMES[0].unwrap());
    assert!(
        matches!(&e, GgufError::SplitPart { part: 3, count: 3, path: Some(_), source }
            if matches!(**source, GgufError::DataOutOfFile { .. })),
        "{e}"
    );
}

#[test]
fn forged_split_keys_are_errors() {
    // split.no out of range, split.count zero.
    for (key, v) in [("split.no", 3), ("split.no", 65535), ("split.count", 0)] {
        let dir = copy_set(NAMES, |k, b| {
            if k == 1 {
                set_key(b, key, v, 2)
            }
        });
        let e = open_err(dir.path(), NAMES[0].unwrap());
        assert!(matches!(e, GgufError::SplitRange { .. }), "{key} {v}: {e}");
        // The same file read alone is refused too.
        let e = Gguf::open_part(dir.path().join(NAMES[0].unwrap())).unwrap_err();
        assert!(matches!(e, GgufError::SplitRange { .. }), "{e}");
    }
    // split.count as a negative i16.
    let dir = copy_set(NAMES, |k, b| {
        if k == 1 {
            let at = key_at(b, "split.count");
            b[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
            set_key(b, "split.count", 0xFFFF, 2);
        }
    });
    let e = open_err(dir.path(), NAMES[0].unwrap());
    assert!(
        matches!(
            e,
            GgufError::SplitKeyType {
                key: "split.count",
                found: "i16"
            }
        ),
        "{e}"
    );
    // split.no and split.tensors.count missing (their keys renamed).
    for (key, renamed) in [
        ("split.no", "split.nX"),
        ("split.tensors.count", "split.tensors.couns"),
    ] {
        let dir = copy_set(NAMES, |k, b| {
            if k == 1 {
                let at = key_at(b, key) - key.len();
                b[at..at + key.len()].copy_from_slice(renamed.as_bytes());
            }
        });
        let e = open_err(dir.path(), NAMES[0].unwrap());
        assert!(
            matches!(e, GgufError::SplitKeyMissing { key: k, count: 3 } if k == key),
            "{e}"
        );
    }
    // A file name that does not place the part: the set cannot be found, the part
    // still reads alone.
    let dir = copy_set([Some("renamed.gguf"), NAMES[1], NAMES[2]], |_, _| {});
    let e = open_err(dir.path(), "renamed.gguf");
    assert!(
        matches!(e, GgufError::SplitName { part: 1, count: 3 }),
        "{e}"
    );
    let alone = Gguf::open_part(dir.path().join("renamed.gguf")).unwrap();
    assert_eq!(alone.tensors().len(), 3);
    // Part 3 under part 2's name: the name places it, its keys do not.
    let dir = copy_set([NAMES[0], None, None], |_, _| {});
    std::fs::copy(part("model", 3), dir.path().join(NAMES[1].unwrap())).unwrap();
    let e = open_err(dir.path(), NAMES[0].unwrap());
    assert!(matches!(e, GgufError::ForeignPart { part: 2, .. }), "{e}");
}

#[test]
fn parts_in_memory_must_be_in_order_and_complete() {
    let bytes: Vec<Vec<u8>> = (1..=3)
        .map(|k| std::fs::read(part("model", k)).unwrap())
        .collect();
    let refs = |order: &[usize]| order.iter().map(|&k| &bytes[k][..]).collect::<Vec<_>>();
    assert!(matches!(
        Gguf::from_parts(refs(&[1, 0, 2])),
        Err(GgufError::ForeignPart { part: 1, .. })
    ));
    assert!(matches!(
        Gguf::from_parts(refs(&[0, 1])),
        Err(GgufError::ForeignPart {
            part: 1,
            count: 2,
            ..
        })
    ));
    assert!(matches!(
        Gguf::from_parts(Vec::<&[u8]>::new()),
        Err(GgufError::SplitRange { count: 0, .. })
    ));
    let mut cut = refs(&[0, 1, 2]);
    cut[1] = &bytes[1][..100];
    assert!(matches!(
        Gguf::from_parts(cut),
        Err(GgufError::SplitPart {
            part: 2,
            path: None,
            ..
        })
    ));
    assert_eq!(
        Gguf::from_parts(refs(&[0, 1, 2])).unwrap().tensors().len(),
        7
    );
}
