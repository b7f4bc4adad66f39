#!/usr/bin/env bash
# The project's test command (README, .ci/run): formatting, lints, then every test.
# First fetches the fixtures too large for the repository (scripts/fetch-fixtures.sh; cached,
# checked by sha256); without the network the tests that need them print `SKIP:`.
# Real-server tests (nginx-sse, llama.cpp, Slurm) run when scripts/servers/ can start them; set
# VLLM_BENCH_REQUIRE_REAL_SERVERS=1 to turn a skip into a failure (CI does). Benchmarks are
# type-checked by clippy here and run with `cargo bench` (see docs/performance.md and bench-overhead/results/HISTORY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-fixtures.sh >/dev/null || echo "test.sh: fixtures not fetched; the tests that need them will say so" >&2
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# Four test threads on two cores: the tests mostly wait on mock servers' timelines (the
# `tests` binary used about half of two cores with two threads); those that measure time
# take `util::serial()`. CONTRIBUTING.md has the figures.
cargo test --locked -- --test-threads=4
