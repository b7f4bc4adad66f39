#![no_main]
//! `cargo +nightly fuzz run trace_csv`: see [`vllm_bench_fuzz::trace_csv`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::trace_csv(data));
