//! The conformance vectors (tests/conformance): loading a case folder, and bit
//! comparison (NaN bits exact on x86-64, where the contract fixes them).

use std::path::{Path, PathBuf};

use dq::case::{Case, OwnedTensor};
use dq::kernel::Kernel;
use dq::{AxesDequantize, DType, Dequantize, DynamicDequantize, Op, Plan, Qtype, TensorDesc};
use serde_json::Value;

/// One conformance vector, loaded: the case (dst zeroed) and the expected dst bytes.
pub struct Vector {
    /// The folder name.
    pub name: String,
    /// Op, inputs and dst view.
    pub case: Case,
    /// `dst.bin`.
    pub expected: Vec<u8>,
}

/// The folder of the conformance vectors copied into the repo.
pub fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// Every case folder, sorted.
pub fn case_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    v.sort();
    v
}

fn dtype(v: &Value) -> DType {
    v.as_str().unwrap().parse().unwrap()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn shape_of(v: &Value) -> Vec<usize> {
    ints(v).into_iter().map(|x| x as usize).collect()
}

/// Loads one case folder.
pub fn load(dir: &Path) -> Vector {
    let j: Value = serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let shape = shape_of(&j["shape"]);
    let src_t = dtype(&j["src_type"]);
    let dst_t = dtype(&j["dst_type"]);
    let qtype = j
        .get("qtype")
        .and_then(Value::as_str)
        .map(|q| q.parse::<Qtype>().unwrap());
    let axis = j.get("axis").and_then(Value::as_i64).unwrap_or(1);
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let scale_shape = || -> Vec<usize> {
        match (j["op"].as_str().unwrap(), qtype) {
            ("axes", _) => {
                let mut a = ints(&j["axes"]);
                a.sort();
                a.iter().map(|&d| shape[d as usize]).collect()
            }
            (_, Some(Qtype::PerChannel)) => {
                let a = dq_runtime::plan::normalize_axis(axis, shape.len()).unwrap();
                vec![shape[a]]
            }
            (_, Some(Qtype::PerGroup)) => {
                let g = ints(&j["group_shape"]);
                shape
                    .iter()
                    .zip(&g)
                    .map(|(&d, &g)| d.div_ceil(g as usize))
                    .collect()
            }
            _ => vec![1],
        }
    };
    let zps_t = j["zps_type"].as_str().map(|s| s.parse::<DType>().unwrap());
    let (op, scales, zps): (Op, _, _) = match j["op"].as_str().unwrap() {
        "dequantize" => {
            let scales = j["scales"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let mut o = Dequantize::new(scales).qtype(qtype.unwrap());
            o.axis = axis;
            if !j["zps"].is_null() {
                o = o.zps(ints(&j["zps"]));
            }
            (o.into(), None, None)
        }
        kind => {
            let ss = scale_shape();
            let scales = Some(OwnedTensor::new(
                TensorDesc::new(dst_t, &ss),
                read("scales.bin"),
            ));
            let zps = zps_t.map(|t| OwnedTensor::new(TensorDesc::new(t, &ss), read("zps.bin")));
            let op: Op = if kind == "axes" {
                AxesDequantize::new(ints(&j["axes"])).into()
            } else {
                let mut o = DynamicDequantize::per_tensor()
                    .qtype(qtype.unwrap())
                    .axis(axis);
                if let Some(g) = j.get("group_shape") {
                    o = o.group_shape(ints(g));
                }
                o.into()
            };
            (op, scales, zps)
        }
    };
    let expected = read("dst.bin");
    Vector {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        case: Case {
            op,
            src: OwnedTensor::new(TensorDesc::new(src_t, &shape), read("src.bin")),
            scales,
            zps,
            dst: OwnedTensor::new(TensorDesc::new(dst_t, &shape), vec![0; expected.len()]),
        },
        expected,
    }
}

impl Vector {
    /// The validated plan.
    pub fn plan(&self) -> Plan {
        self.case
            .plan()
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// Runs `kernel` (on `threads` threads) and returns the dst bytes.
    pub fn run(&self, kernel: &dyn Kernel, threads: usize) -> Vec<u8> {
        self.case
            .run_parallel(kernel, threads)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The dst dtype.
    pub fn dst_type(&self) -> DType {
        self.case.dst.desc.dtype
    }
}

/// Asserts two dst buffers are equal bit for bit. On x86-64 that includes NaN sign
/// and payload: the contract fixes them there (SPEC §5: `inf * 0` is the
/// negative default NaN, kept through the conversion). The vectors are cross-platform
/// by nature (one shared set for every machine, made on x86-64), and elsewhere a NaN's
/// sign and payload are the platform multiply's (aarch64's default NaN is positive),
/// so there, and only there, NaN compares as "is NaN".
pub fn assert_same_bits(dtype: DType, got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let w = dtype.bits() / 8;
    let nan_bits_fixed = cfg!(target_arch = "x86_64");
    for (i, (g, e)) in got.chunks(w).zip(want.chunks(w)).enumerate() {
        let both_nan = is_nan(dtype, g) && is_nan(dtype, e);
        if g != e && (nan_bits_fixed || !both_nan) {
            panic!("{what}: element {i} differs: got {g:02x?}, want {e:02x?}");
        }
    }
}

/// Like [`assert_same_bits`], for vectors another implementation made (ONNX Runtime,
/// ml_dtypes: `tests/conformance_float`): there a NaN's sign and payload are that
/// implementation's (ORT keeps a NaN code's sign; SPEC §10 gives every NaN src the
/// default NaN `0x7fc00000`), so NaN compares as NaN; every other element bit for bit.
/// dq's own NaN bits are pinned by `tests/ops/float_sources.rs` against the reference.
pub fn assert_same_values(dtype: DType, got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let w = dtype.bits() / 8;
    for (i, (g, e)) in got.chunks(w).zip(want.chunks(w)).enumerate() {
        if g != e && !(is_nan(dtype, g) && is_nan(dtype, e)) {
            panic!("{what}: element {i} differs: got {g:02x?}, want {e:02x?}");
        }
    }
}

/// True when the element bytes hold a NaN of `dtype`.
pub fn is_nan(dtype: DType, b: &[u8]) -> bool {
    match dtype {
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).is_nan(),
        DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).is_nan(),
        DType::F32 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
        DType::F64 => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
        _ => false,
    }
}
