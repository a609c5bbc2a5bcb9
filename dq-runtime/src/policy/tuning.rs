//! [`Tuning`]: the choices of how work runs, as a value a call carries.

use core::cell::Cell;

use super::StoreStrategy;

/// How work runs, never what it computes: the store strategy, the size above
/// which an output counts as large (its store strategy measured), and how
/// parallel work is cut. Every field left unset follows the process default
/// (`DQ_STORE`, else the strategy measured on this machine for large outputs;
/// the per-core L2 cache; the executor's probe and split). The bits written are
/// the same whatever it says.
///
/// A call carries one through `dq::Options::with_tuning`, or runs inside
/// [`Tuning::scope`]; work the call hands to pool threads runs under the same
/// tuning. Nothing here is process-wide, so concurrent calls with different
/// tunings do not see each other's.
///
/// ```
/// use dq_runtime::policy::{self, StoreStrategy, Tuning};
/// let t = Tuning::new().with_store(StoreStrategy::NonTemporal);
/// t.scope(|| assert_eq!(policy::store_for(1 << 20), StoreStrategy::NonTemporal));
/// let t = Tuning::new().with_large_above(1 << 20);
/// t.scope(|| {
///     assert!(!policy::is_large_output(1 << 20));
///     assert!(policy::is_large_output((1 << 20) + 1));
/// });
/// assert_eq!(Tuning::current(), Tuning::new());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Tuning {
    store: Option<StoreStrategy>,
    large_above: Option<usize>,
    llc: Option<usize>,
    chunk: Option<usize>,
    split: bool,
    probe: bool,
}

thread_local! {
    /// The tuning of the call running on this thread.
    static CURRENT: Cell<Tuning> = const { Cell::new(Tuning::new()) };
}

impl Tuning {
    /// The process defaults.
    pub const fn new() -> Self {
        Tuning {
            store: None,
            large_above: None,
            llc: None,
            chunk: None,
            split: false,
            probe: false,
        }
    }

    /// This tuning with every output stored as `store` (no measurement, no
    /// per-plan race).
    #[must_use]
    pub fn with_store(self, store: StoreStrategy) -> Self {
        Tuning {
            store: Some(store),
            ..self
        }
    }

    /// This tuning with outputs of more than `bytes` counting as large.
    #[must_use]
    pub fn with_large_above(self, bytes: usize) -> Self {
        Tuning {
            large_above: Some(bytes),
            ..self
        }
    }

    /// This tuning with the OS reporting a last-level cache of `bytes` (feature
    /// `testing`): a VM may report its host's (300 MiB on an Emerald Rapids VM),
    /// which no threshold may trust.
    #[cfg(any(test, feature = "testing"))]
    #[must_use]
    pub fn with_reported_llc(self, bytes: usize) -> Self {
        Tuning {
            llc: Some(bytes),
            ..self
        }
    }

    /// This tuning with parallel work cut in chunks of exactly `elements` (at
    /// least 1), over every requested thread, unprobed: parallel runs split at
    /// every size (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    #[must_use]
    pub fn with_chunk(self, elements: usize) -> Self {
        Tuning {
            chunk: Some(elements.max(1)),
            ..self
        }
    }

    /// This tuning with parallel work split over every requested thread whatever
    /// its measured cost, unprobed (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    #[must_use]
    pub fn with_split(self) -> Self {
        Tuning {
            split: true,
            ..self
        }
    }

    /// This tuning with every parallel run timing its probe, however small the
    /// work (no one-call shortcut; feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    #[must_use]
    pub fn with_probe(self) -> Self {
        Tuning {
            probe: true,
            ..self
        }
    }

    /// The last-level cache size this tuning says the OS reports, if set.
    pub fn reported_llc(&self) -> Option<usize> {
        self.llc
    }

    /// The store strategy for every output, if this tuning fixes one.
    pub fn store(&self) -> Option<StoreStrategy> {
        self.store
    }

    /// The large-output threshold in bytes, if this tuning sets one.
    pub fn large_above(&self) -> Option<usize> {
        self.large_above
    }

    /// The forced chunk length, if any.
    pub fn chunk(&self) -> Option<usize> {
        self.chunk
    }

    /// True when parallel runs skip the probe and split over every thread.
    pub fn forces_split(&self) -> bool {
        self.split || self.chunk.is_some()
    }

    /// True when parallel runs always time a probe.
    pub fn always_probes(&self) -> bool {
        self.probe
    }

    /// The tuning of the call running on this thread ([`Tuning::new`] outside
    /// any [`scope`](Self::scope)).
    pub fn current() -> Tuning {
        CURRENT.with(Cell::get)
    }

    /// Runs `f` under this tuning on this thread; the previous one is restored
    /// after, also when `f` panics.
    pub fn scope<R>(self, f: impl FnOnce() -> R) -> R {
        let _restore = self.enter();
        f()
    }

    /// Makes this tuning the calling thread's until the guard is dropped.
    pub fn enter(self) -> Entered {
        Entered {
            before: CURRENT.with(|c| c.replace(self)),
            _not_send: core::marker::PhantomData,
        }
    }
}

/// [`Tuning::enter`]'s guard: restores the thread's previous tuning on drop.
/// It stays on the thread that made it (not `Send`).
#[must_use = "the tuning lasts only while the guard lives"]
pub struct Entered {
    before: Tuning,
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_per_thread_nests_and_is_restored() {
        let a = Tuning::new().with_store(StoreStrategy::Plain);
        let b = a.with_large_above(7).with_chunk(0);
        assert_eq!(b.chunk(), Some(1));
        a.scope(|| {
            assert_eq!(Tuning::current(), a);
            std::thread::spawn(|| assert_eq!(Tuning::current(), Tuning::new()))
                .join()
                .unwrap();
            b.scope(|| assert_eq!(Tuning::current(), b));
            assert_eq!(Tuning::current(), a);
        });
        assert_eq!(Tuning::current(), Tuning::new());
    }

    #[test]
    fn a_panic_inside_a_scope_restores_the_tuning() {
        let t = Tuning::new().with_split();
        let r = std::panic::catch_unwind(|| t.scope(|| panic!("inside")));
        assert!(r.is_err());
        assert_eq!(Tuning::current(), Tuning::new());
        assert!(t.forces_split() && !t.always_probes());
    }
}
