//! Mutations of a small HuggingFace checkpoint's bytes: never a panic, memory
//! bounded (a counting global allocator, so this is its own test binary).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;

use dq::formats::hf::Checkpoint;
use support::hf::copy_case;

/// The system allocator, counting this thread's live bytes and their peak.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + delta;
        live.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and
// only adds bookkeeping in thread-locals that never allocate (const-initialised `Cell`s).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// `f()` and the peak of heap bytes this thread held during it beyond what it held before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, (PEAK.with(Cell::get) - base).max(0) as usize)
}

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
