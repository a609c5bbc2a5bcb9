//! The JIT against the generated driver ([`Coded::run`]) on declarations of
//! every kind: widths, orders, walks, scale kinds, post steps, odd offsets and
//! groups across rows, with NaN, infinite and subnormal scales.

use dq_runtime::linear::ScaleType;
use dq_runtime::linear::coded::{BitOrder, Coded, Codes, Post, Scale};
use half::{bf16, f16};

use super::coded;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `n` floats of `dt` (bits), with a NaN, infinities, a zero and a
    /// subnormal among ordinary values.
    fn floats(&mut self, n: usize, dt: ScaleType) -> Vec<u8> {
        let specials = [f32::NAN, f32::INFINITY, -0.0, 1e-40, f32::NEG_INFINITY];
        let mut v = Vec::new();
        for i in 0..n {
            let x = if i % 37 == 5 {
                specials[(i / 37) % specials.len()]
            } else {
                ((self.next() % 20001) as f32 - 10000.0) / 3001.0
            };
            match dt {
                ScaleType::F32 => v.extend(x.to_le_bytes()),
                ScaleType::F16 => v.extend(f16::from_f32(x).to_le_bytes()),
                ScaleType::BF16 => v.extend(bf16::from_f32(x).to_le_bytes()),
            }
        }
        v
    }
}

/// The first index where `a` and `b` differ, with both.
fn first_diff(a: &[u32], b: &[u32]) -> Option<(usize, u32, u32)> {
    (0..a.len().max(b.len())).find_map(|i| match (a.get(i), b.get(i)) {
        (Some(&x), Some(&y)) if x == y => None,
        (x, y) => Some((i, x.copied().unwrap_or(0), y.copied().unwrap_or(0))),
    })
}

/// Rows `[0, n/3)`, `[n/3, n)` through both, in each output type.
fn same_bits(c: &Coded<'_>, what: &str) {
    let (n, k) = (c.n(), c.k());
    for rows in [0..n / 3, n / 3..n] {
        let len = rows.len() * k;
        let (mut a, mut b) = (vec![0f32; len], vec![0f32; len]);
        c.run(rows.clone(), &mut a).unwrap();
        coded().run(c, rows.clone(), &mut b).unwrap();
        let f = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let (mut a16, mut b16) = (vec![f16::ZERO; len], vec![f16::ZERO; len]);
        c.run(rows.clone(), &mut a16).unwrap();
        coded().run(c, rows.clone(), &mut b16).unwrap();
        let h = |v: &[f16]| v.iter().map(|x| u32::from(x.to_bits())).collect::<Vec<_>>();
        let (mut ab, mut bb) = (vec![bf16::ZERO; len], vec![bf16::ZERO; len]);
        c.run(rows.clone(), &mut ab).unwrap();
        coded().run(c, rows.clone(), &mut bb).unwrap();
        let g = |v: &[bf16]| v.iter().map(|x| u32::from(x.to_bits())).collect::<Vec<_>>();
        for (ty, want, got) in [
            ("f32", f(&a), f(&b)),
            ("f16", h(&a16), h(&b16)),
            ("bf16", g(&ab), g(&bb)),
        ] {
            if let Some((i, x, y)) = first_diff(&want, &got) {
                panic!("{what} {ty} rows {rows:?}: element {i} is {y:#x}, the driver gives {x:#x}");
            }
        }
    }
}

/// One declaration's parts.
struct Case {
    n: usize,
    k: usize,
    bits: u32,
    order: BitOrder,
    strides: (usize, usize, usize),
    group: usize,
}

impl Case {
    /// Codes positions the case reaches.
    fn positions(&self) -> usize {
        let (o, rs, cs) = self.strides;
        o + (self.n - 1) * rs + (self.k - 1) * cs + 1
    }
}

#[test]
fn every_kind_of_declaration_equals_the_generated_driver() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let nf: Vec<f32> = (0..16).map(|q| (q as f32 - 7.0) / 7.0).collect();
    let unsigned: Vec<f32> = (0..256).map(|q| q as f32).collect();
    let signed: Vec<f32> = (0..256).map(|q| f32::from(q as u8 as i8)).collect();
    let mut table: Vec<f32> = (0..256).map(|q| (q as f32 * 0.37).sin()).collect();
    table[3] = f32::NAN;
    #[rustfmt::skip]
    let cases = [
        // Rows: bitsandbytes' flat stream, groups across rows, K odd.
        Case { n: 37, k: 101, bits: 4, order: BitOrder::HighNibbleFirst, strides: (0, 101, 1), group: 64 },
        Case { n: 9, k: 300, bits: 4, order: BitOrder::Lsb, strides: (3, 301, 1), group: 32 },
        Case { n: 11, k: 96, bits: 8, order: BitOrder::Lsb, strides: (0, 96, 1), group: 96 },
        Case { n: 5, k: 130, bits: 8, order: BitOrder::Lsb, strides: (7, 131, 1), group: 24 },
        Case { n: 6, k: 64, bits: 2, order: BitOrder::Lsb, strides: (0, 64, 1), group: 32 },
        Case { n: 6, k: 96, bits: 3, order: BitOrder::Lsb, strides: (0, 96, 1), group: 32 },
        Case { n: 7, k: 128, bits: 6, order: BitOrder::Lsb, strides: (1, 129, 1), group: 64 },
        // Columns: gpt-oss' [E, K, N] (an expert's offset), and groups off columns.
        Case { n: 64, k: 48, bits: 4, order: BitOrder::Lsb, strides: (64 * 48, 1, 64), group: 32 },
        Case { n: 300, k: 5, bits: 4, order: BitOrder::Lsb, strides: (5, 1, 301), group: 32 },
        // Blocks of 8 columns with K % 8 columns left, several groups a call.
        Case { n: 200, k: 13, bits: 4, order: BitOrder::Lsb, strides: (0, 1, 224), group: 32 },
        Case { n: 96, k: 19, bits: 4, order: BitOrder::HighNibbleFirst, strides: (64, 1, 128), group: 64 },
        // An offset off the group: a column at a time.
        Case { n: 96, k: 11, bits: 4, order: BitOrder::Lsb, strides: (16, 1, 96), group: 32 },
        Case { n: 40, k: 6, bits: 8, order: BitOrder::Lsb, strides: (0, 1, 40), group: 20 },
        // Elements.
        Case { n: 7, k: 9, bits: 4, order: BitOrder::HighNibbleFirst, strides: (1, 19, 2), group: 5 },
    ];
    for (i, case) in cases.iter().enumerate() {
        let bytes = rng.bytes((case.positions() * case.bits as usize).div_ceil(8) + 1);
        let codes = Codes {
            bytes: &bytes,
            bits: case.bits,
            order: case.order,
        };
        let groups = case.positions() / case.group + 1;
        let bases: Vec<&[f32]> = if case.bits == 8 {
            vec![&unsigned, &signed, &table]
        } else if case.bits == 4 {
            vec![&nf, &unsigned, &table]
        } else {
            vec![&unsigned]
        };
        let s32 = rng.floats(groups, ScaleType::F32);
        let s16 = rng.floats(groups, ScaleType::F16);
        let sb16 = rng.floats(groups, ScaleType::BF16);
        let e8 = rng.bytes(groups);
        let e8 = [&[0u8, 255, 127, 1][..], &e8].concat();
        let nested_codes = rng.bytes(groups);
        let book = rng.floats(256, ScaleType::F32);
        let absmax = rng.floats(groups.div_ceil(3), ScaleType::F32);
        let scales = [
            Scale::Floats {
                bytes: &s32,
                dtype: ScaleType::F32,
            },
            Scale::Floats {
                bytes: &s16,
                dtype: ScaleType::F16,
            },
            Scale::Floats {
                bytes: &sb16,
                dtype: ScaleType::BF16,
            },
            Scale::Nested {
                codes: &nested_codes,
                book: &book,
                absmax: &absmax,
                block: 3,
                offset: 0.3,
            },
            Scale::Pow2 { bytes: &e8 },
        ];
        let b16 = rng.floats(groups, ScaleType::F16);
        let bb16 = rng.floats(groups, ScaleType::BF16);
        let b32 = rng.floats(groups, ScaleType::F32);
        let posts = [
            Post::None,
            Post::Mul(7.874_016e-3),
            Post::Add {
                bytes: &b16,
                dtype: ScaleType::F16,
            },
            Post::Add {
                bytes: &bb16,
                dtype: ScaleType::BF16,
            },
            Post::Add {
                bytes: &b32,
                dtype: ScaleType::F32,
            },
        ];
        for (bi, base) in bases.iter().enumerate() {
            for (si, scale) in scales.iter().enumerate() {
                for (pi, post) in posts.iter().enumerate() {
                    let c = Coded::new(
                        case.n,
                        case.k,
                        codes,
                        case.strides,
                        case.group,
                        base,
                        *scale,
                        *post,
                    )
                    .unwrap();
                    same_bits(&c, &format!("case {i} base {bi} scale {si} post {pi}"));
                }
            }
        }
    }
}

/// A 4-bit run read from a wrong nibble order differs: the JIT test above can
/// fail.
#[test]
fn a_swapped_nibble_order_is_seen() {
    let bytes: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(29) ^ 0x5a).collect();
    let base: Vec<f32> = (0..16).map(|q| q as f32).collect();
    let one = 1f32.to_le_bytes();
    let make = |order| {
        let codes = Codes {
            bytes: &bytes,
            bits: 4,
            order,
        };
        let scale = Scale::Floats {
            bytes: &one,
            dtype: ScaleType::F32,
        };
        Coded::new(1, 128, codes, (0, 128, 1), 128, &base, scale, Post::None).unwrap()
    };
    let (mut hi, mut lo) = (vec![0f32; 128], vec![0f32; 128]);
    coded()
        .run(&make(BitOrder::HighNibbleFirst), 0..1, &mut hi)
        .unwrap();
    coded().run(&make(BitOrder::Lsb), 0..1, &mut lo).unwrap();
    assert_eq!(hi[0], f32::from(bytes[0] >> 4));
    assert_eq!(lo[0], f32::from(bytes[0] & 15));
    assert_eq!(hi[17], f32::from(bytes[8] & 15));
}

#[test]
fn rows_outside_the_weight_are_refused() {
    let bytes = [0u8; 4];
    let base = [0f32; 16];
    let one = 1f32.to_le_bytes();
    let codes = Codes {
        bytes: &bytes,
        bits: 4,
        order: BitOrder::Lsb,
    };
    let scale = Scale::Floats {
        bytes: &one,
        dtype: ScaleType::F32,
    };
    let c = Coded::new(1, 8, codes, (0, 8, 1), 8, &base, scale, Post::None).unwrap();
    assert!(coded().run(&c, 0..2, &mut [0f32; 16]).is_err());
    assert!(coded().run(&c, 0..1, &mut [0f32; 7]).is_err());
}
