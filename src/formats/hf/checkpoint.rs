//! A checkpoint: a folder (config.json + one or more shards) or a single file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use serde::Deserialize;

use super::config::QuantConfig;
use super::error::{HfError, Result};
use super::file::{Entry, Shard};
use super::linear::{self, LinearInfo, QuantLinear};
use crate::formats::input;

/// A tensor as it lies in the file: no copy.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    name: &'a str,
    dtype: Dtype,
    shape: &'a [usize],
    data: &'a [u8],
}

impl<'a> TensorRef<'a> {
    /// Its name in the checkpoint.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Its safetensors dtype.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Its shape (row-major).
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// Its bytes, little-endian, exactly `dtype size × elements` long.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
}

/// A HuggingFace checkpoint, read into memory or memory-mapped; every shape checked
/// at open.
///
/// See the [module documentation](super) for an example.
pub struct Checkpoint {
    path: PathBuf,
    config: Option<QuantConfig>,
    /// config.json's `dtype` / `torch_dtype` (f32, f16 or bf16).
    dtype: Option<Dtype>,
    shards: Vec<Shard>,
    entries: BTreeMap<String, Entry>,
    linears: BTreeMap<String, LinearInfo>,
    members: BTreeSet<String>,
}

/// `model.safetensors.index.json`.
#[derive(Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

impl Checkpoint {
    /// Opens a checkpoint folder (`config.json` with `quantization_config`, and
    /// `model.safetensors` or the shards of `model.safetensors.index.json`) or a single
    /// `.safetensors` file whose `__metadata__` names the format, reading every shard
    /// into memory ([`Checkpoint::map`] maps them instead). Only regular files are read
    /// (symlinks followed, as in the HuggingFace cache): a FIFO or device is an error.
    ///
    /// # Errors
    /// Unreadable files, bad JSON, an invalid safetensors header (truncated, offsets past
    /// the end, ...), a bad or unsupported `quantization_config`, or a quantized linear
    /// whose tensors are missing or do not fit the format.
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint> {
        // SAFETY: nothing is mapped (`mapped == false`).
        unsafe { Self::open_with(path.as_ref(), false) }
    }

    /// As [`Checkpoint::open`], but the shards are memory-mapped, not copied.
    ///
    /// # Safety
    /// No shard may be modified or truncated while the checkpoint lives (see
    /// [`crate::formats::input::map`]): a shard cut short under its map ends the process
    /// with `SIGBUS`. [`Checkpoint::open`] is the safe path.
    ///
    /// # Errors
    /// As [`Checkpoint::open`].
    pub unsafe fn map(path: impl AsRef<Path>) -> Result<Checkpoint> {
        // SAFETY: the caller keeps the shards unmodified while the checkpoint lives.
        unsafe { Self::open_with(path.as_ref(), true) }
    }

    /// # Safety
    /// With `mapped`, [`Checkpoint::map`]'s contract.
    unsafe fn open_with(path: &Path, mapped: bool) -> Result<Checkpoint> {
        let meta = fs::metadata(path).map_err(|source| HfError::Io {
            path: path.to_owned(),
            source,
        })?;
        if meta.is_dir() {
            // SAFETY: passed on from the caller.
            unsafe { Self::open_dir(path, mapped) }
        } else {
            // SAFETY: passed on from the caller.
            let (shard, tensors) = unsafe { Shard::open(path, mapped) }?;
            let config = QuantConfig::from_metadata(&shard.metadata, path)?;
            Self::assemble(path, config, vec![(shard, tensors)])
        }
    }

    /// # Safety
    /// With `mapped`, [`Checkpoint::map`]'s contract.
    unsafe fn open_dir(dir: &Path, mapped: bool) -> Result<Checkpoint> {
        let (config, dtype) = read_config(&dir.join("config.json"))?;
        let index_path = dir.join("model.safetensors.index.json");
        let single = dir.join("model.safetensors");
        if !exists(&index_path) {
            if !exists(&single) {
                return Err(HfError::NoWeights {
                    dir: dir.to_owned(),
                });
            }
            // SAFETY: passed on from the caller.
            let shard = unsafe { Shard::open(&single, mapped) }?;
            return Ok(Self::assemble(dir, config, vec![shard])?.with_dtype(dtype));
        }
        let index: Index =
            serde_json::from_slice(&read(&index_path)?).map_err(|source| HfError::Json {
                path: index_path.clone(),
                what: "the shard index",
                source,
            })?;
        let files: BTreeSet<&str> = index.weight_map.values().map(String::as_str).collect();
        let mut shards = Vec::with_capacity(files.len());
        for file in files {
            if !is_plain_file_name(file) {
                return Err(HfError::BadShardName {
                    index: index_path,
                    shard: file.to_owned(),
                });
            }
            // SAFETY: passed on from the caller.
            shards.push(unsafe { Shard::open(&dir.join(file), mapped) }?);
        }
        let ckpt = Self::assemble(dir, config, shards)?.with_dtype(dtype);
        for (tensor, file) in &index.weight_map {
            let in_shard = ckpt
                .entries
                .get(tensor)
                .is_some_and(|e| ckpt.shards[e.shard].path == dir.join(file));
            if !in_shard {
                return Err(HfError::NotInShard {
                    tensor: tensor.clone(),
                    index: index_path,
                    shard: dir.join(file),
                });
            }
        }
        Ok(ckpt)
    }

    fn assemble(
        path: &Path,
        config: Option<QuantConfig>,
        files: Vec<(Shard, Vec<(String, safetensors::tensor::TensorInfo)>)>,
    ) -> Result<Checkpoint> {
        let mut shards = Vec::with_capacity(files.len());
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        for (i, (shard, tensors)) in files.into_iter().enumerate() {
            for (name, info) in tensors {
                if let Some(first) = entries.get(&name) {
                    let first: &Shard = &shards[first.shard];
                    return Err(HfError::DuplicateTensor {
                        tensor: name,
                        first: first.path.clone(),
                        second: shard.path.clone(),
                    });
                }
                let (start, end) = info.data_offsets;
                let entry = Entry {
                    shard: i,
                    dtype: info.dtype,
                    shape: info.shape,
                    start,
                    end,
                };
                entries.insert(name, entry);
            }
            shards.push(shard);
        }
        let mut ckpt = Checkpoint {
            path: path.to_owned(),
            config,
            dtype: None,
            shards,
            entries,
            linears: BTreeMap::new(),
            members: BTreeSet::new(),
        };
        ckpt.group_linears()?;
        Ok(ckpt)
    }

    fn with_dtype(self, dtype: Option<Dtype>) -> Checkpoint {
        Checkpoint { dtype, ..self }
    }

    /// Finds the quantized linears, checks each against the format and records which
    /// tensors they hold.
    fn group_linears(&mut self) -> Result<()> {
        let prefixes = linear::prefixes(self.config.as_ref(), self.entries.keys(), &self.path)?;
        let Some(config) = self.config else {
            return Ok(());
        };
        let linear_set: BTreeSet<&str> = prefixes.iter().map(String::as_str).collect();
        linear::orphans(&config, self.entries.keys(), |p| linear_set.contains(p))?;
        let mut linears = BTreeMap::new();
        let mut members = BTreeSet::new();
        for prefix in prefixes {
            let info = linear::build(&prefix, &config, &|name| self.tensor(name))?;
            members.extend(
                info.tensor_names(&prefix)
                    .filter(|n| self.entries.contains_key(n)),
            );
            linears.insert(prefix, info);
        }
        self.linears = linears;
        self.members = members;
        Ok(())
    }

    /// The path opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The quantization config (`None` for a checkpoint without quantized tensors).
    pub fn config(&self) -> Option<&QuantConfig> {
        self.config.as_ref()
    }

    /// The model's own dtype: `config.json`'s `dtype` (transformers 4.56 on) or
    /// `torch_dtype` where it is `float32`, `float16` or `bfloat16`; `None` without
    /// one (or for a single `.safetensors` file).
    pub fn dtype(&self) -> Option<Dtype> {
        self.dtype
    }

    /// The files mapped, in the order they were opened.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        let (name, e) = self.entries.get_key_value(name)?;
        Some(self.view(name, e))
    }

    /// Every tensor, by name.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef<'_>> {
        self.entries.iter().map(|(n, e)| self.view(n, e))
    }

    /// The tensors that belong to no quantized linear (biases, norms, embeddings, ...).
    pub fn others(&self) -> impl Iterator<Item = TensorRef<'_>> {
        self.tensors().filter(|t| !self.members.contains(t.name()))
    }

    /// The quantized linears, by prefix.
    pub fn linears(&self) -> impl Iterator<Item = QuantLinear<'_>> {
        self.linears
            .iter()
            .filter_map(|(p, info)| self.linear_view(p, info))
    }

    /// The quantized linear with this prefix (`model.layers.0.mlp.up_proj`).
    pub fn linear(&self, prefix: &str) -> Option<QuantLinear<'_>> {
        let (p, info) = self.linears.get_key_value(prefix)?;
        self.linear_view(p, info)
    }

    /// The linear's views (`build` checked that its tensors exist, so never `None`).
    fn linear_view<'a>(&'a self, prefix: &'a str, info: &'a LinearInfo) -> Option<QuantLinear<'a>> {
        let zeros = match &info.zeros {
            Some(name) => Some(self.tensor(name)?),
            None => None,
        };
        let mut aux = [None; 3];
        for (slot, name) in info
            .coded
            .iter()
            .flat_map(|c| c.aux.iter())
            .enumerate()
            .take(3)
        {
            aux[slot] = Some(self.tensor(name)?);
        }
        Some(QuantLinear::new(
            prefix,
            info,
            self.tensor(&info.packed)?,
            self.tensor(&info.scales)?,
            zeros,
            aux,
        ))
    }

    fn view<'a>(&'a self, name: &'a str, e: &'a Entry) -> TensorRef<'a> {
        // The header check made `start..end` lie inside the data section.
        let data = &self.shards[e.shard].data()[e.start..e.end];
        TensorRef {
            name,
            dtype: e.dtype,
            shape: &e.shape,
            data,
        }
    }
}

/// The most bytes `config.json` or the shard index may have (real ones are kilobytes
/// to a few megabytes); a larger file is refused before it is read.
const MAX_JSON: u64 = 16 << 20;

fn read(path: &Path) -> Result<Vec<u8>> {
    input::read_limited(path, MAX_JSON).map_err(|source| HfError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Whether anything is at `path` (a dangling symlink counts: reading it says why).
fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// `config.json`'s `quantization_config`, if the file and the field exist.
fn read_config(path: &Path) -> Result<(Option<QuantConfig>, Option<Dtype>)> {
    if !exists(path) {
        return Ok((None, None));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&read(path)?).map_err(|source| HfError::Json {
            path: path.to_owned(),
            what: "config.json",
            source,
        })?;
    let dtype = ["dtype", "torch_dtype"]
        .iter()
        .find_map(|key| match value.get(key)?.as_str()? {
            "float32" => Some(Dtype::F32),
            "float16" => Some(Dtype::F16),
            "bfloat16" => Some(Dtype::BF16),
            _ => None,
        });
    // mlx-lm writes `quantization` (and the same object as `quantization_config`).
    if let Some(q) = value.get("quantization").filter(|q| !q.is_null()) {
        return Ok((Some(super::families::mlx_config(q)?), dtype));
    }
    let config = match value.get("quantization_config") {
        None | Some(serde_json::Value::Null) => None,
        Some(q) => Some(QuantConfig::from_json(q)?),
    };
    Ok((config, dtype))
}

/// A name that stays inside the folder: no separators, not `.` or `..`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\'])
}
