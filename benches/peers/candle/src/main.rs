//! GGUF block dequantization, one thread, 4096x4096 f32 out per type: candle-core
//! 0.11's `GgmlType::to_float` into a reused buffer against dq's backends into a
//! reused buffer, over the same block bytes (quantized by candle from the same
//! floats), with a memcpy yardstick, in one process.
//!
//! GB/s = (block bytes + f32 bytes) / median time. Usage:
//! `dq-peer-candle [--min-time SECONDS] [--json] [--elements N] [--base-pages]`.
//!
//! The output and memcpy buffers are advised for transparent huge pages before
//! first touch (Linux `MADV_HUGEPAGE`, as NumPy does for large arrays; candle and
//! dq write the same buffer); `--base-pages` leaves them on 4 KiB pages.
//!
//! `dq-peer-candle --write-model FILE [--gb G]` instead writes a GGUF of about G GB
//! (default 1) of 4096x4096 tensors quantized by candle, cycling Q4_K, Q6_K, Q8_0,
//! Q4_0, Q5_K (a llama.cpp-like mix), for timing `dq convert` against `cp`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, GgmlType,
};
use dq::formats::gguf::{GgmlType as DqType, Gguf, one_tensor_file};
use dq::{Backend, Options};

/// One row of the table.
struct Row {
    ty: &'static str,
    bytes: usize,
    candle: Option<f64>,
    dq: Vec<(Backend, Result<f64, String>)>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args[i + 1].clone())
    };
    let min_time = Duration::from_secs_f64(flag("--min-time").map_or(0.5, |s| s.parse().unwrap()));
    let n: usize = flag("--elements").map_or(4096 * 4096, |s| s.parse().unwrap());
    let json = args.iter().any(|a| a == "--json");
    if let Some(path) = flag("--write-model") {
        let gb: f64 = flag("--gb").map_or(1.0, |s| s.parse().unwrap());
        write_model(&path, gb, n).expect("writing the model file");
        return;
    }
    let huge = !args.iter().any(|a| a == "--base-pages");
    let xs = floats(n);
    let mut ys = vec![0f32; n];
    advise_huge(&mut ys, huge);
    let memcpy = memcpy_gbps(n * 4, min_time, huge);
    let mut rows = vec![
        row::<BlockQ4_0>("Q4_0", 2, &xs, &mut ys, min_time),
        row::<BlockQ4_1>("Q4_1", 3, &xs, &mut ys, min_time),
        row::<BlockQ5_0>("Q5_0", 6, &xs, &mut ys, min_time),
        row::<BlockQ5_1>("Q5_1", 7, &xs, &mut ys, min_time),
        row::<BlockQ8_0>("Q8_0", 8, &xs, &mut ys, min_time),
        row::<BlockQ2K>("Q2_K", 10, &xs, &mut ys, min_time),
        row::<BlockQ3K>("Q3_K", 11, &xs, &mut ys, min_time),
        row::<BlockQ4K>("Q4_K", 12, &xs, &mut ys, min_time),
        row::<BlockQ5K>("Q5_K", 13, &xs, &mut ys, min_time),
        row::<BlockQ6K>("Q6_K", 14, &xs, &mut ys, min_time),
    ];
    rows.push(mxfp4_row(n, &mut ys, min_time));
    if json {
        print_json(&rows, memcpy, n);
    } else {
        print_table(&rows, memcpy, n);
    }
}

/// Deterministic weights: a sum of three uniforms (roughly normal), scale 0.02.
fn floats(n: usize) -> Vec<f32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut u = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32) / (1u64 << 24) as f32 - 0.5
    };
    (0..n).map(|_| (u() + u() + u()) * 0.04).collect()
}

/// Quantizes `xs` with candle, times candle and dq on the same bytes.
fn row<T: GgmlType>(ty: &'static str, id: u32, xs: &[f32], ys: &mut [f32], t: Duration) -> Row {
    let mut blocks = vec![T::zeros(); xs.len() / T::BLCK_SIZE];
    T::from_float(xs, &mut blocks);
    let candle = median(t, || T::to_float(black_box(&blocks), ys));
    // SAFETY: candle's block types are `#[repr(C)]` plain data (halves, bytes), so
    // their memory is initialized bytes; the slice covers exactly the Vec's blocks.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            blocks.as_ptr().cast::<u8>(),
            std::mem::size_of_val(&blocks[..]),
        )
    };
    let dq = dq_times(id, xs.len(), bytes, ys, t);
    Row {
        ty,
        bytes: bytes.len(),
        candle: Some(candle),
        dq,
    }
}

/// MXFP4 (candle 0.11 has no such type): random nibbles, exponents 118..=130.
fn mxfp4_row(n: usize, ys: &mut [f32], t: Duration) -> Row {
    let mut s = 7u64;
    let bytes: Vec<u8> = (0..n / 32 * 17)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 33) as u8;
            if i % 17 == 0 { 118 + r % 13 } else { r }
        })
        .collect();
    let dq = dq_times(39, n, &bytes, ys, t);
    Row {
        ty: "MXFP4",
        bytes: bytes.len(),
        candle: None,
        dq,
    }
}

/// dq's backends on a one-tensor GGUF holding `data` (type `id`, 4096 columns).
fn dq_times(
    id: u32,
    n: usize,
    data: &[u8],
    ys: &mut [f32],
    t: Duration,
) -> Vec<(Backend, Result<f64, String>)> {
    let ty = DqType::from_id(id).expect("a GGUF type id");
    let cols = 4096.min(n) as u64;
    let file = one_tensor_file("w", ty, &[cols, n as u64 / cols], data);
    let g = Gguf::from_bytes(&file).expect("the GGUF this program wrote");
    let info = &g.tensors()[0];
    [Backend::Reference, Backend::Generated, Backend::Jit]
        .into_iter()
        .map(|b| {
            let opts = Options::new().with_backend(b).with_threads(1);
            let r = match g.dequantize(info, ys, &opts) {
                Ok(()) => Ok(median(t, || {
                    g.dequantize(info, ys, &opts).expect("ran once")
                })),
                Err(e) => Err(e.to_string()),
            };
            (b, r)
        })
        .collect()
}

/// The block bytes of `xs` quantized by candle as type `T`.
fn quantize<T: GgmlType>(xs: &[f32]) -> Vec<u8> {
    let mut blocks = vec![T::zeros(); xs.len() / T::BLCK_SIZE];
    T::from_float(xs, &mut blocks);
    // SAFETY: as in `row`: `#[repr(C)]` plain data, the slice covers the Vec's blocks.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            blocks.as_ptr().cast::<u8>(),
            std::mem::size_of_val(&blocks[..]),
        )
    };
    bytes.to_vec()
}

/// Writes a GGUF v3 of about `gb` GB: tensors `blk.{i}.weight` of `n` elements.
fn write_model(path: &str, gb: f64, n: usize) -> std::io::Result<()> {
    use std::io::Write;
    let xs = floats(n);
    let kinds: [(u32, fn(&[f32]) -> Vec<u8>); 5] = [
        (12, quantize::<BlockQ4K>),
        (14, quantize::<BlockQ6K>),
        (8, quantize::<BlockQ8_0>),
        (2, quantize::<BlockQ4_0>),
        (13, quantize::<BlockQ5K>),
    ];
    let datas: Vec<(u32, Vec<u8>)> = kinds.iter().map(|(id, q)| (*id, q(&xs))).collect();
    let (mut total, mut order) = (0usize, Vec::new());
    while (total as f64) < gb * 1e9 {
        let k = order.len() % datas.len();
        total += datas[k].1.len().next_multiple_of(32);
        order.push(k);
    }
    let cols = 4096.min(n) as u64;
    let mut head = b"GGUF".to_vec();
    head.extend(3u32.to_le_bytes());
    head.extend((order.len() as u64).to_le_bytes());
    head.extend(0u64.to_le_bytes());
    let mut offset = 0u64;
    for (i, &k) in order.iter().enumerate() {
        let name = format!("blk.{i}.weight");
        head.extend((name.len() as u64).to_le_bytes());
        head.extend(name.as_bytes());
        head.extend(2u32.to_le_bytes());
        head.extend(cols.to_le_bytes());
        head.extend((n as u64 / cols).to_le_bytes());
        head.extend(datas[k].0.to_le_bytes());
        head.extend(offset.to_le_bytes());
        offset += datas[k].1.len().next_multiple_of(32) as u64;
    }
    head.resize(head.len().next_multiple_of(32), 0);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&head)?;
    for &k in &order {
        let d = &datas[k].1;
        f.write_all(d)?;
        f.write_all(&vec![0u8; d.len().next_multiple_of(32) - d.len()])?;
    }
    f.flush()?;
    println!(
        "wrote {path}: {} tensors, {} bytes of blocks",
        order.len(),
        offset
    );
    Ok(())
}

/// Median seconds of `f`, repeated for at least `min` (and at least 5 times).
fn median(min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut v) = (Instant::now(), Vec::new());
    while v.len() < 5 || start.elapsed() < min {
        let t = Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// memcpy of `bytes` into a reused buffer: (read + written bytes) / median, GB/s.
fn memcpy_gbps(bytes: usize, t: Duration, huge: bool) -> f64 {
    let (mut src, mut dst) = (vec![0u8; bytes], vec![0u8; bytes]);
    advise_huge(&mut src, huge);
    advise_huge(&mut dst, huge);
    src.fill(1);
    let s = median(t, || dst.copy_from_slice(black_box(&src)));
    2.0 * bytes as f64 / s / 1e9
}

/// With `huge`, advises `v` for transparent huge pages (`dq::buffer`; a large
/// zeroed `vec!` is fresh untouched memory, so its pages come from later writes).
fn advise_huge<T>(v: &mut [T], huge: bool) {
    if huge {
        dq::buffer::advise_huge_pages(v);
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn gbps(bytes: usize, n: usize, s: f64) -> f64 {
    (bytes + 4 * n) as f64 / s / 1e9
}

fn print_table(rows: &[Row], memcpy: f64, n: usize) {
    println!("GGUF dequantize -> f32, {n} elements, 1 thread, GB/s = (block + f32 bytes) / median");
    println!("CPU: {}   memcpy: {memcpy:.1} GB/s", cpu_model());
    println!(
        "{:<6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9}",
        "type", "candle", "dq-ref", "dq-gen", "dq-jit", "gen/mcpy", "gen/candle", "jit:gen"
    );
    for r in rows {
        let cell =
            |s: Option<f64>| s.map_or("n/a".to_owned(), |s| format!("{:.1}", gbps(r.bytes, n, s)));
        let dq = |b| {
            r.dq.iter()
                .find(|(x, _)| *x == b)
                .and_then(|(_, t)| t.as_ref().ok().copied())
        };
        let gen_s = dq(Backend::Generated);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}x", b / a),
            _ => "n/a".to_owned(),
        };
        // The slower of generated and JIT over the faster (time ratio, >= 1).
        let apart = match (gen_s, dq(Backend::Jit)) {
            (Some(g), Some(j)) => format!("{:.2}", g.max(j) / g.min(j)),
            _ => "n/a".to_owned(),
        };
        println!(
            "{:<6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9}",
            r.ty,
            cell(r.candle),
            cell(dq(Backend::Reference)),
            cell(gen_s),
            cell(dq(Backend::Jit)),
            gen_s.map_or("n/a".to_owned(), |s| format!(
                "{:.2}x",
                gbps(r.bytes, n, s) / memcpy
            )),
            ratio(gen_s, r.candle),
            apart,
        );
    }
}

fn print_json(rows: &[Row], memcpy: f64, n: usize) {
    let mut out = format!(
        "{{\"cpu\":{:?},\"elements\":{n},\"memcpy_gbps\":{memcpy:.3},\"rows\":[",
        cpu_model()
    );
    for (i, r) in rows.iter().enumerate() {
        let g =
            |s: Option<f64>| s.map_or("null".to_owned(), |s| format!("{:.3}", gbps(r.bytes, n, s)));
        out += &format!(
            "{}{{\"type\":\"{}\",\"candle_gbps\":{}",
            if i > 0 { "," } else { "" },
            r.ty,
            g(r.candle)
        );
        for (b, t) in &r.dq {
            out += &format!(",\"dq_{b}_gbps\":{}", g(t.as_ref().ok().copied()));
        }
        out += "}";
    }
    println!("{out}]}}");
}
