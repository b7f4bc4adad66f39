#![no_main]
//! `cargo +nightly fuzz run prometheus_text`: see [`vllm_bench_fuzz::prometheus_text`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::prometheus_text(data));
