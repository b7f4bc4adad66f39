//! Orchestration: what a command line asks for, run through the engine. No socket code here:
//! modes wire the dataset, the backends, the engine, the metrics and the printers together.

pub mod agentic;
pub mod agentic_replay;
pub mod benchmark;
pub mod compare;
pub mod dataset;
pub mod live_board;
pub mod lora;
pub mod merge;
pub mod merged_facts;
pub mod multi_turn;
pub mod outcome;
pub mod plan;
pub mod point;
pub mod prepare;
pub mod profiling;
pub mod progress;
pub mod replicas;
pub mod run_dataset;
pub mod run_facts;
pub mod runs;
pub mod saved_facts;
pub mod server_scrape;
pub mod shard;
pub mod share;
pub mod slo_search;
pub mod steady_state_gate;
pub mod summary_file;
pub mod sweep_cache;
pub mod sweep_prompts;
pub mod synthesize;
pub mod target;
pub mod trace;
