//! Times dq on every quantized linear of a checkpoint: per backend, the median of
//! `--repeat` calls into a reused f32 buffer after one untimed call (the JIT's
//! compile and the output's first touch left out). Prints one JSON object:
//! `{"linears": N, "backends": {"generated": seconds, "jit": seconds}}`, the sum
//! over the linears of each one's median. `benches/peers/checkpoints_ref.py` runs
//! it beside each family's reference library.
//!
//! `cargo run --release --example time_checkpoint -- DIR [--threads T] [--repeat R]`

use std::time::Instant;

use dq::formats::hf::Checkpoint;
use dq::{Backend, Options};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(Ok(default), |v| v.parse::<usize>())
    };
    let (Some(dir), Ok(threads), Ok(repeat)) =
        (args.first(), opt("--threads", 1), opt("--repeat", 5))
    else {
        eprintln!("usage: time_checkpoint DIR [--threads T] [--repeat R]");
        std::process::exit(2);
    };
    let ckpt = Checkpoint::open(dir).unwrap_or_else(|e| {
        eprintln!("time_checkpoint: {e}");
        std::process::exit(2)
    });
    let linears: Vec<_> = ckpt.linears().collect();
    let mut times = serde_json::Map::new();
    for backend in [Backend::Generated, Backend::Jit] {
        let opts = Options::new().with_backend(backend).with_threads(threads);
        let mut total = 0.0;
        for l in &linears {
            let mut out = vec![0f32; l.n() * l.k()];
            let mut run = || {
                let t = Instant::now();
                l.dequantize(&mut out, &opts)
                    .map(|()| t.elapsed().as_secs_f64())
            };
            if let Err(e) = run() {
                eprintln!("time_checkpoint: {backend}: {e}");
                std::process::exit(1);
            }
            let mut s: Vec<f64> = (0..repeat.max(1)).filter_map(|_| run().ok()).collect();
            s.sort_by(f64::total_cmp);
            total += s[s.len() / 2];
        }
        times.insert(backend.name().to_owned(), total.into());
    }
    let report = serde_json::json!({"linears": linears.len(), "backends": times});
    println!("{report}");
}
