use dq::dequant_kernel;

#[dequant_kernel(src = [f8_e4m3], zps = [none], dst = [f32])]
fn k(q: int, z: _, s: float) {
    q * s
}

fn main() {}
