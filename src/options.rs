//! How to run a call: which backend, on how many threads.

use dq_runtime::Backend;

/// How to run a call: which backend (default `auto`), on how many threads
/// (default 1: the caller's thread).
///
/// Built from [`Options::new`] (the defaults) with `with_*` methods, so new
/// settings can be added without breaking callers:
///
/// ```
/// use dq::{Backend, Options};
/// let opts = Options::new().with_backend(Backend::Generated).with_threads(2);
/// assert_eq!((opts.backend(), opts.threads()), (Backend::Generated, 2));
/// assert_eq!(Options::default().backend(), Backend::Auto);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    backend: Backend,
    threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            threads: 1,
        }
    }
}

impl Options {
    /// The defaults: `auto`, one thread.
    pub fn new() -> Self {
        Self::default()
    }

    /// These options with `backend`.
    #[must_use]
    pub fn with_backend(self, backend: Backend) -> Self {
        Options { backend, ..self }
    }

    /// These options with `threads` worker threads ([`dequantize`](crate::dequantize)
    /// refuses 0 with [`Error::ZeroThreads`](crate::Error::ZeroThreads); the
    /// checkpoint readers take 0 as 1).
    #[must_use]
    pub fn with_threads(self, threads: usize) -> Self {
        Options { threads, ..self }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}
