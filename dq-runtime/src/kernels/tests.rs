use super::*;
use crate::formula::STANDARD;

#[test]
fn standard_rust_formula_equals_the_ir() {
    let l = Scalar::<i64, f32>::default();
    for (q, z, s) in [
        (127i64, i32::MIN as i64, 1.0f32),
        (-8, 7, -0.0),
        (3, 3, -1.5),
        (255, 0, f32::from_bits(1)),
        (0, 1, f32::INFINITY),
    ] {
        let want = STANDARD.eval(q, z, s);
        let got = Standard::eval(l, q, z, s);
        assert_eq!(got.to_bits(), want.to_bits(), "{q} {z} {s}");
    }
    let wide = Scalar::<i128, f64>::default();
    let got = Standard::eval(wide, -128, i64::MAX as i128, 1.0f64);
    assert_eq!(got, STANDARD.eval(-128, i64::MAX, 1.0f64));
}

#[test]
fn entry_keys_and_unknown_combinations() {
    use dtypes::{F32, NoZp, S8, U4};
    static TABLE: [Entry; 1] = [Entry::new::<S8, NoZp, F32, Standard>()];
    let k = GeneratedKernel::new(&STANDARD, &TABLE);
    assert_eq!(k.table()[0].key(), (DType::S8, None, DType::F32));
    let _ = Entry::new::<U4, U4, F32, Standard>();
    let src = crate::TensorDesc::new(DType::U8, &[4]);
    let dst = crate::TensorDesc::new(DType::F32, &[4]);
    let sc = crate::TensorDesc::new(DType::F32, &[1]);
    let op = crate::DynamicDequantize::per_tensor().into();
    let plan = Plan::new(&op, &src, Some(&sc), None, &dst).unwrap();
    assert!(matches!(
        k.supports(&plan),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(k.with_isa(Isa::Portable).is_some());
}
