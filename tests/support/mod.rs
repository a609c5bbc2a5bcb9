//! The test harness every test binary shares: the kernels under test
//! ([`kernels`]), random-but-valid cases as proptest strategies ([`cases`]), the
//! conformance-vector loader ([`conformance`]), guard-page buffers ([`guard`]) and
//! the process-wide path switches and path log ([`paths`]).
//! Cases and their seeded generator are the library's own ([`dq::case`]).
#![allow(dead_code, unused_imports)]

pub mod cases;
pub mod conformance;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod guard;
pub mod kernels;
pub mod paths;

pub use dq::case::Rng;
pub use kernels::{Variant, all_variants, backend_variants, pinned, reference};

/// Proptest cases per property: `DQ_PROPTEST_CASES`, else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("DQ_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Report a test path this build or CPU cannot run (a backend, a pinned ISA, a store
/// strategy, a thread split). Under `DQ_REQUIRE_ALL_PATHS=1` (set by `.ci/run`) that is
/// a failure naming the path. Elsewhere it writes a `SKIPPED` line straight to stderr,
/// which libtest does not capture, so the skip shows in every run's output.
pub fn path_unavailable(path: &str) {
    if std::env::var_os("DQ_REQUIRE_ALL_PATHS").is_some_and(|v| v == "1") {
        panic!("DQ_REQUIRE_ALL_PATHS=1 but this path cannot run here: {path}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED (path unavailable): {path}");
}
