//! `dq run`: read the tensors, validate, run the chosen backend, write the output.

use std::path::Path;

use dq::case::{Case, OwnedTensor};
use dq::{DType, Plan, Role, TensorDesc};

use super::args::{OpName, RunArgs};
use super::case::CaseFlags;
use super::error::CliError;
use super::io::{self, FileTensor, Format};

/// Runs `dq run`. Nothing is written unless every step succeeded.
///
/// # Errors
/// The first rule violated; see [`CliError`].
pub fn run(a: &RunArgs) -> Result<(), CliError> {
    let required = |flag: &str| CliError::Usage(format!("--{flag} is required"));
    let output = a.output.as_deref().ok_or_else(|| required("output"))?;
    let input = a.input.as_deref().ok_or_else(|| required("input"))?;
    let scales_arg = a.scales.as_deref().ok_or_else(|| required("scales"))?;
    let lists = if a.case.op == Some(OpName::Dequantize) {
        let zps = match a.zps.as_deref() {
            Some(z) => Some(static_list(z, |z| io::parse_i64_list("zps", z))?),
            None => None,
        };
        let scales = static_list(scales_arg, |s| io::parse_f32_list("scales", s))?;
        Some((scales, zps))
    } else {
        None
    };
    let flags = CaseFlags::new(&a.case, lists)?;
    if flags.op_name == OpName::Dynamic && flags.zps_type.is_some() && a.zps.is_none() {
        return Err(CliError::Usage(
            "--zps-type is given but --zps is not".into(),
        ));
    }
    io::check_output(output, flags.dst.dtype)?;
    prevalidate(&flags)?;

    let zps = a.zps.as_deref().map(Path::new);
    let mut case = read_case(&flags, input, Path::new(scales_arg), zps)?;
    let plan = case.plan()?;
    let kernel = dq::backends().select(a.backend, &plan)?;
    // The output is allocated once the plan is valid and a backend chosen.
    // A tiny broadcast src can ask for a huge dst: refuse it instead of aborting.
    let n = case.dst.desc.required_bytes(Role::Dst)?;
    let out = &mut case.dst.data;
    out.try_reserve_exact(n)
        .map_err(|_| CliError::Usage(format!("cannot allocate {n} bytes for the output")))?;
    out.resize(n, 0);
    case.run_in_place(&plan, kernel, a.case.threads)?;

    let (dst, out) = (&case.dst.desc, &case.dst.data);
    let out_shape = if dst.is_dense() {
        dst.shape.clone()
    } else {
        vec![out.len() * 8 / dst.dtype.bits()]
    };
    io::write_output(output, dst.dtype, &out_shape, out)
}

/// Reads the case's files: src, and the scales and zero points of a dynamic or axes
/// op. The dst buffer is left empty.
fn read_case(
    flags: &CaseFlags,
    input: &Path,
    scales: &Path,
    zps: Option<&Path>,
) -> Result<Case, CliError> {
    let src = OwnedTensor::new(flags.src.clone(), read_src(flags, input)?);
    let (scales, zps) = if flags.op_name == OpName::Dequantize {
        (None, None)
    } else {
        let scales = read_param(flags, Role::Scales, scales)?;
        let zps = match zps {
            Some(z) => Some(read_param(flags, Role::Zps, z)?),
            None => None,
        };
        (Some(scales), zps)
    };
    Ok(Case {
        op: flags.op.clone(),
        src,
        scales,
        zps,
        dst: OwnedTensor::new(flags.dst.clone(), Vec::new()),
    })
}

/// A static op's list: `""` is the empty list (per_channel over a zero-sized axis).
fn static_list<T>(
    s: &str,
    parse: impl FnOnce(&str) -> Result<Vec<T>, CliError>,
) -> Result<Vec<T>, CliError> {
    if s.is_empty() {
        Ok(Vec::new())
    } else {
        parse(s)
    }
}

/// Validates the flags before any file is read, with the scales and zero points the
/// case needs (a valid case accepts these whatever its files hold), so that a broken
/// rule is reported as such rather than as a file that does not fit it.
fn prevalidate(case: &CaseFlags) -> Result<(), CliError> {
    if case.op_name == OpName::Dequantize {
        Plan::new(&case.op, &case.src, None, None, &case.dst)?;
        // The static op's scales are an f32 list: e8m0 (or any other) is refused.
        case.op_name
            .rule()
            .check_scales(case.dst.dtype, case.scales_type)?;
        return Ok(());
    }
    let shape = case.param_shape();
    let scales = TensorDesc::new(case.scales_type, &shape);
    let zps = case.bin_zps_type().map(|t| TensorDesc::new(t, &shape));
    Plan::new(&case.op, &case.src, Some(&scales), zps.as_ref(), &case.dst)?;
    Ok(())
}

/// Reads the src file. A dense `.bin` must have exactly the size of the shape; a
/// too-short file is left to [`Plan::bind`] to report.
fn read_src(case: &CaseFlags, path: &Path) -> Result<Vec<u8>, CliError> {
    let f = io::read_tensor(path)?;
    let dtype = case.src.dtype;
    if f.format == Format::Npy {
        check_npy_dtype(&f, dtype, "--src-type")?;
        let got = f.shape.clone().unwrap_or_default();
        if case.src.strides.is_none() && got != case.src.shape {
            return Err(CliError::NpyShape {
                path: f.path,
                expected: case.src.shape.clone(),
                got,
            });
        }
    } else if case.src.strides.is_none()
        && let Ok(need) = case.src.required_bytes(Role::Src)
        && f.data.len() > need
    {
        return Err(CliError::FileSize {
            path: f.path,
            role: "src",
            expected: need,
            got: f.data.len() as u64,
            what: case.src.describe(),
        });
    }
    Ok(f.data)
}

/// Errors unless a `.npy` holds `want` (and NumPy has `want` at all).
fn check_npy_dtype(f: &FileTensor, want: DType, flag: &'static str) -> Result<(), CliError> {
    if dq::npy::descr(want).is_none() {
        return Err(CliError::NoNumpyDType {
            path: f.path.clone(),
            dtype: want,
        });
    }
    match f.dtype {
        Some(got) if got != want => Err(CliError::NpyDType {
            path: f.path.clone(),
            flag,
            expected: want,
            got,
        }),
        _ => Ok(()),
    }
}

/// Reads a scales or zps file of a dynamic / axes case.
///
/// A `.npy` brings its own dtype and shape (validation judges them). A `.bin` has the
/// `--scales-type` (default: the dst dtype; e8m0: one raw byte per scale) or
/// [`Case::bin_zps_type`] (zps),
/// and the shape the case needs; a single zero point is read as a broadcast `[1]`.
/// A size that fits neither is passed on as a 1-D shape so validation names the rule.
fn read_param(case: &CaseFlags, role: Role, path: &Path) -> Result<OwnedTensor, CliError> {
    let flag = if role == Role::Scales {
        "scales"
    } else {
        "zps"
    };
    if io::format_of(path).is_err() {
        return Err(CliError::BadList {
            flag,
            reason: format!(
                "`{}` is not a .bin or .npy file (--op {} reads {flag} from a file; lists are for --op dequantize)",
                path.display(),
                case.op_name.name()
            ),
        });
    }
    let f = io::read_tensor(path)?;
    if f.format == Format::Npy {
        let dtype = f.dtype.expect("npy has a dtype");
        if role == Role::Zps
            && let Some(want) = case.zps_type
        {
            check_npy_dtype(&f, want, "--zps-type")?;
        }
        let shape = f.shape.expect("npy has a shape");
        return Ok(OwnedTensor::new(TensorDesc::new(dtype, &shape), f.data));
    }
    let dtype = match role {
        Role::Scales => case.scales_type,
        _ => case.bin_zps_type().ok_or(CliError::MissingFlag {
            flag: "zps-type",
            op: case.op_name.name(),
        })?,
    };
    let expected = case.param_shape();
    let len = f.data.len();
    let fits = |shape: &[usize]| {
        shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| dtype.bytes_for(n))
            == Some(len)
    };
    let shape = if fits(&expected) {
        expected
    } else if role == Role::Zps && case.op_name == OpName::Dynamic && fits(&[1]) {
        vec![1]
    } else if dtype.is_4bit() {
        vec![len * 2]
    } else {
        let w = dtype.bits() / 8;
        if len % w != 0 {
            return Err(CliError::FileSize {
                path: f.path,
                role: if role == Role::Scales {
                    "scales"
                } else {
                    "zps"
                },
                expected: dtype.bytes_for(expected.iter().product()).unwrap_or(0),
                got: len as u64,
                what: format!("{dtype}{expected:?}"),
            });
        }
        vec![len / w]
    };
    Ok(OwnedTensor::new(TensorDesc::new(dtype, &shape), f.data))
}
