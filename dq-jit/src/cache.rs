//! The kernel cache: keyed by [`Spec`], one compile per key even when threads race,
//! bounded with least-recently-used eviction, reference-counted entries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use dq_runtime::{FormulaIr, KernelStats, Plan};

use crate::compile::{Compiled, compile};
use crate::spec::Spec;

/// A compiled kernel shared by the cache and its users; its code stays valid while
/// any `Arc` to it lives.
pub type Kernel = Arc<CompiledKernel>;

/// A kernel compiled for one [`Spec`].
pub struct CompiledKernel {
    /// What it was compiled for.
    pub spec: Spec,
    pub(crate) code: Compiled,
}

/// One cache slot: filled once, by whichever thread gets there first.
struct Slot {
    spec: Spec,
    kernel: OnceLock<Result<Kernel, String>>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct Counters {
    compiled: AtomicU64,
    reused: AtomicU64,
    compile_ns: AtomicU64,
    code_bytes: AtomicU64,
}

/// A bounded, thread-safe map from specs to compiled kernels.
pub struct Cache {
    map: Mutex<HashMap<u64, Vec<Arc<Slot>>>>,
    capacity: usize,
    tick: AtomicU64,
    counters: Arc<Counters>,
    verify: bool,
    /// Allows [`Spec::f16_blocks`] for every kernel of this cache.
    f16_convert: bool,
}

impl Cache {
    /// An empty cache holding at most `capacity` kernels (at least 1).
    pub fn new(capacity: usize, verify: bool, f16_convert: bool) -> Cache {
        Cache {
            map: Mutex::default(),
            capacity: capacity.max(1),
            tick: AtomicU64::new(0),
            counters: Arc::default(),
            verify,
            f16_convert,
        }
    }

    /// Most kernels kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether kernels may use [`Spec::f16_blocks`].
    pub fn f16_convert(&self) -> bool {
        self.f16_convert
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<Arc<Slot>>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when the kernel for `plan` is compiled and cached.
    pub fn contains(&self, formula: &FormulaIr, plan: &Plan) -> bool {
        let h = Spec::hash_of(formula, plan);
        self.lock().get(&h).is_some_and(|v| {
            v.iter()
                .any(|s| s.spec.matches(formula, plan) && matches!(s.kernel.get(), Some(Ok(_))))
        })
    }

    /// The kernel for `plan`, compiling it on a miss.
    ///
    /// # Errors
    /// The compile failure's reason (cached too, so it is not retried).
    pub fn get(&self, formula: &FormulaIr, plan: &Plan) -> Result<Kernel, String> {
        let h = Spec::hash_of(formula, plan);
        let now = self.tick.fetch_add(1, Relaxed);
        let slot = {
            let mut map = self.lock();
            let found = map
                .get(&h)
                .and_then(|v| v.iter().find(|s| s.spec.matches(formula, plan)).cloned());
            match found {
                Some(s) => s,
                None => {
                    let s = Arc::new(Slot {
                        spec: Spec::of(formula, plan, self.f16_convert),
                        kernel: OnceLock::new(),
                        last_used: AtomicU64::new(now),
                    });
                    map.entry(h).or_default().push(s.clone());
                    self.evict(&mut map, &s);
                    s
                }
            }
        };
        slot.last_used.store(now, Relaxed);
        let mut fresh = false;
        let k = slot.kernel.get_or_init(|| {
            fresh = true;
            self.compile(&slot.spec)
        });
        if !fresh {
            self.counters.reused.fetch_add(1, Relaxed);
        }
        k.clone()
    }

    fn compile(&self, spec: &Spec) -> Result<Kernel, String> {
        let mut code = compile(spec, self.verify)?;
        let c = &self.counters;
        c.compiled.fetch_add(1, Relaxed);
        c.compile_ns.fetch_add(code.compile_ns, Relaxed);
        c.code_bytes.fetch_add(code.code_bytes as u64, Relaxed);
        let counters = self.counters.clone();
        code.on_free(Arc::new(move |n| {
            counters.code_bytes.fetch_sub(n as u64, Relaxed);
        }));
        Ok(Arc::new(CompiledKernel {
            spec: spec.clone(),
            code,
        }))
    }

    /// Drops least recently used slots (never `keep`) until within capacity. A
    /// kernel still in use elsewhere lives on until its last `Arc` is dropped.
    fn evict(&self, map: &mut HashMap<u64, Vec<Arc<Slot>>>, keep: &Arc<Slot>) {
        let mut n: usize = map.values().map(Vec::len).sum();
        while n > self.capacity {
            let victim = map
                .iter()
                .flat_map(|(h, v)| v.iter().map(move |s| (*h, s)))
                .filter(|(_, s)| !Arc::ptr_eq(s, keep))
                .min_by_key(|(_, s)| s.last_used.load(Relaxed))
                .map(|(h, s)| (h, s.clone()));
            let Some((h, s)) = victim else { break };
            if let Some(v) = map.get_mut(&h) {
                v.retain(|x| !Arc::ptr_eq(x, &s));
                if v.is_empty() {
                    map.remove(&h);
                }
            }
            n -= 1;
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
            cached: self.lock().values().map(Vec::len).sum::<usize>() as u64,
        }
    }
}
