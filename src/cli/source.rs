//! The input of `dq inspect`, `dq convert` and `dq model FILE`: a GGUF file (any
//! part of a split set reads the whole set) or a HuggingFace checkpoint (folder or
//! `.safetensors` file), and the tensors it yields.

use std::io::Read;
use std::path::{Path, PathBuf};

use dq::Options;
use dq::formats::Element;
use dq::formats::gguf;
use dq::formats::gguf::{Gguf, GgufError, TensorInfo};
use dq::formats::hf::{Checkpoint, Dtype, HfError, QuantLinear, TensorRef};
use dq::formats::input;
use half::{bf16, f16};

/// An opened checkpoint.
pub enum Source {
    /// A GGUF file.
    Gguf(Gguf),
    /// A HuggingFace checkpoint.
    Hf(Checkpoint),
}

/// Why an input could not be opened: one line naming the path.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The path cannot be read at all.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An invalid GGUF file.
    #[error("{path}: {source}", path = path.display())]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: GgufError,
    },
    /// An invalid HuggingFace checkpoint (the error names the file).
    #[error("{path}: {source}", path = path.display())]
    Hf {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong.
        source: HfError,
    },
}

impl Source {
    /// Opens `path`: a folder or a `.safetensors` file is a HuggingFace checkpoint,
    /// anything else is read as GGUF. Anything but a folder or a regular file (a FIFO,
    /// a device) is refused before it is opened.
    ///
    /// # Memory maps
    /// The files are mapped (`Gguf::map`, `Checkpoint::map`). The CLI installs its
    /// SIGBUS handler before any command runs ([`super::cleanup::install`]), so an
    /// input truncated while mapped ends the process with one line and exit code 2,
    /// its temporary files deleted, before a byte past the new end is used. An input
    /// rewritten in place without shrinking is outside `dq`'s contract (README,
    /// "Reliability"), as for every mmap-based reader.
    pub fn open(path: &Path) -> Result<Source, SourceError> {
        Self::open_as(path, true)
    }

    /// As [`Source::open`], but a part of a GGUF split set is read alone
    /// (`Gguf::map_part`).
    pub fn open_part(path: &Path) -> Result<Source, SourceError> {
        Self::open_as(path, false)
    }

    fn open_as(path: &Path, whole: bool) -> Result<Source, SourceError> {
        let io = |source| SourceError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_dir() {
            input::check_regular(path).map_err(io)?;
        }
        let hf = meta.is_dir()
            || (path.extension().is_some_and(|e| e == "safetensors") && !starts_with_gguf(path));
        if hf {
            // SAFETY: the handler is installed; see "Memory maps" above.
            return unsafe { Checkpoint::map(path) }
                .map(Source::Hf)
                .map_err(|source| SourceError::Hf {
                    path: path.to_owned(),
                    source,
                });
        }
        // SAFETY: the handler is installed; see "Memory maps" above.
        let gguf = unsafe {
            if whole {
                Gguf::map(path)
            } else {
                Gguf::map_part(path)
            }
        };
        gguf.map(Source::Gguf).map_err(|e| match e {
            GgufError::Io { source, .. } => io(source),
            source => SourceError::Gguf {
                path: path.to_owned(),
                source,
            },
        })
    }

    /// `gguf` or the HuggingFace quantization method (`hf` when none).
    pub fn format(&self) -> String {
        match self {
            Source::Gguf(_) => "gguf".into(),
            Source::Hf(c) => c
                .config()
                .map_or_else(|| "hf".into(), |q| q.method().to_string()),
        }
    }

    /// The tensors to produce, in the input's order.
    pub fn items(&self) -> Vec<Item<'_>> {
        match self {
            Source::Gguf(g) => g.tensors().iter().map(|t| Item::gguf(g, t)).collect(),
            Source::Hf(c) => c
                .linears()
                .map(Item::linear)
                .chain(c.others().map(Item::other))
                .collect(),
        }
    }
}

/// Whether the file starts with the GGUF magic.
fn starts_with_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    input::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"GGUF")
}

/// One output tensor: its name, row-major shape, and where it comes from.
pub struct Item<'a> {
    /// The output name (GGUF name, `P.weight` of a linear, or the tensor's own name).
    pub name: String,
    /// Row-major shape.
    pub shape: Vec<usize>,
    /// Bytes read from the input.
    pub src_bytes: usize,
    /// How it is produced.
    pub kind: Kind<'a>,
}

/// How an [`Item`] is produced.
pub enum Kind<'a> {
    /// A GGUF tensor of a supported type.
    Gguf(&'a Gguf, &'a TensorInfo),
    /// A GGUF tensor of a type dq does not decode (its type's name).
    Unsupported(String),
    /// A quantized linear's weight.
    Linear(Box<QuantLinear<'a>>),
    /// An f16/bf16/f32 tensor, converted to the output dtype.
    Float(TensorRef<'a>),
    /// Any other tensor, copied as it is.
    Copy(TensorRef<'a>),
}

impl<'a> Item<'a> {
    fn gguf(g: &'a Gguf, t: &'a TensorInfo) -> Item<'a> {
        let kind = if t.is_supported() {
            Kind::Gguf(g, t)
        } else {
            Kind::Unsupported(t.type_name())
        };
        Item {
            name: t.name().to_owned(),
            // Each dim and the element count fit i64 (checked by the reader); the
            // element count of a supported tensor fits the file, hence usize.
            shape: t.shape().iter().map(|&d| d as usize).collect(),
            src_bytes: t.byte_size().unwrap_or(0),
            kind,
        }
    }

    fn linear(l: QuantLinear<'a>) -> Item<'a> {
        let src_bytes = l.packed().data().len()
            + l.scales().data().len()
            + l.zeros().map_or(0, |z| z.data().len());
        Item {
            name: l.weight_name(),
            shape: l.shape(),
            src_bytes,
            kind: Kind::Linear(Box::new(l)),
        }
    }

    fn other(t: TensorRef<'a>) -> Item<'a> {
        let kind = if matches!(t.dtype(), Dtype::F16 | Dtype::BF16 | Dtype::F32) {
            Kind::Float(t)
        } else {
            Kind::Copy(t)
        };
        Item {
            name: t.name().to_owned(),
            shape: t.shape().to_vec(),
            src_bytes: t.data().len(),
            kind,
        }
    }

    /// Elements of the output.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether this is a dequantization (a GGUF tensor or a quantized linear), as
    /// opposed to a copy or a float conversion.
    pub fn is_dequant(&self) -> bool {
        matches!(self.kind, Kind::Gguf(..) | Kind::Linear(_))
    }
}

/// Why a tensor cannot be produced.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// A GGUF tensor (type unsupported, backend cannot run it).
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A quantized linear (backend cannot run it).
    #[error(transparent)]
    Hf(#[from] HfError),
}

impl Item<'_> {
    /// Checks that `backend` can produce this tensor.
    pub fn check(&self, backend: dq::Backend) -> Result<(), ItemError> {
        match &self.kind {
            Kind::Gguf(_, t) => match t.ggml_type() {
                Some(ty) => gguf::check_backend(backend, ty, t.name())?,
                None => unreachable_type(t)?,
            },
            Kind::Unsupported(ty) => Err(GgufError::UnsupportedType {
                name: self.name.clone(),
                ty: ty.clone(),
            })?,
            Kind::Linear(l) => l.check_backend(backend)?,
            Kind::Float(_) | Kind::Copy(_) => {}
        }
        Ok(())
    }

    /// Writes the tensor into `out` (its element count): dequantized, or converted.
    /// A [`Kind::Copy`] tensor writes nothing (its bytes are copied as they are).
    pub fn fill<T: Element>(&self, out: &mut [T], opts: &Options) -> Result<(), ItemError> {
        match &self.kind {
            Kind::Gguf(g, t) => g.dequantize(t, out, opts)?,
            Kind::Linear(l) => l.dequantize(out, opts)?,
            Kind::Float(t) => convert_floats(*t, out),
            Kind::Unsupported(_) | Kind::Copy(_) => self.check(opts.backend())?,
        }
        Ok(())
    }
}

/// A GGUF type id ggml does not define: never a supported item.
fn unreachable_type(t: &TensorInfo) -> Result<(), GgufError> {
    Err(GgufError::UnsupportedType {
        name: t.name().to_owned(),
        ty: t.type_name(),
    })
}

/// f16/bf16/f32 elements to `T` (exact to f32, then rounded once).
fn convert_floats<T: Element>(t: TensorRef<'_>, out: &mut [T]) {
    let d = t.data();
    match t.dtype() {
        Dtype::F16 => {
            for (o, c) in out.iter_mut().zip(d.chunks_exact(2)) {
                *o = T::from_f32(f16::from_le_bytes([c[0], c[1]]).to_f32());
            }
        }
        Dtype::BF16 => {
            for (o, c) in out.iter_mut().zip(d.chunks_exact(2)) {
                *o = T::from_f32(bf16::from_le_bytes([c[0], c[1]]).to_f32());
            }
        }
        _ => {
            for (o, c) in out.iter_mut().zip(d.chunks_exact(4)) {
                *o = T::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
        }
    }
}
