//! The share of a run this process measures: the whole run, or one shard's part of it
//! (`--shard K/N`, [`super::shard`]). Decided once, when the workload is selected; the
//! measured run ([`super::point`]) asks this value what it differs in (the requests it
//! sends, its workers, its records' numbering, what its result saves for `merge`) and never
//! branches on whether it is a shard, as it never asks which dataset it runs
//! ([`super::run_dataset::RunDataset`]).

use std::time::{Instant, SystemTime};

use crate::config::shard::{Shard, ShardConfig};
use crate::config::{Config, ConfigError};
use crate::engine::{RunReport, Workload};
use crate::metrics::steady_state::SteadyStateParams;
use crate::output::stdio::Console;

use super::saved_facts::ShardPlace;
use super::shard::{self, ShardMap};

/// The whole run, or a shard's part with where its records sit in the whole.
#[derive(Debug, Clone, PartialEq)]
pub enum Share {
    Whole,
    Part(ShardMap),
}

impl Share {
    /// The part of the one-process workload `w` this process runs (`shard`: `--shard`).
    pub fn select(w: Workload, shard: Option<Shard>) -> (Workload, Share) {
        match shard {
            Some(s) => {
                let (w, map) = shard::select(w, s);
                (w, Share::Part(map))
            }
            None => (w, Share::Whole),
        }
    }

    fn map(&self) -> Option<&ShardMap> {
        match self {
            Share::Whole => None,
            Share::Part(map) => Some(map),
        }
    }

    /// A shard says how many of the run's requests it sends (of `workload`, its part),
    /// before it starts; lanes decide their requests as they run: a shard of them says how
    /// many of the run's lanes it runs.
    pub fn announce(&self, workload: &Workload, console: &Console) {
        if let Some(map) = self.map() {
            let (n, what) = match map.lanes {
                true => (workload.max_concurrency.unwrap_or(0), "lanes"),
                false => (workload.total(), "requests"),
            };
            console.line(format_args!("Shard {}: {n} of the run's {what}", map.shard));
        }
    }

    /// `--start-at` as the engine's start and wall-clock time ([`shard::start_instant`]); a
    /// shard keeps when its plan was ready for `merge`'s start checks.
    pub fn start_instant(
        &mut self,
        c: &ShardConfig,
        console: &Console,
    ) -> Result<Option<(Instant, SystemTime)>, ConfigError> {
        let map = match self {
            Share::Whole => None,
            Share::Part(map) => Some(map),
        };
        shard::start_instant(c, map, console)
    }

    /// A shard's records renumbered with their indices in the one-process run (after the
    /// dataset has read them by the run's own).
    pub fn globalize(&self, run: &mut RunReport) {
        if let Some(map) = self.map() {
            map.globalize(run);
        }
    }

    /// The workers this process ran of the run's `max_concurrency`.
    pub fn max_concurrency(&self, max_concurrency: Option<usize>) -> Option<usize> {
        match self.map() {
            Some(map) => max_concurrency.map(|c| map.shard.share(c)),
            None => max_concurrency,
        }
    }

    /// Each of `records` records' shard, for a shard's result (`None`: the whole run).
    pub fn record_shards(&self, records: usize) -> Option<Vec<u16>> {
        self.map().map(|map| vec![map.shard.index as u16; records])
    }

    /// Where a shard sits among the run's shards, for its saved facts ([`shard::place`]);
    /// `None` for the whole run.
    pub fn place(
        &self,
        config: &Config,
        run: &RunReport,
        max_concurrency: Option<u64>,
        steady_state: Option<SteadyStateParams>,
    ) -> Option<ShardPlace> {
        self.map()
            .map(|map| shard::place(config, map, run, max_concurrency, steady_state))
    }
}
