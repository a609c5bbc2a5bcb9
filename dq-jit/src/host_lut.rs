//! 4-bit table lookups by the host's AVX-512 word permute, called from JIT code:
//! one call looks up a whole run of a segment (every 32 elements from the src
//! address up to the src end). Cranelift has 128-bit vectors only and no word
//! permute: its own lookups of 16-bit entries take a byte shuffle per plane and
//! two interleaves per 16 elements, and a streamed output goes through a
//! staging block and a copy. A large output's calls stream straight to dst
//! instead.
//!
//! Measured on AMD EPYC Zen 5 (4096x4096, groups of 128, one thread,
//! `dq bench --no-memcpy`, alternated builds; BENCHMARKS.md has the runs):
//! u4 -> f16 with dst 16 bytes past a line, Cranelift's lookups 1.09-1.11 ms,
//! a call per 32 elements 0.99-1.01 ms, a call per run 0.75-0.77 ms (the
//! generated backend: 0.75-0.76).
//!
//! A whole group's table can come as f32 values that the call rounds
//! ([`HostTable::F16`], [`HostTable::Bf16`]): the kernel's own rounding (an
//! F16C call through memory, or integer code for bf16) costs short groups more
//! than their lookups. s4 -> f16 in groups of 32: 1.72-1.74 -> 1.15-1.25 ms
//! (generated 1.14-1.17); s4 -> bf16: 1.53 -> 1.29 ms (generated 0.93-0.97).

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// The table of a run of [`lut16_run`].
#[derive(Clone, Copy)]
pub(crate) enum HostTable {
    /// The 16 two-byte entries (I8X16: entries 0..8 and 8..16).
    Halves([Value; 2]),
    /// The 16 values as four F32X4, which the host rounds to f16 (nearest
    /// even, NaNs quieted: the rounding of [`crate::host_f16::round`]).
    F16([Value; 4]),
    /// The 16 values as four F32X4, which the host rounds to bf16 (the
    /// reference's rounding, `dq_runtime::convert::f32_to_bf16_bits`).
    Bf16([Value; 4]),
}

/// Emits a call that looks up the nibbles from `sp` (low nibble first) up to
/// `send`, 16 bytes (32 elements) a step, in `table`, writing 64 bytes of
/// results a step from `dp` on: with non-temporal stores when `stream` (where
/// `dp` is 16-byte aligned). The emitting code guarantees `send - sp` a nonzero
/// multiple of 16, `sp..send` readable, `dp` writable for 4 bytes per src byte,
/// and a host with AVX-512 F, BW and VL.
pub(crate) fn lut16_run(
    b: &mut FunctionBuilder<'_>,
    (sp, dp, send): (Value, Value, Value),
    table: HostTable,
    stream: bool,
) {
    let mut args = vec![sp, dp, send];
    let (store, streamed): (unsafe extern "C" fn(), unsafe extern "C" fn()) = match table {
        HostTable::Halves(t) => {
            args.extend(t);
            (lut16_store, lut16_stream)
        }
        HostTable::F16(t) => {
            args.extend(t);
            (lut16_store_f16, lut16_stream_f16)
        }
        HostTable::Bf16(t) => {
            args.extend(t);
            (lut16_store_bf16, lut16_stream_bf16)
        }
    };
    crate::host_f16::call(b, if stream { streamed } else { store }, &args);
}

/// The mask of a dword's low nibble, for the lookups' index.
#[cfg(target_arch = "x86_64")]
static LOW_NIBBLE: u32 = 15;

/// bf16 rounding's constants: the kept half's low bit, the rounding bias less
/// that bit, a NaN's quiet bit.
#[cfg(target_arch = "x86_64")]
static ONE: u32 = 1;
#[cfg(target_arch = "x86_64")]
static HALF: u32 = 0x7fff;
#[cfg(target_arch = "x86_64")]
static QUIET: u32 = 0x40;

/// A loop of [`lut16_run`]'s steps, each stored by `$store` (asm storing
/// `zmm17` at `rsi`), from label `$l`; falls through when `rdi` reaches `rdx`.
/// Works in `zmm17`, `zmm18`; the table is in the low 32 bytes of `zmm16`.
#[cfg(target_arch = "x86_64")]
macro_rules! steps {
    ($l:literal, $store:expr) => {
        concat!(
            $l,
            ":\n",
            // Byte b -> words (b & 15, b >> 4) of a dword: (d & 15) | (d << 12),
            // so the permute's 5 index bits stay under 16.
            "vpmovzxbd zmm17, [rdi]\n",
            "vpslld zmm18, zmm17, 12\n",
            "vpternlogd zmm17, zmm18, dword ptr [rip + {low}]{{1to16}}, 0xec\n",
            "vpermw zmm17, zmm17, zmm16\n",
            $store,
            "add rdi, 16\n",
            "add rsi, 64\n",
            "cmp rdi, rdx\n",
            "jb ",
            $l,
            "b\n",
        )
    };
}

/// [`lut16_run`]'s entry: saves the two address registers it advances and puts
/// the table in the low 32 bytes of `zmm16`: `halves` from `xmm0`, `xmm1`;
/// `f16` and `bf16` rounded from the f32 in `xmm0..xmm3`.
#[cfg(target_arch = "x86_64")]
macro_rules! enter {
    (halves) => {
        concat!(
            "push rdi\n",
            "push rsi\n",
            "vinserti32x4 ymm16, ymm0, xmm1, 1\n",
        )
    };
    (f16) => {
        concat!(
            "push rdi\n",
            "push rsi\n",
            floats!(),
            "vcvtps2ph ymm16, zmm16, 0\n",
        )
    };
    (bf16) => {
        concat!(
            "push rdi\n",
            "push rsi\n",
            floats!(),
            // f32_to_bf16_bits: (x + 0x7fff + lsb) >> 16, a NaN (x >> 16) | 0x40.
            "vpsrld zmm17, zmm16, 16\n",
            "vpandd zmm18, zmm17, dword ptr [rip + {one}]{{1to16}}\n",
            "vpaddd zmm18, zmm18, zmm16\n",
            "vpaddd zmm18, zmm18, dword ptr [rip + {half}]{{1to16}}\n",
            "vpsrld zmm18, zmm18, 16\n",
            "vcmpunordps k1, zmm16, zmm16\n",
            "vpord zmm18 {{k1}}, zmm17, dword ptr [rip + {quiet}]{{1to16}}\n",
            "vpmovdw ymm16, zmm18\n",
        )
    };
}

/// The 16 f32 of `xmm0..xmm3` (four each, in order) into `zmm16`; uses `zmm17`.
#[cfg(target_arch = "x86_64")]
macro_rules! floats {
    () => {
        concat!(
            "vinsertf32x4 ymm16, ymm0, xmm1, 1\n",
            "vinsertf32x4 ymm17, ymm2, xmm3, 1\n",
            "vinsertf64x4 zmm16, zmm16, ymm17, 1\n",
        )
    };
}

/// [`lut16_run`]'s return: restores the address registers.
#[cfg(target_arch = "x86_64")]
macro_rules! leave {
    () => {
        "pop rsi\npop rdi\nret\n"
    };
}

/// The loop of [`lut16_store`] after `enter!`.
#[cfg(target_arch = "x86_64")]
macro_rules! store {
    () => {
        concat!(steps!("2", "vmovdqu64 [rsi], zmm17\n"), leave!())
    };
}

/// The loops of [`lut16_stream`] after `enter!`: one per dst alignment.
#[cfg(target_arch = "x86_64")]
macro_rules! stream {
    () => {
        concat!(
            "test sil, 63\n",
            "jnz 5f\n",
            steps!("2", "vmovntdq [rsi], zmm17\n"),
            leave!(),
            "5:\n",
            "test sil, 15\n",
            "jnz 6f\n",
            steps!(
                "3",
                concat!(
                    "vmovntdq [rsi], xmm17\n",
                    "vextracti32x4 xmm18, zmm17, 1\n",
                    "vmovntdq [rsi + 16], xmm18\n",
                    "vextracti32x4 xmm18, zmm17, 2\n",
                    "vmovntdq [rsi + 32], xmm18\n",
                    "vextracti32x4 xmm18, zmm17, 3\n",
                    "vmovntdq [rsi + 48], xmm18\n",
                )
            ),
            leave!(),
            "6:\n",
            steps!("4", "vmovdqu64 [rsi], zmm17\n"),
            leave!(),
        )
    };
}

/// [`lut16_run`]'s lookups in a [`HostTable::Halves`] with ordinary stores.
/// Called under `preserve_all`: it works in `zmm16..zmm18`, which Cranelift
/// never allocates, restores the registers it advances, and changes no other
/// register.
///
/// Only called by JIT code, with `rdi`, `rdx` and `rsi` valid as [`lut16_run`]
/// says, on a CPU with AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_store() {
    core::arch::naked_asm!(enter!(halves), store!(), low = sym LOW_NIBBLE)
}

/// [`lut16_store`] with non-temporal stores: one a step where `rsi` is on a
/// line, four of 16 bytes where it is 16-byte aligned (rows 16 bytes past a
/// line: the write combining completes each line from two steps), ordinary
/// ones else. Every step of a run has the first one's alignment.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_stream() {
    core::arch::naked_asm!(enter!(halves), stream!(), low = sym LOW_NIBBLE)
}

/// [`lut16_store`] in a [`HostTable::F16`].
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_store_f16() {
    core::arch::naked_asm!(enter!(f16), store!(), low = sym LOW_NIBBLE)
}

/// [`lut16_stream`] in a [`HostTable::F16`].
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_stream_f16() {
    core::arch::naked_asm!(enter!(f16), stream!(), low = sym LOW_NIBBLE)
}

/// [`lut16_store`] in a [`HostTable::Bf16`]; also changes `k1`, which
/// Cranelift never allocates and the System V ABI does not preserve.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_store_bf16() {
    core::arch::naked_asm!(
        enter!(bf16),
        store!(),
        low = sym LOW_NIBBLE,
        one = sym ONE,
        half = sym HALF,
        quiet = sym QUIET,
    )
}

/// [`lut16_stream`] in a [`HostTable::Bf16`]; changes `k1` as
/// [`lut16_store_bf16`] does.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_stream_bf16() {
    core::arch::naked_asm!(
        enter!(bf16),
        stream!(),
        low = sym LOW_NIBBLE,
        one = sym ONE,
        half = sym HALF,
        quiet = sym QUIET,
    )
}

/// The helpers off x86-64, where no kernel calls them.
#[cfg(not(target_arch = "x86_64"))]
mod off_x86 {
    pub(super) unsafe extern "C" fn lut16_store() {
        unreachable!("host lookups are x86-64 only")
    }
    pub(super) use self::lut16_store as lut16_stream;
    pub(super) use self::lut16_store as lut16_store_f16;
    pub(super) use self::lut16_store as lut16_stream_f16;
    pub(super) use self::lut16_store as lut16_store_bf16;
    pub(super) use self::lut16_store as lut16_stream_bf16;
}
#[cfg(not(target_arch = "x86_64"))]
use off_x86::*;
