//! SPEC §10 float sources (f8_e4m3, f8_e5m2, f4_e2m1) and e8m0 scales: the decode
//! against ml_dtypes' table (tests/conformance_float/decode.txt, made by
//! scripts/make_float_vectors.py); every code of each src type and every e8m0
//! value, at every dst type and granularity, through every backend and pinned
//! ISA against the reference and against values computed here from ml_dtypes'
//! decode; the validation errors; a user `#[dequant_kernel]` over a float src;
//! and the float conformance vectors (ONNX Runtime / ml_dtypes).

use std::path::Path;

use crate::support;
use dq::case::{Case, OwnedTensor};
use dq::kernel::{GeneratedKernel, Reference};
use dq::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, Error, Op, OpKind, TensorDesc,
    dequant_kernel,
};
use half::{bf16, f16};
use support::{Variant, all_variants, path_unavailable, pinned};

const SRCS: [DType; 3] = [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1];
const DSTS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// ml_dtypes' f32 bits of every code of `t` (decode.txt).
fn ml_dtypes_decode(t: DType) -> Vec<u32> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance_float/decode.txt");
    let text = std::fs::read_to_string(path).expect("decode.txt");
    let rows: Vec<u32> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0] == t.name()).then(|| u32::from_str_radix(f[2], 16).unwrap())
        })
        .collect();
    assert_eq!(rows.len(), if t == DType::F4E2M1 { 16 } else { 256 });
    rows
}

/// The value of code `c` of `t` from ml_dtypes' table, NaN as dq's one NaN.
fn independent(t: DType, c: u8) -> f32 {
    let x = f32::from_bits(ml_dtypes_decode_cached(t)[c as usize]);
    if x.is_nan() {
        f32::from_bits(dq::minifloat::NAN_BITS)
    } else {
        x
    }
}

fn ml_dtypes_decode_cached(t: DType) -> &'static [u32] {
    use std::sync::OnceLock;
    static T: [OnceLock<Vec<u32>>; 4] = [const { OnceLock::new() }; 4];
    let i = [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1, DType::E8M0]
        .iter()
        .position(|&d| d == t)
        .unwrap();
    T[i].get_or_init(|| ml_dtypes_decode(t))
}

#[test]
fn decode_matches_ml_dtypes_at_every_code() {
    for t in [DType::F8E4M3, DType::F8E5M2, DType::F4E2M1, DType::E8M0] {
        let table = t.decode_table().unwrap();
        for (c, &want) in ml_dtypes_decode(t).iter().enumerate() {
            let got = table[c];
            let want = f32::from_bits(want);
            if want.is_nan() {
                assert_eq!(got.to_bits(), dq::minifloat::NAN_BITS, "{t} {c:#x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{t} {c:#x}");
            }
        }
    }
    // The named decoders are the tables.
    for c in 0..=255u8 {
        use dq::minifloat::*;
        assert_eq!(
            f8_e4m3_to_f32(c).to_bits(),
            F8_E4M3_TABLE[c as usize].to_bits()
        );
        assert_eq!(
            f8_e5m2_to_f32(c).to_bits(),
            F8_E5M2_TABLE[c as usize].to_bits()
        );
        assert_eq!(e8m0_to_f32(c).to_bits(), E8M0_TABLE[c as usize].to_bits());
        assert_eq!(
            f4_e2m1_to_f32(c).to_bits(),
            F4_E2M1_TABLE[c as usize & 15].to_bits()
        );
    }
}

/// `y` rounded into `dst` as little-endian bytes (SPEC §5 step 5, via `half`).
fn encode(dst: DType, y: f32) -> Vec<u8> {
    match dst {
        DType::F32 => y.to_le_bytes().to_vec(),
        DType::F16 => f16::from_f32(y).to_le_bytes().to_vec(),
        _ => bf16::from_f32(y).to_le_bytes().to_vec(),
    }
}

/// 256 scales of dtype `t` (dst-typed: landmarks then spread values; e8m0: every code).
fn scales(t: DType) -> Vec<u8> {
    if t == DType::E8M0 {
        return (0..=255u8).collect();
    }
    let mut v = vec![
        1.0f32,
        -1.0,
        0.0,
        -0.0,
        0.5,
        3.0,
        -7.25,
        1e-3,
        2f32.powi(-20),
        2f32.powi(-40),
        2f32.powi(-126),
        65504.0,
        1e30,
        -3e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(dq::minifloat::NAN_BITS),
        // NaNs of other signs and payloads: a NaN src still gives its own NaN.
        f32::from_bits(0xffc0_1234),
        f32::from_bits(0x7fa0_0001),
    ];
    let mut x = 0x1234_5678u32;
    while v.len() < 256 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let e = (x >> 24) % 60;
        v.push(((x & 0xffff) as f32 / 65536.0 - 0.5) * 2f32.powi(e as i32 - 30));
    }
    v.into_iter().flat_map(|s| encode(t, s)).collect()
}

/// Scale `i` of a buffer from [`scales`] as the exact f32.
fn scale_f32(t: DType, b: &[u8], i: usize) -> f32 {
    match t {
        DType::E8M0 => {
            f32::from_bits(ml_dtypes_decode_cached(DType::E8M0)[b[i] as usize]).max_nan()
        }
        DType::F32 => f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()),
        DType::F16 => f16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
        _ => bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
    }
}

/// ml_dtypes gives e8m0 NaN with its own bits; dq's is the one NaN.
trait OneNan {
    fn max_nan(self) -> f32;
}
impl OneNan for f32 {
    fn max_nan(self) -> f32 {
        if self.is_nan() {
            f32::from_bits(dq::minifloat::NAN_BITS)
        } else {
            self
        }
    }
}

/// Packs codes for `t` (4-bit: two per byte, low nibble first).
fn pack(t: DType, codes: &[u8]) -> Vec<u8> {
    if t.is_4bit() {
        let v: Vec<i8> = codes.iter().map(|&c| c as i8).collect();
        dq::dtype::pack_4bit(&v)
    } else {
        codes.to_vec()
    }
}

/// One layout of every code against 256 scales: the op, the shape, the code of
/// element (r, c) and the scale index of element (r, c).
struct Layout {
    name: &'static str,
    op: Op,
    shape: [usize; 2],
    scale_shape: Vec<usize>,
    scale_of: fn(usize, usize) -> usize,
}

fn layouts() -> Vec<Layout> {
    vec![
        // One scale per row (a whole contiguous run per scale).
        Layout {
            name: "per_channel axis 0",
            op: DynamicDequantize::per_channel(0).into(),
            shape: [256, 256],
            scale_shape: vec![256],
            scale_of: |r, _| r,
        },
        // A scale per element along the row.
        Layout {
            name: "per_channel axis 1",
            op: DynamicDequantize::per_channel(1).into(),
            shape: [9, 256],
            scale_shape: vec![256],
            scale_of: |_, c| c,
        },
        // Groups of 32 along rows of odd length (4-bit rows start mid-byte).
        Layout {
            name: "per_group [1, 32]",
            op: DynamicDequantize::per_group(vec![1, 32]).into(),
            shape: [32, 251],
            scale_shape: vec![32, 8],
            scale_of: |r, c| r * 8 + c / 32,
        },
        // One scale for all (every scale in turn would be 256 cases: one is enough
        // here, the others meet every code above).
        Layout {
            name: "per_tensor",
            op: DynamicDequantize::per_tensor().into(),
            shape: [3, 257],
            scale_shape: vec![1],
            scale_of: |_, _| 6,
        },
    ]
}

/// Runs `kernels` on every code of `src` at dst `dst` with scales of `scales_t`
/// in every layout; each must give the reference's bits, and the reference must
/// give the values computed here from ml_dtypes' decode (NaN by exact bits).
fn sweep(variants: &[Variant], src: DType, dst: DType, scales_t: DType) {
    let ncodes = if src.is_4bit() { 16 } else { 256 };
    let all_scales = scales(scales_t);
    for l in layouts() {
        let [rows, cols] = l.shape;
        let code = |r: usize, c: usize| ((c * 7 + r * 3) % ncodes) as u8;
        let codes: Vec<u8> = (0..rows * cols).map(|i| code(i / cols, i % cols)).collect();
        let nscales: usize = l.scale_shape.iter().product();
        let sw = scales_t.bits() / 8;
        let sc = if nscales == 1 {
            all_scales[6 * sw..7 * sw].to_vec()
        } else {
            all_scales[..nscales * sw].to_vec()
        };
        let case = Case {
            op: l.op.clone(),
            src: OwnedTensor::new(TensorDesc::new(src, &l.shape), pack(src, &codes)),
            scales: Some(OwnedTensor::new(
                TensorDesc::new(scales_t, &l.scale_shape),
                sc.clone(),
            )),
            zps: None,
            dst: OwnedTensor::new(
                TensorDesc::new(dst, &l.shape),
                vec![0xa5; rows * cols * dst.bits() / 8],
            ),
        };
        let what = format!("{src} -> {dst}, scales {scales_t}, {}", l.name);
        let want = case.run(support::reference()).unwrap();
        // The reference against values computed here.
        let w = dst.bits() / 8;
        for i in 0..rows * cols {
            let (r, c) = (i / cols, i % cols);
            let si = if nscales == 1 { 0 } else { (l.scale_of)(r, c) };
            let x = independent(src, code(r, c));
            let y = if x.is_nan() {
                x
            } else {
                x * scale_f32(scales_t, &sc, si)
            };
            assert_eq!(
                want[i * w..i * w + w],
                encode(dst, y)[..],
                "{what}: reference at element {i} (code {:#x})",
                code(r, c)
            );
        }
        for v in variants {
            match v.kernel.supports(&case.plan().unwrap()) {
                Ok(()) => {}
                Err(e) if v.name == "jit" => {
                    path_unavailable(&format!("jit: {what} ({e})"));
                    continue;
                }
                Err(e) => panic!("{}: {what}: {e}", v.name),
            }
            for threads in [1, 3] {
                let got = case.run_parallel(v.kernel, threads).unwrap();
                if got != want {
                    let i = (0..got.len()).find(|&i| got[i] != want[i]).unwrap() / w;
                    panic!(
                        "{}: {what}, {threads} threads: element {i} (code {:#x}) differs: {:02x?} vs {:02x?}",
                        v.name,
                        codes[i],
                        &got[i * w..i * w + w],
                        &want[i * w..i * w + w]
                    );
                }
            }
        }
    }
}

#[test]
fn every_code_every_dst_every_backend() {
    let variants = all_variants();
    for src in SRCS {
        for dst in DSTS {
            sweep(&variants, src, dst, dst);
        }
    }
}

#[test]
fn every_e8m0_scale_every_code_every_backend() {
    let variants = all_variants();
    for src in SRCS {
        for dst in DSTS {
            sweep(&variants, src, dst, DType::E8M0);
        }
    }
    // e8m0 scales with integer src (SPEC §10: any src type).
    for src in [DType::U4, DType::S8] {
        sweep_int_e8m0(&variants, src);
    }
}

/// Integer src with e8m0 scales: every e8m0 value, zero points, every backend.
fn sweep_int_e8m0(variants: &[Variant], src: DType) {
    for dst in DSTS {
        let n = 256 * 40;
        let q: Vec<i8> = (0..n).map(|i| ((i * 5) % 16) as i8 - 8).collect();
        let src_b = if src.is_4bit() {
            dq::dtype::pack_4bit(&q)
        } else {
            q.iter().map(|&x| x as u8).collect()
        };
        let case = Case {
            op: DynamicDequantize::per_channel(0).into(),
            src: OwnedTensor::new(TensorDesc::new(src, &[256, 40]), src_b),
            scales: Some(OwnedTensor::new(
                TensorDesc::new(DType::E8M0, &[256]),
                (0..=255).collect(),
            )),
            zps: Some(OwnedTensor::new(TensorDesc::new(DType::S8, &[1]), vec![3])),
            dst: OwnedTensor::new(
                TensorDesc::new(dst, &[256, 40]),
                vec![0; n * dst.bits() / 8],
            ),
        };
        let want = case.run(support::reference()).unwrap();
        let w = dst.bits() / 8;
        for i in 0..n {
            let s = dq::minifloat::e8m0_to_f32((i / 40) as u8);
            let qv = if src.is_4bit() && src == DType::U4 {
                q[i] as u8 as i32 & 15
            } else {
                q[i] as i32
            };
            let y = (qv - 3) as f32 * s;
            assert_eq!(
                want[i * w..i * w + w],
                encode(dst, y)[..],
                "{src} {dst} {i}"
            );
        }
        for v in variants {
            if let Err(e) = v.kernel.supports(&case.plan().unwrap()) {
                assert_eq!(v.name, "jit", "{e}");
                path_unavailable(&format!("jit: {src} with e8m0 scales ({e})"));
                continue;
            }
            assert_eq!(
                case.run_parallel(v.kernel, 2).unwrap(),
                want,
                "{} {src} {dst}",
                v.name
            );
        }
    }
}

// --- validation -----------------------------------------------------------

fn call(
    op: Op,
    src: DType,
    scales: Option<(DType, &[usize])>,
    zps: Option<DType>,
    dst: DType,
) -> Result<(), Error> {
    let shape = [4, 8];
    let n = 32;
    let scales_t = scales.map(|(t, s)| {
        let k: usize = s.iter().product();
        OwnedTensor::new(TensorDesc::new(t, s), vec![0x3c; k * t.bits() / 8])
    });
    let case = Case {
        op,
        src: OwnedTensor::new(
            TensorDesc::new(src, &shape),
            vec![0x11; src.bytes_for(n).unwrap()],
        ),
        scales: scales_t,
        zps: zps.map(|t| OwnedTensor::new(TensorDesc::new(t, &[1]), vec![1; 4])),
        dst: OwnedTensor::new(TensorDesc::new(dst, &shape), vec![0x77; n * dst.bits() / 8]),
    };
    // Nothing is written: through the facade, the dst bytes stay as they were.
    let mut out = case.dst.data.clone();
    let r = {
        let mut dst_t = dq::TensorMut {
            desc: case.dst.desc.clone(),
            data: &mut out,
        };
        dq::dequantize(
            &case.op,
            &case.src.view(),
            case.scales.as_ref().map(|s| s.view()).as_ref(),
            case.zps.as_ref().map(|z| z.view()).as_ref(),
            &mut dst_t,
            &dq::Options::default(),
        )
    };
    if r.is_err() {
        assert_eq!(out, case.dst.data, "nothing written on {r:?}");
    }
    r
}

#[test]
fn float_src_takes_no_zero_points() {
    for src in SRCS {
        let e = call(
            DynamicDequantize::per_tensor().into(),
            src,
            Some((DType::F32, &[1])),
            Some(DType::U8),
            DType::F32,
        );
        let want = Error::FloatSrcZps {
            op: OpKind::Dynamic,
            src,
        };
        assert_eq!(e, Err(want.clone()), "{src}");
        assert_eq!(
            want.to_string(),
            format!("DynamicDequantize: src dtype {src} is a float type and takes no zero points")
        );
    }
    for src in [DType::F8E4M3, DType::F8E5M2] {
        let op = Dequantize::new(vec![0.5]).zps(vec![1]).into();
        assert_eq!(
            call(op, src, None, None, DType::F32),
            Err(Error::FloatSrcZps {
                op: OpKind::Dequantize,
                src
            })
        );
        // Without zero points the static op runs it (dst f32).
        let op = Dequantize::new(vec![0.5]).into();
        assert_eq!(call(op, src, None, None, DType::F32), Ok(()));
    }
    // f4_e2m1 is not a static src; f64 is no float-src dst.
    let op: Op = Dequantize::new(vec![0.5]).into();
    assert!(matches!(
        call(op, DType::F4E2M1, None, None, DType::F32),
        Err(Error::SrcDType { .. })
    ));
    assert!(matches!(
        call(
            DynamicDequantize::per_tensor().into(),
            DType::F8E4M3,
            Some((DType::F64, &[1])),
            None,
            DType::F64
        ),
        Err(Error::DstDType { .. })
    ));
}

#[test]
fn e8m0_scales_only_on_dynamic() {
    let e = call(
        AxesDequantize::new(vec![0]).into(),
        DType::S8,
        Some((DType::E8M0, &[4])),
        Some(DType::S8),
        DType::F32,
    );
    assert_eq!(e, Err(Error::E8m0Scales { op: OpKind::Axes }));
    let e = call(
        Dequantize::new(vec![1.0]).into(),
        DType::F8E4M3,
        Some((DType::E8M0, &[1])),
        None,
        DType::F32,
    );
    assert_eq!(
        e,
        Err(Error::E8m0Scales {
            op: OpKind::Dequantize
        })
    );
    assert_eq!(
        Error::E8m0Scales { op: OpKind::Axes }.to_string(),
        format!(
            "{}: e8m0 scales are only allowed for DynamicDequantize",
            OpKind::Axes
        )
    );
}

#[test]
fn scales_neither_dst_nor_e8m0() {
    for (src, bad) in [(DType::F4E2M1, DType::F16), (DType::U4, DType::F32)] {
        let e = call(
            DynamicDequantize::per_tensor().into(),
            src,
            Some((bad, &[1])),
            None,
            DType::BF16,
        );
        let want = Error::ScalesNotDstOrE8m0 {
            dst: DType::BF16,
            got: bad,
        };
        assert_eq!(e, Err(want.clone()));
        assert_eq!(
            want.to_string(),
            format!("scales dtype {bad} is neither the dst dtype bf16 nor e8m0")
        );
    }
    // An e8m0 scale per group (MXFP4) is accepted and runs.
    assert_eq!(
        call(
            DynamicDequantize::per_group(vec![1, 4]).into(),
            DType::F4E2M1,
            Some((DType::E8M0, &[4, 2])),
            None,
            DType::BF16
        ),
        Ok(())
    );
}

// --- a user kernel over a float src --------------------------------------

/// A user's fused kernel over float src: `q` is the float value, `z` is 0.
#[dequant_kernel(src = [f8_e4m3, f4_e2m1], zps = [none], dst = [f32, bf16], scales = [dst, e8m0])]
fn float_relu_plus(x: float, z: _, s: float) {
    max((x - z) * s, 0.0) + abs(x) * 0.5
}

#[test]
fn user_kernel_over_float_src() {
    let k: &GeneratedKernel = &float_relu_plus;
    assert_eq!(k.ir().q_kind(), dq::kernel::QKind::Float);
    assert_eq!(k.ir_for(DType::F8E4M3), Some(k.ir()));
    assert_eq!(k.ir_for(DType::S8), None);
    assert_eq!(k.table().len(), 2 * 2 * 2);
    let reference = Reference { formula: k.ir() };
    for src in [DType::F8E4M3, DType::F4E2M1] {
        for dst in [DType::F32, DType::BF16] {
            for scales_t in [dst, DType::E8M0] {
                let ncodes = if src.is_4bit() { 16 } else { 256 };
                let (rows, cols) = (8, 67);
                let codes: Vec<u8> = (0..rows * cols).map(|i| (i * 11 % ncodes) as u8).collect();
                let sc = scales(scales_t);
                let sw = scales_t.bits() / 8;
                let case = Case {
                    op: DynamicDequantize::per_channel(0).into(),
                    src: OwnedTensor::new(TensorDesc::new(src, &[rows, cols]), pack(src, &codes)),
                    scales: Some(OwnedTensor::new(
                        TensorDesc::new(scales_t, &[rows]),
                        sc[120 * sw..(120 + rows) * sw].to_vec(),
                    )),
                    zps: None,
                    dst: OwnedTensor::new(
                        TensorDesc::new(dst, &[rows, cols]),
                        vec![0; rows * cols * dst.bits() / 8],
                    ),
                };
                let want = case.run(&reference).unwrap();
                let w = dst.bits() / 8;
                for i in 0..rows * cols {
                    let x = independent(src, codes[i]);
                    let s = scale_f32(scales_t, &sc, 120 + i / cols);
                    let y = (x * s).max(0.0) + x.abs() * 0.5;
                    let y = if x.is_nan() {
                        x
                    } else if (x * s).is_nan() {
                        x * s
                    } else {
                        y
                    };
                    assert_eq!(
                        want[i * w..i * w + w],
                        encode(dst, y)[..],
                        "{src} {dst} {i}"
                    );
                }
                for (isa, p) in pinned(k) {
                    let got = case.run_parallel(&p, 2).unwrap();
                    assert_eq!(got, want, "{src} -> {dst} scales {scales_t} on {isa:?}");
                }
            }
        }
    }
}

// --- conformance vectors ------------------------------------------------------

/// The vectors of tests/conformance_float: (name, case, expected dst bytes).
fn float_vectors() -> Vec<(String, Case, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance_float");
    let mut dirs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let j: serde_json::Value =
                serde_json::from_slice(&std::fs::read(d.join("case.json")).unwrap()).unwrap();
            let t = |k: &str| j[k].as_str().unwrap().parse::<DType>().unwrap();
            let ints = |k: &str| -> Vec<i64> {
                j[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap())
                    .collect()
            };
            let shape: Vec<usize> = ints("shape").into_iter().map(|x| x as usize).collect();
            let (src, dst, sc) = (t("src_type"), t("dst_type"), t("scales_type"));
            let (op, scale_shape): (Op, Vec<usize>) = match j["qtype"].as_str().unwrap() {
                "per_tensor" => (DynamicDequantize::per_tensor().into(), vec![1]),
                "per_channel" => {
                    let a = j["axis"].as_i64().unwrap();
                    (
                        DynamicDequantize::per_channel(a).into(),
                        vec![shape[a as usize]],
                    )
                }
                _ => {
                    let g = ints("group_shape");
                    let ss = shape.iter().zip(&g).map(|(&d, &g)| d.div_ceil(g as usize));
                    let ss = ss.collect();
                    (DynamicDequantize::per_group(g).into(), ss)
                }
            };
            let read = |f: &str| std::fs::read(d.join(f)).unwrap();
            let expected = read("dst.bin");
            let case = Case {
                op,
                src: OwnedTensor::new(TensorDesc::new(src, &shape), read("src.bin")),
                scales: Some(OwnedTensor::new(
                    TensorDesc::new(sc, &scale_shape),
                    read("scales.bin"),
                )),
                zps: None,
                dst: OwnedTensor::new(TensorDesc::new(dst, &shape), vec![0; expected.len()]),
            };
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            (name, case, expected)
        })
        .collect()
}

#[test]
fn float_conformance_vectors_on_every_backend() {
    let vectors = float_vectors();
    assert!(vectors.len() >= 9, "the committed float vectors");
    let ort = vectors
        .iter()
        .filter(|(n, ..)| {
            let j = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/conformance_float")
                    .join(n)
                    .join("case.json"),
            )
            .unwrap();
            j.contains("onnxruntime")
        })
        .count();
    assert!(ort >= 3, "ONNX Runtime made the float8 f32 vectors");
    for (name, case, expected) in &vectors {
        let dst = case.dst.desc.dtype;
        for v in all_variants() {
            if let Err(e) = v.kernel.supports(&case.plan().unwrap()) {
                assert_eq!(v.name, "jit", "{name}: {e}");
                path_unavailable(&format!("jit: {name} ({e})"));
                continue;
            }
            let got = case.run_parallel(v.kernel, 2).unwrap();
            support::conformance::assert_same_values(
                dst,
                &got,
                expected,
                &format!("{name} on {}", v.name),
            );
        }
    }
}
