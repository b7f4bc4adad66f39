//! A shard's part of a run (`--shard K/N`): every shard builds the same dataset and schedule
//! from the same seed, then keeps the sessions `i ≡ K (mod N)` of the one-process workload,
//! with their request bytes (ids included) and arrival offsets unchanged, and its share of
//! the workers. A session (a conversation, a trace chain) is never split. The records keep
//! their place in the one-process run (`global_records`), which is what lets `vllm-bench
//! merge` rebuild that run's request order exactly.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::shard::{check_not_past, Shard, ShardConfig};
use crate::config::{Config, ConfigError};
use crate::engine::schedule::Cancellations;
use crate::engine::session::{FollowUps, SessionSource};
use crate::engine::{RunReport, Workload};
use crate::http::request::PreparedRequest;
use crate::metrics::steady_state::SteadyStateParams;
use crate::mix::Fnv64;
use crate::output::localtime::LocalDateTime;
use crate::output::shard_file::{self, StartFacts};
use crate::output::stdio::Console;

use super::saved_facts::ShardPlace;

/// Where a shard's records sit in the one-process run.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardMap {
    pub shard: Shard,
    /// The run is lanes (the agentic replay): its requests are decided as it runs, so a
    /// record has no fixed place in the one-process run; local record `j` becomes
    /// `j·N + K`, which no other shard's takes (`global_records` is empty).
    pub lanes: bool,
    /// Per local record (`0..workload.total()`), its index in the one-process run.
    pub global_records: Vec<u32>,
    /// By index in the one-process run, the FNV-1a hash of the request bytes of each
    /// session's first request (prepared before the clock; later turns are built during
    /// the run).
    pub hash_of_global: std::collections::HashMap<u32, u64>,
    /// The workload all shards share (see [`fingerprint`]).
    pub fingerprint: u64,
    /// When this shard was ready to start, ms after `--start-at` (set by
    /// [`start_instant`]; `None` without `--start-at`).
    pub ready_ms: Option<f64>,
}

/// A request's hash as shards compare it: its bytes but the `Host` line (shards may reach
/// one server through different addresses, and send the same request all the same).
pub fn request_hash(r: &PreparedRequest) -> u64 {
    r.hash_without_host()
}

/// What every shard of one run has in common: every session's first request (bytes, ids
/// and prompts), the client prompt lengths, the arrival schedule, the number of requests
/// planned, the concurrency limit and the number of shards. Two shard results merge only
/// when this is equal.
pub fn fingerprint(w: &Workload, count: usize) -> u64 {
    let mut h = Fnv64::new();
    h.write_u64(count as u64);
    h.write_u64(w.total() as u64);
    h.write_u64(w.max_concurrency.map_or(u64::MAX, |c| c as u64));
    for (r, len) in w.requests.iter().zip(w.client_prompt_lens.iter()) {
        h.write_u64(request_hash(r));
        h.write_u64(u64::from(*len));
    }
    for a in w.arrivals.iter().flat_map(|a| a.iter()) {
        h.write_u64(a.as_nanos() as u64);
    }
    if let Some(c) = &w.cancel {
        h.write_u64(c.delay.as_nanos() as u64);
        for i in (0..w.total()).filter(|&i| c.is_chosen(i)) {
            h.write_u64(i as u64);
        }
    }
    h.finish()
}

/// Shard `shard`'s part of the one-process workload `w`.
pub fn select(w: Workload, shard: Shard) -> (Workload, ShardMap) {
    let fingerprint = fingerprint(&w, shard.count);
    let sessions: Vec<usize> = (0..w.requests.len()).filter(|&i| shard.owns(i)).collect();
    let requests: Arc<[PreparedRequest]> =
        sessions.iter().map(|&i| w.requests[i].clone()).collect();
    let lanes = w.sessions.as_ref().is_some_and(|s| s.lanes().is_some());
    let (global_records, request_hashes, source) = match &w.sessions {
        // Lanes (the agentic replay) decide their requests as they run: the source already
        // runs only this shard's lanes ([`ShardMap::globalize`] numbers their records).
        Some(inner) if lanes => (Vec::new(), Vec::new(), Some(inner.clone())),
        None => (
            sessions.iter().map(|&i| i as u32).collect(),
            requests.iter().map(|r| Some(request_hash(r))).collect(),
            None,
        ),
        Some(inner) => {
            let part = ShardSessions::new(inner.clone(), &sessions);
            let (records, hashes) = part.global_records(&requests);
            (
                records,
                hashes,
                Some(Arc::new(part) as Arc<dyn SessionSource>),
            )
        }
    };
    // A shard cancels the requests the one-process run would cancel.
    let cancel = w.cancel.as_ref().map(|c| {
        Cancellations::from_fn(c.delay, global_records.len(), |i| {
            c.is_chosen(global_records[i] as usize)
        })
    });
    let workload = Workload {
        cancel,
        client_prompt_lens: pick(&sessions, &w.client_prompt_lens),
        arrivals: w.arrivals.as_deref().map(|a| pick(&sessions, a)),
        max_concurrency: w.max_concurrency.map(|c| shard.share(c)),
        sessions: source,
        probe: w.probe.clone().filter(|_| shard.index == 0),
        replica_of: w.replica_of.as_deref().map(|t| pick(&sessions, t)),
        requests,
        ..w
    };
    let hash_of_global = global_records
        .iter()
        .zip(&request_hashes)
        .filter_map(|(&g, h)| h.map(|h| (g, h)))
        .collect();
    let map = ShardMap {
        shard,
        lanes,
        global_records,
        hash_of_global,
        fingerprint,
        ready_ms: None,
    };
    (workload, map)
}

impl ShardMap {
    /// Renumbers a shard run's records with their indices in the one-process run, which is
    /// what everything after the run (per-turn figures, conversation ids, the shard
    /// section) looks them up by.
    pub fn globalize(&self, run: &mut RunReport) {
        let (k, n) = (self.shard.index as u32, self.shard.count as u32);
        for rec in &mut run.merged.records {
            rec.index = match self.lanes {
                true => rec.index * n + k,
                false => self.global_records[rec.index as usize],
            };
        }
    }
}

/// `--start-at` as the engine's set start and as wall-clock time, checked again now that the
/// plan is built (loading a tokenizer or a dataset can take long enough to miss it). A
/// start up to [`crate::config::shard::START_AT_SLACK`] past is taken: the engine starts
/// the clock as soon as its cores are ready and reports how late (`RunReport::start`).
/// When this shard's plan was ready relative to it goes into `map` for the start checks of
/// `vllm-bench merge`.
pub fn start_instant(
    c: &ShardConfig,
    map: Option<&mut ShardMap>,
    console: &Console,
) -> Result<Option<(Instant, SystemTime)>, ConfigError> {
    let (Some(t), Some(wall)) = (c.start_at, c.start_time()) else {
        return Ok(None);
    };
    let (now_wall, now) = (SystemTime::now(), Instant::now());
    check_not_past(t, now_wall)?;
    let (at, ready_ms) = match wall.duration_since(now_wall) {
        Ok(ahead) => (now + ahead, -ahead.as_secs_f64() * 1e3),
        Err(late) => (
            now.checked_sub(late.duration()).unwrap_or(now),
            late.duration().as_secs_f64() * 1e3,
        ),
    };
    if let Some(map) = map {
        map.ready_ms = Some(ready_ms);
    }
    let when = LocalDateTime::at(wall).isoformat();
    if ready_ms > 0.0 {
        console.line(format_args!(
            "Measured run starts at {when} ({ready_ms:.0} ms ago: this shard starts late, \
             as soon as its connections are open)"
        ));
    } else {
        console.line(format_args!(
            "Measured run starts at {when} (in {:.1} s)",
            -ready_ms / 1e3
        ));
    }
    Ok(Some((at, wall)))
}

/// Where this shard sits among the shards of its run, for its saved facts
/// (`saved_facts::save`): `run`'s records are already globalized; `max_concurrency` and
/// `steady_state` are the whole run's.
pub fn place(
    config: &Config,
    map: &ShardMap,
    run: &RunReport,
    max_concurrency: Option<u64>,
    steady_state: Option<SteadyStateParams>,
) -> ShardPlace {
    let records = &run.merged.records;
    ShardPlace {
        shard: map.shard.index,
        shards: map.shard.count,
        fingerprint: format!("{:016x}", map.fingerprint),
        start_at: config.shard.start_at,
        index: records.iter().map(|r| r.index).collect(),
        hash: records
            .iter()
            .map(|r| map.hash_of_global.get(&r.index).copied())
            .collect(),
        scheduled: records
            .iter()
            .map(|r| Duration::from_nanos(r.scheduled_ns).as_secs_f64())
            .collect(),
        planned: run.merged.outputs.len() + run.cancelled + run.not_sent,
        max_concurrency,
        steady_state,
        histograms: run
            .merged
            .per_core
            .iter()
            .map(shard_file::encode_core)
            .collect(),
        start: map.ready_ms.map(|ready| start_facts(ready, run)),
        start_block: crate::output::start::block(run.start.as_ref()),
    }
}

/// This shard's start facts, after its run: `ready_ms` from [`start_instant`], its clock's
/// lateness from the engine (when its last core was ready, if after `--start-at`), the
/// first request's lateness from the run's records, and its host and kernel clock state
/// (`vllm-bench merge` checks the shards' starts against them: `output::start`).
fn start_facts(ready_ms: f64, run: &RunReport) -> StartFacts {
    let first = run
        .merged
        .records
        .iter()
        .min_by_key(|r| (r.scheduled_ns, r.start_ns));
    let clock = crate::runtime::clock::kernel_clock();
    StartFacts {
        ready_ms,
        late_ms: run
            .start
            .as_ref()
            .map_or(ready_ms.max(0.0), |s| s.late.as_secs_f64() * 1e3),
        first_send_late_ms: first.map(|r| r.start_ns.saturating_sub(r.scheduled_ns) as f64 / 1e6),
        host: crate::runtime::clock::host_name(),
        ntp_synchronized: clock.synchronized,
        clock_max_error_ms: clock.max_error_ms,
    }
}

/// `all[i]` for each `i` of `indices`.
fn pick<T: Copy>(indices: &[usize], all: &[T]) -> Arc<[T]> {
    indices.iter().map(|&i| all[i]).collect()
}

/// Some sessions of a [`SessionSource`], renumbered from 0, their records packed from 0.
struct ShardSessions {
    inner: Arc<dyn SessionSource>,
    /// Per local session, its index in `inner`.
    sessions: Vec<usize>,
    /// `starts[s]..starts[s + 1]`: local session `s`'s records.
    starts: Vec<usize>,
}

impl ShardSessions {
    fn new(inner: Arc<dyn SessionSource>, sessions: &[usize]) -> ShardSessions {
        let mut starts = Vec::with_capacity(sessions.len() + 1);
        let mut at = 0;
        for &s in sessions {
            starts.push(at);
            at += inner.turns(s);
        }
        starts.push(at);
        ShardSessions {
            inner,
            sessions: sessions.to_vec(),
            starts,
        }
    }

    /// Per local record, its record in `inner`, and the hash of the first requests.
    fn global_records(&self, first: &[PreparedRequest]) -> (Vec<u32>, Vec<Option<u64>>) {
        let mut records = vec![0u32; self.total()];
        let mut hashes = vec![None; self.total()];
        for (s, &global) in self.sessions.iter().enumerate() {
            for t in 0..self.inner.turns(global) {
                records[self.starts[s] + t] = self.inner.record(global, t) as u32;
            }
            hashes[self.starts[s]] = Some(request_hash(&first[s]));
        }
        (records, hashes)
    }
}

impl SessionSource for ShardSessions {
    fn total(&self) -> usize {
        self.starts[self.sessions.len()]
    }

    fn turns(&self, session: usize) -> usize {
        self.starts[session + 1] - self.starts[session]
    }

    fn record(&self, session: usize, turn: usize) -> usize {
        self.starts[session] + turn
    }

    fn follow(&self, session: usize) -> Box<dyn FollowUps + '_> {
        self.inner.follow(self.sessions[session])
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backends::ResponseMode;
    use crate::engine::session::Chains;
    use crate::http::request::{HeadTemplate, Method};

    fn workload(n: usize) -> Workload {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        Workload {
            requests: (0..n)
                .map(|i| head.build(Some(&i.to_string()), None, b"body"))
                .collect(),
            client_prompt_lens: (0..n as u32).collect(),
            arrivals: Some((0..n as u64).map(Duration::from_millis).collect()),
            max_concurrency: Some(5),
            mode: ResponseMode::Whole,
            sessions: None,
            expected_tokens: 0,
            probe: None,
            replica_of: None,
            cancel: None,
            time_bound: None,
        }
    }

    #[test]
    fn a_shard_cancels_the_requests_the_whole_run_would_cancel() {
        let mut all = workload(10);
        let whole = Cancellations::draw(50.0, Duration::from_millis(3), 9, 10);
        all.cancel = Some(whole.clone());
        for index in 0..3 {
            let (part, map) = select(all.clone(), Shard { index, count: 3 });
            let c = part.cancel.expect("the shard cancels too");
            assert_eq!(c.delay, whole.delay);
            for (local, &global) in map.global_records.iter().enumerate() {
                assert_eq!(c.is_chosen(local), whole.is_chosen(global as usize));
            }
        }
        let plain = fingerprint(&workload(10), 3);
        assert_ne!(
            plain,
            fingerprint(&all, 3),
            "shards of another choice do not merge"
        );
    }

    #[test]
    fn shards_partition_the_requests_with_their_offsets_and_workers() {
        let all = workload(10);
        let parts: Vec<(Workload, ShardMap)> = (0..3)
            .map(|index| select(all.clone(), Shard { index, count: 3 }))
            .collect();
        let mut seen: Vec<u32> = parts
            .iter()
            .flat_map(|p| p.1.global_records.clone())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<u32>>());
        let (one, map) = &parts[1];
        assert_eq!(map.global_records, vec![1, 4, 7]);
        assert_eq!(&*one.client_prompt_lens, &[1, 4, 7]);
        let arrivals = one.arrivals.as_deref().unwrap();
        assert_eq!(arrivals[2], Duration::from_millis(7));
        assert_eq!(one.requests[0].to_vec(), all.requests[1].to_vec());
        assert_eq!(map.hash_of_global[&1], request_hash(&all.requests[1]));
        let workers: Vec<usize> = parts.iter().map(|p| p.0.max_concurrency.unwrap()).collect();
        assert_eq!(workers, vec![2, 2, 1]);
        assert!(parts
            .iter()
            .all(|p| p.1.fingerprint == parts[0].1.fingerprint));
    }

    #[test]
    fn the_fingerprint_tells_workloads_and_shard_counts_apart() {
        let a = fingerprint(&workload(10), 2);
        assert_ne!(a, fingerprint(&workload(11), 2));
        assert_ne!(a, fingerprint(&workload(10), 3));
        let mut slower = workload(10);
        slower.arrivals = Some((0..10).map(|i| Duration::from_millis(2 * i)).collect());
        assert_ne!(a, fingerprint(&slower, 2));
    }

    #[test]
    fn sessions_stay_whole_and_keep_their_records() {
        // Chains: 0 <- 2 <- 3, 1 <- 4; sessions {0,2,3} and {1,4}.
        let w = workload(5);
        let g = Chains::group(
            w.requests.clone(),
            w.client_prompt_lens.clone(),
            w.arrivals.clone(),
            &[None, None, Some(0), Some(2), Some(1)],
        );
        let grouped = Workload {
            requests: g.first_requests,
            client_prompt_lens: g.first_prompt_lens,
            arrivals: g.first_arrivals,
            sessions: Some(g.sessions),
            ..w
        };
        let (second, map) = select(grouped.clone(), Shard { index: 1, count: 2 });
        assert_eq!(second.total(), 2);
        assert_eq!(map.global_records, vec![1, 4]);
        assert!(!map.hash_of_global.contains_key(&4), "a later turn");
        let (first, map) = select(grouped, Shard { index: 0, count: 2 });
        assert_eq!(map.global_records, vec![0, 2, 3]);
        let source = first.sessions.unwrap();
        assert_eq!((source.turns(0), source.record(0, 2)), (3, 2));
    }
}
