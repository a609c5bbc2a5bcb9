//! `dq run`: read the tensors, validate, run the chosen backend, write the output.

use std::path::Path;

use dq::{DType, Plan, Role, Tensor, TensorDesc, TensorMut};

use super::args::{OpName, RunArgs};
use super::case::Case;
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
    let case = Case::new(&a.case, lists)?;
    if case.op_name == OpName::Dynamic && case.zps_type.is_some() && a.zps.is_none() {
        return Err(CliError::Usage(
            "--zps-type is given but --zps is not".into(),
        ));
    }
    io::check_output(output, case.dst.dtype)?;
    prevalidate(&case)?;

    let src_data = read_src(&case, input)?;
    let (scales, zps) = if case.op_name == OpName::Dequantize {
        (None, None)
    } else {
        let scales = read_param(&case, Role::Scales, Path::new(scales_arg))?;
        let zps = match a.zps.as_deref() {
            Some(z) => Some(read_param(&case, Role::Zps, Path::new(z))?),
            None => None,
        };
        (Some(scales), zps)
    };
    let scales = scales.as_ref().map(super::io::view);
    let zps = zps.as_ref().map(super::io::view);
    let src = Tensor {
        desc: case.src.clone(),
        data: &src_data,
    };

    let plan = Plan::new(
        &case.op,
        &src.desc,
        scales.as_ref().map(|t| &t.desc),
        zps.as_ref().map(|t| &t.desc),
        &case.dst,
    )?;
    let kernel = dq::backends().select(a.backend, &plan)?;
    // A tiny broadcast src can ask for a huge dst: refuse it instead of aborting.
    let n = case.dst.required_bytes(Role::Dst)?;
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| CliError::Usage(format!("cannot allocate {n} bytes for the output")))?;
    out.resize(n, 0);
    let mut dst = TensorMut {
        desc: case.dst.clone(),
        data: &mut out,
    };
    plan.bind(&src, scales.as_ref(), zps.as_ref(), &mut dst)?
        .run_parallel(kernel, a.case.threads)?;

    let out_shape = if case.dst.is_dense() {
        case.dst.shape.clone()
    } else {
        vec![out.len() * 8 / case.dst.dtype.bits()]
    };
    io::write_output(output, case.dst.dtype, &out_shape, &out)
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
fn prevalidate(case: &Case) -> Result<(), CliError> {
    if case.op_name == OpName::Dequantize {
        Plan::new(&case.op, &case.src, None, None, &case.dst)?;
        return Ok(());
    }
    let shape = case.param_shape();
    let scales = TensorDesc::new(case.dst.dtype, &shape);
    let zps = case.bin_zps_type().map(|t| TensorDesc::new(t, &shape));
    Plan::new(&case.op, &case.src, Some(&scales), zps.as_ref(), &case.dst)?;
    Ok(())
}

/// Reads the src file. A dense `.bin` must have exactly the size of the shape; a
/// too-short file is left to [`Plan::bind`] to report.
fn read_src(case: &Case, path: &Path) -> Result<Vec<u8>, CliError> {
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
    if super::npy::descr(want).is_none() {
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
/// dst dtype (scales) or [`Case::bin_zps_type`] (zps),
/// and the shape the case needs; a single zero point is read as a broadcast `[1]`.
/// A size that fits neither is passed on as a 1-D shape so validation names the rule.
fn read_param(case: &Case, role: Role, path: &Path) -> Result<(TensorDesc, Vec<u8>), CliError> {
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
        return Ok((TensorDesc::new(dtype, &shape), f.data));
    }
    let dtype = match role {
        Role::Scales => case.dst.dtype,
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
    Ok((TensorDesc::new(dtype, &shape), f.data))
}
