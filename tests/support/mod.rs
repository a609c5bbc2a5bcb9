//! The test harness every test binary shares: the kernels under test
//! ([`kernels`]), random-but-valid cases as proptest strategies ([`cases`]), the
//! conformance-vector loader ([`conformance`]) and guard-page buffers ([`guard`]).
//! Cases and their seeded generator are the library's own ([`dq::case`]).
#![allow(dead_code, unused_imports)]

pub mod cases;
pub mod conformance;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod guard;
pub mod kernels;

pub use dq::case::Rng;
pub use kernels::{Variant, all_variants, backend_variants, pinned, reference};

/// Proptest cases per property: `DQ_PROPTEST_CASES`, else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("DQ_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
