//! Python-exact `calculate_metrics` and `calculate_metrics_for_embeddings`, plus the
//! client-queue statistics `benchmark()` computes inline.
//!
//! Pure functions from the per-request outcomes to Python's `BenchmarkMetrics` /
//! `EmbedBenchmarkMetrics` dataclasses, field for field, in Python's arithmetic order so the
//! numbers are bit-identical (see `stats` for the numpy side). The rules, from
//! `vllm/benchmarks/serve.py` (0.33):
//! - only successful requests count towards totals and latency samples; a failed request
//!   contributes an output length of 0 to `actual_output_lens`;
//! - output length is `output_tokens` (usage), or, when that is 0, the token count of the
//!   generated text (the caller's tokenizer closure);
//! - TPOT is `(latency - ttft) / (output_len - 1)` for requests with more than one token;
//!   for goodput a shorter request has TPOT 0;
//! - ITL samples are every request's ITL list, concatenated in request order (read in
//!   place, never collected: see `MetricStats::from_values`);
//! - throughputs divide by the run duration `dur_s`.
//!
//! Ours beside Python's: TTFO (time to first output token, the first token that is not
//! reasoning) over the successful requests that sent an output token, the count of those
//! that did not (all reasoning), and the server's reasoning-token total.

use rayon::prelude::*;

use super::goodput::GoodputConfig;
use super::metric_stats::MetricStats;
use super::peaks::peaks;
use super::RequestOutput;

/// Python's `BenchmarkMetrics` (generation tasks). Latency statistics are in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchmarkMetrics {
    pub completed: u64,
    pub failed: u64,
    pub total_input: u64,
    pub total_output: u64,
    pub request_throughput: f64,
    /// Good requests per second; 0.0 without `--goodput` (printed/saved only with it).
    pub request_goodput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub ttft: MetricStats,
    /// Ours: time to first output token, over successful requests that sent one.
    pub ttfo: MetricStats,
    /// Ours: successful requests with no output token (every token was reasoning); left out
    /// of `ttfo`.
    pub no_output_token: u64,
    /// Ours: the reasoning tokens of successful requests, summed over those the server
    /// counted them for; `None` when it counted none.
    pub total_reasoning: Option<u64>,
    pub tpot: MetricStats,
    pub itl: MetricStats,
    pub e2el: MetricStats,
    pub max_output_tokens_per_s: f64,
    pub max_concurrent_requests: u64,
    /// Inverse real-time factor (audio seconds per wall second). Always 0.0 for now:
    /// `RequestOutput` carries no input audio duration.
    pub rtfx: f64,
}

/// Python's `EmbedBenchmarkMetrics` (pooling tasks). Latency statistics are in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbedBenchmarkMetrics {
    pub completed: u64,
    pub failed: u64,
    pub total_input: u64,
    /// Input sequences of successful requests. `RequestOutput` has no per-request sequence
    /// count, so each request counts as one (Python's default `num_input_sequences`).
    pub total_input_sequences: u64,
    pub request_throughput: f64,
    pub input_sequence_throughput: f64,
    pub total_token_throughput: f64,
    pub e2el: MetricStats,
}

/// Token counter for generated text (`len(tokenizer(text, add_special_tokens=False))`).
/// `Sync` so the texts can be counted in parallel.
pub type CountTokens<'a> = &'a (dyn Fn(&str) -> usize + Sync);

/// Python's `calculate_metrics`: the generation metrics and `actual_output_lens` (one entry
/// per request, in request order; 0 for failed requests).
pub fn calculate_metrics(
    outputs: &[RequestOutput],
    dur_s: f64,
    count_tokens: CountTokens<'_>,
    selected_percentiles: &[f64],
    goodput: &GoodputConfig,
) -> (BenchmarkMetrics, Vec<u64>) {
    let actual_output_lens = output_lengths(outputs, count_tokens);

    // Every metric is read from the outputs where they are, not collected into a column:
    // the gaps are most of what a run holds (`metrics::itl`), and a column per latency was
    // 8 bytes a request each.
    let successful = || {
        outputs
            .iter()
            .zip(&actual_output_lens)
            .filter(|(o, _)| o.success)
    };
    let tpots = || {
        successful()
            .filter(|&(_, &len)| len > 1)
            .map(|(o, &len)| tpot(o, len))
    };
    let ttfts = || successful().map(|(o, _)| o.ttft);
    let ttfos = || successful().filter_map(|(o, _)| o.ttfo);
    let e2els = || successful().map(|(o, _)| o.latency);
    let itls = || successful().flat_map(|(o, _)| o.itl.iter());

    let mut completed = 0u64;
    let mut total_input = 0u64;
    let mut good_completed = 0u64;
    let mut with_tpot = 0usize;
    let mut with_ttfo = 0usize;
    let mut gaps = 0usize;
    let mut total_reasoning: Option<u64> = None;
    for (o, &output_len) in successful() {
        completed += 1;
        total_input = total_input.saturating_add(o.prompt_len);
        with_tpot += usize::from(output_len > 1);
        with_ttfo += usize::from(o.ttfo.is_some());
        gaps += o.itl.len();
        if !goodput.is_empty() {
            // For goodput a request of one token has TPOT 0.
            let tpot = if output_len > 1 {
                tpot(o, output_len)
            } else {
                0.0
            };
            good_completed += u64::from(goodput.is_good(o.ttft, o.ttfo, tpot, o.latency));
        }
        if let Some(r) = o.reasoning_tokens {
            total_reasoning = Some(total_reasoning.unwrap_or(0).saturating_add(r));
        }
    }
    let n = completed as usize;

    // Saturating, not wrapping: the engine fails a response whose usage is past
    // `MAX_USAGE_TOKENS`, but outputs also come from shard files.
    let total_output = actual_output_lens
        .iter()
        .fold(0u64, |sum, &n| sum.saturating_add(n));
    let peaks = peaks(outputs);
    let metrics = BenchmarkMetrics {
        completed,
        failed: outputs.len() as u64 - completed,
        total_input,
        total_output,
        request_throughput: per_second(completed, dur_s),
        request_goodput: per_second(good_completed, dur_s),
        output_throughput: per_second(total_output, dur_s),
        total_token_throughput: per_second(total_input.saturating_add(total_output), dur_s),
        ttft: MetricStats::from_values(n, ttfts, selected_percentiles),
        ttfo: MetricStats::from_values(with_ttfo, ttfos, selected_percentiles),
        no_output_token: (n - with_ttfo) as u64,
        total_reasoning,
        tpot: MetricStats::from_values(with_tpot, tpots, selected_percentiles),
        itl: MetricStats::from_values(gaps, itls, selected_percentiles),
        e2el: MetricStats::from_values(n, e2els, selected_percentiles),
        max_output_tokens_per_s: peaks.max_output_tokens_per_s,
        max_concurrent_requests: peaks.max_concurrent_requests,
        rtfx: 0.0,
    };
    (metrics, actual_output_lens)
}

/// Python's TPOT of a request of `output_len` (more than one) tokens.
fn tpot(o: &RequestOutput, output_len: u64) -> f64 {
    (o.latency - o.ttft) / (output_len - 1) as f64
}

/// `count` per second of the run: Python's `count / dur_s`, and 0.0 when nothing was
/// counted. Python's duration is never 0 (it times the whole `benchmark()`), ours is the end
/// of the last request: a run whose every request was cancelled or never sent measured
/// nothing, and `0 / 0` would print `nan` where Python prints `0.00`.
fn per_second(count: u64, dur_s: f64) -> f64 {
    if count == 0 {
        0.0
    } else {
        count as f64 / dur_s
    }
}

/// Output length per request: usage `output_tokens`, else the token count of the generated
/// text (counted in parallel: re-tokenizing 100k responses serially would dominate), 0 for
/// failed requests.
pub fn output_lengths(outputs: &[RequestOutput], count_tokens: CountTokens<'_>) -> Vec<u64> {
    outputs
        .par_iter()
        .map(|o| output_length(o, count_tokens))
        .collect()
}

/// One request's entry of `actual_output_lens`: 0 when it failed, else its usage's output
/// tokens, or when that is 0 the count of its generated text.
pub fn output_length(o: &RequestOutput, count_tokens: CountTokens<'_>) -> u64 {
    match (o.success, o.output_tokens) {
        (false, _) => 0,
        (true, 0) => count_tokens(&o.generated_text) as u64,
        (true, n) => n,
    }
}

/// Python's `calculate_metrics_for_embeddings`.
pub fn calculate_metrics_for_embeddings(
    outputs: &[RequestOutput],
    dur_s: f64,
    selected_percentiles: &[f64],
) -> EmbedBenchmarkMetrics {
    let mut completed = 0u64;
    let mut total_input = 0u64;
    let mut total_input_sequences = 0u64;
    let mut e2els = Vec::with_capacity(outputs.len());
    for o in outputs.iter().filter(|o| o.success) {
        completed += 1;
        total_input = total_input.saturating_add(o.prompt_len);
        total_input_sequences = total_input_sequences.saturating_add(o.input_sequences);
        e2els.push(o.latency);
    }
    EmbedBenchmarkMetrics {
        completed,
        failed: outputs.len() as u64 - completed,
        total_input,
        total_input_sequences,
        request_throughput: per_second(completed, dur_s),
        input_sequence_throughput: per_second(total_input_sequences, dur_s),
        total_token_throughput: per_second(total_input, dur_s),
        e2el: MetricStats::from_seconds(e2els, selected_percentiles),
    }
}

/// Client-side queueing statistics, computed as Python's `benchmark()` does inline, over
/// successful requests only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientQueueStats {
    /// Time from a request's arrival to its send (waiting for a concurrency slot). Present
    /// only with `--max-concurrency`.
    pub client_queue_time: Option<MetricStats>,
    /// `latency + client_queue_time`. Present only with `--max-concurrency` and a finite
    /// `--request-rate` (with an infinite rate every request "arrives" at once).
    pub e2el_including_client_queue: Option<MetricStats>,
}

/// Computes the client-queue statistics that apply to this run (see `ClientQueueStats`).
pub fn client_queue_stats(
    outputs: &[RequestOutput],
    max_concurrency: Option<u64>,
    request_rate: f64,
    selected_percentiles: &[f64],
) -> ClientQueueStats {
    if max_concurrency.is_none() {
        return ClientQueueStats::default();
    }
    let ok = || outputs.iter().filter(|o| o.success);
    let queue: Vec<f64> = ok().map(|o| o.client_queue_time).collect();
    let including = (!request_rate.is_infinite()).then(|| {
        let samples: Vec<f64> = ok().map(|o| o.latency + o.client_queue_time).collect();
        MetricStats::from_seconds(samples, selected_percentiles)
    });
    ClientQueueStats {
        client_queue_time: Some(MetricStats::from_seconds(queue, selected_percentiles)),
        e2el_including_client_queue: including,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(prompt: u64, out: u64, ttft: f64, itl: &[f64], latency: f64) -> RequestOutput {
        RequestOutput {
            success: true,
            prompt_len: prompt,
            output_tokens: out,
            ttft,
            itl: itl.to_vec().into(),
            latency,
            generated_text: " tok".repeat(out as usize),
            ..Default::default()
        }
    }

    fn failed(prompt: u64) -> RequestOutput {
        RequestOutput {
            prompt_len: prompt,
            error: "Bad Gateway".into(),
            ..Default::default()
        }
    }

    fn never_called(_: &str) -> usize {
        panic!("tokenizer must not run when usage is present")
    }

    /// Counts the engine never passes (it fails a response past `MAX_USAGE_TOKENS`) but a
    /// tampered shard file can hold: the totals stop at `u64::MAX` instead of wrapping, and
    /// the throughputs are computed from the same totals the console prints.
    #[test]
    fn token_totals_saturate_instead_of_wrapping() {
        let huge = |prompt: u64, out: u64| RequestOutput {
            success: true,
            prompt_len: prompt,
            output_tokens: out,
            latency: 1.0,
            ..Default::default()
        };
        let outs = vec![huge(u64::MAX / 2, u64::MAX / 2); 3];
        let (m, _) = calculate_metrics(
            &outs,
            1.0,
            &never_called,
            &[99.0],
            &GoodputConfig::default(),
        );
        assert_eq!((m.total_input, m.total_output), (u64::MAX, u64::MAX));
        assert_eq!(m.output_throughput, m.total_output as f64);
        assert_eq!(m.total_token_throughput, u64::MAX as f64);
    }

    #[test]
    fn totals_throughputs_and_failed_requests() {
        let outs = vec![
            ok(10, 4, 0.1, &[0.01, 0.02, 0.03], 0.16),
            failed(7),
            ok(5, 1, 0.2, &[], 0.2),
        ];
        let (m, lens) = calculate_metrics(
            &outs,
            2.0,
            &never_called,
            &[99.0],
            &GoodputConfig::default(),
        );
        assert_eq!(lens, vec![4, 0, 1]);
        assert_eq!(
            (m.completed, m.failed, m.total_input, m.total_output),
            (2, 1, 15, 5)
        );
        assert_eq!(m.request_throughput, 1.0);
        assert_eq!(m.output_throughput, 2.5);
        assert_eq!(m.total_token_throughput, 10.0);
        assert_eq!(m.request_goodput, 0.0);
        // TPOT only from the request with more than one token.
        assert_eq!(m.tpot.mean_ms, (0.16 - 0.1) / 3.0 * 1000.0);
        assert_eq!(
            m.itl.percentiles_ms,
            vec![(
                99.0,
                crate::metrics::stats::percentile_sorted(&[0.01, 0.02, 0.03], 99.0) * 1000.0
            )]
        );
        assert_eq!(m.e2el.median_ms, (0.0 + 0.16 + 0.2) / 2.0 * 1000.0);
    }

    #[test]
    fn missing_usage_falls_back_to_the_token_counter() {
        let mut o = ok(3, 0, 0.1, &[0.1], 0.2);
        o.generated_text = "a b c".into();
        let words = |s: &str| s.split_whitespace().count();
        let (m, lens) = calculate_metrics(&[o], 1.0, &words, &[], &GoodputConfig::default());
        assert_eq!(lens, vec![3]);
        assert_eq!(m.total_output, 3);
    }

    #[test]
    fn goodput_counts_requests_meeting_every_slo() {
        let outs = vec![
            ok(1, 3, 0.020, &[], 0.030), // tpot 5 ms: good
            ok(1, 3, 0.040, &[], 0.050), // ttft too slow
            ok(1, 3, 0.020, &[], 0.060), // tpot 20 ms: too slow
            ok(1, 1, 0.020, &[], 0.500), // tpot counts as 0: good
            failed(1),                   // never good
        ];
        let slo = GoodputConfig::parse(&["ttft:30", "tpot:8"]).unwrap();
        let (m, _) = calculate_metrics(&outs, 2.0, &never_called, &[], &slo);
        assert_eq!(m.request_goodput, 1.0);
    }

    #[test]
    fn ttfo_skips_reasoning_only_requests_and_reasoning_tokens_add_up() {
        let mut thought = ok(1, 5, 0.1, &[0.1; 4], 0.5);
        thought.ttfo = Some(0.3);
        thought.reasoning_tokens = Some(2);
        let mut only_thought = ok(1, 3, 0.1, &[0.1; 2], 0.3);
        only_thought.reasoning_tokens = Some(3);
        let mut plain = ok(1, 2, 0.2, &[0.1], 0.3);
        plain.ttfo = Some(0.2);
        let outs = vec![thought, only_thought, plain, failed(1)];
        let slo = GoodputConfig::parse(&["ttfo:250"]).unwrap();
        let (m, _) = calculate_metrics(&outs, 1.0, &never_called, &[100.0], &slo);
        assert_eq!(m.ttfo.percentiles_ms, vec![(100.0, 300.0)]);
        assert_eq!(m.ttfo.mean_ms, (0.3 + 0.2) / 2.0 * 1000.0);
        assert_eq!(m.no_output_token, 1);
        assert_eq!(m.total_reasoning, Some(5));
        // Only `plain` answered within 250 ms.
        assert_eq!(m.request_goodput, 1.0);
        let (m, _) = calculate_metrics(
            &outs[2..],
            1.0,
            &never_called,
            &[],
            &GoodputConfig::default(),
        );
        assert_eq!(m.total_reasoning, None);
    }

    #[test]
    fn all_failed_gives_zero_statistics() {
        let (m, lens) = calculate_metrics(
            &[failed(3)],
            1.0,
            &never_called,
            &[50.0],
            &GoodputConfig::default(),
        );
        assert_eq!(lens, vec![0]);
        assert_eq!(m.completed, 0);
        assert_eq!(m.ttft.percentiles_ms, vec![(50.0, 0.0)]);
        assert_eq!(m.max_concurrent_requests, 0);
    }

    #[test]
    fn a_run_of_zero_duration_has_zero_throughput_not_nan() {
        // Every request cancelled: nothing recorded, duration 0.
        let (m, _) = calculate_metrics(&[], 0.0, &never_called, &[99.0], &GoodputConfig::default());
        for x in [
            m.request_throughput,
            m.request_goodput,
            m.output_throughput,
            m.total_token_throughput,
            m.rtfx,
        ] {
            assert_eq!(x, 0.0);
        }
        let e = calculate_metrics_for_embeddings(&[], 0.0, &[99.0]);
        assert_eq!(e.request_throughput, 0.0);
        assert_eq!(e.total_token_throughput, 0.0);
    }

    #[test]
    fn embeddings() {
        let outs = vec![
            ok(40, 0, 0.0, &[], 0.03),
            failed(6),
            ok(6, 0, 0.0, &[], 0.01),
        ];
        let m = calculate_metrics_for_embeddings(&outs, 0.5, &[50.0]);
        assert_eq!(
            (
                m.completed,
                m.failed,
                m.total_input,
                m.total_input_sequences
            ),
            (2, 1, 46, 2)
        );
        assert_eq!(m.request_throughput, 4.0);
        assert_eq!(m.input_sequence_throughput, 4.0);
        assert_eq!(m.total_token_throughput, 92.0);
        assert_eq!(m.e2el.mean_ms, 0.02 * 1000.0);
    }

    #[test]
    fn client_queue_sections_depend_on_concurrency_and_rate() {
        let mut a = ok(1, 2, 0.1, &[0.1], 0.2);
        a.client_queue_time = 0.5;
        let mut f = failed(1);
        f.client_queue_time = 9.0;
        let outs = vec![a, f];
        assert_eq!(
            client_queue_stats(&outs, None, 10.0, &[]),
            ClientQueueStats::default()
        );
        let inf = client_queue_stats(&outs, Some(4), f64::INFINITY, &[]);
        assert_eq!(
            inf.client_queue_time.as_ref().map(|s| s.mean_ms),
            Some(500.0)
        );
        assert!(inf.e2el_including_client_queue.is_none());
        let finite = client_queue_stats(&outs, Some(4), 10.0, &[]);
        assert_eq!(
            finite.e2el_including_client_queue.map(|s| s.mean_ms),
            Some((0.2 + 0.5) * 1000.0)
        );
    }
}
