//! What a shard's result file carries beyond Python's schema, under `vllm_bench_shard`: the
//! shard's facts (`modes::run_facts::RunFacts`) saved, which is all `vllm-bench merge` reads
//! (the rest of the file is the shard's own report, for people). Every request's figures
//! (times relative to the shared start, its place in the one-process run, the hash of its
//! request bytes, its turn, adapter, audio length and replica), the settings the metrics
//! were computed with, the run's facts as one process would have reported them, the probes,
//! the ramp-up, the server's scrape, and each core's histograms in HdrHistogram's V2 deflate
//! format (base64, as in HdrHistogram's interval logs). Written by a shard
//! (`modes::saved_facts::save`), read back and checked here, turned back into facts by
//! `modes::merged_facts`.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::recorder::Histograms;
use crate::metrics::steady_state::SteadyStateParams;
use crate::metrics::RequestOutput;
use crate::output::facts::{Cancelled, EngineFacts, PrefixCache};
use crate::output::health::ClientHealth;
use crate::output::json::{RpsChangeEvent, RunInfo};

/// The key of the section in the result document.
pub const KEY: &str = "vllm_bench_shard";

/// The section's layout version; a merge refuses other versions. 2: the whole facts (the
/// probes, the ramp-up and the server's scrape moved in; nothing is read beside the section).
pub const FORMAT: u32 = 2;

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
    /// Its "Start" block (`--start-at` only; absent from files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_block: Option<StartBlock>,
    /// The replicas' URLs (`--base-url` repeated; empty with one server, and in files
    /// written before it was recorded): with `requests.replica`, what the merge rebuilds
    /// the per-replica block from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
    /// `--lora-modules`, in order (empty without LoRA): with `requests.adapter`, what the
    /// merge rebuilds the adapters' block from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<String>,
    /// `--ramp-up-strategy`: when the rate changed (Python's `rps_change_events`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rps_events: Vec<RpsChangeEvent>,
    /// `--probe-request-rate`: each probe's end-to-end latency, seconds (`None`: it failed);
    /// empty without probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Option<f64>>,
    /// Its scrape of the server's `/metrics` as the result key holds it
    /// (`output::server_metrics::to_json`; absent: off or unanswered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<serde_json::Value>,
    /// `--dataset-name agentic_trace`: the replay's records (every request it sent, by
    /// phase), the corpus's tree shapes and the run's settings, from which the merge
    /// computes the agentic section again (absent for other datasets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agentic: Option<crate::metrics::agentic::AgenticFacts>,
    /// `--gpu-telemetry`: each DCGM exporter's scrapes, from which the merge computes the
    /// GPU section again (empty without the flag, and in files written before it was saved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_telemetry: Vec<GpuExporter>,
}

/// One `--gpu-telemetry` exporter's scrapes as a shard saves them: what the GPU figures are
/// computed from (`server_metrics::GpuTelemetry::of`), so that a merge computes them as the
/// shard did. Only the DCGM families the figures read are kept (`gpu::dcgm::READ`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuExporter {
    /// The exporter's URL, redacted as the result key shows it.
    pub url: String,
    /// When each scrape was taken, seconds from the shard's start (the shards' shared axis
    /// with `--start-at`): the first before the run, the last after it.
    pub t_s: Vec<f64>,
    /// Per family and GPU, its value at each scrape (`null`: that scrape lacked it, or it
    /// was not a finite number).
    pub series: Vec<GpuValues>,
}

/// One DCGM family's values for one GPU, one per scrape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuValues {
    pub name: String,
    /// The exporter's `Hostname` label (empty when it gives none) and `gpu` label.
    pub hostname: String,
    pub gpu: String,
    pub values: Vec<Option<f64>>,
}

impl GpuExporter {
    /// What a shard saves of the exporter at `url` whose scrapes are `s`.
    pub fn save(url: &str, s: &crate::server_metrics::Series) -> GpuExporter {
        let read = crate::server_metrics::gpu::dcgm::READ;
        let series = read
            .iter()
            .filter_map(|name| Some((*name, s.per_gpu.get(*name)?)))
            .flat_map(|(name, gpus)| {
                gpus.iter().map(move |(gpu, values)| GpuValues {
                    name: name.to_string(),
                    hostname: gpu.host.clone(),
                    gpu: gpu.gpu.clone(),
                    values: values.iter().map(|v| v.filter(|v| v.is_finite())).collect(),
                })
            })
            .collect();
        GpuExporter {
            url: crate::safe_text::redact_url(url).into_owned(),
            t_s: s.t.clone(),
            series,
        }
    }

    /// The scrapes back as the figures read them; `None` unless every series has one value
    /// per scrape.
    fn scrapes(&self) -> Option<crate::server_metrics::Series> {
        let mut s = crate::server_metrics::Series {
            t: self.t_s.clone(),
            ..Default::default()
        };
        for v in &self.series {
            if v.values.len() != self.t_s.len() {
                return None;
            }
            let gpu = crate::server_metrics::exposition::Gpu {
                host: v.hostname.clone(),
                gpu: v.gpu.clone(),
            };
            s.per_gpu
                .entry(v.name.clone())
                .or_default()
                .insert(gpu, v.values.clone());
        }
        Some(s)
    }
}

/// How a shard started on the axis of `--start-at`, and what it knows of its clock: what
/// `vllm-bench merge` checks the shards' start against (`output::start`). Shards on
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

/// The start of a run at `--start-at` as its "Start" block shows it (`output::start`):
/// saved by a shard so that the merge of a single shard shows the block the run showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartBlock {
    /// The clock's start after `--start-at`, ms (0 when every core was ready in time).
    pub late_ms: f64,
    /// How long before `--start-at` the cores began opening their connections, seconds.
    pub lead_s: f64,
    pub cores: Vec<CoreStartFacts>,
}

/// One core's opening of its connections before `--start-at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreStartFacts {
    pub core: usize,
    pub connections: usize,
    pub connecting_s: f64,
    /// When it was ready, ms after `--start-at` (negative: ahead).
    pub ready_ms: f64,
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
    /// The adapter each request named (an index into [`ShardSection::adapters`]); empty
    /// without LoRA.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapter: Vec<u32>,
    /// Each request's audio length, seconds (audio datasets: Python's `rtfx`); empty
    /// otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audio_s: Vec<f64>,
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
        self.itl.push(o.itl.to_vec());
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
        if let Some(a) = row.adapter {
            self.adapter.push(a);
        }
        if let Some(a) = row.audio_s {
            self.audio_s.push(a);
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
            itl: self.itl[i].clone().into(),
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
            if self.adapter.is_empty() {
                n
            } else {
                self.adapter.len()
            },
            if self.audio_s.is_empty() {
                n
            } else {
                self.audio_s.len()
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
    /// `--lora-modules`: the adapter it named.
    pub adapter: Option<u32>,
    /// Audio datasets: its audio length, seconds.
    pub audio_s: Option<f64>,
}

/// Why a histogram of a shard file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("a histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("a histogram is not in HdrHistogram's V2 deflate format: {0}")]
    Decode(String),
    #[error(
        "a histogram covers {low}..{high} ns at {digits} significant digits, not the \
         {expected} vllm-bench records; the file was edited or is damaged"
    )]
    Bounds {
        low: u64,
        high: u64,
        digits: u32,
        expected: String,
    },
    #[error(
        "a histogram inflates to more than the {0} bytes its bounds can take; the file was \
         edited or is damaged"
    )]
    Inflated(usize),
}

/// HdrHistogram's V2 cookies: the deflated envelope and the plain encoding inside it.
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
const V2_COOKIE: u32 = 0x1c84_9313;
/// The plain V2 header: cookie, payload length, normalizing offset, significant digits,
/// lowest and highest trackable value, integer-to-double ratio.
const V2_HEADER: usize = 40;

/// One histogram as base64 of its V2 deflate serialization.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail, and the histogram's counts fit its own format.
    let _ = V2DeflateSerializer::new().serialize(h, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The inverse of [`encode_histogram`], for a histogram of the bounds the engine records
/// with (`engine::recorder::Histograms`) and nothing else: HdrHistogram's own reader
/// allocates whatever bounds and payload length the bytes claim (a tampered header asked
/// for 2 GB) and inflates whatever the deflate stream holds (a 1.4 MB bomb took 1 GB).
/// Here the stream is inflated up to what those bounds can encode (9 bytes a count at
/// most), and the header is checked before anything is allocated for it.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, HistogramError> {
    use std::io::Read as _;
    let bad = |why: &str| HistogramError::Decode(why.to_string());
    let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let long = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    if word(&bytes, 0) != Some(V2_DEFLATE_COOKIE) {
        return Err(bad("InvalidCookie"));
    }
    let deflated_len = word(&bytes, 4).ok_or_else(|| bad("truncated"))? as usize;
    let deflated = bytes
        .get(8..8 + deflated_len)
        .ok_or_else(|| bad("truncated"))?;
    let reference = crate::engine::recorder::Histograms::default().ttft;
    let limit = V2_HEADER + reference.distinct_values() * 9;
    let mut plain = Vec::new();
    flate2::read::ZlibDecoder::new(deflated)
        .take(limit as u64 + 1)
        .read_to_end(&mut plain)
        .map_err(|e| bad(&e.to_string()))?;
    if plain.len() > limit {
        return Err(HistogramError::Inflated(limit));
    }
    if word(&plain, 0) != Some(V2_COOKIE) {
        return Err(bad("InvalidCookie"));
    }
    let payload = word(&plain, 4).ok_or_else(|| bad("truncated"))? as usize;
    let digits = word(&plain, 12).ok_or_else(|| bad("truncated"))?;
    let low = long(&plain, 16).ok_or_else(|| bad("truncated"))?;
    let high = long(&plain, 24).ok_or_else(|| bad("truncated"))?;
    if (low, high, digits)
        != (
            reference.low(),
            reference.high(),
            u32::from(reference.sigfig()),
        )
    {
        return Err(HistogramError::Bounds {
            low,
            high,
            digits,
            expected: format!(
                "{}..{} ns at {} digits",
                reference.low(),
                reference.high(),
                reference.sigfig()
            ),
        });
    }
    if payload > plain.len() - V2_HEADER.min(plain.len()) {
        return Err(bad("truncated"));
    }
    Deserializer::new()
        .deserialize(&mut plain.as_slice())
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

/// The largest shard result read: a shard of millions of requests with their per-token
/// gaps fits; `/dev/zero` or a wrong file does not take the memory.
pub const MAX_BYTES: u64 = 4 << 30;

/// Why shard results cannot be merged: each is the user's input (a file, or the set of
/// files given) and names the file.
#[derive(Debug, thiserror::Error)]
pub enum ShardFileError {
    #[error(transparent)]
    Read(#[from] crate::whole_file::WholeFileError),
    #[error("{path}: not a JSON result file: {error}")]
    Json {
        path: String,
        error: serde_json::Error,
    },
    #[error(
        "{path}: not a shard result (no {KEY} key); shard results are written by \
         `vllm-bench ... --shard K/N --save-result`"
    )]
    NotShard { path: String },
    #[error("{path}: its {KEY} section cannot be read: {error}")]
    Section {
        path: String,
        error: serde_json::Error,
    },
    #[error("{path}: shard section format {found}; this vllm-bench reads format {FORMAT}")]
    Format { path: String, found: u64 },
    #[error(
        "{path}: says it is shard {shard} of {shards}; a shard is K of N with 0 <= K < N; \
         the file was edited or is damaged"
    )]
    ShardNumber {
        path: String,
        shard: usize,
        shards: usize,
    },
    #[error("{path}: the per-request columns of its {KEY} section differ in length")]
    Columns { path: String },
    #[error(
        "{path}: its requests name replicas outside its list of {count} (or none with \
         several); the file was edited or is damaged"
    )]
    ReplicaIndex { path: String, count: usize },
    #[error(
        "{path}: its requests name LoRA adapters outside its list of {count}; the file was \
         edited or is damaged"
    )]
    AdapterIndex { path: String, count: usize },
    #[error(
        "{path}: ran against the replicas [{theirs}], {first} against [{ours}]; every \
         shard must run with the same --base-url list"
    )]
    Replicas {
        path: String,
        first: String,
        theirs: String,
        ours: String,
    },
    #[error(
        "{path}: a shard of a different workload than {first} (fingerprint {theirs}, not \
         {ours}); every shard must run the same command with the same --seed, only K of \
         --shard K/N differing"
    )]
    Fingerprint {
        path: String,
        first: String,
        theirs: String,
        ours: String,
    },
    #[error("{path}: shard of {theirs}, {first} is a shard of {ours}")]
    Count {
        path: String,
        first: String,
        theirs: usize,
        ours: usize,
    },
    #[error(
        "{path}: started at --start-at {theirs}, {first} at {ours}; the shards of one run \
         share one --start-at"
    )]
    StartAt {
        path: String,
        first: String,
        theirs: String,
        ours: String,
    },
    #[error("{a} and {b} are both shard {shard}; pass each shard's result once")]
    Duplicate { a: String, b: String, shard: String },
    #[error(
        "{a} and {b} both hold request {index} of the run; each request is in one shard: \
         a file was edited or is damaged"
    )]
    DuplicateRequest { a: String, b: String, index: u32 },
    #[error("shard {shard} is missing (given: {given}); pass the result of every shard")]
    Missing { shard: String, given: String },
    #[error("{path}: {error}")]
    Histogram { path: String, error: HistogramError },
    #[error("{path}: {error}")]
    ServerMetrics {
        path: String,
        error: crate::output::server_metrics::ReadError,
    },
    #[error(
        "{path}: the GPU telemetry of {url} has not one value per scrape; it is written by \
         vllm-bench, so the file was edited or cut"
    )]
    GpuTelemetry { path: String, url: String },
}

/// One shard's result file, read and checked on its own: its saved facts (the rest of the
/// file, the shard's own report, is not read).
pub struct ShardFile {
    pub path: String,
    pub section: ShardSection,
    /// Its scrape of the server's `/metrics` (`None`: off, unanswered, or an older file).
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// `--gpu-telemetry`: each exporter's URL and scrapes, in the shard's order (empty
    /// without).
    pub gpu: Vec<(String, crate::server_metrics::Series)>,
}

/// A result document as the merge reads it: its shard section and nothing else (the other
/// keys are skipped as they are parsed, not kept).
#[derive(Deserialize)]
struct ShardDocument {
    #[serde(rename = "vllm_bench_shard")]
    section: Option<serde_json::Value>,
}

impl ShardFile {
    /// Reads the shard result at `path` (at most [`MAX_BYTES`]) and checks it alone: its
    /// format, its shard number, its columns and its replica indices.
    pub fn read(path: &std::path::Path) -> Result<ShardFile, ShardFileError> {
        use crate::output::server_metrics as sm;
        use serde_json::Value;
        let name = path.display().to_string();
        let text = crate::whole_file::read(path, MAX_BYTES)?;
        let doc: ShardDocument =
            serde_json::from_slice(&text).map_err(|error| ShardFileError::Json {
                path: name.clone(),
                error,
            })?;
        drop(text);
        let raw = doc
            .section
            .ok_or_else(|| ShardFileError::NotShard { path: name.clone() })?;
        if let Some(found) = raw.get("format").and_then(Value::as_u64) {
            if found != u64::from(FORMAT) {
                return Err(ShardFileError::Format { path: name, found });
            }
        }
        let section: ShardSection =
            serde_json::from_value(raw).map_err(|error| ShardFileError::Section {
                path: name.clone(),
                error,
            })?;
        if section.shard >= section.shards {
            return Err(ShardFileError::ShardNumber {
                path: name,
                shard: section.shard,
                shards: section.shards,
            });
        }
        if !section.requests.is_consistent() {
            return Err(ShardFileError::Columns { path: name });
        }
        let (count, column) = (section.replicas.len(), &section.requests.replica);
        let named = match count {
            0 | 1 => column.is_empty(),
            _ => {
                column.len() == section.requests.len()
                    && column.iter().all(|&r| usize::from(r) < count)
            }
        };
        if !named {
            return Err(ShardFileError::ReplicaIndex { path: name, count });
        }
        let adapters = section.adapters.len();
        if section
            .requests
            .adapter
            .iter()
            .any(|&a| a as usize >= adapters)
        {
            return Err(ShardFileError::AdapterIndex {
                path: name,
                count: adapters,
            });
        }
        let server_metrics = section
            .server_metrics
            .as_ref()
            .map(sm::from_json)
            .transpose()
            .map_err(|error| ShardFileError::ServerMetrics {
                path: name.clone(),
                error,
            })?
            .flatten();
        let gpu = section
            .gpu_telemetry
            .iter()
            .map(|e| match e.scrapes() {
                Some(s) => Ok((e.url.clone(), s)),
                None => Err(ShardFileError::GpuTelemetry {
                    path: name.clone(),
                    url: e.url.clone(),
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(ShardFile {
            path: name,
            section,
            server_metrics,
            gpu,
        })
    }

    /// Every core's histograms of this shard, added up.
    pub fn histograms(&self) -> Result<Histograms, ShardFileError> {
        let mut sum = Histograms::default();
        for core in &self.section.histograms {
            let h = decode_core(core).map_err(|error| ShardFileError::Histogram {
                path: self.path.clone(),
                error,
            })?;
            sum.add(&h);
        }
        Ok(sum)
    }

    /// `K/N`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.section.shard, self.section.shards)
    }
}

fn start_at_text(t: Option<f64>) -> String {
    t.map_or_else(|| "(none)".into(), crate::pyfmt::float_repr)
}

/// The shards of one run in order of their index, refused unless they are exactly the
/// shards 0..N of one workload (same count, fingerprint, replicas and start), each once.
/// `shards` is not empty (the command line takes at least one file).
pub fn check_set(mut shards: Vec<ShardFile>) -> Result<Vec<ShardFile>, ShardFileError> {
    let first = &shards[0];
    let (first_path, s0) = (first.path.clone(), first.section.clone());
    for r in &shards[1..] {
        let s = &r.section;
        if s.shards != s0.shards {
            return Err(ShardFileError::Count {
                path: r.path.clone(),
                first: first_path,
                theirs: s.shards,
                ours: s0.shards,
            });
        }
        if s.fingerprint != s0.fingerprint {
            return Err(ShardFileError::Fingerprint {
                path: r.path.clone(),
                first: first_path,
                theirs: s.fingerprint.clone(),
                ours: s0.fingerprint.clone(),
            });
        }
        if s.replicas != s0.replicas {
            return Err(ShardFileError::Replicas {
                path: r.path.clone(),
                first: first_path,
                theirs: s.replicas.join(", "),
                ours: s0.replicas.join(", "),
            });
        }
        if s.start_at != s0.start_at {
            return Err(ShardFileError::StartAt {
                path: r.path.clone(),
                first: first_path,
                theirs: start_at_text(s.start_at),
                ours: start_at_text(s0.start_at),
            });
        }
    }
    shards.sort_by_key(|r| r.section.shard);
    for pair in shards.windows(2) {
        if pair[0].section.shard == pair[1].section.shard {
            return Err(ShardFileError::Duplicate {
                a: pair[0].path.clone(),
                b: pair[1].path.clone(),
                shard: pair[0].name(),
            });
        }
    }
    let given: Vec<usize> = shards.iter().map(|r| r.section.shard).collect();
    if let Some(missing) = (0..s0.shards).find(|k| !given.contains(k)) {
        let names: Vec<String> = given.iter().map(|k| format!("{k}/{}", s0.shards)).collect();
        return Err(ShardFileError::Missing {
            shard: format!("{missing}/{}", s0.shards),
            given: names.join(", "),
        });
    }
    Ok(shards)
}

/// Every request of every shard, in the one-process run's order, as (shard, row) pairs;
/// refused when two rows claim one request of the run.
pub fn union_rows(shards: &[ShardFile]) -> Result<Vec<(usize, usize)>, ShardFileError> {
    let mut rows: Vec<(u32, usize, usize)> = shards
        .iter()
        .enumerate()
        .flat_map(|(s, r)| {
            r.section
                .requests
                .index
                .iter()
                .enumerate()
                .map(move |(j, &i)| (i, s, j))
        })
        .collect();
    rows.sort_unstable();
    if let Some(pair) = rows.windows(2).find(|p| p[0].0 == p[1].0) {
        return Err(ShardFileError::DuplicateRequest {
            a: shards[pair[0].1].path.clone(),
            b: shards[pair[1].1].path.clone(),
            index: pair[0].0,
        });
    }
    Ok(rows.into_iter().map(|(_, s, j)| (s, j)).collect())
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

    /// `h` encoded, its plain V2 bytes passed through `edit` and deflated again.
    fn tampered(h: &Histogram<u64>, edit: impl FnOnce(&mut Vec<u8>)) -> String {
        use std::io::{Read as _, Write as _};
        let b64 = base64::engine::general_purpose::STANDARD;
        let bytes = b64.decode(encode_histogram(h)).unwrap();
        let mut plain = Vec::new();
        flate2::read::ZlibDecoder::new(&bytes[8..])
            .read_to_end(&mut plain)
            .unwrap();
        edit(&mut plain);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&plain).unwrap();
        let deflated = z.finish().unwrap();
        let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        out.extend((deflated.len() as u32).to_be_bytes());
        out.extend(deflated);
        b64.encode(out)
    }

    #[test]
    fn a_histogram_claiming_other_bounds_is_refused_before_it_is_allocated() {
        let h = Histograms::default().ttft;
        assert!(decode_histogram(&tampered(&h, |_| {})).is_ok(), "untouched");
        // 1..2^62 at 5 digits: HdrHistogram's reader allocates gigabytes for its counts.
        let wide = tampered(&h, |p| {
            p[12..16].copy_from_slice(&5u32.to_be_bytes());
            p[24..32].copy_from_slice(&(1u64 << 62).to_be_bytes());
        });
        let e = decode_histogram(&wide).unwrap_err().to_string();
        assert!(
            e.starts_with("a histogram covers 1..4611686018427387904 ns at 5 significant digits"),
            "{e}"
        );
        // A payload length of 4 GB: HdrHistogram's reader allocates it before reading.
        let long = tampered(&h, |p| p[4..8].copy_from_slice(&u32::MAX.to_be_bytes()));
        assert!(decode_histogram(&long).is_err());
    }

    /// A small deflate stream that inflates to far more than any histogram of our bounds.
    #[test]
    fn a_deflate_bomb_is_refused_after_the_bytes_a_histogram_can_take() {
        let h = Histograms::default().ttft;
        let bomb = tampered(&h, |p| p.resize(64 << 20, 0));
        assert!(bomb.len() < 1 << 20, "{} bytes of base64", bomb.len());
        let e = decode_histogram(&bomb).unwrap_err();
        assert!(matches!(e, HistogramError::Inflated(_)), "{e}");
        assert!(e.to_string().contains("inflates to more than"), "{e}");
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
            itl: vec![0.01, 0.02].into(),
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
            adapter: None,
            audio_s: None,
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
