//! 4-bit fields into 16-bit outputs by table: a run of one group has 16 possible
//! outputs, each computed once by the formula (so the table holds the exact bits
//! of every element), then looked up 32 at a time with `vpshufb` (a table of low
//! bytes and one of high bytes, repeated in both 128-bit lanes).

/// A group's 16 outputs (bit patterns), output `q` at index `q`.
pub(super) type Table = [u16; 16];

/// The fields `0..16`, to compute a table with the formula.
pub(super) const FIELDS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// `out[i] = table[codes[i]]` (codes below 16), one element at a time.
#[inline(always)]
pub(super) fn apply_scalar(t: &Table, codes: &[u8], out: &mut [u16]) {
    for (o, &c) in out.iter_mut().zip(codes) {
        *o = t[usize::from(c & 15)];
    }
}

/// [`apply_scalar`] 32 elements a step with AVX2, the table as
/// [`Simd::tab16`](crate::arch::Simd::tab16) holds it (low bytes, high bytes).
///
/// # Safety
/// The CPU has AVX2 and F16C (the caller runs under
/// `#[target_feature(enable = "avx2,f16c")]`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn apply_avx2(t: &Table, codes: &[u8], out: &mut [u16]) {
    use crate::arch::Simd;
    use crate::arch::x86_64::Avx2;
    use core::arch::x86_64::*;
    let n = codes.len().min(out.len());
    let whole = n - n % 32;
    // SAFETY: AVX2 and F16C (caller); the table reads the 32 bytes of `t` (16
    // u16s), every load reads 32 bytes inside `codes[..whole]`, every store
    // writes 32 bytes inside `out[..whole]`.
    unsafe {
        let (lo, hi) = Avx2::new_unchecked().tab16(t.as_ptr().cast());
        let mut i = 0;
        while i < whole {
            let idx = _mm256_loadu_si256(codes.as_ptr().add(i).cast());
            let (l, h) = (_mm256_shuffle_epi8(lo, idx), _mm256_shuffle_epi8(hi, idx));
            // Per lane: a = elements [0..8 | 16..24], b = [8..16 | 24..32].
            let (a, b) = (_mm256_unpacklo_epi8(l, h), _mm256_unpackhi_epi8(l, h));
            let p = out.as_mut_ptr().add(i);
            _mm256_storeu_si256(p.cast(), _mm256_permute2x128_si256::<0x20>(a, b));
            _mm256_storeu_si256(p.add(16).cast(), _mm256_permute2x128_si256::<0x31>(a, b));
            i += 32;
        }
    }
    apply_scalar(t, &codes[whole..n], &mut out[whole..n]);
}

/// Splits words of 8 nibbles into bytes, nibble `t` of word `u` to `codes[8u + t]`.
#[inline(always)]
pub(super) fn split_scalar(words: &[u32], codes: &mut [u8]) {
    for (w, c) in words.iter().zip(codes.chunks_exact_mut(8)) {
        for (t, c) in c.iter_mut().enumerate() {
            *c = ((w >> (4 * t)) & 15) as u8;
        }
    }
}

/// [`split_scalar`] 8 words a step with AVX2, in 32-byte stores (so that
/// [`apply_avx2`]'s 32-byte loads of the same bytes forward from them).
///
/// # Safety
/// The CPU has AVX2; `codes` holds at least `8 * words.len()` bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn split_avx2(words: &[u32], codes: &mut [u8]) {
    use core::arch::x86_64::*;
    let whole = words.len() - words.len() % 8;
    assert!(codes.len() >= 8 * words.len());
    // SAFETY: AVX2 (caller); each step reads 32 bytes inside `words[..whole]` and
    // writes 64 bytes inside `codes[..8 * whole]` (length asserted).
    unsafe {
        let mask = _mm256_set1_epi8(15);
        for u in (0..whole).step_by(8) {
            let x = _mm256_loadu_si256(words.as_ptr().add(u).cast());
            let lo = _mm256_and_si256(x, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(x), mask);
            // Byte b holds nibbles 2b (low) and 2b + 1 (high): interleave them; per
            // lane, a = bytes [0..8 | 16..24], b = [8..16 | 24..32].
            let (a, b) = (_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi));
            let p = codes.as_mut_ptr().add(8 * u);
            _mm256_storeu_si256(p.cast(), _mm256_permute2x128_si256::<0x20>(a, b));
            _mm256_storeu_si256(p.add(32).cast(), _mm256_permute2x128_si256::<0x31>(a, b));
        }
    }
    split_scalar(&words[whole..], &mut codes[8 * whole..]);
}

/// Transposes an 8x8 block of words with AVX2: row `r` of the source is the 32
/// bytes `src[r]` (8 little-endian words), and column `c` goes to
/// `dst[at + c * stride..][..8]`.
///
/// # Safety
/// The CPU has AVX2.
///
/// # Panics
/// If a source row is not 32 bytes or a destination row leaves `dst`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn transpose8_avx2(src: [&[u8]; 8], dst: &mut [u32], at: usize, stride: usize) {
    use core::arch::x86_64::*;
    assert!(src.iter().all(|r| r.len() == 32));
    assert!(at + 7 * stride + 8 <= dst.len());
    // SAFETY: AVX2 (caller); each load reads one 32-byte source row, each store
    // writes 8 words inside `dst` (both asserted above).
    unsafe {
        let r: [__m256i; 8] = core::array::from_fn(|i| _mm256_loadu_si256(src[i].as_ptr().cast()));
        let cols = transpose8_regs(r);
        for (c, v) in cols.into_iter().enumerate() {
            _mm256_storeu_si256(dst.as_mut_ptr().add(at + c * stride).cast(), v);
        }
    }
}

/// The 8x8 transpose of the words in `r` (row `j` = `r[j]`): 2x2 blocks of
/// words, then of pairs, then of 128-bit halves.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn transpose8_regs(
    r: [core::arch::x86_64::__m256i; 8],
) -> [core::arch::x86_64::__m256i; 8] {
    use core::arch::x86_64::*;
    // SAFETY: register operations only; AVX2 (caller).
    unsafe {
        // 2x2 blocks of words, then of pairs, then of 128-bit halves.
        let a0 = _mm256_unpacklo_epi32(r[0], r[1]);
        let a1 = _mm256_unpackhi_epi32(r[0], r[1]);
        let a2 = _mm256_unpacklo_epi32(r[2], r[3]);
        let a3 = _mm256_unpackhi_epi32(r[2], r[3]);
        let a4 = _mm256_unpacklo_epi32(r[4], r[5]);
        let a5 = _mm256_unpackhi_epi32(r[4], r[5]);
        let a6 = _mm256_unpacklo_epi32(r[6], r[7]);
        let a7 = _mm256_unpackhi_epi32(r[6], r[7]);
        let b0 = _mm256_unpacklo_epi64(a0, a2);
        let b1 = _mm256_unpackhi_epi64(a0, a2);
        let b2 = _mm256_unpacklo_epi64(a1, a3);
        let b3 = _mm256_unpackhi_epi64(a1, a3);
        let b4 = _mm256_unpacklo_epi64(a4, a6);
        let b5 = _mm256_unpackhi_epi64(a4, a6);
        let b6 = _mm256_unpacklo_epi64(a5, a7);
        let b7 = _mm256_unpackhi_epi64(a5, a7);
        [
            _mm256_permute2x128_si256::<0x20>(b0, b4),
            _mm256_permute2x128_si256::<0x20>(b1, b5),
            _mm256_permute2x128_si256::<0x20>(b2, b6),
            _mm256_permute2x128_si256::<0x20>(b3, b7),
            _mm256_permute2x128_si256::<0x31>(b0, b4),
            _mm256_permute2x128_si256::<0x31>(b1, b5),
            _mm256_permute2x128_si256::<0x31>(b2, b6),
            _mm256_permute2x128_si256::<0x31>(b3, b7),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of_squares() -> Table {
        core::array::from_fn(|q| q as u16 * 1000 + 7)
    }

    #[test]
    fn scalar_lookup_and_split() {
        let t = table_of_squares();
        let codes: Vec<u8> = (0..37).map(|i| (i * 7 % 16) as u8).collect();
        let mut out = vec![0u16; 37];
        apply_scalar(&t, &codes, &mut out);
        let want: Vec<u16> = codes.iter().map(|&c| u16::from(c) * 1000 + 7).collect();
        assert_eq!(out, want);
        let mut c = [0u8; 16];
        split_scalar(&[0x7654_3210, 0xfedc_ba98], &mut c);
        assert_eq!(c, core::array::from_fn(|i| i as u8));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_steps_equal_the_scalar_ones() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED (path unavailable): AVX2 table lookup on this CPU");
            return;
        }
        let t = table_of_squares();
        for n in [0, 1, 31, 32, 33, 64, 95, 200] {
            let codes: Vec<u8> = (0..n).map(|i| (i * 11 % 16) as u8).collect();
            let (mut a, mut b) = (vec![0u16; n], vec![0u16; n]);
            apply_scalar(&t, &codes, &mut a);
            // SAFETY: AVX2 detected above.
            unsafe { apply_avx2(&t, &codes, &mut b) };
            assert_eq!(a, b, "{n} codes");
            let words: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
            let (mut a, mut b) = (vec![0u8; 8 * n], vec![0u8; 8 * n]);
            split_scalar(&words, &mut a);
            // SAFETY: AVX2 detected above; `b` holds 8 bytes per word.
            unsafe { split_avx2(&words, &mut b) };
            assert_eq!(a, b, "{n} words");
        }
        let rows: Vec<Vec<u8>> = (0..8u32)
            .map(|r| {
                (0..8u32)
                    .flat_map(|c| (r * 100 + c).to_le_bytes())
                    .collect()
            })
            .collect();
        let src: [&[u8]; 8] = core::array::from_fn(|r| rows[r].as_slice());
        let mut dst = vec![0u32; 3 + 7 * 10 + 8];
        // SAFETY: AVX2 detected above.
        unsafe { transpose8_avx2(src, &mut dst, 3, 10) };
        for c in 0..8 {
            let col: Vec<u32> = (0..8).map(|r| r * 100 + c as u32).collect();
            assert_eq!(dst[3 + c * 10..][..8], col[..], "column {c}");
        }
    }
}
