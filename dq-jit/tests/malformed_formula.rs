//! Malformed formulas given to the process-wide JIT are refused with an error,
//! promptly, and leave the JIT usable: no hang (a self-referencing node once
//! looped forever while the process's map of JITs was locked), no panic.

use std::sync::mpsc;
use std::time::Duration;

use dq_jit::{FormulaProblem, JitError};
use dq_runtime::{DType, DynamicDequantize, FormulaIr, Kernel, Node, Plan, Reference, TensorDesc};

/// `Neg` of itself: a cycle.
static SELF_REF: FormulaIr = FormulaIr {
    name: "self_ref",
    nodes: &[Node::S, Node::Neg(1)],
};

/// An operand far past the last node.
static OUT_OF_RANGE: FormulaIr = FormulaIr {
    name: "out_of_range",
    nodes: &[Node::S, Node::Max(0, 9)],
};

/// Two nodes naming each other.
static MUTUAL: FormulaIr = FormulaIr {
    name: "mutual",
    nodes: &[Node::S, Node::Min(2, 0), Node::Max(1, 0)],
};

fn plan() -> Plan {
    Plan::new(
        &DynamicDequantize::per_tensor().into(),
        &TensorDesc::new(DType::S8, &[4]),
        Some(&TensorDesc::new(DType::F32, &[1])),
        None,
        &TensorDesc::new(DType::F32, &[4]),
    )
    .unwrap()
}

/// `f`'s result, failing the test if it takes more than a second (the thread of
/// a hung call is left behind).
fn within_a_second<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(1))
        .unwrap_or_else(|e| panic!("{what}: no answer within a second ({e})"))
}

#[test]
fn malformed_formulas_are_refused_promptly_and_the_jit_stays_usable() {
    for (formula, node) in [(&SELF_REF, 1), (&OUT_OF_RANGE, 1), (&MUTUAL, 1)] {
        let err = within_a_second(formula.name, || {
            let jit = dq_jit::for_formula(formula);
            (jit.kernel(&plan()).err(), jit.spec(&plan()).err())
        });
        let want = JitError::Formula {
            formula: formula.name,
            problem: FormulaProblem::LaterOperand { node },
        };
        let (kernel, spec) = err;
        let kernel = kernel.expect("a malformed formula compiles no kernel");
        assert_eq!(
            kernel.to_string(),
            dq_runtime::Error::from(want).to_string()
        );
        assert!(
            spec.is_some(),
            "{}: a malformed formula has no spec",
            formula.name
        );
        // A fresh JIT of its own refuses it too.
        let own = within_a_second(formula.name, || {
            dq_jit::Jit::new(formula, 4).kernel(&plan()).is_err()
        });
        assert!(own, "{}", formula.name);
        // The reference, which the JIT falls back on, refuses it as well.
        let reference = Reference { formula };
        assert!(reference.supports(&plan()).is_err(), "{}", formula.name);
    }
    let ok = within_a_second("dq_jit::standard()", || {
        dq_jit::standard().kernel(&plan()).map(|k| k.code_bytes())
    });
    assert!(ok.unwrap() > 0, "the standard JIT still compiles");
}
