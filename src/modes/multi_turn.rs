//! Multi-turn runs: each conversation is one engine session. Its first request is prepared
//! before the clock; each later turn is built after the previous answer arrived, from the
//! messages already serialized (shared parts), the answer exactly as it was streamed, and
//! the next user message (serialized before the clock). Every request of a conversation
//! carries the conversation's `X-Session-ID` and its own `x-request-id`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::backends::conversation::{user_message, ChatBody, Transcript};
use crate::datasets::conversations::{Conversations, History};
use crate::engine::recorder::Record;
use crate::engine::session::{FollowUps, NextRequest, Reply, SessionSource};
use crate::http::request::{HeadTemplate, Ids, PreparedRequest};
use crate::metrics::report::{BenchmarkReport, ReportSettings};
use crate::metrics::RequestOutput;

/// One conversation, ready to run.
struct Planned {
    id: String,
    /// Each user turn serialized as a chat message.
    users: Vec<Bytes>,
    prompt_lens: Vec<u32>,
    output_lens: Vec<usize>,
}

/// The conversations of a run as the engine's [`SessionSource`]; its records are in
/// conversation order, turn by turn.
pub struct ConversationPlan {
    conversations: Vec<Planned>,
    /// Record index of each conversation's first turn, and the total at the end.
    starts: Vec<usize>,
    history: History,
    head: HeadTemplate,
    /// The chat body of each conversation (they differ only by a LoRA adapter's `model`).
    bodies: Vec<ChatBody>,
    think_time: Duration,
}

/// Where a record of a multi-turn run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnOf {
    pub conversation: u32,
    /// 0-based.
    pub turn: u32,
}

impl ConversationPlan {
    /// `bodies` has one chat body per conversation.
    pub fn new(
        conversations: &Conversations,
        head: HeadTemplate,
        bodies: Vec<ChatBody>,
        think_time: Duration,
    ) -> ConversationPlan {
        let planned: Vec<Planned> = conversations
            .list
            .iter()
            .map(|c| Planned {
                id: c.id.clone(),
                users: c.turns.iter().map(|t| user_message(&t.text)).collect(),
                prompt_lens: c.turns.iter().map(|t| t.prompt_len as u32).collect(),
                output_lens: c.turns.iter().map(|t| t.output_len).collect(),
            })
            .collect();
        let mut starts = Vec::with_capacity(planned.len() + 1);
        let mut at = 0;
        for c in &planned {
            starts.push(at);
            at += c.users.len();
        }
        starts.push(at);
        ConversationPlan {
            conversations: planned,
            starts,
            history: conversations.history,
            head,
            bodies,
            think_time,
        }
    }

    /// Number of conversations.
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }

    /// The first request of every conversation, and its prompt length.
    pub fn first_requests(&self) -> (Vec<PreparedRequest>, Vec<u32>) {
        self.conversations
            .iter()
            .zip(&self.bodies)
            .map(|(c, body)| {
                let req = self.request(c, body, 0, &Self::opening(c));
                (req, c.prompt_lens[0])
            })
            .unzip()
    }

    /// The first request of every conversation with `body` instead of its own (the base
    /// model's, for the ready check and warm-ups of a LoRA run).
    pub fn first_requests_with(&self, body: &ChatBody) -> Vec<PreparedRequest> {
        self.conversations
            .iter()
            .map(|c| self.request(c, body, 0, &Self::opening(c)))
            .collect()
    }

    /// The output-token limit of every planned request (for sizing the arenas).
    pub fn max_output_len(&self) -> usize {
        self.conversations
            .iter()
            .flat_map(|c| c.output_lens.iter().copied())
            .max()
            .unwrap_or(0)
    }

    /// The conversation and turn of every record.
    pub fn turn_of_records(&self) -> Vec<TurnOf> {
        self.conversations
            .iter()
            .enumerate()
            .flat_map(|(c, conv)| {
                (0..conv.users.len()).map(move |t| TurnOf {
                    conversation: c as u32,
                    turn: t as u32,
                })
            })
            .collect()
    }

    fn request(
        &self,
        c: &Planned,
        body: &ChatBody,
        turn: usize,
        messages: &Transcript,
    ) -> PreparedRequest {
        let request_id = format!("{}-turn-{turn}", c.id);
        let ids = Ids {
            request: Some(&request_id),
            session: Some(&c.id),
        };
        messages.request(&self.head, ids, body, c.output_lens[turn])
    }

    /// Conversation `c`'s first turn as a transcript.
    fn opening(c: &Planned) -> Transcript {
        let mut t = Transcript::default();
        t.push(c.users[0].clone(), u64::from(c.prompt_lens[0]));
        t
    }
}

impl SessionSource for ConversationPlan {
    fn total(&self) -> usize {
        self.starts[self.conversations.len()]
    }

    fn turns(&self, session: usize) -> usize {
        self.conversations[session].users.len()
    }

    fn record(&self, session: usize, turn: usize) -> usize {
        self.starts[session] + turn
    }

    fn follow(&self, session: usize) -> Box<dyn FollowUps + '_> {
        let c = &self.conversations[session];
        Box::new(Turns {
            plan: self,
            conversation: c,
            body: &self.bodies[session],
            turn: 0,
            messages: ConversationPlan::opening(c),
        })
    }
}

/// A conversation in progress.
struct Turns<'a> {
    plan: &'a ConversationPlan,
    conversation: &'a Planned,
    /// The conversation's chat body (its adapter's, with LoRA).
    body: &'a ChatBody,
    /// The turn whose answer comes next.
    turn: usize,
    /// The messages sent so far (full history mode), with their tokens as the client counts
    /// them (the server's usage replaces the prompt length when it reports one).
    messages: Transcript,
}

impl FollowUps for Turns<'_> {
    fn next(&mut self, reply: &Reply<'_>) -> Option<NextRequest> {
        let c = self.conversation;
        self.turn += 1;
        let user = c.users.get(self.turn)?;
        let own = u64::from(c.prompt_lens[self.turn]);
        if self.plan.history == History::None {
            self.messages.clear();
        } else {
            let answer = reply.completion_tokens.unwrap_or(0);
            self.messages.push_answer(reply.text, answer);
        }
        self.messages.push(user.clone(), own);
        let prompt_len = self.messages.tokens();
        Some(NextRequest {
            request: self.plan.request(c, self.body, self.turn, &self.messages),
            client_prompt_len: u32::try_from(prompt_len).unwrap_or(u32::MAX),
            delay: self.plan.think_time,
            not_before: Duration::ZERO,
        })
    }
}

/// `--dry-run`'s summary of the conversations.
pub fn describe(c: &Conversations) -> String {
    let turns: Vec<usize> = c.list.iter().map(|c| c.turns.len()).collect();
    let user_tokens: usize = c
        .list
        .iter()
        .flat_map(|c| c.turns.iter().map(|t| t.prompt_len))
        .sum();
    format!(
        "Conversations: {}\nTurns: {} (per conversation {}..={})\nUser-message tokens: {}\n\
         History: {}",
        c.list.len(),
        c.total_turns(),
        turns.iter().min().unwrap_or(&0),
        turns.iter().max().unwrap_or(&0),
        user_tokens,
        match c.history {
            History::Full => "every turn sends the earlier messages and the real answers",
            History::None => "none (prefix-sharing mode: each turn is sent alone)",
        }
    )
}

/// One request as the per-turn figures take it.
pub struct TurnRequest<'a> {
    pub output: &'a RequestOutput,
    /// 0-based.
    pub turn: u32,
    /// Send and end, ns since the epoch.
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Each turn's figures over its requests (its span: from its first send to its last end),
/// however they were recorded (the live run's records, a merge's shard files).
pub fn per_turn<'a>(
    requests: impl IntoIterator<Item = TurnRequest<'a>>,
    settings: &ReportSettings<'_>,
) -> Vec<(usize, BenchmarkReport)> {
    let mut by_turn: BTreeMap<u32, (Vec<RequestOutput>, u64, u64)> = BTreeMap::new();
    for r in requests {
        let entry = by_turn
            .entry(r.turn)
            .or_insert_with(|| (Vec::new(), u64::MAX, 0));
        entry.0.push(r.output.clone());
        entry.1 = entry.1.min(r.start_ns);
        entry.2 = entry.2.max(r.end_ns);
    }
    by_turn
        .into_iter()
        .map(|(turn, (outs, first, last))| {
            let span = Duration::from_nanos(last.saturating_sub(first)).as_secs_f64();
            let s = ReportSettings {
                duration_s: span,
                ..settings.clone()
            };
            (turn as usize + 1, BenchmarkReport::compute(&outs, &s))
        })
        .collect()
}

/// Per request of the result (in its order): the conversation id and the turn (1-based).
pub fn request_turns(
    plan: &ConversationPlan,
    records: &[Record],
    turn_of: &[TurnOf],
) -> (Vec<String>, Vec<u64>) {
    records
        .iter()
        .filter_map(|r| turn_of.get(r.index as usize))
        .map(|t| {
            let id = plan.conversations[t.conversation as usize].id.clone();
            (id, u64::from(t.turn) + 1)
        })
        .unzip()
}

/// The first `n` conversations of `plan` as the engine's source (a sweep point that runs
/// fewer conversations than were generated); all of them when `n` covers the plan.
pub fn first_conversations(plan: Arc<ConversationPlan>, n: usize) -> Arc<dyn SessionSource> {
    if n >= plan.len() {
        return plan;
    }
    Arc::new(FirstConversations { plan, n })
}

/// A prefix of a plan's conversations: their records are the plan's first ones.
struct FirstConversations {
    plan: Arc<ConversationPlan>,
    n: usize,
}

impl SessionSource for FirstConversations {
    fn total(&self) -> usize {
        self.plan.starts[self.n]
    }

    fn turns(&self, session: usize) -> usize {
        self.plan.turns(session)
    }

    fn record(&self, session: usize, turn: usize) -> usize {
        self.plan.record(session, turn)
    }

    fn follow(&self, session: usize) -> Box<dyn FollowUps + '_> {
        self.plan.follow(session)
    }
}
