// Only the JIT makes specs: safe code cannot build one to describe other code.
use dq::jit::Spec;

fn forge(other: &Spec) -> Spec {
    Spec {
        f16_blocks: true,
        ..other.clone()
    }
}

fn main() {}
