#!/usr/bin/env bash
# The project's test command (README, .ci/run): formatting, lints, then every test.
# Real-server tests (nginx-sse, llama.cpp) run when ../shared/tools can start them; set
# VLLM_BENCH_REQUIRE_REAL_SERVERS=1 to turn a skip into a failure (CI does). Benchmarks are
# type-checked by clippy here and run with `cargo bench` (see docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked
