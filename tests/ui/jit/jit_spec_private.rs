// A compiled kernel's spec is what `run` checks jobs against: safe code cannot
// retarget a cached kernel to another plan's spec.
use std::sync::Arc;

use dq::jit::{CompiledKernel, Spec};

fn retarget(mut kernel: Arc<CompiledKernel>, other: &Spec) {
    let k = Arc::get_mut(&mut kernel).unwrap();
    k.spec.lowering = other.lowering().clone();
}

fn main() {}
