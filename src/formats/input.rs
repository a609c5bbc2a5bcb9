//! Opening input files: the one place every reader (GGUF, safetensors shards,
//! `config.json`, the shard index, `.npy`) opens a file it reads.
//!
//! Only regular files are read. A FIFO, device or socket is refused before it is
//! opened for reading (opening a FIFO blocks until a writer comes; reading a device
//! may never end), and checked again on the open descriptor, so that a path swapped
//! between the two checks is refused too. Symlinks are followed: a link to a regular
//! file (as the HuggingFace cache is made of) is read.
//!
//! A file's bytes come either read into memory ([`read`], safe) or memory-mapped
//! ([`map`], `unsafe`: see its contract), as one type, [`FileBytes`].

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

use memmap2::Mmap;

/// An input path that is not a regular file.
#[derive(Debug, thiserror::Error)]
#[error("not a regular file (it is {kind}); dq reads regular files only")]
pub struct NotRegularFile {
    /// `a FIFO`, `a socket`, `a character device`, `a block device`, `a directory`.
    pub kind: &'static str,
}

/// What `meta` is, when it is not a regular file.
fn irregular(meta: &Metadata) -> Option<&'static str> {
    let ty = meta.file_type();
    if ty.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return Some("a FIFO");
        }
        if ty.is_socket() {
            return Some("a socket");
        }
        if ty.is_char_device() {
            return Some("a character device");
        }
        if ty.is_block_device() {
            return Some("a block device");
        }
    }
    Some(if ty.is_dir() {
        "a directory"
    } else {
        "not a file"
    })
}

/// The error for a path that is not a regular file (kind `InvalidInput`).
fn refuse(kind: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, NotRegularFile { kind })
}

/// Checks that `path` (symlinks followed) is a regular file; its metadata.
///
/// # Errors
/// The OS error of `stat`, or [`NotRegularFile`] (inside an `InvalidInput` error).
pub fn check_regular(path: &Path) -> io::Result<Metadata> {
    let meta = std::fs::metadata(path)?;
    match irregular(&meta) {
        None => Ok(meta),
        Some(kind) => Err(refuse(kind)),
    }
}

/// Opens a regular file for reading: refused before opening when it is anything
/// else, and checked again on the descriptor (opened non-blocking, so that a FIFO
/// put in its place after the first check does not block the open).
///
/// # Errors
/// The OS error, or [`NotRegularFile`] (inside an `InvalidInput` error).
pub fn open(path: &Path) -> io::Result<File> {
    check_regular(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK changes nothing for regular files (reads of them never block).
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    match irregular(&file.metadata()?) {
        None => Ok(file),
        Some(kind) => Err(refuse(kind)),
    }
}

/// Reads a whole regular file of at most `limit` bytes (a larger one is an
/// `InvalidData` error naming both sizes, before anything is allocated).
///
/// # Errors
/// As [`open`], or the file is larger than `limit`.
pub fn read_limited(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("file of {len} bytes, larger than the {limit} bytes allowed for it"),
        ));
    }
    read_all(file, len)
}

/// Reads `file` (`len` bytes as it was seen) to its end, never past `len + 1` bytes
/// of memory reserved up front.
fn read_all(file: File, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let len = in_memory(len)?;
    bytes
        .try_reserve_exact(len)
        .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    file.take(len as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A file length as a memory size: `OutOfMemory` where it does not fit.
fn in_memory(len: u64) -> io::Result<usize> {
    usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))
}

/// A file's bytes: read into memory, or mapped.
#[derive(Debug)]
pub enum FileBytes {
    /// Read into memory ([`read`]).
    Owned(Vec<u8>),
    /// Memory-mapped: the file itself ([`map`]), or anonymous memory holding a copy
    /// of its bytes ([`read_aligned`]).
    Mapped(Mmap),
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

/// Reads a whole regular file into memory.
///
/// # Errors
/// As [`open`], or reading fails.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let len = file.metadata()?.len();
    read_all(file, len)
}

/// Reads a whole regular file into page-aligned memory, read-only: the bytes sit
/// where a map of the file would put them, so a tensor's data has the alignment
/// it has in the file (a heap buffer of the same bytes starts 16 bytes past a page
/// and slowed the 4-bit linear kernels' loads; BENCHMARKS.md). No file stays
/// mapped: the copy is anonymous memory.
///
/// # Errors
/// As [`open`], or reading fails (a file that shrank while read included).
pub fn read_aligned(path: &Path) -> io::Result<FileBytes> {
    let mut file = open(path)?;
    let len = in_memory(file.metadata()?.len())?;
    if len == 0 {
        return Ok(FileBytes::Owned(Vec::new()));
    }
    let mut bytes = memmap2::MmapMut::map_anon(len)?;
    file.read_exact(&mut bytes)?;
    Ok(FileBytes::Mapped(bytes.make_read_only()?))
}

/// Maps a whole regular file into memory, read-only.
///
/// # Safety
/// The file must not be modified or truncated while the map (or anything borrowed
/// from it) lives. A change shows through the map (the bytes under `&[u8]` change,
/// which Rust does not allow); a file truncated under the map ends the process with
/// `SIGBUS` when a page past the new end is read. This is the contract of every
/// mmap-based reader (`memmap2::Mmap::map`, candle's `MmapedSafetensors::new`).
///
/// # Errors
/// As [`open`], or mapping fails.
pub unsafe fn map(path: &Path) -> io::Result<FileBytes> {
    let file = open(path)?;
    if file.metadata()?.len() == 0 {
        // An empty map is an error on some systems; nothing can change under no bytes.
        return Ok(FileBytes::Owned(Vec::new()));
    }
    // SAFETY: the caller guarantees that the file is not modified while mapped (the
    // contract above); the map is read-only and private.
    let map = unsafe { Mmap::map(&file) }?;
    Ok(FileBytes::Mapped(map))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn irregular_files_are_refused_and_symlinks_followed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read(&link).unwrap(), b"abc");
        // SAFETY: the file is not modified while mapped.
        assert_eq!(unsafe { map(&link) }.unwrap().as_ref(), b"abc");
        let err = open(dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            NotRegularFile {
                kind: "a directory"
            }
            .to_string()
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err = open(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let err = read_limited(&file, 2).unwrap_err();
        assert!(err.to_string().contains("3 bytes"), "{err}");
    }

    #[test]
    fn an_aligned_read_is_the_files_bytes_at_a_page_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&file, &data).unwrap();
        let got = read_aligned(&file).unwrap();
        assert!(matches!(got, FileBytes::Mapped(_)));
        assert_eq!(got.as_ref(), &data[..]);
        assert_eq!(got.as_ref().as_ptr() as usize % 4096, 0, "page-aligned");
        std::fs::write(&file, b"").unwrap();
        assert!(read_aligned(&file).unwrap().as_ref().is_empty());
        assert!(read_aligned(dir.path()).is_err(), "a directory");
    }
}
