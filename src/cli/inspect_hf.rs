//! `dq inspect` of a HuggingFace checkpoint: the quantization config, a table of
//! quantized linears (name, scheme, bits, group, shape) and the other tensors.

use dq::formats::hf::{Checkpoint, FloatFormat, QuantLinear, Scheme};
use serde_json::{Value, json};

use super::text::{self, escape, pad};

/// Whether the linear has an act-order `g_idx` (one that is not sorted).
fn act_order(l: &QuantLinear<'_>) -> bool {
    l.g_idx().is_some_and(|g| !g.is_sorted())
}

/// The group size along K; `None` for one group per output row.
fn group_size(l: &QuantLinear<'_>) -> Option<usize> {
    (l.groups() > 1 || l.group_size() < l.k()).then_some(l.group_size())
}

/// `128`, `channel`, `128 act-order`.
fn group(l: &QuantLinear<'_>) -> String {
    let size = group_size(l).map_or_else(|| "channel".into(), |g| g.to_string());
    if act_order(l) {
        format!("{size} act-order")
    } else {
        size
    }
}

/// Where the scales of an integer or float linear lie: `[G, N]`, `[N, G]`, or one
/// per `[rows, inputs]` block of the weight, with a global scale for NVFP4.
fn packed_layout(l: &QuantLinear<'_>) -> String {
    // compressed-tensors stores the reciprocal (divides), ModelOpt multiplies.
    let global = match (l.scheme(), l.global_scale()) {
        (
            Scheme::Float {
                format: FloatFormat::CtNvfp4,
                ..
            },
            Some(g),
        ) => format!(" / global {g:e}"),
        (_, Some(g)) => format!(" x global {g:e}"),
        (_, None) => String::new(),
    };
    match l.scheme() {
        Scheme::Gptq { .. } | Scheme::Awq => "[G, N]".into(),
        Scheme::CompressedTensors { .. } => "[N, G]".into(),
        Scheme::Float {
            block_n, block_k, ..
        } if block_n as usize >= l.n() && block_k as usize >= l.k() => {
            format!("per tensor{global}")
        }
        Scheme::Float {
            block_n: 1,
            block_k,
            ..
        } if block_k as usize >= l.k() => format!("per channel{global}"),
        Scheme::Float {
            block_n: 1,
            block_k,
            ..
        } => format!("per {block_k} inputs{global}"),
        Scheme::Float {
            block_n, block_k, ..
        } => format!("per {block_n}x{block_k} block{global}"),
        // The coded families: `scale_layout` names theirs.
        _ => String::new(),
    }
}

/// Where the scales are and what they scale: `F16 [G, N]`, `F32 per 128x128 block`,
/// `absmax u8 per 64 of the flat weight, nested f32`, `e8m0 per 32`.
fn scale_layout(l: &QuantLinear<'_>) -> String {
    let dtype = l.scales().dtype().to_string().to_ascii_lowercase();
    match l.scheme() {
        Scheme::Bnb4 { nested: true, .. } => {
            format!(
                "absmax u8 per {} of the flat weight, nested f32",
                l.group_size()
            )
        }
        Scheme::Bnb4 { .. } => format!("absmax f32 per {} of the flat weight", l.group_size()),
        Scheme::Bnb8 => "SCB f32 per row, / 127".into(),
        Scheme::Mlx { .. } => format!("scales + biases {dtype} per {}", l.group_size()),
        Scheme::Mxfp4 => "e8m0 per 32".into(),
        _ => format!("{} {}", l.scales().dtype(), packed_layout(l)),
    }
}

/// The text report.
pub fn print_text(c: &Checkpoint) {
    println!("{}", escape(&c.path().display().to_string()));
    let files = c.files().count();
    let format = c
        .config()
        .map_or_else(|| "no quantization".into(), |q| q.method().to_string());
    let linears: Vec<QuantLinear<'_>> = c.linears().collect();
    let others: Vec<_> = c.others().collect();
    println!(
        "HuggingFace checkpoint ({format}), {files} safetensors file(s), {} quantized linear(s), {} other tensor(s)",
        linears.len(),
        others.len()
    );
    if let Some(q) = c.config() {
        println!("quantization_config: {}", escape(&format!("{q:?}")));
    }
    println!();
    let rows: Vec<Vec<String>> = linears
        .iter()
        .map(|l| {
            vec![
                escape(l.name()).into_owned(),
                l.scheme().to_string(),
                l.scheme().bits().to_string(),
                group(l),
                scale_layout(l),
                format!("{:?}", l.shape()),
            ]
        })
        .collect();
    table(
        &["linear", "scheme", "bits", "group", "scales", "shape"],
        &rows,
    );
    println!();
    let rows: Vec<Vec<String>> = others
        .iter()
        .map(|t| {
            vec![
                escape(t.name()).into_owned(),
                t.dtype().to_string(),
                format!("{:?}", t.shape()),
                t.data().len().to_string(),
            ]
        })
        .collect();
    table(&["tensor", "dtype", "shape", "bytes"], &rows);
}

/// Left-aligned columns, two spaces apart (cells already escaped).
fn table(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| text::width(rows.iter().map(|r| r[c].as_str()).chain([header[c]])))
        .collect();
    let head: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for r in std::iter::once(&head).chain(rows) {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, &w)| pad(c, w)).collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

/// The JSON report.
pub fn to_json(c: &Checkpoint) -> Value {
    let linears: Vec<Value> = c
        .linears()
        .map(|l| {
            json!({
                "name": l.name(),
                "weight": l.weight_name(),
                "scheme": l.scheme().to_string(),
                "bits": l.scheme().bits(),
                "group_size": group_size(&l),
                "groups": l.groups(),
                "act_order": act_order(&l),
                "zero_points": l.zeros().is_some(),
                "shape": l.shape(),
                "scales_dtype": l.scales().dtype().to_string(),
                "scale_layout": scale_layout(&l),
            })
        })
        .collect();
    let others: Vec<Value> = c
        .others()
        .map(|t| {
            json!({
                "name": t.name(),
                "dtype": t.dtype().to_string(),
                "shape": t.shape(),
                "bytes": t.data().len(),
            })
        })
        .collect();
    json!({
        "file": c.path().display().to_string(),
        "format": c.config().map(|q| q.method().to_string()),
        "files": c.files().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "linears": linears,
        "tensors": others,
    })
}
