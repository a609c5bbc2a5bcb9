//! What `auto` kept for each kind of tensor in this run, and where choices are
//! remembered between runs ([`dq::races::memory`]).

use dq::formats::race::{self, Pick};

/// Asks for races' choices to be remembered in the user's cache directory, unless
/// `DQ_TUNING` names another file or `off`.
pub fn remember() {
    if let Some(path) = dq::races::memory::default_path() {
        dq::races::memory::remember_by_default(path);
    }
}

/// `auto kept: KIND: BACKEND, ...` for every kind whose race is over (raced in
/// this run or remembered), and the file they are remembered in; `None` when no
/// kind was raced.
pub fn auto_line() -> Option<String> {
    let mut kept = race::settled();
    if kept.is_empty() {
        return None;
    }
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    let kept: Vec<String> = (kept.iter())
        .map(|(kind, pick)| {
            let name = match pick {
                Pick::Generated => "generated",
                Pick::Jit => "jit",
            };
            format!("{kind}: {name}")
        })
        .collect();
    let file = match dq::races::memory::file() {
        Some(f) => format!("remembered in {}", f.display()),
        None => "not remembered (DQ_TUNING=off)".to_owned(),
    };
    Some(format!("auto kept: {} ({file})", kept.join(", ")))
}
