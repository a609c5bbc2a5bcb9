//! `dq inspect FILE`: what a GGUF file holds — a metadata summary, a table of
//! tensors (name, type, shape, bytes, supported, and the part of a split set) and
//! the unsupported types by tensor count — or what a HuggingFace checkpoint holds —
//! its quantized linears (name, scheme, bits, group, shape) and other tensors — as
//! text or JSON. Any part of a GGUF split set shows the whole set (`--part-only`:
//! that part alone).

use std::path::PathBuf;

use clap::Args;
use dq::formats::gguf::{Gguf, MetaValue, Split, TensorInfo, split};
use serde_json::{Value, json};

use super::source::{Source, SourceError};
use super::text::{self, escape, pad, pad_left};
use super::unsupported::{self, TypeCount};

/// `dq inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A GGUF file, a HuggingFace checkpoint folder or a .safetensors file.
    pub file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// For a part of a GGUF split set: that part alone (its own metadata and
    /// tensors), not the whole set.
    #[arg(long)]
    pub part_only: bool,
}

/// Array elements shown before the rest is summarised.
const ARRAY_HEAD: usize = 8;
/// Characters of a string shown in the text output before the rest is summarised.
const STRING_HEAD: usize = 60;

/// Runs `dq inspect`.
///
/// # Errors
/// An input that cannot be opened or is not a valid GGUF file or checkpoint.
pub fn inspect(a: &InspectArgs) -> Result<(), SourceError> {
    let source = if a.part_only {
        Source::open_part(&a.file)?
    } else {
        Source::open(&a.file)?
    };
    match source {
        Source::Gguf(file) if a.json => print_json(&to_json(&a.file, &file)),
        Source::Gguf(file) => print_text(&a.file, &file),
        Source::Hf(ckpt) if a.json => print_json(&super::inspect_hf::to_json(&ckpt)),
        Source::Hf(ckpt) => super::inspect_hf::print_text(&ckpt),
    }
    Ok(())
}

/// Pretty JSON on stdout, with the characters [`text::needs_escape`] names escaped.
pub fn print_json(v: &Value) {
    let json = serde_json::to_string_pretty(v).expect("JSON values serialize");
    println!("{}", text::escape_json(&json));
}

fn print_text(path: &std::path::Path, f: &Gguf) {
    println!("{}", escape(&path.display().to_string()));
    println!(
        "GGUF version {}, architecture {}, {} tensors, {} metadata keys, alignment {}, data at byte {}",
        f.version(),
        escape(f.architecture().unwrap_or("(none)")),
        f.tensors().len(),
        f.metadata_len(),
        f.alignment(),
        f.data_offset()
    );
    if let Some(s) = f.split() {
        println!("{}", split_text(path, f, s));
    }
    println!();
    println!("metadata:");
    let keys: Vec<(String, MetaValue<'_>)> = f
        .metadata()
        .map(|(k, v)| (escape(k).into_owned(), v))
        .collect();
    let width = text::width(keys.iter().map(|(k, _)| k.as_str()));
    for (key, value) in &keys {
        println!(
            "  {}  {} {}",
            pad(key, width),
            pad(&type_label(value), 14),
            value_text(value)
        );
    }
    println!();
    print_tensors(f);
    let (ok, total) = (
        f.tensors().iter().filter(|t| t.is_supported()).count(),
        f.tensors().len(),
    );
    println!("\n{ok} of {total} tensors of supported types");
    let blocked = unsupported_types(f);
    if !blocked.is_empty() {
        println!(
            "unsupported types: {}",
            unsupported::summary(&blocked, false)
        );
    }
}

/// The tensor table; a `part` column (from 1) for a split set read whole.
fn print_tensors(f: &Gguf) {
    let parts = f.part_count() > 1;
    let rows: Vec<[String; 6]> = f.tensors().iter().map(tensor_row).collect();
    let header = ["name", "type", "shape", "bytes", "supported", "part"].map(String::from);
    let widths: Vec<usize> = (0..6)
        .map(|c| text::width(rows.iter().chain([&header]).map(|r| r[c].as_str())))
        .collect();
    for r in [&header].into_iter().chain(&rows) {
        let part = if parts {
            format!("{}  {}", pad(&r[4], widths[4]), r[5])
        } else {
            r[4].clone()
        };
        println!(
            "{}  {}  {}  {}  {part}",
            pad(&r[0], widths[0]),
            pad(&r[1], widths[1]),
            pad(&r[2], widths[2]),
            pad_left(&r[3], widths[3]),
        );
    }
}

fn tensor_row(t: &TensorInfo) -> [String; 6] {
    [
        escape(t.name()).into_owned(),
        t.type_name(),
        format!("{:?}", t.shape()),
        t.byte_size().map_or_else(|| "?".into(), |b| b.to_string()),
        if t.is_supported() { "yes" } else { "no" }.into(),
        (t.part() + 1).to_string(),
    ]
}

/// The unsupported types by tensor count.
fn unsupported_types(f: &Gguf) -> Vec<TypeCount> {
    let blocked = f.tensors().iter().filter(|t| !t.is_supported());
    unsupported::count(blocked.map(|t| (t.name(), t.type_name())))
}

/// The line on a split set: the whole set read (its parts' file names), or one
/// part read alone.
fn split_text(path: &std::path::Path, f: &Gguf, s: Split) -> String {
    if f.part_count() == 1 && s.count > 1 {
        return format!(
            "split set: part {} of {}, read alone (its own metadata and {} of the set's {} tensors)",
            s.part(),
            s.count,
            f.tensors().len(),
            s.tensors
        );
    }
    let names = part_names(path, s).join(", ");
    format!(
        "split set: {} parts read whole, metadata from part 1: {}",
        s.count,
        escape(&names)
    )
}

/// The file names of the parts of the set `path` belongs to (itself alone for a
/// one-part set).
fn part_names(path: &std::path::Path, s: Split) -> Vec<String> {
    let name = |p: &std::path::Path| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    match split::set_paths(path, s.count) {
        Some((_, paths)) if s.count > 1 => paths.iter().map(|p| name(p)).collect(),
        _ => vec![name(path)],
    }
}

/// `u32`, `string`, `array[string; 100]`.
fn type_label(v: &MetaValue<'_>) -> String {
    match v {
        MetaValue::Array(a) => format!("[{}; {}]", a.element_type().name(), a.len()),
        v => v.value_type().name().to_owned(),
    }
}

/// A value as text; arrays show their first elements, then how many more. Strings
/// are quoted and escaped ([`escape`]).
fn value_text(v: &MetaValue<'_>) -> String {
    match v {
        MetaValue::String(b) => {
            let text = String::from_utf8_lossy(b);
            if text.chars().count() > STRING_HEAD {
                let head: String = text.chars().take(STRING_HEAD).collect();
                format!("\"{}\"... ({} bytes)", escape(&head), b.len())
            } else {
                format!("\"{}\"", escape(&text))
            }
        }
        MetaValue::Array(a) => {
            let head: Vec<String> = a.iter().take(ARRAY_HEAD).map(|e| value_text(&e)).collect();
            let more = a.len().saturating_sub(ARRAY_HEAD as u64);
            let tail = if more > 0 {
                format!(", ... {more} more")
            } else {
                String::new()
            };
            format!("[{}{tail}]", head.join(", "))
        }
        MetaValue::U8(x) => x.to_string(),
        MetaValue::I8(x) => x.to_string(),
        MetaValue::U16(x) => x.to_string(),
        MetaValue::I16(x) => x.to_string(),
        MetaValue::U32(x) => x.to_string(),
        MetaValue::I32(x) => x.to_string(),
        MetaValue::U64(x) => x.to_string(),
        MetaValue::I64(x) => x.to_string(),
        MetaValue::F32(x) => format!("{x:?}"),
        MetaValue::F64(x) => format!("{x:?}"),
        MetaValue::Bool(x) => x.to_string(),
    }
}

fn to_json(path: &std::path::Path, f: &Gguf) -> Value {
    let metadata: Vec<Value> = f
        .metadata()
        .map(|(key, value)| {
            let mut entry = json!({ "key": key, "type": value.value_type().name() });
            if let MetaValue::Array(a) = &value {
                entry["element_type"] = json!(a.element_type().name());
                entry["len"] = json!(a.len());
                entry["truncated"] = json!(a.len() > ARRAY_HEAD as u64);
            }
            entry["value"] = value_json(&value);
            entry
        })
        .collect();
    let tensors: Vec<Value> = f
        .tensors()
        .iter()
        .map(|t| {
            let mut v = json!({
                "name": t.name(),
                "type": t.type_name(),
                "type_id": t.type_id(),
                "shape": t.shape(),
                "bytes": t.byte_size(),
                "offset": t.data_offset(),
                "supported": t.is_supported(),
            });
            if f.part_count() > 1 {
                v["part"] = json!(t.part() + 1);
            }
            v
        })
        .collect();
    let blocked: Vec<Value> = unsupported_types(f)
        .iter()
        .map(|c| json!({ "type": c.ty, "tensors": c.tensors }))
        .collect();
    json!({
        "file": path.display().to_string(),
        "version": f.version(),
        "architecture": f.architecture(),
        "alignment": f.alignment(),
        "data_offset": f.data_offset(),
        "tensor_count": f.tensors().len(),
        "metadata_count": f.metadata_len(),
        "metadata": metadata,
        "tensors": tensors,
        "unsupported_types": blocked,
        "split": f.split().map(|s| split_json(path, f, s)),
    })
}

/// `{"part": k, "count": n, "tensors": t, "read": "set" | "part", "files": [...]}`:
/// the part read alone, or the whole set (`part` 1, the parts' file names).
fn split_json(path: &std::path::Path, f: &Gguf, s: Split) -> Value {
    let alone = f.part_count() == 1 && s.count > 1;
    json!({
        "part": s.part(),
        "count": s.count,
        "tensors": s.tensors,
        "read": if alone { "part" } else { "set" },
        "files": if alone { Vec::new() } else { part_names(path, s) },
    })
}

/// A value as JSON (non-finite floats become strings; arrays, nested ones too,
/// their first elements).
fn value_json(v: &MetaValue<'_>) -> Value {
    let float = |x: f64| {
        if x.is_finite() {
            json!(x)
        } else {
            json!(x.to_string())
        }
    };
    match v {
        MetaValue::String(b) => json!(String::from_utf8_lossy(b)),
        MetaValue::Array(a) => {
            Value::Array(a.iter().take(ARRAY_HEAD).map(|e| value_json(&e)).collect())
        }
        MetaValue::U8(x) => json!(x),
        MetaValue::I8(x) => json!(x),
        MetaValue::U16(x) => json!(x),
        MetaValue::I16(x) => json!(x),
        MetaValue::U32(x) => json!(x),
        MetaValue::I32(x) => json!(x),
        MetaValue::U64(x) => json!(x),
        MetaValue::I64(x) => json!(x),
        // Via the shortest f32 text, so that 0.1f32 prints as 0.1.
        MetaValue::F32(x) => float(x.to_string().parse().unwrap_or(f64::NAN)),
        MetaValue::F64(x) => float(*x),
        MetaValue::Bool(x) => json!(x),
    }
}
