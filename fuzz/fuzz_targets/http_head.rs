#![no_main]
//! `cargo +nightly fuzz run http_head`: see [`vllm_bench_fuzz::http_head`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::http_head(data));
