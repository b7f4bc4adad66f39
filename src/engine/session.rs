//! Sessions: the unit of work the cursor hands out. A session is a sequence of requests that
//! run in order on one worker (and, while the server keeps it alive, one connection): a
//! conversation's turns, or a trace's parent and child turns. A session's first request is
//! prepared before the clock like every other request; each later one is asked for after the
//! previous response, from what that response returned, together with the delay before it.
//!
//! A run whose sessions all have one request (every dataset but multi-turn and trace chains)
//! has no [`SessionSource`]: the worker's hot path is then the same as a flat schedule.

use std::sync::Arc;
use std::time::Duration;

use crate::http::request::PreparedRequest;

/// How a response ended, as the server said: the API's readers name it (`backends`).
pub use crate::backends::FinishReason;

/// What a session's previous request returned, given to the source of its next request.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    /// The answer's content exactly as streamed (the reasoning channel is not part of it).
    pub text: &'a str,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<FinishReason>,
}

/// A session's next request and when to send it: `delay` after the previous response ended
/// (a think time), and never before `not_before` from the start of the run (a trace turn's
/// own timestamp).
#[derive(Debug, Clone)]
pub struct NextRequest {
    pub request: PreparedRequest,
    /// The client's prompt length of this request (replaced by the server's usage).
    pub client_prompt_len: u32,
    pub delay: Duration,
    pub not_before: Duration,
}

/// The follow-up requests of one session, asked for one at a time by the worker running it.
pub trait FollowUps {
    /// The request after the one that returned `reply`; `None` ends the session early (its
    /// remaining requests are counted as not sent).
    fn next(&mut self, reply: &Reply<'_>) -> Option<NextRequest>;
}

/// The sessions of a run that has sessions of more than one request. Session `s`'s first
/// request is the workload's `requests[s]`; the rest come from [`SessionSource::follow`].
pub trait SessionSource: Send + Sync {
    /// Requests planned across all sessions (the run's total: completed + failed + not sent).
    fn total(&self) -> usize;
    /// Requests planned in session `s` (at least 1).
    fn turns(&self, session: usize) -> usize;
    /// Where request `turn` of session `s` goes among the run's records (0..total, each
    /// used once): the order of the per-request lists of the result.
    fn record(&self, session: usize, turn: usize) -> usize;
    /// The follow-ups of session `s`, asked for once its first request succeeded.
    fn follow(&self, session: usize) -> Box<dyn FollowUps + '_>;
    /// Lanes instead of sessions (the agentic replay): each worker runs a lane, which
    /// decides itself what to send and when, several requests at a time.
    fn lanes(&self) -> Option<&dyn LaneSource> {
        None
    }
}

/// Lanes: the units of work of a run that decides its own schedule as it goes (the agentic
/// replay), run by [`super::lanes`].
/// The lanes of a run: one per worker (the run's `max_concurrency`).
pub trait LaneSource: Send + Sync {
    /// Lane `lane`'s state, made on the core that runs it (a lane is claimed once, in
    /// worker order).
    fn lane(&self, lane: usize) -> Box<dyn Lane>;
    /// The next lane to run (a shared cursor: each worker claims one).
    fn claim(&self) -> usize;
}

/// What a lane wants next.
pub enum LaneStep {
    /// Send `request` now; `ticket` names it in [`Lane::sent`] and [`Lane::ended`], `index`
    /// is its record's place among the run's records.
    Send {
        ticket: u64,
        index: u32,
        request: PreparedRequest,
        client_prompt_len: u32,
    },
    /// Nothing to send before this time (ns since the run's epoch).
    WaitUntil(u64),
    /// Only a response can move it on.
    AwaitResponse,
    /// The lane has nothing more to send and nothing in flight.
    Done,
}

/// A failed request's texts (the error as Python names it, and our detail: the HTTP status
/// and the start of the body), for a lane that tells failures apart by what they say.
#[derive(Debug, Clone, Copy)]
pub struct FailureText<'a> {
    pub error: &'a str,
    pub detail: &'a str,
}

/// How a request of a lane ended.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Times in ns since the run's epoch.
    pub sent_ns: u64,
    pub first_token_ns: Option<u64>,
    pub end_ns: u64,
    /// Inter-token gaps recorded (0 for a failure: its partial data is not kept).
    pub itl_intervals: u32,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`, when the server sent it.
    pub cached_tokens: Option<u64>,
    pub failure: Option<FailureText<'a>>,
    /// Cut by the run's stop (`--duration` + grace) or cancelled on purpose.
    pub cancelled: bool,
    /// The answer's content exactly as streamed, as [`Reply::text`] (empty for a failure; a
    /// lane that threads answers into its histories reads it).
    pub text: &'a str,
}

/// One lane's schedule, run on one core.
pub trait Lane {
    /// What to do at `now_ns` (since the run's epoch).
    fn step(&mut self, now_ns: u64) -> LaneStep;
    /// The request `ticket` went out at `now_ns`.
    fn sent(&mut self, ticket: u64, now_ns: u64);
    /// The response to `ticket` ended.
    fn ended(&mut self, ticket: u64, answer: &Answer<'_>);
    /// The run stopped: no more sends (the lane counts what it had due as not sent, in the
    /// run's total).
    fn stop(&mut self);
    /// Whether the lane wants the whole run stopped now (the agentic replay's failure
    /// threshold): its driver stops the run as an interrupt does, on every core.
    fn halted(&self) -> bool {
        false
    }
    /// The lane's run is over (every request in flight ended).
    fn finish(&mut self);
}

/// Requests that wait for an earlier one to finish (a Bailian trace's child turn and its
/// parent), grouped into sessions: a request joins its parent's session, a request without a
/// parent starts one. Every request is prepared before the clock; a session sends each of
/// its requests once the previous one finished, and not before its own arrival time.
///
/// A parent with two children runs them one after the other in file order (the second waits
/// for the first, not only for the parent): trace conversations are chains, and a session
/// is one worker's sequence.
pub struct Chains {
    /// Requests by session and turn, flattened; `starts[s]..starts[s + 1]` is session `s`.
    members: Vec<u32>,
    starts: Vec<u32>,
    requests: Arc<[PreparedRequest]>,
    prompt_lens: Arc<[u32]>,
    arrivals: Option<Arc<[Duration]>>,
}

/// A flat request list regrouped into sessions by [`Chains::group`].
pub struct Grouped {
    /// The first request of each session, in order of first index.
    pub first_requests: Arc<[PreparedRequest]>,
    pub first_prompt_lens: Arc<[u32]>,
    pub first_arrivals: Option<Arc<[Duration]>>,
    /// The index (in the flat list) of each session's first request.
    pub first_indices: Vec<usize>,
    pub sessions: Arc<Chains>,
}

impl Chains {
    /// Groups `requests` into sessions by `parents` (per request, the index of the request
    /// it waits for; a parent must come earlier, a later one is ignored).
    pub fn group(
        requests: Arc<[PreparedRequest]>,
        prompt_lens: Arc<[u32]>,
        arrivals: Option<Arc<[Duration]>>,
        parents: &[Option<u32>],
    ) -> Grouped {
        let n = requests.len();
        let mut session_of = vec![0u32; n];
        let mut sizes: Vec<u32> = Vec::new();
        for i in 0..n {
            let parent = parents.get(i).copied().flatten().map(|p| p as usize);
            let s = match parent {
                Some(p) if p < i => session_of[p],
                _ => {
                    sizes.push(0);
                    (sizes.len() - 1) as u32
                }
            };
            session_of[i] = s;
            sizes[s as usize] += 1;
        }
        let mut starts = Vec::with_capacity(sizes.len() + 1);
        let mut at = 0u32;
        for &size in &sizes {
            starts.push(at);
            at += size;
        }
        starts.push(at);
        let mut fill: Vec<u32> = starts[..sizes.len()].to_vec();
        let mut members = vec![0u32; n];
        for (i, &s) in session_of.iter().enumerate() {
            members[fill[s as usize] as usize] = i as u32;
            fill[s as usize] += 1;
        }
        let firsts: Vec<usize> = starts[..sizes.len()]
            .iter()
            .map(|&st| members[st as usize] as usize)
            .collect();
        Grouped {
            first_requests: firsts.iter().map(|&i| requests[i].clone()).collect(),
            first_prompt_lens: firsts.iter().map(|&i| prompt_lens[i]).collect(),
            first_arrivals: arrivals
                .as_ref()
                .map(|a| firsts.iter().map(|&i| a[i]).collect()),
            first_indices: firsts,
            sessions: Arc::new(Chains {
                members,
                starts,
                requests,
                prompt_lens,
                arrivals,
            }),
        }
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn member(&self, session: usize, turn: usize) -> usize {
        self.members[self.starts[session] as usize + turn] as usize
    }
}

impl SessionSource for Chains {
    fn total(&self) -> usize {
        self.members.len()
    }

    fn turns(&self, session: usize) -> usize {
        (self.starts[session + 1] - self.starts[session]) as usize
    }

    fn record(&self, session: usize, turn: usize) -> usize {
        self.member(session, turn)
    }

    fn follow(&self, session: usize) -> Box<dyn FollowUps + '_> {
        Box::new(ChainTurns {
            chains: self,
            session,
            turn: 0,
        })
    }
}

/// The rest of one chain: its prepared requests in order, each at its own arrival time.
struct ChainTurns<'a> {
    chains: &'a Chains,
    session: usize,
    turn: usize,
}

impl FollowUps for ChainTurns<'_> {
    fn next(&mut self, _reply: &Reply<'_>) -> Option<NextRequest> {
        self.turn += 1;
        if self.turn >= self.chains.turns(self.session) {
            return None;
        }
        let i = self.chains.member(self.session, self.turn);
        Some(NextRequest {
            request: self.chains.requests[i].clone(),
            client_prompt_len: self.chains.prompt_lens[i],
            delay: Duration::ZERO,
            not_before: self
                .chains
                .arrivals
                .as_ref()
                .map_or(Duration::ZERO, |a| a[i]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{HeadTemplate, Method};

    fn requests(n: usize) -> Arc<[PreparedRequest]> {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        (0..n)
            .map(|i| head.build(Some(&i.to_string()), None, b""))
            .collect()
    }

    fn id(r: &PreparedRequest) -> String {
        let text = String::from_utf8(r.to_vec()).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("x-request-id"))
            .unwrap();
        line["x-request-id: ".len()..].to_string()
    }

    const REPLY: Reply<'static> = Reply {
        text: "",
        prompt_tokens: None,
        completion_tokens: None,
        finish_reason: None,
    };

    #[test]
    fn children_join_their_parents_session_in_file_order() {
        // 0 ← 2 ← 3, 1 alone, 4 ← 5; 6 names a later "parent" and starts its own session.
        let parents = [None, None, Some(0), Some(2), None, Some(4), Some(7), None];
        let arrivals: Arc<[Duration]> = (0..8).map(Duration::from_secs).collect();
        let lens: Arc<[u32]> = (0..8).map(|i| 10 + i).collect();
        let g = Chains::group(requests(8), lens, Some(arrivals), &parents);
        let s = &g.sessions;
        assert_eq!(s.len(), 5);
        assert_eq!(s.total(), 8);
        let firsts: Vec<String> = g.first_requests.iter().map(id).collect();
        assert_eq!(firsts, ["0", "1", "4", "6", "7"]);
        assert_eq!(&*g.first_prompt_lens, &[10, 11, 14, 16, 17]);
        assert_eq!(
            g.first_arrivals.as_ref().unwrap()[2],
            Duration::from_secs(4)
        );
        assert_eq!(
            (0..5).map(|x| s.turns(x)).collect::<Vec<_>>(),
            [3, 1, 2, 1, 1]
        );
        assert_eq!(
            (0..3).map(|t| s.record(0, t)).collect::<Vec<_>>(),
            [0, 2, 3]
        );
        let mut f = s.follow(0);
        let second = f.next(&REPLY).unwrap();
        assert_eq!(id(&second.request), "2");
        assert_eq!(second.not_before, Duration::from_secs(2));
        assert_eq!(second.client_prompt_len, 12);
        assert_eq!(id(&f.next(&REPLY).unwrap().request), "3");
        assert!(f.next(&REPLY).is_none());
    }

    #[test]
    fn siblings_share_one_session() {
        let parents = [None, Some(0), Some(0)];
        let g = Chains::group(requests(3), vec![1, 2, 3].into(), None, &parents);
        assert_eq!(g.sessions.len(), 1);
        assert_eq!(g.sessions.turns(0), 3);
        assert!(g.first_arrivals.is_none());
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(FinishReason::parse("length"), Some(FinishReason::Length));
        assert_eq!(FinishReason::parse("stop"), Some(FinishReason::Stop));
        assert_eq!(FinishReason::parse("tool_calls"), Some(FinishReason::Other));
        assert_eq!(FinishReason::parse(""), None);
    }
}
