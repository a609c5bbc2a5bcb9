//! How to run a call: which backend, on how many threads, tuned how.

use dq_runtime::Backend;
use dq_runtime::policy::Tuning;

/// How to run a call: which backend (default `auto`), on how many threads
/// (default 1: the caller's thread), and its [`Tuning`] (default: the calling
/// thread's, which is the process default outside a [`Tuning::scope`]).
///
/// Built from [`Options::new`] (the defaults) with `with_*` methods, so new
/// settings can be added without breaking callers:
///
/// ```
/// use dq::{Backend, Options};
/// let opts = Options::new().with_backend(Backend::Generated).with_threads(2);
/// assert_eq!((opts.backend(), opts.threads()), (Backend::Generated, 2));
/// assert_eq!(Options::default().backend(), Backend::Auto);
///
/// // Large outputs stored with non-temporal stores for this call only.
/// use dq::policy::{StoreStrategy, Tuning};
/// let opts = opts.with_tuning(Tuning::new().with_store(StoreStrategy::NonTemporal));
/// assert_eq!(opts.tuning().and_then(|t| t.store()), Some(StoreStrategy::NonTemporal));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    backend: Backend,
    threads: usize,
    tuning: Option<Tuning>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            threads: 1,
            tuning: None,
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

    /// These options with `tuning` for the call (instead of the calling thread's).
    #[must_use]
    pub fn with_tuning(self, tuning: Tuning) -> Self {
        Options {
            tuning: Some(tuning),
            ..self
        }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The call's own tuning, if set.
    pub fn tuning(&self) -> Option<Tuning> {
        self.tuning
    }

    /// Runs `f` under these options' tuning (the calling thread's when unset).
    pub(crate) fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.tuning {
            Some(t) => t.scope(f),
            None => f(),
        }
    }
}
