//! The `'static` tables block declarations index ([`Table`]), each copied verbatim
//! from the source its doc names; the IQ2 codebooks are in `grids`, the IQ3 and
//! IQ1 ones in `grids_iq1_iq3`.

use super::decl::Table;

mod grids;
mod grids_iq1_iq3;
pub use grids::{
    IQ2S_GRID, IQ2S_GRID_U64, IQ2XS_GRID, IQ2XS_GRID_U64, IQ2XXS_GRID, IQ2XXS_GRID_U64,
};
pub use grids_iq1_iq3::{
    IQ1S_GRID, IQ1S_GRID_U64, IQ3S_GRID, IQ3S_GRID_U32, IQ3XXS_GRID, IQ3XXS_GRID_U32,
};

/// MXFP4's e2m1 values, doubled: gguf-py 0.19.0 `MXFP4.kvalues` (ggml-common.h
/// `kvalues_mxfp4`).
pub const KVALUES_MXFP4: Table = Table {
    name: "kvalues_mxfp4",
    values: &[0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12],
    lanes: 1,
};

/// IQ4_NL's and IQ4_XS's non-linear levels: ggml-common.h `kvalues_iq4nl`
/// (gguf-py 0.19.0 `IQ4_NL.kvalues`).
pub const KVALUES_IQ4NL: Table = Table {
    name: "kvalues_iq4nl",
    values: &[
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
    ],
    lanes: 1,
};

/// ggml-common.h `ksigns_iq2xs`: 128 sign masks (bit `l` set: lane `l` negated),
/// verbatim.
pub const KSIGNS_IQ2XS_U8: [u8; 128] = [
    0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15, 144, 17, 18, 147, 20, 149,
    150, 23, 24, 153, 154, 27, 156, 29, 30, 159, 160, 33, 34, 163, 36, 165, 166, 39, 40, 169, 170,
    43, 172, 45, 46, 175, 48, 177, 178, 51, 180, 53, 54, 183, 184, 57, 58, 187, 60, 189, 190, 63,
    192, 65, 66, 195, 68, 197, 198, 71, 72, 201, 202, 75, 204, 77, 78, 207, 80, 209, 210, 83, 212,
    85, 86, 215, 216, 89, 90, 219, 92, 221, 222, 95, 96, 225, 226, 99, 228, 101, 102, 231, 232,
    105, 106, 235, 108, 237, 238, 111, 240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123,
    252, 125, 126, 255,
];

/// `masks` as signed bytes (the bits unchanged).
const fn bytes_of<const N: usize>(masks: &[u8; N]) -> [i8; N] {
    let mut out = [0i8; N];
    let mut i = 0;
    while i < N {
        out[i] = masks[i] as i8;
        i += 1;
    }
    out
}

const KSIGNS_BYTES: [i8; 128] = bytes_of(&KSIGNS_IQ2XS_U8);

/// [`KSIGNS_IQ2XS_U8`] as a table of one-lane masks (read back as `u8`).
pub const KSIGNS_IQ2XS: Table = Table {
    name: "ksigns_iq2xs",
    values: &KSIGNS_BYTES,
    lanes: 1,
};

#[cfg(test)]
mod tests {
    use crate::block::decl::{BlockDecl, Field, Table};
    use crate::block::gguf::Q8_0;
    use crate::block::{Block, Declared, Decode};

    /// Entry `v` is `-(v as i8)` with a wrap: every entry distinct from its index.
    const WIDE: [i8; 256] = {
        let mut t = [0i8; 256];
        let mut v = 0;
        while v < 256 {
            t[v] = (v as u8 as i8).wrapping_neg();
            v += 1;
        }
        t
    };

    /// Q8_0 with its byte indexing a 256-entry table.
    struct Wide;
    impl Block for Wide {
        const DECL: BlockDecl = BlockDecl {
            name: "WIDE",
            fields: &[Field {
                signed: false,
                table: Some(&Table {
                    name: "wide",
                    values: &WIDE,
                    lanes: 1,
                }),
                ..Q8_0.fields[0]
            }],
            ..Q8_0
        };
    }

    #[test]
    fn a_256_entry_table_runs_on_the_driver() {
        assert!(Wide::DECL.check().is_ok());
        let mut block = vec![0x00, 0x3C]; // d = 1
        block.extend((0..32).map(|i| (i * 8 + 1) as u8));
        let mut out = [0f32; 32];
        Declared::<Wide>::decode::<f32, 0>(&block, &mut out);
        for (i, y) in out.iter().enumerate() {
            let b = (i * 8 + 1) as u8;
            assert_eq!(*y, f32::from((b as i8).wrapping_neg()), "element {i}");
        }
    }

    #[test]
    fn a_table_of_the_wrong_length_is_refused() {
        const BAD: BlockDecl = BlockDecl {
            fields: &[Field {
                signed: false,
                table: Some(&Table {
                    name: "short",
                    values: &[0; 16],
                    lanes: 1,
                }),
                ..Q8_0.fields[0]
            }],
            ..Q8_0
        };
        assert!(BAD.check().is_err());
    }
}
