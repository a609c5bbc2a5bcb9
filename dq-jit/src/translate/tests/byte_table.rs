//! 8-bit float src through 256-entry tables (segments of one scale at least
//! `BYTE_TABLE_MIN` = 1024 long): every code under every class of scale, every
//! dst and scale dtype, whole calls and short ranges that start and end anywhere
//! in a segment, bit for bit with the reference.

use core::ops::Range;

use dq_runtime::{DType, DynamicDequantize, Reference, STANDARD, TensorDesc};

use super::{Case, DYN_DST, Data, Rng, jits_for};
use crate::Jit;

/// True when `c`'s kernel on `jit` looks its codes up in a 256-entry table (its
/// IR has the table's stack slot: 256 entries of the stored dtype).
fn byte_table(jit: &Jit, c: &Case) -> bool {
    let ir = jit.clif(&c.plan()).expect("IR");
    ir.contains("explicit_slot 512") || ir.contains("explicit_slot 1024")
}

/// One row per class of scale in dtype `t` (little-endian bytes): zero, -0,
/// the smallest subnormals, the smallest normal, ±infinity, quiet and
/// signalling NaN, the largest finite, ±1 and ordinary values; for e8m0 every
/// code that is its own case (0: 2^-127, 1, 127: 1, 254: 2^127, 255: NaN) and
/// ordinary ones; for bf16 and e8m0, the edges of the range where f8_e4m3 ->
/// bf16 takes the exponent tables.
fn scale_rows(t: DType) -> Vec<Vec<u8>> {
    let bits: Vec<u64> = match t {
        // 9, 10, 244, 245: both sides of the range f8_e4m3 -> bf16's exponent
        // tables serve (2^-117 <= |s| < 2^118).
        DType::E8M0 => {
            return [0u8, 1, 9, 10, 100, 127, 130, 200, 244, 245, 254, 255]
                .map(|e| vec![e])
                .to_vec();
        }
        DType::F32 => vec![
            0,
            1 << 31,
            1,
            0x8000_0001,
            0x0080_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0x7f80_0001,
            0x7f7f_ffff,
            0x3f80_0000,
            0xbfc0_0000,
            0x3c23_d70a,
            0x4b80_0000,
        ],
        DType::F16 => vec![
            0, 0x8000, 1, 0x8001, 0x0400, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7bff, 0x3c00, 0xbe00,
            0x211f, 0x5a40,
        ],
        // From 0x047f: both sides of the range of the exponent tables (0x7b7f:
        // some f8_e4m3 codes times it overflow f32).
        _ => vec![
            0, 0x8000, 1, 0x8001, 0x0080, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x7f7f, 0x3f80, 0xbfc0,
            0x3c24, 0x4b80, 0x047f, 0x0500, 0x857f, 0x7a7f, 0xfa7f, 0x7a80, 0x7b7f,
        ],
    };
    let w = t.bits() / 8;
    bits.iter().map(|b| b.to_le_bytes()[..w].to_vec()).collect()
}

/// The case: `rows` rows of `len` elements, one scale a row (per channel along
/// axis 0), scales of dtype `scales`.
fn rows_case(src: DType, dst: DType, scales: DType, rows: usize, len: usize) -> Case {
    let shape = [rows, len];
    let mut c = Case::dynamic(
        DynamicDequantize::per_channel(0),
        (src, None, dst),
        &shape,
        &[rows],
    );
    c.scales = Some(TensorDesc::new(scales, &[rows]));
    c
}

/// Runs `c` on `data` over `range` with `jit`'s kernel and with the reference;
/// panics at the first element that differs.
fn same(jit: &Jit, c: &Case, data: &Data, range: Range<usize>) {
    let plan = c.plan();
    let kernel = jit.kernel(&plan).expect("kernel");
    let reference = Reference {
        formula: jit.formula(),
    };
    let want = data.run(c, &plan, |job| job.run_range(&reference, range.clone()));
    let got = data.run(c, &plan, |job| kernel.run(job, range.clone()));
    if let Some(i) = super::first_difference(&got, &want, c.dst.dtype) {
        let w = c.dst.dtype.bits() / 8;
        let len = c.dst.shape[1];
        let sw = data.scales.len() / c.dst.shape[0];
        let row = i / len;
        panic!(
            "{c:?}\nrange {range:?}: element {i} (row {}, code {:#04x}, scale {:02x?}): got \
             {:02x?}, want {:02x?}",
            row,
            data.src[i],
            &data.scales[row * sw..row * sw + sw],
            &got[i * w..i * w + w],
            &want[i * w..i * w + w],
        );
    }
}

/// Every f8 code in every row (a row per class of scale), for each f8 src, dst
/// and scale dtype (the dst's and e8m0), rows of 1024 and 1031 (a vector tail):
/// the whole call, every short range (1..=80 elements) from a random start, and
/// ranges that cross from one row (segment) into the next.
#[test]
fn every_f8_code_and_scale_class_through_the_byte_table() {
    let mut r = Rng::new(256);
    let mut n = 0;
    for src in [DType::F8E4M3, DType::F8E5M2] {
        for dst in DYN_DST {
            for scales in [dst, DType::E8M0] {
                let rows = scale_rows(scales);
                for len in [1024, 1031] {
                    let c = rows_case(src, dst, scales, rows.len(), len);
                    // Codes rotated per row, so every code meets every scale
                    // at several positions of a 16-element step.
                    let codes: Vec<u8> = (0..rows.len() * len)
                        .map(|i| (i % len + 37 * (i / len)) as u8)
                        .collect();
                    let data = Data {
                        src: codes,
                        scales: rows.concat(),
                        zps: Vec::new(),
                    };
                    let total = rows.len() * len;
                    for jit in jits_for(dst, &STANDARD) {
                        assert!(byte_table(&jit, &c), "{c:?}: the byte table path");
                        same(&jit, &c, &data, 0..total);
                        for k in 1..=80 {
                            let a = r.below((total - k) as u64 + 1) as usize;
                            same(&jit, &c, &data, a..a + k);
                        }
                        for row in 1..rows.len() {
                            let end = row * len;
                            same(&jit, &c, &data, end - 17..end + 40);
                        }
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 2 * 4 * 2 * 2, "cases");
}

/// Segments shorter than 1024 keep the vector path (the table would cost more
/// than it saves), and 4-bit float src never takes the byte table.
#[test]
fn short_segments_and_f4_take_no_byte_table() {
    let jit = Jit::new(&STANDARD, 4);
    for dst in DYN_DST {
        let short = rows_case(DType::F8E4M3, dst, dst, 2, 1023);
        assert!(!byte_table(&jit, &short), "{short:?}");
        let f4 = rows_case(DType::F4E2M1, dst, dst, 2, 2048);
        assert!(!byte_table(&jit, &f4), "{f4:?}");
        let long = rows_case(DType::F8E5M2, dst, dst, 2, 1024);
        assert!(byte_table(&jit, &long), "{long:?}");
    }
}

/// f8_e4m3 -> bf16 in groups of 64 (too short for the byte table, long enough
/// for the exponent tables, `EXP_MIN`): every code under every class of scale (bf16 and
/// e8m0, the range's edges included), whole calls and every length 1..=140.
#[test]
fn every_e4m3_code_through_exponent_tables_in_groups_of_64() {
    let mut r = Rng::new(32);
    for scales in [DType::BF16, DType::E8M0] {
        let rows = scale_rows(scales);
        let shape = [rows.len(), 256];
        let mut c = Case::per_group((DType::F8E4M3, None, DType::BF16), &shape, &[1, 64]);
        c.scales = Some(TensorDesc::new(scales, &[rows.len(), 4]));
        let data = Data {
            src: (0..rows.len() * 256).map(|i| (i + i / 256) as u8).collect(),
            scales: rows.iter().flat_map(|s| s.repeat(4)).collect(),
            zps: Vec::new(),
        };
        let jit = Jit::new(&STANDARD, 4);
        assert!(!byte_table(&jit, &c), "{c:?}: no byte table");
        let total = rows.len() * 256;
        same(&jit, &c, &data, 0..total);
        for k in 1..=140 {
            let a = r.below((total - k) as u64 + 1) as usize;
            same(&jit, &c, &data, a..a + k);
        }
    }
}
