//! Output: the console block (byte-compatible with Python) and the result JSON; our own
//! blocks (`extras`, `steady_state`), the SLO capacity search's report (`slo_search`), all written from one `run_result::RunResult`; reading saved results back (`result_file`) and the
//! `--compare` table; where results go and their one writer (`result_files`); a shard's
//! facts saved, read and checked (`shard_file`).
//!
//! Printers only read a finished `metrics::report::BenchmarkReport` plus run facts; they
//! never compute metrics. Python's number formatting, which both printers and the metrics
//! share, is `crate::pyfmt`.

pub mod agentic;
pub mod compare;
pub mod console;
pub mod dashboard;
pub mod dashboard_terminal;
pub mod extras;
pub mod facts;
pub mod gpu_telemetry;
pub mod health;
pub mod json;
pub mod live_board;
pub mod live_metrics;
pub mod localtime;
pub mod lora;
pub mod plot;
pub mod progress_bar;
pub mod replicas;
pub mod report;
pub mod request_export;
pub mod result_file;
pub mod result_files;
pub mod run_result;
pub mod runs_summary;
pub mod server_metrics;
pub mod shard_file;
pub mod slo_search;
pub mod start;
pub mod stdio;
pub mod steady_state_block;
pub mod terminal_chart;
