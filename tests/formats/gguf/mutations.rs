//! Mutations of `metadata.gguf` (every value type, three tensors, alignment 64)
//! and of small hand-made files: each a clear error, no panic, no large allocation.

use dq::formats::gguf::{GgmlType, GgufError, MAX_NESTING, MetaValue, ValueType, reference};

use super::{fixture, parse_bounded};

/// The offset just past `s` stored as a GGUF string (u64 length, bytes).
fn after_string(bytes: &[u8], s: &str) -> usize {
    let mut pat = (s.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(s.as_bytes());
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("{s} not in the fixture"));
    at + pat.len()
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `metadata.gguf` changed by `f`, parsed: the error.
fn mutated(f: impl FnOnce(&mut Vec<u8>)) -> GgufError {
    let mut b = fixture("metadata");
    f(&mut b);
    match parse_bounded(&b) {
        Ok(_) => panic!("mutated file parsed"),
        Err(e) => e,
    }
}

/// Where `small.q8_0`'s tensor info fields are: (n_dims, ne[0], type, offset).
fn q8_info(b: &[u8]) -> (usize, usize, usize, usize) {
    let n_dims = after_string(b, "small.q8_0");
    (n_dims, n_dims + 4, n_dims + 4 + 16, n_dims + 4 + 16 + 4)
}

#[test]
fn truncation_anywhere_before_the_data_is_an_error() {
    let b = fixture("metadata");
    let file = parse_bounded(&b).unwrap();
    let data = file.data_offset();
    let data_end = file
        .tensors()
        .iter()
        .map(|t| data + t.data_offset() as usize + t.byte_size().unwrap())
        .max()
        .unwrap();
    for cut in 0..b.len() {
        let r = parse_bounded(&b[..cut]);
        match r {
            Err(
                GgufError::BadMagic { .. }
                | GgufError::Truncated { .. }
                | GgufError::CountTooLarge { .. }
                | GgufError::DataOutOfFile { .. },
            ) => assert!(cut < data_end, "cut {cut}: trailing padding only"),
            Err(e) => panic!("cut {cut}: unexpected {e}"),
            Ok(_) => assert!(cut >= data_end, "cut {cut} parsed"),
        }
    }
    // The messages say where.
    let e = parse_bounded(&b[..40]).unwrap_err();
    assert!(
        e.to_string().starts_with("truncated or corrupt file: "),
        "{e}"
    );
    let cut = after_string(&b, "small.q8_0") + 2;
    let e = parse_bounded(&b[..cut]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "truncated file: tensor dimension count at byte {} needs 4 bytes, 2 left",
            cut - 2
        )
    );
}

#[test]
fn forged_counts_fail_before_allocating() {
    for count in [1 << 60, u64::MAX, 1_000_000] {
        let e = mutated(|b| put_u64(b, 8, count));
        assert!(
            matches!(e, GgufError::CountTooLarge { what: "tensor", count: c, .. } if c == count),
            "{e}"
        );
        let e = mutated(|b| put_u64(b, 16, count));
        assert!(
            matches!(
                e,
                GgufError::CountTooLarge {
                    what: "metadata key",
                    ..
                }
            ),
            "{e}"
        );
    }
    // One tensor more than stored: a fourth info is read from the zero padding, which
    // moves the data section 64 bytes on, so small.f16 now ends past it.
    let e = mutated(|b| put_u64(b, 8, 4));
    assert!(
        matches!(&e, GgufError::DataOutOfFile { name, .. } if name == "small.f16"),
        "{e}"
    );
}

#[test]
fn forged_string_and_array_lengths_are_errors() {
    // The first key's length.
    for len in [1 << 60, u64::MAX, 5000] {
        let e = mutated(|b| put_u64(b, 24, len));
        assert!(
            matches!(e, GgufError::Truncated { needed, .. } if needed == len),
            "{e}"
        );
    }
    // A string value's length.
    let e = mutated(|b| {
        let at = after_string(b, "test.string") + 4;
        put_u64(b, at, 1 << 60);
    });
    assert!(matches!(e, GgufError::Truncated { .. }), "{e}");
    // Array counts: of strings (walked) and of bytes (one span).
    for key in ["tokenizer.ggml.tokens", "test.array_u8", "test.nested"] {
        for count in [1 << 60, u64::MAX] {
            let e = mutated(|b| {
                let at = after_string(b, key) + 8;
                put_u64(b, at, count);
            });
            assert!(matches!(e, GgufError::CountTooLarge { .. }), "{key}: {e}");
        }
    }
    // A plausible but wrong count: the parse runs off its value into the next key.
    let e = mutated(|b| {
        let at = after_string(b, "tokenizer.ggml.tokens") + 8;
        put_u64(b, at, 101);
    });
    assert!(!matches!(e, GgufError::Io { .. }), "{e}");
}

#[test]
fn forged_value_types_are_errors() {
    let e = mutated(|b| {
        let at = after_string(b, "test.u8");
        put_u32(b, at, 13);
    });
    assert!(
        matches!(&e, GgufError::UnknownValueType { key, id: 13, .. } if key == "test.u8"),
        "{e}"
    );
    let e = mutated(|b| {
        let at = after_string(b, "test.array_i32") + 4;
        put_u32(b, at, 0xFFFF_FFFF);
    });
    assert!(matches!(e, GgufError::UnknownValueType { .. }), "{e}");
    let e = mutated(|b| {
        let at = after_string(b, "test.bool_true") + 4;
        b[at] = 2;
    });
    assert!(matches!(e, GgufError::InvalidBool { value: 2, .. }), "{e}");
    let e = mutated(|b| {
        let at = after_string(b, "test.u8") - 1;
        b[at] = 0xFF;
    });
    assert!(
        matches!(
            e,
            GgufError::InvalidUtf8 {
                what: "metadata key",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn alignment_must_be_a_power_of_two_u32() {
    for a in [0, 3, 48, u32::MAX] {
        let e = mutated(|b| {
            let at = after_string(b, "general.alignment") + 4;
            put_u32(b, at, a);
        });
        assert!(
            matches!(e, GgufError::BadAlignment { alignment } if alignment == a),
            "{e}"
        );
    }
    let e = mutated(|b| {
        let at = after_string(b, "general.alignment");
        put_u32(b, at, ValueType::I32 as u32);
    });
    assert!(
        matches!(e, GgufError::AlignmentType { found: "i32" }),
        "{e}"
    );
}

#[test]
fn duplicates_are_errors() {
    let e = mutated(|b| {
        let at = after_string(b, "small.f16") - 3;
        b[at..at + 3].copy_from_slice(b"f32");
    });
    assert!(
        matches!(&e, GgufError::DuplicateTensor { name } if name == "small.f32"),
        "{e}"
    );
    let e = mutated(|b| {
        let at = after_string(b, "test.i16") - 3;
        b[at] = b'u';
    });
    assert!(
        matches!(&e, GgufError::DuplicateKey { key } if key == "test.u16"),
        "{e}"
    );
}

#[test]
fn forged_header_fields_are_errors() {
    assert!(matches!(
        mutated(|b| b[0] = b'g'),
        GgufError::BadMagic { .. }
    ));
    for v in [0, 1, 4, 99] {
        let e = mutated(|b| put_u32(b, 4, v));
        assert!(
            matches!(e, GgufError::UnsupportedVersion { version } if version == v),
            "{e}"
        );
    }
    let e = mutated(|b| put_u32(b, 4, 3u32.swap_bytes()));
    assert!(matches!(e, GgufError::BigEndian { version: 3 }), "{e}");
    for short in [&b""[..], b"GG", b"GGUF", b"GGUF\x03\0\0\0"] {
        assert!(parse_bounded(short).is_err());
    }
}

#[test]
fn forged_dims_are_errors() {
    let e = mutated(|b| {
        let (n_dims, ..) = q8_info(b);
        put_u32(b, n_dims, 5);
    });
    assert!(matches!(e, GgufError::TooManyDims { n_dims: 5, .. }), "{e}");
    for ne0 in [1 << 63, u64::MAX] {
        let e = mutated(|b| {
            let (_, ne0_at, ..) = q8_info(b);
            put_u64(b, ne0_at, ne0);
        });
        assert!(matches!(e, GgufError::ShapeOverflow { .. }), "{e}");
    }
    // ne = [2^32, 2^32]: the element count overflows.
    let e = mutated(|b| {
        let (_, ne0_at, ..) = q8_info(b);
        put_u64(b, ne0_at, 1 << 32);
        put_u64(b, ne0_at + 8, 1 << 32);
    });
    assert!(matches!(e, GgufError::ShapeOverflow { .. }), "{e}");
    let e = mutated(|b| {
        let (_, ne0_at, ..) = q8_info(b);
        put_u64(b, ne0_at, 33);
    });
    assert!(
        matches!(
            e,
            GgufError::PartialBlock {
                ne0: 33,
                block: 32,
                ..
            }
        ),
        "{e}"
    );
    // More rows than the data holds.
    let e = mutated(|b| {
        let (_, ne0_at, ..) = q8_info(b);
        put_u64(b, ne0_at + 8, 1000);
    });
    assert!(matches!(e, GgufError::DataOutOfFile { .. }), "{e}");
}

#[test]
fn forged_types_list_the_tensor_as_unsupported() {
    let mut b = fixture("metadata");
    let (.., ty, _) = q8_info(&b);
    for id in [4, 31, 99, u32::MAX] {
        put_u32(&mut b, ty, id);
        let file = parse_bounded(&b).unwrap();
        let t = file.tensor("small.q8_0").unwrap();
        assert_eq!((t.ggml_type(), t.type_id()), (None, id));
        assert!(!t.is_supported());
        assert_eq!(t.byte_size(), None);
        let e = file.tensor_data(t).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("unsupported GGUF type id {id} for tensor small.q8_0")
        );
    }
    // A known type with bigger blocks: its bytes now overlap the next tensor.
    put_u32(&mut b, ty, GgmlType::F32 as u32);
    let e = parse_bounded(&b).unwrap_err();
    assert!(
        matches!(&e, GgufError::Overlap { first, second } if first == "small.q8_0" && second == "small.f16"),
        "{e}"
    );
}

#[test]
fn forged_offsets_are_errors() {
    let e = mutated(|b| {
        let (.., off) = q8_info(b);
        put_u64(b, off, 64 + 1);
    });
    assert!(
        matches!(
            e,
            GgufError::MisalignedTensor {
                offset: 65,
                alignment: 64,
                ..
            }
        ),
        "{e}"
    );
    for offset in [1 << 63, u64::MAX - 63, 1 << 20] {
        let e = mutated(|b| {
            let (.., off) = q8_info(b);
            put_u64(b, off, offset);
        });
        assert!(
            matches!(e, GgufError::DataOutOfFile { .. }),
            "{offset}: {e}"
        );
    }
    // small.q8_0 moved onto small.f32's bytes.
    let e = mutated(|b| {
        let (.., off) = q8_info(b);
        put_u64(b, off, 0);
    });
    assert!(
        matches!(&e, GgufError::Overlap { first, second } if first == "small.f32" && second == "small.q8_0"),
        "{e}"
    );
}

/// A GGUF v3 file with no tensors and one key whose value is `value` (type id, bytes).
fn one_key(ty: u32, value: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.push(b'k');
    b.extend(ty.to_le_bytes());
    b.extend(value);
    b
}

#[test]
fn nesting_is_bounded() {
    // An array of one array of ... of an empty u8 array, `depth` arrays in all.
    let nested = |depth: usize| {
        let mut v = Vec::new();
        for _ in 1..depth {
            v.extend((ValueType::Array as u32).to_le_bytes());
            v.extend(1u64.to_le_bytes());
        }
        v.extend((ValueType::U8 as u32).to_le_bytes());
        v.extend(0u64.to_le_bytes());
        one_key(ValueType::Array as u32, &v)
    };
    let ok = nested(MAX_NESTING);
    let file = parse_bounded(&ok).unwrap();
    assert_eq!(file.get("k").unwrap().as_array().unwrap().len(), 1);
    for depth in [MAX_NESTING + 1, 100_000] {
        let e = parse_bounded(&nested(depth)).unwrap_err();
        assert!(matches!(e, GgufError::NestingTooDeep { .. }), "{e}");
    }
}

#[test]
fn a_file_without_tensors_needs_no_data_section() {
    // No tensors, no keys: the file may end right after the header.
    let bytes = one_key(ValueType::U8 as u32, &[7]);
    let file = parse_bounded(&bytes).unwrap();
    assert_eq!(file.get("k"), Some(MetaValue::U8(7)));
    assert!(file.tensors().is_empty());
    let e = reference::dequantize(GgmlType::Q4_K, &[0; 144], &mut [0f32; 255]).unwrap_err();
    assert!(matches!(e, GgufError::Length { .. }), "{e}");
}
