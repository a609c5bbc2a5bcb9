//! The environment variables the library reads: here only, each once, at the
//! first use of what it sets.
//!
//! - `DQ_ISA=avx512|avx2|portable`: the highest ISA the unpinned generated
//!   kernels use ([`crate::arch::selected`]); a higher one than the CPU has, or an
//!   unknown value, changes nothing. For testing every ISA path on one machine.
//! - `DQ_STORE=plain|prefetch|nontemporal`: how every output is stored
//!   ([`crate::policy::store_for`]), instead of the strategy measured on this
//!   machine for large ones; it also turns off the per-plan store races. An
//!   unknown value counts as unset.
//! - `DQ_STREAM=1|on`: the older spelling of `DQ_STORE=nontemporal` (ignored
//!   where `DQ_STORE` is set).
//! - `DQ_TUNING=<path>|off`: the file races' choices are remembered in between
//!   runs, or none ([`crate::races::memory`]).
//!
//! Test suites read their own switches (`DQ_REQUIRE_ALL_PATHS` and others) in
//! their own code; the JIT's developer switches are read by `dq-jit`.
//!
//! Values are handed out as read; the modules they configure (`arch`, `policy`)
//! parse them, so this one, at the bottom of the crate's layers, uses none.

use std::sync::OnceLock;

/// The values read, once.
struct Vars {
    isa: Option<String>,
    store: Option<String>,
    tuning: Option<String>,
}

fn vars() -> &'static Vars {
    static VARS: OnceLock<Vars> = OnceLock::new();
    VARS.get_or_init(|| {
        let var = |name| std::env::var(name).ok();
        Vars {
            isa: var("DQ_ISA"),
            store: store_name(var("DQ_STORE"), var("DQ_STREAM").as_deref()),
            tuning: var("DQ_TUNING").filter(|v| !v.is_empty()),
        }
    })
}

/// The ISA name `DQ_ISA` gives, if set (parsed by [`crate::arch::parse`]).
pub fn isa() -> Option<&'static str> {
    vars().isa.as_deref()
}

/// The store strategy name for every output that `DQ_STORE` gives, else
/// `nontemporal` where `DQ_STREAM` asks for it; `None` when neither is set
/// (parsed by [`StoreStrategy::parse`](crate::policy::StoreStrategy::parse)).
pub fn store() -> Option<&'static str> {
    vars().store.as_deref()
}

/// Where races' choices are remembered, as `DQ_TUNING` gives it, if set
/// (`off`: nowhere).
pub fn tuning() -> Option<&'static str> {
    vars().tuning.as_deref()
}

/// [`store`] from the values `DQ_STORE` and `DQ_STREAM` have (`None`: unset).
fn store_name(store: Option<String>, stream: Option<&str>) -> Option<String> {
    if store.is_some() {
        return store;
    }
    matches!(stream, Some("1" | "on")).then(|| "nontemporal".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_names_its_strategy_and_stream_is_the_older_spelling() {
        let store = |s: Option<&str>, stream| store_name(s.map(String::from), stream);
        assert_eq!(store(Some("plain"), Some("1")).as_deref(), Some("plain"));
        // An unknown name is kept (it parses as unset), and still wins over DQ_STREAM.
        assert_eq!(store(Some("stream"), Some("1")).as_deref(), Some("stream"));
        assert_eq!(store(None, Some("1")).as_deref(), Some("nontemporal"));
        assert_eq!(store(None, Some("on")).as_deref(), Some("nontemporal"));
        assert_eq!(store(None, Some("0")), None);
        assert_eq!(store(None, None), None);
    }
}
