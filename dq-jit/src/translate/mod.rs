//! Lowering a [`Spec`] to Cranelift IR.
//!
//! The function computes logical elements `start..end`:
//!
//! ```text
//! fn(src, scales, zps, dst, start, end)
//!   entry:     unravel `start` into one index per loop
//!   run(i..):  one run = a stretch of the innermost loop, at most to its end
//!              -> segments of one scale (group) -> 16-wide vector steps + scalar tail
//!   advance_k: carry into loop k, back to `run`
//! ```
//!
//! Shapes, strides, groups and dtypes are constants. The vector path works on 16
//! elements (4 x F32X4) at a time and never loads past the last element it computes.
//!
//! This module holds the [`Translator`] and the types its emitters share; the IR
//! is emitted by one module per concern:
//!
//! - [`loops`]: the loop levels, from the entry down to segments of one scale;
//! - [`vector`]: vector loops and steps (16 elements a step);
//! - [`lane_loads`]: src, zero points and scales into vector lanes;
//! - [`table`]: 4-bit table lookups;
//! - [`byte_table`]: 256-entry table lookups (8-bit float src, long segments);
//! - [`exp_table`]: f8_e4m3 -> bf16 as a 16-entry table plus the exponent;
//! - [`float_src`]: float src codes decoded in vector lanes;
//! - [`scalar`]: one element at a time (tails, peels, non-vector code);
//! - [`eval`]: the formula;
//! - [`round`]: results to dst bits (f32, f16, bf16, f64) and their stores;
//! - [`ops`]: small instruction helpers (folded arithmetic, constants, lane ops).

mod byte_table;
mod eval;
mod exp_table;
mod float_src;
mod lane_loads;
mod loops;
mod ops;
mod round;
mod scalar;
mod table;
mod vector;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use cranelift_codegen::ir::{Block, Endianness, MemFlagsData, Type, Value};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::FunctionBuilder;
use dq_runtime::Loop;

use crate::spec::{Analysis, Spec};

pub(crate) use byte_table::long_f8_segments;
use eval::Int;
pub(crate) use table::Lut;
pub(crate) use table::long_4bit_segments;

/// Elements per vector step.
const STEP: i64 = 16;

/// How an element gets its scale and zero point.
#[derive(Clone, Copy)]
enum Params {
    /// Constant over a segment: the work-type scale and the integer zero point.
    Fixed { s: Value, z: Value },
    /// Per element: scale index `base + j * scale_stride` (innermost group of 1).
    PerElem { base: Value },
    /// A 4-bit segment's results, looked up: the address of its 16 entries in
    /// nibble order (see [`Translator::store_table`]).
    Table { addr: Value },
}

/// Bases of one run of the innermost loop: what its outer loop indices add.
#[derive(Clone, Copy)]
struct Run {
    /// Src element offset.
    src: Value,
    /// Dst element offset.
    dst: Value,
    /// Scale (and zero-point) index.
    scale: Value,
}

/// Vector constants by type and lane bits.
type Consts = HashMap<(Type, u64), Value>;

/// Emits the IR of one kernel into a [`FunctionBuilder`].
pub(crate) struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    spec: &'a Spec,
    an: Analysis,
    src: Value,
    scales: Value,
    zps: Value,
    dst: Value,
    /// The entry block, where vector constants are materialised once.
    entry: Block,
    /// Vector constants already in `entry`, by type and lane bits.
    consts: Consts,
    /// I8X16 constants already in `entry`, by bytes.
    byte_consts: HashMap<Vec<u8>, Value>,
    /// The byte shuffle for 4-bit table lookups.
    lut: Lut,
    /// Vector code takes src and zero points as [`Ints::Biased`](eval::Ints::Biased) floats (a byte
    /// shuffle places each value in the mantissa of 2^23, no integer conversion).
    biased: bool,
    /// While a table segment is emitted: where its 16 results are, for the
    /// elements it does one at a time.
    table: Option<Value>,
    /// The stack slot tables go to, created on first use.
    table_slot: Option<Value>,
    /// While a table segment is emitted with host lookups: its table.
    host_table: Option<crate::host_lut::HostTable>,
    /// The stack slot of 256-entry tables, created on first use.
    byte_table_slot: Option<Value>,
    /// Under [`Translator::local_consts`]: the block its constants go to, and them.
    local: Option<(Block, Consts)>,
}

/// Flags of the kernel's loads and stores: little-endian, never trapping (every
/// address is inside a buffer its caller validated). Shared by every emitter of
/// the crate (plans, GGUF blocks, linears).
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::new()
        .with_notrap()
        .with_endianness(Endianness::Little)
}

/// Flags of bitcasts between lane types: little-endian lane order.
pub(crate) fn lanes() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

impl<'a, 'f> Translator<'a, 'f> {
    /// Emits the whole function; the builder's signature must already have the six
    /// parameters (four pointers, `start`, `end`).
    pub(crate) fn translate(
        mut b: FunctionBuilder<'f>,
        spec: &'a Spec,
        an: Analysis,
        cfg: TargetFrontendConfig,
        lut: Lut,
    ) {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let mut t = Translator {
            b,
            spec,
            an,
            src: p[0],
            scales: p[1],
            zps: p[2],
            dst: p[3],
            entry,
            consts: HashMap::new(),
            byte_consts: HashMap::new(),
            lut,
            biased: lut == Lut::Pshufb
                && !spec.src.is_float_src()
                && Int::biased_ok(spec.formula.nodes, spec.zps.is_some()),
            table: None,
            table_slot: None,
            host_table: None,
            byte_table_slot: None,
            local: None,
        };
        t.emit_entry(p[4], p[5]);
        t.b.seal_all_blocks();
        t.b.finalize(cfg);
    }

    /// The innermost loop.
    fn inner(&self) -> Loop {
        *self.spec.loops.last().expect("a non-empty plan has a loop")
    }
}
