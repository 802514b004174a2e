//! What the benchmark binaries share (`mod common;` in each).

/// A deterministic pseudo-random sequence in [-1, 1) (an LCG: benchmarks
/// need repeatable inputs, not good randomness).
pub fn numbers(seed: u64) -> impl Iterator<Item = f64> {
    let mut s = seed;
    std::iter::repeat_with(move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    })
}
