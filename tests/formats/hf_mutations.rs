//! Mutations of a small HuggingFace checkpoint's bytes: never a panic, memory
//! bounded (the binary's allocator counts each thread's heap: [`crate::alloc`]).

use std::fs;

use crate::alloc::peak_during;
use crate::support;
use dq::formats::hf::Checkpoint;
use support::hf::copy_case;

/// Peak heap for opening a ~1 KB checkpoint, whatever its bytes say.
const BUDGET: usize = 1 << 20;

#[test]
fn truncations_and_forged_header_lengths_never_panic_and_stay_small() {
    let dir = copy_case("ct-8bit-channel-sym");
    let file = dir.path().join("model.safetensors");
    let bytes = fs::read(&file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let open = |data: &[u8]| {
        fs::write(&file, data).unwrap();
        let (r, peak) = peak_during(|| Checkpoint::open(dir.path()).map(|c| c.linears().count()));
        assert!(peak < BUDGET, "{} bytes: {peak} bytes of heap", data.len());
        r
    };
    assert_eq!(open(&bytes).unwrap(), 1);
    for len in 0..bytes.len() {
        assert!(open(&bytes[..len]).is_err(), "truncated to {len} bytes");
    }
    let lengths = [
        0,
        1,
        2,
        n - 1,
        n + 1,
        n + 8,
        bytes.len() as u64,
        1 << 32,
        100_000_000,
        100_000_001,
        u64::MAX,
    ];
    for forged in lengths {
        let mut b = bytes.clone();
        b[..8].copy_from_slice(&forged.to_le_bytes());
        assert!(open(&b).is_err(), "header length {forged}");
    }
    // Every header byte replaced by a few others: an error or a valid checkpoint, no panic.
    for i in 8..8 + n as usize {
        for v in [b'0', b'9', b'-', b'"', b'}', b'[', 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            let _ = open(&b);
        }
    }
}
