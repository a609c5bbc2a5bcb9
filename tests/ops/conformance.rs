//! The conformance vectors (tests/conformance, copied from the shared set): the
//! reference, every backend choice and the generated kernels pinned to every ISA this
//! CPU has must reproduce dst.bin bit for bit, NaN bits included on x86-64 (see
//! `support::conformance::assert_same_bits`), on one thread and split across threads.
//! A backend refusing a vector fails the test.
use crate::support;
use dq::Backend;
use dq::kernel::Reference;
use support::conformance::{assert_same_bits, case_dirs, load};
use support::paths::{default_chunks, force_chunks, ran};
use support::{backend_variants, path_unavailable};

#[test]
fn all_sixty_cases_are_present() {
    assert_eq!(case_dirs().len(), 60);
}

#[test]
fn reference_matches_every_vector() {
    for dir in case_dirs() {
        let case = load(&dir);
        let got = case.run(&Reference::default(), 1);
        assert_same_bits(case.dst_type(), &got, &case.expected, &case.name);
    }
}

/// `dq::backends().select` for every choice: each one this build has accepts every
/// vector and reproduces it on two threads.
#[test]
fn every_backend_choice_matches_every_vector_on_two_threads() {
    let backends = dq::backends();
    // The executor's own chunks (another test here forces small ones).
    let _natural = default_chunks();
    let choices = [Backend::Generated, Backend::Jit, Backend::Auto];
    for choice in choices.into_iter().filter(|b| support::in_build(b.name())) {
        if choice != Backend::Auto && backends.get(choice).is_none() {
            path_unavailable(&format!("backend {choice} (not in this build)"));
            continue;
        }
        for dir in case_dirs() {
            let case = load(&dir);
            let kernel = backends
                .select(choice, &case.plan())
                .unwrap_or_else(|e| panic!("{choice} refuses vector {}: {e}", case.name));
            let got = case.run(kernel, 2);
            let what = format!("{choice}: {}", case.name);
            assert_same_bits(case.dst_type(), &got, &case.expected, &what);
        }
        ran(&format!(
            "conformance: backend {choice} (unpinned generated kernels on {}, DQ_ISA={})",
            dq::generated::standard.isa().name(),
            std::env::var("DQ_ISA").unwrap_or_else(|_| "unset".into())
        ));
    }
}

/// Every kernel variant (each backend, and `generated/<isa>` pinned to each ISA
/// this CPU has) on every vector: whole on one thread, and on 3 threads with
/// `run_parallel` forced to cut chunks of 1, 7 and 64 elements.
#[test]
fn every_kernel_variant_and_pinned_isa_matches_every_vector() {
    let variants = backend_variants();
    let chunks = force_chunks(1);
    for dir in case_dirs() {
        let case = load(&dir);
        let plan = case.plan();
        for v in &variants {
            if let Err(e) = v.kernel.supports(&plan) {
                panic!("{} refuses vector {}: {e}", v.name, case.name);
            }
            let got = case.run(v.kernel, 1);
            let what = format!("{}: {}", v.name, case.name);
            assert_same_bits(case.dst_type(), &got, &case.expected, &what);
            for chunk in [1, 7, 64] {
                chunks.set(chunk);
                let got = case.run(v.kernel, 3);
                let what = format!("{}: {} on 3 threads, chunks of {chunk}", v.name, case.name);
                assert_same_bits(case.dst_type(), &got, &case.expected, &what);
            }
        }
    }
    for v in &variants {
        ran(&format!("conformance: {}", v.name));
    }
}
