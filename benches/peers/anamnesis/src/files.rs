//! Whole files: `amn remember MODEL --to DTYPE --threads T` against
//! `dq convert MODEL OUT --dtype DTYPE --threads T` on the same GGUF, outputs into a
//! scratch folder (by default under /dev/shm), runs alternated, medians; the two
//! safetensors outputs compared tensor by tensor after the first run (the tensors
//! stored as blocks: a float tensor keeps its dtype in anamnesis' output and takes
//! `--dtype` in dq's, so those are left out).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use dq::case::Rng;
use dq::formats::gguf::{DEFAULT_ALIGNMENT, GgmlType, Gguf};
use safetensors::SafeTensors;

use crate::gguf::blocks;
use crate::report::{Bits, Row};
use crate::timing::median;

/// What the whole-file rows run on.
pub struct Setup {
    /// The `amn` binary.
    pub amn: PathBuf,
    /// The `dq` binary.
    pub dq: PathBuf,
    /// The GGUF to convert (else one is written: `gb` GB of `n`-element tensors).
    pub model: Option<PathBuf>,
    /// Size of the written model, GB.
    pub gb: f64,
    /// Elements per tensor of the written model.
    pub n: usize,
    /// Thread counts, each passed to both tools.
    pub threads: Vec<usize>,
    /// Runs of each tool per row.
    pub runs: usize,
    /// The scratch folder's parent.
    pub scratch: PathBuf,
}

/// A llama.cpp-like mix of block types for the written model.
const MIX: [GgmlType; 5] = [
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q5_K,
];

/// The rows: bf16 and f32, per thread count.
pub fn rows(s: &Setup) -> Result<Vec<Row>, String> {
    let work = s
        .scratch
        .join(format!("dq-peer-anamnesis-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let result = rows_in(s, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn rows_in(s: &Setup, work: &Path) -> Result<Vec<Row>, String> {
    let model = match &s.model {
        Some(m) => m.clone(),
        None => {
            let m = work.join("model.gguf");
            write_model(&m, s.gb, s.n).map_err(|e| format!("{}: {e}", m.display()))?;
            m
        }
    };
    let g = Gguf::open(&model).map_err(|e| e.to_string())?;
    let input = g.bytes().len() as u64;
    let elements: u64 = g.tensors().iter().map(|t| t.element_count()).sum();
    let blocks: HashSet<String> = g
        .tensors()
        .iter()
        .filter(|t| t.ggml_type().is_some_and(|t| t.traits().block_size > 1))
        .map(|t| t.name().to_owned())
        .collect();
    drop(g);
    let name = model
        .file_name()
        .map_or("model".into(), |n| n.to_string_lossy());
    let case = format!("{name} ({:.0} MB)", input as f64 / 1e6);
    let mut rows = Vec::new();
    for (dtype, size) in [("bf16", 2), ("f32", 4)] {
        for &t in &s.threads {
            let run = Run {
                s,
                model: &model,
                work,
                dtype,
                threads: t,
                blocks: &blocks,
            };
            let (amn, dq, bits) = match room(work, elements * size) {
                Ok(()) => run.timed(),
                Err(e) => (Err(e.clone()), Err(e), Bits::Unchecked),
            };
            rows.push(Row {
                kind: "file",
                case: case.clone(),
                dtype,
                amn_threads: t,
                dq_threads: t,
                bytes: input + elements * size,
                amn,
                dq: vec![("convert, auto".into(), dq)],
                memcpy: None,
                bits,
            });
        }
    }
    Ok(rows)
}

/// One row's commands.
struct Run<'a> {
    s: &'a Setup,
    model: &'a Path,
    work: &'a Path,
    dtype: &'static str,
    threads: usize,
    /// The tensors the bits check compares: those stored as blocks in the GGUF
    /// (anamnesis keeps a float tensor's dtype; dq converts it to `--dtype`).
    blocks: &'a HashSet<String>,
}

type Times = Result<f64, String>;

impl Run<'_> {
    fn amn(&self) -> (Command, PathBuf) {
        let out = self.work.join("amn.safetensors");
        let mut c = Command::new(&self.s.amn);
        c.arg("remember").arg(self.model).args(["--to", self.dtype]);
        c.arg("-o").arg(&out).arg("--force");
        c.args(["--threads", &self.threads.to_string()]);
        (c, out)
    }

    fn dq(&self) -> (Command, PathBuf) {
        let out = self.work.join("dq.safetensors");
        let mut c = Command::new(&self.s.dq);
        c.arg("convert").arg(self.model).arg(&out);
        c.args([
            "--dtype",
            self.dtype,
            "--threads",
            &self.threads.to_string(),
        ]);
        (c, out)
    }

    /// `runs` runs of each tool, alternated (amn first on even runs); the outputs
    /// of the first run compared.
    fn timed(&self) -> (Times, Times, Bits) {
        let (mut amn, mut dq) = (Ok(Vec::new()), Ok(Vec::new()));
        let mut bits = Bits::Unchecked;
        for i in 0..self.s.runs {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let (times, (cmd, _)) = if k == 0 {
                    (&mut amn, self.amn())
                } else {
                    (&mut dq, self.dq())
                };
                if let Ok(v) = times {
                    match time(cmd) {
                        Ok(t) => v.push(t),
                        Err(e) => *times = Err(e),
                    }
                }
            }
            let (a, d) = (self.amn().1, self.dq().1);
            if i == 0 && amn.is_ok() && dq.is_ok() {
                bits = compare_files(&a, &d, self.blocks);
            }
            let _ = std::fs::remove_file(a);
            let _ = std::fs::remove_file(d);
        }
        (amn.map(median), dq.map(median), bits)
    }
}

/// Refuses a row whose `out`-byte outputs would not fit: both on the scratch
/// filesystem, and in memory anamnesis' (it holds every tensor until it writes the
/// file) beside both files (a tmpfs such as /dev/shm keeps them in memory).
fn room(work: &Path, out: u64) -> Result<(), String> {
    let mb = |b: u64| b / 1_000_000;
    let free = free_bytes(work)?;
    if free < 2 * out + out / 8 {
        let (f, o) = (mb(free), mb(2 * out));
        return Err(format!(
            "left out: {f} MB free in {}, the outputs take {o} MB",
            work.display()
        ));
    }
    match mem_available() {
        Some(avail) if avail < 3 * out + out / 8 => {
            let (a, o) = (mb(avail), mb(3 * out));
            Err(format!(
                "left out: {a} MB of memory available, the row takes {o} MB"
            ))
        }
        _ => Ok(()),
    }
}

/// Bytes an unprivileged process may still write on `path`'s filesystem.
fn free_bytes(path: &Path) -> Result<u64, String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a live, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "{}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// /proc/meminfo's MemAvailable in bytes, where there is one.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Seconds `cmd` took; its stderr's last line if it failed.
fn time(mut cmd: Command) -> Result<f64, String> {
    let start = Instant::now();
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    let t = start.elapsed().as_secs_f64();
    if out.status.success() {
        return Ok(t);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(err.lines().last().unwrap_or("failed").trim().to_owned())
}

/// Each tensor of dq's output `d` named in `blocks` against the same-named tensor of
/// anamnesis' `a`: dtype, shape and bytes.
fn compare_files(a: &Path, d: &Path, blocks: &HashSet<String>) -> Bits {
    let map = |p: &Path| -> Result<memmap2::Mmap, String> {
        let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
        // SAFETY: the file is this program's scratch output, which nothing else
        // writes or truncates while the map lives.
        unsafe { memmap2::Mmap::map(&f) }.map_err(|e| format!("{}: {e}", p.display()))
    };
    // Ok(Ok(n)): n tensors compared, all equal; Ok(Err(m)): where they differ.
    let check = || -> Result<Result<usize, String>, String> {
        let (ma, md) = (map(a)?, map(d)?);
        let ta = SafeTensors::deserialize(&ma).map_err(|e| format!("anamnesis output: {e}"))?;
        let td = SafeTensors::deserialize(&md).map_err(|e| format!("dq output: {e}"))?;
        if ta.len() != td.len() {
            return Ok(Err(format!("{} tensors vs dq's {}", ta.len(), td.len())));
        }
        let mut compared = 0;
        for (name, t) in td.tensors().into_iter().filter(|(n, _)| blocks.contains(n)) {
            let Ok(u) = ta.tensor(&name) else {
                return Ok(Err(format!("no {name} in anamnesis' output")));
            };
            if (u.dtype(), u.shape()) != (t.dtype(), t.shape()) {
                let (ud, us, td_, ts) = (u.dtype(), u.shape(), t.dtype(), t.shape());
                return Ok(Err(format!("{name}: {ud:?} {us:?} vs dq's {td_:?} {ts:?}")));
            }
            if u.data() != t.data() {
                return Ok(Err(format!("{name}: bytes differ")));
            }
            compared += 1;
        }
        Ok(Ok(compared))
    };
    match check() {
        Ok(Ok(0)) => Bits::Unchecked,
        Ok(Ok(_)) => Bits::Equal,
        Ok(Err(m)) | Err(m) => Bits::Mismatch(m),
    }
}

/// Writes a GGUF v3 of about `gb` GB: tensors `blk.{i}.weight` of `n` elements (4096
/// columns) cycling through [`MIX`], random blocks as in the per-type rows.
pub fn write_model(path: &Path, gb: f64, n: usize) -> std::io::Result<()> {
    let mut rng = Rng::new(41);
    let datas: Vec<(GgmlType, Vec<u8>)> =
        MIX.iter().map(|&t| (t, blocks(&mut rng, t, n))).collect();
    let align = DEFAULT_ALIGNMENT as usize;
    let (mut total, mut order) = (0usize, Vec::new());
    while (total as f64) < gb * 1e9 || order.is_empty() {
        let k = order.len() % datas.len();
        total += datas[k].1.len().next_multiple_of(align);
        order.push(k);
    }
    let cols = 4096.min(n) as u64;
    let mut head = b"GGUF".to_vec();
    head.extend(3u32.to_le_bytes());
    head.extend((order.len() as u64).to_le_bytes());
    head.extend(0u64.to_le_bytes());
    let mut offset = 0u64;
    for (i, &k) in order.iter().enumerate() {
        let name = format!("blk.{i}.weight");
        head.extend((name.len() as u64).to_le_bytes());
        head.extend(name.as_bytes());
        head.extend(2u32.to_le_bytes());
        head.extend(cols.to_le_bytes());
        head.extend((n as u64 / cols).to_le_bytes());
        head.extend(datas[k].0.id().to_le_bytes());
        head.extend(offset.to_le_bytes());
        offset += datas[k].1.len().next_multiple_of(align) as u64;
    }
    head.resize(head.len().next_multiple_of(align), 0);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&head)?;
    for &k in &order {
        let d = &datas[k].1;
        f.write_all(d)?;
        f.write_all(&vec![0u8; d.len().next_multiple_of(align) - d.len()])?;
    }
    f.flush()
}
