//! Output: the console block (byte-compatible with Python) and the result JSON.
//!
//! Printers only read a finished `metrics::report::BenchmarkReport` plus run facts; they
//! never compute metrics. Python's number formatting, which both printers and the metrics
//! share, is `crate::pyfmt`.

pub mod console;
pub mod extras;
pub mod json;
pub mod localtime;

/// `--ramp-up-strategy` with its start and end rates, as shown before the run and saved in
/// the result JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RampUp {
    /// `linear` or `exponential`.
    pub strategy: String,
    pub start_rps: u64,
    pub end_rps: u64,
}
