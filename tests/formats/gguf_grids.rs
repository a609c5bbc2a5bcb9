//! Mutation tests of the IQ3 and IQ1 codebooks (`iq3xxs_grid`, `iq3s_grid`,
//! `iq1s_grid`): one grid entry changed in a copy of IQ3_XXS's, IQ3_S's, IQ1_S's or
//! IQ1_M's declaration makes the generated driver and the JIT disagree with the
//! committed gguf-py outputs (`tests/fixtures/gguf/low_bit`) at the element that
//! reads it. (`ksigns_iq2xs`, which IQ3_XXS shares, is mutated in `gguf_tables`.)
use crate::support;
use dq::block::{Block, BlockDecl, Declared, Decode, Grid, Table, gguf};
use dq::formats::gguf::Gguf;
use support::gguf::{expected, fixtures};

/// The bytes of tensor `name` of low_bit.gguf and gguf-py's output for it.
fn tensor(name: &str) -> (Vec<u8>, Vec<f32>) {
    let file = Gguf::open(fixtures().join("low_bit.gguf")).unwrap();
    let t = file.tensor(name).unwrap();
    (
        file.tensor_data(t).unwrap().to_vec(),
        expected("low_bit", name),
    )
}

/// The declarations mutated, their r3 fixture, and the grid row of its first run
/// (row 0 of run 0, which feeds element 1 through lane 1).
const CASES: [(&BlockDecl, &str, usize); 4] = [
    (&gguf::IQ3_XXS, "iq3_xxs.r3", 47),
    (&gguf::IQ3_S, "iq3_s.r3", 128),
    (&gguf::IQ1_S, "iq1_s.r3", 1711),
    (&gguf::IQ1_M, "iq1_m.r3", 613),
];

/// The row index of run 0's first row, read by the declaration's index fields.
fn first_row(d: &BlockDecl, block: &[u8]) -> usize {
    let g = d.grid.unwrap();
    g.index[0].iter().fold(0, |v, f| {
        let w = u16::from_le_bytes([block[f.byte], block[f.byte + 1]]);
        v | (usize::from(w >> f.shift) & ((1 << f.bits) - 1)) << f.at
    })
}

/// Case `C` of [`CASES`] with lane 1 of its row xor'ed with 2 (`N`: the grid's
/// length).
struct Mutant<const C: usize, const N: usize>;

impl<const C: usize, const N: usize> Mutant<C, N> {
    const BASE: &BlockDecl = CASES[C].0;
    const GRID: Grid = match Self::BASE.grid {
        Some(g) => g,
        None => panic!("a grid type"),
    };
    const VALUES: [i8; N] = {
        let t = Self::GRID.table;
        let mut v = [0i8; N];
        let mut i = 0;
        while i < N {
            v[i] = t.values[i];
            i += 1;
        }
        v[CASES[C].2 * t.lanes + 1] ^= 2;
        v
    };
    const TABLE: Table = Table {
        values: &Self::VALUES,
        ..*Self::GRID.table
    };
}

impl<const C: usize, const N: usize> Block for Mutant<C, N> {
    const DECL: BlockDecl = BlockDecl {
        grid: Some(Grid {
            table: &Self::TABLE,
            ..Self::GRID
        }),
        ..*Self::BASE
    };
}

/// The mutant of case `C` on its fixture: element 1 differs, element 0 does not.
fn check_generated<const C: usize, const N: usize>() {
    let (d, name, row) = CASES[C];
    let (bytes, want) = tensor(name);
    assert_eq!(first_row(d, &bytes), row, "{name}: the fixture's first row");
    assert!(want[1].is_finite() && want[1] != 0.0, "{name}");
    let mut got = vec![0f32; want.len()];
    gguf::kernel(d.name).unwrap().run(&bytes, &mut got).unwrap();
    assert_eq!(got[1].to_bits(), want[1].to_bits(), "{name} unchanged");
    Declared::<Mutant<C, N>>::decode::<f32, 0>(&bytes, &mut got);
    assert_ne!(
        got[1].to_bits(),
        want[1].to_bits(),
        "{name}: row {row} lane 1"
    );
    assert_eq!(got[0].to_bits(), want[0].to_bits(), "{name}: lane 0");
}

#[test]
fn a_wrong_grid_entry_fails_on_the_generated_driver() {
    check_generated::<0, 1024>();
    check_generated::<1, 2048>();
    check_generated::<2, 16384>();
    check_generated::<3, 16384>();
}

/// The JIT on the same mutants (tables leaked at run time).
#[cfg(feature = "jit")]
#[test]
fn a_wrong_grid_entry_fails_on_the_jit() {
    use dq::block::BlockKernel;
    struct Unused;
    impl Block for Unused {
        const DECL: BlockDecl = gguf::IQ3_XXS;
    }
    for (base, name, row) in CASES {
        let (bytes, want) = tensor(name);
        let g = base.grid.unwrap();
        let mut values = g.table.values.to_vec();
        values[row * g.table.lanes + 1] ^= 2;
        let table: &'static Table = Box::leak(Box::new(Table {
            values: values.leak(),
            ..*g.table
        }));
        let decl: &'static BlockDecl = Box::leak(Box::new(BlockDecl {
            grid: Some(Grid { table, ..g }),
            ..*base
        }));
        let gk: &'static BlockKernel = Box::leak(Box::new(BlockKernel::of::<Declared<Unused>>(
            base.name,
            base.block_bytes,
            base.block_elems,
            Some(decl),
        )));
        let jit = dq_jit::block::compile_uncached(gk).unwrap();
        let mut got = vec![0f32; want.len()];
        jit.run(&bytes, &mut got).unwrap();
        assert_ne!(
            got[1].to_bits(),
            want[1].to_bits(),
            "{name}: row {row} lane 1"
        );
        assert_eq!(got[0].to_bits(), want[0].to_bits(), "{name}: lane 0");
    }
}
