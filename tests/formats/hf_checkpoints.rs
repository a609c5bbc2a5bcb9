//! HuggingFace checkpoints: the reference dequantizers against the fixtures that
//! `scripts/make_hf_fixtures.py` made with the real packers and dequantizers, and what
//! the reader lists. Malformed checkpoints: `hf_malformed.rs`; byte mutations:
//! `hf_mutations.rs`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::support;
use dq::DType;
use dq::formats::hf::{
    Checkpoint, Dtype, GptqVersion, QuantConfig, QuantMethod, Scheme, reference,
};
use half::{bf16, f16};
use support::hf::{DOWN, Q, UP, expected, fixtures};

/// A fixture: its folder (or file), scheme, and linears `(prefix, N, K, groups)`.
struct Case {
    path: &'static str,
    scheme: Scheme,
    act_order: bool,
    linears: &'static [(&'static str, usize, usize, usize)],
}

const V1_4: Scheme = Scheme::Gptq {
    bits: 4,
    version: GptqVersion::V1,
};
const V1_8: Scheme = Scheme::Gptq {
    bits: 8,
    version: GptqVersion::V1,
};
const V2_4: Scheme = Scheme::Gptq {
    bits: 4,
    version: GptqVersion::V2,
};
const V2_8: Scheme = Scheme::Gptq {
    bits: 8,
    version: GptqVersion::V2,
};
const CT4: Scheme = Scheme::CompressedTensors { bits: 4 };
const CT8: Scheme = Scheme::CompressedTensors { bits: 8 };

#[rustfmt::skip]
const CASES: &[Case] = &[
    // K = 96 with group 64: a short last group.
    Case { path: "gptq-v1-4bit-g64-asym", scheme: V1_4, act_order: false,
           linears: &[(UP, 32, 96, 2), (DOWN, 32, 64, 1)] },
    Case { path: "gptq-v1-4bit-perchannel-sym", scheme: V1_4, act_order: false,
           linears: &[(UP, 32, 64, 1)] },
    Case { path: "gptq-v1-4bit-g16-actorder-bf16", scheme: V1_4, act_order: true,
           linears: &[(UP, 32, 64, 4), (Q, 64, 32, 2)] },
    Case { path: "gptq-v1-8bit-g32-asym", scheme: V1_8, act_order: false,
           linears: &[(UP, 32, 64, 2)] },
    Case { path: "gptq-v2-4bit-g64-actorder", scheme: V2_4, act_order: true,
           linears: &[(UP, 32, 96, 2), (DOWN, 32, 64, 1)] },
    Case { path: "gptq-v2-8bit-perchannel-sym", scheme: V2_8, act_order: false,
           linears: &[(UP, 32, 32, 1)] },
    Case { path: "awq-4bit-g32", scheme: Scheme::Awq, act_order: false,
           linears: &[(UP, 32, 64, 2), (DOWN, 64, 32, 1)] },
    Case { path: "awq-4bit-g16-sharded", scheme: Scheme::Awq, act_order: false,
           linears: &[(UP, 32, 48, 3), (DOWN, 32, 32, 2), (Q, 64, 16, 1)] },
    Case { path: "ct-4bit-group-sym", scheme: CT4, act_order: false,
           linears: &[(UP, 8, 64, 2), (DOWN, 6, 96, 3)] },
    // K = 100: the packed rows end in a padded word.
    Case { path: "ct-4bit-channel-asym", scheme: CT4, act_order: false,
           linears: &[(UP, 12, 100, 1)] },
    Case { path: "ct-8bit-group-asym", scheme: CT8, act_order: false,
           linears: &[(UP, 6, 48, 3), (DOWN, 4, 32, 2)] },
    Case { path: "ct-8bit-channel-sym", scheme: CT8, act_order: false,
           linears: &[(UP, 5, 36, 1)] },
    Case { path: "single-file/gptq-v2.safetensors", scheme: V2_4, act_order: false,
           linears: &[(Q, 32, 64, 4)] },
    // GPTQModel's padded last words: N = 100 in 13 qzeros words, K = 72 in 9 rows.
    Case { path: "gptq-v2-4bit-g32-n100", scheme: V2_4, act_order: false,
           linears: &[(UP, 100, 72, 3), (DOWN, 36, 100, 4)] },
    // v1 saved as v2 words minus 0x11111111: the padded fields hold wrapped garbage.
    Case { path: "gptq-v1-4bit-g16-actorder-n50", scheme: V1_4, act_order: true,
           linears: &[(UP, 50, 44, 3)] },
    Case { path: "gptq-v1-8bit-perchannel-n10", scheme: V1_8, act_order: false,
           linears: &[(UP, 10, 22, 1)] },
    // AWQ: N a multiple of 8, not of 32; K a multiple of the group, not of 32.
    Case { path: "awq-4bit-g16-n40", scheme: Scheme::Awq, act_order: false,
           linears: &[(UP, 40, 48, 3), (DOWN, 24, 80, 5)] },
];

fn expected_names(case_path: &Path) -> BTreeSet<String> {
    let dir = if case_path.is_dir() {
        case_path
    } else {
        case_path.parent().unwrap()
    };
    fs::read_dir(dir.join("expected"))
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".bin").unwrap().to_owned()
        })
        .collect()
}

#[test]
fn every_fixture_linear_equals_the_reference_implementations_bit_for_bit() {
    for case in CASES {
        let path = fixtures().join(case.path);
        let ckpt = Checkpoint::open(&path).unwrap_or_else(|e| panic!("{}: {e}", case.path));
        let names: BTreeSet<String> = ckpt.linears().map(|l| l.name().to_owned()).collect();
        let table: BTreeSet<String> = case.linears.iter().map(|l| l.0.to_owned()).collect();
        assert_eq!(names, table, "{}", case.path);
        assert_eq!(names, expected_names(&path), "{}", case.path);
        for &(prefix, n, k, groups) in case.linears {
            let l = ckpt.linear(prefix).unwrap();
            let what = format!("{} {prefix}", case.path);
            assert_eq!(l.scheme(), case.scheme, "{what}");
            assert_eq!((l.n(), l.k(), l.groups()), (n, k, groups), "{what}");
            let shuffled = l.g_idx().is_some_and(|g| !g.is_sorted());
            assert_eq!(shuffled, case.act_order && groups > 1, "{what}");
            let want = expected(&path, prefix);
            let got: Vec<u32> = reference::dequantize_f32(&l)
                .iter()
                .map(|y| y.to_bits())
                .collect();
            assert_eq!(got.len(), n * k, "{what}");
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{what}: element [{}, {}] is {} (0x{:08x}), the reference gives {} (0x{:08x})",
                    i / k,
                    i % k,
                    f32::from_bits(got[i]),
                    got[i],
                    f32::from_bits(want[i]),
                    want[i]
                );
            }
            assert_eq!(got, want, "{what}");
            check_16_bit_outputs(&l, &want, &what);
        }
    }
}

/// f16/bf16 outputs are the f32 values rounded once, nearest-even.
fn check_16_bit_outputs(l: &dq::formats::hf::QuantLinear<'_>, want: &[u32], what: &str) {
    let mut f32_out = vec![0u8; want.len() * 4];
    reference::dequantize_into(l, DType::F32, &mut f32_out).unwrap();
    let f32_bits: Vec<u32> = f32_out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f32_bits, want, "{what} f32 bytes");
    for dtype in [DType::F16, DType::BF16] {
        let mut out = vec![0u8; want.len() * 2];
        reference::dequantize_into(l, dtype, &mut out).unwrap();
        let got: Vec<u16> = out
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let rounded: Vec<u16> = want
            .iter()
            .map(|&w| {
                let y = f32::from_bits(w);
                if dtype == DType::F16 {
                    f16::from_f32(y).to_bits()
                } else {
                    bf16::from_f32(y).to_bits()
                }
            })
            .collect();
        assert_eq!(got, rounded, "{what} {dtype}");
    }
}

#[test]
fn configs_are_read_as_written() {
    let open = |p: &str| Checkpoint::open(fixtures().join(p)).unwrap();
    assert_eq!(
        open("gptq-v1-4bit-g16-actorder-bf16").config(),
        Some(&QuantConfig::Gptq {
            bits: 4,
            group_size: Some(16),
            desc_act: true,
            sym: false,
            version: GptqVersion::V1
        })
    );
    assert_eq!(
        open("gptq-v2-8bit-perchannel-sym").config(),
        Some(&QuantConfig::Gptq {
            bits: 8,
            group_size: None,
            desc_act: false,
            sym: true,
            version: GptqVersion::V2
        })
    );
    assert_eq!(
        open("awq-4bit-g16-sharded").config(),
        Some(&QuantConfig::Awq {
            group_size: Some(16)
        })
    );
    let ct = open("ct-4bit-channel-asym");
    assert_eq!(
        ct.config().map(QuantConfig::method),
        Some(QuantMethod::CompressedTensors)
    );
    assert_eq!(
        ct.config(),
        Some(&QuantConfig::CompressedTensors {
            bits: 4,
            strategy: dq::formats::hf::CtStrategy::Channel,
            symmetric: false
        })
    );
}

#[test]
fn other_tensors_are_listed_with_their_dtypes() {
    let ckpt = Checkpoint::open(fixtures().join("gptq-v1-4bit-g64-asym")).unwrap();
    let others: Vec<(String, Dtype, Vec<usize>)> = ckpt
        .others()
        .map(|t| (t.name().to_owned(), t.dtype(), t.shape().to_vec()))
        .collect();
    assert_eq!(
        others,
        [
            ("lm_head.weight".to_owned(), Dtype::F32, vec![3, 8]),
            (
                "model.embed_tokens.weight".to_owned(),
                Dtype::F16,
                vec![6, 8]
            ),
            (format!("{DOWN}.bias"), Dtype::F16, vec![32]),
            (format!("{UP}.bias"), Dtype::F16, vec![32]),
            ("model.norm.weight".to_owned(), Dtype::BF16, vec![8]),
        ]
    );
    // The sharded checkpoint spans both files, and its linears straddle them.
    let sharded = Checkpoint::open(fixtures().join("awq-4bit-g16-sharded")).unwrap();
    assert_eq!(sharded.files().count(), 2);
    assert_eq!(sharded.others().count(), 3);
    assert_eq!(sharded.tensors().count(), 3 + 3 * 3);
}
