//! The generated block driver against the reference decoders on random block bytes:
//! every supported GGUF type, every ISA this CPU runs, random f16 `d`/`dmin` among
//! them zero, subnormals, negatives, infinities and NaNs (signalling ones too),
//! e8m0 bytes 0, 1, 254 and 255, one block or many, and the bytes cut into 1, 2 or 3
//! runs of whole blocks (how threads split a tensor), bit for bit; f16 and bf16
//! outputs are `half`'s rounding of the reference's f32.
use crate::support;
use dq::arch::Isa;
use dq::block::{BlockError, BlockOut, gguf};
use dq::formats::gguf::{GgmlType, reference};
use half::{bf16, f16};
use proptest::prelude::*;
use support::Rng;
use support::gguf::{every_byte_blocks, random_blocks, supported};

/// Decodes `bytes` into `O` with form `form` of the generated kernel on `isa`, in
/// `cuts` runs of whole blocks; `None` when this CPU cannot run `isa`.
fn generated<O: BlockOut>(
    ty: GgmlType,
    (isa, form): (Isa, usize),
    bytes: &[u8],
    cuts: &[usize],
) -> Option<Vec<O>> {
    let k = gguf::kernel(ty.name()).unwrap();
    let blocks = bytes.len() / k.block_bytes;
    let mut out = vec![O::of(f32::NAN); blocks * k.block_elems];
    let mut at = 0;
    for end in cuts.iter().copied().chain([blocks]) {
        let end = end.clamp(at, blocks);
        let b = &bytes[at * k.block_bytes..end * k.block_bytes];
        let o = &mut out[at * k.block_elems..end * k.block_elems];
        match k.run_form(isa, form, b, o) {
            Ok(()) => {}
            Err(BlockError::IsaUnavailable { .. }) => return None,
            Err(e) => panic!("{e}"),
        }
        at = end;
    }
    Some(out)
}

fn check(ty: GgmlType, bytes: &[u8], cuts: &[usize]) {
    let k = gguf::kernel(ty.name()).unwrap();
    let mut want = vec![0f32; bytes.len() / k.block_bytes * k.block_elems];
    reference::dequantize(ty, bytes, &mut want).unwrap();
    for (isa, form) in Isa::ALL
        .into_iter()
        .flat_map(|i| (0..k.forms()).map(move |f| (i, f)))
    {
        let Some(got) = generated::<f32>(ty, (isa, form), bytes, cuts) else {
            support::isa_unavailable(isa, &format!("generated GGUF blocks on {}", isa.name()));
            continue;
        };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{ty} on {} form {form} element {i} (block {}): got {g:e}, reference {w:e}",
                isa.name(),
                i / k.block_elems
            );
        }
        let bf: Vec<u16> = want.iter().map(|&w| bf16::from_f32(w).to_bits()).collect();
        let h: Vec<u16> = want.iter().map(|&w| f16::from_f32(w).to_bits()).collect();
        let got_bf = generated::<bf16>(ty, (isa, form), bytes, cuts).unwrap();
        let got_h = generated::<f16>(ty, (isa, form), bytes, cuts).unwrap();
        let at = format!("{ty} on {} form {form}", isa.name());
        assert_bits16(
            &got_bf.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            &bf,
            &want,
            &(at.clone() + " bf16"),
        );
        assert_bits16(
            &got_h.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            &h,
            &want,
            &(at + " f16"),
        );
    }
}

/// `got == want` (16-bit patterns), naming the first element that differs and the
/// reference's f32 there.
fn assert_bits16(got: &[u16], want: &[u16], f32s: &[f32], at: &str) {
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!(
            "{at} element {i}: got {:#06x}, want {:#06x} (reference {:e})",
            got[i], want[i], f32s[i]
        );
    }
}

proptest! {
    #![proptest_config(support::seeded_config(file!(), support::proptest_cases(64)))]

    #[test]
    fn random_blocks_match_the_reference(
        seed in any::<u64>(),
        blocks in 1usize..7,
        cuts in proptest::collection::vec(0usize..7, 0..3),
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        for ty in supported() {
            let mut rng = Rng::new(seed ^ ty as u64);
            let bytes = random_blocks(&mut rng, ty, blocks);
            check(ty, &bytes, &cuts);
        }
    }
}

/// Every byte value at every position of a block (others zero, d = 1): each field
/// view and scale byte is reached, one at a time.
#[test]
fn every_byte_at_every_position() {
    for ty in supported() {
        check(ty, &every_byte_blocks(ty), &[1, 7]);
    }
}

#[test]
fn declared_types_run_in_every_form() {
    for ty in supported() {
        let k = gguf::kernel(ty.name()).unwrap();
        let want = if k.decl.is_some() {
            dq::block::form::COUNT
        } else {
            1
        };
        assert_eq!(k.forms(), want, "{ty}");
    }
}

#[test]
fn lengths_and_isas_are_checked() {
    let k = gguf::kernel("Q4_K").unwrap();
    let err = k
        .run_on(Isa::Portable, &[0; 143], &mut [0f32; 256])
        .unwrap_err();
    assert!(
        matches!(
            err,
            BlockError::Length {
                bytes: 143,
                elements: 256,
                ..
            }
        ),
        "{err}"
    );
    let err = k
        .run_on(Isa::Portable, &[0; 144], &mut [0f32; 255])
        .unwrap_err();
    assert!(matches!(err, BlockError::Length { .. }), "{err}");
    k.run_on(Isa::Portable, &[], &mut [0f32; 0]).unwrap();
    if !Isa::Avx512.available() {
        let err = k
            .run_on(Isa::Avx512, &[0; 144], &mut [0f32; 256])
            .unwrap_err();
        assert_eq!(err, BlockError::IsaUnavailable { isa: Isa::Avx512 });
    }
    assert!(gguf::kernel("I8").is_none());
    let names: Vec<&str> = gguf::kernels().iter().map(|k| k.name).collect();
    let want: Vec<&str> = supported().into_iter().map(GgmlType::name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut want_sorted = want;
    want_sorted.sort_unstable();
    assert_eq!(sorted, want_sorted);
}
