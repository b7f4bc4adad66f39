//! Trace insight for `--dry-run`: size, arrival-rate peaks, token totals and prefix reuse.
//!
//! Prefix reuse is the hit ratio of an ideal, infinite prefix cache replaying the records in
//! arrival order (ties in file order): block `j` of a request hits when some earlier request
//! had the same hash ids at positions `0..=j` (a prefix cache reuses a block only after the
//! whole prefix before it). For traces whose ids are prefix hashes (Mooncake, Bailian) this
//! equals "the id was seen before". The token-weighted ratio counts a hit block's tokens
//! over all input tokens (a cut last block counts its own length; unique tails never hit).

use std::fmt;

use super::format::TraceFormat;
use super::prompt::{segments, Segment};
use super::reader::{ReadReport, TimedTrace};
use super::tokens::{mix64, IdSet};

/// Summary numbers of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStats {
    /// The format read.
    pub format: TraceFormat,
    /// Requests replayed.
    pub requests: usize,
    /// Earliest and latest arrival (s after the run start).
    pub first_arrival_s: f64,
    pub last_arrival_s: f64,
    /// Largest number of arrivals within any 1 s window.
    pub peak_requests_1s: usize,
    /// Largest number of arrivals within any 60 s window.
    pub peak_requests_60s: usize,
    /// Records arriving earlier than the record before them in the file (sent late, as in
    /// Python, which replays in file order).
    pub out_of_order: usize,
    /// Sum of `input_len`.
    pub total_input_tokens: u64,
    /// Sum of `output_len`.
    pub total_output_tokens: u64,
    /// Largest `input_len`.
    pub max_input_tokens: u32,
    /// Tokens per hash id used for the block counts.
    pub chunk_size: u32,
    /// Prefix blocks used by the prompts (hash ids within `input_len`).
    pub blocks: u64,
    /// Distinct prefixes among them (what an infinite cache holds at the end).
    pub distinct_blocks: u64,
    /// Blocks whose prefix an earlier request already sent.
    pub block_hits: u64,
    /// Tokens of those blocks.
    pub token_hits: u64,
    /// What the reader left out.
    pub report: ReadReport,
}

/// Largest number of sorted times within any half-open window `[t, t + width)`.
fn peak_in_window(sorted: &[f64], width: f64) -> usize {
    let mut hi = 0;
    let mut best = 0;
    for (lo, &t) in sorted.iter().enumerate() {
        while hi < sorted.len() && sorted[hi] < t + width {
            hi += 1;
        }
        best = best.max(hi - lo);
    }
    best
}

impl TraceStats {
    /// Computes the summary of `trace` for blocks of `chunk_size` tokens.
    pub fn compute(trace: &TimedTrace, chunk_size: u32) -> Self {
        let recs = &trace.records;
        let mut order: Vec<usize> = (0..recs.len()).collect();
        order.sort_by(|&a, &b| recs[a].arrival_s.total_cmp(&recs[b].arrival_s));
        let arrivals: Vec<f64> = order.iter().map(|&i| recs[i].arrival_s).collect();

        let mut seen = IdSet::default();
        let (mut blocks, mut block_hits, mut token_hits) = (0u64, 0u64, 0u64);
        for &i in &order {
            let mut chain = 0x5eed_u64;
            for seg in segments(&recs[i], chunk_size.max(1)) {
                let Segment::Block { hash_id, len } = seg else {
                    continue;
                };
                chain = mix64(chain.rotate_left(23) ^ hash_id);
                blocks += 1;
                if !seen.insert(chain) {
                    block_hits += 1;
                    token_hits += u64::from(len);
                }
            }
        }
        Self {
            format: trace.format,
            requests: recs.len(),
            first_arrival_s: arrivals.first().copied().unwrap_or(0.0),
            last_arrival_s: arrivals.last().copied().unwrap_or(0.0),
            peak_requests_1s: peak_in_window(&arrivals, 1.0),
            peak_requests_60s: peak_in_window(&arrivals, 60.0),
            out_of_order: recs
                .windows(2)
                .filter(|w| w[1].arrival_s < w[0].arrival_s)
                .count(),
            total_input_tokens: recs.iter().map(|r| u64::from(r.input_len)).sum(),
            total_output_tokens: recs.iter().map(|r| u64::from(r.output_len)).sum(),
            max_input_tokens: recs.iter().map(|r| r.input_len).max().unwrap_or(0),
            chunk_size,
            blocks,
            distinct_blocks: seen.len() as u64,
            block_hits,
            token_hits,
            report: trace.report.clone(),
        }
    }

    /// Seconds from the first to the last arrival.
    pub fn duration_s(&self) -> f64 {
        self.last_arrival_s - self.first_arrival_s
    }

    /// Mean arrivals per second over the span (0 when all arrive at once).
    pub fn mean_rate(&self) -> f64 {
        let d = self.duration_s();
        if d > 0.0 {
            self.requests as f64 / d
        } else {
            0.0
        }
    }

    /// Fraction of prefix blocks an ideal infinite prefix cache would hit.
    pub fn block_hit_ratio(&self) -> f64 {
        ratio(self.block_hits, self.blocks)
    }

    /// Fraction of input tokens an ideal infinite prefix cache would hit.
    pub fn token_hit_ratio(&self) -> f64 {
        ratio(self.token_hits, self.total_input_tokens)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The console layout of Python's result block: label padded to 40, value to 10.
fn line(f: &mut fmt::Formatter<'_>, label: &str, value: impl fmt::Display) -> fmt::Result {
    writeln!(f, "{:<40} {:<10}", label, value.to_string())
}

impl fmt::Display for TraceStats {
    /// The `--dry-run` summary block.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Trace Summary ")?;
        line(f, "Trace format:", self.format)?;
        line(f, "Requests:", self.requests)?;
        let r = &self.report;
        for (label, n) in [
            ("Skipped malformed lines:", r.malformed_skipped),
            ("Dropped failed requests:", r.failed_dropped),
            ("Dropped rows of other models:", r.other_model_dropped),
            ("Records outside the window:", r.outside_window),
        ] {
            if n > 0 {
                line(f, label, n)?;
            }
        }
        line(
            f,
            "First arrival (s):",
            format!("{:.2}", self.first_arrival_s),
        )?;
        line(f, "Arrival span (s):", format!("{:.2}", self.duration_s()))?;
        line(
            f,
            "Mean arrival rate (req/s):",
            format!("{:.2}", self.mean_rate()),
        )?;
        line(f, "Peak requests in 1 s:", self.peak_requests_1s)?;
        line(f, "Peak requests in 60 s:", self.peak_requests_60s)?;
        if self.out_of_order > 0 {
            line(f, "Out-of-order arrivals:", self.out_of_order)?;
        }
        line(f, "Total input tokens:", self.total_input_tokens)?;
        line(f, "Total output tokens:", self.total_output_tokens)?;
        let mean_in = ratio(self.total_input_tokens, self.requests as u64);
        line(f, "Mean input tokens:", format!("{mean_in:.2}"))?;
        line(f, "Max input tokens:", self.max_input_tokens)?;
        line(
            f,
            &format!("Prefix blocks ({} tokens each):", self.chunk_size),
            self.blocks,
        )?;
        line(f, "Distinct prefix blocks:", self.distinct_blocks)?;
        line(
            f,
            "Ideal prefix cache hit (blocks, %):",
            format!("{:.2}", 100.0 * self.block_hit_ratio()),
        )?;
        line(
            f,
            "Ideal prefix cache hit (tokens, %):",
            format!("{:.2}", 100.0 * self.token_hit_ratio()),
        )?;
        writeln!(f, "{}", "=".repeat(50))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_use_half_open_windows() {
        assert_eq!(peak_in_window(&[], 1.0), 0);
        assert_eq!(peak_in_window(&[0.0, 0.5, 1.0, 1.2, 1.9], 1.0), 3);
        assert_eq!(peak_in_window(&[0.0, 1.0, 2.0], 1.0), 1);
        assert_eq!(peak_in_window(&[5.0, 5.0, 5.0], 1.0), 3);
    }
}
