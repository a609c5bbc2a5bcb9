//! Single-thread speed of every GGUF block type, 16M elements to f32: the
//! generated block driver, the JIT block kernel, and a memcpy of the same bytes
//! (block bytes + f32 bytes), in one run. GB/s = (block bytes + f32 bytes) / median.
//!
//! `cargo run --release -p dq-jit --example block_speed [ELEMENTS] [REPS] [TYPE]`

#[path = "support/timing.rs"]
mod timing;

use dq_runtime::block::gguf;

fn main() {
    let mut args = std::env::args().skip(1);
    let elems: usize = args
        .next()
        .map_or(1 << 24, |a| a.parse().expect("ELEMENTS"));
    let reps: usize = args.next().map_or(15, |a| a.parse().expect("REPS"));
    let only = args.next();
    println!("| type | generated GB/s | JIT GB/s | JIT / generated | memcpy GB/s |");
    println!("|---|---:|---:|---:|---:|");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for gk in gguf::kernels()
        .iter()
        .filter(|k| only.as_deref().is_none_or(|t| t == k.name))
    {
        let blocks = elems / gk.block_elems;
        let n = blocks * gk.block_elems;
        let mut bytes: Vec<u8> = (0..blocks * gk.block_bytes)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        // Finite f16 parameters (d, dmin at their declared places): ordinary values.
        if let Some(d) = gk.decl {
            for b in bytes.chunks_exact_mut(gk.block_bytes) {
                for p in d.params {
                    if let dq_runtime::block::ParamNode::F16(at) = *p {
                        b[at..at + 2].copy_from_slice(&0x2E66u16.to_le_bytes());
                    }
                }
            }
        }
        let mut out = vec![0f32; n];
        let k = dq_jit::block::kernel(gk.name).expect("compiles");
        let total = (bytes.len() + 4 * n) as f64;
        let mut src = vec![0u8; total as usize / 2];
        src.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
        let mut dst = vec![0u8; src.len()];
        // Warm-up (the generated kernel races its forms on its first calls).
        for _ in 0..4 {
            gk.run(&bytes, &mut out).unwrap();
        }
        let want = out.clone();
        k.run(&bytes, &mut out).unwrap();
        assert!(
            want.iter()
                .zip(&out)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        // Interleaved: each repetition times all three, so drift hits them alike.
        let (mut tg, mut tj, mut tm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            tg.push(timing::time(1, || gk.run(&bytes, &mut out).unwrap()));
            tj.push(timing::time(1, || k.run(&bytes, &mut out).unwrap()));
            tm.push(timing::time(1, || {
                dst.copy_from_slice(std::hint::black_box(&src))
            }));
        }
        let (g, j, m) = (timing::median(tg), timing::median(tj), timing::median(tm));
        let gb = |t: f64| total / t / 1e9;
        println!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.1} |",
            gk.name,
            gb(g),
            gb(j),
            g / j,
            gb(m)
        );
    }
}
