//! Criterion benchmarks: SSE framing, response-head and chunked parsing, chunk JSON decoding.
fn main() {}
