//! Prompts from hash ids (SPEC §2): every turn of a stream as the list of role segments the
//! wire carries (system, user, assistant), each made of whole hash blocks and fresh tails,
//! and the token ids behind them.
//!
//! - A block is `block_size` tokens that depend only on (trace, hash id): one hash id is the
//!   same tokens in the root, its subagents and flat chains, and unrelated tokens in another
//!   trace (AIPerf's `local` scope), so the server's prefix cache sees exactly the sharing
//!   the recording had, within a trace and never across.
//! - A tail (the tokens past the last hash id, `in % block_size` and any blocks the list does
//!   not name) depends on (stream, turn): never a cache hit, like a real new message.
//! - A turn's prompt is exactly `in` tokens (before the marker and the chat template).
//! - Turn k's segments are the whole history after step k, so a stream started mid-trace
//!   (a warm-up primer, a resume) sends the full context: [`layouts`] rebuilds turns
//!   0..n whatever turn is sent first.
//! - Live responses are not threaded in: the recorded assistant blocks stand for them, so
//!   every prompt is fixed by the trace and built before the clock.
//!
//! The token ids are ours (splitmix64 streams over the tokenizer's vocabulary, as the
//! timed-trace replay does), not AIPerf's coding corpus: the invariants carry over, the bytes
//! do not (SPEC §2 "the same invariants, not the same bytes").

use crate::datasets::timed_trace::TokenSpace;
use crate::mix::{fnv64, mix64};

use super::streams::Stream;

/// The role of a wire message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A run of tokens inside a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// The whole block of this hash id (`block_size` tokens).
    Block(u64),
    /// `len` fresh tokens of the stream's turn `turn`.
    Tail { turn: u32, len: u32 },
}

/// One wire message: a role and its pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub role: Role,
    pub pieces: Vec<Piece>,
}

impl Segment {
    /// Its tokens, with blocks of `bs`.
    pub fn tokens(&self, bs: u32) -> u64 {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Block(_) => u64::from(bs),
                Piece::Tail { len, .. } => u64::from(*len),
            })
            .sum()
    }

    fn blocks(&self) -> usize {
        self.pieces
            .iter()
            .filter(|p| matches!(p, Piece::Block(_)))
            .count()
    }
}

/// Why a stream's prompts cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// The tools+system prefix needs more blocks than turn 0 names.
    #[error(
        "stream {stream:?} turn 0: the tools+system prefix of {prefix} tokens needs {needed} \
         hash blocks of {bs}, the request names {have}"
    )]
    Prefix {
        stream: String,
        prefix: u64,
        needed: u64,
        have: usize,
        bs: u32,
    },
}

/// The block counts of each turn's truncation and appended region (the planner's first pass).
struct Plan {
    /// Blocks kept from the previous turn's history.
    keep: usize,
    /// Blocks appended from the hash list.
    new: usize,
    tail: u64,
}

fn lcp(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Every turn's wire segments of `stream`, blocks of `bs` tokens (SPEC §2 "Reconstruction").
pub fn layouts(stream: &Stream, bs: u32) -> Result<Vec<Vec<Segment>>, PromptError> {
    let turns = &stream.turns;
    let bs64 = u64::from(bs);
    // First pass: block positions (they do not depend on the role split).
    let mut plans: Vec<Plan> = Vec::with_capacity(turns.len());
    let mut held = 0usize;
    for (k, r) in turns.iter().enumerate() {
        let m = (r.input / bs64) as usize;
        let cov = m.min(r.hash_ids.len());
        let (keep, tail) = if k == 0 {
            (0, (m - cov) as u64 * bs64 + r.input % bs64)
        } else {
            let keep = lcp(&turns[k - 1].hash_ids, &r.hash_ids).min(held).min(cov);
            (
                keep,
                r.input % bs64 + (m.saturating_sub(r.hash_ids.len()) as u64) * bs64,
            )
        };
        plans.push(Plan {
            keep,
            new: cov - keep,
            tail,
        });
        held = cov;
    }
    // Caps: a later turn that appends nothing keeps block T-1 as its last; the turn that
    // appended that block must leave it in a user segment.
    let mut caps = vec![usize::MAX; turns.len()];
    for k in 1..turns.len() {
        let p = &plans[k];
        if p.new != 0 || p.tail != 0 || p.keep == 0 {
            continue;
        }
        let last = p.keep - 1;
        if let Some(owner) = (1..k).rev().find(|&j| {
            let q = &plans[j];
            q.keep <= last && last < q.keep + q.new
        }) {
            caps[owner] = caps[owner].min(last - plans[owner].keep);
        }
    }
    let mut history: Vec<Segment> = Vec::new();
    let mut out = Vec::with_capacity(turns.len());
    for (k, r) in turns.iter().enumerate() {
        let p = &plans[k];
        let tail = (p.tail > 0).then_some(Piece::Tail {
            turn: k as u32,
            len: p.tail as u32,
        });
        if k == 0 {
            let cov = p.new;
            let mut user_from = 0;
            if stream.prefix_tokens > 0 {
                let needed = div_ceil(stream.prefix_tokens, bs64);
                if needed > r.hash_ids.len() as u64 {
                    return Err(PromptError::Prefix {
                        stream: stream.id.clone(),
                        prefix: stream.prefix_tokens,
                        needed,
                        have: r.hash_ids.len(),
                        bs,
                    });
                }
                user_from = (needed as usize).min(cov);
                history.push(Segment {
                    role: Role::System,
                    pieces: r.hash_ids[..user_from]
                        .iter()
                        .map(|&h| Piece::Block(h))
                        .collect(),
                });
            }
            let mut pieces: Vec<Piece> = r.hash_ids[user_from..cov]
                .iter()
                .map(|&h| Piece::Block(h))
                .collect();
            pieces.extend(tail);
            if !pieces.is_empty() {
                history.push(Segment {
                    role: Role::User,
                    pieces,
                });
            }
        } else {
            truncate(&mut history, p.keep);
            let prev_out = turns[k - 1].output;
            let mut a = (if prev_out > 0 {
                div_ceil(prev_out, bs64) as usize
            } else {
                0
            })
            .min(p.new)
            .min(caps[k]);
            if !history.iter().any(|s| s.role == Role::User) {
                a = 0;
            }
            if tail.is_none() && a > 0 && a == p.new {
                a -= 1;
            }
            let region = &r.hash_ids[p.keep..p.keep + p.new];
            if a > 0 {
                history.push(Segment {
                    role: Role::Assistant,
                    pieces: region[..a].iter().map(|&h| Piece::Block(h)).collect(),
                });
            }
            let mut pieces: Vec<Piece> = region[a..].iter().map(|&h| Piece::Block(h)).collect();
            pieces.extend(tail);
            if !pieces.is_empty() {
                history.push(Segment {
                    role: Role::User,
                    pieces,
                });
            }
        }
        end_with_user(&mut history);
        out.push(history.clone());
    }
    Ok(out)
}

/// A prompt that is all tools+system prefix (turn 0 with nothing past it, or a pull-back into
/// it) would send no user message, which chat templates refuse: its last block becomes the
/// user message. (SPEC §2 leaves this case open; the assistant cap covers every other one.)
fn end_with_user(history: &mut Vec<Segment>) {
    let Some(last) = history.last_mut() else {
        return;
    };
    if last.role != Role::System {
        return;
    }
    if let Some(block) = last.pieces.pop() {
        if last.pieces.is_empty() {
            history.pop();
        }
        history.push(Segment {
            role: Role::User,
            pieces: vec![block],
        });
    }
}

/// Cuts `segments` to their first `blocks` whole blocks (tails are dropped: a grown prompt's
/// old tail got a new hash).
fn truncate(segments: &mut Vec<Segment>, blocks: usize) {
    let mut left = blocks;
    let mut keep_segments = 0;
    for seg in segments.iter_mut() {
        if left == 0 {
            break;
        }
        let n = seg.blocks().min(left);
        let mut seen = 0;
        seg.pieces.retain(|p| match p {
            Piece::Block(_) if seen < n => {
                seen += 1;
                true
            }
            _ => false,
        });
        left -= n;
        keep_segments += 1;
    }
    segments.truncate(keep_segments);
    segments.retain(|s| !s.pieces.is_empty());
}

/// Prompt tokens of the segments (without the marker).
pub fn prompt_tokens(segments: &[Segment], bs: u32) -> u64 {
    segments.iter().map(|s| s.tokens(bs)).sum()
}

/// Seeds of the token streams of one trace: blocks by (trace, hash id), tails by (stream,
/// turn). Domain constants keep the two families apart.
#[derive(Debug, Clone, Copy)]
pub struct Seeds {
    trace: u64,
    stream: u64,
}

const BLOCK_DOMAIN: u64 = 0x6167_656e_742d_626c; // "agent-bl"
const TAIL_DOMAIN: u64 = 0x6167_656e_742d_746c; // "agent-tl"

impl Seeds {
    /// The seeds of `stream_id` in trace `trace_id` under `--seed`.
    pub fn new(seed: u64, trace_id: &str, stream_id: &str) -> Seeds {
        Seeds {
            trace: mix64(BLOCK_DOMAIN ^ mix64(seed) ^ fnv64(trace_id.as_bytes())),
            stream: mix64(TAIL_DOMAIN ^ mix64(seed) ^ fnv64(stream_id.as_bytes())),
        }
    }

    /// The seed of a piece's token stream.
    pub fn of(&self, piece: Piece) -> u64 {
        match piece {
            Piece::Block(h) => mix64(self.trace ^ mix64(h)),
            Piece::Tail { turn, .. } => mix64(self.stream ^ mix64(u64::from(turn) + 1)),
        }
    }
}

/// The cache-bust marker of one tree instance (`[rid:<12 hex>]\n\n`, SPEC §2): one per
/// (run, pass, lane, trace), shared by the root and its children, distinct across lanes and
/// passes so replays of one trace never hit each other's cache.
pub fn marker(run: u64, pass: u32, lane: u32, trace_id: &str) -> [u8; 20] {
    let h = mix64(
        mix64(run ^ 0x7269_643a)
            ^ mix64((u64::from(pass) << 32) | u64::from(lane))
            ^ fnv64(trace_id.as_bytes()),
    );
    let mut out = *b"[rid:000000000000]\n\n";
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in 0..12 {
        out[5 + i] = HEX[((h >> (44 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// Appends the token ids of `piece` (blocks of `bs` tokens) to `out`.
pub fn piece_tokens(space: &TokenSpace, seeds: &Seeds, piece: Piece, bs: u32, out: &mut Vec<u32>) {
    let len = match piece {
        Piece::Block(_) => bs,
        Piece::Tail { len, .. } => len,
    };
    space.extend(seeds.of(piece), 0, u64::from(len), out);
}

/// A turn's wire `messages` (a JSON array): each segment one message of its role, its text the
/// pieces' tokens decoded piece by piece (so a shared block is the same text wherever it
/// sits), the `marker` opening the first user message (after any system message).
pub fn messages_json(
    segments: &[Segment],
    space: &TokenSpace,
    seeds: &Seeds,
    bs: u32,
    marker: &[u8; 20],
    decode: &dyn Fn(&[u32]) -> String,
) -> String {
    let mut marked = false;
    let mut tokens = Vec::new();
    let messages: Vec<serde_json::Value> = segments
        .iter()
        .map(|seg| {
            let mut text = String::new();
            if seg.role == Role::User && !marked {
                marked = true;
                text.push_str(std::str::from_utf8(marker).unwrap_or_default());
            }
            for &p in &seg.pieces {
                tokens.clear();
                piece_tokens(space, seeds, p, bs, &mut tokens);
                text.push_str(&decode(&tokens));
            }
            serde_json::json!({"role": seg.role.name(), "content": text})
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::format::WekaTrace;
    use crate::datasets::agentic::streams::derive;

    const TRACE_A: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-a.json");
    const TRACE_B: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-b.json");

    /// `role[hash ids + tailN]=tokens`, SPEC §2's table notation.
    fn show(segments: &[Segment]) -> String {
        segments
            .iter()
            .map(|s| {
                let mut ids = Vec::new();
                for p in &s.pieces {
                    match p {
                        Piece::Block(h) => ids.push(h.to_string()),
                        Piece::Tail { len, .. } => ids.push(format!("tail{len}")),
                    }
                }
                format!("{}[{}]={}", s.role.name(), ids.join(","), s.tokens(64))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn tree(text: &str) -> crate::datasets::agentic::Tree {
        derive(&WekaTrace::parse(text).unwrap())
    }

    #[test]
    fn the_segment_layouts_of_the_spec_table() {
        let a = tree(TRACE_A);
        let root = layouts(&a.streams[0], 64).unwrap();
        assert_eq!(show(&root[0]), "user[1,2,3,tail8]=200");
        assert_eq!(
            show(&root[1]),
            "user[1,2,3]=192 assistant[4]=64 user[5,6,tail16]=144"
        );
        assert_eq!(
            show(&root[2]),
            "user[1,2,3]=192 assistant[4]=64 user[5,6]=128 assistant[7]=64 user[tail52]=52"
        );
        let sa = layouts(&a.streams[1], 64).unwrap();
        assert_eq!(show(&sa[0]), "user[1,101,tail22]=150");
        assert_eq!(
            show(&sa[1]),
            "user[1,101]=128 assistant[102]=64 user[103,tail4]=68"
        );
        let b = tree(TRACE_B);
        let root = layouts(&b.streams[0], 64).unwrap();
        assert_eq!(show(&root[0]), "system[10,11]=128 user[12,13,tail44]=172");
        assert_eq!(
            show(&root[1]),
            "system[10,11]=128 user[12,13]=128 assistant[14,15]=128 user[16,tail2]=66"
        );
        let sizes: Vec<u64> = root[2].iter().map(|s| s.tokens(64)).collect();
        assert_eq!(sizes, [128, 128, 128, 64, 64, 8]);
        let roles: Vec<Role> = root[2].iter().map(|s| s.role).collect();
        use Role::*;
        assert_eq!(roles, [System, User, Assistant, User, Assistant, User]);
    }

    #[test]
    fn every_prompt_has_exactly_in_tokens() {
        for text in [TRACE_A, TRACE_B] {
            let t = tree(text);
            for s in &t.streams {
                for (r, segs) in s.turns.iter().zip(layouts(s, 64).unwrap()) {
                    assert_eq!(prompt_tokens(&segs, 64), r.input, "{} t={}", s.id, r.t);
                    assert_eq!(segs.last().map(|s| s.role), Some(Role::User));
                }
            }
        }
    }

    #[test]
    fn a_block_aligned_pull_back_keeps_the_last_block_in_a_user_segment() {
        let text = r#"{"id":"P","models":["m"],"block_size":64,"hash_id_scope":"local","requests":[
            {"t":0,"type":"n","model":"m","in":128,"out":200,"hash_ids":[1,2]},
            {"t":1,"type":"n","model":"m","in":320,"out":200,"hash_ids":[1,2,3,4,5]},
            {"t":2,"type":"n","model":"m","in":256,"out":10,"hash_ids":[1,2,3,4]}]}"#;
        let t = tree(text);
        let l = layouts(&t.streams[0], 64).unwrap();
        // Without the cap turn 1 would be asst[3,4] user[5]; turn 2 keeps blocks 1..4, so
        // block 4 must stay a user block.
        assert_eq!(show(&l[1]), "user[1,2]=128 assistant[3]=64 user[4,5]=128");
        assert_eq!(show(&l[2]), "user[1,2]=128 assistant[3]=64 user[4]=64");
    }

    #[test]
    fn a_prefix_larger_than_the_named_blocks_is_refused() {
        let text = TRACE_B.replace("\"tool_tokens\": 96", "\"tool_tokens\": 960");
        let t = tree(&text);
        let e = layouts(&t.streams[0], 64).unwrap_err();
        assert!(e.to_string().contains("needs 16 hash blocks"), "{e}");
    }

    #[test]
    fn block_seeds_follow_the_trace_and_tail_seeds_the_stream() {
        let root = Seeds::new(7, "trace-a", "trace-a");
        let child = Seeds::new(7, "trace-a", "trace-a::sa:agent_001");
        let other = Seeds::new(7, "trace-b", "trace-b");
        assert_eq!(root.of(Piece::Block(1)), child.of(Piece::Block(1)));
        assert_ne!(root.of(Piece::Block(1)), other.of(Piece::Block(1)));
        assert_ne!(root.of(Piece::Block(1)), root.of(Piece::Block(2)));
        let tail = |s: &Seeds, turn| s.of(Piece::Tail { turn, len: 8 });
        assert_ne!(tail(&root, 0), tail(&child, 0));
        assert_ne!(tail(&root, 0), tail(&root, 1));
        assert_ne!(
            Seeds::new(8, "trace-a", "trace-a").of(Piece::Block(1)),
            root.of(Piece::Block(1))
        );
    }

    /// Token ids as text, one word per id: decoding is exact and reversible here.
    fn words(ids: &[u32]) -> String {
        ids.iter().map(|i| format!("t{i} ")).collect()
    }

    fn space() -> TokenSpace {
        TokenSpace::new(50_000, &[0, 1]).unwrap()
    }

    #[test]
    fn one_hash_id_is_the_same_tokens_in_a_tree_and_other_tokens_in_another_trace() {
        let (a, b) = (tree(TRACE_A), tree(TRACE_B));
        let seeds =
            |t: &crate::datasets::agentic::Tree, s: usize| Seeds::new(42, &t.id, &t.streams[s].id);
        let block = |sd: &Seeds, h| {
            let mut out = Vec::new();
            piece_tokens(&space(), sd, Piece::Block(h), 64, &mut out);
            out
        };
        let root_1 = block(&seeds(&a, 0), 1);
        assert_eq!(root_1.len(), 64);
        assert_eq!(
            root_1,
            block(&seeds(&a, 1), 1),
            "root and subagent share block 1"
        );
        assert_ne!(root_1, block(&seeds(&b, 0), 1), "another trace's block 1");
    }

    #[test]
    fn the_wire_messages_carry_the_roles_the_marker_and_exactly_in_tokens() {
        let b = tree(TRACE_B);
        let s = &b.streams[0];
        let seeds = Seeds::new(42, &b.id, &s.id);
        let m = marker(9, 0, 3, &b.id);
        let turns = layouts(s, 64).unwrap();
        for (k, segs) in turns.iter().enumerate() {
            let json = messages_json(segs, &space(), &seeds, 64, &m, &words);
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            let msgs = v.as_array().unwrap();
            let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
            assert_eq!(roles[..2], ["system", "user"], "turn {k}");
            let user = msgs[1]["content"].as_str().unwrap();
            let text = std::str::from_utf8(&m).unwrap();
            assert!(
                user.starts_with(text),
                "the marker opens the first user message"
            );
            assert!(!msgs[0]["content"].as_str().unwrap().contains("[rid:"));
            let tokens: usize = msgs
                .iter()
                .map(|m| m["content"].as_str().unwrap().split_whitespace().count())
                .sum();
            // The marker is one "word" of the split, not a token of `in`.
            assert_eq!(tokens as u64 - 1, s.turns[k].input, "turn {k}");
        }
    }

    /// Random streams (growth, pull-backs, short hash lists, partial blocks, prefixes): every
    /// turn has exactly `in` tokens, ends with a user message, and its blocks are the request's
    /// first `min(len(hash_ids), in / 64)` hash ids in order.
    #[test]
    fn random_streams_keep_the_layout_invariants() {
        use crate::datasets::agentic::format::Request;
        use crate::datasets::agentic::streams::{Stream, StreamKind};
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = mix64(state.wrapping_add(0x9E37_79B9_7F4A_7C15));
            state % n.max(1)
        };
        for case in 0..300 {
            let mut hash: Vec<u64> = Vec::new();
            let mut turns = Vec::new();
            let mut fresh = 1000u64;
            for k in 0..(1 + next(8)) {
                match next(4) {
                    // Pull back to a prefix (compaction, block-aligned or not).
                    0 if !hash.is_empty() => hash.truncate(next(hash.len() as u64) as usize + 1),
                    // Fork away from the tail.
                    1 if hash.len() > 1 => {
                        hash.truncate(hash.len() - 1);
                        fresh += 1;
                        hash.push(fresh);
                    }
                    _ => {}
                }
                for _ in 0..next(5) {
                    fresh += 1;
                    hash.push(fresh);
                }
                let full = hash.len() as u64 * 64;
                let input = match next(3) {
                    0 => full,                      // block-aligned
                    1 => full + next(64),           // a partial tail
                    _ => (full + next(300)).max(1), // ids short of `in`
                };
                turns.push(Request {
                    t: k as f64,
                    model: "m".into(),
                    input: input.max(1),
                    output: next(200),
                    hash_ids: hash.clone(),
                    api_time: None,
                    think_time: None,
                });
            }
            let prefix = if turns[0].hash_ids.len() > 1 && next(3) == 0 {
                64 + next(64)
            } else {
                0
            };
            let stream = Stream {
                id: format!("case{case}"),
                kind: StreamKind::Root,
                barriers: vec![Vec::new(); turns.len()],
                turns,
                prefix_tokens: prefix,
                scope: 0,
                branch: None,
            };
            let all = layouts(&stream, 64).unwrap();
            for (r, segs) in stream.turns.iter().zip(&all) {
                assert_eq!(prompt_tokens(segs, 64), r.input, "case {case}: {segs:?}");
                assert_eq!(segs.last().map(|s| s.role), Some(Role::User), "case {case}");
                let blocks: Vec<u64> = segs
                    .iter()
                    .flat_map(|s| s.pieces.iter())
                    .filter_map(|p| match p {
                        Piece::Block(h) => Some(*h),
                        Piece::Tail { .. } => None,
                    })
                    .collect();
                let cov = ((r.input / 64) as usize).min(r.hash_ids.len());
                assert_eq!(blocks, r.hash_ids[..cov], "case {case}");
            }
        }
    }

    #[test]
    fn markers_differ_by_lane_pass_and_run() {
        let m = marker(1, 0, 0, "trace-a");
        assert!(m.starts_with(b"[rid:") && m.ends_with(b"]\n\n"));
        assert!(m[5..17].iter().all(u8::is_ascii_hexdigit));
        assert_eq!(m, marker(1, 0, 0, "trace-a"));
        assert_ne!(m, marker(1, 0, 1, "trace-a"));
        assert_ne!(m, marker(1, 1, 0, "trace-a"));
        assert_ne!(m, marker(2, 0, 0, "trace-a"));
        assert_ne!(m, marker(1, 0, 0, "trace-b"));
    }
}
