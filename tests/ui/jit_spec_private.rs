// A compiled kernel's spec is what `run` checks jobs against: safe code can
// neither retarget a cached kernel to another plan nor forge a spec.
use std::sync::Arc;

use dq::dq_jit::{CompiledKernel, Spec};

fn retarget(mut kernel: Arc<CompiledKernel>, other: &Spec) {
    let k = Arc::get_mut(&mut kernel).unwrap();
    k.spec.lowering = other.lowering().clone();
}

fn forge(other: &Spec) -> Spec {
    Spec {
        f16_blocks: true,
        ..other.clone()
    }
}

fn main() {}
