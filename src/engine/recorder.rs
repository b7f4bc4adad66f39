//! Recording: fixed-size records plus arenas for inter-token gaps and text, and HDR
//! histograms; merged into Python-shaped [`RequestOutput`]s after the run (their gaps stay
//! in the arenas: `metrics::itl`).
//!
//! Each worker (one in-flight request at a time) owns a [`WorkerLog`]; each core owns one
//! [`Histograms`] shared by its workers through short, synchronous borrows. Nothing is shared
//! across cores and nothing is locked. Per-request variable data (the ITL list, the generated
//! text) goes into the worker's arenas addressed by ranges — contiguous because a worker runs
//! one request at a time — so recording a token is a `Vec::push` into memory reserved before
//! the clock started, not an allocation per request.

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::Arc;

use hdrhistogram::Histogram;

use super::session::FinishReason;
pub use crate::metrics::itl::Gaps;
use crate::metrics::itl::{ns_to_secs as secs, Itl};
use crate::metrics::RequestOutput;

/// Why a request failed, with the text Python would report (`error`) and our detail.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Stable short kind for counting (`http_500`, `connect`, `timeout`, `malformed_event`, ...).
    pub kind: String,
    /// Python-compatible error text (the HTTP reason phrase for non-2xx, else a message).
    pub error: String,
    /// Extra detail: HTTP status and the start of the body, or the I/O error.
    pub detail: String,
}

/// The most tokens one response's usage may count (prompt, completion or reasoning): a
/// billion, beyond any context window and any stream a run could read. A larger figure is a
/// server error (`bad_usage`), not a count: summed into the run's totals it would swamp
/// them (or, at 10^19, wrap them).
pub const MAX_USAGE_TOKENS: u64 = 1_000_000_000;

/// A token count from the server's usage, in 4 bytes (a record is kept per request, so its
/// size is the run's memory per request): `None` when the server sent none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCount(u32);

impl TokenCount {
    /// No count was sent.
    pub const NONE: TokenCount = TokenCount(u32::MAX);

    /// The server's count, when it sent one that is at most [`MAX_USAGE_TOKENS`] (a larger
    /// one fails its request before it is recorded, so it is never kept).
    pub fn of(count: Option<u64>) -> TokenCount {
        match count {
            Some(n) if n <= MAX_USAGE_TOKENS => TokenCount(n as u32),
            _ => TokenCount::NONE,
        }
    }

    pub fn get(self) -> Option<u64> {
        (self != TokenCount::NONE).then_some(u64::from(self.0))
    }
}

impl Default for TokenCount {
    fn default() -> Self {
        TokenCount::NONE
    }
}

/// One request as recorded on its core: fixed-size (96 bytes; `record_stays_small`), because
/// one is kept per request for the whole run. Times are nanoseconds since the run epoch.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub index: u32,
    /// When the schedule released the request.
    pub scheduled_ns: u64,
    /// When the request was sent (Python's `start_time`).
    pub start_ns: u64,
    /// When the first token came (never 0: the epoch precedes every send).
    pub first_token_ns: Option<NonZeroU64>,
    /// The first token that is not reasoning (TTFO's end); `None` when none came.
    pub first_output_ns: Option<NonZeroU64>,
    pub last_token_ns: u64,
    /// Range of this request's inter-token gaps in the core's ITL arena.
    pub itl: Range<u32>,
    /// Range of this request's generated text in the core's text arena.
    pub text: Range<u32>,
    pub usage_prompt_tokens: TokenCount,
    pub usage_completion_tokens: TokenCount,
    /// Of the completion tokens, the reasoning ones, when the server counts them apart.
    pub usage_reasoning_tokens: TokenCount,
    pub client_prompt_len: u32,
    /// Whether the worker was idle before the scheduled time (then the gap between schedule
    /// and send is dispatch lag, not queueing behind the concurrency limit).
    pub was_waiting: bool,
    /// The replica it was sent to (`--base-url` repeated; 0 with one server).
    pub replica: u16,
    /// How the response ended, as the server said.
    pub finish_reason: Option<FinishReason>,
    pub failure: Option<Box<Failure>>,
    /// When the response ended (last byte), for non-streaming latency and the run's end.
    pub end_ns: u64,
}

/// A time in ns since the epoch as a record's optional time (a time at the epoch itself,
/// which no token can have, reads as 1 ns).
pub fn nonzero_ns(ns: u64) -> NonZeroU64 {
    NonZeroU64::new(ns).unwrap_or(NonZeroU64::MIN)
}

/// Highest latency the histograms track (one hour, in ns); larger values saturate.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("static histogram bounds are valid")
}

/// HDR histograms (ns) kept beside the exact lists: bounded-memory distributions for very
/// large runs and cheap merged summaries (dispatch lag).
#[derive(Debug, Clone)]
pub struct Histograms {
    pub ttft: Histogram<u64>,
    pub itl: Histogram<u64>,
    pub e2el: Histogram<u64>,
    pub dispatch_lag: Histogram<u64>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            ttft: new_histogram(),
            itl: new_histogram(),
            e2el: new_histogram(),
            dispatch_lag: new_histogram(),
        }
    }
}

impl Histograms {
    pub fn add(&mut self, other: &Histograms) {
        // Same bounds on both sides, so `add` cannot fail.
        let _ = self.ttft.add(&other.ttft);
        let _ = self.itl.add(&other.itl);
        let _ = self.e2el.add(&other.e2el);
        let _ = self.dispatch_lag.add(&other.dispatch_lag);
    }
}

/// Everything one worker measured.
#[derive(Debug, Default)]
pub struct WorkerLog {
    pub records: Vec<Record>,
    pub itl_ns: Gaps,
    pub text: Vec<u8>,
    /// Requests never sent because an earlier request of their session failed.
    pub session_ended: u32,
    /// Requests cancelled on purpose (`Workload::cancel`): counted, not recorded.
    pub cancelled: u32,
    /// When the last of them ended (ns since the epoch): the run lasted that long too.
    pub cancelled_end_ns: u64,
    /// Requests never sent because an earlier request of their session was cancelled.
    pub session_cancelled: u32,
}

impl WorkerLog {
    /// Reserves room for `requests` requests of about `tokens` token events each.
    pub fn with_capacity(requests: usize, tokens: usize, keep_text: bool) -> Self {
        WorkerLog {
            records: Vec::with_capacity(requests),
            itl_ns: Gaps::with_capacity(requests.saturating_mul(tokens)),
            text: Vec::with_capacity(if keep_text {
                requests.saturating_mul(tokens) * 4
            } else {
                0
            }),
            session_ended: 0,
            cancelled: 0,
            cancelled_end_ns: 0,
            session_cancelled: 0,
        }
    }

    /// Current end of the arenas, where a new request's data starts.
    pub fn arena_marks(&self) -> (u32, u32) {
        (self.itl_ns.len() as u32, self.text.len() as u32)
    }

    /// Takes in `other`'s records (already counted in the histograms) with their inter-token
    /// gaps and text, after the run: a lane's extra connections each kept their own log
    /// while its requests overlapped, and hand them to the lane's one log at its end.
    pub fn absorb(&mut self, other: WorkerLog) {
        self.records.reserve(other.records.len());
        for mut rec in other.records {
            let (itl0, text0) = self.arena_marks();
            self.itl_ns.extend(other.itl_ns.range(rec.itl.clone()));
            self.text
                .extend_from_slice(&other.text[rec.text.start as usize..rec.text.end as usize]);
            let (itl1, text1) = self.arena_marks();
            rec.itl = itl0..itl1;
            rec.text = text0..text1;
            self.records.push(rec);
        }
        self.session_ended += other.session_ended;
        self.cancelled += other.cancelled;
        self.cancelled_end_ns = self.cancelled_end_ns.max(other.cancelled_end_ns);
        self.session_cancelled += other.session_cancelled;
    }

    /// Stores a finished record and feeds the histograms.
    pub fn push(&mut self, rec: Record, h: &mut Histograms) {
        if rec.failure.is_none() {
            if let Some(first) = rec.first_token_ns {
                h.ttft
                    .saturating_record(first.get().saturating_sub(rec.start_ns).max(1));
                h.e2el
                    .saturating_record(rec.last_token_ns.saturating_sub(rec.start_ns).max(1));
            } else {
                h.e2el
                    .saturating_record(rec.end_ns.saturating_sub(rec.start_ns).max(1));
            }
            for gap in self.itl_ns.range(rec.itl.clone()) {
                h.itl.saturating_record(gap.max(1));
            }
        }
        if rec.was_waiting {
            h.dispatch_lag
                .saturating_record(rec.start_ns.saturating_sub(rec.scheduled_ns).max(1));
        }
        self.records.push(rec);
    }
}

/// The merged result of all cores, in request order.
#[derive(Debug)]
pub struct Merged {
    pub outputs: Vec<RequestOutput>,
    pub records: Vec<Record>,
    pub histograms: Histograms,
    /// Each core's own histograms (`histograms` is their sum), for a sharded run's result.
    pub per_core: Vec<Histograms>,
    /// Failure counts by kind (oha's `ResultData` idea), for the failure summary.
    pub failures_by_kind: BTreeMap<String, usize>,
    /// Latest end of any request (cancelled ones included), ns since the epoch.
    pub last_end_ns: u64,
}

/// One core's requests as Python-shaped outputs, converted on the core that recorded them.
#[derive(Debug, Default)]
pub struct CoreOutputs {
    /// In the order the core's workers finished, not request order.
    pub records: Vec<Record>,
    /// `outputs[i]` is `records[i]`'s output.
    pub outputs: Vec<RequestOutput>,
    /// Requests never sent because an earlier request of their session failed.
    pub session_ended: usize,
    /// Requests cancelled on purpose (in no record).
    pub cancelled: usize,
    /// When the last of them ended (ns since the epoch).
    pub cancelled_end_ns: u64,
    /// Requests never sent because an earlier request of their session was cancelled.
    pub session_cancelled: usize,
}

/// Converts a core's worker logs into outputs, dropping each log as soon as it is read
/// (its gap arena lives on, shared by the outputs whose `itl` are ranges of it).
///
/// Why on the core: the logs were allocated by the core thread, and mimalloc reuses a freed
/// block at once only on the thread that owns its page. Freed here, the logs' memory takes
/// the outputs; freed by the main thread, it stayed out of use while the main thread built
/// the outputs in fresh memory (+8 MB peak RSS at 10,000 streams × 20,000 requests).
pub fn outputs(logs: Vec<WorkerLog>) -> CoreOutputs {
    let n: usize = logs.iter().map(|l| l.records.len()).sum();
    let mut out = CoreOutputs {
        records: Vec::with_capacity(n),
        outputs: Vec::with_capacity(n),
        ..CoreOutputs::default()
    };
    for mut log in logs {
        out.session_ended += log.session_ended as usize;
        out.cancelled += log.cancelled as usize;
        out.cancelled_end_ns = out.cancelled_end_ns.max(log.cancelled_end_ns);
        out.session_cancelled += log.session_cancelled as usize;
        let gaps = shared_gaps(&mut log);
        for rec in log.records {
            out.outputs.push(to_output(&rec, &gaps, &log.text));
            out.records.push(rec);
        }
    }
    out
}

/// The worker's gaps, to be shared by its outputs (each a range of them, never a copy):
/// the room reserved before the run and not used is given back first.
fn shared_gaps(log: &mut WorkerLog) -> Arc<Gaps> {
    let mut gaps = std::mem::take(&mut log.itl_ns);
    gaps.shrink_to_fit();
    Arc::new(gaps)
}

/// Merges the cores' outputs and histograms into request order (requests outside the
/// workload's `total` are dropped).
///
/// In place: the largest core's vectors become the result and are sorted by a permutation,
/// so the run's records and outputs are not held twice at the end of a long run.
pub fn merge(cores: Vec<CoreOutputs>, core_histograms: Vec<Histograms>, total: usize) -> Merged {
    let mut histograms = Histograms::default();
    for h in &core_histograms {
        histograms.add(h);
    }
    // Cancelled requests are in no record, but the run lasted until they ended too.
    let cancelled_end_ns = cores.iter().map(|c| c.cancelled_end_ns).max().unwrap_or(0);
    let n: usize = cores.iter().map(|c| c.records.len()).sum();
    let mut cores = cores;
    let largest = (0..cores.len())
        .max_by_key(|&i| cores[i].records.len())
        .map(|i| cores.swap_remove(i))
        .unwrap_or_default();
    let (mut records, mut outputs) = (largest.records, largest.outputs);
    records.reserve_exact(n - records.len());
    outputs.reserve_exact(n - outputs.len());
    for mut core in cores {
        records.append(&mut core.records);
        outputs.append(&mut core.outputs);
    }
    let last_end_ns = records
        .iter()
        .map(|r| r.end_ns)
        .max()
        .unwrap_or(0)
        .max(cancelled_end_ns);
    // Positions in request order; the indexes at or past `total` sort last and are cut.
    let mut order: Vec<u32> = (0..records.len() as u32).collect();
    order.sort_unstable_by_key(|&i| records[i as usize].index);
    let kept = order.partition_point(|&i| (records[i as usize].index as usize) < total);
    permute(&mut records, &mut outputs, &mut order);
    records.truncate(kept);
    outputs.truncate(kept);
    let mut failures_by_kind = BTreeMap::new();
    for f in records.iter().filter_map(|r| r.failure.as_ref()) {
        *failures_by_kind.entry(f.kind.clone()).or_insert(0) += 1;
    }
    Merged {
        outputs,
        records,
        histograms,
        per_core: core_histograms,
        failures_by_kind,
        last_end_ns,
    }
}

/// Reorders `a` and `b` alike so that position `i` holds what was at `order[i]`, by swaps
/// (no second copy of either); `order` is used up.
fn permute<A, B>(a: &mut [A], b: &mut [B], order: &mut [u32]) {
    for start in 0..order.len() {
        let mut at = start;
        while order[at] as usize != start {
            let from = order[at] as usize;
            a.swap(at, from);
            b.swap(at, from);
            order[at] = at as u32;
            at = from;
        }
        order[at] = at as u32;
    }
}

/// One worker's records as outputs, in the order it ran them (the probe lane).
pub fn outputs_of(mut log: WorkerLog) -> Vec<RequestOutput> {
    let gaps = shared_gaps(&mut log);
    log.records
        .iter()
        .map(|r| to_output(r, &gaps, &log.text))
        .collect()
}

fn to_output(rec: &Record, itl_arena: &Arc<Gaps>, text_arena: &[u8]) -> RequestOutput {
    let start_time = secs(rec.start_ns);
    let client_queue_time = if rec.was_waiting {
        0.0
    } else {
        secs(rec.start_ns.saturating_sub(rec.scheduled_ns))
    };
    let prompt_len = rec
        .usage_prompt_tokens
        .get()
        .unwrap_or(u64::from(rec.client_prompt_len));
    if let Some(f) = &rec.failure {
        return RequestOutput {
            success: false,
            error: f.error.clone(),
            prompt_len: rec.client_prompt_len as u64,
            start_time,
            client_queue_time,
            ..RequestOutput::default()
        };
    }
    let text = &text_arena[rec.text.start as usize..rec.text.end as usize];
    let ttfo = rec
        .first_output_ns
        .map(|first| secs(first.get().saturating_sub(rec.start_ns)));
    let (ttft, latency) = match rec.first_token_ns {
        Some(first) => (
            secs(first.get().saturating_sub(rec.start_ns)),
            secs(rec.last_token_ns - rec.start_ns),
        ),
        None => (0.0, secs(rec.end_ns.saturating_sub(rec.start_ns))),
    };
    RequestOutput {
        generated_text: String::from_utf8_lossy(text).into_owned(),
        success: true,
        latency,
        output_tokens: rec.usage_completion_tokens.get().unwrap_or(0),
        ttft,
        itl: Itl::of_arena(itl_arena, rec.itl.clone()),
        prompt_len,
        error: String::new(),
        start_time,
        client_queue_time,
        // The caller knows what each request carried (`RunDataset::mark_outputs`).
        input_sequences: 1,
        ttfo,
        reasoning_tokens: rec.usage_reasoning_tokens.get(),
    }
}

impl<'a> super::session::Answer<'a> {
    /// What a request's record says of how it ended (`cancelled`: the engine's own verdict,
    /// which the record does not hold; nor does it hold the cached tokens, which only a
    /// lane's worker hands on).
    pub fn of(rec: &'a Record, cancelled: bool) -> super::session::Answer<'a> {
        super::session::Answer {
            sent_ns: rec.start_ns,
            first_token_ns: rec.first_token_ns.map(|t| t.get()),
            end_ns: rec.end_ns,
            itl_intervals: rec.itl.end - rec.itl.start,
            prompt_tokens: rec.usage_prompt_tokens.get(),
            completion_tokens: rec.usage_completion_tokens.get(),
            cached_tokens: None,
            failure: rec.failure.as_deref().map(|f| super::session::FailureText {
                error: &f.error,
                detail: &f.detail,
            }),
            cancelled,
            text: "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u32, start: u64, tokens: &[u64], rec: &mut WorkerLog) -> Record {
        let (itl0, text0) = rec.arena_marks();
        for w in tokens.windows(2) {
            rec.itl_ns.push(w[1] - w[0]);
        }
        rec.text.extend_from_slice(b" tok");
        let (itl1, text1) = rec.arena_marks();
        Record {
            index,
            start_ns: start,
            scheduled_ns: start,
            first_token_ns: tokens.first().map(|&t| nonzero_ns(t)),
            last_token_ns: *tokens.last().unwrap(),
            end_ns: *tokens.last().unwrap() + 10,
            itl: itl0..itl1,
            text: text0..text1,
            client_prompt_len: 7,
            ..Record::default()
        }
    }

    #[test]
    fn merge_orders_by_index_and_converts_units() {
        let mut h = Histograms::default();
        let mut a = WorkerLog::default();
        let r1 = record(1, 1_000_000, &[3_000_000, 4_000_000, 6_000_000], &mut a);
        a.push(r1, &mut h);
        let mut b = WorkerLog::default();
        let r0 = record(0, 0, &[2_000_000, 2_500_000], &mut b);
        b.push(r0, &mut h);
        let m = merge(vec![outputs(vec![a, b])], vec![h], 2);
        assert_eq!(m.outputs.len(), 2);
        assert_eq!(m.outputs[0].ttft, 0.002);
        assert_eq!(m.outputs[0].itl.to_vec(), vec![0.0005]);
        assert_eq!(m.outputs[1].ttft, 0.002);
        assert_eq!(m.outputs[1].latency, 0.005);
        assert_eq!(m.outputs[1].itl.to_vec(), vec![0.001, 0.002]);
        assert_eq!(m.outputs[1].generated_text, " tok");
        assert_eq!(m.outputs[1].prompt_len, 7);
        assert_eq!(m.histograms.itl.len(), 3);
        assert_eq!(m.last_end_ns, 6_000_010);
    }

    /// A record is kept per request for the whole run, so its size is the run's memory per
    /// request (beside 4 bytes per inter-token gap): it must not creep back up (160 bytes
    /// before it was made compact).
    #[test]
    fn record_stays_small() {
        assert!(
            std::mem::size_of::<Record>() <= 96,
            "Record is {} bytes",
            std::mem::size_of::<Record>()
        );
        assert_eq!(std::mem::size_of::<TokenCount>(), 4);
    }

    #[test]
    fn token_counts_keep_none_zero_and_the_bound_apart() {
        assert_eq!(TokenCount::of(None).get(), None);
        assert_eq!(TokenCount::of(Some(0)).get(), Some(0));
        assert_eq!(
            TokenCount::of(Some(MAX_USAGE_TOKENS)).get(),
            Some(MAX_USAGE_TOKENS)
        );
        assert_eq!(TokenCount::of(Some(MAX_USAGE_TOKENS + 1)).get(), None);
        assert_eq!(TokenCount::default(), TokenCount::NONE);
    }

    #[test]
    fn merge_of_several_cores_orders_in_place_and_drops_what_is_past_total() {
        let mut h = Histograms::default();
        let mut cores = Vec::new();
        // Three cores holding indexes 0..9 scattered, plus index 9 past the total of 9.
        for indexes in [&[7, 2, 9, 4][..], &[0, 8, 5], &[3, 6, 1]] {
            let mut log = WorkerLog::default();
            for &i in indexes {
                let rec = record(
                    i,
                    u64::from(i) * 1_000,
                    &[u64::from(i) * 1_000 + 500],
                    &mut log,
                );
                log.push(rec, &mut h);
            }
            cores.push(outputs(vec![log]));
        }
        let m = merge(cores, vec![h], 9);
        let indexes: Vec<u32> = m.records.iter().map(|r| r.index).collect();
        assert_eq!(indexes, (0..9).collect::<Vec<u32>>());
        let starts: Vec<f64> = m.outputs.iter().map(|o| o.start_time).collect();
        let expected: Vec<f64> = (0..9).map(|i| secs(i * 1_000)).collect();
        assert_eq!(starts, expected, "each output stays with its record");
        assert_eq!(
            m.last_end_ns, 9_510,
            "the dropped request still ends the run"
        );
    }

    #[test]
    fn permute_follows_every_cycle() {
        let mut a = vec!['a', 'b', 'c', 'd', 'e'];
        let mut b = vec![0, 1, 2, 3, 4];
        permute(&mut a, &mut b, &mut [3, 0, 4, 1, 2]);
        assert_eq!(a, ['d', 'a', 'e', 'b', 'c']);
        assert_eq!(b, [3, 0, 4, 1, 2]);
    }

    #[test]
    fn failures_keep_their_reason_and_are_counted() {
        let mut h = Histograms::default();
        let mut a = WorkerLog::default();
        a.push(
            Record {
                index: 0,
                failure: Some(Box::new(Failure {
                    kind: "http_500".into(),
                    error: "Internal Server Error".into(),
                    detail: String::new(),
                })),
                ..Record::default()
            },
            &mut h,
        );
        let m = merge(vec![outputs(vec![a])], vec![h], 1);
        assert!(!m.outputs[0].success);
        assert_eq!(m.outputs[0].error, "Internal Server Error");
        assert_eq!(m.failures_by_kind["http_500"], 1);
    }
}
