//! Command-line flags (Python `vllm bench serve` names and defaults).
