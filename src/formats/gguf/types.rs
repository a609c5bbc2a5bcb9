//! The ggml tensor types: one row per type, in the shape of ggml's `type_traits`
//! (name, elements per block, bytes per block) plus whether dq decodes it.

use std::fmt;

/// A ggml tensor type, by its id in the GGUF tensor infos (`enum ggml_type`).
///
/// Ids that ggml retired (4, 5, 31-33, 36-38) and ids beyond the last one here are
/// not a `GgmlType`: a tensor of such a type is listed with its raw id only.
#[allow(non_camel_case_types, missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
}

/// One row of the type table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeTraits {
    /// ggml's name, e.g. `Q4_K`.
    pub name: &'static str,
    /// Elements per block (1 for plain scalar types).
    pub block_size: usize,
    /// Bytes per block.
    pub type_size: usize,
    /// Whether dq decodes this type (see [`mod@super::reference`]).
    pub supported: bool,
}

const fn row(
    name: &'static str,
    block_size: usize,
    type_size: usize,
    supported: bool,
) -> TypeTraits {
    TypeTraits {
        name,
        block_size,
        type_size,
        supported,
    }
}

/// Elements of a K-quant super-block (`QK_K`).
const QK_K: usize = 256;

impl GgmlType {
    /// Every type, in id order.
    pub const ALL: [GgmlType; 35] = {
        use GgmlType::*;
        [
            F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
            IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, I8, I16, I32, I64, F64,
            IQ1_M, BF16, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0,
        ]
    };

    /// The type of a GGUF type id, if ggml defines it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// The GGUF type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The type's row (sizes as ggml's `type_traits` and gguf-py's `GGML_QUANT_SIZES`).
    pub const fn traits(self) -> TypeTraits {
        use GgmlType::*;
        match self {
            F32 => row("F32", 1, 4, true),
            F16 => row("F16", 1, 2, true),
            Q4_0 => row("Q4_0", 32, 2 + 16, true),
            Q4_1 => row("Q4_1", 32, 2 + 2 + 16, true),
            Q5_0 => row("Q5_0", 32, 2 + 4 + 16, true),
            Q5_1 => row("Q5_1", 32, 2 + 2 + 4 + 16, true),
            Q8_0 => row("Q8_0", 32, 2 + 32, true),
            Q8_1 => row("Q8_1", 32, 2 + 2 + 32, true),
            Q2_K => row("Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true),
            Q3_K => row("Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true),
            Q4_K => row("Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, true),
            Q5_K => row("Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, true),
            Q6_K => row("Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, true),
            Q8_K => row("Q8_K", QK_K, 4 + QK_K + QK_K / 8, true),
            IQ2_XXS => row("IQ2_XXS", QK_K, 2 + QK_K / 4, true),
            IQ2_XS => row("IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, true),
            IQ3_XXS => row("IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, true),
            IQ1_S => row("IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, true),
            IQ4_NL => row("IQ4_NL", 32, 2 + 16, true),
            IQ3_S => row("IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, true),
            IQ2_S => row("IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, true),
            IQ4_XS => row("IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, true),
            I8 => row("I8", 1, 1, false),
            I16 => row("I16", 1, 2, false),
            I32 => row("I32", 1, 4, false),
            I64 => row("I64", 1, 8, false),
            F64 => row("F64", 1, 8, false),
            IQ1_M => row("IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, true),
            BF16 => row("BF16", 1, 2, true),
            TQ1_0 => row("TQ1_0", QK_K, 2 + 4 * 13, true),
            TQ2_0 => row("TQ2_0", QK_K, 2 + 64, true),
            MXFP4 => row("MXFP4", 32, 1 + 16, true),
            NVFP4 => row("NVFP4", 64, 4 + 32, true),
            Q1_0 => row("Q1_0", 128, 2 + 16, true),
            Q2_0 => row("Q2_0", 64, 2 + 16, true),
        }
    }

    /// ggml's name.
    pub const fn name(self) -> &'static str {
        self.traits().name
    }

    /// Elements per block.
    pub const fn block_size(self) -> usize {
        self.traits().block_size
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        self.traits().type_size
    }

    /// Whether dq decodes this type.
    pub const fn is_supported(self) -> bool {
        self.traits().supported
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_ascending() {
        for w in GgmlType::ALL.windows(2) {
            assert!(w[0].id() < w[1].id());
        }
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        for retired in [4, 5, 31, 32, 33, 36, 37, 38, 43, u32::MAX] {
            assert_eq!(GgmlType::from_id(retired), None);
        }
    }

    #[test]
    fn sizes_match_ggml() {
        // ggml's type_traits: (block_size, type_size) of a few rows, written out.
        let rows = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::MXFP4, 32, 17),
            (GgmlType::IQ1_M, 256, 56),
            // ggml-common.h's `block_q8_1` (two f16, 32 bytes); gguf-py 0.19.0's
            // table still says 40 (two f32).
            (GgmlType::Q8_1, 32, 36),
            // ggml-common.h's `block_q2_0`: f16 `d`, `qs[QK2_0 / 4]`, QK2_0 = 64.
            (GgmlType::Q2_0, 64, 18),
        ];
        for (t, b, s) in rows {
            assert_eq!((t.block_size(), t.type_size()), (b, s), "{t}");
        }
        let supported: Vec<_> = GgmlType::ALL
            .into_iter()
            .filter(|t| t.is_supported())
            .map(GgmlType::name)
            .collect();
        assert_eq!(
            supported,
            [
                "F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
                "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
                "IQ3_S", "IQ2_S", "IQ4_XS", "IQ1_M", "BF16", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
                "Q1_0", "Q2_0"
            ]
        );
    }
}
