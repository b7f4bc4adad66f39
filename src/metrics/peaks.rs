//! Peak output-token throughput and peak concurrent requests, in Python's one-second
//! buckets.
//!
//! Python (`calculate_metrics`, vLLM 0.33) lays the successful requests on a grid of whole
//! seconds starting at the earliest `start_time`:
//! - every content chunk (the first at `start + ttft`, then one per ITL entry) adds 1 to its
//!   second: the "tokens" per second are really *chunks* per second;
//! - every request adds 1 to each second from `int(start - t0)` to `int(end - t0)` inclusive,
//!   so the peak is "requests active at some point during one second", not instantaneous
//!   concurrency (it can exceed `--max-concurrency`).
//!
//! Both peaks are the maxima over the grid. Times keep Python's arithmetic order (chunk times
//! accumulate ITLs one by one) so bucket edges fall exactly where Python's do.

use super::RequestOutput;

/// Grids longer than this (about 3 years of seconds) are not built; the peaks are then 0.
/// Only absurd timestamps reach it; it keeps memory bounded.
const MAX_BUCKETS: usize = 100_000_000;

/// The two peak metrics of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Peaks {
    /// Largest number of content chunks received within one second bucket.
    pub max_output_tokens_per_s: f64,
    /// Largest number of requests active during one second bucket.
    pub max_concurrent_requests: u64,
}

/// Python's one-second grid of a run: content chunks and active requests per second from
/// the earliest successful start. Also drawn by the terminal chart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerSecond {
    /// Content chunks received in each second.
    pub chunks: Vec<u64>,
    /// Requests active at some point of each second.
    pub active: Vec<u64>,
}

/// Builds the grid over the successful requests (`None` when there are none, or the span is
/// absurd).
pub fn per_second(outputs: &[RequestOutput]) -> Option<PerSecond> {
    let mut ok = outputs.iter().filter(|o| o.success).peekable();
    ok.peek()?;
    let t0 = outputs
        .iter()
        .filter(|o| o.success)
        .map(|o| o.start_time)
        .fold(f64::INFINITY, f64::min);
    let t_end = outputs
        .iter()
        .filter(|o| o.success)
        .map(|o| o.start_time + o.latency)
        .fold(f64::NEG_INFINITY, f64::max);
    // Python: int(np.ceil(max_end - min_start)) + 1 buckets.
    let span = (t_end - t0).ceil();
    if !(0.0..MAX_BUCKETS as f64).contains(&span) {
        return None;
    }
    let buckets = span as usize + 1;
    let mut chunks = vec![0u64; buckets];
    let mut active = vec![0u64; buckets];
    // Python's int() truncates toward zero; `as i64` does the same.
    let bucket_of = |t: f64| -> Option<usize> {
        let b = (t - t0) as i64;
        (0..buckets as i64).contains(&b).then_some(b as usize)
    };
    for o in ok {
        let mut t = o.start_time + o.ttft;
        if let Some(b) = bucket_of(t) {
            chunks[b] += 1;
        }
        for itl in o.itl.iter() {
            t += itl;
            if let Some(b) = bucket_of(t) {
                chunks[b] += 1;
            }
        }
        let first = ((o.start_time - t0) as i64).max(0);
        let last = (((o.start_time + o.latency) - t0) as i64).min(buckets as i64 - 1);
        for second in first..=last {
            active[second as usize] += 1;
        }
    }
    Some(PerSecond { chunks, active })
}

/// Computes both peaks over the successful requests (all zero when there are none).
pub fn peaks(outputs: &[RequestOutput]) -> Peaks {
    let Some(grid) = per_second(outputs) else {
        return Peaks::default();
    };
    Peaks {
        max_output_tokens_per_s: grid.chunks.iter().copied().max().unwrap_or(0) as f64,
        max_concurrent_requests: grid.active.iter().copied().max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(start: f64, ttft: f64, itl: &[f64], latency: f64) -> RequestOutput {
        RequestOutput {
            success: true,
            start_time: start,
            ttft,
            itl: itl.to_vec().into(),
            latency,
            ..Default::default()
        }
    }

    #[test]
    fn no_successful_requests_gives_zero() {
        let failed = RequestOutput {
            start_time: 5.0,
            ..Default::default()
        };
        assert_eq!(peaks(&[failed]), Peaks::default());
        assert_eq!(peaks(&[]), Peaks::default());
    }

    #[test]
    fn chunks_are_counted_per_second_bucket() {
        // Request A: chunks at 100.1, 100.6, 101.2; request B: chunks at 100.5, 100.9.
        let a = req(100.0, 0.1, &[0.5, 0.6], 1.2);
        let b = req(100.2, 0.3, &[0.4], 0.7);
        let p = peaks(&[a, b]);
        assert_eq!(p.max_output_tokens_per_s, 4.0);
        // Both active during second 0; only A during second 1.
        assert_eq!(p.max_concurrent_requests, 2);
    }

    #[test]
    fn concurrency_counts_requests_per_second_not_at_an_instant() {
        // Three back-to-back requests inside the same second never overlap, yet all count.
        let rs: Vec<_> = (0..3)
            .map(|i| req(10.0 + 0.3 * i as f64, 0.1, &[], 0.2))
            .collect();
        assert_eq!(peaks(&rs).max_concurrent_requests, 3);
    }

    #[test]
    fn a_request_ending_on_a_later_second_counts_there_too() {
        let long = req(0.0, 0.1, &[], 2.5);
        let late = req(2.2, 0.1, &[], 0.1);
        let p = peaks(&[long, late]);
        assert_eq!(p.max_concurrent_requests, 2);
        assert_eq!(p.max_output_tokens_per_s, 1.0);
    }

    #[test]
    fn absurd_spans_do_not_allocate() {
        let a = req(0.0, 0.1, &[], 1e12);
        assert_eq!(peaks(&[a]), Peaks::default());
    }
}
