//! Python 0.33's probe statistics (`--probe-request-rate`): how long one-token requests sent
//! beside the workload took, which shows how the workload stalls unrelated requests.

use super::stats::{median_sorted, percentile_sorted, sort_samples};
use super::RequestOutput;

/// `probe_completed`, `probe_failed` and the end-to-end latency of the successful probes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeStats {
    pub completed: u64,
    pub failed: u64,
    pub median_e2el_ms: f64,
    pub p99_e2el_ms: f64,
    pub max_e2el_ms: f64,
}

impl ProbeStats {
    /// The statistics of `probes`; `None` without a successful one (Python then prints and
    /// saves nothing about probes).
    pub fn of(probes: &[RequestOutput]) -> Option<ProbeStats> {
        Self::of_latencies(&latencies(probes))
    }

    /// The statistics of the probes' end-to-end latencies, seconds (`None`: the probe
    /// failed), in any order: the probes of a run, or of several shards' files together.
    pub fn of_latencies(probes: &[Option<f64>]) -> Option<ProbeStats> {
        let mut lats: Vec<f64> = probes.iter().flatten().copied().collect();
        if lats.is_empty() {
            return None;
        }
        sort_samples(&mut lats);
        Some(ProbeStats {
            completed: lats.len() as u64,
            failed: (probes.len() - lats.len()) as u64,
            median_e2el_ms: median_sorted(&lats) * 1000.0,
            p99_e2el_ms: percentile_sorted(&lats, 99.0) * 1000.0,
            max_e2el_ms: lats[lats.len() - 1] * 1000.0,
        })
    }
}

/// Each probe's end-to-end latency, seconds, `None` when it failed: what the statistics are
/// computed from (and what a shard saves of its probes).
pub fn latencies(probes: &[RequestOutput]) -> Vec<Option<f64>> {
    probes
        .iter()
        .map(|o| o.success.then_some(o.latency))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(success: bool, latency: f64) -> RequestOutput {
        RequestOutput {
            success,
            latency,
            ..RequestOutput::default()
        }
    }

    #[test]
    fn numpys_median_and_linear_percentile_over_successes() {
        let probes = [
            probe(true, 0.010),
            probe(false, 9.0),
            probe(true, 0.030),
            probe(true, 0.020),
        ];
        let s = ProbeStats::of(&probes).unwrap();
        assert_eq!((s.completed, s.failed), (3, 1));
        assert!((s.median_e2el_ms - 20.0).abs() < 1e-9);
        // np.percentile([10, 20, 30], 99) = 20 + 0.98 * 10
        assert!((s.p99_e2el_ms - 29.8).abs() < 1e-9, "{}", s.p99_e2el_ms);
        assert!((s.max_e2el_ms - 30.0).abs() < 1e-9);
        assert_eq!(ProbeStats::of(&[probe(false, 1.0)]), None);
    }
}
