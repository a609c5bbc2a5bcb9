use dq::dequant_kernel;

#[dequant_kernel]
fn k(q: int, z: int, s: float) {
    (q - z) * s
}

fn main() {}
