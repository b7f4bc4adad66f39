#![no_main]
//! `cargo +nightly fuzz run limits`: see [`vllm_bench_fuzz::limits`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::limits(data));
