//! Non-temporal stores of whole cache lines, called from JIT code: Cranelift has
//! no non-temporal store. A linear's 16-bit output is written once and not read
//! back, so streaming its lines past the caches saves reading each line before
//! writing it: on AMD EPYC Zen 4 GPTQ and AWQ into a 64-byte aligned output ran
//! markedly faster (BENCHMARKS.md). Lines that do not start on a 64-byte
//! boundary would each cost two partial line writes (measured much slower), so
//! the functions stream only whole, aligned lines.
//!
//! A naked helper, called once per line from code that keeps its tables in
//! vector registers: an ordinary call, whose convention makes the caller save
//! every vector register, measured markedly slower (BENCHMARKS.md). Its
//! contract, and that of every naked helper, is checked by `regs`' test: a
//! call changes no vector or mask register.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// Emits a call that writes the four I8X16 of `v`, in order, to the 64 bytes at
/// `a` with non-temporal stores. The emitting code guarantees that `a` is
/// 64-byte aligned and the line is inside the output.
pub(crate) fn line(b: &mut FunctionBuilder<'_>, a: Value, v: [Value; 4]) {
    let mut args = vec![a];
    args.extend(v);
    crate::host_f16::call(b, stream_line, &args);
}

/// `movntdq` of `xmm0..xmm3` to the 64 bytes at `rdi`. Called under
/// `preserve_all`; it changes no register.
///
/// Only called by JIT code, with `rdi` 64-byte aligned and valid for writing 64
/// bytes; the caller orders the stores with `sfence` before the output is read.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn stream_line() {
    core::arch::naked_asm!(
        "movntdq [rdi], xmm0",
        "movntdq [rdi + 16], xmm1",
        "movntdq [rdi + 32], xmm2",
        "movntdq [rdi + 48], xmm3",
        "ret",
    )
}

/// [`stream_line`] off x86-64, where no linear function is compiled.
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn stream_line() {
    unreachable!("the linear JIT is x86-64 only")
}

/// The register contract of the naked helpers: a call changes no vector or mask
/// register. Where AVX-512 F and BW are present, every `zmm0..zmm31` and
/// `k1..k7` holds a distinct pattern across the call and is compared after it.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) mod regs {
    /// `zmm0..zmm31` (64 bytes each), then `k0..k7`.
    #[repr(C, align(64))]
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub(crate) struct Regs {
        pub z: [[u64; 8]; 32],
        pub k: [u64; 8],
    }

    impl Regs {
        /// A distinct pattern in every lane of every register (`k0` unused).
        pub fn pattern() -> Regs {
            let lane = |r: u64, i: u64| 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(64 * r + i + 1);
            Regs {
                z: core::array::from_fn(|r| core::array::from_fn(|i| lane(r as u64, i as u64))),
                k: core::array::from_fn(|r| lane(40 + r as u64, 0)),
            }
        }

        /// Fails naming the first register of `self` that differs from `before`.
        pub fn check(&self, before: &Regs, what: &str) {
            for (r, (a, b)) in self.z.iter().zip(&before.z).enumerate() {
                assert_eq!(a, b, "{what}: zmm{r} changed across the call");
            }
            for (r, (a, b)) in self.k.iter().zip(&before.k).enumerate().skip(1) {
                assert_eq!(a, b, "{what}: k{r} changed across the call");
            }
        }
    }

    /// `$a N $b N $c` for each `N`, concatenated.
    macro_rules! each {
        ($a:literal, $b:literal, $c:literal; $($n:literal)*) => {
            concat!($($a, $n, $b, $n, $c),*)
        };
    }

    /// Asm loading (`load`) `zmm0..31` from `r12` and `k1..7` from `r14`, or
    /// storing (`store`) them to `r13` and `r15`.
    macro_rules! all_regs {
        (load) => {
            concat!(
                $crate::host_store::regs::each!("vmovdqu64 zmm", ", [r12 + 64*", "]\n"; 0 1 2 3 4 5 6 7 8 9 10 11 12
                    13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31),
                $crate::host_store::regs::each!("kmovq k", ", [r14 + 8*", "]\n"; 1 2 3 4 5 6 7),
            )
        };
        (store) => {
            concat!(
                $crate::host_store::regs::each!("vmovdqu64 [r13 + 64*", "], zmm", "\n"; 0 1 2 3 4 5 6 7 8 9 10 11 12
                    13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31),
                $crate::host_store::regs::each!("kmovq [r15 + 8*", "], k", "\n"; 1 2 3 4 5 6 7),
            )
        };
    }

    /// Calls `$f` with `rdi`, `rsi` and `rdx` set to `$rdi`, `$rsi`, `$rdx`
    /// and every vector and mask register loaded from `$before`; returns the
    /// registers after the call. The caller checks AVX-512 F and BW first.
    macro_rules! call_holding {
        ($f:path, $before:expr, ($rdi:expr, $rsi:expr, $rdx:expr)) => {{
            let before: &$crate::host_store::regs::Regs = $before;
            let mut after = before.clone();
            // SAFETY: AVX-512 F and BW are present (the caller checked); the
            // asm reads `before` and writes `after` (both ours, 64-byte
            // aligned), the helper gets the arguments its caller promises
            // (the test's buffers), and every register the C ABI lets a call
            // change is declared clobbered, so the asm itself cannot break
            // the test function's state even if the helper broke its contract.
            unsafe {
                core::arch::asm!(
                    $crate::host_store::regs::all_regs!(load),
                    "call {f}",
                    $crate::host_store::regs::all_regs!(store),
                    f = sym $f,
                    in("rdi") $rdi,
                    in("rsi") $rsi,
                    in("rdx") $rdx,
                    in("r12") before.z.as_ptr(),
                    in("r13") after.z.as_mut_ptr(),
                    in("r14") before.k.as_ptr(),
                    in("r15") after.k.as_mut_ptr(),
                    clobber_abi("C"),
                );
            }
            after
        }};
    }
    pub(crate) use {all_regs, call_holding, each};

    /// True where the test can load every register; says so on stderr, or
    /// fails under `DQ_REQUIRE_ALL_PATHS=1`, where it cannot.
    pub(crate) fn available(what: &str) -> bool {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return true;
        }
        assert!(
            std::env::var_os("DQ_REQUIRE_ALL_PATHS").is_none_or(|v| v != "1"),
            "DQ_REQUIRE_ALL_PATHS=1 but {what} needs AVX-512 F and BW"
        );
        eprintln!("SKIPPED (path unavailable): {what} (no AVX-512 F and BW)");
        false
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::regs::{Regs, available, call_holding};

    /// [`stream_line`](super::stream_line) writes `xmm0..xmm3` to the line
    /// and changes no vector or mask register.
    #[test]
    fn stream_line_changes_no_register() {
        if !available("stream_line's register test") {
            return;
        }
        #[repr(align(64))]
        struct Line([u64; 8]);
        let mut line = Line([0; 8]);
        let before = Regs::pattern();
        let dst = line.0.as_mut_ptr();
        let after = call_holding!(super::stream_line, &before, (dst, 0usize, 0usize));
        dq_runtime::arch::stream_fence();
        let want: Vec<u64> = (0..4).flat_map(|r| before.z[r][..2].to_vec()).collect();
        assert_eq!(line.0.to_vec(), want, "the line holds xmm0..xmm3");
        after.check(&before, "stream_line");
    }
}
