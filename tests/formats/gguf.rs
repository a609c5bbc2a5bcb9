//! The GGUF reader and reference decoders against the fixtures written by gguf-py
//! 0.19.0 (`scripts/make_gguf_fixtures.py`): every tensor decodes to gguf-py's
//! `gguf.quants.dequantize` bit for bit, metadata reads back as written, mutated
//! files are clear errors (no panic, no allocation sized by the file), and
//! `dq inspect` prints them.

use std::collections::BTreeSet;

use dq::arch::Isa;
use dq::block::BlockError;
use dq::formats::gguf::{GgmlType, Gguf, GgufError, MetaValue, ValueType};
use dq::{Backend, Options};

use crate::support;
use support::gguf::{expected, fixtures};

mod inspect;
mod mutations;

/// Parses `bytes`, asserting that no single allocation exceeded 64 KiB (the
/// fixtures are a few KiB; a forged count of 2^60 must not reach an allocator).
fn parse_bounded(bytes: &[u8]) -> Result<Gguf<&[u8]>, GgufError> {
    let (r, largest) = crate::alloc::largest_during(|| Gguf::from_bytes(bytes));
    assert!(
        largest <= 64 << 10,
        "parsing allocated {largest} bytes at once"
    );
    r
}

// ---------------------------------------------------------------------------
// Fixtures.

fn fixture(stem: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("{stem}.gguf"))).unwrap()
}

/// Decodes every supported tensor of a fixture and compares it with gguf-py bit for
/// bit; returns the types seen.
fn check_fixture(stem: &str) -> BTreeSet<&'static str> {
    // Forced chunks: the facade's thread counts split these small tensors too.
    let _chunks = support::paths::force_chunks(256);
    let file = Gguf::open(fixtures().join(format!("{stem}.gguf"))).unwrap();
    let mut types = BTreeSet::new();
    let mut expected_files: BTreeSet<String> = std::fs::read_dir(fixtures().join(stem))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for t in file.tensors().iter().filter(|t| t.is_supported()) {
        let want = expected(stem, t.name());
        expected_files.remove(&format!("{}.bin", t.name()));
        let mut got = vec![f32::NAN; t.element_count() as usize];
        file.dequantize_reference(t, &mut got).unwrap();
        assert_eq!(got.len(), want.len(), "{}", t.name());
        assert_bits(stem, t.name(), "reference", &got, &want);
        for (backend, threads) in [
            (Backend::Generated, 1),
            (Backend::Generated, 3),
            (Backend::Auto, 2),
        ] {
            got.fill(f32::NAN);
            file.dequantize(
                t,
                &mut got,
                &Options::new().with_backend(backend).with_threads(threads),
            )
            .unwrap();
            assert_bits(
                stem,
                t.name(),
                &format!("{backend} {threads} threads"),
                &got,
                &want,
            );
        }
        let ty = t.ggml_type().unwrap();
        let kernel = dq::block::gguf::kernel(ty.name()).unwrap();
        let data = file.tensor_data(t).unwrap();
        for isa in Isa::ALL {
            got.fill(f32::NAN);
            match kernel.run_on(isa, data, &mut got) {
                Ok(()) => assert_bits(stem, t.name(), isa.name(), &got, &want),
                Err(BlockError::IsaUnavailable { .. }) => {
                    support::isa_unavailable(
                        isa,
                        &format!("generated GGUF blocks on {}", isa.name()),
                    );
                }
                Err(e) => panic!("{e}"),
            }
        }
        types.insert(ty.name());
    }
    assert!(
        expected_files.is_empty(),
        "no tensor for {expected_files:?}"
    );
    types
}

/// `got` equals gguf-py's `want` bit for bit.
fn assert_bits(stem: &str, name: &str, what: &str, got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // Bits, NaN included, on x86-64 (where the fixtures were made): it fixes
        // the NaN each operation returns (the first operand's, quieted; inf * 0
        // gives 0xFFC00000). Elsewhere (AArch64's default NaN is positive) a NaN
        // need only be a NaN.
        let same = g.to_bits() == w.to_bits()
            || (!cfg!(target_arch = "x86_64") && g.is_nan() && w.is_nan());
        assert!(
            same,
            "{stem}/{name} ({what}) element {i}: got {g:e} ({:#010x}), gguf-py {w:e} ({:#010x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

#[test]
fn random_blocks_match_gguf_py_bit_for_bit() {
    let mut types = check_fixture("blocks");
    types.extend(check_fixture("tables"));
    types.extend(check_fixture("low_bit"));
    types.extend(check_fixture("q2_0"));
    let supported: BTreeSet<_> = GgmlType::ALL
        .into_iter()
        .filter(|t| t.is_supported())
        .map(GgmlType::name)
        .collect();
    assert_eq!(types, supported, "every supported type has random blocks");
}

#[test]
fn quantized_tensors_match_gguf_py_bit_for_bit() {
    let types = check_fixture("quantized_v2");
    let want = [
        "BF16", "F16", "F32", "MXFP4", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    ];
    assert_eq!(types, want.into_iter().collect());
    check_fixture("metadata");
}

#[test]
fn special_scales_produce_specials() {
    // The fixture is meant to reach inf, NaN, zero and subnormal outputs: check it does.
    let file = Gguf::open(fixtures().join("blocks.gguf")).unwrap();
    for ty in ["f16", "q4_1", "q5_0", "q2_k", "q3_k", "q4_k", "q6_k"] {
        let v = expected("blocks", &format!("{ty}.specials"));
        assert!(v.iter().any(|x| x.is_nan()), "{ty}");
        assert!(v.iter().any(|x| x.is_infinite()), "{ty}");
        assert!(v.contains(&0.0), "{ty}");
        assert!(file.tensor(&format!("{ty}.specials")).is_some());
    }
    let file = Gguf::open(fixtures().join("tables.gguf")).unwrap();
    for ty in [
        "iq4_nl", "iq4_xs", "tq2_0", "q8_k", "iq2_xxs", "iq2_xs", "iq2_s",
    ] {
        let v = expected("tables", &format!("{ty}.specials"));
        assert!(v.iter().any(|x| x.is_nan()), "{ty}");
        assert!(v.iter().any(|x| x.is_infinite()), "{ty}");
        // An f32 `d` reaches subnormal outputs (an f16 one is normal in f32).
        assert!(ty != "q8_k" || v.iter().any(|x| x.is_subnormal()), "{ty}");
        assert!(v.contains(&0.0), "{ty}");
        assert!(file.tensor(&format!("{ty}.specials")).is_some());
    }
    let file = Gguf::open(fixtures().join("low_bit.gguf")).unwrap();
    for ty in [
        "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "q8_1", "q1_0", "tq1_0",
    ] {
        let v = expected("low_bit", &format!("{ty}.specials"));
        assert!(v.iter().any(|x| x.is_nan()), "{ty}");
        assert!(v.iter().any(|x| x.is_infinite()), "{ty}");
        assert!(v.contains(&0.0), "{ty}");
        assert!(file.tensor(&format!("{ty}.specials")).is_some());
    }
    // Q2_0 (ggml's C): a signalling NaN `d` (0x7C01) comes out quieted for every
    // code, its sign kept (a product by -1, not a negation); an infinite `d` times
    // code 1's zero is the default NaN.
    let v = expected("q2_0", "q2_0.specials");
    assert!(v.iter().any(|x| x.is_infinite()) && v.contains(&0.0));
    assert!(v[8 * 64..9 * 64].iter().all(|x| x.to_bits() == 0x7FC0_2000));
    assert!(v[5 * 64..6 * 64].iter().any(|x| x.to_bits() == 0xFFC0_0000));
    assert!(
        Gguf::open(fixtures().join("q2_0.gguf"))
            .unwrap()
            .tensor("q2_0.specials")
            .is_some()
    );
    // Q1_0: ggml's f16 conversion quiets a signalling NaN `d` (0x7C01), and `-d`
    // flips a NaN's sign.
    let v = expected("low_bit", "q1_0.specials");
    let nans: Vec<u32> = v[8 * 128..9 * 128].iter().map(|x| x.to_bits()).collect();
    assert!(
        nans.contains(&0x7FC0_2000) && nans.contains(&0xFFC0_2000),
        "{nans:x?}"
    );
    // NVFP4's e4m3 scales are finite: zeros (bytes 0, 0x7F, 0x80) and the largest.
    let v = expected("tables", "nvfp4.specials");
    assert!(v.contains(&0.0) && v.iter().any(|x| x.abs() == 240.0 * 6.0));
    // e8m0 0 and 1 scale into f32 subnormals, 255 past f32's range.
    let v = expected("blocks", "mxfp4.specials");
    assert!(v.iter().any(|x| x.is_subnormal()));
    assert!(v.iter().any(|x| x.is_infinite()));
    // f16 d = NaN with a signalling payload: dq's F16 keeps it as gguf-py does.
    let v = expected("blocks", "f16.specials");
    assert_eq!(v[8].to_bits(), 0x7F80_2000);
}

#[test]
fn tensors_list_type_shape_bytes_supported() {
    let file = Gguf::open(fixtures().join("blocks.gguf")).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.architecture(), Some("dq-fixture"));
    assert_eq!(file.tensors().len(), 14 * 4 + 2);
    let t = file.tensor("q4_k.r3").unwrap();
    assert_eq!(t.ne(), [512, 3, 2]);
    assert_eq!(t.shape(), [2, 3, 512]);
    assert_eq!(t.byte_size(), Some(2 * 3 * 2 * 144));
    assert_eq!(t.element_count(), 3072);
    let t = file.tensor("q5_0.r2_odd_rows").unwrap();
    assert_eq!((t.shape(), t.byte_size()), (vec![3, 32], Some(3 * 22)));
    let t = file.tensor("mxfp4.r1").unwrap();
    assert_eq!((t.shape(), t.byte_size()), (vec![64], Some(2 * 17)));
    assert_eq!(file.tensor_data(t).unwrap().len(), 34);
    // Random bytes of Q1_0 and TQ1_0, once unsupported (the names stayed).
    for (name, ty) in [
        ("q1_0.unsupported", GgmlType::Q1_0),
        ("tq1_0.unsupported", GgmlType::TQ1_0),
    ] {
        let t = file.tensor(name).unwrap();
        assert_eq!(t.ggml_type(), Some(ty));
        assert!(t.is_supported());
        assert_eq!(t.byte_size(), Some(3 * 2 * ty.type_size()));
        assert_eq!(file.tensor_data(t).unwrap().len(), 6 * ty.type_size());
    }
    let t = file.tensor("q8_0.r1").unwrap();
    let err = file.dequantize_reference(t, &mut [0f32; 63]).unwrap_err();
    assert!(
        matches!(
            err,
            GgufError::Length {
                bytes: 68,
                elements: 63,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn version_2_and_3_read_alike() {
    let v2 = fixture("quantized_v2");
    let mut v3 = v2.clone();
    v3[4] = 3;
    let (a, b) = (parse_bounded(&v2).unwrap(), parse_bounded(&v3).unwrap());
    assert_eq!((a.version(), b.version()), (2, 3));
    assert_eq!(a.tensors(), b.tensors());
    assert_eq!(a.metadata().count(), b.metadata().count());
}

#[test]
fn metadata_reads_back_as_written() {
    let file = Gguf::open(fixtures().join("metadata.gguf")).unwrap();
    assert_eq!(file.metadata_len(), 27);
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_offset() % 64, 0);
    for t in file.tensors() {
        assert_eq!(t.data_offset() % 64, 0, "{}", t.name());
    }
    let get = |k: &str| file.get(k).unwrap_or_else(|| panic!("{k}"));
    assert_eq!(get("general.alignment"), MetaValue::U32(64));
    assert_eq!(get("test.u8"), MetaValue::U8(255));
    assert_eq!(get("test.i8"), MetaValue::I8(-128));
    assert_eq!(get("test.u16"), MetaValue::U16(65535));
    assert_eq!(get("test.i16"), MetaValue::I16(-32768));
    assert_eq!(get("test.u32"), MetaValue::U32(u32::MAX));
    assert_eq!(get("test.i32"), MetaValue::I32(i32::MIN));
    assert_eq!(get("test.f32"), MetaValue::F32(-1.5));
    assert_eq!(get("test.bool_true"), MetaValue::Bool(true));
    assert_eq!(get("test.bool_false"), MetaValue::Bool(false));
    assert_eq!(get("test.string").as_str(), Some("h\u{e9}llo \u{2713}"));
    assert_eq!(get("test.empty_string").as_str(), Some(""));
    assert_eq!(get("test.u64"), MetaValue::U64(u64::MAX));
    assert_eq!(get("test.i64"), MetaValue::I64(i64::MIN));
    assert_eq!(get("test.f64"), MetaValue::F64(1e300));
    let arr = |k: &str| get(k).as_array().unwrap_or_else(|| panic!("{k}"));
    let items = |k: &str| arr(k).iter().collect::<Vec<_>>();
    assert_eq!(arr("test.array_u8").element_type(), ValueType::U8);
    assert_eq!(arr("test.array_u8").bytes(), [0, 1, 255]);
    use MetaValue as M;
    assert_eq!(items("test.array_i16"), [M::I16(-1), M::I16(2), M::I16(-3)]);
    assert_eq!(
        items("test.array_i32"),
        [M::I32(1), M::I32(-2), M::I32(3), M::I32(-4)]
    );
    assert_eq!(items("test.array_u64"), [M::U64(u64::MAX), M::U64(0)]);
    assert_eq!(items("test.array_f32"), [M::F32(0.5), M::F32(-0.25)]);
    assert_eq!(items("test.array_f64"), [M::F64(2.5), M::F64(-1e-300)]);
    assert_eq!(
        items("test.array_bool"),
        [M::Bool(true), M::Bool(false), M::Bool(true)]
    );
    let strs = |k: &str| {
        arr(k)
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(strs("test.array_string"), ["a", "", "\u{fc}\u{f1}\u{ee}"]);
    let nested: Vec<Vec<MetaValue<'_>>> = arr("test.nested")
        .iter()
        .map(|v| v.as_array().unwrap().iter().collect())
        .collect();
    assert_eq!(
        nested,
        [
            vec![M::I32(1), M::I32(2)],
            vec![M::I32(3)],
            vec![M::I32(4), M::I32(5), M::I32(6)]
        ]
    );
    let nested_s: Vec<Vec<String>> = arr("test.nested_strings")
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().into())
                .collect()
        })
        .collect();
    assert_eq!(nested_s, [vec!["x", "yz"], vec!["w"]]);
    let tokens = strs("tokenizer.ggml.tokens");
    assert_eq!(tokens.len(), 100);
    assert_eq!((tokens[0].as_str(), tokens[99].as_str()), ("tok0", "tok99"));
    let small = file.tensor("small.f32").unwrap();
    let mut out = [0f32; 5];
    file.dequantize_reference(small, &mut out).unwrap();
    assert_eq!(out, [-2.0, -1.0, 0.0, 1.0, 2.0]);
}
