//! The linear JIT's streamed lines: a 16-bit output whose rows start on a 64-byte
//! line is written a whole line (32 inputs) at a time with non-temporal stores,
//! 8 inputs at a time with plain stores up to and after the lines. Random GPTQ-,
//! AWQ- and compressed-tensors-like linears (the layouts that stream: words along
//! K side by side by row or by input, words along N side by side) with K a
//! multiple of 32, group sizes that do and do not keep runs on
//! lines, and row ranges, into outputs that end at a guard page (a line written
//! past the end faults) or start right after one; bit for bit against the
//! generated driver and the same JIT with streaming off, and every run counted as
//! streamed. Rows that start 16, 32 or 48 bytes into a line stream too where
//! groups are whole lines (a line across two groups is looked up with both
//! groups' tables): those outputs sit between sentinel bytes (a line written
//! across either end changes them) next to a guard page. Other outputs off a
//! line are not streamed.

use crate::support;

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
#[test]
fn linear_streams_need_linux_x86_64() {
    support::path_unavailable("linear streamed lines (need linux on x86_64: guard pages)");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux {
    use super::support::Rng;
    use super::support::guard::{Guard, GuardBuf};
    use dq_jit::LinearJit;
    use dq_runtime::linear::{Groups, Linear, Out, Packed, Packing, ScaleType, Scales};
    use half::{bf16, f16};

    /// Where the words of a 4-bit linear lie.
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        /// `[K / 8, N]` words, fields along K (GPTQ).
        Gptq,
        /// `[K, N / 8]` words, fields along N (AWQ).
        Awq,
        /// `[N, K / 8]` words, fields along K (compressed-tensors).
        Ct,
    }

    /// The buffers of one random linear.
    struct Case {
        n: usize,
        k: usize,
        size: usize,
        layout: Layout,
        words: Vec<u8>,
        zeros: Vec<u8>,
        scales: Vec<u8>,
    }

    /// A random case, its group size `size` where given.
    fn random_case(rng: &mut Rng, size: Option<usize>) -> Case {
        // Now and then more rows than a staged tile's 1024.
        let columns = if rng.one_in(4) { 280 } else { 40 };
        let n = 8 * (1 + rng.below(columns) as usize);
        let k = 32 * (1 + rng.below(40) as usize);
        let size = size.unwrap_or_else(|| rng.pick(&[8, 16, 24, 32, 40, 64, 128, k]));
        let groups = k.div_ceil(size);
        // f16 scales: normals of both signs, a zero now and then.
        let scales = (0..n * groups)
            .flat_map(|_| {
                let h = if rng.one_in(16) {
                    0
                } else {
                    0x1800 + rng.below(0x1800) as u16
                };
                (h | (rng.below(2) as u16) << 15).to_le_bytes()
            })
            .collect();
        Case {
            n,
            k,
            size,
            layout: rng.pick(&[Layout::Gptq, Layout::Awq, Layout::Ct]),
            words: rng.bytes(n * k / 2),
            zeros: rng.bytes(groups * n / 2),
            scales,
        }
    }

    impl Case {
        fn linear(&self) -> Linear<'_> {
            let groups = self.k.div_ceil(self.size);
            let (inner, awq) = ([0, 1, 2, 3, 4, 5, 6, 7], [0, 4, 1, 5, 2, 6, 3, 7]);
            let (packing, strides, order) = match self.layout {
                Layout::Awq => (Packing::Outer { order: awq }, (1, self.n / 8), awq),
                Layout::Gptq => (Packing::Inner, (1, self.n), inner),
                Layout::Ct => (Packing::Inner, (self.k / 8, 1), inner),
            };
            let weights = Packed {
                words: &self.words,
                bits: 4,
                packing,
                row_stride: strides.0,
                col_stride: strides.1,
                offset: 0,
            };
            let zeros = Packed {
                words: &self.zeros,
                bits: 4,
                packing: Packing::Outer { order },
                row_stride: 1,
                col_stride: self.n / 8,
                offset: 1,
            };
            let scales = Scales {
                bytes: &self.scales,
                dtype: ScaleType::F16,
                row_stride: 1,
                col_stride: self.n,
            };
            let map = Groups::Size(self.size);
            Linear::new(self.n, self.k, groups, weights, Some(zeros), scales, map).unwrap()
        }
    }

    /// Rows `rows` of `l` as `T` bits through `jit` into a buffer fenced by a guard
    /// page as `guard` says, starting `skew` bytes (under 64) into a line: the output
    /// lies between `skew` sentinel bytes before and `64 - skew` after (none where
    /// `skew` is 0), which must come back unchanged, and the buffer (a whole number
    /// of lines) is page-aligned at the guard's side.
    fn run<T: Out + bytemuck::Pod>(
        jit: &LinearJit,
        l: &Linear<'_>,
        rows: std::ops::Range<usize>,
        (guard, skew): (Guard, usize),
    ) -> Vec<u8> {
        const SENTINEL: u8 = 0xa5;
        let len = rows.len() * l.k() * size_of::<T>();
        let after = if skew == 0 { 0 } else { 64 - skew };
        let mut buf = GuardBuf::new(&vec![SENTINEL; skew + len + after], guard);
        let out: &mut [T] = bytemuck::cast_slice_mut(&mut buf.as_mut_slice()[skew..skew + len]);
        assert_eq!(
            out.as_ptr() as usize % 64,
            skew,
            "the output's offset into a line"
        );
        jit.run(l, rows, out).unwrap();
        let all = buf.as_slice();
        assert!(
            all[..skew]
                .iter()
                .chain(&all[skew + len..])
                .all(|&b| b == SENTINEL),
            "a byte outside the output written"
        );
        all[skew..skew + len].to_vec()
    }

    /// Rows `rows` of `l` as `T` bits through the generated driver.
    fn generated<T: Out + bytemuck::Pod + Default>(
        l: &Linear<'_>,
        rows: std::ops::Range<usize>,
    ) -> Vec<u8> {
        let mut out = vec![T::default(); rows.len() * l.k()];
        l.run(rows, &mut out).unwrap();
        bytemuck::cast_slice(&out).to_vec()
    }

    fn check<T: Out + bytemuck::Pod + Default>(seed: u64) {
        let mut rng = Rng::new(seed);
        let case = random_case(&mut rng, None);
        let l = case.linear();
        let streaming = LinearJit::new();
        let plain = LinearJit::new().with_streaming(false);
        let a = rng.below(case.n as u64) as usize;
        let b = a + 1 + rng.below((case.n - a) as u64) as usize;
        for rows in [0..case.n, a..b] {
            let what = format!(
                "seed {seed}: {}x{} group {} {:?} rows {rows:?}",
                case.n, case.k, case.size, case.layout
            );
            let want = generated::<T>(&l, rows.clone());
            for guard in [Guard::After, Guard::Before] {
                for skew in [0, 16, 32, 48] {
                    // Rows off a line stream where groups are whole lines.
                    let streams = skew == 0 || case.size.is_multiple_of(32);
                    let before = streaming.stats().streamed;
                    let got = run::<T>(&streaming, &l, rows.clone(), (guard, skew));
                    assert_eq!(
                        streaming.stats().streamed,
                        before + u64::from(streams),
                        "{what}: {skew} bytes into a line: streamed {streams} expected"
                    );
                    assert!(
                        got == want,
                        "{what}: {skew} bytes into a line: output differs"
                    );
                }
            }
            assert!(
                run::<T>(&plain, &l, rows.clone(), (Guard::After, 16)) == want,
                "{what}: plain output differs"
            );
        }
    }

    #[test]
    fn streamed_lines_equal_the_generated_driver() {
        for seed in 0..48 {
            check::<bf16>(0x57_0000 + seed);
            check::<f16>(0x57_1000 + seed);
        }
    }

    #[test]
    fn outputs_off_their_lines() {
        let mut rng = Rng::new(5);
        let cases = [
            (Layout::Awq, 64),
            (Layout::Gptq, 64),
            (Layout::Ct, 32),
            (Layout::Awq, 8),
            (Layout::Gptq, 24),
        ];
        for (layout, size) in cases {
            let mut case = random_case(&mut rng, Some(size));
            case.layout = layout;
            let l = case.linear();
            let jit = LinearJit::new();
            let want = generated::<bf16>(&l, 0..case.n);
            let len = case.n * case.k;
            let mut buf = vec![bf16::ZERO; len + 64];
            let line = (64 - buf.as_ptr() as usize % 64) % 64 / 2;
            let what = format!("{layout:?}, group {size}");
            // 16 bytes past a line: streamed where groups are whole lines.
            let whole = size.is_multiple_of(32);
            let out = &mut buf[line + 8..line + 8 + len];
            jit.run(&l, 0..case.n, out).unwrap();
            assert_eq!(jit.stats().streamed, u64::from(whole), "{what}");
            assert!(bytemuck::cast_slice::<bf16, u8>(out) == want, "{what}");
            // 2 bytes past one: never.
            let out = &mut buf[line + 1..line + 1 + len];
            jit.run(&l, 0..case.n, out).unwrap();
            assert_eq!(jit.stats().streamed, u64::from(whole), "{what}");
            assert!(bytemuck::cast_slice::<bf16, u8>(out) == want, "{what}");
            // From the line itself, always.
            let out = &mut buf[line..line + len];
            jit.run(&l, 0..case.n, out).unwrap();
            assert_eq!(jit.stats().streamed, 1 + u64::from(whole), "{what}");
            assert!(bytemuck::cast_slice::<bf16, u8>(out) == want, "{what}");
        }
    }
}
