//! What a shard's result file carries beyond Python's schema, under `vllm_bench_shard`: the
//! facts an exact merge needs. Every request's figures (times relative to the shared start,
//! its place in the one-process run, the hash of its request bytes), the settings the
//! metrics were computed with, the run's facts as one process would have reported them, and
//! each core's histograms in HdrHistogram's V2 deflate format (base64, as in HdrHistogram's
//! interval logs). Written by a shard, read back by `vllm-bench merge`.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::recorder::Histograms;
use crate::metrics::steady_state::SteadyStateParams;
use crate::metrics::RequestOutput;
use crate::output::facts::{Cancelled, EngineFacts, PrefixCache};
use crate::output::health::ClientHealth;
use crate::output::json::RunInfo;

/// The key of the section in the result document.
pub const KEY: &str = "vllm_bench_shard";

/// The section's layout version; a merge refuses other versions.
pub const FORMAT: u32 = 1;

/// Everything `vllm-bench merge` reads from one shard's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardSection {
    pub format: u32,
    pub shard: usize,
    pub shards: usize,
    /// The workload shared by all shards (`modes::shard::fingerprint`), 16 hex digits.
    pub fingerprint: String,
    /// `--start-at`, Unix seconds.
    pub start_at: Option<f64>,
    /// Requests this shard planned (completed + failed + cancelled + not sent).
    pub planned: usize,
    pub not_sent: usize,
    pub not_sent_session_ended: usize,
    /// `--request-cancellation-rate` (absent without it, and from files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Cancelled>,
    /// From the start to the end of this shard's last response, seconds.
    pub duration: f64,
    pub interrupted: bool,
    /// The run's facts as one process running every shard would report them.
    pub run: RunInfo,
    pub settings: Settings,
    /// Failures by reason, with one example each.
    pub failures: Vec<(String, usize, String)>,
    pub requests: Requests,
    /// Per core: ttft, itl, e2el and dispatch lag (ns).
    pub histograms: Vec<[String; 4]>,
    /// The engine that ran this shard (absent from files of earlier versions, as are the
    /// next two).
    #[serde(default)]
    pub engine: Option<EngineFacts>,
    /// The client's health on this shard's machine.
    #[serde(default)]
    pub health: Option<ClientHealth>,
    /// A trace replay's prefix-cache ratios, as this shard measured them.
    #[serde(default)]
    pub prefix_cache: Option<PrefixCache>,
    /// How this shard started on the shared axis (`--start-at` only; absent from files
    /// written before it was recorded, and then not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartFacts>,
    /// The replicas' URLs (`--base-url` repeated; empty with one server, and in files
    /// written before it was recorded): with `requests.replica`, what the merge rebuilds
    /// the per-replica block from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
}

/// How a shard started on the axis of `--start-at`, and what it knows of its clock: what
/// `vllm-bench merge` checks the shards' start against (`modes::shard_clock`). Shards on
/// different machines share one instant only as far as their clocks agree, and a shard
/// that was not ready in time sends its first requests late; neither shows in the metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartFacts {
    /// When the shard was ready to start (plan built, right before waiting), ms after
    /// `--start-at`; negative when it was ready ahead and waited.
    pub ready_ms: f64,
    /// Its clock's start minus `--start-at`, ms: 0 when its plan was built and every core
    /// had its connections open in time, else when the last of them was (the clock starts
    /// then, so the shard's duration holds no connecting; its times count from its own
    /// start). Wake-up jitter is not in it; the first send is.
    pub late_ms: f64,
    /// Its first scheduled request's send time minus its scheduled time, ms: how late it
    /// actually began sending (`None` when it sent nothing).
    pub first_send_late_ms: Option<f64>,
    /// The host it ran on: shards on one host share one clock.
    pub host: String,
    /// The kernel's clock discipline (adjtimex(2), what `timedatectl`'s NTPSynchronized
    /// reports): `Some(true)` synchronized, `Some(false)` not, `None` unknown.
    pub ntp_synchronized: Option<bool>,
    /// The kernel's estimate of the clock's maximum error, ms, when synchronized.
    pub clock_max_error_ms: Option<f64>,
}

/// What decides the metrics and their display.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub percentiles: Vec<f64>,
    /// `--percentile-metrics` names, comma-separated.
    pub percentile_metrics: String,
    /// `--goodput` SLOs (ms): ttft, tpot, e2el.
    pub goodput: [Option<f64>; 3],
    /// `--goodput ttfo:MS` (absent from files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_ttfo: Option<f64>,
    pub has_tokenizer: bool,
    pub save_detailed: bool,
    /// The steady-state settings of the whole run, when they apply to it (the merge
    /// computes the figures over every shard's spans).
    #[serde(default)]
    pub steady_state: Option<SteadyStateParams>,
}

/// Per request, in this shard's record order (columns of equal length).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    /// The request's index in the one-process run.
    pub index: Vec<u32>,
    /// FNV-1a of the request bytes (16 hex digits) for a session's first request.
    pub request_hash: Vec<Option<String>>,
    /// Arrival offset from the start, seconds.
    pub scheduled: Vec<f64>,
    pub start_time: Vec<f64>,
    pub ttft: Vec<f64>,
    pub latency: Vec<f64>,
    pub itl: Vec<Vec<f64>>,
    pub prompt_len: Vec<u64>,
    /// The output length the metrics used (usage, else the tokenizer's count).
    pub output_len: Vec<u64>,
    pub success: Vec<bool>,
    pub error: Vec<String>,
    pub queue_time: Vec<f64>,
    /// Send and end of each request, ns since the start (for the per-turn spans).
    #[serde(default)]
    pub start_ns: Vec<u64>,
    #[serde(default)]
    pub end_ns: Vec<u64>,
    /// `--multi-turn`: each request's conversation and turn (1-based); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversation: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn: Vec<u64>,
    /// Time to first output token per request (`None`: failed, or reasoning only); empty
    /// when no request had reasoning (each TTFO is then its TTFT) or in files written before
    /// it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttfo: Vec<Option<f64>>,
    /// The server's reasoning-token count per request; empty when it gave none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_tokens: Vec<Option<u64>>,
    /// Inputs per request; empty when every request carried one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_sequences: Vec<u64>,
    /// The replica each request went to (an index into [`ShardSection::replicas`]); empty
    /// with one server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica: Vec<u16>,
    /// Only with `--save-detailed`.
    pub generated_text: Option<Vec<String>>,
}

impl Requests {
    /// Appends one request.
    pub fn push(&mut self, row: ShardRequest<'_>) {
        let o = row.output;
        self.index.push(row.index);
        self.request_hash
            .push(row.hash.map(|h| format!("{h:016x}")));
        self.scheduled.push(row.scheduled);
        self.start_time.push(o.start_time);
        self.ttft.push(o.ttft);
        self.latency.push(o.latency);
        self.itl.push(o.itl.clone());
        self.prompt_len.push(o.prompt_len);
        self.output_len.push(row.output_len);
        self.success.push(o.success);
        self.error.push(o.error.clone());
        self.queue_time.push(o.client_queue_time);
        self.start_ns.push(row.start_ns);
        self.end_ns.push(row.end_ns);
        if let Some((conversation, turn)) = row.turn {
            self.conversation.push(conversation.to_string());
            self.turn.push(turn);
        }
        if let Some(r) = row.replica {
            self.replica.push(r);
        }
        // Sparse columns: kept empty until a request differs from the default (then filled
        // with the defaults of the requests before it; the first row may be that request).
        let before = self.index.len() - 1;
        let plain_ttfo = if o.success { Some(o.ttft) } else { None };
        if o.ttfo != plain_ttfo && self.ttfo.is_empty() {
            self.ttfo = (0..before).map(|i| self.default_ttfo(i)).collect();
            self.ttfo.push(o.ttfo);
        } else if !self.ttfo.is_empty() {
            self.ttfo.push(o.ttfo);
        }
        if o.reasoning_tokens.is_some() && self.reasoning_tokens.is_empty() {
            self.reasoning_tokens = vec![None; before];
            self.reasoning_tokens.push(o.reasoning_tokens);
        } else if !self.reasoning_tokens.is_empty() {
            self.reasoning_tokens.push(o.reasoning_tokens);
        }
        if o.input_sequences != 1 && self.input_sequences.is_empty() {
            self.input_sequences = vec![1; before];
            self.input_sequences.push(o.input_sequences);
        } else if !self.input_sequences.is_empty() {
            self.input_sequences.push(o.input_sequences);
        }
        if let Some(texts) = &mut self.generated_text {
            texts.push(o.generated_text.clone());
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Request `i`'s TTFO when the column is empty: its TTFT if it succeeded.
    fn default_ttfo(&self, i: usize) -> Option<f64> {
        self.success[i].then(|| self.ttft[i])
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Request `i` as the metrics calculator takes it: its output length is the one the
    /// shard's calculator used.
    pub fn output(&self, i: usize) -> RequestOutput {
        RequestOutput {
            generated_text: self
                .generated_text
                .as_ref()
                .map(|t| t[i].clone())
                .unwrap_or_default(),
            success: self.success[i],
            latency: self.latency[i],
            output_tokens: self.output_len[i],
            ttft: self.ttft[i],
            itl: self.itl[i].clone(),
            prompt_len: self.prompt_len[i],
            error: self.error[i].clone(),
            start_time: self.start_time[i],
            client_queue_time: self.queue_time[i],
            input_sequences: self.input_sequences.get(i).copied().unwrap_or(1),
            ttfo: match self.ttfo.get(i) {
                Some(t) => *t,
                None => self.default_ttfo(i),
            },
            reasoning_tokens: self.reasoning_tokens.get(i).copied().flatten(),
        }
    }

    /// Every column as long as `index` (a file edited by hand may not be).
    pub fn is_consistent(&self) -> bool {
        let n = self.index.len();
        [
            self.request_hash.len(),
            self.scheduled.len(),
            self.start_time.len(),
            self.ttft.len(),
            self.latency.len(),
            self.itl.len(),
            self.prompt_len.len(),
            self.output_len.len(),
            self.success.len(),
            self.error.len(),
            self.queue_time.len(),
            self.generated_text.as_ref().map_or(n, Vec::len),
            if self.input_sequences.is_empty() {
                n
            } else {
                self.input_sequences.len()
            },
            if self.ttfo.is_empty() {
                n
            } else {
                self.ttfo.len()
            },
            if self.reasoning_tokens.is_empty() {
                n
            } else {
                self.reasoning_tokens.len()
            },
            self.start_ns.len(),
            self.end_ns.len(),
            if self.turn.is_empty() {
                n
            } else {
                self.turn.len()
            },
            if self.turn.is_empty() {
                n
            } else {
                self.conversation.len()
            },
            if self.replica.is_empty() {
                n
            } else {
                self.replica.len()
            },
        ]
        .iter()
        .all(|&len| len == n)
    }
}

/// One request of a shard, for [`Requests::push`].
pub struct ShardRequest<'a> {
    pub index: u32,
    pub hash: Option<u64>,
    pub scheduled: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub output: &'a RequestOutput,
    pub output_len: u64,
    /// `--multi-turn`: the conversation and the turn (1-based).
    pub turn: Option<(&'a str, u64)>,
    /// With several replicas, the one it went to.
    pub replica: Option<u16>,
}

/// Why a histogram of a shard file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("a histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("a histogram is not in HdrHistogram's V2 format: {0}")]
    Decode(String),
}

/// One histogram as base64 of its V2 deflate serialization.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail, and the histogram's counts fit its own format.
    let _ = V2DeflateSerializer::new().serialize(h, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The inverse of [`encode_histogram`].
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HistogramError::Decode(format!("{e:?}")))
}

/// A core's four histograms, encoded.
pub fn encode_core(h: &Histograms) -> [String; 4] {
    [&h.ttft, &h.itl, &h.e2el, &h.dispatch_lag].map(encode_histogram)
}

/// The inverse of [`encode_core`].
pub fn decode_core(texts: &[String; 4]) -> Result<Histograms, HistogramError> {
    Ok(Histograms {
        ttft: decode_histogram(&texts[0])?,
        itl: decode_histogram(&texts[1])?,
        e2el: decode_histogram(&texts[2])?,
        dispatch_lag: decode_histogram(&texts[3])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_exactly() {
        let mut h = Histograms::default();
        for v in [1u64, 999, 1_000_000, 25_000_000, 3_000_000_000] {
            h.ttft.record(v).unwrap();
            h.dispatch_lag.record(v / 3 + 1).unwrap();
        }
        let back = decode_core(&encode_core(&h)).unwrap();
        assert_eq!(back.ttft, h.ttft);
        assert_eq!(back.dispatch_lag, h.dispatch_lag);
        assert_eq!(back.itl.len(), 0);
        assert!(decode_histogram("not base64!").is_err());
        assert!(decode_histogram("AAAA").is_err());
    }

    #[test]
    fn an_infinite_rate_travels_as_null() {
        let info = RunInfo {
            date: "d".into(),
            backend: "vllm".into(),
            label: None,
            model_id: "m".into(),
            tokenizer_id: None,
            num_prompts: 3,
            metadata: vec![("k".into(), "v".into())],
            request_rate: f64::INFINITY,
            burstiness: 0.5,
            max_concurrency: Some(2),
            ramp_up: None,
        };
        let text = serde_json::to_string(&info).unwrap();
        assert!(text.contains("\"request_rate\":null"), "{text}");
        assert_eq!(serde_json::from_str::<RunInfo>(&text).unwrap(), info);
    }

    #[test]
    fn requests_come_back_as_the_calculator_took_them() {
        let o = RequestOutput {
            success: true,
            latency: 0.25,
            output_tokens: 0,
            ttft: 0.125,
            itl: vec![0.01, 0.02],
            prompt_len: 7,
            start_time: 1.5,
            client_queue_time: 0.001,
            generated_text: "hi".into(),
            ..RequestOutput::default()
        };
        let mut r = Requests {
            generated_text: Some(Vec::new()),
            ..Requests::default()
        };
        r.push(ShardRequest {
            index: 4,
            hash: Some(0xab),
            scheduled: 1.25,
            start_ns: 1_500_000_000,
            end_ns: 1_750_000_000,
            output: &o,
            output_len: 3,
            turn: None,
            replica: None,
        });
        assert!(r.is_consistent());
        let text = serde_json::to_string(&r).unwrap();
        let back: Requests = serde_json::from_str(&text).unwrap();
        assert_eq!(back.request_hash[0].as_deref(), Some("00000000000000ab"));
        let out = back.output(0);
        assert_eq!(
            out,
            RequestOutput {
                output_tokens: 3,
                ..o
            }
        );
    }
}
