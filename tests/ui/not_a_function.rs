use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [none], dst = [f32])]
struct K;

fn main() {}
