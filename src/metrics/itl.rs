//! Inter-token gaps: the arena a worker records them into ([`Gaps`], 4 bytes a gap) and one
//! request's list as Python's `itl` ([`Itl`]).
//!
//! Why a request's list is a range of its worker's arena and not a `Vec<f64>` of its own:
//! gaps are most of what a run keeps (an hour at 3,000 requests/s of 100-token responses is
//! a billion of them), and a copy per request as 8-byte floats tripled what the arena held
//! at the moment the report was computed (the arena, the copies, then the calculator's
//! copy to sort). A live run's outputs share their worker's arena (`Arc`, never copied);
//! the seconds Python's arithmetic runs on are made from the nanoseconds as they are read
//! ([`ns_to_secs`], the one conversion every figure and `--save-detailed` use). A list read
//! from a file (a shard, a golden) holds its seconds as they were written.

use std::sync::Arc;
use std::time::Duration;

/// Nanoseconds as Python's seconds: the one conversion of a recorded time into the `f64`
/// the metrics run on (monotone: a larger time never gives a smaller float, so an order of
/// nanoseconds is the order of their seconds).
pub fn ns_to_secs(ns: u64) -> f64 {
    Duration::from_nanos(ns).as_secs_f64()
}

/// Inter-token gaps in nanoseconds, 4 bytes each: a run's gaps are most of what it records
/// (20,000 requests × 99 gaps = 7.9 MB instead of 15.8), and a gap of 4.29 s or more — a
/// stalled server — is marked with `u32::MAX` and keeps its value in a side list.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Gaps {
    short: Vec<u32>,
    /// (position in `short`, gap) of every marked gap, in push order.
    long: Vec<(u32, u64)>,
}

impl Gaps {
    const MARK: u32 = u32::MAX;

    pub fn with_capacity(n: usize) -> Gaps {
        Gaps {
            short: Vec::with_capacity(n),
            long: Vec::new(),
        }
    }

    pub fn push(&mut self, ns: u64) {
        match u32::try_from(ns) {
            Ok(v) if v != Self::MARK => self.short.push(v),
            _ => {
                self.long.push((self.short.len() as u32, ns));
                self.short.push(Self::MARK);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.short.len()
    }

    pub fn is_empty(&self) -> bool {
        self.short.is_empty()
    }

    /// Drops the gaps from position `len` on (a request's, when it is not kept).
    pub fn truncate(&mut self, len: usize) {
        self.short.truncate(len);
        let keep = self.long.partition_point(|&(p, _)| (p as usize) < len);
        self.long.truncate(keep);
    }

    /// Gives back the room reserved beyond what was recorded (the arena is reserved for
    /// the run's expected tokens before the clock; once the run is over, what it did not
    /// use would count against the address space until the report is done).
    pub fn shrink_to_fit(&mut self) {
        self.short.shrink_to_fit();
        self.long.shrink_to_fit();
    }

    /// The gaps at positions `range` (a request's range), in order, in nanoseconds.
    pub fn range(&self, range: std::ops::Range<u32>) -> GapsIter<'_> {
        GapsIter {
            gaps: self,
            short: self.short[range.start as usize..range.end as usize].iter(),
            at: range.start,
        }
    }

    fn long_at(&self, at: u32) -> u64 {
        let i = self.long.partition_point(|&(p, _)| p < at);
        self.long[i].1
    }
}

impl Extend<u64> for Gaps {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, gaps: I) {
        for gap in gaps {
            self.push(gap);
        }
    }
}

/// The gaps of one range of a [`Gaps`] arena, nanoseconds (the slice's own iteration, so
/// feeding a finished request's gaps to the histograms costs what it did inline).
#[derive(Debug, Clone)]
pub struct GapsIter<'a> {
    gaps: &'a Gaps,
    short: std::slice::Iter<'a, u32>,
    /// Position of the next gap in the arena (where a marked one's value is looked up).
    at: u32,
}

impl Iterator for GapsIter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        let v = *self.short.next()?;
        let at = self.at;
        self.at += 1;
        Some(match v {
            Gaps::MARK => self.gaps.long_at(at),
            v => u64::from(v),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.short.size_hint()
    }
}

impl ExactSizeIterator for GapsIter<'_> {}

/// One request's inter-token gaps, seconds, in order: Python's `itl` list.
#[derive(Clone)]
pub enum Itl {
    /// A live run's: positions `start..end` of its worker's arena, shared by every request
    /// the worker ran (24 bytes a request, the gaps themselves counted once).
    Nanos {
        arena: Arc<Gaps>,
        start: u32,
        end: u32,
    },
    /// Seconds as read (a shard file, a golden, a test).
    Seconds(Box<[f64]>),
}

impl Itl {
    /// The gaps at `range` of a shared arena.
    pub fn of_arena(arena: &Arc<Gaps>, range: std::ops::Range<u32>) -> Itl {
        Itl::Nanos {
            arena: Arc::clone(arena),
            start: range.start,
            end: range.end,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Itl::Nanos { start, end, .. } => end.saturating_sub(*start) as usize,
            Itl::Seconds(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The gaps in seconds, in order (made from the nanoseconds as they are read).
    pub fn iter(&self) -> ItlIter<'_> {
        match self {
            Itl::Nanos { arena, start, end } => ItlIter::Nanos(arena.range(*start..*end)),
            Itl::Seconds(s) => ItlIter::Seconds(s.iter()),
        }
    }

    /// The gaps as a list of seconds (what `--save-detailed` and a shard file write).
    pub fn to_vec(&self) -> Vec<f64> {
        self.iter().collect()
    }
}

impl Default for Itl {
    fn default() -> Self {
        Itl::Seconds(Box::default())
    }
}

impl From<Vec<f64>> for Itl {
    fn from(seconds: Vec<f64>) -> Self {
        Itl::Seconds(seconds.into_boxed_slice())
    }
}

impl FromIterator<f64> for Itl {
    fn from_iter<I: IntoIterator<Item = f64>>(seconds: I) -> Self {
        Itl::Seconds(seconds.into_iter().collect())
    }
}

impl PartialEq for Itl {
    /// Equal when the gaps are, however they are held.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Itl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// [`Itl::iter`]: the gaps of one request, seconds.
#[derive(Debug, Clone)]
pub enum ItlIter<'a> {
    Nanos(GapsIter<'a>),
    Seconds(std::slice::Iter<'a, f64>),
}

impl Iterator for ItlIter<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        match self {
            ItlIter::Nanos(it) => it.next().map(ns_to_secs),
            ItlIter::Seconds(it) => it.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ItlIter::Nanos(it) => it.size_hint(),
            ItlIter::Seconds(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for ItlIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_keep_every_value_short_or_long_in_order() {
        let values = [
            5,
            u64::from(u32::MAX),
            7,
            9_000_000_000,
            u64::from(u32::MAX) - 1,
            0,
            1 << 40,
        ];
        let mut gaps = Gaps::default();
        for &v in &values {
            gaps.push(v);
        }
        assert_eq!(gaps.len(), values.len());
        assert_eq!(gaps.range(0..7).collect::<Vec<_>>(), values);
        assert_eq!(gaps.range(3..6).collect::<Vec<_>>(), values[3..6]);
        assert_eq!(
            gaps.long.len(),
            3,
            "only the values that do not fit below the mark"
        );
        gaps.truncate(4);
        gaps.push(11);
        assert_eq!(
            gaps.range(0..5).collect::<Vec<_>>(),
            [5, u64::from(u32::MAX), 7, 9_000_000_000, 11]
        );
        assert_eq!(gaps.long.len(), 2);
    }

    #[test]
    fn a_list_of_the_arena_reads_as_the_seconds_it_stands_for() {
        let mut gaps = Gaps::default();
        gaps.extend([1_500_000, 5_000_000_000, 250, 7]);
        let arena = Arc::new(gaps);
        let itl = Itl::of_arena(&arena, 1..3);
        assert_eq!(itl.len(), 2);
        assert_eq!(itl.to_vec(), vec![5.0, 2.5e-7]);
        assert_eq!(itl, Itl::from(vec![5.0, 2.5e-7]), "equal however held");
        assert_ne!(itl, Itl::from(vec![5.0]));
        assert!(Itl::default().is_empty());
        assert_eq!(format!("{itl:?}"), "[5.0, 2.5e-7]");
        assert_eq!(
            std::mem::size_of::<Itl>(),
            24,
            "no larger than the Vec it replaced"
        );
    }

    #[test]
    fn seconds_of_nanoseconds_keep_their_order() {
        let ns = [
            0u64,
            1,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            u64::MAX / 3,
        ];
        for w in ns.windows(2) {
            assert!(ns_to_secs(w[0]) <= ns_to_secs(w[1]));
        }
    }
}
