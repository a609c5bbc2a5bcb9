//! The JIT backend on GGUF block types: every tensor of the fixtures (f32, f16 and
//! bf16 outputs, 1 to 3 threads) against gguf-py's committed outputs, and random
//! block bytes (random f16 `d`/`dmin` among them zero, subnormals, negatives,
//! infinities and NaNs, signalling ones too; e8m0 bytes 0, 1, 254, 255) against
//! the reference decoders, bit for bit; the kernels behind guard pages; one
//! compile per type.
use crate::support;
use dq::block::{ParamNode, gguf};
use dq::formats::gguf::{GgmlType, Gguf, GgufError, reference};
use dq::{Backend, Options};
use half::{bf16, f16};
use proptest::prelude::*;
use support::Rng;
use support::gguf::{SPECIAL_F16, every_byte_blocks, expected, fixtures, random_blocks, supported};

/// `got` equals `want` bit for bit (on x86-64; elsewhere a NaN need only be a NaN,
/// as in `tests/formats/gguf.rs`).
fn assert_bits(what: &str, got: &[u32], want: &[u32], nan: impl Fn(u32) -> bool) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same = g == w || (!cfg!(target_arch = "x86_64") && nan(g) && nan(w));
        assert!(same, "{what} element {i}: jit {g:#010x}, want {w:#010x}");
    }
}

fn f32_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|y| y.to_bits()).collect()
}

/// Every supported tensor of fixture `stem` through the JIT: f32 against gguf-py,
/// f16 and bf16 against the generated backend's (round-to-nearest-even of the
/// same f32) and `from_f32` of gguf-py's values where they are not NaN. Returns
/// the types seen.
fn check_fixture(stem: &str) -> Vec<&'static str> {
    // Forced chunks: the facade's thread counts split these small tensors too.
    let _chunks = support::paths::force_chunks(256);
    let file = Gguf::open(fixtures().join(format!("{stem}.gguf"))).unwrap();
    let mut types = Vec::new();
    for t in file.tensors().iter().filter(|t| t.is_supported()) {
        let want = expected(stem, t.name());
        let n = want.len();
        for threads in 1..=3 {
            let opts = Options::new()
                .with_backend(Backend::Jit)
                .with_threads(threads);
            let gen_opts = Options::new()
                .with_backend(Backend::Generated)
                .with_threads(threads);
            let what = format!("{stem}/{} jit {threads} threads", t.name());
            let mut got = vec![f32::NAN; n];
            file.dequantize(t, &mut got, &opts).unwrap();
            assert_bits(&what, &f32_bits(&got), &f32_bits(&want), |b| {
                f32::from_bits(b).is_nan()
            });

            let mut h = vec![f16::NAN; n];
            file.dequantize(t, &mut h, &opts).unwrap();
            let mut gh = vec![f16::ZERO; n];
            file.dequantize(t, &mut gh, &gen_opts).unwrap();
            let bits = |v: &[f16]| v.iter().map(|y| u32::from(y.to_bits())).collect::<Vec<_>>();
            assert_bits(&format!("{what} f16"), &bits(&h), &bits(&gh), |b| {
                f16::from_bits(b as u16).is_nan()
            });
            for (i, (y, w)) in h.iter().zip(&want).enumerate() {
                if !w.is_nan() {
                    assert_eq!(y.to_bits(), f16::from_f32(*w).to_bits(), "{what} f16 {i}");
                }
            }

            let mut b = vec![bf16::NAN; n];
            file.dequantize(t, &mut b, &opts).unwrap();
            let mut gb = vec![bf16::ZERO; n];
            file.dequantize(t, &mut gb, &gen_opts).unwrap();
            let bits = |v: &[bf16]| v.iter().map(|y| u32::from(y.to_bits())).collect::<Vec<_>>();
            assert_bits(&format!("{what} bf16"), &bits(&b), &bits(&gb), |b| {
                bf16::from_bits(b as u16).is_nan()
            });
            for (i, (y, w)) in b.iter().zip(&want).enumerate() {
                if !w.is_nan() {
                    assert_eq!(y.to_bits(), bf16::from_f32(*w).to_bits(), "{what} bf16 {i}");
                }
            }
        }
        types.push(t.ggml_type().unwrap().name());
    }
    types.sort_unstable();
    types.dedup();
    types
}

#[test]
fn every_fixture_type_matches_gguf_py() {
    let mut want: Vec<&str> = supported().into_iter().map(GgmlType::name).collect();
    want.sort_unstable();
    let mut seen = check_fixture("blocks");
    seen.extend(check_fixture("tables"));
    seen.extend(check_fixture("low_bit"));
    seen.extend(check_fixture("q2_0"));
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, want, "the fixtures cover every type");
    let v2 = check_fixture("quantized_v2");
    assert!(v2.len() >= 9, "{v2:?}");
}

/// The JIT kernel of `ty` on `bytes`, in runs of whole blocks cut at `cuts` (how
/// threads split a tensor), against the reference decoder.
fn check_random(ty: GgmlType, bytes: &[u8], cuts: &[usize]) {
    let gk = gguf::kernel(ty.name()).unwrap();
    let k = dq_jit::block::kernel(ty.name()).unwrap();
    let blocks = bytes.len() / gk.block_bytes;
    let mut want = vec![0f32; blocks * gk.block_elems];
    reference::dequantize(ty, bytes, &mut want).unwrap();
    let mut got = vec![f32::NAN; want.len()];
    let mut at = 0;
    for end in cuts.iter().copied().chain([blocks]) {
        let end = end.clamp(at, blocks);
        k.run(
            &bytes[at * gk.block_bytes..end * gk.block_bytes],
            &mut got[at * gk.block_elems..end * gk.block_elems],
        )
        .unwrap();
        at = end;
    }
    assert_bits(
        &format!("{ty} random"),
        &f32_bits(&got),
        &f32_bits(&want),
        |b| f32::from_bits(b).is_nan(),
    );
}

proptest! {
    #![proptest_config(support::seeded_config(file!(), support::proptest_cases(64)))]

    #[test]
    fn random_blocks_match_the_reference(
        seed in any::<u64>(),
        blocks in 1usize..40,
        cuts in proptest::collection::vec(0usize..40, 0..3),
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        for ty in supported() {
            let mut rng = Rng::new(seed ^ ty as u64);
            let bytes = random_blocks(&mut rng, ty, blocks);
            check_random(ty, &bytes, &cuts);
        }
    }
}

/// Every byte value at every position of a block (others zero, d = 1): each field
/// view and scale byte is reached, one at a time.
#[test]
fn every_byte_at_every_position() {
    for ty in supported() {
        check_random(ty, &every_byte_blocks(ty), &[1, 7]);
    }
}

/// Every pair of special f16 `d`/`dmin` (and e8m0 byte) in one block each: NaN
/// against NaN takes the first operand's payload.
#[test]
fn special_parameter_pairs() {
    let mut rng = Rng::new(19);
    for ty in supported() {
        let k = gguf::kernel(ty.name()).unwrap();
        let Some(d) = k.decl else { continue };
        let f16s: Vec<usize> = d
            .params
            .iter()
            .filter_map(|p| match *p {
                ParamNode::F16(at) => Some(at),
                _ => None,
            })
            .collect();
        let mut bytes = Vec::new();
        for &a in &SPECIAL_F16 {
            for &b in &SPECIAL_F16 {
                let mut block = rng.bytes(k.block_bytes);
                for (i, &at) in f16s.iter().enumerate() {
                    let h = if i == 0 { a } else { b };
                    block[at..at + 2].copy_from_slice(&h.to_le_bytes());
                }
                for p in d.params {
                    if let ParamNode::E8m0Half(at) = *p {
                        block[at] = (a >> 8) as u8;
                    }
                }
                bytes.extend(block);
            }
        }
        check_random(ty, &bytes, &[]);
    }
}

/// The kernels read only the blocks and write only their elements: the input
/// ends (or starts) at a guard page, and so does the output.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn kernels_stay_inside_their_buffers() {
    use support::guard::{Guard, GuardBuf};
    let mut rng = Rng::new(7);
    for ty in supported() {
        let gk = gguf::kernel(ty.name()).unwrap();
        let k = dq_jit::block::kernel(ty.name()).unwrap();
        // 32 and 33: F16's 32-element step ends exactly at the guard, then a tail.
        for blocks in [1usize, 3, 17, 32, 33] {
            let bytes = random_blocks(&mut rng, ty, blocks);
            let mut want = vec![0f32; blocks * gk.block_elems];
            reference::dequantize(ty, &bytes, &mut want).unwrap();
            for guard in [Guard::After, Guard::Before] {
                let src = GuardBuf::new(&bytes, guard);
                let mut dst = GuardBuf::new(&vec![0u8; 4 * want.len()], guard);
                let out: &mut [f32] = bytemuck::cast_slice_mut(dst.as_mut_slice());
                k.run(src.as_slice(), out).unwrap();
                assert_bits(
                    &format!("{ty} guarded"),
                    &f32_bits(out),
                    &f32_bits(&want),
                    |b| f32::from_bits(b).is_nan(),
                );
            }
        }
    }
}

#[test]
fn one_compile_per_type_then_reuse() {
    let file = Gguf::open(fixtures().join("blocks.gguf")).unwrap();
    let t = file.tensor("q6_k.r3").unwrap();
    let mut out = vec![0f32; t.element_count() as usize];
    let opts = Options::new().with_backend(Backend::Jit).with_threads(2);
    file.dequantize(t, &mut out, &opts).unwrap();
    let before = dq_jit::block::stats();
    file.dequantize(t, &mut out, &opts).unwrap();
    let after = dq_jit::block::stats();
    assert_eq!(after.compiled, before.compiled, "compiled once");
    assert!(after.reused > before.reused);
    assert!(after.compiled <= supported().len());
    let k = dq_jit::block::kernel("Q6_K").unwrap();
    assert!(k.code_bytes() > 0);
    // Lengths are checked before the kernel runs.
    let err = k.run(&[0; 209], &mut [0f32; 256]).unwrap_err();
    assert!(
        err.to_string().contains("not whole 210-byte blocks"),
        "{err}"
    );
    // Unsupported types stay a clear error, before any compile: metadata.gguf's
    // Q8_0 tensor retyped as I8 (every GGUF block type is decoded now).
    let mut b = std::fs::read(fixtures().join("metadata.gguf")).unwrap();
    let name = b"small.q8_0";
    let at = b.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let dims = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let ty = at + 4 + 8 * dims;
    b[ty..ty + 4].copy_from_slice(&24u32.to_le_bytes()); // I8
    let forged = Gguf::from_bytes(&b[..]).unwrap();
    let u = forged.tensor("small.q8_0").unwrap();
    let err = forged.dequantize(u, &mut vec![0f32; u.element_count() as usize], &opts);
    assert!(
        matches!(err, Err(GgufError::UnsupportedType { .. })),
        "{err:?}"
    );
}
