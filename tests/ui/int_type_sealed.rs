// A user marker claiming to be f16 while storing f32 would let `Entry::new`
// build an entry whose stores overrun its dst. The marker traits are sealed.
use dq::__private::dtypes::FloatType;

struct Liar;

impl FloatType for Liar {
    const DTYPE: dq::DType = dq::DType::F16;
    const SIZE: usize = 4;
    const VECTOR: bool = false;
    type Work = f32;
}

fn main() {}
