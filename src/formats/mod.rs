//! Checkpoint file formats (SPEC §11): readers that hand out a file's packed
//! tensors without copying them, reference decoders of their block types, and
//! `dequantize` entry points that write one tensor into a caller's f32, f16 or bf16
//! buffer ([`Element`]) on a chosen backend and thread count.

mod element;
pub mod gguf;
pub mod hf;
pub mod input;
mod jit;

pub use jit::compiled as jit_compiled;
pub mod race;

pub use element::Element;
