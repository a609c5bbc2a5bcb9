//! The generated block driver's non-temporal forms against the reference decoders:
//! every supported GGUF type, every ISA this CPU runs, an output aligned for the
//! streamed stores and one that is not (plain stores then), bit for bit. The test
//! makes every output count as large (`store_switch`: a `Tuning` on its thread), so
//! the streamed path runs on small tensors. f16 and bf16 outputs stream too: they
//! are `half`'s rounding of the reference's f32.
use crate::support;
use dq::arch::Isa;
use dq::block::{form, gguf};
use dq::formats::gguf::reference;
use dq::policy::{self, StoreStrategy};
use half::{bf16, f16};
use support::Rng;
use support::gguf::{random_blocks, supported};
use support::paths::store_switch;

#[test]
fn streamed_forms_give_the_reference_bits() {
    let _switch = store_switch(StoreStrategy::NonTemporal, Some(0));
    assert_ne!(
        policy::store_for(64),
        StoreStrategy::Plain,
        "streaming is on"
    );
    let mut rng = Rng::new(0x57_4ea3);
    for ty in supported() {
        let k = gguf::kernel(ty.name()).unwrap();
        let bytes = random_blocks(&mut rng, ty, 9);
        let n = 9 * k.block_elems;
        let mut want = vec![0f32; n];
        reference::dequantize(ty, &bytes, &mut want).unwrap();
        let forms = (0..k.forms()).filter(|&f| k.decl.is_some() && form::streams(f));
        for (isa, f) in Isa::ALL
            .into_iter()
            .flat_map(|i| forms.clone().map(move |f| (i, f)))
        {
            if !isa.available() {
                support::isa_unavailable(isa, &format!("streamed GGUF blocks on {}", isa.name()));
                continue;
            }
            // Offset 0: 16-byte aligned (a Vec<f32> of this size); offset 1: not.
            for offset in [0, 1] {
                let mut buf = vec![f32::NAN; n + 1];
                let out = &mut buf[offset..offset + n];
                k.run_form(isa, f, &bytes, out).unwrap();
                let bad = (0..n).find(|&i| out[i].to_bits() != want[i].to_bits());
                assert_eq!(
                    bad,
                    None,
                    "{ty} on {} form {f}, offset {offset}",
                    isa.name()
                );
            }
            // 16-bit elements: offsets 0 and 8 are 16-byte aligned, 1 is not.
            let (mut bf, mut h) = (vec![bf16::NAN; n + 8], vec![f16::NAN; n + 8]);
            for offset in [0, 1, 8] {
                let out = &mut bf[offset..offset + n];
                k.run_form(isa, f, &bytes, out).unwrap();
                let bad = (0..n).find(|&i| out[i].to_bits() != bf16::from_f32(want[i]).to_bits());
                assert_eq!(
                    bad,
                    None,
                    "{ty} bf16 on {} form {f}, offset {offset}",
                    isa.name()
                );
                let out = &mut h[offset..offset + n];
                k.run_form(isa, f, &bytes, out).unwrap();
                let bad = (0..n).find(|&i| out[i].to_bits() != f16::from_f32(want[i]).to_bits());
                assert_eq!(
                    bad,
                    None,
                    "{ty} f16 on {} form {f}, offset {offset}",
                    isa.name()
                );
            }
        }
    }
}
