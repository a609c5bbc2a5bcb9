//! The BPE vocabulary and merges transformers builds from a GGUF vocabulary: the
//! byte-level respelling of `gpt2` vocabularies (`bytes_to_unicode`), the merges a
//! sentencepiece vocabulary implies (`tokenization_utils_base.generate_merges`), and
//! Python's dict semantics where a token appears twice (first position, last value).

use std::cmp::Ordering;
use std::collections::HashMap;

/// Token to id, as `{token: index for index, token in enumerate(tokens)}`: a
/// repeated token keeps its last id.
pub fn vocab_map<'t>(tokens: &[&'t str]) -> HashMap<&'t str, usize> {
    tokens.iter().enumerate().map(|(i, t)| (*t, i)).collect()
}

/// GPT-2's byte alphabet: byte `b` is written as `alphabet()[b]`.
pub fn alphabet() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut extra = 0;
    for b in 0..256u32 {
        let c = if printable(b) {
            b
        } else {
            extra += 1;
            255 + extra
        };
        out[b as usize] = char::from_u32(c).unwrap_or('\0');
    }
    out
}

/// Bytes written as themselves in the alphabet; the 68 others are U+0100..=U+0143.
fn printable(b: u32) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// Whether `c` is a letter of [`alphabet`].
fn in_alphabet(c: char) -> bool {
    printable(c as u32) || ('\u{100}'..='\u{143}').contains(&c)
}

/// A token as the byte-level vocabulary spells it: as it is when every character is
/// in the alphabet, else its UTF-8 bytes in the alphabet.
pub fn byte_spelling(token: &str, alphabet: &[char; 256]) -> String {
    if token.chars().all(in_alphabet) {
        token.to_owned()
    } else {
        token.bytes().map(|b| alphabet[usize::from(b)]).collect()
    }
}

/// Python's `str.isspace` (Unicode White_Space plus the ASCII separators 0x1C-0x1F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Gemma's respelling: a token of spaces (with a ' ', only whitespace) becomes as
/// many `▁`.
pub fn gemma_spelling(token: &str) -> String {
    if token.contains(' ') && token.chars().all(py_space) {
        "\u{2581}".repeat(token.chars().count())
    } else {
        token.to_owned()
    }
}

/// A merge candidate's sort key: a sentencepiece score or Gemma's `-position`.
pub type Score = f64;

/// `generate_merges(vocab, vocab_scores)`: for each scored token, in the order of
/// `scored`, its splits into two vocabulary tokens (sorted by their ids), then all
/// of them sorted by score, left length, right length, highest first (stable).
pub fn generate<'t>(
    vocab: &HashMap<&'t str, usize>,
    scored: &[(&'t str, Score)],
) -> Vec<[&'t str; 2]> {
    let mut merges: Vec<(&str, &str, Score)> = Vec::new();
    for &(token, score) in scored {
        let start = merges.len();
        for (i, _) in token.char_indices().skip(1) {
            let (l, r) = token.split_at(i);
            if let (Some((l, _)), Some((r, _))) = (vocab.get_key_value(l), vocab.get_key_value(r)) {
                merges.push((l, r, score));
            }
        }
        merges[start..].sort_by_key(|m| (vocab[m.0], vocab[m.1]));
    }
    let key = |m: &(&str, &str, Score)| (m.2, m.0.chars().count(), m.1.chars().count());
    merges.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.partial_cmp(&ka.0)
            .unwrap_or(Ordering::Equal)
            .then(kb.1.cmp(&ka.1))
            .then(kb.2.cmp(&ka.2))
    });
    merges.into_iter().map(|(l, r, _)| [l, r]).collect()
}

/// `dict(zip(keys, values))` as a list: each key once, at its first position, with
/// its last value.
pub fn py_dict<'t>(pairs: impl Iterator<Item = (&'t str, Score)>) -> Vec<(&'t str, Score)> {
    let mut out: Vec<(&str, Score)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (k, v) in pairs {
        match at.get(k) {
            Some(&i) => out[i].1 = v,
            None => {
                at.insert(k, out.len());
                out.push((k, v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        let a = alphabet();
        assert_eq!(a[usize::from(b'!')], '!');
        assert_eq!(a[usize::from(b' ')], '\u{120}'); // Ġ
        assert_eq!(a[usize::from(b'\n')], '\u{10A}'); // Ċ
        assert_eq!(a[0], '\u{100}');
        assert_eq!(a[0xAD], '\u{143}');
        assert!((0..256).all(|b| in_alphabet(a[b])));
        assert!(!in_alphabet(' ') && !in_alphabet('\u{144}'));
        // é (0xE9) is a letter of the alphabet; 数 (E6 95 B0) is not.
        assert_eq!(byte_spelling("é", &a), "é");
        assert_eq!(byte_spelling("数", &a), "æķ°");
        assert_eq!(byte_spelling("<|x|>", &a), "<|x|>");
        assert_eq!(byte_spelling("a b", &a), "aĠb");
    }

    #[test]
    fn merges_follow_score_then_lengths_then_input_order() {
        let tokens = ["a", "b", "c", "ab", "bc", "abc", "ca"];
        let vocab = vocab_map(&tokens);
        let scored = py_dict(
            tokens
                .iter()
                .zip([0.0, 0.0, 0.0, -1.0, -1.0, -2.0, -1.0])
                .map(|(t, s)| (*t, s)),
        );
        let got = generate(&vocab, &scored);
        // ab, bc, ca tie on (score, 1, 1) and keep their order; abc's splits:
        // (a, bc) and (ab, c) sort by ids (0 < 3), then by lengths, longer left first.
        assert_eq!(
            got,
            [["a", "b"], ["b", "c"], ["c", "a"], ["ab", "c"], ["a", "bc"]]
        );
        assert_eq!(gemma_spelling("  "), "\u{2581}\u{2581}");
        assert_eq!(gemma_spelling(" \t"), "\u{2581}\u{2581}");
        assert_eq!(gemma_spelling("\t"), "\t");
        assert_eq!(gemma_spelling(" a"), " a");
    }
}
