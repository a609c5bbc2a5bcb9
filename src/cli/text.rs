//! Untrusted text on the terminal: names, keys and values read from a file, and error
//! lines that quote them. One rule ([`needs_escape`]) decides which characters are
//! escaped, in text ([`escape`]) and in JSON ([`escape_json`]), so that a file cannot
//! send escape sequences, move the cursor or reorder what is shown; and columns are
//! padded by hand ([`pad`]), since the formatter's width is limited to `u16`.

use std::borrow::Cow;
use std::fmt::Write;

/// Widest column a table pads to; a longer cell runs past it unpadded.
pub const MAX_COLUMN: usize = 80;

/// Control characters (C0, DEL, C1) and the invisible characters that reorder or hide
/// text (bidirectional controls, zero-width marks, BOM).
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// `s` with each character of [`needs_escape`] written as `\u{XX}` (any length, never
/// a panic; borrowed when nothing needs escaping).
pub fn escape(s: &str) -> Cow<'_, str> {
    replace(s, needs_escape, |out, c| {
        write!(out, "\\u{{{:x}}}", c as u32)
    })
}

/// JSON text from serde_json with each character of [`needs_escape`] above C0 written
/// as `\uXXXX`: the same JSON value (those characters only occur inside strings,
/// where `\uXXXX` means the character), safe on a terminal. serde_json escapes C0
/// in strings itself (a raw C0 character is layout, e.g. a newline), but not DEL, C1
/// or the rest.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    // Every such character is in the basic plane: one `\uXXXX`.
    let escaped = |c: char| needs_escape(c) && c >= ' ';
    replace(json, escaped, |out, c| write!(out, "\\u{:04x}", c as u32))
}

/// `s` with each character of `pick` written by `put` (borrowed when none is).
fn replace(
    s: &str,
    pick: impl Fn(char) -> bool,
    put: impl Fn(&mut String, char) -> std::fmt::Result,
) -> Cow<'_, str> {
    if !s.chars().any(&pick) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if pick(c) {
            let _ = put(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` left-aligned in `width` characters (at most [`MAX_COLUMN`]); longer text is
/// kept whole.
pub fn pad(s: &str, width: usize) -> String {
    let width = width.min(MAX_COLUMN);
    let n = s.chars().count();
    let mut out = String::with_capacity(s.len() + width.saturating_sub(n));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
    out
}

/// `s` right-aligned in `width` characters (at most [`MAX_COLUMN`]).
pub fn pad_left(s: &str, width: usize) -> String {
    let fill = width.min(MAX_COLUMN).saturating_sub(s.chars().count());
    let mut out: String = std::iter::repeat_n(' ', fill).collect();
    out.push_str(s);
    out
}

/// The width of a column: its widest cell, in characters.
pub fn width<'a>(cells: impl IntoIterator<Item = &'a str>) -> usize {
    cells
        .into_iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_invisible_characters_only() {
        assert!(matches!(escape("blk.0.attn_q.weight"), Cow::Borrowed(_)));
        assert_eq!(escape("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("\n\t\u{7f}\u{9b}"), "\\u{a}\\u{9}\\u{7f}\\u{9b}");
        assert_eq!(escape("x\u{202e}y\u{feff}"), "x\\u{202e}y\\u{feff}");
        assert_eq!(escape("é 名前 \\ \""), "é 名前 \\ \"");
        let json = serde_json::to_string(&"a\u{9b}b\u{202e}\u{1b}").unwrap();
        let safe = escape_json(&json);
        assert_eq!(safe, "\"a\\u009bb\\u202e\\u001b\"");
        let back: String = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, "a\u{9b}b\u{202e}\u{1b}");
        let pretty = serde_json::to_string_pretty(&serde_json::json!({"k": "\u{7f}"})).unwrap();
        assert_eq!(escape_json(&pretty), "{\n  \"k\": \"\\u007f\"\n}");
    }

    #[test]
    fn pads_any_length() {
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad_left("ab", 4), "  ab");
        let long = "x".repeat(70_000);
        assert_eq!(pad(&long, 70_000), long);
        assert_eq!(pad("a", 70_000).len(), MAX_COLUMN);
        assert_eq!(width(["a", "名前", "abc"]), 3);
    }
}
