use dq::dequant_kernel;

#[dequant_kernel(src = [s8, f8_e5m2], zps = [none], dst = [f32])]
fn k(q: float, z: _, s: float) {
    q * s
}

fn main() {}
