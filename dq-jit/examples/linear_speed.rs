//! Single-thread speed of the 4-bit linears of `benches/checkpoints.rs` (GPTQ
//! and AWQ layouts, 4096x11008, group 128, f16 scales and packed zero points) into
//! the bf16 `[N, K]` weight: the generated driver, the JIT, and a memcpy of the
//! output's size (read + write bytes), in one run. GB/s = (packed + zero points +
//! scales + output bytes) / median, the bench's metric. The output starts on a
//! 64-byte line unless `unaligned` is given (16 bytes past one). For quick A/Bs while
//! working on the linear JIT; the criterion bench is the figure of record.
//!
//! `cargo run --release -p dq-jit --example linear_speed [REPS] [unaligned]`

#[path = "support/timing.rs"]
mod timing;

use dq_runtime::linear::{Groups, Linear, Packed, Packing, ScaleType, Scales};
use dq_runtime::rng::Rng;
use half::bf16;

const K: usize = 4096;
const N: usize = 11008;
const GROUP: usize = 128;

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .map_or(11, |a| a.parse().expect("REPS"));
    let g = K / GROUP;
    let mut rng = Rng::new(7);
    let words = rng.bytes(K * N / 2);
    let zeros = rng.bytes(g * N / 2);
    // f16 scales in [2^-10, 2^-7).
    let scales: Vec<u8> = (0..g * N)
        .flat_map(|_| (0x1800 + rng.below(0xc00) as u16).to_le_bytes())
        .collect();
    let awq = Packing::Outer {
        order: [0, 4, 1, 5, 2, 6, 3, 7],
    };
    let cases = [
        ("gptq", Packing::Inner, (1, N), 1, [0, 1, 2, 3, 4, 5, 6, 7]),
        ("awq", awq, (1, N / 8), 0, [0, 4, 1, 5, 2, 6, 3, 7]),
    ];
    // The output from a 64-byte line (the JIT streams whole lines), or 16 bytes
    // past one with `unaligned` as the second argument.
    let mut out_buf: Vec<bf16> = vec![bf16::ZERO; N * K + 64];
    let line = (64 - (out_buf.as_ptr() as usize % 64)) % 64 / 2;
    let skew = line
        + if std::env::args().nth(2).as_deref() == Some("unaligned") {
            8
        } else {
            0
        };
    let out = &mut out_buf[skew..skew + N * K];
    let mut dst = vec![0u8; N * K * 2];
    let src = vec![1u8; N * K * 2];
    let mem = timing::time(reps, || dst.copy_from_slice(&src));
    let total = (words.len() + zeros.len() + scales.len() + N * K * 2) as f64;
    println!(
        "memcpy {:.2} ms, {:.1} GB/s",
        mem * 1e3,
        2.0 * src.len() as f64 / mem / 1e9
    );
    for (name, packing, (rs, cs), plus, order) in cases {
        let weights = Packed {
            words: &words,
            bits: 4,
            packing,
            row_stride: rs,
            col_stride: cs,
            offset: 0,
        };
        let z = Packed {
            words: &zeros,
            bits: 4,
            packing: Packing::Outer { order },
            row_stride: 1,
            col_stride: N / 8,
            offset: plus,
        };
        let s = Scales {
            bytes: &scales,
            dtype: ScaleType::F16,
            row_stride: 1,
            col_stride: N,
        };
        let l = Linear::new(N, K, g, weights, Some(z), s, Groups::Size(GROUP)).expect("valid");
        let generated = timing::time(reps, || l.run(0..N, out).expect("runs"));
        let want = out.to_vec();
        dq_jit::linear().run(&l, 0..N, &mut *out).expect("runs");
        let same = *out == want[..];
        let jit = timing::time(reps, || {
            dq_jit::linear().run(&l, 0..N, &mut *out).expect("runs")
        });
        println!(
            "{name}: generated {:.2} ms ({:.2}x memcpy), jit {:.2} ms ({:.2}x memcpy){}",
            generated * 1e3,
            total / generated / (2.0 * src.len() as f64 / mem),
            jit * 1e3,
            total / jit / (2.0 * src.len() as f64 / mem),
            if same { "" } else { " DIFFERS" },
        );
        assert!(same, "{name}: JIT differs from generated");
    }
}
