//! The capacity search itself, as a pure state machine: the verdicts so far in, the next
//! value to probe (or the answer) out. No probe is run here, so every path is a unit test.
//!
//! The search assumes that meeting the SLO is monotonic in the value (more load never helps)
//! and guards against noise instead of trusting one run:
//! - a value's verdict is the majority of its runs; a tie is run again at once (an odd
//!   number of runs cannot tie), before the search moves on from the value;
//! - the two values that decide the answer (the best that meets, the next that misses) are
//!   each run at least `confirm` times (2, or `--num-runs`), so one noisy run cannot decide;
//!   every value at least `min_runs` times (`--num-runs`);
//! - a meet above the lowest miss is noise and ignored.
//!
//! Concurrency is an integer: grow by doubling from `lo` until a miss (or `hi`), then bisect
//! until the best and the miss are adjacent. A rate is continuous: without a range, the
//! first probe sends everything at once (`inf`) and its throughput brackets the answer (no
//! rate above what the server sustains can meet a latency SLO for long); then halve or
//! double until a meet and a miss bracket it, and bisect until the miss is within
//! `tolerance` of the best.

/// What the search varies, and the numbers that bound it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Space {
    /// Integers in `lo..=hi`.
    Integer { lo: u64, hi: u64 },
    /// Rates; `range: None` brackets from a probe at `inf`; `floor` is the lowest rate that
    /// may be probed (a schedule's limit).
    Rate {
        range: Option<(f64, f64)>,
        tolerance: f64,
        floor: f64,
    },
}

/// The next step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    Probe(f64),
    Done(Answer),
}

/// What the search found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    /// `best` meets, `failed` (the next value probed above it) does not; both confirmed.
    Found { best: f64, failed: f64 },
    /// The top of the range meets (`inf` for a rate that meets with everything at once):
    /// the capacity is at least `best`.
    UpperBoundMet { best: f64 },
    /// Even the lowest value probed misses.
    NoneMet { lowest: f64 },
}

/// The search's memory: every run's value and verdict, in order.
#[derive(Debug, Clone)]
pub struct Search {
    space: Space,
    confirm: usize,
    min_runs: usize,
    runs: Vec<(f64, bool)>,
    /// Requests per second of the probe at `inf` (a rate search without a range).
    throughput_at_inf: Option<f64>,
}

/// Halving stops this far below the bracketing throughput: a server that meets nothing at
/// 1/1024 of what it sustains is not going to.
const MAX_HALVINGS: i32 = 10;

impl Search {
    /// `runs_per_value`: `--num-runs` (1 by default).
    pub fn new(space: Space, runs_per_value: usize) -> Search {
        let min_runs = runs_per_value.max(1);
        Search {
            space,
            confirm: min_runs.max(2),
            min_runs,
            runs: Vec::new(),
            throughput_at_inf: None,
        }
    }

    /// Records one run: `value` met every term or not; `throughput` its requests per second.
    pub fn record(&mut self, value: f64, meets: bool, throughput: f64) {
        if value.is_infinite() && self.throughput_at_inf.is_none() {
            self.throughput_at_inf = Some(throughput);
        }
        self.runs.push((value, meets));
    }

    /// The values probed with (meets, runs), ascending.
    fn tally(&self) -> Vec<(f64, usize, usize)> {
        let mut t: Vec<(f64, usize, usize)> = Vec::new();
        for &(v, m) in &self.runs {
            match t.iter_mut().find(|e| e.0 == v) {
                Some(e) => (e.1, e.2) = (e.1 + usize::from(m), e.2 + 1),
                None => t.push((v, usize::from(m), 1)),
            }
        }
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        t
    }

    /// The next value to probe, or the answer.
    pub fn next(&self) -> Step {
        let tally = self.tally();
        let runs = |v: f64| {
            tally
                .iter()
                .find(|e| e.0 == v)
                .map_or((0, 0), |e| (e.1, e.2))
        };
        // Not decided yet: fewer runs than `want`, or as many meets as misses.
        let unsettled = |v: f64, want: usize| {
            let (m, n) = runs(v);
            n < want || 2 * m == n
        };
        // Every value gets its `--num-runs` first, in the order it was probed; a value whose
        // runs tie (met once, missed once) is run again at once, before the search moves on
        // from it: counted as a miss, it would send the search below a value that may meet,
        // or a search that found a lower miss would never look at it again.
        if let Some(&(v, _)) = self.runs.last() {
            if unsettled(v, self.min_runs) {
                return Step::Probe(v);
            }
        }
        let meets = |e: &&(f64, usize, usize)| 2 * e.1 > e.2;
        let miss = tally.iter().find(|e| !meets(e)).map(|e| e.0);
        let best = tally
            .iter()
            .filter(|e| meets(e) && miss.is_none_or(|m| e.0 < m))
            .map(|e| e.0)
            .next_back();
        match (best, miss) {
            (None, None) => Step::Probe(self.start()),
            (None, Some(m)) => match self.below(m) {
                Some(v) if v != m => Step::Probe(v),
                _ if unsettled(m, self.confirm) => Step::Probe(m),
                _ => Step::Done(Answer::NoneMet { lowest: m }),
            },
            (Some(b), None) => match self.above(b, None) {
                Some(v) => Step::Probe(v),
                None if unsettled(b, self.confirm) => Step::Probe(b),
                None => Step::Done(Answer::UpperBoundMet { best: b }),
            },
            (Some(b), Some(m)) => match self.above(b, Some(m)) {
                Some(v) => Step::Probe(v),
                None if unsettled(b, self.confirm) => Step::Probe(b),
                None if unsettled(m, self.confirm) => Step::Probe(m),
                None => Step::Done(Answer::Found { best: b, failed: m }),
            },
        }
    }

    fn start(&self) -> f64 {
        match self.space {
            Space::Integer { lo, .. } => lo as f64,
            Space::Rate {
                range: Some((lo, _)),
                ..
            } => lo,
            Space::Rate { range: None, .. } => f64::INFINITY,
        }
    }

    /// The next value below a miss `m` with no meet under it; `m` itself when it is the
    /// lowest value there is (it then only needs confirming).
    fn below(&self, m: f64) -> Option<f64> {
        match self.space {
            Space::Integer { lo, .. } => Some(((m as u64) / 2).max(lo) as f64),
            Space::Rate {
                range: Some((lo, _)),
                ..
            } => Some(round(m / 2.0).max(lo)),
            Space::Rate { floor, .. } => {
                let top = self.throughput_at_inf.filter(|t| *t > 0.0)?;
                if m.is_infinite() {
                    return Some(round(top).max(floor));
                }
                let lowest = top / 2f64.powi(MAX_HALVINGS);
                let v = round(m / 2.0);
                Some(if v < lowest.max(floor) { m } else { v })
            }
        }
    }

    /// The next value to probe above a meet `b` (bisecting towards a miss `m`); `None` when
    /// `b` is as close to `m` as the search goes (or is the top of the range).
    fn above(&self, b: f64, m: Option<f64>) -> Option<f64> {
        match (self.space, m) {
            (Space::Integer { hi, .. }, None) => {
                let b = b as u64;
                (b < hi).then(|| b.saturating_mul(2).min(hi) as f64)
            }
            (Space::Integer { .. }, Some(m)) => {
                let (b, m) = (b as u64, m as u64);
                (m > b + 1).then(|| (b + (m - b) / 2) as f64)
            }
            (Space::Rate { range, .. }, m) => {
                let hi = range.map_or(f64::INFINITY, |r| r.1);
                match m {
                    // Nothing above misses: double up to the range's top.
                    None if b < hi => Some(round(b * 2.0).min(hi)),
                    None => None,
                    Some(m) if m.is_infinite() => Some(round(b * 2.0)),
                    Some(m) => {
                        let Space::Rate { tolerance, .. } = self.space else {
                            unreachable!()
                        };
                        let mid = round((b + m) / 2.0);
                        ((m - b) / b > tolerance && mid > b && mid < m).then_some(mid)
                    }
                }
            }
        }
    }
}

/// A probed rate to four significant digits: readable, and far finer than any tolerance.
fn round(r: f64) -> f64 {
    if !r.is_finite() || r <= 0.0 {
        return r;
    }
    let scale = 10f64.powi(3 - r.log10().floor() as i32);
    (r * scale).round() / scale
}

/// Whether a probe that missed looks over-saturated: its latencies (in the order the
/// requests started) keep growing, the last quarter's mean above twice the first's. Such a
/// run's figures depend on how long it ran rather than on the load; it is marked so.
pub fn saturated(latencies_in_start_order: &[f64]) -> bool {
    let n = latencies_in_start_order.len();
    if n < 8 {
        return false;
    }
    let q = n / 4;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let (first, last) = (
        mean(&latencies_in_start_order[..q]),
        mean(&latencies_in_start_order[n - q..]),
    );
    first > 0.0 && last > 2.0 * first
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against `meets(value, run index)` until it answers; the probes made.
    fn drive(mut s: Search, meets: impl Fn(f64, usize) -> bool, tput: f64) -> (Answer, Vec<f64>) {
        let mut probes = Vec::new();
        for i in 0..200 {
            match s.next() {
                Step::Probe(v) => {
                    probes.push(v);
                    s.record(v, meets(v, i), tput);
                }
                Step::Done(a) => return (a, probes),
            }
        }
        panic!("no answer after 200 probes: {probes:?}");
    }

    #[test]
    fn concurrency_is_exact_with_both_sides_confirmed() {
        let s = Search::new(Space::Integer { lo: 1, hi: 64 }, 1);
        let (a, probes) = drive(s, |v, _| v <= 5.0, 0.0);
        assert_eq!(
            a,
            Answer::Found {
                best: 5.0,
                failed: 6.0
            }
        );
        assert_eq!(
            probes.iter().filter(|&&v| v == 5.0).count(),
            2,
            "{probes:?}"
        );
        assert_eq!(
            probes.iter().filter(|&&v| v == 6.0).count(),
            2,
            "{probes:?}"
        );
        assert_eq!(&probes[..4], &[1.0, 2.0, 4.0, 8.0], "doubling first");
    }

    #[test]
    fn one_noisy_run_cannot_decide() {
        // 6 meets once (its first run), then misses: the answer stays 5.
        let s = Search::new(Space::Integer { lo: 1, hi: 16 }, 1);
        let first_six = std::cell::Cell::new(true);
        let (a, _) = drive(
            s,
            |v, _| v <= 5.0 || (v == 6.0 && first_six.replace(false)),
            0.0,
        );
        assert_eq!(
            a,
            Answer::Found {
                best: 5.0,
                failed: 6.0
            }
        );
    }

    #[test]
    fn num_runs_runs_every_value_that_often() {
        let s = Search::new(Space::Integer { lo: 1, hi: 4 }, 3);
        let (a, probes) = drive(s, |_, _| true, 0.0);
        assert_eq!(a, Answer::UpperBoundMet { best: 4.0 });
        assert_eq!(probes, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0]);
    }

    #[test]
    fn the_lowest_value_missing_is_confirmed_then_reported() {
        let s = Search::new(Space::Integer { lo: 1, hi: 8 }, 1);
        let (a, probes) = drive(s, |_, _| false, 0.0);
        assert_eq!(a, Answer::NoneMet { lowest: 1.0 });
        assert_eq!(probes, [1.0, 1.0]);
    }

    #[test]
    fn a_rate_is_bracketed_from_inf_and_bisected_to_the_tolerance() {
        let space = Space::Rate {
            range: None,
            tolerance: 0.05,
            floor: 0.01,
        };
        let (a, probes) = drive(Search::new(space, 1), |v, _| v <= 37.0, 100.0);
        let Answer::Found { best, failed } = a else {
            panic!("{a:?}")
        };
        assert_eq!(probes[..2], [f64::INFINITY, 100.0]);
        assert!(best <= 37.0 && failed > 37.0, "{best} {failed}");
        assert!((failed - best) / best <= 0.05, "{best} {failed}");
    }

    #[test]
    fn a_rate_range_is_searched_within_its_bounds() {
        let space = Space::Rate {
            range: Some((1.0, 8.0)),
            tolerance: 0.1,
            floor: 0.01,
        };
        let (a, _) = drive(Search::new(space, 1), |_, _| true, 0.0);
        assert_eq!(a, Answer::UpperBoundMet { best: 8.0 });
        let (a, probes) = drive(Search::new(space, 1), |_, _| false, 0.0);
        assert_eq!(a, Answer::NoneMet { lowest: 1.0 });
        assert_eq!(probes, [1.0, 1.0]);
        let (a, _) = drive(Search::new(space, 1), |_, _| true, 0.0);
        assert!(matches!(a, Answer::UpperBoundMet { .. }));
    }

    #[test]
    fn a_rate_that_meets_at_inf_is_unbounded_and_one_that_never_meets_stops() {
        let space = Space::Rate {
            range: None,
            tolerance: 0.05,
            floor: 0.5,
        };
        let (a, _) = drive(Search::new(space, 1), |_, _| true, 50.0);
        assert_eq!(
            a,
            Answer::UpperBoundMet {
                best: f64::INFINITY
            }
        );
        let (a, probes) = drive(Search::new(space, 1), |_, _| false, 50.0);
        let Answer::NoneMet { lowest } = a else {
            panic!("{a:?}")
        };
        assert!(lowest >= 0.5, "{lowest} {probes:?}");
    }

    #[test]
    fn a_rate_that_met_once_and_missed_once_is_run_again() {
        // inf meets on its first run and misses on its second (a tie): the third probe is
        // inf again, and its verdict (a miss) decides; the search then brackets from inf's
        // throughput as usual.
        let space = Space::Rate {
            range: None,
            tolerance: 0.05,
            floor: 0.01,
        };
        let (a, probes) = drive(Search::new(space, 1), |v, i| v <= 37.0 || i == 0, 100.0);
        assert_eq!(
            probes[..4],
            [f64::INFINITY, f64::INFINITY, f64::INFINITY, 100.0],
            "{probes:?}"
        );
        assert!(
            matches!(a, Answer::Found { best, .. } if best <= 37.0),
            "{a:?}"
        );
        // With --num-runs 2, a value whose two runs tie gets a third before the search moves.
        let s = Search::new(Space::Integer { lo: 1, hi: 8 }, 2);
        let (_, probes) = drive(s, |v, i| v <= 2.0 || (v == 4.0 && i == 4), 0.0);
        assert_eq!(
            probes[..7],
            [1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 4.0],
            "{probes:?}"
        );
    }

    #[test]
    fn growing_latencies_are_saturation() {
        let flat = [1.0; 20];
        let growing: Vec<f64> = (0..20).map(|i| 1.0 + i as f64).collect();
        assert!(!saturated(&flat));
        assert!(saturated(&growing));
        assert!(!saturated(&growing[..4]), "too few to tell");
    }
}
