//! The one kernel cache of every JIT kind (elementwise plans, GGUF block types,
//! linear shapes): keyed by what a kernel is specialised to, one compile per key
//! even when threads race, bounded with least-recently-used eviction,
//! reference-counted entries whose code is freed with their last reference.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use dq_runtime::KernelStats;

use crate::compile::Compiled;
use crate::error::JitError;

/// A kernel a [`Cache`] holds: something owning its [`Compiled`] code.
pub(crate) trait Code {
    /// Its code (the cache counts it, and is told when it is freed).
    fn code_mut(&mut self) -> &mut Compiled;
}

/// One cache slot: what its kernel is compiled from, and the kernel, compiled
/// once by whichever thread gets there first.
struct Slot<P, V> {
    prep: P,
    kernel: OnceLock<Result<Arc<V>, JitError>>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct Counters {
    compiled: AtomicU64,
    reused: AtomicU64,
    compile_ns: AtomicU64,
    code_bytes: AtomicU64,
}

type Map<K, P, V> = HashMap<K, Arc<Slot<P, V>>>;

/// A bounded, thread-safe map from keys `K` to kernels `V` compiled from `P`.
///
/// Its mutex guards only the map: what a kernel is compiled from is prepared
/// before it is taken (preparing may analyse user input or calibrate the store
/// strategy), and compiles run outside it.
pub(crate) struct Cache<K, P, V> {
    map: Mutex<Map<K, P, V>>,
    capacity: usize,
    tick: AtomicU64,
    counters: Arc<Counters>,
}

impl<K: Hash + Eq + Clone, P, V: Code> Cache<K, P, V> {
    /// An empty cache holding at most `capacity` kernels (at least 1).
    pub fn new(capacity: usize) -> Self {
        Cache {
            map: Mutex::default(),
            capacity: capacity.max(1),
            tick: AtomicU64::new(0),
            counters: Arc::default(),
        }
    }

    /// Most kernels kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, Map<K, P, V>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot(&self, key: &K) -> Option<Arc<Slot<P, V>>> {
        self.lock().get(key).cloned()
    }

    /// What the kernel cached under `key` is (or is being) compiled from.
    pub fn prep(&self, key: &K) -> Option<P>
    where
        P: Clone,
    {
        self.slot(key).map(|s| s.prep.clone())
    }

    /// True when the kernel of `key` is compiled and cached.
    pub fn contains(&self, key: &K) -> bool {
        self.slot(key)
            .is_some_and(|s| matches!(s.kernel.get(), Some(Ok(_))))
    }

    /// The kernel of `key`. On a miss, `prepare` says what to compile it from
    /// (before the map is locked; its error is not cached) and `compile`
    /// compiles it (once per key; its error is cached, so it is not retried).
    ///
    /// # Errors
    /// `prepare`'s or `compile`'s.
    pub fn get(
        &self,
        key: &K,
        prepare: impl FnOnce() -> Result<P, JitError>,
        compile: impl FnOnce(&P) -> Result<V, JitError>,
    ) -> Result<Arc<V>, JitError> {
        let now = self.tick.fetch_add(1, Relaxed);
        let slot = match self.slot(key) {
            Some(s) => s,
            None => {
                let fresh = Arc::new(Slot {
                    prep: prepare()?,
                    kernel: OnceLock::new(),
                    last_used: AtomicU64::new(now),
                });
                let mut map = self.lock();
                // A racing thread may have inserted it meanwhile: take theirs.
                let s = map.entry(key.clone()).or_insert(fresh).clone();
                self.evict(&mut map, &s);
                s
            }
        };
        slot.last_used.store(now, Relaxed);
        let mut fresh = false;
        let k = slot.kernel.get_or_init(|| {
            fresh = true;
            self.compile(&slot.prep, compile)
        });
        if !fresh {
            self.counters.reused.fetch_add(1, Relaxed);
        }
        k.clone()
    }

    fn compile(
        &self,
        prep: &P,
        compile: impl FnOnce(&P) -> Result<V, JitError>,
    ) -> Result<Arc<V>, JitError> {
        let mut kernel = compile(prep)?;
        let code = kernel.code_mut();
        let c = &self.counters;
        c.compiled.fetch_add(1, Relaxed);
        c.compile_ns.fetch_add(code.compile_ns, Relaxed);
        c.code_bytes.fetch_add(code.code_bytes as u64, Relaxed);
        let counters = self.counters.clone();
        code.on_free(Arc::new(move |n| {
            counters.code_bytes.fetch_sub(n as u64, Relaxed);
        }));
        Ok(Arc::new(kernel))
    }

    /// Drops least recently used slots (never `keep`) until within capacity. A
    /// kernel still in use elsewhere lives on until its last `Arc` is dropped.
    fn evict(&self, map: &mut Map<K, P, V>, keep: &Arc<Slot<P, V>>) {
        while map.len() > self.capacity {
            let victim = map
                .iter()
                .filter(|(_, s)| !Arc::ptr_eq(s, keep))
                .min_by_key(|(_, s)| s.last_used.load(Relaxed))
                .map(|(k, _)| k.clone());
            let Some(k) = victim else { break };
            map.remove(&k);
        }
    }

    /// Removes every kernel (in-use ones stay valid until released).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The counters.
    pub fn stats(&self) -> KernelStats {
        let c = &self.counters;
        KernelStats {
            compiled: c.compiled.load(Relaxed),
            reused: c.reused.load(Relaxed),
            compile_ns: c.compile_ns.load(Relaxed),
            code_bytes: c.code_bytes.load(Relaxed),
            cached: self.lock().len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;

    /// A kernel of an empty function, as every kind's kernels are held.
    struct Empty(Compiled);

    impl Code for Empty {
        fn code_mut(&mut self) -> &mut Compiled {
            &mut self.0
        }
    }

    fn empty(_: &u32) -> Result<Empty, JitError> {
        use cranelift_codegen::ir::{Function, InstBuilder, Signature, UserFuncName};
        use cranelift_codegen::isa::CallConv;
        use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
        let code = compile::compile("empty", |isa| {
            let sig = Signature::new(CallConv::triple_default(isa.triple()));
            let mut f = Function::with_name_signature(UserFuncName::default(), sig);
            let mut ctx = FunctionBuilderContext::new();
            let mut b = FunctionBuilder::new(&mut f, &mut ctx);
            let block = b.create_block();
            b.switch_to_block(block);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(isa.frontend_config());
            Ok(f)
        })?;
        Ok(Empty(code))
    }

    /// At capacity the least recently used key goes (not the first inserted,
    /// not all of them); a failed preparation is not cached; a compile runs
    /// once per key.
    #[test]
    fn evicts_the_least_recently_used_key() {
        let cache: Cache<u32, u32, Empty> = Cache::new(2);
        let get = |k: u32| cache.get(&k, || Ok(k), empty).map(drop);
        get(1).unwrap();
        get(2).unwrap();
        get(1).unwrap(); // 2 is now the least recently used
        get(3).unwrap();
        assert!(cache.contains(&1) && !cache.contains(&2) && cache.contains(&3));
        let s = cache.stats();
        assert_eq!((s.compiled, s.reused, s.cached), (3, 1, 2));
        assert!(s.code_bytes > 0);
        let refused = cache.get(&4, || Err(JitError::NoElements), empty);
        assert_eq!(refused.err(), Some(JitError::NoElements));
        assert_eq!(cache.stats().cached, 2, "a failed preparation is not kept");
        assert_eq!(cache.prep(&3), Some(3));
        cache.clear();
        assert_eq!((cache.stats().cached, cache.stats().code_bytes), (0, 0));
    }
}
