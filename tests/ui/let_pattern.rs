use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [none], dst = [f32])]
fn k(q: int, z: int, s: float) {
    let (d, e) = q - z;
    d * s
}

fn main() {}
