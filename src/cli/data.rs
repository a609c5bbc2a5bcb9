//! Deterministic test data for `dq bench` and `dq demo` (splitmix64).

use dq::DType;
use dq::model::SplitMix64;
use half::{bf16, f16};

/// A small deterministic generator (the library's splitmix64).
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.0.fill(&mut v);
        v
    }

    /// Random integers of `dtype` filling a buffer of `bytes` bytes; s32 values stay
    /// within +-1000 so that results are ordinary numbers.
    pub fn ints(&mut self, dtype: DType, bytes: usize) -> Vec<u8> {
        if dtype == DType::S32 {
            return (0..bytes / 4)
                .flat_map(|_| ((self.next_u64() % 2001) as i32 - 1000).to_le_bytes())
                .collect();
        }
        self.bytes(bytes)
    }

    /// `n` scales in `[2^-10, 2^-4)` stored as `dtype` (f16, bf16, f32 or f64).
    pub fn scales(&mut self, dtype: DType, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n * dtype.bits() / 8);
        for _ in 0..n {
            let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
            let s = (1.0 + u * 63.0) / 1024.0;
            match dtype {
                DType::F16 => out.extend_from_slice(&f16::from_f32(s).to_le_bytes()),
                DType::BF16 => out.extend_from_slice(&bf16::from_f32(s).to_le_bytes()),
                DType::F64 => out.extend_from_slice(&(s as f64).to_le_bytes()),
                _ => out.extend_from_slice(&s.to_le_bytes()),
            }
        }
        out
    }
}
