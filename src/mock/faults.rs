//! Fault injection: the fault kinds, the fraction of model requests that gets each
//! ([`FaultConfig`]), and which request gets which, decided from the seed and the request's
//! sequence number alone, so a run with the same seed and request order injects
//! the same faults into the same requests.

use serde::Serialize;

use super::hash::SplitMix64;

/// Fractions of model requests (completions, chat, embeddings, pooling, rerank) that get
/// each fault. Each is in `[0, 1]` and together they sum to at most 1; which request gets
/// which fault is decided from the seed and the request's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FaultConfig {
    /// `500 Internal Server Error` with a vLLM-style JSON error body.
    pub error_500: f64,
    /// `429 Too Many Requests` with a JSON error body.
    pub error_429: f64,
    /// The socket is closed after a few content chunks (no `[DONE]`, no last HTTP chunk).
    pub disconnect: f64,
    /// The first content chunk is sent, then nothing for `stall_for`, then the socket closes.
    pub stall: f64,
    /// One content event carries invalid JSON; the stream otherwise completes normally.
    pub malformed: f64,
    /// The `200` response head is sent (for a non-streaming answer, when its body would be),
    /// then the socket closes: no event, no body byte.
    pub close_after_head: f64,
    /// The response never ends: a stream sends content events (no finish reason, no usage,
    /// no `[DONE]`) and a non-streaming answer sends body bytes, on and on, until the client
    /// closes the connection or the server stops. What a client's response limits are for.
    pub endless: f64,
    /// A typed-event stream (Responses, Anthropic Messages) sends its `error` event halfway
    /// and ends, as vLLM does when the engine fails after the stream started. The other APIs
    /// have no error event a client reads: they answer `500` instead.
    pub stream_error: f64,
}

impl FaultConfig {
    /// The fractions in decision order, with the names used in errors and stats.
    pub(crate) fn named(&self) -> [(&'static str, f64); FaultKind::COUNT] {
        [
            ("error_500", self.error_500),
            ("error_429", self.error_429),
            ("disconnect", self.disconnect),
            ("stall", self.stall),
            ("malformed", self.malformed),
            ("close_after_head", self.close_after_head),
            ("endless", self.endless),
            ("stream_error", self.stream_error),
        ]
    }

    /// True when no fault can ever be injected.
    pub fn is_none(&self) -> bool {
        self.named().iter().all(|(_, f)| *f == 0.0)
    }
}

/// The kinds of injected fault (see [`FaultConfig`] for what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `500 Internal Server Error`.
    #[serde(rename = "error_500")]
    Error500,
    /// `429 Too Many Requests`.
    #[serde(rename = "error_429")]
    Error429,
    /// Socket closed mid-stream.
    Disconnect,
    /// First chunk, then silence for `stall_for`, then close.
    Stall,
    /// One event with invalid JSON.
    Malformed,
    /// The response head, then close.
    CloseAfterHead,
    /// A response that never ends.
    Endless,
    /// An `error` event halfway through a typed-event stream (else a 500).
    StreamError,
}

impl FaultKind {
    /// Number of kinds (the length of [`FaultKind::ALL`] and of the statistics slots).
    pub const COUNT: usize = 8;

    /// All kinds, in decision order (also the order of [`FaultCounts`] slots).
    pub const ALL: [FaultKind; FaultKind::COUNT] = [
        FaultKind::Error500,
        FaultKind::Error429,
        FaultKind::Disconnect,
        FaultKind::Stall,
        FaultKind::Malformed,
        FaultKind::CloseAfterHead,
        FaultKind::Endless,
        FaultKind::StreamError,
    ];

    /// The kind's statistics slot.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Stream id of the fault draw, distinct from the jitter and id streams of the same request.
const FAULT_STREAM: u64 = 0xfa17;

/// The fault for request number `seq`, if any: one uniform draw in `[0, 1)` falls into the
/// cumulative fractions in the order 500, 429, disconnect, stall, malformed, close after head,
/// endless, stream error.
pub fn decide(faults: &FaultConfig, seed: u64, seq: u64) -> Option<FaultKind> {
    if faults.is_none() {
        return None;
    }
    let u = SplitMix64::new(seed ^ FAULT_STREAM, seq).next_f64();
    let mut edge = 0.0;
    for (kind, (_, fraction)) in FaultKind::ALL.into_iter().zip(faults.named()) {
        edge += fraction;
        if u < edge {
            return Some(kind);
        }
    }
    None
}

/// Faults injected so far, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FaultCounts {
    /// 500 responses.
    pub error_500: u64,
    /// 429 responses.
    pub error_429: u64,
    /// Mid-stream disconnects.
    pub disconnect: u64,
    /// Stalls.
    pub stall: u64,
    /// Malformed events.
    pub malformed: u64,
    /// Heads followed by a close.
    pub close_after_head: u64,
    /// Responses that never ended.
    pub endless: u64,
    /// Error events mid-stream (or 500s for APIs without one).
    pub stream_error: u64,
}

impl FaultCounts {
    /// Builds the counts from per-kind slots.
    pub fn from_slots(s: [u64; FaultKind::COUNT]) -> Self {
        FaultCounts {
            error_500: s[0],
            error_429: s[1],
            disconnect: s[2],
            stall: s[3],
            malformed: s[4],
            close_after_head: s[5],
            endless: s[6],
            stream_error: s[7],
        }
    }

    /// The count of one kind.
    pub fn of(&self, kind: FaultKind) -> u64 {
        match kind {
            FaultKind::Error500 => self.error_500,
            FaultKind::Error429 => self.error_429,
            FaultKind::Disconnect => self.disconnect,
            FaultKind::Stall => self.stall,
            FaultKind::Malformed => self.malformed,
            FaultKind::CloseAfterHead => self.close_after_head,
            FaultKind::Endless => self.endless,
            FaultKind::StreamError => self.stream_error,
        }
    }

    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        FaultKind::ALL.into_iter().map(|k| self.of(k)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_faults_configured_means_none() {
        let f = FaultConfig::default();
        assert!((0..1000).all(|seq| decide(&f, 1, seq).is_none()));
    }

    #[test]
    fn always_means_every_request() {
        let f = FaultConfig {
            stall: 1.0,
            ..Default::default()
        };
        assert!((0..1000).all(|seq| decide(&f, 1, seq) == Some(FaultKind::Stall)));
    }

    #[test]
    fn fractions_are_respected_and_deterministic() {
        let f = FaultConfig {
            error_500: 0.1,
            disconnect: 0.2,
            malformed: 0.05,
            ..Default::default()
        };
        let n = 20_000u64;
        let mut counts = [0u64; FaultKind::COUNT];
        for seq in 0..n {
            let d = decide(&f, 42, seq);
            assert_eq!(d, decide(&f, 42, seq));
            if let Some(k) = d {
                counts[k.index()] += 1;
            }
        }
        let share = |i: usize| counts[i] as f64 / n as f64;
        assert!((share(0) - 0.1).abs() < 0.02, "{counts:?}");
        assert_eq!(counts[1], 0);
        assert!((share(2) - 0.2).abs() < 0.02, "{counts:?}");
        assert_eq!(counts[3], 0);
        assert!((share(4) - 0.05).abs() < 0.02, "{counts:?}");
        // Another seed picks other requests.
        let differs = (0..200).any(|seq| decide(&f, 42, seq) != decide(&f, 43, seq));
        assert!(differs);
    }
}
