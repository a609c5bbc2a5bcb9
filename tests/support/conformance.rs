//! Shared test support: the conformance-vector loader and bit comparison.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use dq::{
    AxesDequantize, DType, Dequantize, DynamicDequantize, Kernel, Op, Plan, Qtype, Tensor,
    TensorDesc, TensorMut,
};
use serde_json::Value;

/// One conformance case, loaded.
pub struct Case {
    pub name: String,
    pub op: Op,
    pub src: TensorDesc,
    pub src_bytes: Vec<u8>,
    pub scales: Option<(TensorDesc, Vec<u8>)>,
    pub zps: Option<(TensorDesc, Vec<u8>)>,
    pub dst: TensorDesc,
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
pub fn load(dir: &Path) -> Case {
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
                let a = dq::plan::normalize_axis(axis, shape.len()).unwrap();
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
            let scales = Some((TensorDesc::new(dst_t, &ss), read("scales.bin")));
            let zps = zps_t.map(|t| (TensorDesc::new(t, &ss), read("zps.bin")));
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
    Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        op,
        src: TensorDesc::new(src_t, &shape),
        src_bytes: read("src.bin"),
        scales,
        zps,
        dst: TensorDesc::new(dst_t, &shape),
        expected: read("dst.bin"),
    }
}

impl Case {
    /// The validated plan.
    pub fn plan(&self) -> Plan {
        Plan::new(
            &self.op,
            &self.src,
            self.scales.as_ref().map(|s| &s.0),
            self.zps.as_ref().map(|z| &z.0),
            &self.dst,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// Runs `kernel` (on `threads` threads) and returns the dst bytes.
    pub fn run(&self, kernel: &dyn Kernel, threads: usize) -> Vec<u8> {
        let plan = self.plan();
        let mut out = vec![0u8; self.expected.len()];
        let src = Tensor {
            desc: self.src.clone(),
            data: &self.src_bytes,
        };
        let scales = self.scales.as_ref().map(|(d, b)| Tensor {
            desc: d.clone(),
            data: b,
        });
        let zps = self.zps.as_ref().map(|(d, b)| Tensor {
            desc: d.clone(),
            data: b,
        });
        let mut dst = TensorMut {
            desc: self.dst.clone(),
            data: &mut out,
        };
        plan.bind(&src, scales.as_ref(), zps.as_ref(), &mut dst)
            .unwrap()
            .run_parallel(kernel, threads)
            .unwrap();
        out
    }
}

/// Asserts two dst buffers are equal bit for bit, NaN compared as "is NaN".
pub fn assert_same_bits(dtype: DType, got: &[u8], want: &[u8], what: &str) {
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
