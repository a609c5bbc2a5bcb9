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

/// The backends a build offers; `None` where one has not been plugged in.
#[derive(Clone, Copy, Default)]
pub struct Backends {
    /// Compile-time generated kernels.
    pub generated: Option<&'static dyn Kernel>,
    /// The JIT.
    pub jit: Option<&'static dyn Kernel>,
    /// Whether the JIT pays for a plan under `auto` (its kernel is cached, or the
    /// work earns back a compile); `None` means it never does.
    pub jit_pays: Option<fn(&Plan) -> bool>,
}

static REFERENCE: Reference = Reference {
    formula: &crate::formula::STANDARD,
};

impl Backends {
    /// The kernel to run `plan` with for `choice`.
    ///
    /// `auto` takes the JIT when it pays (`jit_pays`: a cached kernel, or work large
    /// enough to earn back the compile), else the generated kernels when they
    /// support the plan, else the JIT, else the reference. An explicit choice never
    /// falls back.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when the chosen backend is absent or refuses the plan.
    pub fn select(&self, choice: Backend, plan: &Plan) -> Result<&'static dyn Kernel> {
        let absent = |b: Backend| Error::BackendUnavailable {
            backend: b.name(),
            reason: "not built into this version of dq".into(),
        };
        let pick = |k: Option<&'static dyn Kernel>, b: Backend| -> Result<&'static dyn Kernel> {
            let k = k.ok_or_else(|| absent(b))?;
            k.supports(plan)?;
            Ok(k)
        };
        match choice {
            Backend::Reference => Ok(&REFERENCE),
            Backend::Generated => pick(self.generated, choice),
            Backend::Jit => pick(self.jit, choice),
            Backend::Auto => {
                let pays = self.jit_pays.is_some_and(|f| f(plan));
                let jit = || pick(self.jit, Backend::Jit);
                let first = if pays { jit() } else { Err(absent(choice)) };
                Ok(first
                    .or_else(|_| pick(self.generated, Backend::Generated))
                    .or_else(|_| jit())
                    .unwrap_or(&REFERENCE))
            }
        }
    }
}
