//! The module layering of dq-runtime: the modules' references to each other
//! (`crate::module` paths, test code left out) form no cycle, and each module
//! uses only modules of its own layer or lower ones, as the crate doc lists them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// From module -> to module -> the files (relative to `src`) that refer to it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn lib_rs() -> String {
    fs::read_to_string(src_dir().join("lib.rs")).expect("read src/lib.rs")
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = graph();
    if let Some(cycle) = find_cycle(&graph) {
        let mut msg = format!(
            "dq-runtime's modules form a cycle: {}\n",
            cycle.join(" -> ")
        );
        for pair in cycle.windows(2) {
            let files = &graph[&pair[0]][&pair[1]];
            msg += &format!("  {} -> {}: {:?}\n", pair[0], pair[1], files);
        }
        panic!("{msg}");
    }
}

#[test]
fn modules_use_only_their_own_layer_or_lower_ones() {
    let modules = modules(&lib_rs());
    let layers = layers(&lib_rs(), &modules);
    let mut layer_of = BTreeMap::new();
    for (i, layer) in layers.iter().enumerate() {
        for m in layer {
            let before = layer_of.insert(m.as_str(), i);
            assert_eq!(before, None, "`{m}` is in two layers of lib.rs's crate doc");
        }
    }
    let unlisted: Vec<_> = (modules.iter())
        .filter(|m| !layer_of.contains_key(m.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "modules in no layer of lib.rs's crate doc: {unlisted:?}"
    );
    let mut upward = Vec::new();
    for (from, tos) in &graph() {
        for (to, files) in tos {
            if layer_of[from.as_str()] < layer_of[to.as_str()] {
                upward.push(format!("{from} -> {to} ({files:?})"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "references to a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_scanner_finds_paths_and_skips_comments_strings_and_tests() {
    let code = r##"
        use crate::{a::{self, X}, b};
        use super::super::c; // crate::commented
        const S: &str = "crate::quoted";
        const R: &str = r#"crate::raw"#;
        fn f<'x>(_: &'x u8) -> char { let _ = crate::DType::S8; '{' }
        #[cfg(test)]
        mod tests { use crate::e; }
        fn g() { $crate::h::go() }
    "##;
    let reexports = BTreeMap::from([("DType".to_string(), "dtype".to_string())]);
    let found = references(code, 2, &reexports);
    let want = ["a", "b", "c", "dtype", "h"].map(String::from);
    assert_eq!(found, BTreeSet::from(want));
}

#[test]
fn a_cycle_is_found_and_spelled_out() {
    let edge = |a: &str, b: &str| (a.to_string(), BTreeMap::from([(b.to_string(), [].into())]));
    let acyclic = Graph::from([edge("a", "b"), edge("b", "c")]);
    assert_eq!(find_cycle(&acyclic), None);
    let cyclic = Graph::from([edge("a", "b"), edge("b", "c"), edge("c", "a")]);
    assert_eq!(
        find_cycle(&cyclic),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
}

/// The modules `lib.rs` declares.
fn modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(String::from)
        .collect()
}

/// The layers of the crate doc, bottom first: each item `//! N. ...` (with its
/// indented continuation lines) lists its modules in backticks.
fn layers(lib: &str, modules: &BTreeSet<String>) -> Vec<BTreeSet<String>> {
    let mut layers: Vec<BTreeSet<String>> = Vec::new();
    let mut open = false;
    for line in lib.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            open = false;
            continue;
        };
        let text = text.strip_prefix(' ').unwrap_or(text);
        let numbered = text
            .split_once(". ")
            .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if numbered {
            layers.push(BTreeSet::new());
            open = true;
        } else if !(open && text.starts_with(' ')) {
            open = false;
        }
        if let (true, Some(layer)) = (open, layers.last_mut()) {
            let names = text.split('`').skip(1).step_by(2);
            layer.extend(names.filter(|w| modules.contains(*w)).map(String::from));
        }
    }
    assert!(!layers.is_empty(), "lib.rs's crate doc lists no layers");
    layers
}

/// Names re-exported at the crate root, and their modules (`pub use m::{A, B};`).
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for l in lib.lines() {
        let Some(rest) = l.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        let names = names.trim_end_matches(';').trim_matches(['{', '}']);
        for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            out.insert(n.to_string(), module.to_string());
        }
    }
    out
}

/// The module graph of `src`, from every `.rs` file but `lib.rs` and `tests.rs`.
fn graph() -> Graph {
    let lib = lib_rs();
    let (modules, reexports) = (modules(&lib), reexports(&lib));
    let mut graph = Graph::new();
    for m in &modules {
        graph.entry(m.clone()).or_default();
    }
    let src = src_dir();
    for path in rust_files(&src) {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "lib.rs" || rel.ends_with("tests.rs") {
            continue;
        }
        let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        let from = parts[0].to_string();
        // `a/mod.rs` is module `a`, one level up from `a/b.rs`.
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod"));
        let code = fs::read_to_string(&path).unwrap();
        for to in references(&code, depth, &reexports) {
            if to != from && modules.contains(&to) {
                let files = graph.entry(from.clone()).or_default().entry(to);
                files.or_default().insert(rel.clone());
            }
        }
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The top-level names that `code`, a file `depth` modules below the crate root,
/// refers to through `crate::` (or `$crate::`) and `super::` paths, root
/// re-exports mapped to their modules; comments, literals and `#[cfg(test)]`
/// items left out.
fn references(code: &str, depth: usize, reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = drop_test_items(&strip_comments_and_literals(code));
    let b = code.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !is_ident(b[i - 1]);
        if word_start && code[i..].starts_with("crate::") {
            i += "crate::".len();
            i = path_heads(&code, i, &mut names);
        } else if word_start && code[i..].starts_with("super::") {
            let mut ups = 0;
            while code[i..].starts_with("super::") {
                ups += 1;
                i += "super::".len();
            }
            let mut heads = Vec::new();
            i = path_heads(&code, i, &mut heads);
            if ups >= depth {
                names.extend(heads);
            }
        } else {
            i += 1;
        }
    }
    (names.into_iter())
        .map(|n| reexports.get(&n).cloned().unwrap_or(n))
        .collect()
}

/// The first names of the path starting at `i` (one, or each of a `{...}`
/// group's), pushed on `out`; returns where scanning goes on.
fn path_heads(code: &str, mut i: usize, out: &mut Vec<String>) -> usize {
    let b = code.as_bytes();
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) != Some(&b'{') {
        let end = (i..b.len()).find(|&j| !is_ident(b[j])).unwrap_or(b.len());
        out.push(code[i..end].to_string());
        return end;
    }
    let (mut level, mut expect) = (0, true);
    while i < b.len() {
        match b[i] {
            b'{' => level += 1,
            b'}' => {
                level -= 1;
                if level == 0 {
                    return i + 1;
                }
            }
            b',' if level == 1 => expect = true,
            c if level == 1 && expect && is_ident(c) => {
                let end = (i..b.len()).find(|&j| !is_ident(b[j])).unwrap_or(b.len());
                out.push(code[i..end].to_string());
                expect = false;
                i = end;
                continue;
            }
            c if !c.is_ascii_whitespace() => expect = false,
            _ => {}
        }
        i += 1;
    }
    i
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `code` with comments and string and char literals blanked (lifetimes kept).
fn strip_comments_and_literals(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        let prev_ident = i > 0 && is_ident(b[i - 1]);
        let end = if rest.starts_with("//") {
            rest.find('\n').map_or(b.len(), |n| i + n)
        } else if rest.starts_with("/*") {
            block_comment_end(b, i)
        } else if b[i] == b'"' {
            string_end(b, i + 1)
        } else if b[i] == b'r' && !prev_ident && raw_string_start(rest).is_some() {
            let hashes = raw_string_start(rest).unwrap_or(0);
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            code[body..]
                .find(&close)
                .map_or(b.len(), |n| body + n + close.len())
        } else if b[i] == b'\'' {
            char_end(b, i).unwrap_or(i + 1)
        } else {
            i + 1
        };
        if end == i + 1 {
            out.push(b[i]);
        } else {
            // Keep line breaks so nothing else moves between lines.
            out.extend(b[i..end].iter().map(|&c| if c == b'\n' { c } else { b' ' }));
        }
        i = end;
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 (ASCII replaces whole literals)")
}

fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut level = 0;
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            level += 1;
            i += 2;
        } else if b[i] == b'*' && b[i + 1] == b'/' {
            level -= 1;
            i += 2;
            if level == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end of a string whose body starts at `i` (escapes honoured).
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The number of `#` of a raw string starting here (`r"`, `r#"`, ...).
fn raw_string_start(rest: &str) -> Option<usize> {
    let after_r = rest.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    after_r[hashes..].starts_with('"').then_some(hashes)
}

/// The end of a char literal starting at `i`; `None` for a lifetime.
fn char_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i + 1) == Some(&b'\\') {
        return (i + 2..b.len()).find(|&j| b[j] == b'\'').map(|j| j + 1);
    }
    // One (possibly multi-byte) character, then the closing quote.
    let utf8 = |n: usize| {
        b.get(i + 1..i + 1 + n)
            .is_some_and(|c| std::str::from_utf8(c).is_ok())
    };
    let len = (1..=4).find(|&n| utf8(n))?;
    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 2 + len)
}

/// `code` without the items marked `#[cfg(test)]` (the attribute and the item:
/// up to its `;`, or through its `{...}` block).
fn drop_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let b = code.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while let Some(at) = code[i..].find(ATTR).map(|n| i + n) {
        out += &code[i..at];
        let mut j = at + ATTR.len();
        let mut nest = 0i32;
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest -= 1,
                b';' if nest == 0 => {
                    j += 1;
                    break;
                }
                b'{' if nest == 0 => {
                    j = block_end(b, j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        i = j.min(b.len());
    }
    out + &code[i..]
}

/// The index after the `}` closing the `{` at `i`.
fn block_end(b: &[u8], mut i: usize) -> usize {
    let mut level = 0;
    while i < b.len() {
        match b[i] {
            b'{' => level += 1,
            b'}' => {
                level -= 1;
                if level == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// A cycle of `graph` as the modules along it, the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'g>(
        graph: &'g Graph,
        m: &'g str,
        marks: &mut BTreeMap<&'g str, Mark>,
        stack: &mut Vec<&'g str>,
    ) -> Option<Vec<String>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let at = stack.iter().position(|&s| s == m)?;
                let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(m, Mark::Open);
        stack.push(m);
        for to in graph.get(m).into_iter().flat_map(|t| t.keys()) {
            if let Some(cycle) = visit(graph, to, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(m, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut marks, &mut Vec::new()))
}
