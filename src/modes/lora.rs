//! LoRA adapters (`--lora-modules`, `--lora-assignment`): which adapter each request (or, with
//! `--multi-turn`, each conversation) names in its `model` field, the body options that
//! bakes in before the clock, and the per-adapter summary after the run.
//!
//! Python 0.33 (`serve.py`): round-robin gives request `i` the adapter `i % N`; random draws
//! `random.choice(modules)` once per request. Our random draws use CPython's generator
//! seeded with `--seed` on its own: Python's global generator has usually been advanced by
//! the dataset's sampling first, so the same seed picks the same distribution, not the same
//! per-request adapters. The tokenizer, `/v1/models`, the ready check and the warm-ups keep
//! `--model` (Python builds its test request with the base model).

use crate::backends::BodyOptions;
use crate::config::LoraConfig;
use crate::datasets::pyrandom::PyRandom;
use crate::engine::recorder::Record;
use crate::metrics::report::{BenchmarkReport, ReportSettings, TaskMetrics};
use crate::metrics::RequestOutput;
use crate::output::lora::AdapterSummary;
use crate::types::LoraAssignment;

/// The adapter index of each of `n` requests (or conversations).
pub fn assign(config: &LoraConfig, n: usize, seed: u64) -> Vec<u32> {
    let count = config.modules.len().max(1);
    match config.assignment {
        LoraAssignment::RoundRobin => (0..n).map(|i| (i % count) as u32).collect(),
        LoraAssignment::Random => {
            let mut rng = PyRandom::new(seed);
            (0..n)
                .map(|_| rng.choice_index(count).unwrap_or(0) as u32)
                .collect()
        }
    }
}

/// The body options of every request: the run's, with the `model` field replaced by the
/// request's adapter when `--lora-modules` is given.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    base: BodyOptions,
    /// One per adapter, in `--lora-modules` order (empty without LoRA).
    adapters: Vec<BodyOptions>,
    /// Adapter of each request (or conversation), an index into `adapters`.
    of: Vec<u32>,
}

impl AdapterOptions {
    /// Without LoRA every request gets `base`; with it, `n` assignments are drawn.
    pub fn new(base: BodyOptions, lora: Option<&LoraConfig>, n: usize, seed: u64) -> Self {
        let Some(lora) = lora else {
            return AdapterOptions {
                base,
                adapters: Vec::new(),
                of: Vec::new(),
            };
        };
        let adapters = lora
            .modules
            .iter()
            .map(|name| BodyOptions {
                model: name.clone(),
                ..base.clone()
            })
            .collect();
        AdapterOptions {
            of: assign(lora, n, seed),
            base,
            adapters,
        }
    }

    /// The options of request (or conversation) `i`.
    pub fn of(&self, i: usize) -> &BodyOptions {
        match self.of.get(i) {
            Some(&a) => &self.adapters[a as usize],
            None => &self.base,
        }
    }

    /// The adapter index of request (or conversation) `i`; `None` without LoRA.
    pub fn adapter_index(&self, i: usize) -> Option<usize> {
        self.of.get(i).map(|&a| a as usize)
    }

    /// One set of options per adapter, in `--lora-modules` order (empty without LoRA).
    pub fn adapters(&self) -> &[BodyOptions] {
        &self.adapters
    }

    /// The run's own options (`--served-model-name` or `--model`): the ready check and warm-ups.
    pub fn base(&self) -> &BodyOptions {
        &self.base
    }

    /// Whether requests name adapters.
    pub fn is_lora(&self) -> bool {
        !self.adapters.is_empty()
    }

    /// Adapter names, and the adapter of each record given the request (or conversation)
    /// each record index belongs to; `None` without LoRA.
    pub fn plan(
        &self,
        unit_of_record: impl Fn(usize) -> usize,
        records: usize,
    ) -> Option<LoraPlan> {
        self.is_lora().then(|| LoraPlan {
            names: self.adapters.iter().map(|o| o.model.clone()).collect(),
            of_record: (0..records)
                .map(|r| self.of.get(unit_of_record(r)).copied().unwrap_or(0))
                .collect(),
        })
    }
}

/// The adapters of a run, for the result and the console.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraPlan {
    pub names: Vec<String>,
    /// Adapter index of each planned record (by record index).
    pub of_record: Vec<u32>,
}

impl LoraPlan {
    /// The adapter (an index into `names`) of each measured request, in output order.
    pub fn adapters_of(&self, records: &[Record]) -> Vec<u32> {
        records
            .iter()
            .map(|r| self.of_record.get(r.index as usize).copied().unwrap_or(0))
            .collect()
    }
}

/// Per adapter: requests sent, and Python's TTFT and TPOT means over its own requests (the
/// same calculator as the whole run's block). `of_request`: each output's adapter, an index
/// into `names`.
pub fn summaries(
    names: &[String],
    of_request: &[u32],
    outputs: &[RequestOutput],
    settings: &ReportSettings<'_>,
) -> Vec<AdapterSummary> {
    names
        .iter()
        .enumerate()
        .map(|(a, name)| {
            let mine: Vec<RequestOutput> = outputs
                .iter()
                .zip(of_request)
                .filter(|(_, &r)| r == a as u32)
                .map(|(o, _)| o.clone())
                .collect();
            let report = BenchmarkReport::compute(&mine, settings);
            let (completed, ttft, tpot) = match &report.metrics {
                TaskMetrics::Generation { metrics, .. } => (
                    metrics.completed,
                    metrics.ttft.mean_ms,
                    metrics.tpot.mean_ms,
                ),
                TaskMetrics::Pooling(m) => (m.completed, 0.0, 0.0),
            };
            AdapterSummary {
                name: name.clone(),
                requests: mine.len() as u64,
                completed,
                mean_ttft_ms: ttft,
                mean_tpot_ms: tpot,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lora(assignment: LoraAssignment, n: usize) -> LoraConfig {
        LoraConfig {
            modules: (0..n).map(|i| format!("a{i}")).collect(),
            assignment,
        }
    }

    #[test]
    fn round_robin_gives_request_i_adapter_i_mod_n() {
        assert_eq!(
            assign(&lora(LoraAssignment::RoundRobin, 3), 7, 0),
            [0, 1, 2, 0, 1, 2, 0]
        );
    }

    #[test]
    fn random_is_seeded_and_spreads_over_every_adapter() {
        let l = lora(LoraAssignment::Random, 4);
        let a = assign(&l, 4000, 1);
        assert_eq!(a, assign(&l, 4000, 1), "same seed, same draws");
        assert_ne!(a, assign(&l, 4000, 2));
        // CPython: random.seed(1); [random.choice(range(4)) for _ in range(8)]
        assert_eq!(a[..8], [1, 0, 2, 0, 3, 3, 3, 3]);
        for k in 0..4 {
            let n = a.iter().filter(|&&x| x == k).count();
            assert!((900..1100).contains(&n), "adapter {k}: {n} of 4000");
        }
    }

    #[test]
    fn options_bake_the_adapter_into_the_model_field() {
        let base = BodyOptions {
            model: "base".into(),
            ..BodyOptions::default()
        };
        let o = AdapterOptions::new(
            base.clone(),
            Some(&lora(LoraAssignment::RoundRobin, 2)),
            3,
            0,
        );
        assert_eq!(
            (0..4).map(|i| o.of(i).model.as_str()).collect::<Vec<_>>(),
            ["a0", "a1", "a0", "base"]
        );
        assert_eq!(o.base().model, "base");
        let plain = AdapterOptions::new(base, None, 3, 0);
        assert!(!plain.is_lora() && plain.plan(|r| r, 3).is_none());
        assert_eq!(plain.of(1).model, "base");
        // Conversations: records 0..2 are conversation 0, 2..4 conversation 1 (sticky).
        let plan = o.plan(|r| r / 2, 4).unwrap();
        assert_eq!(plan.of_record, [0, 0, 1, 1]);
    }
}
