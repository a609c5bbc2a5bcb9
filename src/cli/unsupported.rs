//! The GGUF types dq does not decode, each with how many tensors have it: the
//! summary line of `dq inspect` and the error of `dq convert` naming what blocks it.

/// One unsupported type: its name, its tensors, the first one's name.
#[derive(Debug, PartialEq, Eq)]
pub struct TypeCount {
    /// The type's name (`IQ2_XXS`, or `id 99` for an id ggml does not define).
    pub ty: String,
    /// Tensors of the type.
    pub tensors: usize,
    /// The first tensor of the type.
    pub first: String,
}

/// Counts `(tensor name, type name)` pairs by type, in order of first appearance.
pub fn count<'a>(tensors: impl IntoIterator<Item = (&'a str, String)>) -> Vec<TypeCount> {
    let mut out: Vec<TypeCount> = Vec::new();
    for (name, ty) in tensors {
        match out.iter_mut().find(|c| c.ty == ty) {
            Some(c) => c.tensors += 1,
            None => out.push(TypeCount {
                ty,
                tensors: 1,
                first: name.to_owned(),
            }),
        }
    }
    out
}

/// `IQ2_XXS (12 tensors), IQ4_NL (1 tensor)`; with `first`, each type's first
/// tensor too: `IQ2_XXS (12 tensors, first blk.0.ffn_down.weight)`.
pub fn summary(counts: &[TypeCount], first: bool) -> String {
    let one = |c: &TypeCount| {
        let s = if c.tensors == 1 { "" } else { "s" };
        match first {
            true => format!("{} ({} tensor{s}, first {})", c.ty, c.tensors, c.first),
            false => format!("{} ({} tensor{s})", c.ty, c.tensors),
        }
    };
    counts.iter().map(one).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_type_in_order() {
        let tensors = [("a", "IQ2_XXS"), ("b", "id 4"), ("c", "IQ2_XXS")];
        let counts = count(tensors.map(|(n, t)| (n, t.to_owned())));
        assert_eq!(
            summary(&counts, false),
            "IQ2_XXS (2 tensors), id 4 (1 tensor)"
        );
        assert_eq!(
            summary(&counts, true),
            "IQ2_XXS (2 tensors, first a), id 4 (1 tensor, first b)"
        );
        assert_eq!(summary(&count([]), false), "");
    }
}
