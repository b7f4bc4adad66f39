//! The agentic replay's run (SPEC §3) on the engine's cores: `--max-concurrency N` lanes, each
//! holding one live tree; the phases before profiling (primers, the cache-pressure warm-up);
//! one [`ReplayRecord`] per request sent.
//!
//! - **Before the clock** every turn of every stream is one prepared request (twice: with its
//!   output limit and with one token, for the warm-up), its `messages` the turn's segment
//!   layout (`prompt::layouts`) asked of the chat body builder, a message shared with the
//!   previous turn when its segment is unchanged. The first user message holds a placeholder
//!   for the cache-bust marker in a part of its own: sending swaps in the tree's marker,
//!   nothing is formatted or copied on the hot path.
//! - **`dag_jsonl` trees** (SPEC §1.3) carry literal messages and thread the live answers in:
//!   every message is serialized once before the clock (and every distinct body of `model`,
//!   `tools`, `extra` and output limit made), and a turn's request is put together when it is
//!   sent from its stream's [`Transcript`] (the history so far: shared message parts, the
//!   answers as streamed), as multi-turn conversations are. A fork child starts with a copy
//!   of its parent's transcript. Only these lanes build at send; Weka turns stay prepared.
//! - **Lanes** ([`crate::engine::lanes`]): each engine worker runs one lane, whose tree's
//!   [`TreeRun`] (the schedule as data) says what goes next; a tree lives on one core, so its
//!   spawns and joins are core-local. A finished tree's lane draws the next root from the
//!   shared sampler (file order, cycling: draw `i` is trace `i mod T`, pass `i div T`).
//! - **Phases.** Each lane's first tree starts at t* (sampled by time within
//!   `--agentic-start-ratio`). Its primers (the turn before each live stream's next, full
//!   history, one token) go out as one run, spread so every lane reaches t* together (leads
//!   clamped to the system idle cap); a failed root primer aborts. `--agentic-warmup-per-lane K`
//!   then runs the trees on with zero delays, K requests per lane, and drains. Profiling
//!   starts each live stream at `ts(next) - t*` less the smallest such offset of all lanes.
//! - **Idle caps**: the system cap (10 s, nothing in flight in the whole replay) and
//!   `--agentic-trace-idle-cap` per tree, in profiling. The system cap is checked by each lane
//!   on its own timers (at least every 10 s while it waits): a lane that waits while another
//!   lane's response makes the system idle sees it within the cap, not at once.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bytes::Bytes;
use rayon::prelude::*;

use std::collections::HashMap;

use serde_json::Value;

use crate::backends::conversation::{assistant_message, user_message, ChatBody, Transcript};
use crate::backends::{Api, BodyError, BodyOptions, ResponseMode};
use crate::config::shard::Shard;
use crate::datasets::agentic::dag::{DagFile, DagStream, DagTree, Turn as DagTurn};
use crate::datasets::agentic::prompt::{piece_tokens, prompt_tokens};
use crate::datasets::agentic::schedule::{
    Ended, IdleCaps, Ns, Primer, Step, TreeRun, TreeTiming, UntimedLink,
};
use crate::datasets::agentic::StartSampling;
use crate::datasets::agentic::{
    layouts, marker, Phase, Piece, ReplayOutcome, ReplayRecord, Role, Seeds, StreamKind, Tree,
    TurnRef,
};
use crate::datasets::timed_trace::TokenSpace;
use crate::engine::session::{
    Answer, FailureText, FollowUps, Lane, LaneSource, LaneStep, NextRequest, Reply, SessionSource,
};
use crate::engine::{Engine, RunReport, Workload};
use crate::http::request::{HeadTemplate, Ids, PreparedRequest};
use crate::metrics::agentic::{FailureThreshold, StreamShape, ThresholdCrossed, TreeShape};
use crate::mix::{fnv64, mix64};

use super::agentic::BLOCK_SIZE;

/// The error text of a request the engine cut when the run was stopped at once (what the
/// failure threshold's stop does to the requests in flight).
const INTERRUPTED: &str = "Interrupted";

/// The system idle cap (SPEC §3.5; AgentX locks it at 10 s).
pub const SYSTEM_IDLE_CAP: Duration = Duration::from_secs(10);

/// What the cache-bust marker's placeholder reads in a prepared request (the marker has the
/// same length: `[rid:` 12 hex `]`).
const PLACEHOLDER: &[u8; 18] = b"[rid:000000000000]";

/// The header AIPerf sends with each request: one id per stream (SPEC §2 "Request").
const CORRELATION: &str = "X-Correlation-ID";

/// Error substrings that make a response a context overflow (SPEC §3.5, case-insensitive).
const OVERFLOW: [&str; 4] = [
    "context length",
    "maximum context",
    "context_length_exceeded",
    "prompt is too long",
];

/// The replay's knobs.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// `--max-concurrency`: live trees.
    pub lanes: usize,
    pub start_ratio: (f64, f64),
    pub warmup_per_lane: usize,
    pub trace_idle_cap: Option<Duration>,
    pub system_idle_cap: Option<Duration>,
    pub seed: u64,
    pub mode: ResponseMode,
    /// `--agentic-failed-request-threshold`: the failure share of profiling past which the
    /// run stops (`None`: never).
    pub failed_request_threshold: Option<f64>,
    /// `--shard K/N`: this process runs the lanes `l ≡ K (mod N)` of the `lanes`.
    pub shard: Option<Shard>,
}

/// One turn's request, prepared before the clock.
struct PreparedTurn {
    full: PreparedRequest,
    /// The same with an output limit of one token (primers, the warm-up).
    one: PreparedRequest,
    /// The parts of `full` / `one` that hold the marker's placeholder and the
    /// correlation id's ([`Slots`]).
    marker_at: (Slots, Slots),
    prompt_tokens: u32,
}

/// A trace ready to replay.
struct PreparedTree {
    id: String,
    timing: TreeTiming,
    kinds: Vec<StreamKind>,
    /// How a lane picks where in it to start.
    start: StartSampling,
    turns: TreeTurns,
}

/// A tree's requests: every turn prepared before the clock (Weka traces), or each built when
/// it is sent from its stream's history (`dag_jsonl`: live answers are threaded in).
enum TreeTurns {
    Prepared(Vec<Vec<PreparedTurn>>),
    Live(LiveTree),
}

impl PreparedTree {
    /// Its root's turn 0 with one output token and the marker's placeholder (a lane's first
    /// request: the ready check, the workers' count).
    fn first_request(&self) -> PreparedRequest {
        match &self.turns {
            TreeTurns::Prepared(turns) => turns[0][0].one.clone(),
            TreeTurns::Live(live) => {
                let marker = Bytes::from_static(PLACEHOLDER);
                let at = TurnRef { stream: 0, turn: 0 };
                live.request(&marker, &mut Vec::new(), at, true).0
            }
        }
    }
}

/// Every session of a `dag_jsonl` file serialized before the clock, shared by its trees.
struct DagRequests {
    head: HeadTemplate,
    /// The distinct bodies of the turns (`model`, `tools`, `extra`; the output limit).
    bodies: Vec<ChatBody>,
    sessions: Vec<SessionRequests>,
}

struct SessionRequests {
    turns: Vec<TurnRequests>,
    /// The session's first user message with the marker's placeholder at `.2`: (turn,
    /// message, bytes, offset). A stream that starts its own history sends it stamped.
    marked: Option<(u32, u32, Bytes, usize)>,
}

struct TurnRequests {
    /// Each message serialized as authored, with its client token count.
    messages: Vec<(Bytes, u64)>,
    /// Its bodies in [`DagRequests::bodies`]: with its output limit, and with one token.
    body: usize,
    body_one: usize,
    max_tokens: usize,
}

/// One `dag_jsonl` tree's streams.
struct LiveTree {
    dag: Arc<DagRequests>,
    /// Per stream: its session, and whether it continues its parent's history (a fork).
    streams: Vec<(u32, bool)>,
    /// Per stream: the first 24 characters of its `X-Correlation-ID`.
    correlation: Vec<String>,
    /// Per stream, per turn: the fork children its answer starts.
    forks: Vec<Vec<Vec<u32>>>,
}

/// A `dag_jsonl` stream's state in a lane's tree.
#[derive(Clone, Default)]
struct LiveStream {
    transcript: Transcript,
    /// Turns whose messages are in the transcript.
    through: u32,
    /// Its head, with its correlation id (made at its first send).
    head: Option<HeadTemplate>,
}

impl LiveTree {
    /// Turn `at`'s request from its stream's history, with the tree instance's `marker` (one
    /// token: `one`), and the client's prompt length. Adds the turn's messages (and any
    /// before it not yet added: a start mid-tree) to the history.
    fn request(
        &self,
        marker: &Bytes,
        live: &mut Vec<LiveStream>,
        at: TurnRef,
        one: bool,
    ) -> (PreparedRequest, u32) {
        if live.len() < self.streams.len() {
            live.resize(self.streams.len(), LiveStream::default());
        }
        let (session, forked) = self.streams[at.stream as usize];
        let session = &self.dag.sessions[session as usize];
        let st = &mut live[at.stream as usize];
        while st.through <= at.turn {
            let k = st.through;
            for (i, (m, tokens)) in session.turns[k as usize].messages.iter().enumerate() {
                let m = match &session.marked {
                    Some((mk, mi, marked, off)) if !forked && (*mk, *mi) == (k, i as u32) => {
                        let mut v = marked.to_vec();
                        v[*off..*off + PLACEHOLDER.len()].copy_from_slice(marker);
                        Bytes::from(v)
                    }
                    _ => m.clone(),
                };
                st.transcript.push(m, *tokens);
            }
            st.through += 1;
        }
        let head = st.head.get_or_insert_with(|| {
            let digits = std::str::from_utf8(&marker[5..17]).unwrap_or_default();
            let id = format!("{}{digits}", self.correlation[at.stream as usize]);
            self.dag.head.with_header(CORRELATION, &id)
        });
        let turn = &session.turns[at.turn as usize];
        let (body, n) = match one {
            true => (turn.body_one, 1),
            false => (turn.body, turn.max_tokens),
        };
        let request = st
            .transcript
            .request(head, Ids::default(), &self.dag.bodies[body], n);
        let tokens = st.transcript.tokens().min(u64::from(u32::MAX)) as u32;
        (request, tokens)
    }

    /// The answer to `at` ended: a completed one joins its stream's history (as streamed);
    /// `spawned` (the schedule went on): its fork children start with a copy of it.
    fn answered(&self, live: &mut [LiveStream], at: TurnRef, answer: &Answer<'_>, spawned: bool) {
        let s = at.stream as usize;
        let Some(st) = live.get_mut(s) else {
            return;
        };
        if answer.failure.is_none() && !answer.cancelled {
            let tokens = answer.completion_tokens.unwrap_or(0);
            st.transcript.push_answer(answer.text, tokens);
        }
        if !spawned {
            return;
        }
        let transcript = st.transcript.clone();
        for &c in &self.forks[s][at.turn as usize] {
            live[c as usize] = LiveStream {
                transcript: transcript.clone(),
                through: 0,
                head: None,
            };
        }
    }
}

/// Which phase the engine is running (the lanes read it when made).
fn phase_code(p: Phase) -> u8 {
    match p {
        Phase::Primer => 0,
        Phase::Warmup => 1,
        Phase::Profiling => 2,
    }
}

fn phase_of(code: u8) -> Phase {
    match code {
        0 => Phase::Primer,
        1 => Phase::Warmup,
        _ => Phase::Profiling,
    }
}

/// A lane's live tree.
#[derive(Clone)]
struct LaneTree {
    tree: u32,
    pass: u32,
    marker: Bytes,
    run: TreeRun,
    /// What its profiling offsets count from: its t*, or its turn 0 when drawn later.
    t_ref: Ns,
    /// A `dag_jsonl` tree's streams' histories (empty until its first request).
    live: Vec<LiveStream>,
}

struct Inner {
    trees: Vec<PreparedTree>,
    /// Each prepared tree's shape, for the report (same order).
    shapes: Vec<TreeShape>,
    opts: ReplayOptions,
    run_id: u64,
    phase: AtomicU8,
    /// The sampler: draw `i` is tree `i mod T`, pass `i div T`. The lanes' first trees take
    /// draws `0..first_draws` in lane order (every lane's, owned or not); after them this
    /// process's `k`-th draw is `first_draws + k·N + K` (`--shard K/N`; `k` counts in
    /// `draws`), so shards never draw one tree instance twice.
    draws: AtomicUsize,
    first_draws: AtomicUsize,
    /// The lanes this process runs (all but a shard's), ascending.
    owned: Vec<u32>,
    /// Lanes claimed by this engine run's workers.
    claims: AtomicUsize,
    /// The next record's index in this engine run.
    next_index: AtomicU32,
    /// Requests this engine run sent or had due when it stopped.
    planned: AtomicUsize,
    /// Requests in flight in the whole replay, and since when none (system idle cap).
    in_flight: AtomicI64,
    idle_since: AtomicI64,
    /// Each lane's tree between phases.
    lanes: Mutex<Vec<Option<LaneTree>>>,
    /// Every request sent, by phase; times from each phase's own run start until
    /// [`AgenticRun::records`] puts them on profiling's clock.
    records: Mutex<Vec<(u32, ReplayRecord)>>,
    /// The start of the primer and warm-up runs.
    epochs: Mutex<Vec<(Phase, Instant)>>,
    /// The lanes' first requests (the ready check asks one; the workers count them).
    lane_requests: Arc<[PreparedRequest]>,
    expected_tokens: usize,
    /// The failure threshold every lane counts its profiling answers into.
    threshold: Option<FailureThreshold>,
    /// Set once, by the lane whose answer crossed the threshold: every lane then halts.
    crossed: OnceLock<ThresholdCrossed>,
    /// Context overflows taken out of the measured run's outputs ([`AgenticRun::settle`]).
    overflows: AtomicUsize,
}

/// The replay of one corpus: prepared requests, the lanes and what they recorded.
#[derive(Clone)]
pub struct AgenticRun(Arc<Inner>);

impl AgenticRun {
    /// Prepares every turn's request: `decode` turns token ids into text, `space` is the
    /// tokenizer's ids the prompts draw from.
    pub fn prepare(
        trees: &[Tree],
        head: &HeadTemplate,
        body: &ChatBody,
        space: &TokenSpace,
        decode: &(dyn Fn(&[u32]) -> String + Sync),
        opts: ReplayOptions,
    ) -> Result<AgenticRun> {
        if opts.lanes == 0 {
            bail!("--dataset-name agentic_trace: --max-concurrency must be at least 1 (the number of live trees)");
        }
        let run_id: u64 = rand::random();
        let replayable = |t: &&Tree| t.streams.first().is_some_and(|s| !s.turns.is_empty());
        let prepared: Vec<PreparedTree> = trees
            .par_iter()
            .filter(replayable)
            .map(|t| prepare_tree(t, head, body, space, decode, opts.seed))
            .collect::<Result<_>>()?;
        // The report's view of each tree, in the order `ReplayRecord::tree` counts them.
        let shapes = trees.iter().filter(replayable).map(TreeShape::of).collect();
        if prepared.is_empty() {
            bail!("--dataset-name agentic_trace: no trace has a root request to replay");
        }
        let expected_tokens = trees
            .iter()
            .flat_map(|t| t.streams.iter().flat_map(|s| s.max_tokens()))
            .max()
            .unwrap_or(1);
        AgenticRun::new(prepared, shapes, expected_tokens, run_id, opts)
    }

    /// Prepares a `dag_jsonl` file's trees: every message serialized once and every turn's
    /// body (its `model`, `tools`, `extra` and output limit over `body`'s) made before the
    /// clock; each request is put together when it is sent, from its stream's history
    /// (`count`: a text's client token count).
    pub fn prepare_dag(
        dag: &DagFile,
        head: &HeadTemplate,
        api: Api,
        body: &BodyOptions,
        count: &(dyn Fn(&str) -> u64 + Sync),
        opts: ReplayOptions,
    ) -> Result<AgenticRun> {
        if opts.lanes == 0 {
            bail!("--dataset-name agentic_trace: --max-concurrency must be at least 1 (the number of live trees)");
        }
        let run_id: u64 = rand::random();
        let requests = Arc::new(dag_requests(dag, head, api, body, count)?);
        let mut prepared = Vec::with_capacity(dag.trees.len());
        let mut shapes = Vec::with_capacity(dag.trees.len());
        for t in &dag.trees {
            let (tree, shape) = live_tree(dag, t, &requests, opts.seed);
            prepared.push(tree);
            shapes.push(shape);
        }
        let expected_tokens = dag
            .sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(|t| t.max_tokens.unwrap_or(256)))
            .max()
            .unwrap_or(1);
        AgenticRun::new(prepared, shapes, expected_tokens, run_id, opts)
    }

    /// The run of `prepared` trees (`expected_tokens`: the largest output limit).
    fn new(
        prepared: Vec<PreparedTree>,
        shapes: Vec<TreeShape>,
        expected_tokens: u64,
        run_id: u64,
        opts: ReplayOptions,
    ) -> Result<AgenticRun> {
        let expected_tokens = expected_tokens.min(4096) as usize;
        let lane_requests: Arc<[PreparedRequest]> = (0..opts.lanes)
            .map(|i| prepared[i % prepared.len()].first_request())
            .collect();
        let shard = opts.shard.unwrap_or(Shard { index: 0, count: 1 });
        let owned: Vec<u32> = (0..opts.lanes)
            .filter(|&l| shard.owns(l))
            .map(|l| l as u32)
            .collect();
        // At least one (the flags refuse more shards than --max-concurrency).
        if owned.is_empty() {
            bail!(
                "--shard {shard}: no lane of the {} is this shard's",
                opts.lanes
            );
        }
        if shard.count > 1 && opts.warmup_per_lane > 0 {
            bail!(
                "--shard {shard} with --agentic-warmup-per-lane: the warm-up decides where each \
                 lane's profiling starts from the answers of every lane, which one shard does \
                 not see; warm up without --shard, or shard without the warm-up"
            );
        }
        let threshold = opts
            .failed_request_threshold
            .map(|r| FailureThreshold::new(r, u32::try_from(opts.lanes).unwrap_or(u32::MAX)));
        Ok(AgenticRun(Arc::new(Inner {
            threshold,
            crossed: OnceLock::new(),
            overflows: AtomicUsize::new(0),
            expected_tokens,
            trees: prepared,
            shapes,
            opts,
            run_id,
            phase: AtomicU8::new(phase_code(Phase::Profiling)),
            draws: AtomicUsize::new(0),
            first_draws: AtomicUsize::new(0),
            owned,
            claims: AtomicUsize::new(0),
            next_index: AtomicU32::new(0),
            planned: AtomicUsize::new(0),
            in_flight: AtomicI64::new(0),
            idle_since: AtomicI64::new(0),
            lanes: Mutex::new(vec![None; opts.lanes]),
            records: Mutex::new(Vec::new()),
            epochs: Mutex::new(Vec::new()),
            lane_requests,
        })))
    }

    /// Lanes (live trees) of the whole run, every shard's.
    pub fn lanes(&self) -> usize {
        self.0.opts.lanes
    }

    /// The lanes this process runs (a shard's share of [`AgenticRun::lanes`]).
    pub fn owned_lanes(&self) -> usize {
        self.0.owned.len()
    }

    /// One request per lane: the measured run's workers (one per lane) and the ready check.
    pub fn lane_requests(&self) -> Arc<[PreparedRequest]> {
        self.0.lane_requests.clone()
    }

    /// The largest output limit of any turn, at most 4,096 (sizes the gap arenas; a longer
    /// answer grows them).
    pub fn expected_tokens(&self) -> usize {
        self.0.expected_tokens
    }

    /// Everything before profiling: each lane's first tree at its start point, the primers'
    /// run and the cache-pressure warm-up; leaves the lanes ready for the measured run
    /// (which [`AgenticRun::shape`] shapes). Err: a root primer failed (AIPerf aborts).
    pub fn warm_up(&self, engine: &Engine) -> Result<()> {
        let inner = &*self.0;
        inner.draws.store(0, Ordering::Relaxed);
        lock(&inner.records).clear();
        lock(&inner.epochs).clear();
        // Every lane's first tree, a shard's or not (pure: they set the primers' spread and
        // the start of profiling as one process would); only owned lanes' primers are sent.
        let mut primers: Vec<(u32, Primer)> = Vec::new();
        let mut lanes = Vec::with_capacity(inner.opts.lanes);
        let mut next = 0;
        for lane in 0..inner.opts.lanes as u32 {
            let (lt, p) = inner.first_tree(lane, &mut next);
            primers.extend(p.into_iter().map(|p| (lane, p)));
            lanes.push(Some(lt));
        }
        inner.first_draws.store(next, Ordering::Relaxed);
        *lock(&inner.lanes) = lanes;
        if !primers.is_empty() {
            self.run_primers(engine, &primers)?;
        }
        if inner.opts.warmup_per_lane > 0 {
            for lt in lock(&inner.lanes).iter_mut().flatten() {
                lt.run.zero_delays = true;
                lt.run.restart_timers(0);
            }
            let report = self.run_lanes(engine, Phase::Warmup, None)?;
            lock(&inner.epochs).push((Phase::Warmup, report.epoch));
            for lt in lock(&inner.lanes).iter_mut().flatten() {
                let timing = &inner.trees[lt.tree as usize].timing;
                lt.run.rebase(timing, lt.t_ref);
            }
        }
        // Profiling: every offset less the smallest (a lane with nothing live starts a
        // fresh root at 0).
        let mut lanes = lock(&inner.lanes);
        let min = lanes
            .iter()
            .map(|l| l.as_ref().and_then(|lt| lt.run.earliest_due()).unwrap_or(0))
            .min()
            .unwrap_or(0);
        for lt in lanes.iter_mut().flatten() {
            lt.run.shift(-min);
        }
        drop(lanes);
        self.reset_for(Phase::Profiling);
        Ok(())
    }

    /// Resets the per-engine-run counters for a run of `phase`.
    fn reset_for(&self, phase: Phase) {
        let inner = &*self.0;
        inner.phase.store(phase_code(phase), Ordering::Release);
        inner.claims.store(0, Ordering::Relaxed);
        inner.next_index.store(0, Ordering::Relaxed);
        inner.planned.store(0, Ordering::Relaxed);
        inner.in_flight.store(0, Ordering::Relaxed);
        inner.idle_since.store(0, Ordering::Relaxed);
    }

    /// The primers as one run at their spread offsets; their records.
    fn run_primers(&self, engine: &Engine, primers: &[(u32, Primer)]) -> Result<()> {
        let inner = &*self.0;
        let cap = inner.opts.system_idle_cap.map(|c| c.as_nanos() as Ns);
        let lead = |p: &Primer| cap.map_or(p.lead, |c| p.lead.min(c)).max(0);
        let max_lead = primers.iter().map(|(_, p)| lead(p)).max().unwrap_or(0);
        let primers: Vec<&(u32, Primer)> = primers
            .iter()
            .filter(|(lane, _)| inner.owned.binary_search(lane).is_ok())
            .collect();
        if primers.is_empty() {
            return Ok(());
        }
        let lanes = lock(&inner.lanes).clone();
        let mut requests = Vec::with_capacity(primers.len());
        let mut lens = Vec::with_capacity(primers.len());
        let mut arrivals = Vec::with_capacity(primers.len());
        for &(lane, p) in &primers {
            let mut lt = lanes[*lane as usize]
                .clone()
                .expect("a primed lane has a tree");
            let (request, len) = inner.request(&mut lt, p.at, true);
            requests.push(request);
            lens.push(len);
            arrivals.push(Duration::from_nanos((max_lead - lead(p)) as u64));
        }
        let workload = Workload {
            requests: requests.into(),
            client_prompt_lens: lens.clone().into(),
            arrivals: Some(arrivals.into()),
            max_concurrency: None,
            mode: inner.opts.mode,
            sessions: None,
            expected_tokens: 1,
            probe: None,
            replica_of: None,
            cancel: None,
            time_bound: None,
        };
        let report = engine.run(workload, |_| {})?;
        let mut records = Vec::with_capacity(primers.len());
        let mut failed_root = None;
        for rec in &report.merged.records {
            let (lane, p) = primers[rec.index as usize];
            let lt = lanes[*lane as usize]
                .as_ref()
                .expect("a primed lane has a tree");
            let answer = Answer::of(rec, false);
            let len = lens[rec.index as usize];
            let r = inner.record(lt, *lane, p.at, Phase::Primer, &answer, len);
            if p.at.stream == 0 && r.outcome != ReplayOutcome::Completed && failed_root.is_none() {
                let why = rec
                    .failure
                    .as_ref()
                    .map_or("failed".into(), |f| f.error.clone());
                failed_root = Some(format!(
                    "--dataset-name agentic_trace: the warm-up primer of trace {:?} (turn {}) \
                     failed ({why}); the replay stops, as AIPerf does when a root primer fails",
                    inner.trees[lt.tree as usize].id, p.at.turn
                ));
            }
            records.push((rec.index, r));
        }
        lock(&inner.records).extend(records);
        lock(&inner.epochs).push((Phase::Primer, report.epoch));
        if report.merged.records.len() < primers.len() {
            bail!("--dataset-name agentic_trace: the warm-up primers were stopped before they all returned");
        }
        if let Some(line) = failed_root {
            bail!(line);
        }
        Ok(())
    }

    /// One engine run of the lanes in `phase` (the warm-up here; profiling is the measured
    /// run, shaped by [`AgenticRun::shape`]).
    fn run_lanes(
        &self,
        engine: &Engine,
        phase: Phase,
        time_bound: Option<crate::engine::TimeBound>,
    ) -> Result<RunReport> {
        self.reset_for(phase);
        let mut workload = Workload {
            requests: self.lane_requests(),
            client_prompt_lens: vec![0; self.lanes()].into(),
            arrivals: None,
            max_concurrency: None,
            mode: self.0.opts.mode,
            sessions: None,
            expected_tokens: 1,
            probe: None,
            replica_of: None,
            cancel: None,
            time_bound,
        };
        self.shape(&mut workload);
        // This process's lanes only (a shard's measured run gets them from `shard::select`).
        let owned = &self.0.owned;
        workload.requests = owned
            .iter()
            .map(|&l| workload.requests[l as usize].clone())
            .collect();
        workload.client_prompt_lens = vec![0; owned.len()].into();
        workload.max_concurrency = Some(owned.len());
        Ok(engine.run(workload, |_| {})?)
    }

    /// Makes `workload` the lanes' run: one worker per lane, the lanes as its sessions.
    pub fn shape(&self, workload: &mut Workload) {
        workload.requests = self.lane_requests();
        workload.client_prompt_lens = vec![0; self.lanes()].into();
        workload.arrivals = None;
        workload.max_concurrency = Some(self.lanes());
        workload.expected_tokens = self.expected_tokens();
        workload.sessions = Some(Arc::new(self.clone()));
    }

    /// Every request the replay sent (primers, warm-up, profiling), times from the start of
    /// profiling (`epoch`, the measured run's). Profiling's records come first, in the order
    /// of the measured run's records (record `i` of the run is the replay's `i`-th).
    /// The replayed trees' shapes, in the order `ReplayRecord::tree` counts them.
    pub fn shapes(&self) -> &[TreeShape] {
        &self.0.shapes
    }

    /// The measured run's report as the replay counts its requests (SPEC §3.5): a context
    /// overflow is answered but neither completed nor failed, so its output leaves Python's
    /// block (no latency, no failed count, no failure example) and is counted apart (the
    /// return value, also [`AgenticRun::context_overflows`]); a request cut by the failure
    /// threshold's stop is cancelled, as one cut at the time bound is. Call once, on the
    /// measured run's report, before a shard renumbers its records.
    pub fn settle(&self, report: &mut RunReport) -> usize {
        let apart: std::collections::HashMap<u32, ReplayOutcome> = lock(&self.0.records)
            .iter()
            .filter(|(_, r)| {
                r.phase == Phase::Profiling
                    && matches!(
                        r.outcome,
                        ReplayOutcome::ContextOverflow | ReplayOutcome::Cancelled
                    )
            })
            .map(|(index, r)| (*index, r.outcome))
            .collect();
        if apart.is_empty() {
            return 0;
        }
        let merged = &mut report.merged;
        let mut overflows = 0;
        let records = std::mem::take(&mut merged.records);
        let outputs = std::mem::take(&mut merged.outputs);
        let mut kept = (
            Vec::with_capacity(records.len()),
            Vec::with_capacity(outputs.len()),
        );
        for (rec, out) in records.into_iter().zip(outputs) {
            let Some(&outcome) = apart.get(&rec.index) else {
                kept.0.push(rec);
                kept.1.push(out);
                continue;
            };
            if let Some(f) = &rec.failure {
                if let Some(n) = merged.failures_by_kind.get_mut(&f.kind) {
                    *n -= 1;
                    if *n == 0 {
                        merged.failures_by_kind.remove(&f.kind);
                    }
                }
            }
            match outcome {
                ReplayOutcome::ContextOverflow => overflows += 1,
                _ => report.cancelled += 1,
            }
        }
        (merged.records, merged.outputs) = kept;
        self.0.overflows.fetch_add(overflows, Ordering::AcqRel);
        overflows
    }

    /// The context overflows [`AgenticRun::settle`] took out of the measured run's outputs.
    pub fn context_overflows(&self) -> usize {
        self.0.overflows.load(Ordering::Acquire)
    }

    /// Whether `--agentic-failed-request-threshold` stopped the run, and at what counts.
    pub fn threshold_crossed(&self) -> Option<ThresholdCrossed> {
        self.0.crossed.get().copied()
    }

    pub fn records(&self, epoch: Instant) -> Vec<ReplayRecord> {
        let inner = &*self.0;
        let epochs = lock(&inner.epochs).clone();
        let mut all = std::mem::take(&mut *lock(&inner.records));
        all.sort_by_key(|(index, r)| {
            (
                r.phase != Phase::Profiling,
                r.phase == Phase::Warmup,
                *index,
            )
        });
        let mut all: Vec<ReplayRecord> = all.into_iter().map(|(_, r)| r).collect();
        for r in &mut all {
            let Some(&(_, at)) = epochs.iter().find(|(p, _)| *p == r.phase) else {
                continue;
            };
            let by = signed_ns(at, epoch);
            r.sent_ns += by;
            r.end_ns += by;
            r.first_token_ns = r.first_token_ns.map(|t| t + by);
        }
        all
    }

    /// Runs the whole replay on `engine` (warm-up, then profiling with `time_bound`) and
    /// returns the measured run and every replay record: the lanes without the rest of a
    /// benchmark run (tests, the in-process harness).
    pub fn replay(
        &self,
        engine: &Engine,
        time_bound: Option<crate::engine::TimeBound>,
    ) -> Result<(RunReport, Vec<ReplayRecord>)> {
        self.warm_up(engine)?;
        let mut report = self.run_lanes(engine, Phase::Profiling, time_bound)?;
        self.settle(&mut report);
        let records = self.records(report.epoch);
        Ok((report, records))
    }
}

/// `a - b` in signed nanoseconds.
fn signed_ns(a: Instant, b: Instant) -> i64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_nanos() as i64,
        None => -(b.duration_since(a).as_nanos() as i64),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `req` with the tree's marker in its placeholder part and the marker's digits ending its
/// correlation id (shared slices of the marker: nothing is formatted or copied).
fn with_marker(req: &PreparedRequest, at: Slots, marker: &Bytes) -> PreparedRequest {
    PreparedRequest {
        parts: req
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| match i {
                _ if i == at.marker => marker.clone(),
                _ if i == at.correlation => marker.slice(5..17),
                _ => p.clone(),
            })
            .collect(),
    }
}

impl Inner {
    /// Turn `at` of `lt`'s tree as sent (`one`: with one output token), and the client's
    /// prompt length: a prepared request with the tree's marker, or a `dag_jsonl` turn built
    /// from its stream's history.
    fn request(&self, lt: &mut LaneTree, at: TurnRef, one: bool) -> (PreparedRequest, u32) {
        match &self.trees[lt.tree as usize].turns {
            TreeTurns::Prepared(turns) => {
                let turn = &turns[at.stream as usize][at.turn as usize];
                let (req, slots) = match one {
                    true => (&turn.one, turn.marker_at.1),
                    false => (&turn.full, turn.marker_at.0),
                };
                (with_marker(req, slots, &lt.marker), turn.prompt_tokens)
            }
            TreeTurns::Live(live) => live.request(&lt.marker, &mut lt.live, at, one),
        }
    }

    /// Draw `g` of the sampler: (tree, pass).
    fn tree_of(&self, g: usize) -> (u32, u32) {
        let n = self.trees.len();
        ((g % n) as u32, (g / n) as u32)
    }

    /// This process's next draw after the lanes' first trees (see `Inner::draws`).
    fn draw(&self) -> (u32, u32) {
        let k = self.draws.fetch_add(1, Ordering::Relaxed);
        let shard = self.opts.shard.unwrap_or(Shard { index: 0, count: 1 });
        self.tree_of(self.first_draws.load(Ordering::Relaxed) + k * shard.count + shard.index)
    }

    fn marker(&self, tree: u32, pass: u32, lane: u32) -> Bytes {
        let m = marker(self.run_id, pass, lane, &self.trees[tree as usize].id);
        Bytes::copy_from_slice(&m[..PLACEHOLDER.len()])
    }

    /// Lane `lane`'s first tree at its sampled start point, and its primers; a tree with
    /// nothing to send from its start point is passed over (SPEC §3.2 "unspawnable").
    /// `next` is the sampler's next draw.
    fn first_tree(&self, lane: u32, next: &mut usize) -> (LaneTree, Vec<Primer>) {
        let mut draw = || {
            *next += 1;
            self.tree_of(*next - 1)
        };
        for _ in 0..self.trees.len() {
            let (tree, pass) = draw();
            let t = &self.trees[tree as usize];
            let (ratio, seed) = (self.opts.start_ratio, self.opts.seed);
            let (run, primers, t_star) = match t.start {
                StartSampling::ByTurn => match t.timing.start_turn(ratio, seed, &t.id, lane) {
                    Some(k) => {
                        let (run, primers) = TreeRun::at_turn(&t.timing, k);
                        (run, primers, 0)
                    }
                    None => (TreeRun::fresh(&t.timing, 0), Vec::new(), 0),
                },
                _ => {
                    let t_star = t.timing.start_point(ratio, seed, &t.id, lane);
                    let (run, primers) = TreeRun::at_start_point(&t.timing, t_star);
                    (run, primers, t_star)
                }
            };
            if run.earliest_due().is_some() {
                let marker = self.marker(tree, pass, lane);
                return (
                    LaneTree {
                        tree,
                        pass,
                        marker,
                        run,
                        t_ref: t_star,
                        live: Vec::new(),
                    },
                    primers,
                );
            }
        }
        (self.fresh(lane, 0, draw()), Vec::new())
    }

    /// Tree `drawn` (tree, pass) from its turn 0, due at `at`.
    fn fresh(&self, lane: u32, at: Ns, drawn: (u32, u32)) -> LaneTree {
        let (tree, pass) = drawn;
        let timing = &self.trees[tree as usize].timing;
        LaneTree {
            tree,
            pass,
            marker: self.marker(tree, pass, lane),
            run: TreeRun::fresh(timing, at),
            t_ref: timing.start_of_root(),
            live: Vec::new(),
        }
    }

    /// `prompt_len`: the client's count, when the server's usage has none.
    fn record(
        &self,
        lt: &LaneTree,
        lane: u32,
        at: TurnRef,
        phase: Phase,
        a: &Answer<'_>,
        prompt_len: u32,
    ) -> ReplayRecord {
        let t = &self.trees[lt.tree as usize];
        ReplayRecord {
            tree: lt.tree,
            pass: lt.pass,
            lane,
            stream: at.stream,
            kind: t.kinds[at.stream as usize],
            turn: at.turn,
            phase,
            sent_ns: a.sent_ns as i64,
            first_token_ns: a.first_token_ns.map(|t| t as i64),
            end_ns: a.end_ns as i64,
            itl_intervals: a.itl_intervals,
            prompt_tokens: a.prompt_tokens.unwrap_or(u64::from(prompt_len)),
            output_tokens: a.completion_tokens.unwrap_or(0),
            cached_tokens: a.cached_tokens,
            outcome: outcome(a),
        }
    }
}

/// How an answer counts (SPEC §3.5: an error naming the context's length is an overflow).
fn outcome(a: &Answer<'_>) -> ReplayOutcome {
    match (a.cancelled, a.failure) {
        (true, _) => ReplayOutcome::Cancelled,
        (false, None) => ReplayOutcome::Completed,
        (false, Some(f)) if is_overflow(f) => ReplayOutcome::ContextOverflow,
        (false, Some(_)) => ReplayOutcome::Failed,
    }
}

fn is_overflow(f: FailureText<'_>) -> bool {
    let text = format!("{} {}", f.error, f.detail).to_ascii_lowercase();
    OVERFLOW.iter().any(|s| text.contains(s))
}

/// Every turn of `tree` prepared.
fn prepare_tree(
    tree: &Tree,
    head: &HeadTemplate,
    body: &ChatBody,
    space: &TokenSpace,
    decode: &(dyn Fn(&[u32]) -> String + Sync),
    seed: u64,
) -> Result<PreparedTree> {
    let mut blocks: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    let mut tokens = Vec::new();
    let mut turns = Vec::with_capacity(tree.streams.len());
    for stream in &tree.streams {
        let seeds = Seeds::new(seed, &tree.id, &stream.id);
        // The stream's own X-Correlation-ID, its last 12 digits the tree instance's marker's.
        let head = head.with_header(
            CORRELATION,
            &format!(
                "{}{}",
                correlation_prefix(seed, &stream.id),
                std::str::from_utf8(&PLACEHOLDER[5..17]).unwrap_or_default()
            ),
        );
        let all = layouts(stream, BLOCK_SIZE)?;
        let mut prev: Vec<(crate::datasets::agentic::Segment, bool, Bytes)> = Vec::new();
        let mut out = Vec::with_capacity(all.len());
        for (k, segs) in all.iter().enumerate() {
            let mut msgs = Vec::with_capacity(segs.len());
            let mut next_prev = Vec::with_capacity(segs.len());
            let mut marked = false;
            for (i, seg) in segs.iter().enumerate() {
                let mark = seg.role == Role::User && !marked;
                marked |= mark;
                let bytes = match prev.get(i) {
                    Some((s, m, b)) if s == seg && *m == mark => b.clone(),
                    _ => {
                        let mut text = String::new();
                        if mark {
                            text.push_str(std::str::from_utf8(PLACEHOLDER).unwrap_or_default());
                            text.push_str("\n\n");
                        }
                        for &p in &seg.pieces {
                            match p {
                                Piece::Block(h) => {
                                    let s = blocks.entry(h).or_insert_with(|| {
                                        tokens.clear();
                                        piece_tokens(space, &seeds, p, BLOCK_SIZE, &mut tokens);
                                        decode(&tokens)
                                    });
                                    text.push_str(s);
                                }
                                Piece::Tail { .. } => {
                                    tokens.clear();
                                    piece_tokens(space, &seeds, p, BLOCK_SIZE, &mut tokens);
                                    text.push_str(&decode(&tokens));
                                }
                            }
                        }
                        message(seg.role, &text)
                    }
                };
                next_prev.push((seg.clone(), mark, bytes.clone()));
                msgs.push(bytes);
            }
            prev = next_prev;
            let max_tokens = stream.turns[k].output.max(1) as usize;
            let (full, at_full) = split_marker(head.build_parts(
                None,
                Some("application/json"),
                body.parts(&msgs, max_tokens),
            ));
            let (one, at_one) = split_marker(head.build_parts(
                None,
                Some("application/json"),
                body.parts(&msgs, 1),
            ));
            out.push(PreparedTurn {
                full,
                one,
                marker_at: (at_full, at_one),
                prompt_tokens: prompt_tokens(segs, BLOCK_SIZE).min(u64::from(u32::MAX)) as u32,
            });
        }
        turns.push(out);
    }
    Ok(PreparedTree {
        id: tree.id.clone(),
        timing: TreeTiming::of(tree, false),
        kinds: tree.streams.iter().map(|s| s.kind).collect(),
        start: tree.start,
        turns: TreeTurns::Prepared(turns),
    })
}

/// One wire message of `role`.
fn message(role: Role, text: &str) -> Bytes {
    match role {
        Role::User => user_message(text),
        Role::Assistant => assistant_message(text),
        Role::System => Bytes::from(
            serde_json::to_vec(&serde_json::json!({"role": "system", "content": text}))
                .expect("a message of strings serializes"),
        ),
    }
}

/// Where a prepared request's per-tree parts are: the marker's placeholder and the
/// correlation id's last 12 digits (`usize::MAX`: none, nothing to swap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slots {
    marker: usize,
    correlation: usize,
}

/// The first 24 characters of a stream's `X-Correlation-ID` (a UUID, version 8): a hash of
/// `--seed` and the stream id, so root and every child differ; the last 12 are the tree
/// instance's marker digits (the run's own, drawn at random), so each run and each pass of a
/// tree (a recycle) has new ids and a tree continuing from warm-up into profiling keeps them
/// (SPEC §2 "Request"). Prepared requests hold nothing of the run: the shards of one run
/// prepare the same bytes (their fingerprint agrees).
fn correlation_prefix(seed: u64, stream_id: &str) -> String {
    let a = mix64(seed ^ fnv64(stream_id.as_bytes()));
    let b = mix64(a ^ 0x636f_7272_656c);
    format!(
        "{:08x}-{:04x}-8{:03x}-{:x}{:03x}-",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        8 | (b >> 62),
        (b >> 48) & 0xfff
    )
}

/// `req` with the marker's placeholder, and its correlation id's last 12 digits, each in a
/// part of its own ([`Slots`]).
fn split_marker(req: PreparedRequest) -> (PreparedRequest, Slots) {
    let mut parts: Vec<Bytes> = Vec::with_capacity(req.parts.len() + 4);
    let mut at = usize::MAX;
    let mut correlation = usize::MAX;
    let header = format!("{CORRELATION}: ");
    for p in req.parts.iter() {
        if correlation == usize::MAX {
            if let Some(i) = memchr::memmem::find(p, header.as_bytes()) {
                let i = i + header.len() + 24;
                parts.push(p.slice(..i));
                correlation = parts.len();
                parts.push(p.slice(i..i + 12));
                parts.push(p.slice(i + 12..));
                continue;
            }
        }
        match memchr::memmem::find(p, PLACEHOLDER).filter(|_| at == usize::MAX) {
            Some(i) => {
                parts.push(p.slice(..i));
                at = parts.len();
                parts.push(p.slice(i..i + PLACEHOLDER.len()));
                parts.push(p.slice(i + PLACEHOLDER.len()..));
            }
            None => parts.push(p.clone()),
        }
    }
    (
        PreparedRequest {
            parts: parts.into_boxed_slice(),
        },
        Slots {
            marker: at,
            correlation,
        },
    )
}

/// Every session of `dag` serialized, with the distinct bodies of its turns.
fn dag_requests(
    dag: &DagFile,
    head: &HeadTemplate,
    api: Api,
    base: &BodyOptions,
    count: &(dyn Fn(&str) -> u64 + Sync),
) -> Result<DagRequests> {
    let mut bodies: Vec<ChatBody> = Vec::new();
    let mut known: HashMap<String, usize> = HashMap::new();
    let mut body_of = |turn: &DagTurn, limit: bool| -> Result<usize, BodyError> {
        let key = serde_json::json!([turn.model, turn.tools, turn.extra, limit]).to_string();
        if let Some(&i) = known.get(&key) {
            return Ok(i);
        }
        let mut o = base.clone();
        if let Some(m) = &turn.model {
            o.model = m.clone();
        }
        if let Some(tools) = &turn.tools {
            o.extra_body
                .insert("tools".into(), Value::Array(tools.clone()));
        }
        o.extra_body
            .extend(turn.extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        bodies.push(match limit {
            true => ChatBody::new(api, &o, false)?,
            false => ChatBody::with_server_limit(api, &o)?,
        });
        known.insert(key, bodies.len() - 1);
        Ok(bodies.len() - 1)
    };
    let mut sessions = Vec::with_capacity(dag.sessions.len());
    for session in &dag.sessions {
        let mut turns = Vec::with_capacity(session.turns.len());
        let mut marked = None;
        for (k, turn) in session.turns.iter().enumerate() {
            let at = |e: BodyError| {
                anyhow::anyhow!(
                    "--dataset-path {}:{}: session {:?}: turn {k}: {e}",
                    dag.path.display(),
                    session.line,
                    session.id
                )
            };
            let mut messages = Vec::with_capacity(turn.messages.len());
            for (i, m) in turn.messages.iter().enumerate() {
                let value = Value::Object(m.clone());
                let bytes = serde_json::to_vec(&value).map_err(|e| at(BodyError::Serialize(e)))?;
                messages.push((Bytes::from(bytes), count(&message_text(m))));
                if marked.is_none() && m["role"] == "user" {
                    marked = Some((k as u32, i as u32, with_placeholder(m).map_err(at)?));
                }
            }
            turns.push(TurnRequests {
                messages,
                body: body_of(turn, turn.max_tokens.is_some()).map_err(at)?,
                body_one: body_of(turn, true).map_err(at)?,
                max_tokens: turn.max_tokens.unwrap_or(1) as usize,
            });
        }
        sessions.push(SessionRequests {
            turns,
            marked: marked.map(|(k, i, (bytes, off))| (k, i, bytes, off)),
        });
    }
    Ok(DagRequests {
        head: head.clone(),
        bodies,
        sessions,
    })
}

/// The text of a message's content (a string, or its parts' `text`), for its token count.
fn message_text(m: &serde_json::Map<String, Value>) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A user message serialized with the marker's placeholder opening its content (the first
/// text part of a list), and where the placeholder is.
fn with_placeholder(m: &serde_json::Map<String, Value>) -> Result<(Bytes, usize), BodyError> {
    let mark = format!(
        "{}\n\n",
        std::str::from_utf8(PLACEHOLDER).unwrap_or_default()
    );
    let mut m = m.clone();
    match m.get_mut("content") {
        Some(Value::String(s)) => s.insert_str(0, &mark),
        Some(Value::Array(parts)) => {
            let text = parts
                .iter_mut()
                .find_map(|p| p.get_mut("text").filter(|t| t.is_string()));
            match text {
                Some(Value::String(t)) => t.insert_str(0, &mark),
                _ => parts.insert(0, serde_json::json!({"type": "text", "text": mark})),
            }
        }
        _ => {
            m.insert("content".into(), Value::String(mark));
        }
    }
    let bytes = serde_json::to_vec(&Value::Object(m)).map_err(BodyError::Serialize)?;
    let off = memchr::memmem::find(&bytes, PLACEHOLDER).unwrap_or(0);
    Ok((Bytes::from(bytes), off))
}

/// A `dag_jsonl` tree ready to replay, and its shape for the report.
fn live_tree(
    dag: &DagFile,
    t: &DagTree,
    requests: &Arc<DagRequests>,
    seed: u64,
) -> (PreparedTree, TreeShape) {
    let turns_of = |s: &DagStream| &dag.sessions[s.session as usize].turns;
    let ms = |d: f64| (d * 1e6).round() as Ns;
    let delays: Vec<Vec<Ns>> = t
        .streams
        .iter()
        .map(|s| turns_of(s).iter().map(|turn| ms(turn.delay_ms)).collect())
        .collect();
    let links: Vec<UntimedLink> = t
        .links
        .iter()
        .map(|l| UntimedLink {
            parent: l.parent,
            turn: l.turn,
            on_send: l.on_send,
            join: l.join,
            children: l.children.clone(),
        })
        .collect();
    let root_turns: Vec<u32> = t.streams.iter().map(|s| s.root_turn).collect();
    let mut forks: Vec<Vec<Vec<u32>>> = t
        .streams
        .iter()
        .map(|s| vec![Vec::new(); turns_of(s).len()])
        .collect();
    for l in t.links.iter().filter(|l| l.fork) {
        forks[l.parent as usize][l.turn as usize].extend(&l.children);
    }
    let mut join_turns: Vec<u32> = t
        .links
        .iter()
        .filter(|l| l.parent == 0)
        .filter_map(|l| l.join)
        .collect();
    join_turns.sort_unstable();
    join_turns.dedup();
    // A child's `spawn_turn` is the root turn it descends from (a grandchild's too): what
    // the report asks of it is whether that root turn was answered.
    let shape = TreeShape {
        streams: t
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| StreamShape {
                kind: s.kind,
                turns: turns_of(s).len() as u32,
                spawn_turn: (i > 0).then_some(s.root_turn),
                ideal: vec![(0, 0); turns_of(s).len()],
            })
            .collect(),
        join_turns,
    };
    let tree = PreparedTree {
        id: t.id.clone(),
        timing: TreeTiming::untimed(delays, &links, &root_turns),
        kinds: t.streams.iter().map(|s| s.kind).collect(),
        start: StartSampling::ByTurn,
        turns: TreeTurns::Live(LiveTree {
            dag: requests.clone(),
            streams: t
                .streams
                .iter()
                .enumerate()
                .map(|(i, s)| (s.session, t.forked(i as u32)))
                .collect(),
            correlation: t
                .streams
                .iter()
                .enumerate()
                .map(|(i, s)| correlation_prefix(seed, &format!("{}#{i}", s.id)))
                .collect(),
            forks,
        }),
    };
    (tree, shape)
}

impl SessionSource for AgenticRun {
    fn total(&self) -> usize {
        self.0.planned.load(Ordering::Acquire)
    }

    fn turns(&self, _session: usize) -> usize {
        1
    }

    fn record(&self, session: usize, _turn: usize) -> usize {
        session
    }

    fn follow(&self, _session: usize) -> Box<dyn FollowUps + '_> {
        Box::new(NoFollowUps)
    }

    fn lanes(&self) -> Option<&dyn LaneSource> {
        Some(self)
    }
}

/// Lanes ask their trees, never follow-ups.
struct NoFollowUps;

impl FollowUps for NoFollowUps {
    fn next(&mut self, _reply: &Reply<'_>) -> Option<NextRequest> {
        None
    }
}

impl LaneSource for AgenticRun {
    fn lane(&self, claimed: usize) -> Box<dyn Lane> {
        let inner = self.0.clone();
        let lane = inner.owned[claimed] as usize;
        let live = lock(&inner.lanes).get_mut(lane).and_then(Option::take);
        let phase = phase_of(inner.phase.load(Ordering::Acquire));
        Box::new(AgenticLane {
            inner,
            lane: lane as u32,
            live,
            phase,
            sent: 0,
            stopped: false,
            flight: Vec::new(),
            records: Vec::new(),
        })
    }

    /// A lane this process runs, by its place among them; [`LaneSource::lane`] takes it.
    fn claim(&self) -> usize {
        self.0.claims.fetch_add(1, Ordering::Relaxed) % self.0.owned.len()
    }
}

/// One lane on its core.
struct AgenticLane {
    inner: Arc<Inner>,
    lane: u32,
    live: Option<LaneTree>,
    phase: Phase,
    /// Requests sent (the warm-up's quota).
    sent: usize,
    stopped: bool,
    /// The record index and client prompt length of each request in flight, by ticket.
    flight: Vec<(u64, u32, u32)>,
    records: Vec<(u32, ReplayRecord)>,
}

fn ticket(at: TurnRef) -> u64 {
    (u64::from(at.stream) << 32) | u64::from(at.turn)
}

fn turn_of(ticket: u64) -> TurnRef {
    TurnRef {
        stream: (ticket >> 32) as u32,
        turn: ticket as u32,
    }
}

impl AgenticLane {
    fn caps(&self) -> IdleCaps {
        if self.phase != Phase::Profiling {
            return IdleCaps::default();
        }
        let inner = &self.inner;
        let system = inner.opts.system_idle_cap.and_then(|c| {
            (inner.in_flight.load(Ordering::Acquire) == 0)
                .then(|| (c.as_nanos() as Ns, inner.idle_since.load(Ordering::Acquire)))
        });
        IdleCaps {
            tree: inner.opts.trace_idle_cap.map(|c| c.as_nanos() as Ns),
            system,
        }
    }

    fn quota_used(&self) -> bool {
        self.phase == Phase::Warmup && self.sent >= self.inner.opts.warmup_per_lane
    }

    fn in_flight(&self) -> u32 {
        self.live.as_ref().map_or(0, |lt| lt.run.in_flight())
    }
}

impl Lane for AgenticLane {
    fn step(&mut self, now_ns: u64) -> LaneStep {
        let now = now_ns as Ns;
        let caps = self.caps();
        loop {
            if self.live.is_none() {
                if self.stopped || self.quota_used() {
                    return LaneStep::Done;
                }
                let mut lt = self.inner.fresh(self.lane, now, self.inner.draw());
                lt.run.zero_delays = self.phase == Phase::Warmup;
                self.live = Some(lt);
            }
            let quota_used = self.quota_used();
            let Some(lt) = self.live.as_mut() else {
                continue;
            };
            let timing = &self.inner.trees[lt.tree as usize].timing;
            match lt.run.step(timing, now, caps) {
                Step::Send(_) if quota_used => {
                    return match lt.run.in_flight() {
                        0 => LaneStep::Done,
                        _ => LaneStep::AwaitResponse,
                    }
                }
                Step::Send(at) => {
                    let one = self.phase != Phase::Profiling;
                    let (request, client_prompt_len) = self.inner.request(lt, at, one);
                    self.inner.planned.fetch_add(1, Ordering::AcqRel);
                    let index = self.inner.next_index.fetch_add(1, Ordering::Relaxed);
                    self.flight.push((ticket(at), index, client_prompt_len));
                    return LaneStep::Send {
                        ticket: ticket(at),
                        index,
                        request,
                        client_prompt_len,
                    };
                }
                Step::WaitUntil(t) => {
                    // The system cap is looked at again at least this often.
                    let t = match self.inner.opts.system_idle_cap {
                        Some(c) if self.phase == Phase::Profiling => {
                            t.min(now + c.as_nanos() as Ns)
                        }
                        _ => t,
                    };
                    return LaneStep::WaitUntil(t.max(0) as u64);
                }
                Step::AwaitResponse => return LaneStep::AwaitResponse,
                Step::Done => {
                    self.live = None;
                    if quota_used {
                        return LaneStep::Done;
                    }
                }
            }
        }
    }

    fn sent(&mut self, ticket: u64, now_ns: u64) {
        let Some(lt) = self.live.as_mut() else {
            return;
        };
        let timing = &self.inner.trees[lt.tree as usize].timing;
        lt.run.sent(timing, turn_of(ticket), now_ns as Ns);
        self.sent += 1;
        self.inner.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    fn ended(&mut self, ticket: u64, answer: &Answer<'_>) {
        let Some(lt) = self.live.as_mut() else {
            return;
        };
        let at = turn_of(ticket);
        let (index, len) = match self.flight.iter().position(|f| f.0 == ticket) {
            Some(i) => {
                let (_, index, len) = self.flight.swap_remove(i);
                (index, len)
            }
            None => (u32::MAX, 0),
        };
        let mut record = self
            .inner
            .record(lt, self.lane, at, self.phase, answer, len);
        if let Some(gate) = &self.inner.threshold {
            if let Err(crossed) = gate.observe(record.phase, record.outcome) {
                // The first crossing stops the run; later ones only say it again.
                let _ = self.inner.crossed.set(crossed);
            }
        }
        if record.outcome == ReplayOutcome::Failed
            && self.inner.crossed.get().is_some()
            && answer.failure.is_some_and(|f| f.error == INTERRUPTED)
        {
            // Cut by the threshold's stop (the engine's interrupt): cancelled, as AIPerf
            // cancels what is in flight when it stops the run.
            record.outcome = ReplayOutcome::Cancelled;
        }
        let how = match record.outcome {
            ReplayOutcome::ContextOverflow => Ended::Overflow,
            ReplayOutcome::Cancelled => Ended::Cancelled,
            _ => Ended::Answered,
        };
        let tree = &self.inner.trees[lt.tree as usize];
        lt.run.ended(&tree.timing, at, answer.end_ns as Ns, how);
        if let TreeTurns::Live(live) = &tree.turns {
            live.answered(&mut lt.live, at, answer, how == Ended::Answered);
        }
        if self.inner.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner
                .idle_since
                .store(answer.end_ns as Ns, Ordering::Release);
        }
        self.records.push((index, record));
    }

    fn stop(&mut self) {
        self.stopped = true;
    }

    fn halted(&self) -> bool {
        self.inner.crossed.get().is_some()
    }

    fn finish(&mut self) {
        debug_assert_eq!(self.in_flight(), 0);
        if self.stopped {
            // What the stop kept from going out (also turns that became due in the grace
            // period): planned, not sent.
            let pending = self.live.as_ref().map_or(0, |lt| lt.run.pending());
            self.inner.planned.fetch_add(pending, Ordering::AcqRel);
        }
        let live = if self.stopped { None } else { self.live.take() };
        if let Some(slot) = lock(&self.inner.lanes).get_mut(self.lane as usize) {
            *slot = live;
        }
        lock(&self.inner.records).append(&mut self.records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{Api, BodyOptions};
    use crate::http::request::Method;
    use crate::modes::agentic::AgenticReplay;

    fn words(ids: &[u32]) -> String {
        ids.iter().map(|i| format!("t{i} ")).collect()
    }

    fn run() -> (AgenticRun, Vec<Tree>) {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces");
        let trees = AgenticReplay::from_path(&dir).unwrap().trees;
        let head = HeadTemplate::new(Method::Post, "/v1/chat/completions", "h", &[]);
        let opts = BodyOptions {
            model: "m".into(),
            ..BodyOptions::default()
        };
        let body = ChatBody::new(Api::Chat, &opts, false).unwrap();
        let space = TokenSpace::new(50_000, &[0]).unwrap();
        let opts = ReplayOptions {
            lanes: 2,
            start_ratio: (0.0, 0.0),
            warmup_per_lane: 0,
            trace_idle_cap: None,
            system_idle_cap: Some(SYSTEM_IDLE_CAP),
            seed: 1,
            mode: Api::Chat.response_mode(),
            failed_request_threshold: None,
            shard: None,
        };
        let run = AgenticRun::prepare(&trees, &head, &body, &space, &words, opts).unwrap();
        (run, trees)
    }

    fn prepared(t: &PreparedTree) -> &[Vec<PreparedTurn>] {
        match &t.turns {
            TreeTurns::Prepared(turns) => turns,
            TreeTurns::Live(_) => panic!("a Weka tree is prepared"),
        }
    }

    fn body(req: &PreparedRequest) -> serde_json::Value {
        let bytes = req.to_vec();
        let at = memchr::memmem::find(&bytes, b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&bytes[at..]).unwrap()
    }

    fn text(m: &serde_json::Value) -> String {
        match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            parts => parts[0]["text"].as_str().unwrap().to_string(),
        }
    }

    /// The `X-Correlation-ID` a prepared request carries.
    fn correlation(req: &PreparedRequest) -> String {
        let bytes = req.to_vec();
        let text = String::from_utf8_lossy(&bytes);
        let at = text.find("X-Correlation-ID: ").expect("the header") + 18;
        text[at..at + 36].to_string()
    }

    /// Every prepared turn carries exactly `in` prompt tokens (one word per token here), the
    /// tree's marker where the placeholder was, its output limit (one for primers), and its
    /// stream's `X-Correlation-ID`: a UUID, one per stream (every turn, the warm-up's too),
    /// another for every other stream, ending in the tree instance's marker digits.
    #[test]
    fn prepared_turns_have_exactly_in_tokens_and_the_trees_marker() {
        let (run, trees) = run();
        let marker = Bytes::from_static(b"[rid:0123456789ab]");
        let mut ids = std::collections::HashSet::new();
        for (t, tree) in trees.iter().enumerate() {
            for (s, stream) in tree.streams.iter().enumerate() {
                let mut stream_id = None;
                for (k, r) in stream.turns.iter().enumerate() {
                    let turn = &prepared(&run.0.trees[t])[s][k];
                    let id = correlation(&with_marker(&turn.full, turn.marker_at.0, &marker));
                    assert_eq!(
                        id,
                        correlation(&with_marker(&turn.one, turn.marker_at.1, &marker))
                    );
                    let groups: Vec<usize> = id.split('-').map(str::len).collect();
                    assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
                    assert!(
                        id.ends_with("-0123456789ab") && id.as_bytes()[14] == b'8',
                        "{id}"
                    );
                    assert_eq!(
                        *stream_id.get_or_insert_with(|| id.clone()),
                        id,
                        "{}",
                        stream.id
                    );
                    ids.insert(id);
                    assert_eq!(u64::from(turn.prompt_tokens), r.input);
                    let full = body(&with_marker(&turn.full, turn.marker_at.0, &marker));
                    let one = body(&with_marker(&turn.one, turn.marker_at.1, &marker));
                    assert_eq!(full["max_completion_tokens"], r.output.max(1));
                    assert_eq!(one["max_completion_tokens"], 1);
                    assert_eq!(full["messages"], one["messages"]);
                    let msgs = full["messages"].as_array().unwrap();
                    let first_user = msgs.iter().find(|m| m["role"] == "user").unwrap();
                    assert!(
                        text(first_user).starts_with("[rid:0123456789ab]\n\n"),
                        "{}",
                        stream.id
                    );
                    let words: usize = msgs
                        .iter()
                        .map(|m| text(m).split_whitespace().count())
                        .sum();
                    assert_eq!(
                        words as u64,
                        r.input + 1,
                        "{} #{k}: the marker and `in` tokens",
                        stream.id
                    );
                }
            }
        }
        let streams: usize = trees.iter().map(|t| t.streams.len()).sum();
        assert_eq!(ids.len(), streams, "one id per stream: {ids:?}");
        // Another tree instance (another marker): other ids.
        let turn = &prepared(&run.0.trees[0])[0][0];
        let other = Bytes::from_static(b"[rid:ba9876543210]");
        assert!(
            correlation(&with_marker(&turn.full, turn.marker_at.0, &other))
                .ends_with("-ba9876543210")
        );
    }

    #[test]
    fn overflow_errors_are_told_apart_by_their_text() {
        let a = |detail: &str| {
            outcome(&Answer {
                sent_ns: 0,
                first_token_ns: None,
                end_ns: 0,
                itl_intervals: 0,
                prompt_tokens: None,
                completion_tokens: None,
                cached_tokens: None,
                failure: Some(FailureText {
                    error: "Bad Request",
                    detail,
                }),
                cancelled: false,
                text: "",
            })
        };
        assert_eq!(
            a(r#"HTTP 400: {"error":{"message":"This model's Maximum Context length is 8192"}}"#),
            ReplayOutcome::ContextOverflow
        );
        assert_eq!(
            a("HTTP 400: Prompt is too long"),
            ReplayOutcome::ContextOverflow
        );
        assert_eq!(a("HTTP 500: internal error"), ReplayOutcome::Failed);
    }

    #[test]
    fn the_sampler_cycles_over_the_roots_in_file_order() {
        let (run, _) = run();
        let draws: Vec<(u32, u32)> = (0..7).map(|_| run.0.draw()).collect();
        assert_eq!(
            draws,
            [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
        );
        let (a0, a1) = (run.0.marker(0, 0, 0), run.0.marker(0, 1, 0));
        assert_ne!(a0, a1, "a new pass, a new marker");
        assert_ne!(a0, run.0.marker(0, 0, 1), "another lane, another marker");
        assert_eq!(a0.len(), PLACEHOLDER.len());
    }
}
