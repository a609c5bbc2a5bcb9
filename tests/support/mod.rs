//! The test harness every test binary shares: the kernels under test
//! ([`kernels`]), random-but-valid cases as proptest strategies ([`cases`]), the
//! conformance-vector loader ([`conformance`]), guard-page buffers ([`guard`]) and
//! the process-wide path switches and path log ([`paths`]), and the HuggingFace
//! checkpoint fixtures ([`hf`]).
//! Cases and their seeded generator are the library's own ([`dq::case`]).
#![allow(dead_code, unused_imports)]

pub mod cases;
pub mod conformance;
pub mod gguf;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod guard;
pub mod hf;
pub mod kernels;
pub mod paths;

pub use dq::case::Rng;

/// Bytes from `addr` to the first address at or after it that lies `at` bytes
/// (0..64) into a 64-byte line: 0..64.
pub fn to_line_at(addr: usize, at: usize) -> usize {
    (at + 64 - addr % 64) % 64
}
pub use kernels::{Variant, all_variants, backend_variants, pinned, reference};

/// Report an ISA-pinned path that did not run: `NOT ON THIS CPU` when the CPU's own
/// flags lack `isa` (not a failure: CI runs on the CPU it gets), else
/// [`path_unavailable`] (the library refused an ISA this CPU has).
pub fn isa_unavailable(isa: dq::arch::Isa, path: &str) {
    if paths::cpu_has(isa) {
        path_unavailable(path);
    } else {
        kernels::not_on_this_cpu(isa);
    }
}

/// Whether this build has the backend named `name` (`reference`, `generated`, `jit`,
/// `auto`): all but the JIT without the cargo feature `jit`. A backend the build
/// leaves out is not a path this machine lacks: tests leave it out too.
pub fn in_build(name: &str) -> bool {
    name != dq::Backend::Jit.name() || cfg!(feature = "jit")
}

/// Every [`dq::Backend`] this build has ([`in_build`]).
pub fn built_backends() -> Vec<dq::Backend> {
    let all = dq::Backend::ALL.into_iter();
    all.filter(|b| in_build(b.name())).collect()
}

/// The libtest name of the test `name` of module `module` (its `module_path!()`,
/// whose first segment is the test binary's crate), to run it alone in a child
/// process with `--exact`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

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

/// proptest's settings for the test file `file`: `cases` cases, failures persisted
/// beside the source (`*.proptest-regressions`, replayed first), and a fixed RNG seed
/// so that every run (CI included) explores the same cases; `PROPTEST_RNG_SEED` picks
/// another. The seed is printed to stderr (uncaptured) so any run can be replayed.
pub fn seeded_config(file: &str, cases: u32) -> proptest::prelude::ProptestConfig {
    use proptest::test_runner::{FileFailurePersistence, RngSeed};
    let mut c = proptest::prelude::ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Default::default()
    };
    if c.rng_seed == RngSeed::Random {
        c.rng_seed = RngSeed::Fixed(0x0d9e_5eed);
    }
    if let RngSeed::Fixed(seed) = c.rng_seed {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "{file}: proptest seed {seed} (set PROPTEST_RNG_SEED to change it)"
        );
    }
    c
}
