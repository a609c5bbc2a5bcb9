//! Mutation tests of the declarations' tables (`dq::block::tables`): one wrong
//! entry of `kvalues_iq4nl` or `kvalues_mxfp4` (in a copy of IQ4_NL's or NVFP4's
//! declaration), of `iq2xxs_grid` or of `ksigns_iq2xs` (in a copy of IQ2_XXS's)
//! makes the generated driver and the JIT disagree with gguf-py's committed
//! outputs (`tests/fixtures/gguf/tables`); and those fixtures reach every entry of
//! every 16-entry table with a finite nonzero scale, so the same holds for IQ4_XS.
use crate::support;
use dq::block::{Block, BlockDecl, Declared, Decode, Field, Grid, Table, gguf, tables};
use dq::formats::gguf::Gguf;
use support::gguf::{expected, fixtures};

/// The bytes of tensor `name` of tables.gguf and gguf-py's output for it.
fn tensor(name: &str) -> (Vec<u8>, Vec<f32>) {
    let file = Gguf::open(fixtures().join("tables.gguf")).unwrap();
    let t = file.tensor(name).unwrap();
    (
        file.tensor_data(t).unwrap().to_vec(),
        expected("tables", name),
    )
}

/// Entry `k` of `t` plus one.
const fn flipped(t: &Table, k: usize) -> [i8; 16] {
    let mut v = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        v[i] = t.values[i];
        i += 1;
    }
    v[k] = v[k].wrapping_add(1);
    v
}

/// IQ4_NL (`NV == false`) or NVFP4 with entry `K` of its table off by one.
struct Mutant<const NV: bool, const K: usize>;

impl<const NV: bool, const K: usize> Mutant<NV, K> {
    const BASE: BlockDecl = if NV { gguf::NVFP4 } else { gguf::IQ4_NL };
    const VALUES: [i8; 16] = flipped(
        if NV {
            &tables::KVALUES_MXFP4
        } else {
            &tables::KVALUES_IQ4NL
        },
        K,
    );
    const TABLE: Table = Table {
        name: "mutant",
        values: &Self::VALUES,
        lanes: 1,
    };
    const FIELDS: [Field; 1] = [Field {
        table: Some(&Self::TABLE),
        ..Self::BASE.fields[0]
    }];
}

impl<const NV: bool, const K: usize> Block for Mutant<NV, K> {
    const DECL: BlockDecl = BlockDecl {
        fields: &Self::FIELDS,
        ..Self::BASE
    };
}

/// True when the mutant's output differs from gguf-py's on tensor `name`.
fn mutant_differs<const NV: bool, const K: usize>(name: &str) -> bool {
    let (bytes, want) = tensor(name);
    let mut got = vec![0f32; want.len()];
    Declared::<Mutant<NV, K>>::decode::<f32, 0>(&bytes, &mut got);
    got.iter()
        .zip(&want)
        .any(|(g, w)| g.to_bits() != w.to_bits())
}

macro_rules! every_entry {
    ($nv:expr, $name:expr, $($k:literal)*) => {
        $(assert!(mutant_differs::<$nv, $k>($name), "{} entry {} off by one went unseen", $name, $k);)*
    };
}

/// `values` with entry `k` xor'ed with `bits`.
const fn xored<const N: usize>(values: &[i8], k: usize, bits: u8) -> [i8; N] {
    let mut v = [0i8; N];
    let mut i = 0;
    while i < N {
        v[i] = values[i];
        i += 1;
    }
    v[k] = (v[k] as u8 ^ bits) as i8;
    v
}

/// IQ2_XXS with grid row 94 lane 3 (`SIGN == false`) or sign mask 35 bit 0
/// changed: the first run of tables.gguf's `iq2_xxs.r3` uses both (its `aux0`
/// byte 0 is 94, its `aux1 & 127` is 35; its scale is finite and nonzero).
struct GridMutant<const SIGN: bool>;

impl<const SIGN: bool> GridMutant<SIGN> {
    const BASE: Grid = match gguf::IQ2_XXS.grid {
        Some(g) => g,
        None => panic!("IQ2_XXS has a grid"),
    };
    const ROWS: [i8; 2048] = xored(
        tables::IQ2XXS_GRID.values,
        94 * 8 + 3,
        if SIGN { 0 } else { 2 },
    );
    const SIGNS: [i8; 128] = xored(tables::KSIGNS_IQ2XS.values, 35, if SIGN { 1 } else { 0 });
    const TABLE: Table = Table {
        values: &Self::ROWS,
        ..tables::IQ2XXS_GRID
    };
    const SIGN_TABLE: Table = Table {
        values: &Self::SIGNS,
        ..tables::KSIGNS_IQ2XS
    };
}

impl<const SIGN: bool> Block for GridMutant<SIGN> {
    const DECL: BlockDecl = BlockDecl {
        grid: Some(Grid {
            table: &Self::TABLE,
            sign_table: Some(&Self::SIGN_TABLE),
            ..Self::BASE
        }),
        ..gguf::IQ2_XXS
    };
}

#[test]
fn a_wrong_grid_or_sign_entry_fails_on_the_generated_driver() {
    let (bytes, want) = tensor("iq2_xxs.r3");
    let mut got = vec![0f32; want.len()];
    gguf::kernel("IQ2_XXS")
        .unwrap()
        .run(&bytes, &mut got)
        .unwrap();
    assert!(
        got.iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits())
    );
    assert_eq!(
        (bytes[2], bytes[6] & 0x7F),
        (94, 35),
        "the fixture's first run"
    );
    Declared::<GridMutant<false>>::decode::<f32, 0>(&bytes, &mut got);
    assert_ne!(got[3].to_bits(), want[3].to_bits(), "grid row 94 lane 3");
    assert_eq!(got[2].to_bits(), want[2].to_bits());
    Declared::<GridMutant<true>>::decode::<f32, 0>(&bytes, &mut got);
    assert_eq!(got[0], -want[0], "sign mask 35 bit 0");
}

#[test]
fn a_wrong_table_entry_fails_on_the_generated_driver() {
    // The unchanged declaration matches (so a difference is the mutation's).
    let (bytes, want) = tensor("iq4_nl.r3");
    let mut got = vec![0f32; want.len()];
    gguf::kernel("IQ4_NL")
        .unwrap()
        .run(&bytes, &mut got)
        .unwrap();
    assert!(
        got.iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits())
    );
    every_entry!(false, "iq4_nl.r3", 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    every_entry!(true, "nvfp4.r3", 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// Every entry of each table-indexed type's table is reached by some element of
/// its r3 fixture whose scale is finite and nonzero: there a wrong entry changes
/// gguf-py's output, which the backends are compared against.
#[test]
fn fixtures_reach_every_table_entry() {
    for (ty, name) in [
        ("IQ4_NL", "iq4_nl.r3"),
        ("IQ4_XS", "iq4_xs.r3"),
        ("NVFP4", "nvfp4.r3"),
    ] {
        let k = gguf::kernel(ty).unwrap();
        let d = k.decl.unwrap();
        let t = d.fields[0].table.unwrap();
        let (bytes, want) = tensor(name);
        let mut seen = [false; 16];
        for (b, y) in bytes
            .chunks_exact(k.block_bytes)
            .zip(want.chunks_exact(k.block_elems))
        {
            for (i, y) in y.iter().enumerate() {
                let v = nibble(d, b, i);
                // The output is scale * entry: nonzero and finite only where the
                // scale is, for a nonzero entry.
                if y.is_finite() && *y != 0.0 {
                    seen[v] = true;
                }
            }
        }
        for (v, s) in seen.iter().enumerate() {
            assert!(*s || t.values[v] == 0, "{name}: entry {v} never reached");
        }
    }
}

/// The 4 bits element `i` of block `b` indexes, by the declaration's field
/// strides.
fn nibble(d: &BlockDecl, b: &[u8], i: usize) -> usize {
    let f = &d.fields[0];
    let (mut rest, mut byte, mut shift) = (i, f.byte, usize::from(f.shift));
    for k in (0..d.digits.len()).rev() {
        let digit = rest % d.digits[k];
        rest /= d.digits[k];
        byte += digit * f.byte_stride[k];
        shift += digit * usize::from(f.shift_stride[k]);
    }
    usize::from((b[byte] >> shift) & 0x0F)
}

/// The JIT on copies of IQ4_NL's and NVFP4's declarations with one entry off by
/// one: each differs from gguf-py.
#[cfg(feature = "jit")]
#[test]
fn a_wrong_table_entry_fails_on_the_jit() {
    use dq::block::BlockKernel;
    struct Unused;
    impl Block for Unused {
        const DECL: BlockDecl = gguf::IQ4_NL;
    }
    for (base, name) in [(&gguf::IQ4_NL, "iq4_nl.r3"), (&gguf::NVFP4, "nvfp4.r3")] {
        let (bytes, want) = tensor(name);
        let table = base.fields[0].table.unwrap();
        for k in 0..16 {
            let mut values = table.values.to_vec();
            values[k] = values[k].wrapping_add(1);
            let t: &'static Table = Box::leak(Box::new(Table {
                name: "mutant",
                values: values.leak(),
                lanes: 1,
            }));
            let fields: &'static [Field] = Box::leak(Box::new([Field {
                table: Some(t),
                ..base.fields[0]
            }]));
            let decl: &'static BlockDecl = Box::leak(Box::new(BlockDecl { fields, ..*base }));
            let gk: &'static BlockKernel =
                Box::leak(Box::new(BlockKernel::of::<Declared<Unused>>(
                    base.name,
                    base.block_bytes,
                    base.block_elems,
                    Some(decl),
                )));
            let jit = dq_jit::block::compile_uncached(gk).unwrap();
            let mut got = vec![0f32; want.len()];
            jit.run(&bytes, &mut got).unwrap();
            let differs = got
                .iter()
                .zip(&want)
                .any(|(g, w)| g.to_bits() != w.to_bits());
            assert!(
                differs,
                "{name} entry {k} off by one went unseen by the JIT"
            );
        }
    }
}

/// The JIT on copies of IQ2_XXS's declaration with one grid entry (the lane of
/// each of the fixture's first 32 runs' rows that its position picks) or one sign
/// mask bit changed: each differs from gguf-py at that element.
#[cfg(feature = "jit")]
#[test]
fn a_wrong_grid_or_sign_entry_fails_on_the_jit() {
    use dq::block::BlockKernel;
    struct Unused;
    impl Block for Unused {
        const DECL: BlockDecl = gguf::IQ2_XXS;
    }
    let base = &gguf::IQ2_XXS;
    let g = base.grid.unwrap();
    let (bytes, want) = tensor("iq2_xxs.r3");
    let leak = |values: Vec<i8>, like: &Table| -> &'static Table {
        Box::leak(Box::new(Table {
            values: values.leak(),
            ..*like
        }))
    };
    for run in 0..32 {
        let (block, r) = (run / 32, run % 32);
        let aux = 2 + 8 * (r / 4);
        let row = usize::from(bytes[66 * block + aux + r % 4]);
        let aux1 = u32::from_le_bytes(bytes[66 * block + aux + 4..][..4].try_into().unwrap());
        let sign = ((aux1 >> (7 * (r % 4))) & 0x7F) as usize;
        let lane = run % 8;
        let e = 256 * block + 8 * r + lane;
        for mutate_sign in [false, true] {
            let mut rows = g.table.values.to_vec();
            let mut signs = g.sign_table.unwrap().values.to_vec();
            if mutate_sign {
                signs[sign] = (signs[sign] as u8 ^ (1 << lane)) as i8;
            } else {
                rows[row * 8 + lane] ^= 2;
            }
            let grid = Grid {
                table: leak(rows, g.table),
                sign_table: Some(leak(signs, g.sign_table.unwrap())),
                ..g
            };
            let decl: &'static BlockDecl = Box::leak(Box::new(BlockDecl {
                grid: Some(grid),
                ..*base
            }));
            let gk: &'static BlockKernel =
                Box::leak(Box::new(BlockKernel::of::<Declared<Unused>>(
                    base.name,
                    base.block_bytes,
                    base.block_elems,
                    Some(decl),
                )));
            let jit = dq_jit::block::compile_uncached(gk).unwrap();
            let mut got = vec![0f32; want.len()];
            jit.run(&bytes, &mut got).unwrap();
            if want[e].is_finite() && want[e] != 0.0 {
                let what = if mutate_sign { "sign" } else { "grid" };
                assert_ne!(
                    got[e].to_bits(),
                    want[e].to_bits(),
                    "{what} run {run} lane {lane}"
                );
            }
        }
    }
}
