//! What an agentic replay reports beyond the per-request metrics (SPEC §3.5, §4): trees and
//! streams started and completed, requests per stream kind, context overflows counted apart,
//! per-task figures AIPerf lacks (time, tokens, subagent fan-out, idle vs server time per
//! tree), branch statistics, the ideal prefix-cache hit beside the server's cached share,
//! TTFT/ITL coverage of the duration, and the AgentX validity verdict with its reasons.
//!
//! A pure computation from the replay's records ([`ReplayRecord`], one per request the
//! scheduler sent), each tree's shape ([`TreeShape`]) and the run's settings: a live run and
//! a merge of its shards compute the same report from the same records. The failure
//! threshold ([`FailureThreshold`]) is here too, so the run's abort and the report's failure
//! ratio are one definition.
//!
//! Definitions (the docs' "What the report block means" says them for the reader):
//! - Every figure but the phase counts is over **profiling** records; primers and the
//!   cache-pressure warm-up are counted apart.
//! - A context overflow is neither a success nor a failure: it is left out of the failure
//!   ratio, the latency figures and the coverage, and counted alone. Its rate is
//!   `overflows / (completed + failed + overflows)` (AIPerf's).
//! - Failure ratio = `failed / (completed + failed)`; cancelled requests (cut by the bound or
//!   an interrupt) are neither.
//! - A tree instance is one (trace, pass). It is **complete** when its root and every stream
//!   it started ended (its last turn answered, or a context overflow ended it early), nothing
//!   of it was cancelled, and every child whose spawning turn was answered (outside the
//!   primers) started. Per-task figures are over complete trees whose root turn 0 was sent
//!   during profiling: a tree resumed mid-trajectory has no task start to measure from.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::datasets::agentic::{Phase, ReplayOutcome, ReplayRecord, StreamKind, Tree};

use super::stats::{mean, percentile_sorted, sort_samples};

/// AgentX's rules (SPEC §3 table, §4).
pub const AGENTX_MIN_DURATION_S: f64 = 900.0;
pub const AGENTX_MAX_OVERFLOW_RATE: f64 = 0.01;
pub const AGENTX_MIN_COVERAGE: f64 = 0.95;
pub const AGENTX_FAILED_REQUEST_THRESHOLD: f64 = 0.10;
pub const AGENTX_SYSTEM_IDLE_CAP_S: f64 = 10.0;

/// What the report needs of one stream of a tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamShape {
    pub kind: StreamKind,
    pub turns: u32,
    /// The root turn that spawns it (`None`: the root).
    pub spawn_turn: Option<u32>,
    /// Per turn, (hit blocks, blocks) of a perfect prefix cache (SPEC §4).
    pub ideal: Vec<(u32, u32)>,
}

/// What the report needs of one tree: its streams, and the root turns that wait for children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeShape {
    pub streams: Vec<StreamShape>,
    pub join_turns: Vec<u32>,
}

impl TreeShape {
    pub fn of(tree: &Tree) -> TreeShape {
        let ideal = tree.ideal_hits_per_turn();
        let streams = tree
            .streams
            .iter()
            .zip(ideal)
            .map(|(s, ideal)| StreamShape {
                kind: s.kind,
                turns: s.turns.len() as u32,
                spawn_turn: s.branch.map(|b| tree.branches[b as usize].spawn_turn),
                ideal,
            })
            .collect();
        let mut join_turns: Vec<u32> = tree.branches.iter().filter_map(|b| b.join_turn).collect();
        join_turns.sort_unstable();
        join_turns.dedup();
        TreeShape {
            streams,
            join_turns,
        }
    }
}

/// The run's settings the verdict reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticSettings {
    /// `--duration`: the profiling duration D, s (`None`: an unbounded run).
    pub duration_s: Option<f64>,
    /// Responses streamed (SSE).
    pub streaming: bool,
    /// `ignore_eos` sent with every request.
    pub ignore_eos: bool,
    /// The per-tree cache-bust marker opens every first user message.
    pub cache_bust: bool,
    /// The system idle cap, s (`None`: off).
    pub system_idle_cap_s: Option<f64>,
    /// Settings AgentX forbids that this run set, as the user wrote them (`--request-rate 4`).
    pub forbidden: Vec<String>,
    /// The run was cut short: an interrupt, or the failure threshold.
    pub cancelled: bool,
    /// `--agentic-failed-request-threshold` stopped the run: the counts when it did.
    pub threshold_crossed: Option<ThresholdCrossed>,
    /// The server's own prefix-cache hit rate over the measured run, from its `/metrics`
    /// (`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`), shown beside the client's
    /// (`None`: not scraped, or no such counters).
    pub server_prefix_cache_hit: Option<f64>,
}

/// Requests by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Outcomes {
    pub completed: u64,
    pub failed: u64,
    pub context_overflow: u64,
    pub cancelled: u64,
}

impl Outcomes {
    fn add(&mut self, o: ReplayOutcome) {
        match o {
            ReplayOutcome::Completed => self.completed += 1,
            ReplayOutcome::Failed => self.failed += 1,
            ReplayOutcome::ContextOverflow => self.context_overflow += 1,
            ReplayOutcome::Cancelled => self.cancelled += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.completed + self.failed + self.context_overflow + self.cancelled
    }

    /// `failed / (completed + failed)` (`None` before any answer).
    pub fn failure_rate(&self) -> Option<f64> {
        ratio(self.failed, self.completed + self.failed)
    }

    /// `overflows / (completed + failed + overflows)`.
    pub fn overflow_rate(&self) -> Option<f64> {
        ratio(
            self.context_overflow,
            self.completed + self.failed + self.context_overflow,
        )
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Requests per phase (SPEC §3.3–3.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Phases {
    pub primer: u64,
    pub warmup: u64,
    pub profiling: u64,
}

/// Started and completed counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub started: u64,
    pub completed: u64,
}

/// A distribution over trees.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dist {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

impl Dist {
    fn of(mut values: Vec<f64>) -> Option<Dist> {
        if values.is_empty() {
            return None;
        }
        sort_samples(&mut values);
        Some(Dist {
            mean: mean(&values),
            p50: percentile_sorted(&values, 50.0),
            p99: percentile_sorted(&values, 99.0),
        })
    }
}

/// Per-task figures over the complete trees that started at turn 0 during profiling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerTree {
    pub trees: u64,
    /// Root turn 0's send to the tree's last response, s.
    pub time_s: Dist,
    pub prompt_tokens: Dist,
    pub output_tokens: Dist,
    /// Child streams started per tree.
    pub fan_out: Dist,
    /// Time with at least one request of the tree in flight, s.
    pub server_s: Dist,
    /// The rest of the tree's time (tools running, think time), s.
    pub idle_s: Dist,
}

/// Children and joins of profiling (AIPerf's `branch_stats`, in our terms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Branches {
    /// Child streams whose first request was sent during profiling.
    pub children_spawned: u64,
    /// Of them: their last turn answered, no overflow.
    pub children_completed: u64,
    /// Of them: at least one failed request.
    pub children_errored: u64,
    /// Of them: ended early by a context overflow.
    pub children_truncated: u64,
    /// Of them: a request cut by the bound or an interrupt.
    pub children_cancelled: u64,
    /// Join turns (a parent that waited for children) sent during profiling.
    pub joins: u64,
}

/// The ideal and the server's prefix-cache figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CacheHits {
    /// AIPerf's `theoretical_prefix_cache_hit`: hit blocks / blocks over the completed
    /// profiling requests, each request's hits from its trace's recorded order.
    pub theoretical: Option<f64>,
    /// Client side: `usage.prompt_tokens_details.cached_tokens / prompt_tokens` over the
    /// completed profiling requests whose usage carried `cached_tokens` (AIPerf's
    /// `overall_usage_prompt_cache_read_pct`).
    pub usage: Option<f64>,
    /// How many completed profiling requests carried `cached_tokens`.
    pub usage_reported: u64,
    /// The server's `/metrics` over the measured run (all its traffic, warm-up excluded).
    pub server_metrics: Option<f64>,
}

/// How much of the duration the last first token and the last ITL-bearing response reach
/// (SPEC §4 "Coverage").
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Coverage {
    pub ttft_ratio: Option<f64>,
    pub itl_ratio: Option<f64>,
}

/// Why a run is not a valid AgentX submission; the code is AIPerf's where it has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    pub code: &'static str,
    /// The evidence, in words.
    pub detail: String,
}

/// The AgentX validity verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub valid: bool,
    pub reasons: Vec<Reason>,
}

/// What an agentic run's report is computed from: a run's (or a merge's) records, the
/// corpus's tree shapes (indexed by `ReplayRecord::tree`) and the run's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticFacts {
    pub records: Vec<ReplayRecord>,
    pub shapes: Vec<TreeShape>,
    pub settings: AgenticSettings,
}

impl AgenticFacts {
    /// The facts of a run's shards together (`vllm-bench merge`): every shard's records,
    /// the shapes and settings of the first (the shards replay one corpus with one command
    /// line), cut short if any shard was.
    pub fn union<'a>(parts: impl IntoIterator<Item = &'a AgenticFacts>) -> Option<AgenticFacts> {
        let mut parts = parts.into_iter();
        let mut all = parts.next()?.clone();
        for p in parts {
            all.records.extend_from_slice(&p.records);
            all.settings.cancelled |= p.settings.cancelled;
            all.settings.threshold_crossed = all
                .settings
                .threshold_crossed
                .or(p.settings.threshold_crossed);
        }
        Some(all)
    }

    pub fn report(&self) -> AgenticReport {
        AgenticReport::compute(&self.records, &self.shapes, &self.settings)
    }
}

/// The agentic report; see the module doc.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgenticReport {
    pub duration_s: Option<f64>,
    pub phases: Phases,
    /// Profiling requests by outcome.
    pub profiling: Outcomes,
    pub failure_rate: Option<f64>,
    pub context_overflow_rate: Option<f64>,
    /// Profiling requests per stream kind (`root`, `subagent`, `aux`, `wg`, `fa`).
    pub requests_per_kind: BTreeMap<&'static str, u64>,
    pub trees: Progress,
    pub streams: Progress,
    pub per_tree: Option<PerTree>,
    pub branches: Branches,
    pub prefix_cache: CacheHits,
    pub coverage: Coverage,
    pub verdict: Verdict,
}

/// One tree instance's records, and what they say.
#[derive(Default)]
struct Instance<'a> {
    records: Vec<&'a ReplayRecord>,
}

/// Per stream of an instance: what its records say.
#[derive(Default, Clone, Copy)]
struct StreamState {
    started: bool,
    first_phase: Option<Phase>,
    first_turn: u32,
    last_answered: bool,
    overflow: bool,
    failed: bool,
    cancelled: bool,
}

impl StreamState {
    fn ended(&self) -> bool {
        (self.last_answered || self.overflow) && !self.cancelled
    }
}

impl<'a> Instance<'a> {
    fn streams(&self, shape: &TreeShape) -> Vec<StreamState> {
        let mut out = vec![StreamState::default(); shape.streams.len()];
        for r in &self.records {
            let (Some(st), Some(sh)) = (
                out.get_mut(r.stream as usize),
                shape.streams.get(r.stream as usize),
            ) else {
                continue;
            };
            if !st.started || r.turn < st.first_turn {
                st.first_turn = r.turn;
                st.first_phase = Some(r.phase);
            }
            st.started = true;
            match r.outcome {
                ReplayOutcome::Completed | ReplayOutcome::Failed
                    if r.phase != Phase::Primer && r.turn + 1 == sh.turns =>
                {
                    st.last_answered = true
                }
                _ => {}
            }
            st.overflow |= r.outcome == ReplayOutcome::ContextOverflow;
            st.failed |= r.outcome == ReplayOutcome::Failed;
            st.cancelled |= r.outcome == ReplayOutcome::Cancelled;
        }
        out
    }

    /// Whether the instance drained (module doc).
    fn complete(&self, shape: &TreeShape, streams: &[StreamState]) -> bool {
        let answered = |turn: u32| {
            self.records.iter().any(|r| {
                r.stream == 0
                    && r.turn == turn
                    && r.phase != Phase::Primer
                    && matches!(r.outcome, ReplayOutcome::Completed | ReplayOutcome::Failed)
            })
        };
        streams.first().is_some_and(StreamState::ended)
            && streams.iter().zip(&shape.streams).all(|(st, sh)| {
                if st.started {
                    st.ended()
                } else {
                    sh.spawn_turn.is_none_or(|t| !answered(t))
                }
            })
    }
}

/// Seconds of `[start, end]` covered by at least one interval.
fn covered_s(mut spans: Vec<(i64, i64)>) -> f64 {
    spans.sort_unstable();
    let mut total = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in spans {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total as f64 / 1e9
}

impl AgenticReport {
    /// The report of `records` over trees of `shapes` (indexed by `ReplayRecord::tree`).
    pub fn compute(
        records: &[ReplayRecord],
        shapes: &[TreeShape],
        settings: &AgenticSettings,
    ) -> AgenticReport {
        let mut phases = Phases::default();
        let mut profiling = Outcomes::default();
        let mut per_kind: BTreeMap<&'static str, u64> =
            StreamKind::ALL.iter().map(|k| (k.name(), 0)).collect();
        // A tree instance is (trace, pass, lane): the shards of a run each draw their own passes.
        let mut instances: HashMap<(u32, u32, u32), Instance<'_>> = HashMap::new();
        let (mut ideal_hits, mut ideal_blocks) = (0u64, 0u64);
        let (mut cached, mut cached_prompt, mut cached_n) = (0u64, 0u64, 0u64);
        let (mut last_ttft, mut last_itl): (Option<i64>, Option<i64>) = (None, None);
        for r in records {
            match r.phase {
                Phase::Primer => phases.primer += 1,
                Phase::Warmup => phases.warmup += 1,
                Phase::Profiling => phases.profiling += 1,
            }
            instances
                .entry((r.tree, r.pass, r.lane))
                .or_default()
                .records
                .push(r);
            if r.phase != Phase::Profiling {
                continue;
            }
            profiling.add(r.outcome);
            *per_kind.entry(r.kind.name()).or_default() += 1;
            if r.outcome != ReplayOutcome::Completed {
                continue;
            }
            let ideal = shapes
                .get(r.tree as usize)
                .and_then(|t| t.streams.get(r.stream as usize))
                .and_then(|s| s.ideal.get(r.turn as usize));
            if let Some(&(h, b)) = ideal {
                ideal_hits += u64::from(h);
                ideal_blocks += u64::from(b);
            }
            if let Some(c) = r.cached_tokens {
                cached += c;
                cached_prompt += r.prompt_tokens;
                cached_n += 1;
            }
            if let Some(t) = r.first_token_ns {
                last_ttft = last_ttft.max(Some(t));
            }
            if r.itl_intervals > 0 {
                last_itl = last_itl.max(Some(r.end_ns));
            }
        }
        let mut trees = Progress::default();
        let mut streams = Progress::default();
        let mut branches = Branches::default();
        let mut samples: [Vec<f64>; 6] = Default::default();
        let mut keys: Vec<&(u32, u32, u32)> = instances.keys().collect();
        keys.sort_unstable();
        for key in keys {
            let inst = &instances[key];
            let Some(shape) = shapes.get(key.0 as usize) else {
                continue;
            };
            if !inst.records.iter().any(|r| r.phase == Phase::Profiling) {
                continue;
            }
            let states = inst.streams(shape);
            let complete = inst.complete(shape, &states);
            trees.started += 1;
            trees.completed += u64::from(complete);
            for st in states.iter().filter(|s| s.started) {
                streams.started += 1;
                streams.completed += u64::from(st.ended());
            }
            for st in states.iter().skip(1) {
                if st.first_phase != Some(Phase::Profiling) {
                    continue;
                }
                branches.children_spawned += 1;
                branches.children_completed += u64::from(st.last_answered && !st.overflow);
                branches.children_errored += u64::from(st.failed);
                branches.children_truncated += u64::from(st.overflow);
                branches.children_cancelled += u64::from(st.cancelled);
            }
            branches.joins += inst
                .records
                .iter()
                .filter(|r| {
                    r.phase == Phase::Profiling
                        && r.stream == 0
                        && shape.join_turns.contains(&r.turn)
                })
                .count() as u64;
            let root0 = inst
                .records
                .iter()
                .filter(|r| r.stream == 0 && r.turn == 0 && r.phase == Phase::Profiling)
                .map(|r| r.sent_ns)
                .min();
            let (true, Some(start)) = (complete, root0) else {
                continue;
            };
            let end = inst.records.iter().map(|r| r.end_ns).max().unwrap_or(start);
            let time = (end - start) as f64 / 1e9;
            let server = covered_s(inst.records.iter().map(|r| (r.sent_ns, r.end_ns)).collect());
            let answered = inst
                .records
                .iter()
                .filter(|r| matches!(r.outcome, ReplayOutcome::Completed | ReplayOutcome::Failed));
            let (p, o) = answered.fold((0u64, 0u64), |(p, o), r| {
                (p + r.prompt_tokens, o + r.output_tokens)
            });
            let fan_out = states.iter().skip(1).filter(|s| s.started).count();
            for (list, v) in samples.iter_mut().zip([
                time,
                p as f64,
                o as f64,
                fan_out as f64,
                server,
                (time - server).max(0.0),
            ]) {
                list.push(v);
            }
        }
        let [time, prompt, output, fan, server, idle] = samples;
        let n = time.len() as u64;
        let per_tree = match (
            Dist::of(time),
            Dist::of(prompt),
            Dist::of(output),
            Dist::of(fan),
            Dist::of(server),
            Dist::of(idle),
        ) {
            (
                Some(time_s),
                Some(prompt_tokens),
                Some(output_tokens),
                Some(fan_out),
                Some(s),
                Some(i),
            ) => Some(PerTree {
                trees: n,
                time_s,
                prompt_tokens,
                output_tokens,
                fan_out,
                server_s: s,
                idle_s: i,
            }),
            _ => None,
        };
        let d_ns = settings.duration_s.filter(|d| *d > 0.0).map(|d| d * 1e9);
        let coverage = Coverage {
            ttft_ratio: d_ns.zip(last_ttft).map(|(d, t)| t as f64 / d),
            itl_ratio: d_ns.zip(last_itl).map(|(d, t)| t as f64 / d),
        };
        let prefix_cache = CacheHits {
            theoretical: ratio(ideal_hits, ideal_blocks),
            usage: ratio(cached, cached_prompt),
            usage_reported: cached_n,
            server_metrics: settings.server_prefix_cache_hit,
        };
        let verdict = verdict(settings, &profiling, &coverage);
        AgenticReport {
            duration_s: settings.duration_s,
            phases,
            failure_rate: profiling.failure_rate(),
            context_overflow_rate: profiling.overflow_rate(),
            profiling,
            requests_per_kind: per_kind,
            trees,
            streams,
            per_tree,
            branches,
            prefix_cache,
            coverage,
            verdict,
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// AgentX's rules over this run (SPEC §4 `submission_valid`), each broken one a reason.
fn verdict(s: &AgenticSettings, outcomes: &Outcomes, coverage: &Coverage) -> Verdict {
    let mut reasons = Vec::new();
    let mut no = |code: &'static str, detail: String| reasons.push(Reason { code, detail });
    match &s.threshold_crossed {
        Some(c) => no(
            "run_cancelled",
            format!("the failure threshold stopped the run: {c}"),
        ),
        None if s.cancelled => no("run_cancelled", "the run was cut short".into()),
        None => {}
    }
    match s.duration_s {
        Some(d) if d >= AGENTX_MIN_DURATION_S => {}
        Some(d) => no(
            "duration_too_short",
            format!("--duration {d} s is below AgentX's {AGENTX_MIN_DURATION_S} s"),
        ),
        None => no(
            "duration_too_short",
            format!("no --duration: AgentX measures a fixed duration of at least {AGENTX_MIN_DURATION_S} s"),
        ),
    }
    if !s.streaming {
        no("streaming_off", "responses were not streamed".into());
    }
    if !s.ignore_eos {
        no(
            "ignore_eos_off",
            "requests did not set ignore_eos (--ignore-eos)".into(),
        );
    }
    if !s.cache_bust {
        no(
            "cache_bust_off",
            "the per-tree cache-bust marker (first_turn_prefix) was off".into(),
        );
    }
    if s.system_idle_cap_s != Some(AGENTX_SYSTEM_IDLE_CAP_S) {
        let was = s
            .system_idle_cap_s
            .map_or("off".to_string(), |c| format!("{c} s"));
        no(
            "system_idle_cap_not_10s",
            format!(
                "the system idle cap was {was}; AgentX locks it at {AGENTX_SYSTEM_IDLE_CAP_S} s"
            ),
        );
    }
    for f in &s.forbidden {
        no("forbidden_setting", format!("{f} is not allowed by AgentX"));
    }
    if let Some(r) = outcomes
        .overflow_rate()
        .filter(|r| *r > AGENTX_MAX_OVERFLOW_RATE)
    {
        no(
            "context_overflow_rate_exceeded",
            format!(
                "{} context overflows of {} answered requests ({}) exceed {}",
                outcomes.context_overflow,
                outcomes.completed + outcomes.failed + outcomes.context_overflow,
                pct(r),
                pct(AGENTX_MAX_OVERFLOW_RATE)
            ),
        );
    }
    if let Some(r) = outcomes
        .failure_rate()
        .filter(|r| *r > AGENTX_FAILED_REQUEST_THRESHOLD)
    {
        no(
            "failed_request_rate_exceeded",
            format!(
                "{} failed of {} answered requests ({}) exceed {}",
                outcomes.failed,
                outcomes.completed + outcomes.failed,
                pct(r),
                pct(AGENTX_FAILED_REQUEST_THRESHOLD)
            ),
        );
    }
    // Checked only for a finished run of AgentX's length, as AIPerf does.
    let checked = !s.cancelled
        && s.threshold_crossed.is_none()
        && s.duration_s.is_some_and(|d| d >= AGENTX_MIN_DURATION_S);
    let best = coverage
        .ttft_ratio
        .into_iter()
        .chain(coverage.itl_ratio)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    if checked && best.is_none_or(|b| b < AGENTX_MIN_COVERAGE) {
        let show = |x: Option<f64>| x.map_or("none".to_string(), pct);
        no(
            "insufficient_profile_metric_coverage",
            format!(
                "the last first token reaches {} and the last ITL-bearing response {} of the duration; one must reach {}",
                show(coverage.ttft_ratio),
                show(coverage.itl_ratio),
                pct(AGENTX_MIN_COVERAGE)
            ),
        );
    }
    Verdict {
        valid: reasons.is_empty(),
        reasons,
    }
}

/// `--agentic-failed-request-threshold R` (AIPerf's `--failed-request-threshold`, AgentX
/// 0.10): counts the profiling requests as they end and says when the run must stop: once
/// at least `max(lanes, 10)` have been answered, as soon as `failed / answered > R`
/// (answered = completed + failed; overflows and cancellations are neither, as in the
/// report). Shared by every lane of the run (counters, not a lock): constant time and no
/// allocation per call, so the lanes call it on the engine's cores for every request that
/// ends.
#[derive(Debug)]
pub struct FailureThreshold {
    ratio: f64,
    after: u64,
    answered: AtomicU64,
    failed: AtomicU64,
}

/// The threshold was crossed: the run stops and exits non-zero.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error(
    "--agentic-failed-request-threshold {ratio}: {failed} of {answered} profiling requests failed \
     ({:.1}%); the run was stopped (see the failures by reason)",
    100.0 * *failed as f64 / *answered as f64
)]
pub struct ThresholdCrossed {
    pub ratio: f64,
    pub failed: u64,
    pub answered: u64,
}

impl FailureThreshold {
    /// The threshold `ratio` for a run of `lanes` lanes.
    pub fn new(ratio: f64, lanes: u32) -> FailureThreshold {
        FailureThreshold {
            ratio,
            after: u64::from(lanes).max(10),
            answered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Counts one ended request; `Err` when the run must stop now (every later failure
    /// says so again: the first `Err` is the one that stops the run).
    pub fn observe(&self, phase: Phase, outcome: ReplayOutcome) -> Result<(), ThresholdCrossed> {
        if phase != Phase::Profiling {
            return Ok(());
        }
        let (answered, failed) = match outcome {
            ReplayOutcome::Completed => (
                self.answered.fetch_add(1, Ordering::AcqRel) + 1,
                self.failed.load(Ordering::Acquire),
            ),
            ReplayOutcome::Failed => {
                // The failure first: a reader never sees more failures than answers.
                let failed = self.failed.fetch_add(1, Ordering::AcqRel) + 1;
                (self.answered.fetch_add(1, Ordering::AcqRel) + 1, failed)
            }
            ReplayOutcome::ContextOverflow | ReplayOutcome::Cancelled => return Ok(()),
        };
        if answered >= self.after && failed as f64 > self.ratio * answered as f64 {
            return Err(ThresholdCrossed {
                ratio: self.ratio,
                failed,
                answered,
            });
        }
        Ok(())
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.valid {
            return f.write_str("valid");
        }
        let codes: Vec<&str> = self.reasons.iter().map(|r| r.code).collect();
        write!(f, "invalid ({})", codes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::{derive, WekaTrace};

    const TRACE_A: &str = include_str!("../../tests/fixtures/agentic/traces/trace-a.json");

    /// trace-a: root of 3 turns; a subagent of 2 turns spawned by turn 0, joined at turn 1.
    fn shapes() -> Vec<TreeShape> {
        vec![TreeShape::of(&derive(&WekaTrace::parse(TRACE_A).unwrap()))]
    }

    fn s(x: f64) -> i64 {
        (x * 1e9).round() as i64
    }

    /// A profiling request of trace-a's pass 0, answered.
    fn rec(stream: u32, turn: u32, sent: f64, end: f64, tokens: (u64, u64)) -> ReplayRecord {
        ReplayRecord {
            tree: 0,
            pass: 0,
            lane: 0,
            stream,
            kind: if stream == 0 {
                StreamKind::Root
            } else {
                StreamKind::Subagent
            },
            turn,
            phase: Phase::Profiling,
            sent_ns: s(sent),
            first_token_ns: Some(s(sent + 0.1)),
            end_ns: s(end),
            itl_intervals: 3,
            prompt_tokens: tokens.0,
            output_tokens: tokens.1,
            cached_tokens: None,
            outcome: ReplayOutcome::Completed,
        }
    }

    /// SPEC TC1's timeline: every request takes 0.5 s.
    fn tc1() -> Vec<ReplayRecord> {
        vec![
            rec(0, 0, 0.0, 0.5, (200, 50)),
            rec(1, 0, 0.5, 1.0, (150, 40)),
            rec(1, 1, 1.5, 2.0, (260, 30)),
            rec(0, 1, 3.5, 4.0, (400, 60)),
            rec(0, 2, 5.3, 5.8, (500, 80)),
        ]
    }

    fn agentx() -> AgenticSettings {
        AgenticSettings {
            duration_s: Some(1800.0),
            streaming: true,
            ignore_eos: true,
            cache_bust: true,
            system_idle_cap_s: Some(10.0),
            forbidden: Vec::new(),
            cancelled: false,
            threshold_crossed: None,
            server_prefix_cache_hit: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_replayed_tree_gives_its_per_task_figures() {
        let mut records = tc1();
        records[3].cached_tokens = Some(192);
        records[4].cached_tokens = Some(448);
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(
            r.phases,
            Phases {
                primer: 0,
                warmup: 0,
                profiling: 5
            }
        );
        assert_eq!(r.profiling.completed, 5);
        assert_eq!(r.requests_per_kind["root"], 3);
        assert_eq!(r.requests_per_kind["subagent"], 2);
        assert_eq!(r.requests_per_kind["wg"], 0);
        assert_eq!(
            r.trees,
            Progress {
                started: 1,
                completed: 1
            }
        );
        assert_eq!(
            r.streams,
            Progress {
                started: 2,
                completed: 2
            }
        );
        let t = r.per_tree.unwrap();
        assert_eq!(t.trees, 1);
        assert!(close(t.time_s.mean, 5.8) && close(t.time_s.p99, 5.8));
        // Five requests of 0.5 s, none overlapping: 2.5 s at the server, 3.3 s idle.
        assert!(close(t.server_s.p50, 2.5), "{:?}", t.server_s);
        assert!(close(t.idle_s.p50, 3.3), "{:?}", t.idle_s);
        assert_eq!(t.prompt_tokens.mean, 1510.0);
        assert_eq!(t.output_tokens.mean, 260.0);
        assert_eq!(t.fan_out.mean, 1.0);
        assert_eq!(
            r.branches,
            Branches {
                children_spawned: 1,
                children_completed: 1,
                joins: 1,
                ..Branches::default()
            }
        );
        // SPEC §4: 0/3, child 1/2, child 2/4, 3/6, 6/7.
        assert!(close(r.prefix_cache.theoretical.unwrap(), 12.0 / 22.0));
        // Only the two requests that reported it: 640 of 900 prompt tokens.
        assert_eq!(r.prefix_cache.usage_reported, 2);
        assert!(close(r.prefix_cache.usage.unwrap(), 640.0 / 900.0));
        // The last first token at 5.4 s, the last ITL-bearing end at 5.8 s, of 1800 s.
        assert!(close(r.coverage.ttft_ratio.unwrap(), 5.4 / 1800.0));
        assert!(close(r.coverage.itl_ratio.unwrap(), 5.8 / 1800.0));
        assert_eq!(r.failure_rate, Some(0.0));
        assert_eq!(r.context_overflow_rate, Some(0.0));
    }

    #[test]
    fn overlapping_requests_count_once_as_server_time() {
        let mut records = tc1();
        // The child's first turn overlaps the root's first (TC2's shape): 0.0–0.5 and 0.3–1.0.
        records[1].sent_ns = s(0.3);
        let t = AgenticReport::compute(&records, &shapes(), &agentx())
            .per_tree
            .unwrap();
        assert!(close(t.server_s.p50, 1.0 + 1.5), "{:?}", t.server_s);
    }

    #[test]
    fn a_tree_cut_by_the_bound_is_started_not_completed_and_has_no_task_figures() {
        let mut records = tc1();
        records.truncate(3);
        records[2].outcome = ReplayOutcome::Cancelled;
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(
            r.trees,
            Progress {
                started: 1,
                completed: 0
            }
        );
        assert_eq!(
            r.streams,
            Progress {
                started: 2,
                completed: 0
            }
        );
        assert_eq!(r.per_tree, None);
        assert_eq!(r.branches.children_cancelled, 1);
        assert_eq!(r.profiling.cancelled, 1);
        // Cancelled is not a failure.
        assert_eq!(r.failure_rate, Some(0.0));
    }

    #[test]
    fn a_spawned_child_that_never_started_keeps_the_tree_open() {
        // The root's answers are all there, the child's are not (a background child cut
        // before it started looks the same).
        let records: Vec<ReplayRecord> = tc1().into_iter().filter(|r| r.stream == 0).collect();
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(
            r.trees,
            Progress {
                started: 1,
                completed: 0
            }
        );
        assert_eq!(r.branches.children_spawned, 0);
    }

    #[test]
    fn a_context_overflow_ends_its_stream_and_is_counted_apart() {
        let mut records = tc1();
        records.truncate(4);
        records[3].outcome = ReplayOutcome::ContextOverflow;
        records[3].first_token_ns = None;
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(r.profiling.context_overflow, 1);
        assert_eq!(r.context_overflow_rate, Some(0.25));
        assert_eq!(r.failure_rate, Some(0.0));
        // The root ended at its overflow; its child had ended: the tree drained.
        assert_eq!(
            r.trees,
            Progress {
                started: 1,
                completed: 1
            }
        );
        let t = r.per_tree.unwrap();
        assert!(close(t.time_s.p50, 4.0));
        // The overflowed request's tokens are not the task's.
        assert_eq!(t.prompt_tokens.p50, 610.0);
        // Nor its blocks the ideal hit's: 0/3 + 1/2 + 2/4.
        assert!(close(r.prefix_cache.theoretical.unwrap(), 3.0 / 9.0));
        // A subagent's overflow is a truncated child.
        let mut records = tc1();
        records[2].outcome = ReplayOutcome::ContextOverflow;
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(r.branches.children_truncated, 1);
        assert_eq!(r.branches.children_completed, 0);
        assert_eq!(r.trees.completed, 1);
    }

    #[test]
    fn a_tree_resumed_mid_trajectory_completes_without_task_figures() {
        let mut records = tc1();
        records.drain(..3);
        let mut primer = rec(0, 0, -2.0, -1.9, (200, 1));
        primer.phase = Phase::Primer;
        records.push(primer);
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(r.phases.primer, 1);
        assert_eq!(r.phases.profiling, 2);
        assert_eq!(
            r.trees,
            Progress {
                started: 1,
                completed: 1
            }
        );
        assert_eq!(r.per_tree, None);
        // A tree seen only in warm-up is not started in profiling.
        let r = AgenticReport::compute(&[primer], &shapes(), &agentx());
        assert_eq!(r.trees, Progress::default());
    }

    #[test]
    fn two_passes_of_one_trace_are_two_trees() {
        let mut records = tc1();
        records.extend(tc1().into_iter().map(|mut r| {
            r.pass = 1;
            r.lane = 1;
            r.sent_ns += s(5.8);
            r.end_ns += s(5.8);
            r
        }));
        let r = AgenticReport::compute(&records, &shapes(), &agentx());
        assert_eq!(
            r.trees,
            Progress {
                started: 2,
                completed: 2
            }
        );
        assert_eq!(r.per_tree.unwrap().trees, 2);
        assert_eq!(r.branches.joins, 2);
    }

    /// A valid AgentX run: 1800 s, the last first token at 1720 s (95.6%).
    fn valid_run() -> Vec<ReplayRecord> {
        let mut records = tc1();
        records.push(rec(0, 0, 1719.0, 1721.0, (200, 50)));
        records.last_mut().unwrap().pass = 1;
        records.last_mut().unwrap().first_token_ns = Some(s(1720.0));
        records.last_mut().unwrap().itl_intervals = 0;
        records
    }

    fn codes(records: &[ReplayRecord], settings: &AgenticSettings) -> Vec<&'static str> {
        let v = AgenticReport::compute(records, &shapes(), settings).verdict;
        assert_eq!(v.valid, v.reasons.is_empty());
        v.reasons.iter().map(|r| r.code).collect()
    }

    #[test]
    fn the_verdict_of_a_run_by_agentx_rules_is_valid() {
        let r = AgenticReport::compute(&valid_run(), &shapes(), &agentx());
        assert!(r.verdict.valid, "{:?}", r.verdict);
        assert_eq!(r.verdict.to_string(), "valid");
        assert!(close(r.coverage.ttft_ratio.unwrap(), 1720.0 / 1800.0));
    }

    #[test]
    fn each_broken_rule_is_its_own_reason() {
        let run = valid_run();
        let with = |f: &dyn Fn(&mut AgenticSettings)| {
            let mut s = agentx();
            f(&mut s);
            codes(&run, &s)
        };
        assert_eq!(with(&|s| s.cancelled = true), ["run_cancelled"]);
        assert_eq!(
            with(&|s| s.duration_s = Some(600.0)),
            ["duration_too_short"]
        );
        assert_eq!(with(&|s| s.duration_s = None), ["duration_too_short"]);
        assert_eq!(with(&|s| s.streaming = false), ["streaming_off"]);
        assert_eq!(with(&|s| s.ignore_eos = false), ["ignore_eos_off"]);
        assert_eq!(with(&|s| s.cache_bust = false), ["cache_bust_off"]);
        assert_eq!(
            with(&|s| s.system_idle_cap_s = None),
            ["system_idle_cap_not_10s"]
        );
        assert_eq!(
            with(&|s| s.forbidden = vec!["--request-rate 4".into()]),
            ["forbidden_setting"]
        );
        // The coverage: the last first token at 1700 s is 94.4% of 1800 s.
        let mut short = valid_run();
        short.last_mut().unwrap().first_token_ns = Some(s(1700.0));
        assert_eq!(
            codes(&short, &agentx()),
            ["insufficient_profile_metric_coverage"]
        );
        // ... unless an ITL-bearing response ends past 95%.
        short.last_mut().unwrap().itl_intervals = 1;
        assert!(codes(&short, &agentx()).is_empty());
        // ... and it is not checked for a run too short to count anyway.
        let mut s = agentx();
        s.duration_s = Some(600.0);
        let mut early = valid_run();
        early.pop();
        assert_eq!(codes(&early, &s), ["duration_too_short"]);
    }

    #[test]
    fn the_overflow_and_failure_rules_fire_just_past_their_bounds() {
        // 100 answered requests in all (one of them the valid run's late request).
        let mut run = valid_run();
        let filler = |outcome| {
            let mut r = rec(0, 0, 10.0, 11.0, (1, 1));
            r.pass = 9;
            r.outcome = outcome;
            r
        };
        run.extend((0..94).map(|_| filler(ReplayOutcome::Completed)));
        // 1 overflow of 100: 1% is allowed.
        run[0].outcome = ReplayOutcome::ContextOverflow;
        assert!(codes(&run, &agentx()).is_empty());
        run[1].outcome = ReplayOutcome::ContextOverflow;
        let v = AgenticReport::compute(&run, &shapes(), &agentx()).verdict;
        assert_eq!(v.reasons.len(), 1);
        assert_eq!(v.reasons[0].code, "context_overflow_rate_exceeded");
        assert_eq!(
            v.reasons[0].detail,
            "2 context overflows of 100 answered requests (2.00%) exceed 1.00%"
        );
        assert_eq!(v.to_string(), "invalid (context_overflow_rate_exceeded)");
        // 9 failed of 90 answered (a cancellation left out): 10% is allowed.
        let mut run = valid_run();
        run.extend((0..84).map(|_| filler(ReplayOutcome::Completed)));
        for r in run.iter_mut().skip(6).take(9) {
            r.outcome = ReplayOutcome::Failed;
        }
        run.push(filler(ReplayOutcome::Cancelled));
        let r = AgenticReport::compute(&run, &shapes(), &agentx());
        assert_eq!(r.profiling.failed, 9);
        assert_eq!(r.profiling.completed + r.profiling.failed, 90);
        assert!(r.verdict.valid, "{:?}", r.verdict);
        run[1].outcome = ReplayOutcome::Failed;
        let v = AgenticReport::compute(&run, &shapes(), &agentx()).verdict;
        assert_eq!(
            v.reasons,
            [Reason {
                code: "failed_request_rate_exceeded",
                detail: "10 failed of 90 answered requests (11.11%) exceed 10.00%".into()
            }]
        );
    }

    #[test]
    fn the_failure_threshold_waits_for_max_lanes_10_answers() {
        let gate = FailureThreshold::new(0.1, 4);
        let p = Phase::Profiling;
        // A failure first: 1 of 1, but fewer than 10 answered.
        assert!(gate.observe(p, ReplayOutcome::Failed).is_ok());
        for _ in 0..8 {
            assert!(gate.observe(p, ReplayOutcome::Completed).is_ok());
        }
        // Warm-up, overflows and cancellations are not counted.
        assert!(gate.observe(Phase::Warmup, ReplayOutcome::Failed).is_ok());
        assert!(gate.observe(Phase::Primer, ReplayOutcome::Failed).is_ok());
        assert!(gate.observe(p, ReplayOutcome::ContextOverflow).is_ok());
        assert!(gate.observe(p, ReplayOutcome::Cancelled).is_ok());
        // 1 of 10 = 0.1 is not above 0.1.
        assert!(gate.observe(p, ReplayOutcome::Completed).is_ok());
        let e = gate.observe(p, ReplayOutcome::Failed).unwrap_err();
        assert_eq!((e.failed, e.answered), (2, 11));
        assert_eq!(
            e.to_string(),
            "--agentic-failed-request-threshold 0.1: 2 of 11 profiling requests failed (18.2%); \
             the run was stopped (see the failures by reason)"
        );
        // With 20 lanes it waits for 20 answers.
        let gate = FailureThreshold::new(0.1, 20);
        for _ in 0..19 {
            assert!(gate.observe(p, ReplayOutcome::Failed).is_ok());
        }
        assert!(gate.observe(p, ReplayOutcome::Failed).is_err());
    }
}
