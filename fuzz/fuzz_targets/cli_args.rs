#![no_main]
//! `cargo +nightly fuzz run cli_args`: see [`vllm_bench_fuzz::cli_args`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::cli_args(data));
