#![no_main]
//! `cargo +nightly fuzz run sse_chunks`: see [`vllm_bench_fuzz::sse_chunks`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::sse_chunks(data));
