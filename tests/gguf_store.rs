//! GGUF tensors into f32 with non-temporal stores (decoded a tile at a time into a
//! buffer in L1 and streamed from there): gguf-py's bits on every backend and thread
//! split. This binary forces the strategy for every output (the policy's test
//! hooks), so the streamed path runs on the small fixtures.

mod support;

use dq::formats::gguf::Gguf;
use dq::policy::{self, StoreStrategy};
use dq::{Backend, Options};
use support::gguf::{expected, fixtures};

#[test]
fn streamed_outputs_match_gguf_py() {
    policy::set_large_output(Some(0));
    policy::set_large_store(StoreStrategy::NonTemporal);
    assert_eq!(policy::store_for(4), StoreStrategy::NonTemporal);
    let file = Gguf::open(fixtures().join("blocks.gguf")).unwrap();
    let mut seen = 0;
    for t in file.tensors().iter().filter(|t| t.is_supported()) {
        let want = expected("blocks", t.name());
        for backend in [Backend::Generated, Backend::Jit, Backend::Reference] {
            for threads in [1, 3] {
                let mut got = vec![f32::NAN; want.len()];
                file.dequantize(t, &mut got, &Options { backend, threads })
                    .unwrap();
                let first = (got.iter().zip(&want)).position(|(g, w)| g.to_bits() != w.to_bits());
                assert_eq!(first, None, "{} {backend} {threads} threads", t.name());
            }
        }
        seen += 1;
    }
    assert!(seen >= 14, "{seen} tensors");
}
