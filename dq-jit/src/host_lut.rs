//! 4-bit table lookups by the host's AVX-512 permutes (`vpermw`, `vpermps`),
//! called from JIT code: one call looks up a whole run of a segment (every 32
//! elements from the src address up to the src end). Cranelift has 128-bit
//! vectors only and no word or dword permute: its own lookups take a byte
//! shuffle per plane of the entries and two or four interleaves per 16
//! elements, and a streamed output goes through a staging block and a copy. A
//! large output's calls stream straight to dst instead.
//!
//! Measured on AMD EPYC Zen 5 (BENCHMARKS.md): a call per run brings u4 -> f16
//! level with the generated backend, where Cranelift's own lookups and a call
//! per 32 elements were markedly slower.
//!
//! A whole group's table can come as f32 values that the call rounds
//! ([`HostTable::F16`], [`HostTable::Bf16`]): the kernel's own rounding (an
//! F16C call through memory, or integer code for bf16) costs short groups more
//! than their lookups.
//!
//! f32 results take `vpermps` (the 16 entries are one register), level with the
//! generated backend on s4 -> f32 in groups of 32 and 128.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

/// The table of a run of [`lut_run`].
#[derive(Clone, Copy)]
pub(crate) enum HostTable {
    /// 16 two-byte entries (I8X16: entries 0..8 and 8..16).
    Halves([Value; 2]),
    /// 16 four-byte entries (f32 bits, I8X16 or F32X4: entries 4k..4k+4).
    F32([Value; 4]),
    /// The 16 values as four F32X4, which the host rounds to f16 (nearest
    /// even, NaNs quieted: the rounding of [`crate::host_f16::round`]).
    F16([Value; 4]),
    /// The 16 values as four F32X4, which the host rounds to bf16 (the
    /// reference's rounding, `dq_runtime::convert::f32_to_bf16_bits`).
    Bf16([Value; 4]),
}

/// Emits a call that looks up the nibbles from `sp` (low nibble first) up to
/// `send`, 16 bytes (32 elements) a step, in `table`, writing the results from
/// `dp` on (64 bytes a step, 128 for [`HostTable::F32`]): with non-temporal
/// stores when `stream` (where `dp` is 16-byte aligned). The emitting code
/// guarantees `send - sp` a nonzero multiple of 16, `sp..send` readable, `dp`
/// writable for the results, and a host with AVX-512 F, BW and VL.
pub(crate) fn lut_run(
    b: &mut FunctionBuilder<'_>,
    (sp, dp, send): (Value, Value, Value),
    table: HostTable,
    stream: bool,
) {
    type Helper = unsafe extern "C" fn();
    let (store, streamed): (Helper, Helper) = match table {
        HostTable::Halves(_) => (lut16_store, lut16_stream),
        HostTable::F32(_) => (lut32_store, lut32_stream),
        HostTable::F16(_) => (lut16_store_f16, lut16_stream_f16),
        HostTable::Bf16(_) => (lut16_store_bf16, lut16_stream_bf16),
    };
    let mut args = vec![sp, dp, send];
    args.extend_from_slice(match &table {
        HostTable::Halves(t) => t,
        HostTable::F32(t) | HostTable::F16(t) | HostTable::Bf16(t) => t,
    });
    crate::host_f16::call(b, if stream { streamed } else { store }, &args);
}

/// The mask of a dword's low nibble, for the 16-bit lookups' index.
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

/// A loop of [`lut_run`]'s steps from label `$l`: `$lookup` (asm looking up
/// the 16 src bytes at `rdi`), `$store` (asm storing its results at `rsi`),
/// then `rsi` advanced by `$dst` bytes; falls through when `rdi` reaches `rdx`.
#[cfg(target_arch = "x86_64")]
macro_rules! steps {
    ($l:literal, $lookup:expr, $store:expr, $dst:literal) => {
        concat!(
            $l,
            ":\n",
            $lookup,
            $store,
            "add rdi, 16\n",
            "add rsi, ",
            $dst,
            "\n",
            "cmp rdi, rdx\n",
            "jb ",
            $l,
            "b\n",
        )
    };
}

/// 32 two-byte lookups into `zmm17`, in the table in the low 32 bytes of
/// `zmm16`; uses `zmm18`. `Simd::lut16_line` (dq-runtime) repeats its table
/// instead of masking the index: here that costs an instruction a run, which
/// groups of 32 measured (BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
macro_rules! lookup16 {
    () => {
        concat!(
            // Byte b -> words (b & 15, b >> 4) of a dword: (d & 15) | (d << 12),
            // so the permute's 5 index bits stay under 16.
            "vpmovzxbd zmm17, [rdi]\n",
            "vpslld zmm18, zmm17, 12\n",
            "vpternlogd zmm17, zmm18, dword ptr [rip + {low}]{{1to16}}, 0xec\n",
            "vpermw zmm17, zmm17, zmm16\n",
        )
    };
}

/// 32 four-byte lookups into `zmm17` (elements 0..16) and `zmm18` (16..32), in
/// the table in `zmm16`; uses `zmm20`. The index of `Simd::lut32_line`.
#[cfg(target_arch = "x86_64")]
macro_rules! lookup32 {
    () => {
        concat!(
            // Byte b -> dwords (b, b >> 4) of a qword: q | (q << 28). The
            // permute reads index bits 0..3, the nibble.
            "vpmovzxbq zmm17, qword ptr [rdi]\n",
            "vpsllq zmm20, zmm17, 28\n",
            "vporq zmm17, zmm17, zmm20\n",
            "vpermps zmm17, zmm17, zmm16\n",
            "vpmovzxbq zmm18, qword ptr [rdi + 8]\n",
            "vpsllq zmm20, zmm18, 28\n",
            "vporq zmm18, zmm18, zmm20\n",
            "vpermps zmm18, zmm18, zmm16\n",
        )
    };
}

/// Four 16-byte non-temporal stores of `zmm$z` at `rsi + $at`; uses `xmm20`.
#[cfg(target_arch = "x86_64")]
macro_rules! nt4 {
    ($z:literal, $at:literal) => {
        concat!(
            "vmovntdq [rsi + ",
            $at,
            "], xmm",
            $z,
            "\n",
            "vextracti32x4 xmm20, zmm",
            $z,
            ", 1\n",
            "vmovntdq [rsi + ",
            $at,
            " + 16], xmm20\n",
            "vextracti32x4 xmm20, zmm",
            $z,
            ", 2\n",
            "vmovntdq [rsi + ",
            $at,
            " + 32], xmm20\n",
            "vextracti32x4 xmm20, zmm",
            $z,
            ", 3\n",
            "vmovntdq [rsi + ",
            $at,
            " + 48], xmm20\n",
        )
    };
}

/// [`lut_run`]'s entry: saves the two address registers it advances and puts
/// the table in `zmm16`: `f32` from `xmm0..xmm3`; in its low 32 bytes,
/// `halves` from `xmm0`, `xmm1`, and `f16` and `bf16` rounded from the f32 in
/// `xmm0..xmm3`.
#[cfg(target_arch = "x86_64")]
macro_rules! enter {
    (halves) => {
        concat!(
            "push rdi\n",
            "push rsi\n",
            "vinserti32x4 ymm16, ymm0, xmm1, 1\n",
        )
    };
    (f32) => {
        concat!("push rdi\n", "push rsi\n", floats!(),)
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

/// [`lut_run`]'s return: restores the address registers.
#[cfg(target_arch = "x86_64")]
macro_rules! leave {
    () => {
        "pop rsi\npop rdi\nret\n"
    };
}

/// The loop of a store helper after `enter!`: 16-bit (`w16`) or f32 (`w32`).
#[cfg(target_arch = "x86_64")]
macro_rules! store {
    (w16) => {
        concat!(
            steps!("2", lookup16!(), "vmovdqu64 [rsi], zmm17\n", "64"),
            leave!()
        )
    };
    (w32) => {
        concat!(
            steps!(
                "2",
                lookup32!(),
                "vmovdqu64 [rsi], zmm17\nvmovdqu64 [rsi + 64], zmm18\n",
                "128"
            ),
            leave!()
        )
    };
}

/// The loops of a streaming helper after `enter!`, one per dst alignment: a
/// line store per 64 bytes where `rsi` is on a line, four of 16 bytes where it
/// is 16-byte aligned (rows 16 bytes past a line: the write combining completes
/// each line from two stores), ordinary ones else. Every step of a run has the
/// first one's alignment.
#[cfg(target_arch = "x86_64")]
macro_rules! stream {
    (w16) => {
        stream!(
            lookup16!(),
            "vmovntdq [rsi], zmm17\n",
            nt4!("17", "0"),
            "vmovdqu64 [rsi], zmm17\n",
            "64"
        )
    };
    (w32) => {
        stream!(
            lookup32!(),
            "vmovntdq [rsi], zmm17\nvmovntdq [rsi + 64], zmm18\n",
            concat!(nt4!("17", "0"), nt4!("18", "64")),
            "vmovdqu64 [rsi], zmm17\nvmovdqu64 [rsi + 64], zmm18\n",
            "128"
        )
    };
    ($lookup:expr, $line:expr, $nt16:expr, $plain:expr, $dst:literal) => {
        concat!(
            "test sil, 63\n",
            "jnz 5f\n",
            steps!("2", $lookup, $line, $dst),
            leave!(),
            "5:\n",
            "test sil, 15\n",
            "jnz 6f\n",
            steps!("3", $lookup, $nt16, $dst),
            leave!(),
            "6:\n",
            steps!("4", $lookup, $plain, $dst),
            leave!(),
        )
    };
}

/// The helpers of [`lut_run`], each `enter!(entry)` then `loops!(width)` with
/// the asm operands those need. Each is called under `preserve_all`: it works
/// in `zmm16..zmm18` and `zmm20` (and `k1`), which Cranelift never allocates
/// (the System V ABI preserves none of them), restores the registers it
/// advances, and changes no other register. Only JIT code calls them, with `rdi`, `rdx` and `rsi`
/// valid as [`lut_run`] says, on a CPU with AVX-512 F, BW and VL.
macro_rules! helpers {
    ($($name:ident: $enter:ident, $loops:ident($width:ident) $(, $op:ident = $sym:ident)*;)*) => {$(
        #[doc = concat!("[`lut_run`] with a `", stringify!($enter), "` table, `",
            stringify!($loops), "` stores.")]
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        unsafe extern "C" fn $name() {
            core::arch::naked_asm!(enter!($enter), $loops!($width), $($op = sym $sym),*)
        }
    )*};
}

helpers! {
    lut16_store: halves, store(w16), low = LOW_NIBBLE;
    lut16_stream: halves, stream(w16), low = LOW_NIBBLE;
    lut32_store: f32, store(w32);
    lut32_stream: f32, stream(w32);
    lut16_store_f16: f16, store(w16), low = LOW_NIBBLE;
    lut16_stream_f16: f16, stream(w16), low = LOW_NIBBLE;
    lut16_store_bf16: bf16, store(w16), low = LOW_NIBBLE, one = ONE, half = HALF, quiet = QUIET;
    lut16_stream_bf16: bf16, stream(w16), low = LOW_NIBBLE, one = ONE, half = HALF, quiet = QUIET;
}

/// The helpers off x86-64, where no kernel calls them.
#[cfg(not(target_arch = "x86_64"))]
mod off_x86 {
    pub(super) unsafe extern "C" fn lut16_store() {
        unreachable!("host lookups are x86-64 only")
    }
    pub(super) use self::lut16_store as lut16_stream;
    pub(super) use self::lut16_store as lut32_store;
    pub(super) use self::lut16_store as lut32_stream;
    pub(super) use self::lut16_store as lut16_store_f16;
    pub(super) use self::lut16_store as lut16_stream_f16;
    pub(super) use self::lut16_store as lut16_store_bf16;
    pub(super) use self::lut16_store as lut16_stream_bf16;
}
#[cfg(not(target_arch = "x86_64"))]
use off_x86::*;
