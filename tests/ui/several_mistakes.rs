use dq::dequant_kernel;

#[dequant_kernel(src = [s8, q8], zps = [none], dst = [f32, f64])]
fn k(q: int, z: int, s: float) {
    let d = q - z;
    if d > 0 { d * s } else { 0 }
}

fn main() {}
