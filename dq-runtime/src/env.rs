//! The environment variables the library reads: here only, each once, at the
//! first use of what it sets.
//!
//! - `DQ_ISA=avx512|avx2|portable`: the highest ISA the unpinned generated
//!   kernels use ([`crate::arch::selected`]); a higher one than the CPU has, or an
//!   unknown value, changes nothing. For testing every ISA path on one machine.
//! - `DQ_STORE=plain|prefetch|nontemporal`: how outputs larger than half the
//!   last-level cache are stored ([`crate::policy::large_store`]), instead of the
//!   strategy measured on this machine; it also turns off the per-plan store races.
//!   An unknown value counts as unset.
//! - `DQ_STREAM=1|on`: the older spelling of `DQ_STORE=nontemporal` (ignored
//!   where `DQ_STORE` is set).
//!
//! Test suites read their own switches (`DQ_REQUIRE_ALL_PATHS` and others) in
//! their own code; the JIT's developer switches are read by `dq-jit`.

use std::sync::OnceLock;

use crate::arch::{self, Isa};
use crate::policy::StoreStrategy;

/// The values read, once.
struct Vars {
    isa: Option<Isa>,
    store: Option<StoreStrategy>,
}

fn vars() -> &'static Vars {
    static VARS: OnceLock<Vars> = OnceLock::new();
    VARS.get_or_init(|| {
        let var = |name| std::env::var(name).ok();
        Vars {
            isa: var("DQ_ISA").as_deref().and_then(arch::parse),
            store: parse_store(var("DQ_STORE").as_deref(), var("DQ_STREAM").as_deref()),
        }
    })
}

/// The ISA `DQ_ISA` names, if any.
pub fn isa() -> Option<Isa> {
    vars().isa
}

/// The store strategy for large outputs that `DQ_STORE` (else `DQ_STREAM`) names,
/// if any.
pub fn store() -> Option<StoreStrategy> {
    vars().store
}

/// [`store`] from the values `DQ_STORE` and `DQ_STREAM` have (`None`: unset).
fn parse_store(store: Option<&str>, stream: Option<&str>) -> Option<StoreStrategy> {
    if let Some(v) = store {
        return StoreStrategy::parse(v);
    }
    matches!(stream, Some("1" | "on")).then_some(StoreStrategy::NonTemporal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use StoreStrategy::{NonTemporal, Plain};

    #[test]
    fn store_names_its_strategy_and_stream_is_the_older_spelling() {
        assert_eq!(parse_store(Some("plain"), Some("1")), Some(Plain));
        assert_eq!(parse_store(Some("stream"), Some("1")), None);
        assert_eq!(parse_store(None, Some("1")), Some(NonTemporal));
        assert_eq!(parse_store(None, Some("on")), Some(NonTemporal));
        assert_eq!(parse_store(None, Some("0")), None);
        assert_eq!(parse_store(None, None), None);
    }
}
