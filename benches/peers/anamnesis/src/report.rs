//! The rows, printed as a markdown table or as JSON.

use serde_json::{Value, json};

/// Whether the two tools wrote the same bits.
pub enum Bits {
    /// Every output byte equal (for every dq backend that ran).
    Equal,
    /// Where they differ: printed as a row marked MISMATCH.
    Mismatch(String),
    /// Not compared (a tool failed).
    Unchecked,
}

/// One row: one case, one output dtype, one thread setting.
pub struct Row {
    /// `gguf`, `linear` or `file`.
    pub kind: &'static str,
    /// The GGUF type, the linear's scheme and shape, or the file.
    pub case: String,
    /// `bf16` or `f32`.
    pub dtype: &'static str,
    /// Threads anamnesis ran with.
    pub amn_threads: usize,
    /// Threads dq ran with.
    pub dq_threads: usize,
    /// Bytes one call moves: source + output.
    pub bytes: u64,
    /// anamnesis' median seconds.
    pub amn: Result<f64, String>,
    /// dq's median seconds per backend (or per command).
    pub dq: Vec<(String, Result<f64, String>)>,
    /// The memcpy yardstick's GB/s, if this row timed one.
    pub memcpy: Option<f64>,
    /// The bits check.
    pub bits: Bits,
}

impl Row {
    fn gbps(&self, s: f64) -> f64 {
        self.bytes as f64 / s / 1e9
    }

    /// dq's fastest backend and its seconds.
    fn best(&self) -> Option<(&str, f64)> {
        self.dq
            .iter()
            .filter_map(|(b, t)| t.as_ref().ok().map(|&t| (b.as_str(), t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    fn threads(&self) -> String {
        if self.amn_threads == self.dq_threads {
            self.amn_threads.to_string()
        } else {
            format!("amn {} / dq {}", self.amn_threads, self.dq_threads)
        }
    }

    fn bits_cell(&self) -> String {
        match &self.bits {
            Bits::Equal => "equal".into(),
            Bits::Mismatch(m) => format!("**MISMATCH** ({m})"),
            Bits::Unchecked => "not checked".into(),
        }
    }
}

/// Prints the rows as one markdown table under `header` lines.
pub fn table(header: &[String], rows: &[Row]) {
    for h in header {
        println!("{h}  ");
    }
    println!();
    println!(
        "| case | out | threads | anamnesis GB/s | dq best GB/s (backend) | dq/anamnesis | memcpy GB/s | bits |"
    );
    println!("|---|---|---|--:|--:|--:|--:|---|");
    for r in rows {
        let amn = match &r.amn {
            Ok(s) => format!("{:.2}", r.gbps(*s)),
            Err(e) => format!("error: {e}"),
        };
        let (best, ratio) = match (r.best(), &r.amn) {
            (Some((b, s)), Ok(a)) => (format!("{:.2} ({b})", r.gbps(s)), format!("{:.2}x", a / s)),
            (Some((b, s)), Err(_)) => (format!("{:.2} ({b})", r.gbps(s)), "n/a".into()),
            (None, _) => (dq_errors(r), "n/a".into()),
        };
        let memcpy = r.memcpy.map_or("n/a".into(), |m| format!("{m:.2}"));
        println!(
            "| {} {} | {} | {} | {amn} | {best} | {ratio} | {memcpy} | {} |",
            r.kind,
            r.case,
            r.dtype,
            r.threads(),
            r.bits_cell()
        );
    }
}

fn dq_errors(r: &Row) -> String {
    let errors: Vec<String> =
        r.dq.iter()
            .filter_map(|(b, t)| t.as_ref().err().map(|e| format!("{b}: {e}")))
            .collect();
    format!("error: {}", errors.join("; "))
}

/// Prints `{"header": [...], "rows": [...]}` with GB/s per tool and backend.
pub fn json(header: &[String], rows: &[Row]) {
    let gbps = |r: &Row, t: &Result<f64, String>| match t {
        Ok(s) => json!(r.gbps(*s)),
        Err(e) => json!({ "error": e }),
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let dq: serde_json::Map<String, Value> =
                r.dq.iter().map(|(b, t)| (b.clone(), gbps(r, t))).collect();
            let best = r.best();
            json!({
                "kind": r.kind,
                "case": r.case,
                "dtype": r.dtype,
                "anamnesis_threads": r.amn_threads,
                "dq_threads": r.dq_threads,
                "bytes": r.bytes,
                "anamnesis_gbps": gbps(r, &r.amn),
                "dq_gbps": dq,
                "dq_best_backend": best.map(|b| b.0),
                "dq_over_anamnesis": match (best, &r.amn) {
                    (Some((_, s)), Ok(a)) => json!(a / s),
                    _ => Value::Null,
                },
                "memcpy_gbps": r.memcpy,
                "bits": match &r.bits {
                    Bits::Equal => json!("equal"),
                    Bits::Mismatch(m) => json!(format!("MISMATCH: {m}")),
                    Bits::Unchecked => json!("not checked"),
                },
            })
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({ "header": header, "rows": rows }))
            .expect("plain JSON values")
    );
}
