//! The closed sets of values some flags accept (`--backend`, `--dataset-name`, …): clap's view
//! of the shared vocabulary in [`crate::types`], and the choices only the command line knows.
//!
//! The shared types carry their own spelling table (`name()`, `all()`); the `ValueEnum` impls
//! here read it, so a name is written once and the bottom `types` module needs no clap. The
//! dataset names' other separator (`timed-trace` for `timed_trace`) is an alias the parser
//! accepts, as Python's spelling is not uniform.

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::types::{Backend, DatasetName, LoraAssignment, RampUpStrategy, ReplicaAffinity};

impl ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        Backend::all()
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for DatasetName {
    fn value_variants<'a>() -> &'a [Self] {
        DatasetName::all()
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let value = PossibleValue::new(self.name());
        Some(match other_spelling(*self) {
            Some(alias) => value.alias(alias),
            None => value,
        })
    }
}

/// The spelling of a dataset name with the other separator, accepted as well.
fn other_spelling(d: DatasetName) -> Option<&'static str> {
    Some(match d {
        DatasetName::RandomMm => "random_mm",
        DatasetName::RandomRerank => "random_rerank",
        DatasetName::CustomAudio => "custom-audio",
        DatasetName::CustomImage => "custom-image",
        DatasetName::PrefixRepetition => "prefix-repetition",
        DatasetName::SpecBench => "spec-bench",
        DatasetName::SpeedBench => "speed-bench",
        DatasetName::TimedTrace => "timed-trace",
        DatasetName::AgenticTrace => "agentic-trace",
        DatasetName::Sharegpt
        | DatasetName::Burstgpt
        | DatasetName::Random
        | DatasetName::Hf
        | DatasetName::Custom
        | DatasetName::Sonnet => return None,
    })
}

impl ValueEnum for LoraAssignment {
    fn value_variants<'a>() -> &'a [Self] {
        LoraAssignment::all()
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for ReplicaAffinity {
    fn value_variants<'a>() -> &'a [Self] {
        ReplicaAffinity::all()
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for RampUpStrategy {
    fn value_variants<'a>() -> &'a [Self] {
        RampUpStrategy::all()
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

/// `--speed-bench-dataset-subset` (alias `--speed-bench-config`): the SPEED-Bench split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpeedBenchSubset {
    #[value(name = "qualitative")]
    Qualitative,
    #[value(name = "throughput_1k", alias = "throughput-1k")]
    Throughput1k,
    #[value(name = "throughput_2k", alias = "throughput-2k")]
    Throughput2k,
    #[value(name = "throughput_8k", alias = "throughput-8k")]
    Throughput8k,
    #[value(name = "throughput_16k", alias = "throughput-16k")]
    Throughput16k,
    #[value(name = "throughput_32k", alias = "throughput-32k")]
    Throughput32k,
}

/// `--timed-trace-format`: which trace layout to read (`auto` recognises it from the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceFormatChoice {
    /// Recognise the format from the file's first line.
    Auto,
    /// Mooncake JSONL (`timestamp` ms, `input_length`, `output_length`, `hash_ids`).
    Mooncake,
    /// Alibaba Bailian JSONL (`chat_id`, `parent_chat_id`, `turn`, 16-token blocks).
    Bailian,
    /// Azure LLM inference CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`).
    Azure,
    /// BurstGPT CSV (`Timestamp`, `Model`, `Request tokens`, `Response tokens`, ...).
    Burstgpt,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_clap() {
        for b in Backend::all() {
            assert_eq!(Backend::from_str(b.name(), false).as_ref(), Ok(b));
        }
        for d in DatasetName::all() {
            assert_eq!(DatasetName::from_str(d.name(), false).as_ref(), Ok(d));
        }
    }

    #[test]
    fn every_other_spelling_swaps_the_separator() {
        for d in DatasetName::all() {
            let name = d.name();
            let swapped: String = name
                .chars()
                .map(|c| match c {
                    '-' => '_',
                    '_' => '-',
                    c => c,
                })
                .collect();
            let expected = (swapped != name).then_some(swapped);
            assert_eq!(other_spelling(*d).map(String::from), expected, "{d}");
        }
    }

    #[test]
    fn dataset_names_accept_both_separators() {
        assert_eq!(
            DatasetName::from_str("timed-trace", false),
            Ok(DatasetName::TimedTrace)
        );
        assert_eq!(
            DatasetName::from_str("random_mm", false),
            Ok(DatasetName::RandomMm)
        );
        assert!(Backend::from_str("openai_chat", false).is_err());
    }
}
