//! HuggingFace quantized checkpoints: GPTQ, AWQ and compressed-tensors (int, FP8,
//! NVFP4) safetensors, FP8 block-scaled (`quant_method: "fp8"`) and ModelOpt NVFP4.
//!
//! [`Checkpoint::open`] reads a checkpoint folder (`config.json`'s `quantization_config`,
//! `model.safetensors` or the shards of `model.safetensors.index.json`) or a single
//! `.safetensors` file whose `__metadata__` names the format. The shards are read into
//! memory, or memory-mapped and never copied by the `unsafe` [`Checkpoint::map`] (the
//! files must not change while mapped); every header, offset and shape is checked at
//! open against the file's size, so the
//! [`QuantLinear`] views it hands out fit their format (SPEC §11). [`reference`](mod@reference)
//! turns a linear into its `[N, K]` weight, element by element.
//!
//! ```
//! use dq::formats::hf::{Checkpoint, reference};
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hf/awq-4bit-g32");
//! let ckpt = Checkpoint::open(dir)?;
//! let up = ckpt.linear("model.layers.0.mlp.up_proj").expect("a quantized linear");
//! assert_eq!((up.n(), up.k(), up.groups()), (32, 64, 2));
//! let weight = reference::dequantize_f32(&up); // [N, K], row-major
//! assert_eq!(weight.len(), 32 * 64);
//! // Everything else (norms, embeddings, biases) is left as it is.
//! assert!(ckpt.others().any(|t| t.name() == "model.norm.weight"));
//! # Ok::<(), dq::formats::hf::HfError>(())
//! ```

mod checkpoint;
mod coded;
mod coded_run;
mod config;
mod decode;
mod error;
mod families;
mod file;
mod float;
mod float_build;
mod float_config;
mod linear;
mod plan;
pub use super::race;
pub mod reference;

pub use checkpoint::{Checkpoint, TensorRef};
pub use config::{CtStrategy, GptqVersion, QuantConfig, QuantMethod};
pub use error::{HfError, Result};
pub use families::BnbType;
pub use float::FloatFormat;
pub use float_config::FloatScales;
pub use linear::{QuantLinear, Scheme};
/// The safetensors element type of a [`TensorRef`].
pub use safetensors::Dtype;
