use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [], dst = [f32])]
fn k(q: int, z: int, s: float) {
    (q - z) * s
}

fn main() {}
