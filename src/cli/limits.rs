//! Limits checked before a command allocates or writes: the memory a tensor's output
//! takes against what this process may use, and the bytes a file will take against
//! the free space of its folder. A file can declare a tensor far larger than memory
//! (a sparse file of zeros is a valid GGUF file); it is refused with one line before
//! the first byte is allocated or written, never left to abort the process.

use std::path::{Path, PathBuf};

/// The `--max-memory` value: `4096`, `512K`, `1.5G`, `2GiB`, `8g` (binary units).
///
/// # Errors
/// Text that is not a size.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a size (expected e.g. 512M, 2G or 1073741824)");
    let t = s.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches("ib").trim_end_matches('b');
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    let value: f64 = num.parse().map_err(|_| bad())?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Bytes this process may still allocate, and what says so: `--max-memory` when
/// given, else the least of `MemAvailable` (`/proc/meminfo`) and the cgroup's
/// `memory.max` headroom; in both cases no more than the `RLIMIT_AS` headroom, which
/// makes a larger allocation fail. `None` when nothing is known.
pub fn memory_limit(max_memory: Option<u64>) -> Option<(u64, &'static str)> {
    let system = match max_memory {
        Some(m) => Some((m, "--max-memory")),
        None => [
            mem_available().map(|m| (m, "available memory (MemAvailable)")),
            cgroup_headroom().map(|m| (m, "the cgroup's memory.max")),
        ]
        .into_iter()
        .flatten()
        .min(),
    };
    let rlimit = address_space_headroom().map(|m| (m, "the address-space limit (RLIMIT_AS)"));
    [system, rlimit].into_iter().flatten().min()
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    kib_field(&info, "MemAvailable:")
}

/// A `Name:   1234 kB` line's value in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// `memory.max - memory.current` of this process's cgroup (v2), when it has a limit.
fn cgroup_headroom() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // `max`: no limit
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// `RLIMIT_AS` less the address space in use (`VmSize`), when there is a limit.
fn address_space_headroom() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid `rlimit` for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let used = kib_field(&status, "VmSize:").unwrap_or(0);
    Some(lim.rlim_cur.saturating_sub(used))
}

/// Free bytes for an unprivileged writer in the file system of `dir`.
pub fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statvfs` is a valid value for statvfs to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` valid for writing.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    st.f_bavail.checked_mul(st.f_frsize)
}

/// A limit a command would exceed.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// A tensor's output does not fit in memory.
    #[error(
        "tensor {tensor} needs {need} bytes of memory, more than {what} allows ({limit} bytes){hint}"
    )]
    Memory {
        /// The tensor.
        tensor: String,
        /// Bytes it needs.
        need: u64,
        /// Bytes allowed.
        limit: u64,
        /// Where the limit comes from.
        what: &'static str,
        /// How to go on.
        hint: &'static str,
    },
    /// A tensor whose size does not even fit the address space.
    #[error("tensor {tensor}: its output size overflows")]
    Overflow {
        /// The tensor.
        tensor: String,
    },
    /// The output does not fit on its disk.
    #[error("{path}: the output needs {need} bytes, {free} are free there", path = path.display())]
    Disk {
        /// The output.
        path: PathBuf,
        /// Bytes it needs.
        need: u64,
        /// Bytes free.
        free: u64,
    },
}

/// Checks that `need` bytes for `tensor` fit under [`memory_limit`].
///
/// # Errors
/// [`LimitError::Memory`] when they do not.
pub fn check_memory(tensor: &str, need: u64, max_memory: Option<u64>) -> Result<(), LimitError> {
    match memory_limit(max_memory) {
        Some((limit, what)) if need > limit => Err(LimitError::Memory {
            tensor: tensor.to_owned(),
            need,
            limit,
            what,
            hint: if max_memory.is_none() && what.starts_with("available") {
                " (--max-memory overrides)"
            } else {
                ""
            },
        }),
        _ => Ok(()),
    }
}

/// Checks that `need` bytes fit on the disk of `output`'s folder `dir`.
///
/// # Errors
/// [`LimitError::Disk`] when they do not.
pub fn check_disk(output: &Path, dir: &Path, need: u64) -> Result<(), LimitError> {
    match free_space(dir) {
        Some(free) if need > free => Err(LimitError::Disk {
            path: output.to_owned(),
            need,
            free,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("8gb"), Ok(8 << 30));
        assert_eq!(parse_size("1t"), Ok(1 << 40));
        for bad in ["", "G", "-1G", "1X", "1e3", "99999999999T", "1..2"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_read() {
        assert_eq!(
            kib_field("A: 1\nMemAvailable:  12 kB\n", "MemAvailable:"),
            Some(12 << 10)
        );
        assert_eq!(memory_limit(Some(5)).map(|l| l.0), Some(5));
        assert!(check_memory("t", 6, Some(5)).is_err());
        assert!(check_memory("t", 5, Some(5)).is_ok());
        assert!(mem_available().is_some_and(|m| m > 0));
        assert!(free_space(Path::new(".")).is_some());
    }
}
