//! Checkpoint formats: GGUF files and blocks, GPTQ/AWQ/compressed-tensors
//! checkpoints, against their packers' own dequantizers, hostile and mutated files
//! included, on every backend (`auto`'s races too).

#[path = "../support/mod.rs"]
mod support;

mod alloc;

mod gguf;
mod gguf_auto;
mod gguf_blocks;
mod gguf_grids;
#[cfg(feature = "jit")]
mod gguf_jit;
mod gguf_q2_0;
mod gguf_split;
mod gguf_streamed;
mod gguf_tables;
mod hf_auto;
mod hf_checkpoints;
mod hf_coded;
mod hf_float;
mod hf_generated;
#[cfg(feature = "jit")]
mod hf_jit;
mod hf_malformed;
mod hf_mutations;

/// Parsing a hostile file must not allocate what the file claims: [`alloc`]
/// records what each thread allocates.
#[global_allocator]
static WATCH: alloc::Watch = alloc::Watch;
