//! What a compiled kernel is specialised to (the cache key), and the formula analysis
//! that fixes the integer widths and whether the vector path may run.

use std::hash::{Hash, Hasher};

use dq_runtime::{DType, FormulaIr, Loop, Node, Plan};

/// Everything the generated code bakes in: formula, dtypes and the canonical loop nest.
///
/// Two plans with the same `Spec` run the same machine code (the raw shape is not
/// part of it: shapes that collapse to the same loops share a kernel).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The element formula.
    pub formula: FormulaIr,
    /// Src dtype.
    pub src: DType,
    /// Zero-point dtype, `None` when symmetric.
    pub zps: Option<DType>,
    /// Dst dtype (also the scales dtype).
    pub dst: DType,
    /// One zero point for every element.
    pub zps_broadcast: bool,
    /// The collapsed loop nest (`Plan::loops`).
    pub loops: Vec<Loop>,
    /// f16 results are computed as f32 into a block buffer and converted by the
    /// host's f16 conversion instructions (F16C), which are exact: dense f16 dst
    /// from 8-bit or wider src, when the JIT allows it and the host has them. The
    /// kernel then stores f32 and only runs through
    /// [`Kernel::run`](crate::Kernel::run).
    pub f16_blocks: bool,
}

impl Spec {
    /// The spec of `plan` under `formula`; `f16_convert` allows
    /// [`f16_blocks`](Self::f16_blocks) (taken when the host has the instructions).
    pub fn of(formula: &FormulaIr, plan: &Plan, f16_convert: bool) -> Spec {
        let (src, zps, dst) = plan.kernel_key();
        let mut spec = Spec {
            formula: *formula,
            src,
            zps,
            dst,
            zps_broadcast: plan.zps_broadcast(),
            loops: plan.loops().to_vec(),
            f16_blocks: false,
        };
        // 4-bit src rounds through tables (16 values a segment), which costs less
        // than converting every element.
        spec.f16_blocks = f16_convert
            && dst == DType::F16
            && !src.is_4bit()
            && spec.dst_dense()
            && host_f16_convert();
        spec
    }

    /// True when `plan` under `formula` has this spec (no allocation).
    pub fn matches(&self, formula: &FormulaIr, plan: &Plan) -> bool {
        let (src, zps, dst) = plan.kernel_key();
        self.formula == *formula
            && self.src == src
            && self.zps == zps
            && self.dst == dst
            && self.zps_broadcast == plan.zps_broadcast()
            && self.loops == plan.loops()
    }

    /// The cache hash of `plan` under `formula`, equal to `Spec::of(..).hash64()`.
    pub fn hash_of(formula: &FormulaIr, plan: &Plan) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let (src, zps, dst) = plan.kernel_key();
        (formula, src, zps, dst, plan.zps_broadcast(), plan.loops()).hash(&mut h);
        h.finish()
    }

    /// The cache hash of this spec (equal to [`hash_of`](Self::hash_of) its plan:
    /// `f16_blocks` is the same for every spec of one cache).
    pub fn hash64(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &self.formula,
            self.src,
            self.zps,
            self.dst,
            self.zps_broadcast,
            self.loops.as_slice(),
        )
            .hash(&mut h);
        h.finish()
    }

    /// Bytes per dst element.
    pub fn dst_bytes(&self) -> usize {
        self.dst.bits() / 8
    }

    /// The dtype the compiled code stores: f32 under [`f16_blocks`](Self::f16_blocks).
    pub fn out(&self) -> DType {
        if self.f16_blocks {
            DType::F32
        } else {
            self.dst
        }
    }

    /// Bytes per element the compiled code stores.
    pub fn out_bytes(&self) -> usize {
        self.out().bits() / 8
    }

    /// True when dst element `l` (logical index) sits at dst offset `l` (dense dst).
    pub fn dst_dense(&self) -> bool {
        let mut inner = 1usize;
        for l in self.loops.iter().rev() {
            if l.len > 1 && l.dst_stride != inner {
                return false;
            }
            inner = inner.saturating_mul(l.len);
        }
        true
    }
}

/// True when the host converts f32 to f16 in hardware (x86-64 AVX + F16C).
pub fn host_f16_convert() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Width of the scalar integer path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntWidth {
    /// Every integer node fits `i64`.
    I64,
    /// Some node may need up to 99 bits (static s64 zero points).
    I128,
}

/// The result of checking a formula against a spec's dtypes.
#[derive(Clone, Copy, Debug)]
pub struct Analysis {
    /// Integer width of the scalar path.
    pub int: IntWidth,
    /// The vector path is allowed (every integer node fits `i32` and the work type is f32),
    /// provided a segment's zero point lies in `z_limit` when `z_checked`.
    pub vector: bool,
    /// Whether the zero point must be range-checked at run time before the vector path.
    pub z_checked: bool,
    /// The result is never a signalling NaN, so stores need not quiet it: IEEE 754
    /// arithmetic returns quiet NaNs; only a scale or literal passed through
    /// unchanged (or through neg/abs/min/max) can still be signalling.
    pub quiet: bool,
    /// bf16 results need no NaN case in their rounding: every NaN result is quiet
    /// with its low 16 bits zero (scales are bf16, there is no NaN literal, and x86
    /// arithmetic returns an operand's NaN quieted or the default NaN), so the
    /// integer round-to-nearest-even already gives `bits >> 16` with the quiet bit.
    pub plain_bf16: bool,
}

/// Zero points in `-Z_LIMIT..=Z_LIMIT` may take the vector path (run-time check for
/// s32/s64 zero points): `z + 2^23 + 128`, which the vector code converts, then
/// stays an exact f32 (below 2^24).
pub const Z_LIMIT: i64 = 1 << 22;

/// Inclusive value range of an integer dtype.
fn range(t: DType) -> (i128, i128) {
    match t {
        DType::S4 => (-8, 7),
        DType::U4 => (0, 15),
        DType::S8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::S32 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    }
}

/// Checks `spec.formula` is well formed and picks the integer widths.
///
/// # Errors
/// A reason string when the IR is malformed or needs more than the supported widths.
pub fn analyse(spec: &Spec) -> Result<Analysis, String> {
    let f = &spec.formula;
    let q = range(spec.src);
    let z_full = spec.zps.map_or((0, 0), range);
    let z_checked = matches!(spec.zps, Some(DType::S32 | DType::S64));
    let z_vec = if z_checked {
        (-(Z_LIMIT as i128), Z_LIMIT as i128)
    } else {
        z_full
    };
    let full = intervals(f, q, z_full)?;
    let vec = intervals(f, q, z_vec)?;
    let fits = |v: &[Option<(i128, i128)>], lo: i128, hi: i128| {
        v.iter().flatten().all(|&(a, b)| a >= lo && b <= hi)
    };
    let f64_work = spec.dst == DType::F64;
    let int = if fits(&full, i64::MIN as i128, i64::MAX as i128) {
        IntWidth::I64
    } else if !f64_work && fits(&full, -(1i128 << 99), 1i128 << 99) {
        IntWidth::I128
    } else {
        return Err(format!(
            "formula `{}`: an integer node exceeds the supported range for these dtypes",
            f.name
        ));
    };
    let quiet = never_signalling(f);
    let nan_literal = f
        .nodes
        .iter()
        .any(|n| matches!(n, Node::Lit(b) if f64::from_bits(*b).is_nan()));
    let vector = !f64_work
        && !matches!(spec.src, DType::S32 | DType::S64)
        && fits(&vec, i32::MIN as i128, i32::MAX as i128);
    Ok(Analysis {
        int,
        vector,
        z_checked,
        quiet,
        plain_bf16: spec.dst == DType::BF16 && quiet && !nan_literal,
    })
}

/// True when the formula's result can never be a signalling NaN (see [`Analysis::quiet`]).
fn never_signalling(f: &FormulaIr) -> bool {
    let mut may: Vec<bool> = Vec::with_capacity(f.nodes.len());
    for node in f.nodes {
        let m = match *node {
            Node::S => true,
            Node::Lit(bits) => f64::from_bits(bits).is_nan(),
            Node::Neg(a) | Node::Abs(a) => may[a as usize],
            Node::Min(a, b) | Node::Max(a, b) => may[a as usize] || may[b as usize],
            Node::Q | Node::Z | Node::IntSub(..) | Node::Float(_) => false,
            Node::Add(..) | Node::Sub(..) | Node::Mul(..) => false,
        };
        may.push(m);
    }
    !may.last().copied().unwrap_or(true)
}

/// The value range of every integer node (`None` for float nodes), checking the IR.
fn intervals(
    f: &FormulaIr,
    q: (i128, i128),
    z: (i128, i128),
) -> Result<Vec<Option<(i128, i128)>>, String> {
    let bad = |i: usize, what: &str| format!("formula `{}`: node {i}: {what}", f.name);
    let mut out: Vec<Option<(i128, i128)>> = Vec::with_capacity(f.nodes.len());
    for (i, node) in f.nodes.iter().enumerate() {
        let get = |a: u16| -> Result<Option<(i128, i128)>, String> {
            out.get(a as usize)
                .copied()
                .ok_or_else(|| bad(i, "operand is not an earlier node"))
        };
        let int = |a: u16| get(a)?.ok_or_else(|| bad(i, "expected an integer operand"));
        let float = |a: u16| match get(a)? {
            None => Ok(()),
            Some(_) => Err(bad(i, "expected a float operand")),
        };
        let v = match *node {
            Node::Q => Some(q),
            Node::Z => Some(z),
            Node::IntSub(a, b) => {
                let (x, y) = (int(a)?, int(b)?);
                let lo = x.0.checked_sub(y.1).ok_or_else(|| bad(i, "overflow"))?;
                let hi = x.1.checked_sub(y.0).ok_or_else(|| bad(i, "overflow"))?;
                Some((lo, hi))
            }
            Node::Float(a) => {
                int(a)?;
                None
            }
            Node::S | Node::Lit(_) => None,
            Node::Neg(a) | Node::Abs(a) => {
                float(a)?;
                None
            }
            Node::Add(a, b)
            | Node::Sub(a, b)
            | Node::Mul(a, b)
            | Node::Min(a, b)
            | Node::Max(a, b) => {
                float(a)?;
                float(b)?;
                None
            }
        };
        out.push(v);
    }
    match out.last() {
        Some(None) => Ok(out),
        _ => Err(format!("formula `{}` does not end in a float node", f.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_runtime::STANDARD;

    fn spec(src: DType, zps: Option<DType>, dst: DType) -> Spec {
        Spec {
            formula: STANDARD,
            src,
            zps,
            dst,
            zps_broadcast: false,
            loops: vec![],
            f16_blocks: false,
        }
    }

    #[test]
    fn widths_follow_dtypes() {
        let a = analyse(&spec(DType::S8, Some(DType::U8), DType::F32)).unwrap();
        assert!(a.vector && !a.z_checked && a.int == IntWidth::I64);
        let a = analyse(&spec(DType::U8, Some(DType::S32), DType::F32)).unwrap();
        assert!(a.vector && a.z_checked && a.int == IntWidth::I64);
        let a = analyse(&spec(DType::S8, Some(DType::S64), DType::F32)).unwrap();
        assert!(a.vector && a.z_checked && a.int == IntWidth::I128);
        let a = analyse(&spec(DType::S32, Some(DType::S32), DType::F64)).unwrap();
        assert!(!a.vector && a.int == IntWidth::I64);
    }

    #[test]
    fn malformed_ir_is_refused() {
        static BAD: [Node; 2] = [Node::Q, Node::Mul(0, 0)];
        let mut s = spec(DType::S8, None, DType::F32);
        s.formula = FormulaIr {
            name: "bad",
            nodes: &BAD,
        };
        assert!(analyse(&s).unwrap_err().contains("float operand"));
        static FWD: [Node; 2] = [Node::S, Node::Add(0, 5)];
        s.formula = FormulaIr {
            name: "fwd",
            nodes: &FWD,
        };
        assert!(analyse(&s).unwrap_err().contains("earlier node"));
    }
}
