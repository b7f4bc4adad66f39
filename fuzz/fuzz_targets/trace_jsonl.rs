#![no_main]
//! `cargo +nightly fuzz run trace_jsonl`: see [`vllm_bench_fuzz::trace_jsonl`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| vllm_bench_fuzz::trace_jsonl(data));
