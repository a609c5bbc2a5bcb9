//! The kernel cache of one formula: keyed by the plan's [`Lowering`], one compile
//! per key even when threads race, bounded with least-recently-used eviction,
//! reference-counted entries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use dq_runtime::{FormulaFacts, FormulaIr, KernelStats, Lowering, Plan};

use crate::compile::{Compiled, compile};
use crate::error::JitError;
use crate::spec::{Host, Spec};

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
    kernel: OnceLock<Result<Kernel, JitError>>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct Counters {
    compiled: AtomicU64,
    reused: AtomicU64,
    compile_ns: AtomicU64,
    code_bytes: AtomicU64,
}

/// A bounded, thread-safe map from lowerings to kernels compiled for one formula.
pub struct Cache {
    formula: &'static FormulaIr,
    facts: FormulaFacts,
    map: Mutex<HashMap<Lowering, Arc<Slot>>>,
    capacity: usize,
    tick: AtomicU64,
    counters: Arc<Counters>,
    verify: bool,
    /// The host instructions every kernel of this cache may call.
    host: Host,
}

impl Cache {
    /// An empty cache for `formula` holding at most `capacity` kernels (at least 1).
    pub fn new(formula: &'static FormulaIr, capacity: usize, verify: bool, host: Host) -> Cache {
        Cache {
            formula,
            facts: formula.facts(),
            map: Mutex::default(),
            capacity: capacity.max(1),
            tick: AtomicU64::new(0),
            counters: Arc::default(),
            verify,
            host,
        }
    }

    /// The host instructions its kernels may call.
    pub(crate) fn host(&self) -> Host {
        self.host
    }

    /// Most kernels kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The spec of `plan` (not compiled).
    ///
    /// # Errors
    /// As [`Spec::new`].
    pub fn spec(&self, plan: &Plan) -> Result<Spec, JitError> {
        Spec::new(self.formula, self.facts, plan.lowering(), self.host)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Lowering, Arc<Slot>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when the kernel for `plan` is compiled and cached.
    pub fn contains(&self, plan: &Plan) -> bool {
        self.lock()
            .get(plan.lowering())
            .is_some_and(|s| matches!(s.kernel.get(), Some(Ok(_))))
    }

    /// The kernel for `plan`, compiling it on a miss.
    ///
    /// # Errors
    /// Why `plan` has no spec, or why its compile failed (cached too, so it is not
    /// retried).
    pub fn get(&self, plan: &Plan) -> Result<Kernel, JitError> {
        let now = self.tick.fetch_add(1, Relaxed);
        let slot = {
            let mut map = self.lock();
            match map.get(plan.lowering()) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(Slot {
                        spec: self.spec(plan)?,
                        kernel: OnceLock::new(),
                        last_used: AtomicU64::new(now),
                    });
                    map.insert(plan.lowering().clone(), s.clone());
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

    fn compile(&self, spec: &Spec) -> Result<Kernel, JitError> {
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
    fn evict(&self, map: &mut HashMap<Lowering, Arc<Slot>>, keep: &Arc<Slot>) {
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
