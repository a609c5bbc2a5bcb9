//! TQ1_0 as a declaration of three parts (gguf-py 0.19.0's `TQ1_0.dequantize_blocks`):
//! its elements come from three sections of base-3 bytes, `qs[0..32]` (5 digits
//! each, 160 elements), `qs[32..48]` (5 digits, 80) and `qh[0..4]` (4 digits, 16),
//! which no one set of digits lays out, so each section is a part
//! ([`BlockDecl::then`]); `d` is the f16 at 52 in each.

use super::{D_TIMES_Q, field};
use crate::block::decl::{BlockDecl, Field, ParamNode as P};

/// A section: element `n p + l` (`p` the digit place, `l` the byte) is digit `p` of
/// the byte `fields` reads, minus 1, times `d`:
/// ```text
/// qs0 = qs0.reshape((n_blocks, -1, 1, 32)) * np.array([1, 3, 9, 27, 81], dtype=np.uint8)
/// qs = ((qs.astype(np.uint16) * 3) >> 8).astype(np.int8) - np.int8(1)
/// return (d * qs.astype(np.float32))
/// ```
const fn section(fields: &'static [Field], digits: &'static [usize], elems: usize) -> BlockDecl {
    BlockDecl {
        name: "TQ1_0",
        block_bytes: 54,
        block_elems: elems,
        digits,
        fields,
        offset: -1,
        group: &[0, 0],
        groups: 1,
        params: &[P::F16(52)],
        outputs: &[0],
        formula: D_TIMES_Q,
        grid: None,
        then: &[],
    }
}

/// The base-3 field at `byte`: byte `byte + l`, digit place the outer digit.
const fn trits(byte: usize) -> [Field; 1] {
    [Field {
        base3: true,
        ..field(byte, &[0, 1], &[1, 0], 8, 0)
    }]
}

const QS0: [Field; 1] = trits(0);
const QS1: [Field; 1] = trits(32);
const QH: [Field; 1] = trits(48);

/// `qs[32..48]`: elements 160..240.
const TQ1_0_QS1: BlockDecl = section(&QS1, &[5, 16], 80);
/// `qh`: elements 240..256.
const TQ1_0_QH: BlockDecl = section(&QH, &[4, 4], 16);

/// TQ1_0: `d * (trit - 1)`; elements 0..160 from `qs[0..32]`, then the two parts.
pub const TQ1_0: BlockDecl = BlockDecl {
    block_elems: 256,
    then: &[&TQ1_0_QS1, &TQ1_0_QH],
    ..section(&QS0, &[5, 32], 160)
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_checked() {
        assert!(TQ1_0.check().is_ok());
        assert_eq!(TQ1_0.own_elems(), 160);
        // A part of other block bytes, elements that do not add up, a part with
        // parts, a digit place past 4.
        const WIDE: BlockDecl = BlockDecl {
            block_bytes: 56,
            ..TQ1_0_QH
        };
        const SHORT: BlockDecl = BlockDecl {
            then: &[&TQ1_0_QS1],
            ..TQ1_0
        };
        const NESTED: BlockDecl = BlockDecl {
            then: &[&TQ1_0_QS1, &SHORT],
            ..TQ1_0
        };
        const PLACES: [Field; 1] = [Field {
            shift: 2,
            ..trits(48)[0]
        }];
        const PLACE: BlockDecl = BlockDecl {
            fields: &PLACES,
            ..TQ1_0_QH
        };
        for bad in [
            BlockDecl {
                then: &[&TQ1_0_QS1, &WIDE],
                ..TQ1_0
            },
            SHORT,
            NESTED,
            PLACE,
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
