//! Times the generated block kernels of GGUF types in cache-resident and large
//! calls: per type, ISA, form and output element the median of `--repeat` calls,
//! in ns per element, beside a memcpy of the f32 output's size. For profiling the
//! block driver (`perf record`), not for published figures.
//!
//! `cargo run --release --example time_blocks -- IQ1_M,Q2_0 [--elements N] [--repeat R]`

use std::time::Instant;

use dq::arch::Isa;
use dq::block::{ParamNode, gguf};
use dq::case::Rng;

fn median(mut f: impl FnMut(), repeat: usize) -> f64 {
    let mut t: Vec<f64> = (0..repeat)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[repeat / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let types = args.first().cloned().unwrap_or_else(|| "IQ1_M".into());
    let (elements, repeat) = (opt("--elements", 1 << 24), opt("--repeat", 9));
    let isa = if Isa::Avx512.available() {
        Isa::Avx512
    } else {
        Isa::Avx2
    };
    let mut rng = Rng::new(19);
    let src = vec![0f32; elements];
    let mut dst = vec![0f32; elements];
    let memcpy = median(|| dst.copy_from_slice(std::hint::black_box(&src)), repeat);
    println!("memcpy {:.3} ms", memcpy * 1e3);
    for name in types.split(',') {
        let k = gguf::kernel(name).expect("a declared type");
        let mut bytes = rng.bytes(elements / k.block_elems * k.block_bytes);
        for block in bytes.chunks_exact_mut(k.block_bytes) {
            for p in k.decl.map_or(&[][..], |d| d.params) {
                if let ParamNode::F16(at) = *p {
                    let h = 0x2000u16 + rng.below(0x1000) as u16;
                    block[at..at + 2].copy_from_slice(&h.to_le_bytes());
                }
            }
        }
        let mut out = vec![0f32; elements];
        let mut out16 = vec![half::bf16::ZERO; elements];
        for form in 0..k.forms() {
            let f = median(|| k.run_form(isa, form, &bytes, &mut out).unwrap(), repeat);
            let b = median(
                || k.run_form(isa, form, &bytes, &mut out16).unwrap(),
                repeat,
            );
            println!(
                "{name} {isa:?} form {form}: f32 {:.3} ms ({:.2}x memcpy), bf16 {:.3} ms",
                f * 1e3,
                memcpy / f,
                b * 1e3
            );
        }
    }
}
