//! dq-runtime: dtypes, tensor views, op descriptors, validation, the canonical group
//! map, the scalar reference, and the execution layer that backends plug into.
//!
//! ```
//! use dq_runtime::{DynamicDequantize, Plan, Reference, Tensor, TensorMut};
//! // u8 [0, 10, 20, 30], zero point 10, scale 0.1, per tensor.
//! let src = Tensor::from_slice(&[0u8, 10, 20, 30], &[4]);
//! let scales = Tensor::from_slice(&[0.1f32], &[1]);
//! let zps = Tensor::from_slice(&[10u8], &[1]);
//! let mut out = [0f32; 4];
//! let mut dst = TensorMut::from_slice(&mut out, &[4]);
//! let op = DynamicDequantize::per_tensor().into();
//! let plan = Plan::new(&op, &src.desc, Some(&scales.desc), Some(&zps.desc), &dst.desc)?;
//! plan.bind(&src, Some(&scales), Some(&zps), &mut dst)?.run(&Reference::default())?;
//! assert_eq!(out, [-10.0 * 0.1, 0.0, 10.0 * 0.1, 20.0 * 0.1]);
//! # Ok::<(), dq_runtime::Error>(())
//! ```
//!
//! # Layers
//!
//! Each module uses only modules of its own layer or lower ones, and no two use
//! each other (checked by `tests/layers.rs`), bottom to top:
//!
//! 1. core: `minifloat`, `dtype`, `op`, `error`, `tensor`, `rules`, `lowering`,
//!    `plan`, `formula`, `convert`, `rng`, `env`, `races` and `job` (jobs and the
//!    kernel interface every backend implements);
//! 2. the scalar spec: `reference`;
//! 3. SIMD: `arch` (ISA detection, the vector tokens and their traits);
//! 4. `policy`: store strategies, timed on this machine, and thread counts;
//! 5. kernels: `kernels` (the generated kernels' drivers and ISA entry points),
//!    `block`, `linear`;
//! 6. execution: `exec` (running jobs on the pool, store races) and `backend`
//!    (choosing one).
#![deny(missing_docs)]

pub mod arch;
pub mod backend;
pub mod block;
pub mod convert;
pub mod dtype;
pub mod env;
pub mod error;
pub mod exec;
pub mod formula;
pub mod job;
pub mod kernels;
pub mod linear;
pub mod lowering;
pub mod minifloat;
pub mod op;
pub mod plan;
pub mod policy;
pub mod races;
pub mod reference;
pub mod rng;
pub mod rules;
pub mod tensor;

pub use backend::{Backend, Backends};
pub use dtype::DType;
pub use error::{Error, Result, Role};
pub use formula::{FormulaFacts, FormulaIr, FormulaProblem, Node, QKind, STANDARD, STANDARD_FLOAT};
pub use job::{Job, JobPart, Kernel, KernelStats};
pub use kernels::GeneratedKernel;
pub use lowering::{Loop, Lowering};
pub use op::{AxesDequantize, Dequantize, DynamicDequantize, Op, OpKind, Qtype};
pub use plan::Plan;
pub use reference::Reference;
pub use tensor::{Element, Tensor, TensorDesc, TensorMut};
