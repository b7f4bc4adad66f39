//! The vocabulary every layer shares: the backend and dataset names, the LoRA assignment and
//! the rate ramp, with Python's spellings and the facts the rest of the program asks about them
//! (is this backend a pooling one, which endpoint does it use by default).
//!
//! This is the bottom floor: it imports nothing from the crate, so the engine, metrics,
//! output and modes name these types without reaching up into the command line. The command
//! line (`cli`) parses them through these `name()` tables (its `ValueEnum` impls), so each
//! spelling is written once.
//!
//! Backend names are matched exactly, as Python does. Dataset names are matched leniently:
//! Python mixes `random-mm` with `timed_trace`, and rejects the other spelling of each; we accept
//! both (`timed-trace` and `timed_trace`) and report the Python spelling.

/// `--backend`: the API the benchmark drives (Python's `ASYNC_REQUEST_FUNCS` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Vllm,
    Openai,
    OpenaiChat,
    OpenaiResponses,
    // Anthropic's Messages API (`/v1/messages`, which vLLM also serves); not in Python.
    AnthropicMessages,
    OpenaiAudio,
    OpenaiEmbeddings,
    OpenaiEmbeddingsChat,
    OpenaiEmbeddingsClip,
    OpenaiEmbeddingsVlm2vec,
    InfinityEmbeddings,
    InfinityEmbeddingsClip,
    VllmPooling,
    VllmRerank,
}

impl Backend {
    /// Every backend, in `--help` order.
    const ALL: [Backend; 14] = [
        Backend::Vllm,
        Backend::Openai,
        Backend::OpenaiChat,
        Backend::OpenaiResponses,
        Backend::AnthropicMessages,
        Backend::OpenaiAudio,
        Backend::OpenaiEmbeddings,
        Backend::OpenaiEmbeddingsChat,
        Backend::OpenaiEmbeddingsClip,
        Backend::OpenaiEmbeddingsVlm2vec,
        Backend::InfinityEmbeddings,
        Backend::InfinityEmbeddingsClip,
        Backend::VllmPooling,
        Backend::VllmRerank,
    ];

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
        &Backend::ALL
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DatasetName {
    Sharegpt,
    Burstgpt,
    Random,
    RandomMm,
    RandomRerank,
    Hf,
    Custom,
    CustomAudio,
    CustomImage,
    PrefixRepetition,
    SpecBench,
    SpeedBench,
    TimedTrace,
    AgenticTrace,
    Sonnet,
}

impl DatasetName {
    /// Every dataset, in `--help` order.
    const ALL: [DatasetName; 15] = [
        DatasetName::Sharegpt,
        DatasetName::Burstgpt,
        DatasetName::Random,
        DatasetName::RandomMm,
        DatasetName::RandomRerank,
        DatasetName::Hf,
        DatasetName::Custom,
        DatasetName::CustomAudio,
        DatasetName::CustomImage,
        DatasetName::PrefixRepetition,
        DatasetName::SpecBench,
        DatasetName::SpeedBench,
        DatasetName::TimedTrace,
        DatasetName::AgenticTrace,
        DatasetName::Sonnet,
    ];

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
            DatasetName::AgenticTrace => "agentic_trace",
            DatasetName::Sonnet => "sonnet",
        }
    }

    /// Every dataset, in `--help` order.
    pub fn all() -> &'static [DatasetName] {
        &DatasetName::ALL
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoraAssignment {
    // Uniformly at random, seeded by `--seed`.
    Random,
    // Request `i` gets adapter `i % N`.
    RoundRobin,
}

impl LoraAssignment {
    /// Every assignment, in `--help` order.
    pub fn all() -> &'static [LoraAssignment] {
        &[LoraAssignment::Random, LoraAssignment::RoundRobin]
    }

    /// The name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LoraAssignment::Random => "random",
            LoraAssignment::RoundRobin => "round-robin",
        }
    }
}

/// `--replica-affinity`: how sessions are spread over the servers of a repeated `--base-url`
/// (docs/servers.md, "Several replicas").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicaAffinity {
    /// Session `i` (in schedule order) on replica `i mod R`.
    #[default]
    RoundRobin,
    /// Sessions whose first requests' bodies start with the same bytes on one replica.
    Session,
}

impl ReplicaAffinity {
    /// Every affinity, in `--help` order.
    pub fn all() -> &'static [ReplicaAffinity] {
        &[ReplicaAffinity::RoundRobin, ReplicaAffinity::Session]
    }

    /// The name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaAffinity::RoundRobin => "round-robin",
            ReplicaAffinity::Session => "session",
        }
    }
}

/// `--ramp-up-strategy`: how the request rate grows from the start to the end RPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RampUpStrategy {
    Linear,
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
    /// Every strategy, in `--help` order.
    pub fn all() -> &'static [RampUpStrategy] {
        &[RampUpStrategy::Linear, RampUpStrategy::Exponential]
    }

    /// The name as written to the result JSON (`ramp_up_strategy`).
    pub fn name(self) -> &'static str {
        match self {
            RampUpStrategy::Linear => "linear",
            RampUpStrategy::Exponential => "exponential",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
