//! 4-bit table lookups by the host's AVX-512 word permute, called from JIT code
//! (one call: 32 elements, one 64-byte step). Cranelift has 128-bit vectors
//! only and no word permute: its own lookups of 16-bit entries take a byte
//! shuffle per plane and two interleaves per 16 elements, and a streamed output
//! goes through a staging block and a copy. A large output's calls stream
//! straight to dst instead.
//!
//! Measured on AMD EPYC Zen 5 (4096x4096, groups of 128, one thread,
//! `dq bench --no-memcpy`, alternated builds; BENCHMARKS.md has the runs):
//! u4 -> f16 1.09-1.11 -> 0.99-1.01 ms (dst 16 bytes past a line) and 0.85-0.86
//! ms (on one); u4 -> bf16 1.02-1.05 -> 0.87-0.90 ms.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// Emits a call that looks up the 32 nibbles of the 16 bytes at `sp` (low
/// nibble first) in the 16 two-byte entries `table` (I8X16: entries 0..8 and
/// 8..16) and writes the 64 bytes of results to `dp`: with non-temporal stores
/// when `stream` (where `dp` is 16-byte aligned). The emitting code guarantees
/// `sp` readable for 16 bytes, `dp` writable for 64, and a host with AVX-512 F,
/// BW and VL.
pub(crate) fn lut16_32(
    b: &mut FunctionBuilder<'_>,
    (sp, dp): (Value, Value),
    table: [Value; 2],
    stream: bool,
) {
    let f = if stream { lut16_stream } else { lut16_store };
    crate::host_f16::call(b, f, &[sp, dp, table[0], table[1]]);
}

/// The mask of a dword's low nibble, for the lookups' index.
#[cfg(target_arch = "x86_64")]
static LOW_NIBBLE: u32 = 15;

/// The lookups of [`lut16_32`] into `zmm17`: the 32 nibbles at `rdi` in the 16
/// words of `xmm0`, `xmm1`; works in `zmm16..zmm18`.
#[cfg(target_arch = "x86_64")]
macro_rules! lookup {
    () => {
        concat!(
            // The table in the low 32 bytes (the rest zero).
            "vinserti32x4 ymm16, ymm0, xmm1, 1\n",
            // Byte b -> words (b & 15, b >> 4) of a dword: (d & 15) | (d << 12),
            // so the permute's 5 index bits stay under 16.
            "vpmovzxbd zmm17, [rdi]\n",
            "vpslld zmm18, zmm17, 12\n",
            "vpternlogd zmm17, zmm18, dword ptr [rip + {low}]{{1to16}}, 0xec\n",
            "vpermw zmm17, zmm17, zmm16\n",
        )
    };
}

/// [`lut16_32`]'s lookups stored at `rsi`. Called under `preserve_all`: it works
/// in `zmm16..zmm18`, which Cranelift never allocates, and changes no other
/// register.
///
/// Only called by JIT code, with `rdi` and `rsi` valid as [`lut16_32`] says, on
/// a CPU with AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_store() {
    core::arch::naked_asm!(lookup!(), "vmovdqu64 [rsi], zmm17", "ret", low = sym LOW_NIBBLE)
}

/// [`lut16_store`] with non-temporal stores: one where `rsi` is on a line, four
/// of 16 bytes where it is 16-byte aligned (rows 16 bytes past a line: the
/// write combining completes each line from two calls), ordinary ones else.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn lut16_stream() {
    core::arch::naked_asm!(
        lookup!(),
        "test sil, 63",
        "jnz 3f",
        "vmovntdq [rsi], zmm17",
        "ret",
        "3:",
        "test sil, 15",
        "jnz 2f",
        "vmovntdq [rsi], xmm17",
        "vextracti32x4 xmm18, zmm17, 1",
        "vmovntdq [rsi + 16], xmm18",
        "vextracti32x4 xmm18, zmm17, 2",
        "vmovntdq [rsi + 32], xmm18",
        "vextracti32x4 xmm18, zmm17, 3",
        "vmovntdq [rsi + 48], xmm18",
        "ret",
        "2:",
        "vmovdqu64 [rsi], zmm17",
        "ret",
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
