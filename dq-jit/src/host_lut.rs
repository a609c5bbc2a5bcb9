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

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// Emits a call that looks up the nibbles from `sp` (low nibble first) up to
/// `send`, 16 bytes (32 elements) a step, in the 16 two-byte entries `table`
/// (I8X16: entries 0..8 and 8..16), writing 64 bytes of results a step from
/// `dp` on: with non-temporal stores when `stream` (where `dp` is 16-byte
/// aligned). The emitting code guarantees `send - sp` a nonzero multiple of 16,
/// `sp..send` readable, `dp` writable for 4 bytes per src byte, and a host with
/// AVX-512 F, BW and VL.
pub(crate) fn lut16_run(
    b: &mut FunctionBuilder<'_>,
    (sp, dp, send): (Value, Value, Value),
    table: [Value; 2],
    stream: bool,
) {
    let f = if stream { lut16_stream } else { lut16_store };
    crate::host_f16::call(b, f, &[sp, dp, send, table[0], table[1]]);
}

/// The mask of a dword's low nibble, for the lookups' index.
#[cfg(target_arch = "x86_64")]
static LOW_NIBBLE: u32 = 15;

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
/// the table (`xmm0`, `xmm1`) in `ymm16`.
#[cfg(target_arch = "x86_64")]
macro_rules! enter {
    () => {
        concat!(
            "push rdi\n",
            "push rsi\n",
            "vinserti32x4 ymm16, ymm0, xmm1, 1\n",
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

/// [`lut16_run`]'s lookups with ordinary stores. Called under `preserve_all`: it
/// works in `zmm16..zmm18`, which Cranelift never allocates, restores the
/// registers it advances, and changes no other register.
///
/// Only called by JIT code, with `rdi`, `rdx` and `rsi` valid as [`lut16_run`]
/// says, on a CPU with AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_store() {
    core::arch::naked_asm!(
        enter!(),
        steps!("2", "vmovdqu64 [rsi], zmm17\n"),
        leave!(),
        low = sym LOW_NIBBLE,
    )
}

/// [`lut16_store`] with non-temporal stores: one a step where `rsi` is on a
/// line, four of 16 bytes where it is 16-byte aligned (rows 16 bytes past a
/// line: the write combining completes each line from two steps), ordinary
/// ones else. Every step of a run has the first one's alignment.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_stream() {
    core::arch::naked_asm!(
        enter!(),
        "test sil, 63",
        "jnz 5f",
        steps!("2", "vmovntdq [rsi], zmm17\n"),
        leave!(),
        "5:",
        "test sil, 15",
        "jnz 6f",
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
        "6:",
        steps!("4", "vmovdqu64 [rsi], zmm17\n"),
        leave!(),
        low = sym LOW_NIBBLE,
    )
}

/// [`lut16_store`] off x86-64, where no kernel calls it.
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn lut16_store() {
    unreachable!("host lookups are x86-64 only")
}

/// [`lut16_stream`] off x86-64, where no kernel calls it.
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn lut16_stream() {
    unreachable!("host lookups are x86-64 only")
}
