#![no_main]
//! `cargo +nightly fuzz run cli_values`: see [`vllm_bench_fuzz::cli_values`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::cli_values(data));
