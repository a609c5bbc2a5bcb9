//! What a compiled kernel is specialised to, and the formula analysis that fixes
//! the integer widths and whether the vector path may run.

use core::ops::Deref;

use dq_runtime::arch::{self, Isa};
use dq_runtime::policy::{self, StoreStrategy};
use dq_runtime::{DType, FormulaFacts, FormulaIr, Lowering, Node, STANDARD, STANDARD_FLOAT};

use dq_runtime::FormulaProblem;

use crate::error::JitError;

/// Everything the generated code bakes in: the formula and the plan's
/// [`Lowering`] (dtypes, the canonical loop nest), which a spec dereferences to.
///
/// The JIT's cache is keyed by the lowering (one cache per formula), so plans
/// whose shapes collapse to the same loops share a kernel. Only the JIT makes
/// specs, and a compiled kernel's spec cannot change
/// ([`CompiledKernel::spec`](crate::CompiledKernel::spec)): it is what the
/// kernel checks jobs against.
#[derive(Clone, Debug)]
pub struct Spec {
    pub(crate) formula: FormulaIr,
    pub(crate) facts: FormulaFacts,
    pub(crate) lowering: Lowering,
    pub(crate) f16_blocks: bool,
    pub(crate) f16_tables: bool,
    pub(crate) host_lookups: Option<HostLookups>,
    pub(crate) f32_scales: bool,
    pub(crate) stream_lines: bool,
}

/// What the JIT may call the host's instructions for (both by default, where
/// the host has them; off, the kernels compute it all in Cranelift's code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Host {
    /// f16 conversion (F16C): [`Spec::f16_blocks()`] and [`Spec::f16_tables()`].
    pub f16: bool,
    /// 4-bit lookups by AVX-512 permutes: [`Spec::host_lookups()`].
    pub lookups: bool,
}

impl Default for Host {
    fn default() -> Host {
        Host {
            f16: true,
            lookups: true,
        }
    }
}

/// How a kernel's host lookups store their results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostLookups {
    /// Ordinary stores.
    Store,
    /// Non-temporal stores straight to dst (16-byte aligned steps): the plan's
    /// output is large and dense, and large outputs stream
    /// ([`policy::large_store`], when the kernel is compiled: a kernel keeps
    /// its form, whatever strategy later calls race). The kernel then runs on
    /// dst itself, not through a staging block.
    Stream,
}

impl Deref for Spec {
    type Target = Lowering;

    fn deref(&self) -> &Lowering {
        &self.lowering
    }
}

impl Spec {
    /// The element formula.
    pub fn formula(&self) -> &FormulaIr {
        &self.formula
    }

    /// The formula's facts (computed once per JIT).
    pub fn facts(&self) -> FormulaFacts {
        self.facts
    }

    /// What the plan fixes.
    pub fn lowering(&self) -> &Lowering {
        &self.lowering
    }

    /// f16 results are computed as f32 into a block buffer and converted by the
    /// host's f16 conversion instructions (F16C), which are exact: dense f16 dst
    /// whose segments are too short for tables ([`f16_tables`](Self::f16_tables())),
    /// when the JIT allows it and the host has them. The kernel then stores f32
    /// and only runs through [`CompiledKernel::run`](crate::CompiledKernel::run).
    pub fn f16_blocks(&self) -> bool {
        self.f16_blocks
    }

    /// 4-bit src with segments of at least `LUT_MIN` (or 8-bit float src with
    /// 256-entry tables) to f16: each segment's table is rounded by the host's
    /// f16 conversion instructions (F16C, exact), called from the kernel, when
    /// the JIT allows host conversion and the host has them.
    pub fn f16_tables(&self) -> bool {
        self.f16_tables
    }

    /// 4-bit src with table segments: each run of a segment is looked up by the
    /// host's AVX-512 permutes ([`HostLookups`], `crate::host_lut`), where the
    /// JIT allows host lookups and the selected ISA is AVX-512.
    pub fn host_lookups(&self) -> Option<HostLookups> {
        self.host_lookups
    }

    /// The vector steps store their 16 f32 results (one 64-byte line) with
    /// non-temporal stores where the line is 64-byte aligned, plain stores
    /// elsewhere, straight to dst (no staging block); the elements before a
    /// segment's first line are peeled one by one. A large, dense f32 output
    /// with a contiguous inner loop, a scale per element or segments of at least
    /// [`STREAM_SEGMENT_MIN`] (or one per run), and no table segments, where large outputs
    /// stream ([`policy::large_store`] when the kernel is compiled, as for
    /// [`HostLookups::Stream`]). Copying through a staging block cost about a
    /// fifth more time than the generated kernel's streamed stores at 8192x8192
    /// s8 -> f32 on AMD EPYC Zen 4 (BENCHMARKS.md).
    pub fn stream_lines(&self) -> bool {
        self.stream_lines
    }

    /// f16 scales that change every few elements of the inner loop are widened
    /// to f32 once per call, before the kernel runs, which then reads f32
    /// scales (see [`scale_type`](Self::scale_type)); exact, so the bits do not
    /// depend on it.
    pub fn f32_scales(&self) -> bool {
        self.f32_scales
    }

    /// The spec of a plan's `lowering` under `formula`, whose facts are `facts`;
    /// `host` says which host instructions the kernel may call (each taken when
    /// the host has them).
    ///
    /// # Errors
    /// [`JitError::NoElements`] for a plan without elements (the one place the JIT
    /// refuses those: they need no kernel).
    pub(crate) fn new(
        formula: &FormulaIr,
        facts: FormulaFacts,
        lowering: &Lowering,
        host: Host,
    ) -> Result<Spec, JitError> {
        if lowering.is_empty() {
            return Err(JitError::NoElements);
        }
        // A float src runs the formula's float-src form (SPEC §10).
        let src = lowering.src;
        let (formula, facts) = if formula.accepts_src(src) {
            (*formula, facts)
        } else if src.is_float_src() && formula.nodes == STANDARD.nodes {
            (STANDARD_FLOAT, STANDARD_FLOAT.facts())
        } else {
            return Err(JitError::FloatTypes {
                src,
                scales: lowering.scales,
            });
        };
        // Long segments of one scale round through tables (16 or 256 values a
        // segment), which costs less than converting every element.
        let four_bit_tables = crate::translate::long_4bit_segments(lowering);
        let tables = four_bit_tables || crate::translate::long_f8_segments(lowering);
        let f16 = host.f16 && lowering.dst == DType::F16 && arch::f16_convert();
        let f16_blocks = f16 && !tables && lowering.dst_dense;
        let f16_tables = f16 && tables;
        let lookups = host.lookups && four_bit_tables && arch::selected() == Isa::Avx512;
        let host_lookups = lookups.then(|| {
            // The process's strategy for large outputs (not one racing call's).
            let large = policy::is_large_output(lowering.output_bytes())
                && policy::large_store() == StoreStrategy::NonTemporal;
            if large && lowering.dst_dense {
                HostLookups::Stream
            } else {
                HostLookups::Store
            }
        });
        // Contiguous, and a scale per element or segments long enough that the
        // elements peeled before each one's first line cost little.
        let lines = |l: &dq_runtime::Loop| {
            let segments = l.group == 1 || l.is_constant() || l.group >= STREAM_SEGMENT_MIN;
            l.src_stride == 1 && l.dst_stride == 1 && segments
        };
        let contiguous = lowering.loops.last().is_some_and(lines);
        let stream_lines = cfg!(target_arch = "x86_64")
            && lowering.dst == DType::F32
            && lowering.dst_dense
            && contiguous
            && !tables
            && policy::is_large_output(lowering.output_bytes())
            && policy::large_store() == StoreStrategy::NonTemporal;
        Ok(Spec {
            formula,
            facts,
            lowering: lowering.clone(),
            f16_blocks,
            f16_tables,
            host_lookups,
            f32_scales: crate::scales::pays(lowering),
            stream_lines,
        })
    }

    /// The dtype the compiled code stores: f32 under [`f16_blocks`](Self::f16_blocks()).
    pub fn out(&self) -> DType {
        if self.f16_blocks {
            DType::F32
        } else {
            self.dst
        }
    }

    /// The dtype the compiled code reads scales as: f32 under
    /// [`f32_scales`](Self::f32_scales()), else the plan's scales dtype.
    pub fn scale_type(&self) -> DType {
        if self.f32_scales {
            DType::F32
        } else {
            self.scales
        }
    }

    /// Bytes per element the compiled code stores.
    pub fn out_bytes(&self) -> usize {
        self.out().bits() / 8
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

/// The shortest segment (elements of one scale) a [`Spec::stream_lines`] kernel
/// peels to a line start: at most 15 elements one by one per segment; with
/// groups of 128, the peel made u8 -> f32 take about 1.6x the generated kernel's
/// time on AMD EPYC Zen 4, so shorter segments stream through the staging block.
pub const STREAM_SEGMENT_MIN: usize = 1024;

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
/// [`JitError::Formula`] when the IR is malformed, [`JitError::IntegerRange`] when
/// it needs more than the supported widths.
pub fn analyse(spec: &Spec) -> Result<Analysis, JitError> {
    let f = &spec.formula;
    let bad = |problem| JitError::Formula {
        formula: f.name,
        problem,
    };
    f.validate_for(spec.src).map_err(bad)?;
    // A float src's `q` is a float operand (no integer range).
    let float_q = spec.src.is_float_src();
    let q = range(spec.src);
    let z_full = spec.zps.map_or((0, 0), range);
    let z_checked = matches!(spec.zps, Some(DType::S32 | DType::S64));
    let z_vec = if z_checked {
        (-(Z_LIMIT as i128), Z_LIMIT as i128)
    } else {
        z_full
    };
    let full = intervals(f, q, z_full, float_q)?;
    let vec = intervals(f, q, z_vec, float_q)?;
    let fits = |v: &[Option<(i128, i128)>], lo: i128, hi: i128| {
        v.iter().flatten().all(|&(a, b)| a >= lo && b <= hi)
    };
    let f64_work = spec.dst == DType::F64;
    let int = if fits(&full, i64::MIN as i128, i64::MAX as i128) {
        IntWidth::I64
    } else if !f64_work && fits(&full, -(1i128 << 99), 1i128 << 99) {
        IntWidth::I128
    } else {
        return Err(JitError::IntegerRange {
            formula: f.name,
            src: spec.src,
            zps: spec.zps,
            dst: spec.dst,
        });
    };
    let quiet = !spec.facts.may_pass_signaling;
    // Float src and e8m0 scales decode in vector lanes.
    let vector = !f64_work
        && !matches!(spec.src, DType::S32 | DType::S64)
        && fits(&vec, i32::MIN as i128, i32::MAX as i128);
    Ok(Analysis {
        int,
        vector,
        z_checked,
        quiet,
        plain_bf16: spec.dst == DType::BF16 && quiet && !spec.facts.nan_literal,
    })
}

/// The value range of every integer node (`None` for float nodes) of `f`, which
/// [`FormulaIr::validate_for`] passed with `q` a float exactly when `float_q`:
/// only overflow is left to find.
fn intervals(
    f: &FormulaIr,
    q: (i128, i128),
    z: (i128, i128),
    float_q: bool,
) -> Result<Vec<Option<(i128, i128)>>, JitError> {
    let mut out: Vec<Option<(i128, i128)>> = Vec::with_capacity(f.nodes.len());
    for (node, n) in f.nodes.iter().enumerate() {
        let v = match *n {
            Node::Q if float_q => None,
            Node::Q => Some(q),
            Node::Z => Some(z),
            Node::IntSub(a, b) => {
                // Validated: earlier nodes, both integers.
                let (x, y) = (out[a as usize], out[b as usize]);
                let ((x0, x1), (y0, y1)) = (x.unwrap_or_default(), y.unwrap_or_default());
                let range = x0.checked_sub(y1).zip(x1.checked_sub(y0));
                Some(range.ok_or(JitError::Formula {
                    formula: f.name,
                    problem: FormulaProblem::Overflow { node },
                })?)
            }
            _ => None,
        };
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_runtime::{
        AxesDequantize, Dequantize, DynamicDequantize, Op, Plan, STANDARD, TensorDesc,
    };

    /// The spec of an `n`-element plan of `op` with the given dtypes (scales and
    /// zero points as the op needs them).
    fn spec(op: Op, src: DType, zps: Option<DType>, dst: DType, n: usize) -> Spec {
        let shape = [n];
        let params = match op {
            Op::Dequantize(_) => 0,
            Op::Axes(_) => n,
            Op::Dynamic(_) => 1,
        };
        let scales = TensorDesc::new(dst, &[params]);
        let zps = zps.map(|z| TensorDesc::new(z, &[params]));
        let plan = Plan::new(
            &op,
            &TensorDesc::new(src, &shape),
            (params > 0).then_some(&scales),
            zps.as_ref().filter(|_| params > 0),
            &TensorDesc::new(dst, &shape),
        )
        .unwrap();
        Spec::new(
            &STANDARD,
            STANDARD.facts(),
            plan.lowering(),
            Host {
                f16: false,
                lookups: false,
            },
        )
        .unwrap()
    }

    fn dynamic(src: DType, zps: Option<DType>, dst: DType) -> Spec {
        spec(DynamicDequantize::per_tensor().into(), src, zps, dst, 4)
    }

    #[test]
    fn widths_follow_dtypes() {
        let a = analyse(&dynamic(DType::S8, Some(DType::U8), DType::F32)).unwrap();
        assert!(a.vector && !a.z_checked && a.int == IntWidth::I64);
        let a = analyse(&dynamic(DType::U8, Some(DType::S32), DType::F32)).unwrap();
        assert!(a.vector && a.z_checked && a.int == IntWidth::I64);
        let op = Dequantize::new(vec![1.0]).zps(vec![i64::MAX]).into();
        let s = spec(op, DType::S8, None, DType::F32, 4);
        assert_eq!(s.zps, Some(DType::S64));
        let a = analyse(&s).unwrap();
        assert!(a.vector && a.z_checked && a.int == IntWidth::I128);
        let op = AxesDequantize::new(vec![0]).into();
        let s = spec(op, DType::S32, Some(DType::S32), DType::F64, 4);
        let a = analyse(&s).unwrap();
        assert!(!a.vector && a.int == IntWidth::I64);
    }

    #[test]
    fn malformed_ir_is_refused() {
        static BAD: [Node; 2] = [Node::Q, Node::Mul(0, 0)];
        let mut s = dynamic(DType::S8, None, DType::F32);
        s.formula = FormulaIr {
            name: "bad",
            nodes: &BAD,
        };
        let float = FormulaProblem::ExpectedFloat { node: 1 };
        assert_eq!(
            analyse(&s).unwrap_err(),
            JitError::Formula {
                formula: "bad",
                problem: float
            }
        );
        static FWD: [Node; 2] = [Node::S, Node::Add(0, 5)];
        s.formula = FormulaIr {
            name: "fwd",
            nodes: &FWD,
        };
        let later = FormulaProblem::LaterOperand { node: 1 };
        assert_eq!(
            analyse(&s).unwrap_err(),
            JitError::Formula {
                formula: "fwd",
                problem: later
            }
        );
    }

    #[test]
    fn a_plan_without_elements_has_no_spec() {
        let shape = [0, 3];
        let plan = Plan::new(
            &DynamicDequantize::per_tensor().into(),
            &TensorDesc::new(DType::S8, &shape),
            Some(&TensorDesc::new(DType::F32, &[1])),
            None,
            &TensorDesc::new(DType::F32, &shape),
        )
        .unwrap();
        let err = Spec::new(
            &STANDARD,
            STANDARD.facts(),
            plan.lowering(),
            Host::default(),
        )
        .unwrap_err();
        assert_eq!(err, JitError::NoElements);
    }
}
