//! Temporary output files that never outlive the process, whatever ends it.
//!
//! The CLI memory-maps its inputs (`Gguf::map`, `Checkpoint::map`), whose contract is
//! that no one truncates them meanwhile. Should someone do so anyway, the next read of
//! a page past the new end raises `SIGBUS`; [`install`] (called once at start) makes
//! that one line, `dq: error: input file changed or shrank while being read (SIGBUS)`,
//! and exit code 2, after unlinking the temporary files this process registered.
//!
//! [`TempFile`] creates a temporary file named `PREFIX<pid>-<random>.tmp` and registers
//! its path in a fixed table of C strings that the handler can read without
//! allocating or locking; dropping it (every error path) unregisters and deletes it,
//! [`TempFile::persist`] unregisters it and renames it. A process killed outright
//! (`SIGKILL`, the OOM killer) leaves its file behind: [`sweep`] deletes those of
//! processes that no longer run.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// Temporary files registered at once (a command makes one or two).
const SLOTS: usize = 8;
/// Longest path a slot holds (with its NUL); a longer one is not registered (it is
/// still deleted on every path but a signal).
const PATH_MAX: usize = 4096;

const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;
/// Taken by the signal handler, which is unlinking it: never reused.
const CLAIMED: u8 = 3;

/// One registered path: `state` says who may touch `path`.
struct Slot {
    state: AtomicU8,
    path: std::cell::UnsafeCell<[u8; PATH_MAX]>,
}

// SAFETY: `path` is written only by the thread that moved `state` from FREE to WRITING,
// and read only by whoever moved it from READY to CLAIMED (the handler) — after the
// writer's Release store of READY, which the reader's Acquire CAS observes. No two
// parties ever own a slot at once.
unsafe impl Sync for Slot {}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        state: AtomicU8::new(FREE),
        path: std::cell::UnsafeCell::new([0; PATH_MAX]),
    }
}; SLOTS];

/// What the handler writes (one line).
const MESSAGE: &[u8] = b"dq: error: input file changed or shrank while being read (SIGBUS)\n";

/// Registers `path` for the handler; the slot, or `None` when the table is full or
/// the path too long.
fn register(path: &Path) -> Option<usize> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > PATH_MAX {
        return None;
    }
    for (i, slot) in TABLE.iter().enumerate() {
        if slot
            .state
            .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: moving the state FREE -> WRITING made this thread the slot's only
            // user (see `Slot`'s Sync); the handler ignores a WRITING slot.
            unsafe { (&mut *slot.path.get())[..bytes.len()].copy_from_slice(bytes) };
            slot.state.store(READY, Ordering::Release);
            return Some(i);
        }
    }
    None
}

/// Takes `slot` out of the table (unless the handler has claimed it: the process is
/// ending then).
fn unregister(slot: usize) {
    let _ = TABLE[slot]
        .state
        .compare_exchange(READY, FREE, Ordering::AcqRel, Ordering::Relaxed);
}

/// The SIGBUS handler: unlinks every registered file, writes one line, exits with 2.
/// Only async-signal-safe calls (`unlink`, `write`, `_exit`) and atomics.
extern "C" fn on_sigbus(_: libc::c_int) {
    for slot in &TABLE {
        if slot
            .state
            .compare_exchange(READY, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the CAS READY -> CLAIMED made the handler the slot's only user; the
            // path was written NUL-terminated before READY was stored.
            unsafe { libc::unlink(slot.path.get().cast::<libc::c_char>()) };
        }
    }
    // SAFETY: `write` and `_exit` are async-signal-safe; MESSAGE is a valid buffer.
    unsafe {
        libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
        libc::_exit(2);
    }
}

/// Installs the SIGBUS handler (once, at CLI start, before any input is mapped).
pub fn install() {
    // SAFETY: a zeroed `sigaction` is a valid empty one; the handler only makes
    // async-signal-safe calls (see `on_sigbus`).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// A temporary file, registered for the SIGBUS handler; deleted when dropped.
pub struct TempFile {
    /// `None` once persisted.
    path: Option<tempfile::TempPath>,
    slot: Option<usize>,
}

impl TempFile {
    /// Creates `PREFIX<pid>-<random>.tmp` in `dir` and registers it.
    ///
    /// # Errors
    /// The folder is not writable.
    pub fn new(dir: &Path, prefix: &str) -> io::Result<(TempFile, std::fs::File)> {
        let named = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .suffix(".tmp")
            .tempfile_in(dir)?;
        let (file, path) = named.into_parts();
        let slot = register(&path);
        let path = Some(path);
        Ok((TempFile { path, slot }, file))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Unregisters the file and renames it onto `to`.
    ///
    /// # Errors
    /// The rename failed (the file is deleted then).
    pub fn persist(mut self, to: &Path) -> io::Result<()> {
        if let Some(slot) = self.slot.take() {
            unregister(slot);
        }
        match self.path.take() {
            Some(path) => path.persist(to).map_err(|e| e.error),
            None => Ok(()),
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            unregister(slot);
        }
        // `TempPath`'s own drop deletes the file.
    }
}

/// Deletes `PREFIX<pid>-*.tmp` files in `dir` whose process no longer runs (left by a
/// process that was killed); returns them.
pub fn sweep(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix)?.strip_suffix(".tmp"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && pid > 0 && !alive(pid) && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

/// Whether a process `pid` exists (`kill(pid, 0)` does not say ESRCH).
pub(super) fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_files_are_deleted_on_drop_and_kept_on_persist() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = TempFile::new(dir.path(), ".t-").unwrap();
        let name = t.path().file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            name.starts_with(&format!(".t-{}-", std::process::id())),
            "{name}"
        );
        let slot = t.slot.unwrap();
        assert_eq!(TABLE[slot].state.load(Ordering::Relaxed), READY);
        let p = t.path().to_owned();
        drop(t);
        assert!(!p.exists());
        assert_eq!(TABLE[slot].state.load(Ordering::Relaxed), FREE);
        let (t, _) = TempFile::new(dir.path(), ".t-").unwrap();
        t.persist(&dir.path().join("out")).unwrap();
        assert!(dir.path().join("out").exists());
        assert!(
            TABLE
                .iter()
                .all(|s| s.state.load(Ordering::Relaxed) == FREE)
        );
    }

    #[test]
    fn sweep_deletes_files_of_dead_processes_only() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        // Above the kernel's largest pid (2^22): no such process.
        for name in [
            format!(".t-{me}-a.tmp"),
            ".t-999999999-b.tmp".into(),
            ".t-x-c.tmp".into(),
            ".u-999999999-d.tmp".into(),
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let removed = sweep(dir.path(), ".t-");
        assert_eq!(removed, vec![dir.path().join(".t-999999999-b.tmp")]);
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!(".t-{me}-a.tmp"),
                ".t-x-c.tmp".into(),
                ".u-999999999-d.tmp".into()
            ]
        );
    }
}
