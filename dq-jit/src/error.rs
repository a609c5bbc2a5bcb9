//! Why the JIT cannot compile a plan.

use core::fmt;

use dq_runtime::{DType, Error, FormulaProblem};

/// Why the JIT cannot compile (or run) a plan. At the [`dq_runtime::Kernel`]
/// boundary it becomes [`Error::BackendUnavailable`] with this text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    /// The plan has no elements.
    #[error("a plan with no elements needs no kernel")]
    NoElements,
    /// The formula's IR is malformed.
    #[error("formula `{formula}`: {problem}")]
    Formula {
        /// The formula's name.
        formula: &'static str,
        /// What is wrong.
        problem: FormulaProblem,
    },
    /// An integer node needs more than the supported widths (`i64`, or `i128`
    /// below f64) for these dtypes.
    #[error(
        "formula `{formula}`: an integer node exceeds the supported range for src {src}, zps {}, dst {dst}",
        zps.map_or("none", DType::name)
    )]
    IntegerRange {
        /// The formula's name.
        formula: &'static str,
        /// Src dtype.
        src: DType,
        /// Zero-point dtype.
        zps: Option<DType>,
        /// Dst dtype.
        dst: DType,
    },
    /// A formula that does not read a src of this kind: an integer-`q` formula
    /// (other than the standard one) with a float src (SPEC §10), or a float-`q`
    /// formula with an integer src.
    #[error("the formula has no form for src {src} (scales {scales})")]
    FloatTypes {
        /// Src dtype.
        src: DType,
        /// Scales dtype.
        scales: DType,
    },
    /// The host is not a 64-bit target.
    #[error("the JIT needs a 64-bit target")]
    Not64Bit,
    /// Cranelift does not support the host.
    #[error("Cranelift does not support this host: {reason}")]
    UnsupportedHost {
        /// Cranelift's reason.
        reason: &'static str,
    },
    /// A Cranelift step failed.
    #[error("Cranelift {stage}: {message}")]
    Codegen {
        /// The step.
        stage: Stage,
        /// Cranelift's message.
        message: String,
    },
    /// The Cranelift verifier refused the IR built for the plan.
    #[error("verifier: {message}")]
    Verifier {
        /// The verifier's message.
        message: String,
    },
    /// A GGUF block type the JIT does not lower.
    #[error("the JIT cannot lower block type {name}: {reason}")]
    UnsupportedBlock {
        /// The type's name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A block kernel was given bytes that are not whole blocks, or an output that
    /// is not their element count.
    #[error("{name}: {bytes} bytes are not whole {block_bytes}-byte blocks of {elements} elements")]
    BlockLength {
        /// The block type.
        name: &'static str,
        /// Bytes given.
        bytes: usize,
        /// Elements given.
        elements: usize,
        /// Bytes per block.
        block_bytes: usize,
    },
    /// A compiled kernel was given a job of another plan.
    #[error("kernel compiled for another plan")]
    OtherPlan,
}

/// A step of compiling with Cranelift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Setting the ISA's flags.
    Settings,
    /// Building the host ISA.
    Isa,
    /// Declaring the function in its module.
    Declare,
    /// Compiling the function.
    Define,
    /// Making the code executable.
    Finalize,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Settings => "settings",
            Stage::Isa => "ISA",
            Stage::Declare => "declare",
            Stage::Define => "define",
            Stage::Finalize => "finalize",
        })
    }
}

impl From<JitError> for Error {
    fn from(e: JitError) -> Error {
        Error::BackendUnavailable {
            backend: "jit",
            reason: e.to_string(),
        }
    }
}
