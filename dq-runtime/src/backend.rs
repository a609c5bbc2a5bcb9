//! Choosing a backend: `reference`, `generated`, `jit` or `auto`.

use core::fmt;
use core::str::FromStr;

use crate::error::{Error, Result};
use crate::exec::Kernel;
use crate::plan::Plan;
use crate::reference::Reference;

/// A backend choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The scalar reference (SPEC section 5, one element at a time).
    Reference,
    /// Kernels generated at compile time by `#[dequant_kernel]`.
    Generated,
    /// Kernels compiled at run time by Cranelift, specialised to the plan.
    Jit,
    /// The fastest available backend for the plan.
    #[default]
    Auto,
}

impl Backend {
    /// Every choice, in CLI order.
    pub const ALL: [Backend; 4] = [
        Backend::Reference,
        Backend::Generated,
        Backend::Jit,
        Backend::Auto,
    ];

    /// The CLI spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Reference => "reference",
            Backend::Generated => "generated",
            Backend::Jit => "jit",
            Backend::Auto => "auto",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> core::result::Result<Self, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                format!("unknown backend `{s}` (expected reference, generated, jit or auto)")
            })
    }
}

/// The backends a build offers, in the order `auto` prefers them; the scalar
/// reference is always there besides them.
#[derive(Clone, Default)]
pub struct Backends {
    kernels: Vec<&'static dyn Kernel>,
}

static REFERENCE: Reference = Reference {
    formula: &crate::formula::STANDARD,
};

impl Backends {
    /// The backends `kernels`, in order of preference (the first of a
    /// [`Backend`] is the one an explicit choice of it selects).
    pub fn new(kernels: Vec<&'static dyn Kernel>) -> Backends {
        Backends { kernels }
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
    /// `auto` takes the first kernel that [pays](Kernel::pays) for the plan and
    /// supports it (with the facade's list: the JIT when its kernel is cached or the
    /// work earns back the compile, else the generated kernels), else the first that
    /// supports it (the JIT), else the reference. An explicit choice never falls back.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when the chosen backend is absent or refuses the plan.
    pub fn select(&self, choice: Backend, plan: &Plan) -> Result<&'static dyn Kernel> {
        if choice == Backend::Auto {
            let (paying, rest): (Vec<_>, Vec<_>) =
                self.kernels.iter().copied().partition(|k| k.pays(plan));
            let first = paying
                .into_iter()
                .chain(rest)
                .find(|k| k.supports(plan).is_ok());
            return Ok(first.unwrap_or(&REFERENCE));
        }
        let kernel = self.get(choice).ok_or_else(|| Error::BackendUnavailable {
            backend: choice.name(),
            reason: "not built into this version of dq".into(),
        })?;
        kernel.supports(plan)?;
        Ok(kernel)
    }
}
