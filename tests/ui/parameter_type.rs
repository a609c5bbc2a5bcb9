use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [none], dst = [f32])]
fn k(q: i8, z: int, s: f32) {
    (q - z) * s
}

fn main() {}
