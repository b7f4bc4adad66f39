//! A trace's streams and tree (SPEC §1.1 "Deriving the streams"): the root, one child stream
//! per subagent (`::sa:`), the flat chains the recorder folded into the top level split back
//! out by their hash-id prefixes (`::aux:`, `::wg:`, `::fa:`), which root turn spawns each
//! child and which waits for it (a join), and the interval barriers that order streams of
//! one replay scope against each other. Pure data, derived once before the clock: the
//! scheduler reads it, never the trace.

use super::format::{Entry, Request, Subagent, WekaTrace};

/// What a stream is, which decides its id suffix and whether it is capped like a root.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum StreamKind {
    /// The trace's main chain.
    Root,
    /// A subagent entry's main chain (`::sa:{agent_id}`).
    Subagent,
    /// A one-request side call: title generation, a small-model helper (`aux`).
    Aux,
    /// One of ≥3 overlapping workers forked from one request (`wg`).
    WorkerGroup,
    /// Any other forked chain (`fa`).
    FlatAgent,
    /// A `dag_jsonl` session spawned by another: a history of its own (`spawn`).
    Spawned,
    /// A `dag_jsonl` session forked from another: it continues its parent's history (`fork`).
    Forked,
}

impl StreamKind {
    /// The kinds of a Weka trace's tree (a `dag_jsonl` tree has roots, spawns and forks).
    pub const ALL: [StreamKind; 5] = [
        StreamKind::Root,
        StreamKind::Subagent,
        StreamKind::Aux,
        StreamKind::WorkerGroup,
        StreamKind::FlatAgent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StreamKind::Root => "root",
            StreamKind::Subagent => "subagent",
            StreamKind::Aux => "aux",
            StreamKind::WorkerGroup => "wg",
            StreamKind::FlatAgent => "fa",
            StreamKind::Spawned => "spawn",
            StreamKind::Forked => "fork",
        }
    }
}

/// A request's place in a tree: stream and turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TurnRef {
    pub stream: u32,
    pub turn: u32,
}

/// One replayed conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// `{trace}`, `{trace}::sa:{agent}`, `{trace}::aux:000`, `{trace}::sa:{agent}:fa:001`, ...
    pub id: String,
    pub kind: StreamKind,
    /// Its requests in replay order.
    pub turns: Vec<Request>,
    /// Its turn 0's tools+system prefix, tokens.
    pub prefix_tokens: u64,
    /// Streams of one scope are ordered against each other by barriers: 0 is the root and
    /// its flat chains, each subagent and its own chains another.
    pub scope: u32,
    /// The branch that starts it (`None`: the root).
    pub branch: Option<u32>,
    /// Per turn: the requests of other streams of its scope that must have completed before
    /// it is sent (SPEC §1.1 step 6).
    pub barriers: Vec<Vec<TurnRef>>,
}

impl Stream {
    /// Its recorded end: the latest `t + api_time` of its requests.
    pub fn recorded_end(&self) -> f64 {
        self.turns.iter().map(Request::end).fold(0.0, f64::max)
    }

    /// Per turn, the idle gap before it (s): from the previous response's end to its start
    /// (`max(0, t_k - t_{k-1} - api_time_{k-1})`, a missing server time counting as 0), or
    /// with `think_time_only` its recorded `think_time` where it has one (SPEC §1.1 step 5,
    /// `--use-think-time-only`). Turn 0 has none (0).
    pub fn delays(&self, think_time_only: bool) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.turns.len());
        for (k, r) in self.turns.iter().enumerate() {
            let gap = match k {
                0 => 0.0,
                _ => {
                    let p = &self.turns[k - 1];
                    (r.t - p.t - p.api_time.unwrap_or(0.0)).max(0.0)
                }
            };
            out.push(match r.think_time {
                Some(think) if think_time_only && k > 0 => think,
                _ => gap,
            });
        }
        out
    }

    /// Per turn, the output-token limit it is sent with: `max(out, 1)`.
    pub fn max_tokens(&self) -> impl Iterator<Item = u64> + '_ {
        self.turns.iter().map(|r| r.output.max(1))
    }
}

/// Children started together by one root turn (and, unless background, joined by one).
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// `{trace}:spawn:{first agent_id}` or `{trace}:flatspawn:{n}`.
    pub name: String,
    /// The root turn whose response starts the children.
    pub spawn_turn: u32,
    /// The root turn that waits for them; `None`: background children.
    pub join_turn: Option<u32>,
    /// Its child streams.
    pub children: Vec<u32>,
    /// The earliest recorded child start, s.
    pub start: f64,
}

/// How a lane picks where in a tree it starts (SPEC §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartSampling {
    /// Timestamped traces (Weka): t* drawn by time between the start ratios.
    ByTime,
    /// Traces without a timeline (Mooncake JSONL: AIPerf sees bounds [0, 0]): turn 0.
    AtTurnZero,
    /// Trees without timestamps (`dag_jsonl`, SPEC §3.2): a root turn k drawn between the
    /// start ratios of its turn count (at most the last but one) is the primer, and
    /// profiling resumes at k + 1.
    ByTurn,
}

/// A trace as a tree of streams; `streams[0]` is the root.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub id: String,
    /// How the replay picks its start point (the input format decides).
    pub start: StartSampling,
    /// The model of the root's first request (maps to the first `--model`).
    pub main_model: String,
    pub streams: Vec<Stream>,
    pub branches: Vec<Branch>,
}

impl Tree {
    /// Recorded start of the earliest and latest request of any stream (the window t* is
    /// sampled in).
    pub fn time_bounds(&self) -> (f64, f64) {
        let ts = self
            .streams
            .iter()
            .flat_map(|s| s.turns.iter().map(|r| r.t));
        ts.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
            (lo.min(t), hi.max(t))
        })
    }

    /// The ideal prefix-cache hits of the recorded requests (AIPerf's
    /// `theoretical_prefix_cache_hit`): (hit blocks, blocks) summed over
    /// [`Tree::ideal_hits_per_turn`].
    pub fn ideal_block_hits(&self) -> (u64, u64) {
        self.ideal_hits_per_turn()
            .iter()
            .flatten()
            .fold((0, 0), |(h, b), &(hits, blocks)| {
                (h + u64::from(hits), b + u64::from(blocks))
            })
    }

    /// Per stream and turn, (hit blocks, blocks) of a perfect prefix cache: walking every
    /// stream's requests in time order with one set of seen hash ids, a request's hits are
    /// its leading ids already seen (SPEC §4).
    pub fn ideal_hits_per_turn(&self) -> Vec<Vec<(u32, u32)>> {
        let mut order: Vec<(f64, usize, usize)> = self
            .streams
            .iter()
            .enumerate()
            .flat_map(|(s, st)| st.turns.iter().enumerate().map(move |(k, r)| (r.t, s, k)))
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let mut out: Vec<Vec<(u32, u32)>> = self
            .streams
            .iter()
            .map(|s| vec![(0, 0); s.turns.len()])
            .collect();
        let mut seen = std::collections::HashSet::new();
        for (_, s, k) in order {
            let ids = &self.streams[s].turns[k].hash_ids;
            let hits = ids.iter().take_while(|h| seen.contains(*h)).count();
            out[s][k] = (hits as u32, ids.len() as u32);
            seen.extend(ids.iter().copied());
        }
        out
    }

    /// Requests of every stream.
    pub fn requests(&self) -> usize {
        self.streams.iter().map(|s| s.turns.len()).sum()
    }

    /// The branches root turn `turn` spawns.
    pub fn spawned_by(&self, turn: u32) -> impl Iterator<Item = (u32, &Branch)> {
        self.branches
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.spawn_turn == turn)
            .map(|(i, b)| (i as u32, b))
    }

    /// The branches root turn `turn` waits for.
    pub fn joined_at(&self, turn: u32) -> impl Iterator<Item = (u32, &Branch)> {
        self.branches
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.join_turn == Some(turn))
            .map(|(i, b)| (i as u32, b))
    }
}

/// Chains closer than this in time count as touching (AIPerf's epsilon).
const EPS: f64 = 1e-6;
/// A seam (compaction continuation) this much after its tail must share half of its blocks.
const SEAM_GAP_S: f64 = 3600.0;
/// A single request at least this long is `aux` below 10% of the main chain's peak.
const AUX_MIN_IN: u64 = 16384;

/// One chain found by [`split_chains`]: indices into the request list.
#[derive(Debug, Clone, PartialEq)]
struct Chain {
    members: Vec<usize>,
    /// The request it forked from (`None`: the first chain, or no shared prefix at all).
    forked_from: Option<usize>,
}

fn lcp(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Groups `reqs` (in replay order) into per-agent chains by hash-id prefix evidence (SPEC
/// §1.1 step 2); the first chain returned is the main one.
fn split_chains(reqs: &[&Request]) -> Vec<Chain> {
    if reqs.is_empty() {
        return Vec::new();
    }
    // Phase 1: extend or fork.
    let mut chains: Vec<Chain> = Vec::new();
    let mut main: Option<usize> = None;
    let mut preamble: Vec<usize> = Vec::new();
    let mut empty: Vec<usize> = Vec::new();
    let reused = |i: usize| {
        reqs.iter()
            .enumerate()
            .any(|(j, r)| j != i && lcp(&r.hash_ids, &reqs[i].hash_ids) > 0)
    };
    for (i, r) in reqs.iter().enumerate() {
        if r.hash_ids.is_empty() {
            empty.push(i);
            continue;
        }
        // A leading title-generation preamble never founds the main chain.
        if i == 0 && reqs.len() > 1 && !reused(0) {
            preamble.push(i);
            continue;
        }
        let extend = chains
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                let tail = reqs[*c.members.last().unwrap_or(&0)];
                r.hash_ids.starts_with(&tail.hash_ids)
                    && tail.end() <= r.t + EPS
                    && tail.model == r.model
            })
            .max_by_key(|(ci, c)| (reqs[*c.members.last().unwrap_or(&0)].hash_ids.len(), *ci))
            .map(|(ci, _)| ci);
        match extend {
            Some(ci) => chains[ci].members.push(i),
            None => {
                let source = chains
                    .iter()
                    .filter_map(|c| {
                        let tail = *c.members.last()?;
                        let depth = lcp(&reqs[tail].hash_ids, &r.hash_ids);
                        (depth > 0).then_some((depth, tail))
                    })
                    // Ties go to the older chain.
                    .max_by_key(|&(depth, tail)| (depth, std::cmp::Reverse(tail)))
                    .map(|(_, tail)| tail);
                chains.push(Chain {
                    members: vec![i],
                    forked_from: source,
                });
                main.get_or_insert(chains.len() - 1);
            }
        }
    }
    // Phase 2: a fork whose source tail was never extended later is a seam (a compaction
    // continuation of the same agent), spliced back into its source chain.
    let mut ci = 1;
    while ci < chains.len() {
        let Some(src) = chains[ci].forked_from else {
            ci += 1;
            continue;
        };
        let Some(si) = chains
            .iter()
            .position(|c| c.members.contains(&src))
            .filter(|&si| si != ci)
        else {
            ci += 1;
            continue;
        };
        let first = chains[ci].members[0];
        let extended_later = chains[si].members.iter().any(|&m| m > src);
        let tail = reqs[src];
        let head = reqs[first];
        let share = lcp(&tail.hash_ids, &head.hash_ids) as f64 / tail.hash_ids.len().max(1) as f64;
        let far = head.t - tail.end() > SEAM_GAP_S;
        let seam = !extended_later
            && tail.model == head.model
            && tail.end() <= head.t + EPS
            && !(far && share < 0.5);
        if seam {
            let moved = chains.remove(ci);
            let si = if si > ci { si - 1 } else { si };
            chains[si].members.extend(moved.members);
            // Chains forked from the moved requests keep their sources (indices are stable).
            ci = 1;
            continue;
        }
        ci += 1;
    }
    let main = main.unwrap_or(0).min(chains.len().saturating_sub(1));
    if chains.is_empty() {
        chains.push(Chain {
            members: Vec::new(),
            forked_from: None,
        });
    }
    if main != 0 {
        chains.swap(0, main);
    }
    chains[0].members.extend(preamble);
    chains[0].members.extend(empty);
    for c in &mut chains {
        c.members
            .sort_by(|&a, &b| reqs[a].t.total_cmp(&reqs[b].t).then(a.cmp(&b)));
    }
    chains
}

/// Names the side chains (all but the first) of one split: their kind and running number.
fn classify(reqs: &[&Request], chains: &[Chain]) -> Vec<(StreamKind, String)> {
    let main = &chains[0];
    let main_model = main.members.first().map(|&m| reqs[m].model.as_str());
    let peak_in = main
        .members
        .iter()
        .map(|&m| reqs[m].input)
        .max()
        .unwrap_or(0);
    let aux_floor = AUX_MIN_IN.max(peak_in / 10);
    let span = |c: &Chain| {
        let s = c
            .members
            .iter()
            .map(|&m| reqs[m].t)
            .fold(f64::INFINITY, f64::min);
        let e = c.members.iter().map(|&m| reqs[m].end()).fold(0.0, f64::max);
        (s, e)
    };
    let is_aux = |c: &Chain| {
        let [only] = c.members[..] else {
            return false;
        };
        let r = reqs[only];
        Some(r.model.as_str()) != main_model
            || r.input < aux_floor
            || (r.output < 4000 && r.input >= AUX_MIN_IN && r.input > 20 * r.output)
    };
    // Worker groups: ≥3 non-aux chains forked from one request that overlap in time.
    let mut group_of: Vec<Option<(usize, usize)>> = vec![None; chains.len()];
    let mut groups = 0;
    let mut sources: Vec<usize> = chains[1..].iter().filter_map(|c| c.forked_from).collect();
    sources.sort_unstable();
    sources.dedup();
    for src in sources {
        let members: Vec<usize> = (1..chains.len())
            .filter(|&ci| chains[ci].forked_from == Some(src) && !is_aux(&chains[ci]))
            .collect();
        let overlapping: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&a| {
                members.iter().any(|&b| {
                    let (sa, ea) = span(&chains[a]);
                    let (sb, eb) = span(&chains[b]);
                    a != b && sa < eb && sb < ea
                })
            })
            .collect();
        if overlapping.len() >= 3 {
            for (m, &ci) in overlapping.iter().enumerate() {
                group_of[ci] = Some((groups, m));
            }
            groups += 1;
        }
    }
    let (mut aux, mut fa) = (0, 0);
    (1..chains.len())
        .map(|ci| {
            if let Some((g, m)) = group_of[ci] {
                (StreamKind::WorkerGroup, format!("wg:{g:03}_{m:03}"))
            } else if is_aux(&chains[ci]) {
                aux += 1;
                (StreamKind::Aux, format!("aux:{:03}", aux - 1))
            } else {
                fa += 1;
                (StreamKind::FlatAgent, format!("fa:{:03}", fa - 1))
            }
        })
        .collect()
}

/// One child stream before linkage: where its requests sat in the trace's list.
struct Child {
    stream: Stream,
    /// List index of the entry it came from (a subagent) or of its first request (a chain).
    list_index: usize,
    /// Recorded start and end.
    start: f64,
    end: f64,
    /// `Some(agent_id)`: a subagent's stream (or one of its sub-chains).
    agent: Option<String>,
}

fn stream(id: String, kind: StreamKind, turns: Vec<Request>, prefix: u64, scope: u32) -> Stream {
    Stream {
        id,
        kind,
        barriers: vec![Vec::new(); turns.len()],
        turns,
        prefix_tokens: prefix,
        scope,
        branch: None,
    }
}

/// The tree of `trace` (SPEC §1.1 steps 1–6).
pub fn derive(trace: &WekaTrace) -> Tree {
    // Top-level requests with their list index, in (t, index) order.
    let mut top: Vec<(usize, &Request)> = trace
        .entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Entry::Request(r) => Some((i, r)),
            Entry::Subagent(_) => None,
        })
        .collect();
    top.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let reqs: Vec<&Request> = top.iter().map(|(_, r)| *r).collect();
    let chains = split_chains(&reqs);
    let names = classify(&reqs, &chains);
    let prefix = trace.tool_tokens + trace.system_tokens;
    let root_members = &chains[0].members;
    let root = stream(
        trace.id.clone(),
        StreamKind::Root,
        root_members.iter().map(|&m| reqs[m].clone()).collect(),
        prefix,
        0,
    );
    // Root turns by list index, for the linkage.
    let root_list: Vec<usize> = root_members.iter().map(|&m| top[m].0).collect();
    let mut children: Vec<Child> = Vec::new();
    for (c, (kind, suffix)) in chains[1..].iter().zip(names) {
        let turns: Vec<Request> = c.members.iter().map(|&m| reqs[m].clone()).collect();
        let start = turns.iter().map(|r| r.t).fold(f64::INFINITY, f64::min);
        let end = turns.iter().map(Request::end).fold(0.0, f64::max);
        children.push(Child {
            stream: stream(format!("{}::{suffix}", trace.id), kind, turns, 0, 0),
            list_index: top[c.members[0]].0,
            start,
            end,
            agent: None,
        });
    }
    let mut scope = 0;
    for (i, e) in trace.entries.iter().enumerate() {
        let Entry::Subagent(s) = e else { continue };
        // A subagent nothing of the root precedes is dropped.
        if !root_list.iter().any(|&l| l < i) || s.requests.is_empty() {
            continue;
        }
        scope += 1;
        children.extend(subagent_streams(trace, i, s, scope));
    }
    link(trace, root, &root_list, children)
}

/// A subagent entry's streams: its main chain `::sa:{agent}` and its own side chains.
fn subagent_streams(trace: &WekaTrace, list_index: usize, s: &Subagent, scope: u32) -> Vec<Child> {
    let mut inner: Vec<&Request> = s.requests.iter().collect();
    inner.sort_by(|a, b| a.t.total_cmp(&b.t));
    let chains = split_chains(&inner);
    let names = classify(&inner, &chains);
    let end = match s.duration_ms {
        Some(ms) => s.t + ms as f64 / 1000.0,
        None if !inner.is_empty() => inner.iter().map(|r| r.end()).fold(0.0, f64::max),
        None => s.t,
    };
    let base = format!("{}::sa:{}", trace.id, s.agent_id);
    let mut out = Vec::new();
    for (ci, c) in chains.iter().enumerate() {
        let turns: Vec<Request> = c.members.iter().map(|&m| inner[m].clone()).collect();
        let (id, kind, prefix) = if ci == 0 {
            (
                base.clone(),
                StreamKind::Subagent,
                s.tool_tokens + s.system_tokens,
            )
        } else {
            let (kind, suffix) = names[ci - 1].clone();
            (format!("{base}:{suffix}"), kind, 0)
        };
        let start = turns.iter().map(|r| r.t).fold(f64::INFINITY, f64::min);
        out.push(Child {
            stream: stream(id, kind, turns, prefix, scope),
            list_index,
            start: if ci == 0 { s.t.min(start) } else { start },
            end,
            agent: Some(s.agent_id.clone()),
        });
    }
    out
}

/// Spawning and join turns, branches (SPEC §1.1 step 4) and barriers (step 6).
fn link(trace: &WekaTrace, root: Stream, root_list: &[usize], children: Vec<Child>) -> Tree {
    let mut tree = Tree {
        id: trace.id.clone(),
        start: StartSampling::ByTime,
        main_model: root
            .turns
            .first()
            .map(|r| r.model.clone())
            .unwrap_or_default(),
        streams: vec![root],
        branches: Vec::new(),
    };
    // (spawn, join, is_subagent) → branch.
    let mut keys: Vec<(u32, Option<u32>, bool)> = Vec::new();
    let mut flat_branches = 0;
    for child in children {
        let spawn = root_list
            .iter()
            .rposition(|&l| l < child.list_index)
            .unwrap_or(0) as u32;
        let root = &tree.streams[0];
        let join = root
            .turns
            .iter()
            .enumerate()
            .skip(spawn as usize + 1)
            .find(|(_, r)| r.t + EPS >= child.end)
            .map(|(k, _)| k as u32);
        let key = (spawn, join, child.agent.is_some());
        let b = match keys.iter().position(|k| *k == key) {
            Some(b) => b,
            None => {
                keys.push(key);
                let name = match &child.agent {
                    Some(agent) => format!("{}:spawn:{agent}", trace.id),
                    None => {
                        flat_branches += 1;
                        format!("{}:flatspawn:{}", trace.id, flat_branches - 1)
                    }
                };
                tree.branches.push(Branch {
                    name,
                    spawn_turn: spawn,
                    join_turn: join,
                    children: Vec::new(),
                    start: child.start,
                });
                tree.branches.len() - 1
            }
        };
        let s = tree.streams.len() as u32;
        let branch = &mut tree.branches[b];
        branch.children.push(s);
        branch.start = branch.start.min(child.start);
        let mut st = child.stream;
        st.branch = Some(b as u32);
        tree.streams.push(st);
    }
    barriers(&mut tree);
    tree
}

/// Interval barriers (SPEC §1.1 step 6): each turn waits for the latest request of every
/// other stream of its scope that started before it and ended by its start, less those
/// another such dependency follows.
fn barriers(tree: &mut Tree) {
    let n = tree.streams.len();
    for s in 0..n {
        for k in 0..tree.streams[s].turns.len() {
            let x = tree.streams[s].turns[k].t;
            let scope = tree.streams[s].scope;
            let frontier: Vec<(TurnRef, f64, f64)> = (0..n)
                .filter(|&o| o != s && tree.streams[o].scope == scope)
                .filter_map(|o| {
                    let turns = &tree.streams[o].turns;
                    turns
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.t < x && r.end() <= x)
                        .max_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)))
                        .map(|(j, r)| {
                            let at = TurnRef {
                                stream: o as u32,
                                turn: j as u32,
                            };
                            (at, r.t, r.end())
                        })
                })
                .collect();
            let deps: Vec<TurnRef> = frontier
                .iter()
                .filter(|(_, start, end)| {
                    !frontier
                        .iter()
                        .any(|(_, later, _)| start < later && end <= later)
                })
                .map(|(at, _, _)| *at)
                .collect();
            tree.streams[s].barriers[k] = deps;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::format::WekaTrace;

    const TRACE_A: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-a.json");
    const TRACE_C: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-c.json");

    fn req(t: f64, hash_ids: &[u64], input: u64, api: f64) -> String {
        format!(
            r#"{{"t":{t},"type":"n","model":"m","in":{input},"out":10,"hash_ids":{hash_ids:?},"api_time":{api}}}"#
        )
    }

    fn trace(id: &str, reqs: &[String]) -> Tree {
        let text = format!(
            r#"{{"id":"{id}","models":["m"],"block_size":64,"hash_id_scope":"local","requests":[{}]}}"#,
            reqs.join(",")
        );
        derive(&WekaTrace::parse(&text).unwrap())
    }

    fn ids(t: &Tree) -> Vec<&str> {
        t.streams.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn trace_a_is_a_root_and_one_joined_subagent() {
        let t = derive(&WekaTrace::parse(TRACE_A).unwrap());
        assert_eq!(ids(&t), ["trace-a", "trace-a::sa:agent_001"]);
        assert_eq!(t.streams[0].turns.len(), 3);
        assert_eq!(t.streams[1].kind, StreamKind::Subagent);
        assert_eq!(
            t.branches,
            [Branch {
                name: "trace-a:spawn:agent_001".into(),
                spawn_turn: 0,
                join_turn: Some(1),
                children: vec![1],
                start: 1.5,
            }]
        );
        // Different scopes: no barriers between root and subagent.
        assert!(t
            .streams
            .iter()
            .all(|s| s.barriers.iter().all(Vec::is_empty)));
        assert_eq!(t.time_bounds(), (0.0, 6.5));
        // SPEC §4: 0/3, child 1/2, child 2/4, 3/6, 6/7.
        assert_eq!(t.ideal_block_hits(), (12, 22));
        assert_eq!(
            t.ideal_hits_per_turn(),
            [vec![(0, 3), (3, 6), (6, 7)], vec![(1, 2), (2, 4)]]
        );
    }

    #[test]
    fn delays_are_end_to_start_gaps_or_think_times() {
        let a = derive(&WekaTrace::parse(TRACE_A).unwrap());
        let close = |got: Vec<f64>, want: &[f64]| {
            assert_eq!(got.len(), want.len());
            assert!(
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
                "{got:?}"
            );
        };
        // 4.0 - (0 + 1.0) and 6.5 - (4.0 + 1.2); the child's 2.8 - (1.5 + 0.8).
        close(a.streams[0].delays(false), &[0.0, 3.0, 1.3]);
        close(a.streams[1].delays(false), &[0.0, 0.5]);
        // TC4: trace-c's #1 waits its think time (2.0), not the gap (2.5).
        let c = derive(&WekaTrace::parse(TRACE_C).unwrap());
        close(c.streams[0].delays(false), &[0.0, 2.5]);
        close(c.streams[0].delays(true), &[0.0, 2.0]);
        let limits: Vec<u64> = a.streams[0].max_tokens().collect();
        assert_eq!(limits, [50, 60, 80]);
    }

    #[test]
    fn a_subagent_after_the_last_root_turn_is_background() {
        let t = derive(&WekaTrace::parse(TRACE_C).unwrap());
        assert_eq!(ids(&t), ["trace-c", "trace-c::sa:agent_bg"]);
        assert_eq!(t.branches[0].spawn_turn, 1);
        assert_eq!(t.branches[0].join_turn, None);
    }

    #[test]
    fn a_subagent_before_any_root_turn_is_dropped() {
        let text = TRACE_A.replacen(
            "\"requests\": [\n    {\"t\": 0.0",
            "\"requests\": [\n    {\"t\": 0.0, \"type\": \"subagent\", \"agent_id\": \"early\", \"requests\": [{\"t\": 0.0, \"type\": \"n\", \"model\": \"m\", \"in\": 10, \"out\": 1, \"hash_ids\": []}]},\n    {\"t\": 0.0",
            1,
        );
        let t = derive(&WekaTrace::parse(&text).unwrap());
        assert_eq!(ids(&t), ["trace-a", "trace-a::sa:agent_001"]);
    }

    #[test]
    fn the_spec_flat_split_example_gives_an_aux_chain_with_barriers() {
        let reqs = [
            req(0.0, &[1, 2], 150, 1.0),
            req(2.0, &[1, 2, 3], 250, 0.3),
            req(2.5, &[1, 9], 100, 0.2),
            req(4.0, &[1, 2, 3, 4], 300, 0.5),
        ];
        let t = trace("X", &reqs);
        assert_eq!(ids(&t), ["X", "X::aux:000"]);
        assert_eq!(t.streams[0].turns.len(), 3);
        assert_eq!(t.streams[1].kind, StreamKind::Aux);
        let b = &t.branches[0];
        assert_eq!((b.spawn_turn, b.join_turn), (1, Some(2)));
        assert_eq!(b.name, "X:flatspawn:0");
        // aux#0 waits on X#1; X#2 waits on aux#0.
        assert_eq!(t.streams[1].barriers[0], [TurnRef { stream: 0, turn: 1 }]);
        assert_eq!(t.streams[0].barriers[2], [TurnRef { stream: 1, turn: 0 }]);
        assert!(t.streams[0].barriers[1].is_empty());
    }

    #[test]
    fn without_a_later_extension_the_fork_is_a_seam() {
        let reqs = [
            req(0.0, &[1, 2], 150, 1.0),
            req(2.0, &[1, 2, 3], 250, 0.3),
            req(2.5, &[1, 9], 100, 0.2),
        ];
        let t = trace("X", &reqs);
        assert_eq!(ids(&t), ["X"]);
        assert_eq!(t.streams[0].turns.len(), 3);
    }

    #[test]
    fn three_overlapping_forks_of_one_request_are_a_worker_group() {
        let big = 20_000;
        // Three forks of #0 while it still runs, each extended later; the main chain goes on.
        let reqs = [
            req(0.0, &[1, 2], big, 1.0),
            req(0.5, &[1, 2, 10], big, 5.0),
            req(0.6, &[1, 2, 20], big, 5.0),
            req(0.7, &[1, 2, 30], big, 5.0),
            req(8.0, &[1, 2, 10, 11], big, 1.0),
            req(8.1, &[1, 2, 20, 21], big, 1.0),
            req(8.2, &[1, 2, 30, 31], big, 1.0),
            req(9.0, &[1, 2, 3], big, 1.0),
        ];
        let t = trace("W", &reqs);
        assert_eq!(
            ids(&t),
            ["W", "W::wg:000_000", "W::wg:000_001", "W::wg:000_002"]
        );
        assert_eq!(t.streams[0].turns.len(), 2);
        assert!(t.streams[1..]
            .iter()
            .all(|s| s.kind == StreamKind::WorkerGroup));
    }

    #[test]
    fn a_single_long_fork_is_a_flat_agent() {
        let big = 20_000;
        let reqs = [
            req(0.0, &[1, 2], big, 1.0),
            req(2.0, &[1, 2, 3], big, 1.0),
            req(2.5, &[1, 7], big, 0.5),
            req(3.5, &[1, 7, 8], big, 0.5),
            req(5.0, &[1, 2, 3, 4], big, 1.0),
        ];
        let t = trace("F", &reqs);
        assert_eq!(ids(&t), ["F", "F::fa:000"]);
        assert_eq!(t.streams[1].turns.len(), 2);
    }
}
