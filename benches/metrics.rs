//! Criterion benchmarks: metric calculation and dataset generation.
fn main() {}
