//! Shared helpers for the reliability tests: the kernels under test, a seeded byte
//! generator, random-but-valid cases (proptest strategies) and running a case.
#![allow(dead_code)]

pub mod cases;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod guard;

use std::sync::OnceLock;

use dq::{Kernel, Reference};

/// Proptest cases per property: `DQ_PROPTEST_CASES`, else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("DQ_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One kernel under test, with a name for messages.
#[derive(Clone, Copy)]
pub struct Variant {
    /// `reference`, `generated`, `jit`, or `generated/<isa>` once ISAs can be pinned.
    pub name: &'static str,
    /// The kernel.
    pub kernel: &'static dyn Kernel,
}

static REFERENCE: Reference = Reference {
    formula: &dq::STANDARD,
};

/// The scalar reference kernel.
pub fn reference() -> &'static dyn Kernel {
    &REFERENCE
}

/// Every non-reference kernel this build offers (`dq::backends()`), plus the
/// generated kernels pinned to each ISA this CPU has; absent ones are noted loudly.
pub fn backend_variants() -> Vec<Variant> {
    static VARIANTS: OnceLock<Vec<Variant>> = OnceLock::new();
    VARIANTS
        .get_or_init(|| {
            let b = dq::backends();
            let mut v = Vec::new();
            for backend in [dq::Backend::Generated, dq::Backend::Jit] {
                let name = backend.name();
                match b.get(backend) {
                    Some(kernel) => v.push(Variant { name, kernel }),
                    None => note_once(name),
                }
            }
            v.extend(generated_isa_variants());
            v
        })
        .clone()
}

/// The generated backend pinned to every ISA (`generated/avx512`, ...).
fn generated_isa_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for isa in dq::arch::Isa::ALL {
        let name: &'static str = format!("generated/{}", isa.name()).leak();
        match dq::generated::dequantize.with_isa(isa) {
            Some(k) => v.push(Variant {
                name,
                kernel: Box::leak(Box::new(k)),
            }),
            None => note_once(name),
        }
    }
    v
}

/// The reference followed by every backend variant.
pub fn all_variants() -> Vec<Variant> {
    let mut v = vec![Variant {
        name: "reference",
        kernel: reference(),
    }];
    v.extend(backend_variants());
    v
}

fn note_once(name: &'static str) {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&name) {
        seen.push(name);
        eprintln!("SKIPPED: kernel `{name}` is not available in this build or on this CPU");
    }
}

/// SplitMix64: a tiny seeded generator for test data.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A random element of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// Hex dump, abbreviated past `max` bytes, for failure messages.
pub fn hex(b: &[u8], max: usize) -> String {
    let shown: Vec<String> = b.iter().take(max).map(|x| format!("{x:02x}")).collect();
    let more = if b.len() > max {
        format!(" ... ({} bytes)", b.len())
    } else {
        String::new()
    };
    format!("[{}]{more}", shown.join(" "))
}
