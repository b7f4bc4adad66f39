//! The closed sets of values some flags accept (`--backend`, `--dataset-name`, …), with
//! Python's spellings and the facts the rest of the program asks about them (is this backend a
//! pooling one, which endpoint does it use by default).
//!
//! Backend names are matched exactly, as Python does. Dataset names are matched leniently:
//! Python mixes `random-mm` with `timed_trace`, and rejects the other spelling of each; we accept
//! both (`timed-trace` and `timed_trace`) and report the Python spelling.

use clap::ValueEnum;

/// `--backend`: the API the benchmark drives (Python's `ASYNC_REQUEST_FUNCS` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Backend {
    #[value(name = "vllm")]
    Vllm,
    #[value(name = "openai")]
    Openai,
    #[value(name = "openai-chat")]
    OpenaiChat,
    #[value(name = "openai-responses")]
    OpenaiResponses,
    // Anthropic's Messages API (`/v1/messages`, which vLLM also serves); not in Python.
    #[value(name = "anthropic-messages")]
    AnthropicMessages,
    #[value(name = "openai-audio")]
    OpenaiAudio,
    #[value(name = "openai-embeddings")]
    OpenaiEmbeddings,
    #[value(name = "openai-embeddings-chat")]
    OpenaiEmbeddingsChat,
    #[value(name = "openai-embeddings-clip")]
    OpenaiEmbeddingsClip,
    #[value(name = "openai-embeddings-vlm2vec")]
    OpenaiEmbeddingsVlm2vec,
    #[value(name = "infinity-embeddings")]
    InfinityEmbeddings,
    #[value(name = "infinity-embeddings-clip")]
    InfinityEmbeddingsClip,
    #[value(name = "vllm-pooling")]
    VllmPooling,
    #[value(name = "vllm-rerank")]
    VllmRerank,
}

impl Backend {
    /// The name as given on the command line and written to the result JSON.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Vllm => "vllm",
            Backend::Openai => "openai",
            Backend::OpenaiChat => "openai-chat",
            Backend::OpenaiResponses => "openai-responses",
            Backend::AnthropicMessages => "anthropic-messages",
            Backend::OpenaiAudio => "openai-audio",
            Backend::OpenaiEmbeddings => "openai-embeddings",
            Backend::OpenaiEmbeddingsChat => "openai-embeddings-chat",
            Backend::OpenaiEmbeddingsClip => "openai-embeddings-clip",
            Backend::OpenaiEmbeddingsVlm2vec => "openai-embeddings-vlm2vec",
            Backend::InfinityEmbeddings => "infinity-embeddings",
            Backend::InfinityEmbeddingsClip => "infinity-embeddings-clip",
            Backend::VllmPooling => "vllm-pooling",
            Backend::VllmRerank => "vllm-rerank",
        }
    }

    /// Every backend, in `--help` order.
    pub fn all() -> &'static [Backend] {
        Backend::value_variants()
    }

    /// Pooling backends (Python's `POOLING_BACKENDS`): non-streaming, E2EL-only metrics, no
    /// sampling parameters.
    pub fn is_pooling(self) -> bool {
        matches!(
            self,
            Backend::OpenaiEmbeddings
                | Backend::OpenaiEmbeddingsChat
                | Backend::OpenaiEmbeddingsClip
                | Backend::OpenaiEmbeddingsVlm2vec
                | Backend::InfinityEmbeddings
                | Backend::InfinityEmbeddingsClip
                | Backend::VllmPooling
                | Backend::VllmRerank
        )
    }

    /// Python's `OPENAI_COMPATIBLE_BACKENDS`: the completions, chat and responses backends,
    /// the only ones that take sampling parameters and get `ignore_eos` forced on for random
    /// datasets.
    pub fn is_openai_compatible(self) -> bool {
        matches!(
            self,
            Backend::Vllm | Backend::Openai | Backend::OpenaiChat | Backend::OpenaiResponses
        )
    }

    /// Backends whose request carries the prompt as chat `messages` a conversation can grow
    /// (`--multi-turn`), and which the server renders with its chat template (so datasets
    /// send raw text, not a rendered prompt).
    pub fn sends_chat_messages(self) -> bool {
        matches!(self, Backend::OpenaiChat | Backend::AnthropicMessages)
    }

    /// The endpoint used when `--endpoint` is not given. Python always defaults to
    /// `/v1/completions` (so every other backend needs `--endpoint`); we pick the path the
    /// backend's server actually serves.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Backend::Vllm | Backend::Openai => "/v1/completions",
            Backend::OpenaiChat => "/v1/chat/completions",
            Backend::OpenaiResponses => "/v1/responses",
            Backend::AnthropicMessages => "/v1/messages",
            Backend::OpenaiAudio => "/v1/audio/transcriptions",
            Backend::OpenaiEmbeddings
            | Backend::OpenaiEmbeddingsChat
            | Backend::OpenaiEmbeddingsClip
            | Backend::OpenaiEmbeddingsVlm2vec => "/v1/embeddings",
            Backend::InfinityEmbeddings | Backend::InfinityEmbeddingsClip => "/embeddings",
            Backend::VllmPooling => "/pooling",
            Backend::VllmRerank => "/rerank",
        }
    }

    /// The endings Python's request function accepts for the request URL
    /// (`_validate_api_url`): any other endpoint fails every request.
    pub fn endpoint_suffixes(self) -> &'static [&'static str] {
        match self {
            Backend::Vllm | Backend::Openai => &["completions"],
            Backend::OpenaiChat => &["chat/completions"],
            Backend::OpenaiResponses => &["responses"],
            Backend::AnthropicMessages => &["messages"],
            Backend::OpenaiAudio => &["transcriptions", "translations"],
            Backend::OpenaiEmbeddings
            | Backend::OpenaiEmbeddingsChat
            | Backend::OpenaiEmbeddingsClip
            | Backend::OpenaiEmbeddingsVlm2vec
            | Backend::InfinityEmbeddings
            | Backend::InfinityEmbeddingsClip => &["embeddings"],
            Backend::VllmPooling => &["pooling"],
            Backend::VllmRerank => &["rerank"],
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--dataset-name`: where the prompts come from. Python's choices plus `sonnet` (from the
/// vllm-bench reference); both `_` and `-` spellings are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum DatasetName {
    #[value(name = "sharegpt")]
    Sharegpt,
    #[value(name = "burstgpt")]
    Burstgpt,
    #[value(name = "random")]
    Random,
    #[value(name = "random-mm", alias = "random_mm")]
    RandomMm,
    #[value(name = "random-rerank", alias = "random_rerank")]
    RandomRerank,
    #[value(name = "hf")]
    Hf,
    #[value(name = "custom")]
    Custom,
    #[value(name = "custom_audio", alias = "custom-audio")]
    CustomAudio,
    #[value(name = "custom_image", alias = "custom-image")]
    CustomImage,
    #[value(name = "prefix_repetition", alias = "prefix-repetition")]
    PrefixRepetition,
    #[value(name = "spec_bench", alias = "spec-bench")]
    SpecBench,
    #[value(name = "speed_bench", alias = "speed-bench")]
    SpeedBench,
    #[value(name = "timed_trace", alias = "timed-trace")]
    TimedTrace,
    #[value(name = "sonnet")]
    Sonnet,
}

impl DatasetName {
    /// Python's spelling of the name.
    pub fn name(self) -> &'static str {
        match self {
            DatasetName::Sharegpt => "sharegpt",
            DatasetName::Burstgpt => "burstgpt",
            DatasetName::Random => "random",
            DatasetName::RandomMm => "random-mm",
            DatasetName::RandomRerank => "random-rerank",
            DatasetName::Hf => "hf",
            DatasetName::Custom => "custom",
            DatasetName::CustomAudio => "custom_audio",
            DatasetName::CustomImage => "custom_image",
            DatasetName::PrefixRepetition => "prefix_repetition",
            DatasetName::SpecBench => "spec_bench",
            DatasetName::SpeedBench => "speed_bench",
            DatasetName::TimedTrace => "timed_trace",
            DatasetName::Sonnet => "sonnet",
        }
    }

    /// Every dataset, in `--help` order.
    pub fn all() -> &'static [DatasetName] {
        DatasetName::value_variants()
    }

    /// Synthetic datasets that generate their prompts and therefore take no `--dataset-path`.
    pub fn is_synthetic(self) -> bool {
        matches!(
            self,
            DatasetName::Random
                | DatasetName::RandomMm
                | DatasetName::RandomRerank
                | DatasetName::PrefixRepetition
        )
    }
}

impl std::fmt::Display for DatasetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--lora-assignment`: how requests are spread over `--lora-modules`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoraAssignment {
    // Uniformly at random, seeded by `--seed`.
    #[value(name = "random")]
    Random,
    // Request `i` gets adapter `i % N`.
    #[value(name = "round-robin")]
    RoundRobin,
}

/// `--replica-affinity`: how sessions are spread over the servers of a repeated `--base-url`
/// (docs/servers.md, "Several replicas").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ReplicaAffinity {
    // Session `i` (in schedule order) on replica `i mod R`.
    #[default]
    #[value(name = "round-robin")]
    RoundRobin,
    // Sessions whose first requests' bodies start with the same bytes on one replica.
    #[value(name = "session")]
    Session,
}

/// `--ramp-up-strategy`: how the request rate grows from the start to the end RPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RampUpStrategy {
    #[value(name = "linear")]
    Linear,
    #[value(name = "exponential")]
    Exponential,
}

/// A rate ramp (`--ramp-up-strategy`, `--ramp-up-start-rps`, `--ramp-up-end-rps`): the one
/// type validation produces, the schedule follows, and the preamble and result JSON show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RampUp {
    pub strategy: RampUpStrategy,
    pub start_rps: u64,
    pub end_rps: u64,
}

impl RampUpStrategy {
    /// The name as written to the result JSON (`ramp_up_strategy`).
    pub fn name(self) -> &'static str {
        match self {
            RampUpStrategy::Linear => "linear",
            RampUpStrategy::Exponential => "exponential",
        }
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

    #[test]
    fn every_endpoint_default_passes_its_own_suffix_check() {
        for b in Backend::all() {
            let ep = b.default_endpoint();
            assert!(
                b.endpoint_suffixes().iter().any(|s| ep.ends_with(s)),
                "{b}: {ep}"
            );
        }
    }

    #[test]
    fn pooling_and_openai_compatible_are_disjoint() {
        for b in Backend::all() {
            assert!(!(b.is_pooling() && b.is_openai_compatible()), "{b}");
        }
        assert!(Backend::VllmRerank.is_pooling());
        assert!(!Backend::OpenaiAudio.is_pooling());
        assert!(!Backend::OpenaiAudio.is_openai_compatible());
    }
}
