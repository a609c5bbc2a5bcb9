//! The generated backend's float-src paths on every ISA this CPU has, against
//! values computed here from `dq::minifloat`'s decode (not the kernels' vector
//! decoders): contiguous runs of every length up to a few vectors (vector body,
//! overlapping last vector, scalar tail), a scale per element (e8m0 scales decoded
//! in vectors), groups shorter and longer than a table step (4-bit groups of 32
//! and more take the table), odd nibble starts, and transposed src or dst (the
//! strided fallback).

use crate::support;
use dq::case::{Case, OwnedTensor};
use dq::minifloat::{NAN_BITS, e8m0_to_f32, f4_e2m1_to_f32, f8_e4m3_to_f32, f8_e5m2_to_f32};
use dq::{DType, DynamicDequantize, Op, TensorDesc};
use half::{bf16, f16};
use support::paths::ran;
use support::pinned;

const SRCS: [DType; 3] = [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1];
const DSTS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The value of code `c` of float src `t`.
fn value(t: DType, c: u8) -> f32 {
    match t {
        DType::F8E4M3 => f8_e4m3_to_f32(c),
        DType::F8E5M2 => f8_e5m2_to_f32(c),
        _ => f4_e2m1_to_f32(c),
    }
}

/// `y` rounded into `dst`, little-endian (via `half`).
fn encode(dst: DType, y: f32) -> Vec<u8> {
    match dst {
        DType::F32 => y.to_le_bytes().to_vec(),
        DType::F16 => f16::from_f32(y).to_le_bytes().to_vec(),
        _ => bf16::from_f32(y).to_le_bytes().to_vec(),
    }
}

/// Scale `i` of a set: e8m0 codes sweeping every value (0 and 0xff included),
/// or dst-typed values with every exponent range the products reach.
fn scale(t: DType, i: usize) -> (Vec<u8>, f32) {
    if t == DType::E8M0 {
        let e = ((i * 67 + 250) % 256) as u8;
        return (vec![e], e8m0_to_f32(e));
    }
    let vals = [
        1.0f32,
        -0.75,
        3.0e-3,
        2f32.powi(-20),
        1.5e4,
        -2f32.powi(-7),
        0.0,
    ];
    let s = vals[i % vals.len()];
    let b = encode(t, s);
    let exact = match t {
        DType::F32 => s,
        DType::F16 => f16::from_f32(s).to_f32(),
        _ => bf16::from_f32(s).to_f32(),
    };
    (b, exact)
}

/// One case: `shape` (2-D), `op`, scale index of element (r, c), and whether src
/// or dst is transposed.
struct Layout {
    shape: [usize; 2],
    op: Op,
    scale_of: Box<dyn Fn(usize, usize) -> usize>,
    nscales: Vec<usize>,
    transposed: (bool, bool),
}

fn layouts() -> Vec<(String, Layout)> {
    let mut v: Vec<(String, Layout)> = Vec::new();
    for n in (1..=80).chain([127, 255, 256, 257]) {
        v.push((
            format!("per_tensor [2, {n}]"),
            Layout {
                shape: [2, n],
                op: DynamicDequantize::per_tensor().into(),
                scale_of: Box::new(|_, _| 0),
                nscales: vec![1],
                transposed: (false, false),
            },
        ));
        v.push((
            format!("per_channel axis 1 [3, {n}]"),
            Layout {
                shape: [3, n],
                op: DynamicDequantize::per_channel(1).into(),
                scale_of: Box::new(|_, c| c),
                nscales: vec![n],
                transposed: (false, false),
            },
        ));
    }
    for cols in [37, 64, 101] {
        v.push((
            format!("per_channel axis 0 [5, {cols}]"),
            Layout {
                shape: [5, cols],
                op: DynamicDequantize::per_channel(0).into(),
                scale_of: Box::new(|r, _| r),
                nscales: vec![5],
                transposed: (false, false),
            },
        ));
    }
    for g in [2, 7, 8, 16, 31, 32, 33, 64, 96] {
        let cols: usize = 200;
        let per_row = cols.div_ceil(g);
        v.push((
            format!("per_group [1, {g}] [3, {cols}]"),
            Layout {
                shape: [3, cols],
                op: DynamicDequantize::per_group(vec![1, g as i64]).into(),
                scale_of: Box::new(move |r, c| r * per_row + c / g),
                nscales: vec![3, per_row],
                transposed: (false, false),
            },
        ));
    }
    for t in [(true, false), (false, true)] {
        v.push((
            format!("per_channel axis 1 [20, 19] transposed {t:?}"),
            Layout {
                shape: [20, 19],
                op: DynamicDequantize::per_channel(1).into(),
                scale_of: Box::new(|_, c| c),
                nscales: vec![19],
                transposed: t,
            },
        ));
    }
    v
}

/// Strides of a row-major `[rows, cols]` stored transposed.
fn transposed([rows, _]: [usize; 2]) -> Vec<usize> {
    vec![1, rows]
}

/// Runs every layout for `src`, `dst`, `scales_t` on `kernel` and compares with
/// the values computed here.
fn check(kernel: &dq::kernel::GeneratedKernel, isa: &str, src: DType, dst: DType, scales_t: DType) {
    let ncodes = if src.is_4bit() { 16 } else { 256 };
    let w = dst.bits() / 8;
    for (name, l) in layouts() {
        let [rows, cols] = l.shape;
        let n = rows * cols;
        // Code of logical element (r, c); every code appears in the longer cases.
        let code = |r: usize, c: usize| ((c * 5 + r * 77 + cols) % ncodes) as u8;
        // Codes in storage order.
        let mut codes = vec![0u8; n];
        for r in 0..rows {
            for c in 0..cols {
                let at = if l.transposed.0 {
                    c * rows + r
                } else {
                    r * cols + c
                };
                codes[at] = code(r, c);
            }
        }
        let src_b = if src.is_4bit() {
            let v: Vec<i8> = codes.iter().map(|&c| c as i8).collect();
            dq::dtype::pack_4bit(&v)
        } else {
            codes.clone()
        };
        let k: usize = l.nscales.iter().product();
        let sc: Vec<(Vec<u8>, f32)> = (0..k).map(|i| scale(scales_t, i)).collect();
        let mut src_d = TensorDesc::new(src, &l.shape);
        if l.transposed.0 {
            src_d = src_d.with_strides(&transposed(l.shape));
        }
        let mut dst_d = TensorDesc::new(dst, &l.shape);
        if l.transposed.1 {
            dst_d = dst_d.with_strides(&transposed(l.shape));
        }
        let case = Case {
            op: l.op,
            src: OwnedTensor::new(src_d, src_b),
            scales: Some(OwnedTensor::new(
                TensorDesc::new(scales_t, &l.nscales),
                sc.iter().flat_map(|(b, _)| b.clone()).collect(),
            )),
            zps: None,
            dst: OwnedTensor::new(dst_d, vec![0xa5; n * w]),
        };
        let got = case.run(kernel).unwrap();
        for r in 0..rows {
            for c in 0..cols {
                let x = value(src, code(r, c));
                let y = if x.is_nan() {
                    f32::from_bits(NAN_BITS)
                } else {
                    x * sc[(l.scale_of)(r, c)].1
                };
                let at = if l.transposed.1 {
                    c * rows + r
                } else {
                    r * cols + c
                };
                assert_eq!(
                    got[at * w..at * w + w],
                    encode(dst, y)[..],
                    "{isa}: {src} -> {dst}, scales {scales_t}, {name}: element ({r}, {c}), code {:#x}",
                    code(r, c)
                );
            }
        }
    }
}

#[test]
fn float_src_paths_give_the_decoded_values_on_every_isa() {
    for (isa, k) in pinned(&dq::generated::standard) {
        for src in SRCS {
            for dst in DSTS {
                for scales_t in [dst, DType::E8M0] {
                    check(&k, isa.name(), src, dst, scales_t);
                }
            }
        }
        ran(&format!("float src paths on generated/{}", isa.name()));
    }
}
