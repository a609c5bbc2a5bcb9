//! Vector constants emitted once, at the top of a function's entry block, shared
//! by every use (the emitters of linears, coded linears and GGUF blocks).

use std::collections::HashMap;

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::{Block, ConstantData, Function, InstBuilder, Type, Value};

/// The constants a function has hoisted so far, by type and bytes.
#[derive(Default)]
pub(crate) struct Hoisted {
    consts: HashMap<(Type, [u8; 16]), Value>,
}

impl Hoisted {
    /// The 128-bit constant of type `ty` from its 16 little-endian bytes, emitted at
    /// `entry`'s first insertion point the first time it is asked for.
    pub(crate) fn vconst(
        &mut self,
        func: &mut Function,
        entry: Block,
        ty: Type,
        bytes: [u8; 16],
    ) -> Value {
        if let Some(&v) = self.consts.get(&(ty, bytes)) {
            return v;
        }
        let mut pos = FuncCursor::new(func);
        pos.goto_first_insertion_point(entry);
        let c = pos
            .func
            .dfg
            .constants
            .insert(ConstantData::from(bytes.to_vec()));
        let v = pos.ins().vconst(ty, c);
        self.consts.insert((ty, bytes), v);
        v
    }
}
