#![no_main]
//! `cargo +nightly fuzz run chunked`: see [`vllm_bench_fuzz::chunked`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::chunked(data));
