//! The conformance vectors (tests/conformance, copied from the shared set): every
//! backend must reproduce dst.bin bit for bit.
mod support;

use dq::{Backend, Reference};
use support::conformance::{assert_same_bits, case_dirs, load};

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
        // NaN results also keep the exact bits x86-64 gives. Elsewhere the sign and
        // payload are the platform multiply's (SPEC section 5: aarch64's default
        // NaN is positive), so NaN compares as NaN there.
        if cfg!(target_arch = "x86_64") {
            assert_eq!(got, case.expected, "{}: NaN bits", case.name);
        }
    }
}

#[test]
fn every_available_backend_matches_every_vector_on_two_threads() {
    let backends = dq::backends();
    for choice in [Backend::Generated, Backend::Jit, Backend::Auto] {
        for dir in case_dirs() {
            let case = load(&dir);
            let plan = case.plan();
            let Ok(kernel) = backends.select(choice, &plan) else {
                eprintln!("NOTE: backend {choice} not available for {}", case.name);
                continue;
            };
            let got = case.run(kernel, 2);
            assert_same_bits(
                case.dst_type(),
                &got,
                &case.expected,
                &format!("{choice}: {}", case.name),
            );
        }
    }
}
