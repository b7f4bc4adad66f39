//! The validated configuration of a run: every default resolved, every rule checked, one
//! sub-struct per concern, so nothing downstream re-reads flags or re-checks them.
//!
//! [`Config::from_cli`] applies the rules of Python's `vllm bench serve` (`serve.py`
//! `main_async`, the dataset and request functions) up front, each failing with one line
//! (`--flag VALUE: reason`, exit code 2), then refuses what is accepted but not implemented yet
//! ([`crate::cli::unimplemented::UNIMPLEMENTED`]). Notes that do not stop the run land in
//! [`Config::warnings`].

mod dataset;
mod engine;
mod error;
mod literal;
mod modes;
mod output;
mod parse;
mod rate;
mod request;
mod server;
mod server_metrics;
pub mod shard;
pub mod slo;
pub mod unimplemented;

pub use dataset::{DatasetConfig, DatasetParams, TimedTraceParams};
pub use engine::EngineConfig;
pub use error::{ConfigError, ConfigErrorKind};
/// The `--random-mm-bucket-config` parser, public only so that the fuzz targets (`fuzz/`)
/// and their corpus replay (`tests/fuzz_corpus.rs`) reach it directly; the CLI goes
/// through [`Config::from_cli`].
pub use literal::parse_bucket_config;
pub use literal::BucketKey;
pub use modes::{
    LoraConfig, MultiRunConfig, MultiTurnConfig, ProfileWhen, RunKind, SteadyStateConfig,
    SweepAxis, SweepConfig,
};
pub use output::{OutputConfig, ReportPolicy, RunPlots, Ui};
pub use rate::{CancelConfig, RateConfig};
pub use request::{RequestOptions, SamplingParams};
pub use server::{ServerConfig, ServerLocation};
pub use server_metrics::ServerMetricsConfig;
pub use slo::{SearchVariable, SloConfig, SloStat, SloTerm};

/// The server's base URL type, owned by the HTTP client; re-exported for `ServerLocation`.
pub use crate::http::url::{BaseUrl, Scheme};

pub use crate::cli::{
    Backend, DatasetName, LoraAssignment, RampUp, RampUpStrategy, SpeedBenchSubset,
};

use std::path::PathBuf;

use crate::cli::{Cli, Invocation};

/// What the program does, decided once from the command line: `app` dispatches on it and
/// nothing else looks at argv or at the flags that select a mode.
#[derive(Debug)]
pub enum Mode {
    /// A benchmark: one point, a sweep's points or repeated runs.
    Bench(Box<Config>),
    /// `--dry-run`: build the dataset, describe it, send nothing.
    DryRun(Box<Config>),
    /// `--compare FILE...`: the table of saved results, after the notes the flags left.
    Compare {
        files: Vec<PathBuf>,
        warnings: Vec<String>,
    },
    /// `--plot-summary FILE`: the page of a sweep summary or a `--num-runs` result.
    PlotSummary(PathBuf),
    /// `vllm-bench merge`: the results of a sharded run's shards, merged.
    Merge(MergeConfig),
    /// `vllm-bench synthesize agentic`: a synthetic corpus written to `output`.
    Synthesize {
        params: crate::datasets::agentic::synthesize::SynthesisParams,
        output: PathBuf,
    },
}

/// What `vllm-bench merge` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeConfig {
    pub files: Vec<PathBuf>,
    pub result_dir: Option<PathBuf>,
    pub result_filename: Option<String>,
    /// `--export-requests FILE`: the merged run's requests, one row each.
    pub export_requests: Option<crate::output::request_export::RequestExport>,
}

/// Resolves and validates what the command line asks for. Errors are one line and mean exit
/// code 2.
pub fn resolve(invocation: Invocation) -> Result<Mode, ConfigError> {
    match invocation {
        Invocation::Run(cli) => Ok(Config::from_cli(*cli)?.mode()),
        Invocation::Merge(m) => Ok(Mode::Merge(MergeConfig {
            files: m.files,
            result_dir: m.result_dir,
            result_filename: m.result_filename,
            export_requests: output::export_requests(m.export_requests.as_deref())?,
        })),
        Invocation::Synthesize(a) => {
            if a.max_isl < 2 {
                return Err(ConfigError::flag(
                    &format!("--max-isl {}", a.max_isl),
                    "must be at least 2 tokens",
                ));
            }
            Ok(Mode::Synthesize {
                params: crate::datasets::agentic::synthesize::SynthesisParams {
                    sessions: a.num_sessions,
                    seed: a.seed,
                    max_prompt_tokens: a.max_isl,
                    max_output_tokens: a.max_osl,
                },
                output: a.output,
            })
        }
    }
}

/// Model and tokenizer selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// `None`: ask the server (`/v1/models`) for its first model.
    pub model: Option<String>,
    /// The name sent in requests, when it differs from `model`.
    pub served_model_name: Option<String>,
    pub tokenizer: Option<String>,
    /// Passed through to the tokenizer loader (auto, hf, slow, mistral, ...).
    pub tokenizer_mode: String,
    pub trust_remote_code: bool,
    pub skip_tokenizer_init: bool,
}

impl ModelConfig {
    /// Python's `tokenizer_id`: `--tokenizer`, else the model; `None` with
    /// `--skip-tokenizer-init` (or before the model is known).
    pub fn tokenizer_id(&self) -> Option<&str> {
        if self.skip_tokenizer_init {
            return None;
        }
        self.tokenizer.as_deref().or(self.model.as_deref())
    }
}

/// A complete, validated run configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerConfig,
    pub model: ModelConfig,
    pub dataset: DatasetConfig,
    pub rate: RateConfig,
    pub sampling: SamplingParams,
    pub request: RequestOptions,
    pub output: OutputConfig,
    pub steady_state: SteadyStateConfig,
    /// How each run is reported: save, append, detailed, plots, profiling, quiet.
    pub report: ReportPolicy,
    /// `--no-server-metrics`, `--server-metrics-interval`, `--server-metrics-url`.
    pub server_metrics: ServerMetricsConfig,
    /// The measured runs: one, repetitions, a sweep's points or an SLO search.
    pub runs: RunKind,
    pub multi_turn: Option<MultiTurnConfig>,
    pub lora: Option<LoraConfig>,
    pub multi_run: MultiRunConfig,
    pub engine: EngineConfig,
    /// `--shard`, `--start-at`: this process's share of a run split over several.
    pub shard: shard::ShardConfig,
    /// `--dry-run`: build the dataset, print its statistics, send nothing.
    pub dry_run: bool,
    /// Notes for the user that do not stop the run (print them before starting).
    pub warnings: Vec<String>,
}

#[cfg(test)]
impl Config {
    /// The configuration of `vllm-bench ARGS` (for the tests of the steps above `config`,
    /// which take a resolved configuration, not flags).
    pub fn of_args(args: &[&str]) -> Config {
        let cli = crate::cli::parse_from(std::iter::once("vllm-bench").chain(args.iter().copied()))
            .expect("valid flags");
        Config::from_cli(cli).expect("valid config")
    }
}

impl Config {
    /// The cap on requests in flight: `--multi-turn-concurrency` (conversations in flight,
    /// each one request at a time) before `--max-concurrency`.
    pub fn max_in_flight(&self) -> Option<usize> {
        self.multi_turn
            .as_ref()
            .and_then(|m| m.concurrency)
            .or(self.rate.max_concurrency)
    }

    /// How long one scrape of `/metrics` may take: [`server_metrics::SCRAPE_TIMEOUT`], or the
    /// request timeout when that is shorter (a control-plane wait never outlasts a request's).
    pub fn scrape_timeout(&self) -> std::time::Duration {
        server_metrics::SCRAPE_TIMEOUT.min(self.engine.request_timeout)
    }

    /// The mode this configuration selects: `--compare` before `--plot-summary` (each
    /// refuses the other flags), then `--dry-run`, else a benchmark.
    pub fn mode(self) -> Mode {
        if let Some(files) = self.multi_run.compare.clone() {
            return Mode::Compare {
                files,
                warnings: self.warnings,
            };
        }
        if let Some(file) = self.output.plot_summary.clone() {
            return Mode::PlotSummary(file);
        }
        if self.dry_run {
            return Mode::DryRun(Box::new(self));
        }
        Mode::Bench(Box::new(self))
    }

    /// How the run's dataset picks its samples: `--num-prompts`, `--seed`,
    /// `--disable-shuffle`, `--no-oversample`, `--request-id-prefix` (a sweep's point or a
    /// repetition reads it after changing the count or the seed).
    pub fn dataset_sampling(&self) -> crate::datasets::Sampling {
        let ds = &self.dataset;
        crate::datasets::Sampling {
            num_requests: ds.num_prompts,
            seed: ds.seed,
            shuffle: !ds.disable_shuffle,
            oversample: !ds.no_oversample,
            request_id_prefix: self.request.request_id_prefix.clone(),
        }
    }

    /// Resolves and validates `cli`. Errors are one line and mean exit code 2.
    pub fn from_cli(cli: Cli) -> Result<Config, ConfigError> {
        let mut warnings = cli.warnings().to_vec();
        // First: with --compare every other flag is refused, and that is the line to show.
        let multi_run = modes::multi_run(&cli)?;
        let server = server::resolve(&cli, &mut warnings)?;
        let model = model(&cli)?;
        let dataset = dataset::resolve(&cli, server.backend)?;
        check_dataset_backend(dataset.name, server.backend)?;
        check_agentic_backend(dataset.name, server.backend)?;
        check_multimodal_chat(&dataset)?;
        let rate = rate::resolve(&cli)?;
        let sampling = request::sampling(&cli, &mut warnings)?;
        let request = request::options(&cli, &sampling)?;
        let output = output::resolve(&cli, &mut warnings)?;
        let plots = output::run_plots(&cli)?;
        let sweep = modes::sweep(&cli)?;
        let steady_state = modes::steady_state(&cli, &rate, sweep.as_ref(), &mut warnings)?;
        let report = output::report_policy(&cli, plots, modes::profiling(&cli)?);
        let server_metrics = server_metrics::resolve(&cli)?;
        let multi_turn = modes::multi_turn(&cli, &dataset.params)?;
        let lora = modes::lora(&cli)?;
        let slo = slo::resolve(&slo::Context {
            cli: &cli,
            task: crate::metrics::report::TaskKind::for_backend(server.backend),
            num_prompts: dataset.num_prompts,
            goodput_given: !output.goodput.is_empty(),
            self_timed: rate.self_timed,
            capped: rate.max_concurrency.is_some()
                || multi_turn.as_ref().is_some_and(|m| m.concurrency.is_some()),
        })?;
        output::check_result_filename(
            &output,
            plots,
            sweep.as_ref(),
            cli.multi_run.num_runs,
            slo.as_ref().map(|s| s.variable),
        )?;
        let mut output = output;
        if let Some(s) = &slo {
            s.add_reported(
                &mut output.percentile_metrics,
                &mut output.metric_percentiles,
            );
        }
        let engine = engine::resolve(&cli)?;
        let shard = shard::resolve(&cli)?;
        let dry_run = cli.request.dry_run;
        // The embedded mock is part of this process: asking it for its model sends nothing.
        let mock = server.location == ServerLocation::EmbeddedMock;
        if dry_run && !mock && model.model.is_none() && model.tokenizer.is_none() {
            return Err(ConfigError::flag(
                "--dry-run",
                "needs --model or --tokenizer (no server is asked for its model)",
            ));
        }
        unimplemented::check(&cli)?;
        Ok(Config {
            server,
            model,
            dataset,
            rate,
            sampling,
            request,
            output,
            steady_state,
            report,
            server_metrics,
            runs: RunKind::of(cli.multi_run.num_runs, sweep, slo),
            multi_turn,
            lora,
            multi_run,
            engine,
            shard,
            dry_run,
            warnings,
        })
    }
}

fn model(cli: &Cli) -> Result<ModelConfig, ConfigError> {
    let m = &cli.model;
    for (flag, v) in [
        ("--model", &m.model),
        ("--served-model-name", &m.served_model_name),
        ("--tokenizer", &m.tokenizer),
    ] {
        if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(ConfigError::value(flag, "", "cannot be empty"));
        }
        if let Some(name) = v {
            parse::no_control(flag, name)?;
        }
    }
    Ok(ModelConfig {
        model: m.model.clone(),
        served_model_name: m.served_model_name.clone(),
        tokenizer: m.tokenizer.clone(),
        tokenizer_mode: m.tokenizer_mode.clone(),
        trust_remote_code: m.trust_remote_code,
        skip_tokenizer_init: m.skip_tokenizer_init,
    })
}

/// `--enable-multimodal-chat` is implemented for ShareGPT's `image`/`video` entries only.
fn check_multimodal_chat(dataset: &DatasetConfig) -> Result<(), ConfigError> {
    if dataset.enable_multimodal_chat && dataset.name != DatasetName::Sharegpt {
        return Err(ConfigError::flag(
            "--enable-multimodal-chat",
            format!(
                "implemented for --dataset-name sharegpt only (not yet for {}); remove it",
                dataset.name.name()
            ),
        ));
    }
    Ok(())
}

/// The agentic replay sends each turn's history as role-tagged chat messages.
fn check_agentic_backend(dataset: DatasetName, backend: Backend) -> Result<(), ConfigError> {
    if dataset == DatasetName::AgenticTrace && backend != Backend::OpenaiChat {
        return Err(ConfigError::flag(
            "--dataset-name agentic_trace",
            format!(
                "needs --backend openai-chat (each turn is system/user/assistant messages), \
                 not {backend}"
            ),
        ));
    }
    Ok(())
}

/// Python: timed_trace sends token-id prompts and needs a completions backend. We also
/// replay to chat, whose messages carry the prompt decoded to text.
fn check_dataset_backend(dataset: DatasetName, backend: Backend) -> Result<(), ConfigError> {
    if dataset == DatasetName::TimedTrace
        && !matches!(
            backend,
            Backend::Vllm | Backend::Openai | Backend::OpenaiChat
        )
    {
        return Err(ConfigError::flag(
            "--dataset-name timed_trace",
            format!(
                "needs --backend vllm, openai or openai-chat (its prompts are token ids or \
                 their decoded text), not {backend}"
            ),
        ));
    }
    if dataset == DatasetName::RandomRerank && !backend.is_pooling() {
        return Err(ConfigError::flag(
            "--dataset-name random-rerank",
            format!(
                "builds scoring requests (a query and documents) for --backend vllm-rerank or \
                 an embeddings/pooling backend, not {backend}"
            ),
        ));
    }
    // Python's openai-audio raises on anything but a custom_audio sample, and its chat
    // backends cannot serialize custom_audio's decoded audio: every request would fail.
    if backend == Backend::OpenaiAudio && dataset != DatasetName::CustomAudio {
        return Err(ConfigError::flag(
            "--backend openai-audio",
            format!(
                "needs --dataset-name custom_audio (it uploads each row's audio file), not {}",
                dataset.name()
            ),
        ));
    }
    if dataset == DatasetName::CustomAudio && backend != Backend::OpenaiAudio {
        return Err(ConfigError::flag(
            "--dataset-name custom_audio",
            format!("needs --backend openai-audio, not {backend}"),
        ));
    }
    Ok(())
}
