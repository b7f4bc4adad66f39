//! `vllm-bench synthesize agentic`: a synthetic agentic-coding corpus in the Weka trace format,
//! its sessions drawn from the distributions of `aiperf synthesize agentic-code`'s model
//! defaults (SPEC §5), deterministic per seed. For tests, docs and trying the replay without
//! the Hugging Face corpus.
//!
//! What follows §5 (its "model defaults" column):
//! - every draw is lognormal with `mu = ln(median)`, `sigma = sqrt(2 ln(mean/median))`, an
//!   out-of-range draw redrawn up to 100 times, then clipped;
//! - turn 0's context is the L1 prefix (32,000 tokens), the L1.5 prefix (20,000) and a
//!   session part (L2: mean 10,000, median 5,000, at least 1), capped at the prompt limit;
//! - each later turn: a delay, agentic (p 0.7: mean 2,500 ms, median 1,800) or human (mean
//!   40,000, median 25,000), times `max(0.2, 1 - 0.8 prev_in/max_prompt)`; new tokens
//!   (mean 3,500, median 1,800) ≥ 1; `in = prev_in + prev_out + new`, and the session
//!   retires when `in` reaches the prompt limit (200,000, `--max-isl`); else it ends with
//!   probability `0.02 (1 + in/max_prompt)`; output tokens (mean 500, median 300; `--max-osl`
//!   caps) ≥ 30.
//!
//! What is ours (§5 has no such thing, or the Weka format needs it):
//! - hash ids are per trace (`local` scope), so L1/L1.5 sharing across sessions has no
//!   meaning and no groups are drawn; L1 is the session's tools+system prefix (`tool_tokens`),
//!   sent as a system message, and block ids name the context's 64-token blocks by position;
//! - server time `api_time` = 0.3 s + 15 ms per output token, so a timeline exists;
//! - subagents: after a root turn that is not the last, with probability 0.15, one subagent
//!   of 1–3 turns (each as a root turn, its prompt the L1 prefix plus its own context), which
//!   the next root turn joins (it starts no earlier than the subagent's end).

use serde_json::{json, Value};

use crate::mix::mix64;

/// Tokens per hash block of the written traces.
const BLOCK: u64 = 64;
const L1_TOKENS: u64 = 32_000;
const L15_TOKENS: u64 = 20_000;
const SUBAGENT_PROBABILITY: f64 = 0.15;
const MODEL: &str = "claude-sonnet-4-5";

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthesisParams {
    pub sessions: u32,
    pub seed: u64,
    /// The prompt limit (`--max-isl`; §5 `max_prompt_tokens`, 200,000).
    pub max_prompt_tokens: u64,
    /// Cap on output tokens (`--max-osl`; §5 `generation_length.max`, none by default).
    pub max_output_tokens: Option<u64>,
}

impl Default for SynthesisParams {
    fn default() -> Self {
        SynthesisParams {
            sessions: 100,
            seed: 0,
            max_prompt_tokens: 200_000,
            max_output_tokens: None,
        }
    }
}

/// A small deterministic generator (splitmix64): one per session, from (seed, session).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        // Box–Muller; 1 - u keeps the logarithm finite.
        let (u, v) = (1.0 - self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// §5's lognormal of `mean` and `median` within `[lo, hi]`: redrawn up to 100 times, then
    /// clipped.
    fn lognormal(&mut self, mean: f64, median: f64, lo: f64, hi: f64) -> f64 {
        let mu = median.ln();
        let sigma = (2.0 * (mean / median).ln()).max(0.0).sqrt();
        let mut x = 0.0;
        for _ in 0..100 {
            x = (mu + sigma * self.normal()).exp();
            if (lo..=hi).contains(&x) {
                return x;
            }
        }
        x.clamp(lo, hi)
    }
}

/// One request's recorded figures.
struct Turn {
    t: f64,
    input: u64,
    output: u64,
    hash_ids: Vec<u64>,
}

impl Turn {
    /// Server time, s, on the millisecond grid the file holds.
    fn api_time(&self) -> f64 {
        round_ms(0.3 + 0.015 * self.output as f64)
    }

    fn end(&self) -> f64 {
        self.t + self.api_time()
    }

    fn json(&self, stop: &str) -> Value {
        json!({
            "t": round_ms(self.t), "type": "s", "model": MODEL, "in": self.input,
            "out": self.output, "hash_ids": self.hash_ids, "stop": stop,
            "api_time": round_ms(self.api_time()), "ttft": 0.2,
        })
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// The generator of one session.
struct Session<'a> {
    rng: Rng,
    p: &'a SynthesisParams,
}

impl Session<'_> {
    fn output(&mut self) -> u64 {
        let hi = self.p.max_output_tokens.map_or(f64::MAX, |m| m as f64);
        let lo = 30f64.min(hi);
        self.rng.lognormal(500.0, 300.0, lo, hi).round() as u64
    }

    fn new_tokens(&mut self) -> u64 {
        self.rng
            .lognormal(3500.0, 1800.0, 1.0, f64::MAX)
            .round()
            .max(1.0) as u64
    }

    /// The delay before a turn, s.
    fn delay(&mut self, prev_in: u64) -> f64 {
        let ms = if self.rng.unit() < 0.7 {
            self.rng.lognormal(2500.0, 1800.0, 0.0, f64::MAX)
        } else {
            self.rng.lognormal(40_000.0, 25_000.0, 0.0, f64::MAX)
        };
        let damp = (1.0 - 0.8 * prev_in as f64 / self.p.max_prompt_tokens as f64).max(0.2);
        // At least 1 ms, on the file's millisecond grid: a turn never starts before the
        // previous one ended, so the reader sees one chain.
        round_ms((ms * damp / 1000.0).max(0.001))
    }

    /// The next turn after `prev` (`None`: the session retires or ends), `new` tokens added
    /// to its context; ids of whole blocks by position, from `base` on for this stream's part.
    fn grow(&mut self, prev: &Turn, t: f64, ids: impl Fn(u64) -> u64) -> Option<Turn> {
        let input = prev.input + prev.output + self.new_tokens();
        let max = self.p.max_prompt_tokens;
        if input >= max {
            return None;
        }
        if self.rng.unit() < 0.02 * (1.0 + input as f64 / max as f64) {
            return None;
        }
        Some(Turn {
            t,
            input,
            output: self.output(),
            hash_ids: (0..input / BLOCK).map(ids).collect(),
        })
    }
}

/// The id of session `i`'s trace under `seed`.
pub fn trace_id(seed: u64, i: u32) -> String {
    format!("syn-s{seed}-{i:06}")
}

/// Session `i` as a Weka trace (a JSON object).
pub fn session(p: &SynthesisParams, i: u32) -> Value {
    let mut s = Session {
        rng: Rng(mix64(p.seed ^ mix64(u64::from(i) + 1))),
        p,
    };
    let max = p.max_prompt_tokens;
    let l1 = (L1_TOKENS / BLOCK * BLOCK).min(max.saturating_sub(1) / BLOCK * BLOCK);
    let l2 = s
        .rng
        .lognormal(10_000.0, 5_000.0, 1.0, f64::MAX)
        .round()
        .max(1.0) as u64;
    let input = (l1 + L15_TOKENS / BLOCK * BLOCK + l2).min(max.saturating_sub(1));
    let mut turn = Turn {
        t: 0.0,
        input,
        output: s.output(),
        hash_ids: (0..input / BLOCK).collect(),
    };
    let mut entries: Vec<Value> = Vec::new();
    let mut agents = 0u32;
    loop {
        let delay = s.delay(turn.input);
        let mut next_t = round_ms(turn.end() + delay);
        let next = s.grow(&turn, 0.0, |b| b);
        let stop = if next.is_some() {
            "tool_use"
        } else {
            "end_turn"
        };
        entries.push(turn.json(stop));
        let Some(mut next) = next else { break };
        if s.rng.unit() < SUBAGENT_PROBABILITY {
            let (entry, end) = subagent(&mut s, &turn, agents, l1);
            entries.push(entry);
            agents += 1;
            next_t = next_t.max(round_ms(end + 0.001));
        }
        next.t = next_t;
        turn = next;
    }
    json!({
        "id": trace_id(p.seed, i), "models": [MODEL], "block_size": BLOCK,
        "hash_id_scope": "local", "tool_tokens": l1, "system_tokens": 0,
        "requests": entries,
    })
}

/// A subagent spawned when `parent` ends: the subagent entry and its end, s.
fn subagent(s: &mut Session<'_>, parent: &Turn, n: u32, l1: u64) -> (Value, f64) {
    let start = parent.end();
    let l1_blocks = l1 / BLOCK;
    // Its own blocks get ids past any the root can reach (max_prompt / 64 of them).
    let base = 1_000_000 * (u64::from(n) + 1);
    let ids = move |b: u64| if b < l1_blocks { b } else { base + b };
    let mut turn = Turn {
        t: start,
        input: l1 + s.new_tokens(),
        output: s.output(),
        hash_ids: Vec::new(),
    };
    turn.input = turn.input.min(s.p.max_prompt_tokens.saturating_sub(1));
    turn.hash_ids = (0..turn.input / BLOCK).map(ids).collect();
    let turns = 1 + (s.rng.next() % 3) as usize;
    let mut requests = Vec::new();
    for k in 0..turns {
        let t = round_ms(turn.end() + s.delay(turn.input).min(10.0));
        let next = (k + 1 < turns).then(|| s.grow(&turn, t, ids)).flatten();
        requests.push(turn.json(if next.is_some() {
            "tool_use"
        } else {
            "end_turn"
        }));
        match next {
            Some(n) => turn = n,
            None => break,
        }
    }
    let end = turn.end();
    let entry = json!({
        "t": round_ms(start), "type": "subagent", "agent_id": format!("agent_{n:03}"),
        "subagent_type": "general-purpose",
        "duration_ms": ((round_ms(end) - round_ms(start)) * 1000.0).round() as u64,
        "status": "completed", "models": [MODEL], "tool_tokens": l1, "requests": requests,
    });
    (entry, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::{derive, layouts, prompt::prompt_tokens, StreamKind, WekaTrace};

    fn params(sessions: u32, seed: u64) -> SynthesisParams {
        SynthesisParams {
            sessions,
            seed,
            max_prompt_tokens: 120_000,
            max_output_tokens: None,
        }
    }

    #[test]
    fn sessions_are_valid_weka_traces_whose_prompts_build_exactly() {
        let p = params(40, 7);
        let mut subagents = 0;
        for i in 0..p.sessions {
            let text = session(&p, i).to_string();
            let trace = WekaTrace::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let tree = derive(&trace);
            for st in &tree.streams {
                let l = layouts(st, 64).unwrap();
                for (k, r) in st.turns.iter().enumerate() {
                    assert_eq!(prompt_tokens(&l[k], 64), r.input, "{} #{k}", st.id);
                    assert!(r.input < p.max_prompt_tokens);
                    assert!(r.output >= 30);
                }
            }
            // Subagents are joined by the next root turn.
            for b in &tree.branches {
                assert!(b.join_turn.is_some(), "{}: {:?}", tree.id, b);
                subagents += b.children.len();
            }
            assert!(tree.streams[1..]
                .iter()
                .all(|s| s.kind == StreamKind::Subagent));
        }
        assert!(subagents > 0, "some session spawns a subagent");
    }

    #[test]
    fn the_same_seed_gives_the_same_corpus_and_another_seed_another() {
        let a: Vec<Value> = (0..5).map(|i| session(&params(5, 1), i)).collect();
        let b: Vec<Value> = (0..5).map(|i| session(&params(5, 1), i)).collect();
        let c: Vec<Value> = (0..5).map(|i| session(&params(5, 2), i)).collect();
        assert_eq!(a, b);
        assert_ne!(a[0]["requests"], c[0]["requests"]);
    }

    #[test]
    fn the_draws_follow_the_spec_distributions() {
        // Medians of many draws land near the stated medians (lognormal: median = e^mu).
        let p = SynthesisParams::default();
        let mut s = Session {
            rng: Rng(42),
            p: &p,
        };
        let mut median = |f: &mut dyn FnMut(&mut Session<'_>) -> f64| {
            let mut v: Vec<f64> = (0..4001).map(|_| f(&mut s)).collect();
            v.sort_by(f64::total_cmp);
            v[2000]
        };
        let out = median(&mut |s| s.output() as f64);
        assert!((270.0..330.0).contains(&out), "{out}");
        let new = median(&mut |s| s.new_tokens() as f64);
        assert!((1600.0..2000.0).contains(&new), "{new}");
        // At an empty context the delays mix 70% agentic (median 1.8 s) and 30% human.
        let d = median(&mut |s| s.delay(0));
        assert!((1.8..4.0).contains(&d), "{d}");
        // --max-osl caps the output.
        let capped = SynthesisParams {
            max_output_tokens: Some(100),
            ..p
        };
        let mut s = Session {
            rng: Rng(1),
            p: &capped,
        };
        assert!((0..500).all(|_| (30..=100).contains(&s.output())));
    }
}
