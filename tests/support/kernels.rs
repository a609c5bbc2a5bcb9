//! The kernels under test: the reference, every backend this build offers and the
//! generated kernels pinned to each ISA the CPU has.

use std::sync::OnceLock;

use dq::arch::Isa;
use dq::kernel::{GeneratedKernel, Kernel, Reference};

/// One kernel under test, with a name for messages.
#[derive(Clone, Copy)]
pub struct Variant {
    /// `reference`, `generated`, `jit`, or `generated/<isa>` once ISAs can be pinned.
    pub name: &'static str,
    /// The kernel.
    pub kernel: &'static dyn Kernel,
}

static REFERENCE: Reference = Reference {
    formula: &dq::kernel::STANDARD,
};

/// The scalar reference kernel.
pub fn reference() -> &'static dyn Kernel {
    &REFERENCE
}

/// Every non-reference kernel this build offers (`dq::backends()`), plus the
/// generated kernels pinned to each ISA this CPU has; absent ones are noted loudly.
pub fn backend_variants() -> Vec<Variant> {
    static VARIANTS: OnceLock<Vec<Variant>> = OnceLock::new();
    VARIANTS
        .get_or_init(|| {
            let b = dq::backends();
            let mut v = Vec::new();
            // The JIT is a cargo feature (default on); a build without it has none.
            let jit = cfg!(feature = "jit").then_some(dq::Backend::Jit);
            for backend in [Some(dq::Backend::Generated), jit].into_iter().flatten() {
                let name = backend.name();
                match b.get(backend) {
                    Some(kernel) => v.push(Variant { name, kernel }),
                    None => note_once(name),
                }
            }
            v.extend(generated_isa_variants());
            v
        })
        .clone()
}

/// The generated backend pinned to every ISA (`generated/avx512`, ...).
fn generated_isa_variants() -> Vec<Variant> {
    pinned(&dq::generated::standard)
        .into_iter()
        .map(|(isa, k)| Variant {
            name: format!("generated/{}", isa.name()).leak(),
            kernel: Box::leak(Box::new(k)),
        })
        .collect()
}

/// `k` pinned to every ISA this CPU has. One the CPU has (by
/// [`cpu_has`](super::paths::cpu_has)) but the library will not pin is
/// [`path_unavailable`](super::path_unavailable); one the CPU lacks cannot run
/// here, and says so on stderr once.
pub fn pinned(k: &GeneratedKernel) -> Vec<(Isa, GeneratedKernel)> {
    Isa::ALL
        .into_iter()
        .filter_map(|isa| {
            let has = super::paths::cpu_has(isa);
            match k.with_isa(isa) {
                Some(p) if has => Some((isa, p)),
                Some(_) => panic!("{} pinned on a CPU without it", isa.name()),
                None if has => {
                    note_once(&format!("generated/{}", isa.name()));
                    None
                }
                None => {
                    not_on_this_cpu(isa);
                    None
                }
            }
        })
        .collect()
}

/// An ISA this CPU lacks: no test can run it here (not a skip of a path the
/// machine has), so it is only reported, once, on uncaptured stderr.
pub fn not_on_this_cpu(isa: Isa) {
    use std::io::Write;
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<Isa>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&isa) {
        seen.push(isa);
        let _ = writeln!(
            std::io::stderr(),
            "NOT ON THIS CPU: generated/{} (its kernels cannot run here)",
            isa.name()
        );
    }
}

/// The reference followed by every backend variant.
pub fn all_variants() -> Vec<Variant> {
    let mut v = vec![Variant {
        name: "reference",
        kernel: reference(),
    }];
    v.extend(backend_variants());
    v
}

fn note_once(name: &str) {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|s| s == name) {
        seen.push(name.to_string());
        super::path_unavailable(&format!(
            "kernel `{name}` (not in this build or on this CPU)"
        ));
    }
}
