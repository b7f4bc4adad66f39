//! The replay's timing as data (SPEC §3): one [`TreeRun`] per live tree, a pure state machine
//! that says which turn of which stream goes next and when, from the times the previous
//! responses ended. The engine's lane driver asks it ([`TreeRun::step`]) and tells it what was
//! sent and when a response ended; nothing here reads a clock or touches a socket, so every
//! rule is tested on a simulated clock.
//!
//! - A stream's next turn is due its `delay` after the previous response ended
//!   (end-to-start, SPEC §1.1 step 5), and waits for its interval barriers (step 6).
//! - Children start when the spawning turn's response ends (`child_t0 - start` after it), or
//!   `child_t0 - parent_t` after the spawning turn was *sent* when the recorded spawn overlaps
//!   the parent (§3.5).
//! - A join turn fires at the later of its deadline and the end of its last child.
//! - Background children never gate anything but keep the tree alive: the tree is done when
//!   every stream is closed and nothing is in flight.
//! - A context overflow ends its stream (a root's children not yet spawned never start).
//! - The idle caps only pull pending timers earlier: per tree (`trace` cap, measured from the
//!   tree's last completion) and for the system (nothing in flight anywhere).
//!
//! Times are nanoseconds on the run's clock (`i64`: a warm-up's times are before profiling).

use super::streams::{Tree, TurnRef};
use crate::mix::{fnv64, mix64};

/// Nanoseconds.
pub type Ns = i64;

/// Seconds (a trace's times) as nanoseconds.
pub fn ns(s: f64) -> Ns {
    (s * 1e9).round() as Ns
}

/// How the children of one branch start.
#[derive(Debug, Clone, PartialEq)]
struct Spawn {
    children: Vec<u32>,
    /// The recorded spawn overlaps the spawning turn: the children start relative to its send.
    on_send: bool,
    /// Per child (aligned with `children`): its delay from the spawning turn's send
    /// (`on_send`) or response end.
    after: Vec<Ns>,
}

/// Children one turn of a stream starts together, in a tree without timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct UntimedLink {
    pub parent: u32,
    pub turn: u32,
    /// Started when the turn is sent, not when its response ends.
    pub on_send: bool,
    /// The parent's turn that waits for them (`None`: background).
    pub join: Option<u32>,
    pub children: Vec<u32>,
}

/// What a tree's schedule needs of the tree, derived once before the clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeTiming {
    /// Per stream, per turn: the recorded start.
    ts: Vec<Vec<Ns>>,
    /// Per stream, per turn: the idle gap before it (turn 0: 0).
    delay: Vec<Vec<Ns>>,
    barriers: Vec<Vec<Vec<TurnRef>>>,
    /// Per stream, per turn: the branches it spawns (a Weka tree's are the root's only).
    spawns: Vec<Vec<Vec<Spawn>>>,
    /// Per stream, per turn: the child streams it waits for (a join).
    joins: Vec<Vec<Vec<u32>>>,
    /// Per stream: the stream that starts it (`None`: the root).
    parent: Vec<Option<u32>>,
    /// Per stream: whether its branch started before a given time (`branch_start`) and by
    /// which root turn (`spawn_turn`); `None` for the root.
    branch_of: Vec<Option<(Ns, u32)>>,
    /// Recorded start of the earliest and latest request.
    bounds: (Ns, Ns),
}

impl TreeTiming {
    /// The timing of `tree`; `think_time_only`: `--use-think-time-only` delays.
    pub fn of(tree: &Tree, think_time_only: bool) -> TreeTiming {
        let ts = tree
            .streams
            .iter()
            .map(|s| s.turns.iter().map(|r| ns(r.t)).collect())
            .collect();
        let delay = tree
            .streams
            .iter()
            .map(|s| s.delays(think_time_only).into_iter().map(ns).collect())
            .collect();
        let mut spawns: Vec<Vec<Vec<Spawn>>> = tree
            .streams
            .iter()
            .map(|s| vec![Vec::new(); s.turns.len()])
            .collect();
        let mut joins: Vec<Vec<Vec<u32>>> = tree
            .streams
            .iter()
            .map(|s| vec![Vec::new(); s.turns.len()])
            .collect();
        let mut parents = vec![None; tree.streams.len()];
        let mut branch_of = vec![None; tree.streams.len()];
        for b in &tree.branches {
            let parent = &tree.streams[0].turns[b.spawn_turn as usize];
            let on_send = b.start < parent.end();
            let after = b
                .children
                .iter()
                .map(|&c| {
                    let t0 = tree.streams[c as usize]
                        .turns
                        .first()
                        .map_or(b.start, |r| r.t);
                    ns((t0 - if on_send { parent.t } else { b.start }).max(0.0))
                })
                .collect();
            spawns[0][b.spawn_turn as usize].push(Spawn {
                children: b.children.clone(),
                on_send,
                after,
            });
            if let Some(j) = b.join_turn {
                joins[0][j as usize].extend(&b.children);
            }
            for &c in &b.children {
                branch_of[c as usize] = Some((ns(b.start), b.spawn_turn));
                parents[c as usize] = Some(0);
            }
        }
        let (lo, hi) = tree.time_bounds();
        TreeTiming {
            ts,
            delay,
            barriers: tree.streams.iter().map(|s| s.barriers.clone()).collect(),
            spawns,
            joins,
            parent: parents,
            branch_of,
            bounds: if lo.is_finite() {
                (ns(lo), ns(hi))
            } else {
                (0, 0)
            },
        }
    }

    /// The timing of a tree without timestamps (`dag_jsonl`): per stream its idle delays
    /// (turn 0's is not used), and its links. Every recorded time is 0.
    pub fn untimed(delays: Vec<Vec<Ns>>, links: &[UntimedLink], root_turn: &[u32]) -> TreeTiming {
        let n = delays.len();
        let mut spawns: Vec<Vec<Vec<Spawn>>> =
            delays.iter().map(|d| vec![Vec::new(); d.len()]).collect();
        let mut joins: Vec<Vec<Vec<u32>>> =
            delays.iter().map(|d| vec![Vec::new(); d.len()]).collect();
        let mut parent = vec![None; n];
        let mut branch_of = vec![None; n];
        for l in links {
            let (p, t) = (l.parent as usize, l.turn as usize);
            // A child's turn-0 `delay` counts from its start.
            let after = l
                .children
                .iter()
                .map(|&c| delays[c as usize].first().copied().unwrap_or(0))
                .collect();
            spawns[p][t].push(Spawn {
                children: l.children.clone(),
                on_send: l.on_send,
                after,
            });
            if let Some(j) = l.join {
                joins[p][j as usize].extend(&l.children);
            }
            for &c in &l.children {
                parent[c as usize] = Some(l.parent);
                branch_of[c as usize] = Some((0, root_turn[c as usize]));
            }
        }
        TreeTiming {
            ts: delays.iter().map(|d| vec![0; d.len()]).collect(),
            delay: delays,
            barriers: spawns.iter().map(|t| vec![Vec::new(); t.len()]).collect(),
            spawns,
            joins,
            parent,
            branch_of,
            bounds: (0, 0),
        }
    }

    /// The root turn a lane primes when it starts this tree by turn (SPEC §3.2, timestamp-less
    /// traces): `k` drawn between `int(min·n)` and `int(max·n)` of the root's `n` turns (from
    /// `seed`, the tree id and the lane; `min == max` draws nothing), at most `n - 2`; profiling
    /// resumes at `k + 1`. `None`: the tree starts at turn 0 (fewer than two root turns).
    pub fn start_turn(
        &self,
        (min, max): (f64, f64),
        seed: u64,
        tree_id: &str,
        lane: u32,
    ) -> Option<u32> {
        let n = self.ts[0].len();
        if n < 2 {
            return None;
        }
        let lo = (min * n as f64) as u64;
        let hi = ((max * n as f64) as u64).max(lo);
        let k = match hi > lo {
            true => {
                let bits = mix64(
                    mix64(seed ^ 0x0074_7572_6e2a)
                        ^ fnv64(tree_id.as_bytes())
                        ^ mix64(u64::from(lane) + 1),
                );
                lo + bits % (hi - lo + 1)
            }
            false => lo,
        };
        Some(k.min(n as u64 - 2) as u32)
    }

    /// The sampled start point t* of this tree on `lane`: uniform by time between `min` and
    /// `max` of its span, from `seed`, the trace id and the lane (SPEC §3.2; the same
    /// invariants as AIPerf's draw, not its bytes). `min == max` draws nothing.
    pub fn start_point(&self, (min, max): (f64, f64), seed: u64, trace_id: &str, lane: u32) -> Ns {
        let (s, e) = self.bounds;
        let span = (e - s) as f64;
        let u = if max > min {
            let bits = mix64(
                mix64(seed ^ 0x7374_6172_742a)
                    ^ fnv64(trace_id.as_bytes())
                    ^ mix64(u64::from(lane) + 1),
            );
            min + (max - min) * ((bits >> 11) as f64 / (1u64 << 53) as f64)
        } else {
            min
        };
        s + (u * span).round() as Ns
    }

    /// The recorded start of the root's turn 0 (a tree drawn after the start point counts its
    /// profiling offsets from here).
    pub fn start_of_root(&self) -> Ns {
        self.ts[0].first().copied().unwrap_or(0)
    }

    /// Requests of every stream.
    pub fn requests(&self) -> usize {
        self.ts.iter().map(Vec::len).sum()
    }
}

/// A stream's place in its tree's replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its branch has not been spawned yet.
    NotStarted,
    /// Its next turn is due at this time (and then waits for its gates).
    Due(Ns),
    InFlight,
    /// Nothing more to send.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamRun {
    state: State,
    /// The next turn to send (the one in flight while `InFlight`).
    next: u32,
    /// Turns whose response ended (or that precede a mid-trace start).
    ended: u32,
}

/// What a tree wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send this turn now.
    Send(TurnRef),
    /// Nothing is due before this time.
    WaitUntil(Ns),
    /// Only a response can move it on.
    AwaitResponse,
    /// Every stream is closed and nothing is in flight: the lane takes the next tree.
    Done,
}

/// The idle caps in force at a step (SPEC §3.5): both only pull pending timers earlier.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IdleCaps {
    /// `--agentic-trace-idle-cap`: a tree with nothing in flight this long (from its last
    /// completion) fires its earliest timer.
    pub tree: Option<Ns>,
    /// The system cap and since when nothing has been in flight anywhere (when so).
    pub system: Option<(Ns, Ns)>,
}

/// How a response ended, as the schedule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Completed or failed: the stream goes on.
    Answered,
    /// A context overflow: the stream ends (SPEC §3.5).
    Overflow,
    /// Cut by the run's stop: the stream ends.
    Cancelled,
}

/// A turn to prime before profiling (SPEC §3.3): sent with its full history and one output
/// token, `lead` before the tree's t*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Primer {
    pub at: TurnRef,
    pub lead: Ns,
}

/// One live tree's replay state.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRun {
    streams: Vec<StreamRun>,
    in_flight: u32,
    /// The last completion (or the start): the trace idle cap counts from here.
    idle_from: Ns,
    /// Cache-pressure warm-up: every idle delay is zero (joins still wait for children).
    pub zero_delays: bool,
}

impl TreeRun {
    /// The tree from its turn 0, due at `at`.
    pub fn fresh(timing: &TreeTiming, at: Ns) -> TreeRun {
        let mut streams = vec![
            StreamRun {
                state: State::NotStarted,
                next: 0,
                ended: 0,
            };
            timing.ts.len()
        ];
        streams[0].state = if timing.ts[0].is_empty() {
            State::Closed
        } else {
            State::Due(at)
        };
        let mut run = TreeRun {
            streams,
            in_flight: 0,
            idle_from: at,
            zero_delays: false,
        };
        run.close_orphans(timing);
        run
    }

    /// The tree as it stands at `t_star` (SPEC §3.2): each stream's next turn is its first at
    /// or after t*, due at its offset `ts - t_star` (a root waiting for a join: that is its
    /// deadline); streams whose turns all precede t* are closed, children whose branch has not
    /// started wait for their spawning turn. Also the primers: for every live stream past
    /// its turn 0, the turn before, `lead = t* - ts`.
    pub fn at_start_point(timing: &TreeTiming, t_star: Ns) -> (TreeRun, Vec<Primer>) {
        let mut run = TreeRun::fresh(timing, 0);
        let mut primers = Vec::new();
        let root_next = first_at_or_after(&timing.ts[0], t_star);
        for (s, ts) in timing.ts.iter().enumerate() {
            let next = first_at_or_after(ts, t_star);
            let started = match timing.branch_of[s] {
                None => true,
                Some((start, spawn_turn)) => t_star >= start || root_next > spawn_turn,
            };
            let st = &mut run.streams[s];
            st.next = next;
            st.ended = next;
            st.state = if !started {
                State::NotStarted
            } else if (next as usize) < ts.len() {
                if next > 0 {
                    primers.push(Primer {
                        at: TurnRef {
                            stream: s as u32,
                            turn: next - 1,
                        },
                        lead: t_star - ts[next as usize - 1],
                    });
                }
                State::Due(ts[next as usize] - t_star)
            } else {
                State::Closed
            };
        }
        run.idle_from = 0;
        run.close_orphans(timing);
        (run, primers)
    }

    /// The tree resumed at root turn `k + 1` after priming turn `k` (SPEC §3.2, by turn): the
    /// root's next turn is due at 0; every child a root turn up to `k` would have started is
    /// over (the history stands for what came before), later ones wait for their turn.
    pub fn at_turn(timing: &TreeTiming, k: u32) -> (TreeRun, Vec<Primer>) {
        let mut run = TreeRun::fresh(timing, 0);
        let root = &mut run.streams[0];
        root.next = k + 1;
        root.ended = k + 1;
        root.state = match (k as usize + 1) < timing.ts[0].len() {
            true => State::Due(0),
            false => State::Closed,
        };
        for (s, b) in timing.branch_of.iter().enumerate() {
            if b.is_some_and(|(_, turn)| turn <= k) {
                run.streams[s].state = State::Closed;
            }
        }
        run.idle_from = 0;
        run.close_orphans(timing);
        let primer = Primer {
            at: TurnRef { stream: 0, turn: k },
            lead: 0,
        };
        (run, vec![primer])
    }

    /// Moves every pending timer by `by` (profiling start: `- min(offsets)`; the idle caps).
    pub fn shift(&mut self, by: Ns) {
        for s in &mut self.streams {
            if let State::Due(t) = &mut s.state {
                *t += by;
            }
        }
        self.idle_from += by;
    }

    /// Every pending timer at `at` (the warm-up continues the trees without their delays).
    pub fn restart_timers(&mut self, at: Ns) {
        for s in &mut self.streams {
            if let State::Due(t) = &mut s.state {
                *t = at;
            }
        }
    }

    /// The earliest pending timer.
    pub fn earliest_due(&self) -> Option<Ns> {
        self.streams
            .iter()
            .filter_map(|s| match s.state {
                State::Due(t) => Some(t),
                _ => None,
            })
            .min()
    }

    /// After the warm-up: every pending turn due at its recorded offset from `t_ref` (the
    /// tree's t*, or its turn-0 time when the warm-up recycled it), as SPEC §3.3 hands live
    /// streams to profiling.
    pub fn rebase(&mut self, timing: &TreeTiming, t_ref: Ns) {
        for (s, st) in self.streams.iter_mut().enumerate() {
            if let State::Due(t) = &mut st.state {
                *t = timing.ts[s][st.next as usize] - t_ref;
            }
        }
        self.zero_delays = false;
        self.idle_from = self.earliest_due().unwrap_or(0).min(0);
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Turns that were due (or waiting for a gate) and not sent: what a stop leaves unsent.
    pub fn pending(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| matches!(s.state, State::Due(_)))
            .count()
    }

    fn gates_open(&self, timing: &TreeTiming, s: usize) -> bool {
        let st = &self.streams[s];
        let k = st.next as usize;
        let done = |o: u32, turn: u32| {
            let other = &self.streams[o as usize];
            other.ended > turn || other.state == State::Closed
        };
        let joined = &timing.joins[s][k];
        if !joined
            .iter()
            .all(|&c| self.streams[c as usize].state == State::Closed)
        {
            return false;
        }
        timing.barriers[s][k].iter().all(|d| done(d.stream, d.turn))
    }

    /// What to do at `now`.
    pub fn step(&mut self, timing: &TreeTiming, now: Ns, caps: IdleCaps) -> Step {
        if self.in_flight == 0 {
            self.apply_caps(now, caps);
        }
        let mut earliest: Option<Ns> = None;
        let mut gated: Option<(Ns, usize)> = None;
        for s in 0..self.streams.len() {
            let State::Due(due) = self.streams[s].state else {
                continue;
            };
            if !self.gates_open(timing, s) {
                if gated.is_none_or(|(t, _)| due < t) {
                    gated = Some((due, s));
                }
                continue;
            }
            if due <= now {
                return Step::Send(self.turn_of(s));
            }
            earliest = Some(earliest.map_or(due, |e: Ns| e.min(due)));
        }
        if self.in_flight > 0 {
            return earliest.map_or(Step::AwaitResponse, Step::WaitUntil);
        }
        match (earliest, gated) {
            (Some(t), _) => Step::WaitUntil(self.capped_wake(t, caps)),
            // Nothing in flight, nothing timed, a gate closed: a barrier on a request that
            // will never be sent (its stream ended early). Released rather than stuck.
            (None, Some((due, s))) if due <= now => Step::Send(self.turn_of(s)),
            (None, Some((due, _))) => Step::WaitUntil(self.capped_wake(due, caps)),
            (None, None) => Step::Done,
        }
    }

    /// When to look again for a timer at `t`: no later than a cap could fire.
    fn capped_wake(&self, t: Ns, caps: IdleCaps) -> Ns {
        let mut wake = t;
        if let Some(c) = caps.tree {
            wake = wake.min(self.idle_from + c);
        }
        if let Some((c, since)) = caps.system {
            wake = wake.min(since + c);
        }
        wake
    }

    /// With nothing in flight: a cap whose time has come pulls every pending timer earlier
    /// so the earliest fires at the cap.
    fn apply_caps(&mut self, now: Ns, caps: IdleCaps) {
        let Some(earliest) = self.earliest_due() else {
            return;
        };
        let limits = [
            caps.tree.map(|c| self.idle_from + c),
            caps.system.map(|(c, since)| since + c),
        ];
        for limit in limits.into_iter().flatten() {
            let earliest = self.earliest_due().unwrap_or(earliest);
            if now >= limit && earliest > limit {
                self.shift(limit - earliest);
                // `shift` moved the idle mark too; it stays where it was.
                self.idle_from -= limit - earliest;
            }
        }
    }

    fn turn_of(&self, s: usize) -> TurnRef {
        TurnRef {
            stream: s as u32,
            turn: self.streams[s].next,
        }
    }

    /// `at` was sent at `now`: children of an overlapping spawn are scheduled from here.
    pub fn sent(&mut self, timing: &TreeTiming, at: TurnRef, now: Ns) {
        let s = at.stream as usize;
        self.streams[s].state = State::InFlight;
        self.in_flight += 1;
        self.spawn(timing, at, now, true);
    }

    /// The response to `at` ended at `now`, as `how`.
    pub fn ended(&mut self, timing: &TreeTiming, at: TurnRef, now: Ns, how: Ended) {
        let s = at.stream as usize;
        self.in_flight = self.in_flight.saturating_sub(1);
        self.idle_from = now;
        let st = &mut self.streams[s];
        st.ended = st.ended.max(at.turn + 1);
        st.next = at.turn + 1;
        let last = st.next as usize >= timing.ts[s].len();
        st.state = match how {
            Ended::Answered if !last => {
                let d = if self.zero_delays {
                    0
                } else {
                    timing.delay[s][st.next as usize]
                };
                State::Due(now + d)
            }
            _ => State::Closed,
        };
        if how == Ended::Answered {
            self.spawn(timing, at, now, false);
        }
        self.close_orphans(timing);
    }

    /// Starts the branches turn `at` spawns that start on its send (`on_send`) or on its end.
    fn spawn(&mut self, timing: &TreeTiming, at: TurnRef, now: Ns, on_send: bool) {
        for b in &timing.spawns[at.stream as usize][at.turn as usize] {
            if b.on_send != on_send {
                continue;
            }
            for (&c, &after) in b.children.iter().zip(&b.after) {
                let st = &mut self.streams[c as usize];
                if st.state == State::NotStarted {
                    let after = if self.zero_delays { 0 } else { after };
                    st.state = if timing.ts[c as usize].is_empty() {
                        State::Closed
                    } else {
                        State::Due(now + after)
                    };
                }
            }
        }
    }

    /// A closed stream spawns nothing more: its children not started never will (parents
    /// come before their children, so one pass closes every generation).
    fn close_orphans(&mut self, timing: &TreeTiming) {
        for s in 1..self.streams.len() {
            let orphan =
                timing.parent[s].is_some_and(|p| self.streams[p as usize].state == State::Closed);
            if orphan && self.streams[s].state == State::NotStarted {
                self.streams[s].state = State::Closed;
            }
        }
    }
}

fn first_at_or_after(ts: &[Ns], t: Ns) -> u32 {
    ts.partition_point(|&x| x < t) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::format::WekaTrace;
    use crate::datasets::agentic::streams::derive;

    const TRACE_A: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-a.json");
    const TRACE_B: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-b.json");
    const TRACE_C: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-c.json");

    fn tree(text: &str) -> Tree {
        derive(&WekaTrace::parse(text).unwrap())
    }

    fn ms(t: Ns) -> i64 {
        t / 1_000_000
    }

    /// One lane replaying `trees` in turn on a simulated clock where every response takes
    /// `latency(stream, turn)`; returns `(ms, tree index, stream, turn)` of every send until
    /// `until_ms`. `overflow`: the (tree, stream, turn) answered with a context overflow.
    fn simulate(
        trees: &[&Tree],
        start: TreeRun,
        latency: impl Fn(usize, TurnRef) -> Ns,
        caps: IdleCaps,
        until_ms: i64,
        overflow: Option<(usize, TurnRef)>,
    ) -> Vec<(i64, usize, u32, u32)> {
        let timings: Vec<TreeTiming> = trees.iter().map(|t| TreeTiming::of(t, false)).collect();
        let mut which = 0;
        let mut run = start;
        let mut now: Ns = 0;
        let mut flight: Vec<(Ns, TurnRef)> = Vec::new();
        let mut sent = Vec::new();
        while ms(now) <= until_ms {
            let timing = &timings[which % trees.len()];
            match run.step(timing, now, caps) {
                Step::Send(at) => {
                    sent.push((ms(now), which, at.stream, at.turn));
                    run.sent(timing, at, now);
                    flight.push((now + latency(which % trees.len(), at), at));
                }
                Step::Done => {
                    which += 1;
                    run = TreeRun::fresh(&timings[which % trees.len()], now);
                }
                step => {
                    let wake = match step {
                        Step::WaitUntil(t) => Some(t),
                        _ => None,
                    };
                    let next_end = flight.iter().map(|f| f.0).min();
                    let t = match (wake, next_end) {
                        (Some(a), Some(b)) => a.min(b),
                        (a, b) => a.or(b).expect("something to wait for"),
                    };
                    now = now.max(t);
                    if let Some(i) = flight.iter().position(|f| f.0 <= now) {
                        let (_, at) = flight.remove(i);
                        let how = if overflow == Some((which % trees.len(), at)) {
                            Ended::Overflow
                        } else {
                            Ended::Answered
                        };
                        run.ended(timing, at, now, how);
                    }
                }
            }
        }
        sent
    }

    const HALF: Ns = 500_000_000;

    #[test]
    fn tc1_the_subagent_starts_on_return_and_the_root_joins_at_its_deadline() {
        let a = tree(TRACE_A);
        let t = TreeTiming::of(&a, false);
        let sent = simulate(
            &[&a],
            TreeRun::fresh(&t, 0),
            |_, _| HALF,
            IdleCaps::default(),
            5800,
            None,
        );
        assert_eq!(
            sent,
            [
                (0, 0, 0, 0),
                (500, 0, 1, 0),
                (1500, 0, 1, 1),
                (3500, 0, 0, 1),
                (5300, 0, 0, 2),
                (5800, 1, 0, 0),
            ]
        );
    }

    #[test]
    fn tc1b_a_slow_child_holds_the_join_past_its_deadline() {
        let a = tree(TRACE_A);
        let t = TreeTiming::of(&a, false);
        let sent = simulate(
            &[&a],
            TreeRun::fresh(&t, 0),
            |_, _| 4 * HALF,
            IdleCaps::default(),
            11800,
            None,
        );
        let times: Vec<i64> = sent.iter().map(|s| s.0).collect();
        assert_eq!(times, [0, 2000, 4500, 6500, 9800, 11800]);
    }

    #[test]
    fn tc2_an_overlapping_subagent_starts_from_the_parents_send() {
        let text = TRACE_A.replacen("\"api_time\": 1.0", "\"api_time\": 2.0", 1);
        let a = tree(&text);
        let t = TreeTiming::of(&a, false);
        let sent = simulate(
            &[&a],
            TreeRun::fresh(&t, 0),
            |_, _| HALF,
            IdleCaps::default(),
            4800,
            None,
        );
        assert_eq!(
            sent,
            [
                (0, 0, 0, 0),
                (1500, 0, 1, 0),
                (2500, 0, 1, 1),
                (3000, 0, 0, 1),
                (4800, 0, 0, 2),
            ]
        );
    }

    #[test]
    fn tc3_start_points_give_primers_and_offsets() {
        let (a, b) = (tree(TRACE_A), tree(TRACE_B));
        let (ta, tb) = (TreeTiming::of(&a, false), TreeTiming::of(&b, false));
        let star_a = ta.start_point((0.4, 0.4), 1, "trace-a", 0);
        let star_b = tb.start_point((0.4, 0.4), 1, "trace-b", 1);
        assert_eq!((ms(star_a), ms(star_b)), (2600, 3200));
        let (run_a, primers_a) = TreeRun::at_start_point(&ta, star_a);
        let (run_b, primers_b) = TreeRun::at_start_point(&tb, star_b);
        let leads = |p: &[Primer]| -> Vec<(u32, u32, i64)> {
            p.iter()
                .map(|p| (p.at.stream, p.at.turn, ms(p.lead)))
                .collect()
        };
        assert_eq!(leads(&primers_a), [(0, 0, 2600), (1, 0, 1100)]);
        assert_eq!(leads(&primers_b), [(0, 0, 3200)]);
        // Child next #1 at 200 ms, the root's join deadline at 1400, trace-b#1 at 1800.
        assert_eq!(run_a.earliest_due().map(ms), Some(200));
        assert_eq!(run_b.earliest_due().map(ms), Some(1800));
        let min = run_a
            .earliest_due()
            .unwrap()
            .min(run_b.earliest_due().unwrap());
        let (mut run_a, mut run_b) = (run_a, run_b);
        run_a.shift(-min);
        run_b.shift(-min);
        // Lane 0: sa#1 @0, trace-a#1 @1200 (deadline; the child ended @500), #2 @3000,
        // then trace-c#0 @3500.
        let c = tree(TRACE_C);
        let lane0 = simulate(
            &[&a, &c],
            run_a,
            |_, _| HALF,
            IdleCaps::default(),
            3500,
            None,
        );
        let lane0: Vec<(i64, usize, u32, u32)> = lane0;
        assert_eq!(
            lane0,
            [
                (0, 0, 1, 1),
                (1200, 0, 0, 1),
                (3000, 0, 0, 2),
                (3500, 1, 0, 0)
            ]
        );
        let lane1 = simulate(&[&b], run_b, |_, _| HALF, IdleCaps::default(), 3600, None);
        assert_eq!(lane1[..2], [(1600, 0, 0, 1), (3600, 0, 0, 2)]);
    }

    #[test]
    fn a_background_child_keeps_the_tree_until_it_ends() {
        // trace-c: #1 @2.5 after #0's end; its background child starts on #1's return and
        // the lane frees only when the child ended.
        let c = tree(TRACE_C);
        let a = tree(TRACE_A);
        let t = TreeTiming::of(&c, false);
        let sent = simulate(
            &[&c, &a],
            TreeRun::fresh(&t, 0),
            |_, _| HALF,
            IdleCaps::default(),
            4000,
            None,
        );
        assert_eq!(
            sent,
            [
                (0, 0, 0, 0),
                (3000, 0, 0, 1),
                (3500, 0, 1, 0),
                (4000, 1, 0, 0)
            ]
        );
    }

    fn gap_trace() -> Tree {
        tree(
            r#"{"id":"g","models":["m"],"block_size":64,"hash_id_scope":"local","requests":[
            {"t":0,"type":"n","model":"m","in":64,"out":1,"hash_ids":[1],"api_time":1},
            {"t":61,"type":"n","model":"m","in":128,"out":1,"hash_ids":[1,2],"api_time":1}]}"#,
        )
    }

    #[test]
    fn tc5_idle_caps_pull_a_long_gap_in() {
        let g = gap_trace();
        let t = TreeTiming::of(&g, false);
        let second = |caps: IdleCaps| {
            let sent = simulate(
                &[&g],
                TreeRun::fresh(&t, 0),
                |_, _| HALF,
                caps,
                70_000,
                None,
            );
            sent[1].0
        };
        assert_eq!(second(IdleCaps::default()), 60_500);
        let s30 = 30_000_000_000;
        assert_eq!(
            second(IdleCaps {
                tree: Some(s30),
                system: None
            }),
            30_500
        );
        // The system went idle when #0 ended (500 ms): the cap of 10 s fires @10.5 s.
        assert_eq!(
            second(IdleCaps {
                tree: None,
                system: Some((10_000_000_000, HALF))
            }),
            10_500
        );
    }

    #[test]
    fn tc6_a_flat_chain_waits_behind_its_barrier() {
        let x = tree(
            r#"{"id":"X","models":["m"],"block_size":64,"hash_id_scope":"local","requests":[
            {"t":0,"type":"n","model":"m","in":150,"out":10,"hash_ids":[1,2],"api_time":1.0},
            {"t":2,"type":"n","model":"m","in":250,"out":10,"hash_ids":[1,2,3],"api_time":0.3},
            {"t":2.5,"type":"n","model":"m","in":100,"out":10,"hash_ids":[1,9],"api_time":0.2},
            {"t":4,"type":"n","model":"m","in":300,"out":10,"hash_ids":[1,2,3,4],"api_time":0.5}]}"#,
        );
        let t = TreeTiming::of(&x, false);
        let sent = simulate(
            &[&x],
            TreeRun::fresh(&t, 0),
            |_, _| HALF,
            IdleCaps::default(),
            3700,
            None,
        );
        assert_eq!(
            sent,
            [
                (0, 0, 0, 0),
                (1500, 0, 0, 1),
                (2000, 0, 1, 0),
                (3700, 0, 0, 2)
            ]
        );
        // A slow aux holds root#2 behind the barrier until it ends.
        let slow = simulate(
            &[&x],
            TreeRun::fresh(&t, 0),
            |_, at| if at.stream == 1 { 4 * HALF } else { HALF },
            IdleCaps::default(),
            4000,
            None,
        );
        assert_eq!(slow[3], (4000, 0, 0, 2));
    }

    #[test]
    fn tc7_an_overflow_ends_its_stream_and_the_tree_recycles() {
        let b = tree(TRACE_B);
        let t = TreeTiming::of(&b, false);
        let overflow = Some((0, TurnRef { stream: 0, turn: 1 }));
        let sent = simulate(
            &[&b],
            TreeRun::fresh(&t, 0),
            |_, _| HALF,
            IdleCaps::default(),
            4000,
            overflow,
        );
        // #1 @ 0.5 + delay; its overflow @ +0.5 ends the tree: turn 0 again at once.
        let (at1, at0) = (sent[1].0, sent[2].0);
        assert_eq!((sent[1].3, sent[2].1, sent[2].3), (1, 1, 0));
        assert_eq!(at0, at1 + 500);
    }

    #[test]
    fn zero_delays_send_the_next_turn_on_return() {
        let a = tree(TRACE_A);
        let t = TreeTiming::of(&a, false);
        let mut run = TreeRun::fresh(&t, 0);
        run.zero_delays = true;
        let sent = simulate(&[&a], run, |_, _| HALF, IdleCaps::default(), 2000, None);
        assert_eq!(
            sent[..4],
            [
                (0, 0, 0, 0),
                (500, 0, 1, 0),
                (1000, 0, 1, 1),
                (1500, 0, 0, 1)
            ]
        );
    }

    /// Root r (3 turns) spawns c at turn 0, joined at 2; c (2 turns, 1 s apart) spawns g in
    /// the background from its turn 1; every delay 0 but c's.
    fn nested() -> TreeTiming {
        let links = [
            UntimedLink {
                parent: 0,
                turn: 0,
                on_send: false,
                join: Some(2),
                children: vec![1],
            },
            UntimedLink {
                parent: 1,
                turn: 1,
                on_send: false,
                join: None,
                children: vec![2],
            },
        ];
        let delays = vec![vec![0, 0, 0], vec![0, 1_000_000_000], vec![0]];
        TreeTiming::untimed(delays, &links, &[0, 0, 0])
    }

    /// Sends of one tree on a simulated clock, `(ms, stream, turn)`.
    fn sends(t: &TreeTiming, mut run: TreeRun) -> Vec<(i64, u32, u32)> {
        let (mut now, mut flight, mut out) = (0, Vec::<(Ns, TurnRef)>::new(), Vec::new());
        for _ in 0..100 {
            match run.step(t, now, IdleCaps::default()) {
                Step::Send(at) => {
                    out.push((ms(now), at.stream, at.turn));
                    run.sent(t, at, now);
                    flight.push((now + HALF, at));
                }
                Step::Done => break,
                Step::WaitUntil(w) => now = w.min(flight.iter().map(|f| f.0).min().unwrap_or(w)),
                Step::AwaitResponse => now = flight.iter().map(|f| f.0).min().unwrap(),
            }
            if let Some(i) = flight.iter().position(|f| f.0 <= now) {
                let (_, at) = flight.remove(i);
                run.ended(t, at, now, Ended::Answered);
            }
        }
        out
    }

    #[test]
    fn untimed_links_spawn_from_any_stream_and_joins_wait_for_their_children() {
        let t = nested();
        assert_eq!(
            sends(&t, TreeRun::fresh(&t, 0)),
            // c#1 1 s after c#0 ended; root#2 waits for c; g starts on c#1's answer.
            [
                (0, 0, 0),
                (500, 0, 1),
                (500, 1, 0),
                (2000, 1, 1),
                (2500, 0, 2),
                (2500, 2, 0)
            ]
        );
    }

    #[test]
    fn a_start_by_turn_primes_turn_k_and_closes_what_came_before() {
        let t = nested();
        // n = 3: k in int(0.0·3)..=int(1.0·3), capped at 1.
        assert_eq!(t.start_turn((0.0, 0.0), 1, "r", 0), Some(0));
        assert_eq!(t.start_turn((1.0, 1.0), 1, "r", 0), Some(1));
        assert!((0..20).all(|lane| t.start_turn((0.0, 1.0), 1, "r", lane) <= Some(1)));
        let (run, primers) = TreeRun::at_turn(&t, 0);
        assert_eq!(
            primers,
            [Primer {
                at: TurnRef { stream: 0, turn: 0 },
                lead: 0
            }]
        );
        // c (spawned by root#0) and its child g are over; root#2's join is open.
        assert_eq!(sends(&t, run), [(0, 0, 1), (500, 0, 2)]);
        let one = TreeTiming::untimed(vec![vec![0]], &[], &[0]);
        assert_eq!(one.start_turn((0.5, 0.5), 1, "x", 0), None);
    }

    #[test]
    fn start_points_are_deterministic_and_within_the_ratio() {
        let a = tree(TRACE_A);
        let t = TreeTiming::of(&a, false);
        let draws: Vec<Ns> = (0..50)
            .map(|lane| t.start_point((0.25, 0.75), 42, "trace-a", lane))
            .collect();
        assert!(draws
            .iter()
            .all(|&d| (ns(0.25 * 6.5)..=ns(0.75 * 6.5)).contains(&d)));
        assert_eq!(draws[3], t.start_point((0.25, 0.75), 42, "trace-a", 3));
        assert!(draws.iter().any(|&d| d != draws[0]), "lanes draw apart");
        assert_eq!(t.start_point((0.0, 0.0), 42, "trace-a", 9), 0);
    }
}
