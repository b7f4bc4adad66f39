//! The dataset as a measured run sees it: how its requests form sessions, whether it brings
//! its own arrival times, and what it adds to the report after the run. Every dataset
//! answers the same questions here, so [`super::point`] schedules and reports a run without
//! asking which dataset it is.
//!
//! Lifecycle: [`super::dataset::for_run`] loads a [`super::dataset::Loaded`] dataset (its
//! `--dry-run` summary is `describe`); `Loaded::prepare` builds every request's bytes
//! ([`super::prepare::Prepared`]) and leaves this [`RunDataset`], which the
//! [`super::plan::Plan`] keeps for every run. The two are separate types because the loaded
//! prompts, media and conversation texts are all inside the requests' bytes once prepared:
//! the plan keeps only what a run still asks for, not a second copy of every prompt.
//!
//! An enum with methods rather than a trait: the kinds are few and all known here, each
//! question is one `match` the compiler checks for every kind, and nothing is boxed. A trait
//! would not place each kind's answers in its own module either: the kinds' modules
//! ([`super::trace`], [`super::multi_turn`]) sit below this one in the import graph.

use std::sync::Arc;

use crate::engine::recorder::{Merged, Record};
use crate::engine::session::Chains;
use crate::engine::Workload;
use crate::output::facts::PrefixCache;

use super::agentic_replay::AgenticRun;
use super::multi_turn::{first_conversations, request_turns, ConversationPlan};
use super::trace::{measured_hit_ratio, scrape_prefix_cache};
use crate::control_plane::Target;

/// What a measured run asks of its dataset.
pub enum RunDataset {
    /// One independent request per sample: the random family (`random`, `random-mm`,
    /// `random-rerank`, `prefix_repetition`, `sonnet`) and the file-based datasets alike;
    /// they differ in how they load, not in how they run.
    Samples {
        /// Inputs per request when some carry more than one (batched pooling, rerank).
        input_sequences: Option<Arc<[u32]>>,
        /// `custom_audio`: each request's audio duration in seconds (Python's
        /// `input_audio_duration`, for `rtfx`).
        audio_s: Option<Arc<[f64]>>,
    },
    /// `--dataset-name timed_trace`: the trace's own arrival times and chains.
    Trace {
        /// The trace's arrival offsets (s from the run start), in request order; `None`
        /// with `--no-self-timed` (the rate's schedule).
        arrivals: Option<Arc<[f64]>>,
        /// `--timed-trace-wait-parent`: the request each request waits for.
        parents: Option<Arc<[Option<u32>]>>,
        /// The trace's ideal prefix-cache hit ratios (`measured_hit_ratio` unset).
        ideal: PrefixCache,
    },
    /// `--multi-turn`: each conversation one session, its later turns built as it runs.
    Conversations(Arc<ConversationPlan>),
    /// `--dataset-name agentic_trace`: lanes of live trees, warmed up before the measured run.
    Agentic(AgenticRun),
}

/// How a dataset's requests form the engine's sessions.
pub enum Sessions<'a> {
    /// Each request its own session.
    Independent,
    /// A request waits for the one it names (`parents[i]`, an earlier request) and runs in
    /// its session.
    Chains(&'a [Option<u32>]),
    /// Each prepared request is a conversation's first turn.
    Conversations(&'a Arc<ConversationPlan>),
    /// One worker per lane, each running its lane's trees.
    Lanes(&'a AgenticRun),
}

impl Sessions<'_> {
    /// `workload` (its first `n` sessions' first requests, prompt lengths and arrivals) with
    /// these sessions: chains grouped within the `n` requests, the first `n` conversations.
    /// Also, when chains were grouped, the request index each session starts with (`None`:
    /// session `i` starts with request `i`).
    pub fn shape(&self, mut workload: Workload, n: usize) -> (Workload, Option<Vec<usize>>) {
        let mut firsts = None;
        match self {
            Sessions::Independent => {}
            Sessions::Conversations(plan) => {
                workload.sessions = Some(first_conversations(Arc::clone(plan), n));
            }
            Sessions::Lanes(run) => run.shape(&mut workload),
            Sessions::Chains(parents) => {
                // A child turn waits for its parent: both run in one session.
                let g = Chains::group(
                    workload.requests.clone(),
                    workload.client_prompt_lens.clone(),
                    workload.arrivals.clone(),
                    &parents[..n.min(parents.len())],
                );
                workload.requests = g.first_requests;
                workload.client_prompt_lens = g.first_prompt_lens;
                workload.arrivals = g.first_arrivals;
                workload.sessions = Some(g.sessions);
                firsts = Some(g.first_indices);
            }
        }
        (workload, firsts)
    }
}

/// What a dataset reads from the server before a measured run, to compare with after it
/// ([`RunDataset::baseline`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline {
    /// The trace's prefix-cache counters (queries, hits).
    prefix_cache: Option<(f64, f64)>,
}

/// What a dataset adds to a run's facts beside the outcomes, per request in output order.
#[derive(Debug, Default, PartialEq)]
pub struct DatasetFacts {
    /// `--multi-turn`: each request's conversation and turn (1-based).
    pub turns: Option<(Vec<String>, Vec<u64>)>,
    /// `custom_audio`: each request's audio length, seconds (Python's `rtfx`).
    pub audio_s: Option<Vec<f64>>,
}

impl RunDataset {
    /// The sessions its requests form.
    pub fn sessions(&self) -> Sessions<'_> {
        match self {
            RunDataset::Samples { .. } | RunDataset::Trace { parents: None, .. } => {
                Sessions::Independent
            }
            RunDataset::Trace {
                parents: Some(p), ..
            } => Sessions::Chains(p),
            RunDataset::Conversations(plan) => Sessions::Conversations(plan),
            RunDataset::Agentic(run) => Sessions::Lanes(run),
        }
    }

    /// Its own arrival offsets (s from the run start, one per request); `None`: the rate's
    /// schedule.
    pub fn arrivals(&self) -> Option<&[f64]> {
        match self {
            RunDataset::Trace { arrivals, .. } => arrivals.as_deref(),
            RunDataset::Samples { .. } | RunDataset::Conversations(_) | RunDataset::Agentic(_) => {
                None
            }
        }
    }

    /// What runs before a measured run, on its engine: the agentic replay's primers and
    /// warm-up (SPEC §3.3), which leave its lanes at the start of profiling.
    pub fn before_measured_run(&self, engine: &crate::engine::Engine) -> anyhow::Result<()> {
        match self {
            RunDataset::Agentic(run) => run.warm_up(engine),
            _ => Ok(()),
        }
    }

    /// The agentic replay (`None` for every other dataset): its records and tree shapes make
    /// the run's agentic facts.
    pub fn agentic(&self) -> Option<&AgenticRun> {
        match self {
            RunDataset::Agentic(run) => Some(run),
            _ => None,
        }
    }

    /// Read before a measured run (the trace: the server's prefix-cache counters).
    pub fn baseline(&self, target: &Target) -> Baseline {
        Baseline {
            prefix_cache: match self {
                RunDataset::Trace { .. } => scrape_prefix_cache(target),
                RunDataset::Samples { .. }
                | RunDataset::Conversations(_)
                | RunDataset::Agentic(_) => None,
            },
        }
    }

    /// Read right after the run, against `before` (the trace: its ideal prefix-cache hit
    /// ratios and the one the server measured).
    pub fn prefix_cache(&self, target: &Target, before: Baseline) -> Option<PrefixCache> {
        let RunDataset::Trace { ideal, .. } = self else {
            return None;
        };
        let measured = before
            .prefix_cache
            .zip(scrape_prefix_cache(target))
            .and_then(|(before, after)| measured_hit_ratio(before, after));
        Some(PrefixCache {
            measured_hit_ratio: measured,
            ..*ideal
        })
    }

    /// The measured run's counts as the dataset sees them, before anything reads its
    /// records (the agentic replay takes its context overflows out of Python's block:
    /// [`AgenticRun::settle`]).
    pub fn settle(&self, report: &mut crate::engine::RunReport) {
        if let RunDataset::Agentic(run) = self {
            run.settle(report);
        }
    }

    /// Marks each output of a run with what its request carried that the engine does not
    /// know (the inputs of a batched request); the records hold each request's index.
    pub fn mark_outputs(&self, merged: &mut Merged) {
        let RunDataset::Samples {
            input_sequences: Some(seqs),
            ..
        } = self
        else {
            return;
        };
        for (o, rec) in merged.outputs.iter_mut().zip(&merged.records) {
            if let Some(&n) = seqs.get(rec.index as usize) {
                o.input_sequences = u64::from(n);
            }
        }
    }

    /// Its facts beside the run's outcomes, from the run's records (output order).
    pub fn request_facts(&self, records: &[Record]) -> DatasetFacts {
        match self {
            RunDataset::Samples {
                audio_s: Some(audio),
                ..
            } => DatasetFacts {
                audio_s: Some(
                    records
                        .iter()
                        .map(|r| audio.get(r.index as usize).copied().unwrap_or(0.0))
                        .collect(),
                ),
                ..DatasetFacts::default()
            },
            RunDataset::Conversations(plan) => DatasetFacts {
                turns: Some(request_turns(plan, records, &plan.turn_of_records())),
                ..DatasetFacts::default()
            },
            RunDataset::Samples { audio_s: None, .. }
            | RunDataset::Trace { .. }
            | RunDataset::Agentic(_) => DatasetFacts::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(parents: Option<Vec<Option<u32>>>, arrivals: Option<Vec<f64>>) -> RunDataset {
        RunDataset::Trace {
            arrivals: arrivals.map(Into::into),
            parents: parents.map(Into::into),
            ideal: PrefixCache {
                ideal_token_hit_ratio: 0.5,
                ideal_block_hit_ratio: 0.25,
                measured_hit_ratio: None,
            },
        }
    }

    #[test]
    fn samples_take_the_rates_times_and_run_each_request_alone() {
        let samples = RunDataset::Samples {
            input_sequences: None,
            audio_s: None,
        };
        assert!(samples.arrivals().is_none());
        assert!(matches!(samples.sessions(), Sessions::Independent));
        let e = samples.request_facts(&[]);
        assert_eq!(e, DatasetFacts::default(), "nothing beside the outcomes");
    }

    #[test]
    fn a_trace_chains_requests_only_with_wait_parent_and_keeps_its_own_times() {
        let alone = trace(None, Some(vec![0.0, 0.5]));
        assert!(matches!(alone.sessions(), Sessions::Independent));
        assert_eq!(alone.arrivals(), Some(&[0.0, 0.5][..]));
        let chained = trace(Some(vec![None, Some(0)]), None);
        assert!(
            matches!(chained.sessions(), Sessions::Chains(p) if p == [None, Some(0)]),
            "--timed-trace-wait-parent"
        );
        assert!(chained.arrivals().is_none(), "--no-self-timed: the rate's");
    }

    #[test]
    fn audio_samples_give_each_request_its_audio_length() {
        let audio = RunDataset::Samples {
            input_sequences: None,
            audio_s: Some(vec![3.0, 5.0, 7.0].into()),
        };
        // Records in completion order: request 2 ended first.
        let records: Vec<Record> = [2, 1, 0]
            .into_iter()
            .map(|index| Record {
                index,
                ..Record::default()
            })
            .collect();
        let e = audio.request_facts(&records);
        assert_eq!(e.audio_s, Some(vec![7.0, 5.0, 3.0]));
    }
}
