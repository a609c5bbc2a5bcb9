//! The op/dtype rules of SPEC §4 as data: per op, the dtypes its src, dst,
//! scales and zero points may have.
//!
//! Validation ([`Plan::new`](crate::Plan::new)), the CLI, `#[dequant_kernel]` and
//! the tests read them here; error messages quote [`DTypes::text`].
//!
//! ```
//! use dq_runtime::rules::{self, DYNAMIC};
//! use dq_runtime::{DType, OpKind};
//! assert_eq!(DYNAMIC.src.text(), "s8, u8, s4, u4, f8_e4m3, f8_e5m2, f4_e2m1");
//! assert!(rules::rule(OpKind::Axes).allows(DType::S32, Some(DType::S32), DType::F64));
//! assert!(!rules::allows((DType::S32, None, DType::F32)));
//! ```

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::OpKind;

/// A kernel key: (src, zero points or `None`, dst), as [`Plan::kernel_key`] gives it.
///
/// [`Plan::kernel_key`]: crate::Plan::kernel_key
pub type Key = (DType, Option<DType>, DType);

/// A list of dtypes and its text (`"s8, u8"`), both from one literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DTypes {
    list: &'static [DType],
    text: &'static str,
}

impl DTypes {
    /// The dtypes, in the order messages name them.
    pub const fn list(self) -> &'static [DType] {
        self.list
    }

    /// The names joined with `", "`.
    pub const fn text(self) -> &'static str {
        self.text
    }

    /// True when `d` is listed.
    pub fn contains(self, d: DType) -> bool {
        self.list.contains(&d)
    }
}

/// `DTypes` of the listed variants, its text joined at compile time.
macro_rules! dtypes {
    ($($d:ident),+) => {{
        const LIST: &[DType] = &[$(DType::$d),+];
        const BYTES: [u8; joined_len(LIST)] = joined(LIST);
        const TEXT: &str = match core::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => panic!("dtype names are ASCII"),
        };
        DTypes { list: LIST, text: TEXT }
    }};
}

/// Bytes of the names of `list` joined with `", "`.
const fn joined_len(list: &[DType]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < list.len() {
        n += list[i].name().len() + if i > 0 { 2 } else { 0 };
        i += 1;
    }
    n
}

/// The names of `list` joined with `", "` (`N` is [`joined_len`]).
const fn joined<const N: usize>(list: &[DType]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < list.len() {
        if i > 0 {
            out[at] = b',';
            out[at + 1] = b' ';
            at += 2;
        }
        let name = list[i].name().as_bytes();
        let mut j = 0;
        while j < name.len() {
            out[at] = name[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// Which zero points an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zps {
    /// Optional attribute list of s64 values, held by the plan in the first of these
    /// dtypes that fits every value (the static op: s32, then s64).
    Held(DTypes),
    /// An optional tensor of one of these dtypes.
    OneOf(DTypes),
    /// A required tensor of the src dtype.
    SrcDType,
}

/// The dtype rules of one op. Scales have the dst dtype, or e8m0 where the op
/// allows it (SPEC §10); a float src takes no zero points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The op.
    pub op: OpKind,
    /// Allowed src dtypes.
    pub src: DTypes,
    /// Allowed dst (and scales) dtypes.
    pub dst: DTypes,
    /// Zero points (integer src only).
    pub zps: Zps,
    /// Scales may be e8m0 instead of the dst dtype.
    pub e8m0_scales: bool,
}

/// Static `Dequantize` (SPEC §4.1): scales and zero points are attributes.
pub const STATIC: Rule = Rule {
    op: OpKind::Dequantize,
    src: dtypes!(S8, U8, F8E4M3, F8E5M2),
    dst: dtypes!(F32),
    zps: Zps::Held(dtypes!(S32, S64)),
    e8m0_scales: false,
};

/// `DynamicDequantize` (SPEC §4.2).
pub const DYNAMIC: Rule = Rule {
    op: OpKind::Dynamic,
    src: dtypes!(S8, U8, S4, U4, F8E4M3, F8E5M2, F4E2M1),
    dst: dtypes!(F32, F16, BF16),
    zps: Zps::OneOf(dtypes!(S4, U4, S8, U8, S32)),
    e8m0_scales: true,
};

/// nGraph `Dequantize` with `axes` (SPEC §4.3).
pub const AXES: Rule = Rule {
    op: OpKind::Axes,
    src: dtypes!(S8, U8, S32),
    dst: dtypes!(F16, BF16, F32, F64),
    zps: Zps::SrcDType,
    e8m0_scales: false,
};

/// Every op's rules.
pub const RULES: [Rule; 3] = [STATIC, DYNAMIC, AXES];

/// The rules of `op`.
pub const fn rule(op: OpKind) -> &'static Rule {
    match op {
        OpKind::Dequantize => &STATIC,
        OpKind::Dynamic => &DYNAMIC,
        OpKind::Axes => &AXES,
    }
}

/// The scales dtype for dst dtype `dst` (every op: the same; DynamicDequantize
/// also takes e8m0, see [`Rule::e8m0_scales`]).
pub const fn scales_dtype(dst: DType) -> DType {
    dst
}

/// The scales dtypes of an op for dst `dst`: the dst dtype, then e8m0 where allowed.
pub fn scales_choices(rule: &Rule, dst: DType) -> Vec<DType> {
    let mut v = vec![scales_dtype(dst)];
    if rule.e8m0_scales {
        v.push(DType::E8M0);
    }
    v
}

impl Rule {
    /// The zero-point choices with src `src`, `None` (symmetric) first where allowed:
    /// for the static op the dtypes the plan may hold its list in.
    pub fn zps_choices(&self, src: DType) -> Vec<Option<DType>> {
        if src.is_float_src() {
            return vec![None];
        }
        match self.zps {
            Zps::Held(set) | Zps::OneOf(set) => {
                let mut v = vec![None];
                v.extend(set.list().iter().map(|&d| Some(d)));
                v
            }
            Zps::SrcDType => vec![Some(src)],
        }
    }

    /// True when this op can run with these dtypes (zps as the plan holds them).
    pub fn allows(&self, src: DType, zps: Option<DType>, dst: DType) -> bool {
        self.src.contains(src) && self.dst.contains(dst) && self.zps_choices(src).contains(&zps)
    }

    /// Every kernel key of this op: src, then dst, then zero points, in list order.
    pub fn keys(&self) -> Vec<Key> {
        let mut out = Vec::new();
        for &s in self.src.list() {
            for &d in self.dst.list() {
                out.extend(self.zps_choices(s).into_iter().map(|z| (s, z, d)));
            }
        }
        out
    }

    /// Checks the src dtype.
    ///
    /// # Errors
    /// [`Error::SrcDType`] naming the allowed ones.
    pub fn check_src(&self, got: DType) -> Result<()> {
        if self.src.contains(got) {
            return Ok(());
        }
        Err(Error::SrcDType {
            op: self.op,
            expected: self.src.text(),
            got,
        })
    }

    /// Checks the dst dtype.
    ///
    /// # Errors
    /// [`Error::DstDType`] naming the allowed ones.
    pub fn check_dst(&self, got: DType) -> Result<()> {
        if self.dst.contains(got) {
            return Ok(());
        }
        Err(Error::DstDType {
            op: self.op,
            expected: self.dst.text(),
            got,
        })
    }

    /// True when this op can run with these dtypes and scales of dtype `scales`.
    pub fn allows_scales(&self, (src, zps, dst): Key, scales: DType) -> bool {
        self.allows(src, zps, dst) && scales_choices(self, dst).contains(&scales)
    }

    /// Checks that a float src comes without zero points.
    ///
    /// # Errors
    /// [`Error::FloatSrcZps`].
    pub fn check_float_src_zps(&self, src: DType, zps_given: bool) -> Result<()> {
        if src.is_float_src() && zps_given {
            return Err(Error::FloatSrcZps { op: self.op, src });
        }
        Ok(())
    }

    /// Checks the scales dtype for dst `dst`.
    ///
    /// # Errors
    /// [`Error::E8m0Scales`] for e8m0 scales on an op without them,
    /// [`Error::ScalesNotDstOrE8m0`] on one with them, [`Error::ScalesDType`]
    /// otherwise.
    pub fn check_scales(&self, dst: DType, got: DType) -> Result<()> {
        if scales_choices(self, dst).contains(&got) {
            return Ok(());
        }
        Err(if got == DType::E8M0 {
            Error::E8m0Scales { op: self.op }
        } else if self.e8m0_scales {
            Error::ScalesNotDstOrE8m0 { dst, got }
        } else {
            Error::ScalesDType {
                expected: scales_dtype(dst),
                got,
            }
        })
    }

    /// Checks the dtype of a zero-point tensor for src dtype `src`.
    ///
    /// # Errors
    /// [`Error::FloatSrcZps`] for a float src, else [`Error::ZpsDType`]; the
    /// static op takes no zero-point tensor (its list is checked as an attribute).
    pub fn check_zps(&self, src: DType, got: DType) -> Result<()> {
        self.check_float_src_zps(src, true)?;
        let expected = match self.zps {
            Zps::OneOf(set) if set.contains(got) => return Ok(()),
            Zps::SrcDType if got == src => return Ok(()),
            Zps::OneOf(set) | Zps::Held(set) => format!("one of {}", set.text()),
            Zps::SrcDType => format!("{src} (the src dtype)"),
        };
        Err(Error::ZpsDType {
            op: self.op,
            expected,
            got,
        })
    }
}

/// Every kernel key some op allows, without repeats, in [`RULES`] order.
pub fn keys() -> Vec<Key> {
    let mut out: Vec<Key> = Vec::new();
    for k in RULES.iter().flat_map(Rule::keys) {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// True when some op allows the kernel key.
pub fn allows((src, zps, dst): Key) -> bool {
    RULES.iter().any(|r| r.allows(src, zps, dst))
}

/// True when some op allows the kernel key with scales of dtype `scales`.
pub fn allows_scales(key: Key, scales: DType) -> bool {
    RULES.iter().any(|r| r.allows_scales(key, scales))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_joined_names() {
        assert_eq!(STATIC.src.text(), "s8, u8, f8_e4m3, f8_e5m2");
        assert_eq!(STATIC.dst.text(), "f32");
        assert_eq!(
            DYNAMIC.src.text(),
            "s8, u8, s4, u4, f8_e4m3, f8_e5m2, f4_e2m1"
        );
        assert_eq!(DYNAMIC.dst.text(), "f32, f16, bf16");
        assert_eq!(AXES.src.text(), "s8, u8, s32");
        assert_eq!(AXES.dst.text(), "f16, bf16, f32, f64");
        for r in RULES {
            assert_eq!(rule(r.op), &r);
            for set in [r.src, r.dst] {
                let names: Vec<&str> = set.list().iter().map(|d| d.name()).collect();
                assert_eq!(set.text(), names.join(", "));
            }
        }
    }

    #[test]
    fn keys_per_op() {
        use DType::*;
        // 4 int src x 3 dst x (none + 5 zps) + 3 float src x 3 dst x none;
        // 2 x 1 x (none, s32, s64) + 2 float src x 1 x none; 3 x 4 x 1.
        assert_eq!(DYNAMIC.keys().len(), 72 + 9);
        assert_eq!(
            STATIC.keys(),
            [
                (S8, None, F32),
                (S8, Some(S32), F32),
                (S8, Some(S64), F32),
                (U8, None, F32),
                (U8, Some(S32), F32),
                (U8, Some(S64), F32),
                (F8E4M3, None, F32),
                (F8E5M2, None, F32),
            ]
        );
        assert_eq!(
            AXES.keys()[..2],
            [(S8, Some(S8), F16), (S8, Some(S8), BF16)]
        );
        // Static adds only s64 zero points; axes only f64 dst and s32 src.
        assert_eq!(keys().len(), 72 + 9 + 2 + (2 + 4));
        assert!(allows((F4E2M1, None, BF16)));
        assert!(!allows((F4E2M1, Some(U4), BF16)));
        assert!(!allows((F4E2M1, None, F64)));
        assert!(allows_scales((F4E2M1, None, BF16), E8M0));
        assert!(allows_scales((S4, Some(U4), F16), E8M0));
        assert!(!allows_scales((F8E4M3, None, F32), F16));
        assert!(!AXES.allows_scales((S8, Some(S8), F32), E8M0));
        assert!(!STATIC.allows_scales((F8E4M3, None, F32), E8M0));
        assert!(DYNAMIC.allows_scales((F8E4M3, None, F32), E8M0));
        assert!(allows((S4, Some(S32), BF16)));
        assert!(allows((U8, Some(S64), F32)));
        assert!(!allows((U8, Some(S64), F16)));
        assert!(!allows((S32, Some(S8), F32)));
        assert!(!allows((S4, Some(S4), F64)));
    }

    #[test]
    fn checks_name_the_rule() {
        assert_eq!(
            DYNAMIC.check_zps(DType::U4, DType::S64),
            Err(Error::ZpsDType {
                op: OpKind::Dynamic,
                expected: "one of s4, u4, s8, u8, s32".into(),
                got: DType::S64
            })
        );
        assert_eq!(
            AXES.check_zps(DType::S8, DType::U8),
            Err(Error::ZpsDType {
                op: OpKind::Axes,
                expected: "s8 (the src dtype)".into(),
                got: DType::U8
            })
        );
        assert_eq!(AXES.check_zps(DType::S32, DType::S32), Ok(()));
        assert_eq!(
            STATIC.check_src(DType::S4),
            Err(Error::SrcDType {
                op: OpKind::Dequantize,
                expected: "s8, u8, f8_e4m3, f8_e5m2",
                got: DType::S4
            })
        );
        assert_eq!(AXES.check_dst(DType::F64), Ok(()));
    }

    #[test]
    fn float_src_and_e8m0_checks() {
        use DType::*;
        let op = OpKind::Dynamic;
        assert_eq!(
            DYNAMIC.check_zps(F8E5M2, U8),
            Err(Error::FloatSrcZps { op, src: F8E5M2 })
        );
        assert_eq!(DYNAMIC.check_float_src_zps(F4E2M1, false), Ok(()));
        assert_eq!(DYNAMIC.check_scales(BF16, E8M0), Ok(()));
        assert_eq!(DYNAMIC.check_scales(BF16, BF16), Ok(()));
        assert_eq!(
            DYNAMIC.check_scales(BF16, F32),
            Err(Error::ScalesNotDstOrE8m0 {
                dst: BF16,
                got: F32
            })
        );
        assert_eq!(
            AXES.check_scales(F32, E8M0),
            Err(Error::E8m0Scales { op: OpKind::Axes })
        );
        assert_eq!(
            AXES.check_scales(F64, F32),
            Err(Error::ScalesDType {
                expected: F64,
                got: F32
            })
        );
    }
}
