//! Integration tests: one binary, one module per area (see STYLE.md, ripgrep's layout).

mod backends;
mod batched;
mod cli;
mod closed_output;
mod compare;
mod datasets;
mod docs;
mod e2e;
mod engine;
mod fuzz_corpus;
mod golden;
mod hf_dataset;
mod input_limits;
mod interrupt;
mod mock_server;
mod module_graph;
mod multi_turn;
mod reports;
mod response_limits;
mod runs;
mod shards;
mod steady_state;
mod timed_trace;
mod tokenizer_files;
mod trace_replay;
mod util;
