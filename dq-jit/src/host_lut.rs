//! 4-bit table lookups by the host's AVX-512 permutes (`vpermw`, `vpermd`),
//! called from JIT code: one call looks up a whole run of a segment (every 32
//! elements from the src address up to the src end). Cranelift has 128-bit
//! vectors only and no word or dword permute: its own lookups take a byte
//! shuffle per plane of the entries and two or four interleaves per 16
//! elements, and a streamed output goes through a staging block and a copy. A
//! large output's calls stream straight to dst instead.
//!
//! An ordinary call (the platform's C convention: the kernel saves what it
//! keeps live): on AMD EPYC Zen 4 it measured faster than Cranelift's own
//! lookups, ahead of the generated backend on u4 -> f16 in cache and level with
//! it elsewhere, and level with a naked helper that saves the registers it uses
//! (BENCHMARKS.md).
//!
//! A whole group's table can come as f32 values that the call rounds
//! ([`HostTable::F16`], [`HostTable::Bf16`]): the kernel's own rounding (an
//! F16C call through memory, or integer code for bf16) costs short groups more
//! than their lookups.

use cranelift_codegen::ir::{InstBuilder, StackSlotData, StackSlotKind, Value, types};
use cranelift_frontend::FunctionBuilder;

use crate::translate::mem;

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

/// [`HostTable`]'s kinds as [`lookup_run`] takes them.
const HALVES: i64 = 0;
const F16: i64 = 1;
const BF16: i64 = 2;
const F32: i64 = 3;

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
    let (kind, entries): (i64, &[Value]) = match &table {
        HostTable::Halves(t) => (HALVES, t),
        HostTable::F16(t) => (F16, t),
        HostTable::Bf16(t) => (BF16, t),
        HostTable::F32(t) => (F32, t),
    };
    // The table goes through a stack slot of its own, 16 bytes a store.
    let size = 16 * entries.len() as u32;
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 4));
    let tab = b.ins().stack_addr(types::I64, slot, 0);
    for (k, &e) in entries.iter().enumerate() {
        b.ins().store(mem(), e, tab, 16 * k as i32);
    }
    let kind = b.ins().iconst(types::I64, kind);
    let stream = b.ins().iconst(types::I64, i64::from(stream));
    let args = [sp, dp, send, tab, kind, stream];
    crate::host_f16::call_c(b, lookup_run as *const u8, &args);
}

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

/// [`lut_run`]'s host side: builds the table of `kind` from the 16-byte
/// vectors at `tab` (two for [`HALVES`], four else; 16-byte aligned), then
/// looks up `sp..send` into `dp` on, streamed when `stream` is nonzero.
///
/// # Safety
/// As [`lut_run`] says: `sp..send` readable, a nonzero multiple of 16 bytes;
/// `dp` writable for the results; `tab` as above; AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe extern "C" fn lookup_run(
    sp: *const u8,
    dp: *mut u8,
    send: *const u8,
    tab: *const u8,
    kind: i64,
    stream: i64,
) {
    // One 16-byte load per 16-byte store of the caller, so each is forwarded
    // from its store (a wider load cannot be); volatile keeps the compiler
    // from merging them.
    // SAFETY: the caller's `tab`, 16-byte aligned, holds the vectors read.
    let part = |k: usize| unsafe { core::ptr::read_volatile(tab.add(16 * k).cast::<__m128i>()) };
    let pair = |a, b| _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(a), b);
    let t = if kind == HALVES {
        _mm512_broadcast_i64x4(pair(part(0), part(1)))
    } else {
        let x = _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(pair(part(0), part(1))),
            pair(part(2), part(3)),
        );
        match kind {
            F16 => _mm512_broadcast_i64x4(_mm512_cvtps_ph::<8>(_mm512_castsi512_ps(x))),
            BF16 => _mm512_broadcast_i64x4(bf16(x)),
            _ => x,
        }
    };
    let how = match dp as usize % 64 {
        _ if stream == 0 => PLAIN,
        0 => LINE,
        16 | 32 | 48 => NT16,
        _ => PLAIN,
    };
    // SAFETY: the caller's promises, passed on.
    unsafe {
        match (kind == F32, how) {
            (false, PLAIN) => run::<false, PLAIN>(sp, dp, send, t),
            (false, LINE) => run::<false, LINE>(sp, dp, send, t),
            (false, _) => run::<false, NT16>(sp, dp, send, t),
            (true, PLAIN) => run::<true, PLAIN>(sp, dp, send, t),
            (true, LINE) => run::<true, LINE>(sp, dp, send, t),
            (true, _) => run::<true, NT16>(sp, dp, send, t),
        }
    }
}

/// [`lookup_run`] off x86-64, where no kernel calls it (host lookups need
/// AVX-512).
#[cfg(not(target_arch = "x86_64"))]
unsafe extern "C" fn lookup_run(
    _: *const u8,
    _: *mut u8,
    _: *const u8,
    _: *const u8,
    _: i64,
    _: i64,
) {
    unreachable!("host lookups are x86-64 only")
}

/// The bf16 bits of 16 f32 (`dq_runtime::convert::f32_to_bf16_bits`: nearest
/// even, a NaN `(x >> 16) | 0x40`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn bf16(x: __m512i) -> __m256i {
    let mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7fff_ffff));
    let nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f80_0000));
    let hi = _mm512_srli_epi32::<16>(x);
    let lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    let rne = _mm512_srli_epi32::<16>(_mm512_add_epi32(
        x,
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb),
    ));
    let qnan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
    _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rne, qnan))
}

/// How [`run`] stores a line: ordinary stores, one non-temporal store (dst on
/// a line), four of 16 bytes (dst 16-byte aligned: the write combining
/// completes each line from two calls' stores).
#[cfg(target_arch = "x86_64")]
const PLAIN: u8 = 0;
#[cfg(target_arch = "x86_64")]
const LINE: u8 = 1;
#[cfg(target_arch = "x86_64")]
const NT16: u8 = 2;

/// The lookups of [`lookup_run`], 16 src bytes a step: 32 two-byte entries
/// (one line) or, with `W32`, 32 four-byte ones (two lines). The index tricks
/// of the generated backend's `Simd::lut16_line` and `lut32_line`: byte `b`
/// -> words `(b, b >> 4)` of a dword (the table repeats, so bit 4 from the
/// high nibble does not matter), or dwords `(b, b >> 4)` of a qword.
///
/// # Safety
/// As [`lookup_run`]; `HOW` is [`LINE`] only where `dp` is 64-byte aligned,
/// [`NT16`] where 16-byte aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn run<const W32: bool, const HOW: u8>(
    mut sp: *const u8,
    mut dp: *mut u8,
    send: *const u8,
    t: __m512i,
) {
    while sp < send {
        // SAFETY: 16 readable bytes at `sp` (below `send`, a multiple of 16
        // bytes on) and 64 or 128 writable at `dp` (the caller's promises).
        unsafe {
            if W32 {
                for h in 0..2 {
                    let q = _mm512_cvtepu8_epi64(_mm_loadl_epi64(sp.add(8 * h).cast()));
                    let idx = _mm512_or_si512(q, _mm512_slli_epi64::<28>(q));
                    put::<HOW>(dp.add(64 * h), _mm512_permutexvar_epi32(idx, t));
                }
                dp = dp.add(128);
            } else {
                let d = _mm512_cvtepu8_epi32(_mm_loadu_si128(sp.cast()));
                let idx = _mm512_or_si512(d, _mm512_slli_epi32::<12>(d));
                put::<HOW>(dp, _mm512_permutexvar_epi16(idx, t));
                dp = dp.add(64);
            }
            sp = sp.add(16);
        }
    }
}

/// Stores the line `v` at `d` as `HOW` says.
///
/// # Safety
/// `d` is writable for 64 bytes, aligned as `HOW` needs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn put<const HOW: u8>(d: *mut u8, v: __m512i) {
    // SAFETY: the caller's promise.
    unsafe {
        match HOW {
            PLAIN => _mm512_storeu_si512(d.cast(), v),
            LINE => _mm512_stream_si512(d.cast(), v),
            _ => {
                _mm_stream_si128(d.cast(), _mm512_castsi512_si128(v));
                _mm_stream_si128(d.add(16).cast(), _mm512_extracti32x4_epi32::<1>(v));
                _mm_stream_si128(d.add(32).cast(), _mm512_extracti32x4_epi32::<2>(v));
                _mm_stream_si128(d.add(48).cast(), _mm512_extracti32x4_epi32::<3>(v));
            }
        }
    }
}
