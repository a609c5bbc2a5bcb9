use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [none], dst = [f32])]
fn k(q: int, q: int, s: float) {
    q * s
}

fn main() {}
