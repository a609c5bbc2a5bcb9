//! Checkpoint file formats (SPEC section 11): readers that hand out a file's packed
//! tensors without copying them, and reference decoders of their block types.

pub mod gguf;
pub mod hf;
