//! Choosing a backend: `reference`, `generated`, `jit` or `auto`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
pub use crate::job::Backend;
use crate::job::Kernel;
use crate::plan::Plan;
use crate::reference::Reference;

mod race;

pub use race::Race;

/// The backends a build offers, in the order `auto` prefers them; the scalar
/// reference is always there besides them.
#[derive(Clone, Default)]
pub struct Backends {
    kernels: Vec<&'static dyn Kernel>,
    /// `auto`'s races, one per plan that more than one backend pays for (shared by
    /// clones).
    races: Arc<Mutex<HashMap<Plan, &'static Race>>>,
}

/// Most plans `auto` races backends for; later plans take the first that pays.
const MAX_RACES: usize = 4096;

static REFERENCE: Reference = Reference {
    formula: &crate::formula::STANDARD,
};

impl Backends {
    /// The backends `kernels`, in order of preference (the first of a
    /// [`Backend`] is the one an explicit choice of it selects).
    pub fn new(kernels: Vec<&'static dyn Kernel>) -> Backends {
        Backends {
            kernels,
            races: Default::default(),
        }
    }

    /// The registered kernels, in order of preference (the reference is not listed).
    pub fn kernels(&self) -> &[&'static dyn Kernel] {
        &self.kernels
    }

    /// The kernel an explicit `backend` selects, whatever the plan: the first
    /// registered one of it (the built-in reference for [`Backend::Reference`]);
    /// `None` when there is none, and always for [`Backend::Auto`].
    pub fn get(&self, backend: Backend) -> Option<&'static dyn Kernel> {
        match backend {
            Backend::Auto => None,
            Backend::Reference => Some(self.find(backend).unwrap_or(&REFERENCE)),
            b => self.find(b),
        }
    }

    fn find(&self, backend: Backend) -> Option<&'static dyn Kernel> {
        self.kernels
            .iter()
            .copied()
            .find(|k| k.backend() == backend)
    }

    /// The kernel to run `plan` with for `choice`.
    ///
    /// `auto` chooses by speed among the kernels that [pay](Kernel::pays) for the
    /// plan and support it (with the facade's list: the JIT when its kernel is
    /// cached or the work earns back the compile, and the generated kernels): when
    /// more than one does, a [`Race`] for the plan runs the real calls on each in
    /// turn, timed, and once each has run [`Race::ROUNDS`] times the faster is the
    /// plan's kernel from then on. When none pays, the first that supports the plan
    /// (the JIT), else the reference. An explicit choice never falls back.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when the chosen backend is absent or refuses the plan.
    pub fn select(&self, choice: Backend, plan: &Plan) -> Result<&'static dyn Kernel> {
        if choice == Backend::Auto {
            return Ok(self.auto(plan));
        }
        let kernel = self.get(choice).ok_or_else(|| Error::BackendUnavailable {
            backend: choice.name(),
            reason: "not built into this version of dq".into(),
        })?;
        kernel.supports(plan)?;
        Ok(kernel)
    }

    /// What `auto` has settled on for `plan`: `None` while its kernels race (or
    /// before it was selected).
    pub fn auto_choice(&self, plan: &Plan) -> Option<&'static dyn Kernel> {
        self.race(plan).and_then(Race::winner)
    }

    /// `auto`'s race for `plan`, when one was started.
    pub fn race(&self, plan: &Plan) -> Option<&'static Race> {
        let races = self.races.lock().unwrap_or_else(|e| e.into_inner());
        races.get(plan).copied()
    }

    fn auto(&self, plan: &Plan) -> &'static dyn Kernel {
        let (paying, rest): (Vec<_>, Vec<_>) =
            self.kernels.iter().copied().partition(|k| k.pays(plan));
        let supported = |k: &&'static dyn Kernel| k.supports(plan).is_ok();
        let paying: Vec<_> = paying.into_iter().filter(supported).collect();
        if paying.len() < 2 {
            let first = paying.into_iter().chain(rest).find(supported);
            return first.unwrap_or(&REFERENCE);
        }
        let mut races = self.races.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(race) = races.get(plan) {
            return race.winner().unwrap_or(*race);
        }
        if races.len() >= MAX_RACES {
            return paying[0];
        }
        let first = paying[0];
        let Ok(race) = Race::for_plan(paying, plan) else {
            return first;
        };
        // Leaked: one small race per plan, at most MAX_RACES.
        let race: &'static Race = Box::leak(Box::new(race));
        races.insert(plan.clone(), race);
        race
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicDequantize, TensorDesc};

    /// A kernel that pays for every plan (the reference's bits).
    struct Paying(Backend);

    impl Kernel for Paying {
        fn backend(&self) -> Backend {
            self.0
        }
        fn supports(&self, _plan: &Plan) -> Result<()> {
            Ok(())
        }
        unsafe fn run(&self, job: &crate::Job<'_>, range: core::ops::Range<usize>) {
            // SAFETY: the caller's contract.
            unsafe { REFERENCE.run(job, range) }
        }
    }

    static A: Paying = Paying(Backend::Jit);
    static B: Paying = Paying(Backend::Generated);

    fn plan(n: usize) -> Plan {
        let src = TensorDesc::new(crate::DType::S8, &[n]);
        let scales = TensorDesc::new(crate::DType::F32, &[1]);
        let dst = TensorDesc::new(crate::DType::F32, &[n]);
        let op = DynamicDequantize::per_tensor().into();
        Plan::new(&op, &src, Some(&scales), None, &dst).unwrap()
    }

    #[test]
    fn auto_remembers_the_faster_measured_kernel_per_plan() {
        let backends = Backends::new(vec![&A, &B]);
        let (small, large) = (plan(10), plan(1000));
        // Both pay: a race for each plan, the same one on every select.
        let race = backends.select(Backend::Auto, &small).unwrap();
        assert_eq!(race.backend(), Backend::Auto);
        let again = backends.select(Backend::Auto, &small).unwrap();
        assert!(core::ptr::addr_eq(race, again));
        assert!(backends.auto_choice(&small).is_none());
        backends.select(Backend::Auto, &large).unwrap();
        // Injected times: B is faster on the small plan, A on the large one.
        let races = backends.races.lock().unwrap().clone();
        for _ in 0..Race::ROUNDS {
            races[&small].record(0, 0.3);
            races[&small].record(1, 0.2);
            races[&large].record(0, 0.1);
            races[&large].record(1, 0.15);
        }
        let chosen = backends.select(Backend::Auto, &small).unwrap();
        assert!(core::ptr::addr_eq(chosen, &B));
        assert!(core::ptr::addr_eq(
            backends.auto_choice(&small).unwrap(),
            &B
        ));
        let chosen = backends.select(Backend::Auto, &large).unwrap();
        assert!(core::ptr::addr_eq(chosen, &A));
    }

    #[test]
    fn a_race_settles_after_its_rounds_of_real_calls() {
        let backends = Backends::new(vec![&A, &B]);
        let q: Vec<i8> = (0..100).map(|i| i as i8).collect();
        let src = crate::Tensor::from_slice(&q, &[100]);
        let scales = crate::Tensor::from_slice(&[0.5f32], &[1]);
        let mut out = vec![0.0f32; 100];
        let mut dst = crate::TensorMut::from_slice(&mut out, &[100]);
        let plan = plan(100);
        let race = backends.select(Backend::Auto, &plan).unwrap();
        let mut job = plan.bind(&src, Some(&scales), None, &mut dst).unwrap();
        for _ in 0..2 * Race::ROUNDS - 1 {
            job.run(race).unwrap();
            assert!(backends.auto_choice(&plan).is_none());
        }
        job.run(race).unwrap();
        assert!(backends.auto_choice(&plan).is_some());
        assert_eq!(out[99], 49.5);
    }

    #[test]
    fn one_paying_kernel_is_taken_without_a_race() {
        let backends = Backends::new(vec![&A]);
        let k = backends.select(Backend::Auto, &plan(10)).unwrap();
        assert!(core::ptr::addr_eq(k, &A));
        let none = Backends::new(Vec::new());
        let k = none.select(Backend::Auto, &plan(10)).unwrap();
        assert!(core::ptr::addr_eq(k, &REFERENCE));
    }
}
