// The audit's probe: relabel an s8 -> f32 entry as f16, so f32 stores would
// overrun an f16 dst. The dtype fields are private: this must not compile.
use dq::dequant_kernel;

#[dequant_kernel(src = [s8], zps = [none], dst = [f32])]
fn scaled(q: int, z: int, s: float) {
    (q - z) * s
}

fn main() {
    let mut entry = scaled.table()[0];
    entry.dst = dq::DType::F16;
    let _ = entry;
}
