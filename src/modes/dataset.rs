//! The one dataset dispatch: the validated [`DatasetConfig`](crate::config::DatasetConfig)
//! and the tokenizer in, the run's [`SampleRequest`]s out, every dataset through [`build`].
//! Each dataset lives in its own module of [`crate::datasets`] and takes its own options,
//! which the configuration builds (`config` sits above `datasets` and names their types,
//! so `datasets` never imports `config`); this dispatch adds only what every dataset
//! shares (the run's [`Sampling`], `--max-model-len`, the tokenizer and chat format), which
//! a sweep's points and repetitions change.
//!
//! [`for_run`] is the dispatch a run uses: it also gives a `timed_trace` replay (built from
//! shared prompt fragments, with arrival times, by [`super::trace::TraceReplay`]) and
//! `--multi-turn` conversations, so every dataset reaches the plan through one call, as a
//! [`Loaded`] dataset: described (`--dry-run`) or prepared into every request's bytes and
//! the [`RunDataset`] the runs ask for sessions, arrival times and extras.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::config::{Config, DatasetParams, MultiTurnConfig};
use crate::datasets::align::align_to_server;
use crate::datasets::batched;
use crate::datasets::burstgpt::BurstGpt;
use crate::datasets::chat_format::ChatFormat;
use crate::datasets::conversations::{
    self, ConversationParams, Conversations, ShareGptConversationOptions, SyntheticOptions,
};
use crate::datasets::custom::{Custom, CustomOptions};
use crate::datasets::custom_image::CustomImage;
use crate::datasets::hf::{self, HfOptions};
use crate::datasets::hub_file::{dataset_file, HubAccess};
use crate::datasets::max_model_len::{fits, retain_within};
use crate::datasets::media::ChatMedia;
use crate::datasets::prefix_repetition::{self, PrefixRepetitionOptions};
use crate::datasets::random::{self, RandomConfig, RandomParams};
use crate::datasets::random_mm;
use crate::datasets::sharegpt::{self, ShareGpt, ShareGptOptions};
use crate::datasets::sonnet::{Sonnet, SonnetOptions};
use crate::datasets::speed_bench::SpeedBenchOptions;
use crate::datasets::wav::{self, AudioClip};
use crate::datasets::{spec_bench, speed_bench};
use crate::datasets::{DatasetStats, SampleRequest, Sampling};
use crate::output::stdio::Console;
use crate::tokenizer::{self, TokenizeEndpoint, Tokenizer};
use crate::types::{Backend, DatasetName};

use super::agentic::AgenticReplay;
use super::prepare::{self, Media, PrepareCx, Prepared};
use super::run_dataset::RunDataset;
use super::trace::TraceReplay;

/// A run's dataset as loaded, whichever it is.
pub enum Loaded {
    /// One request per sample (the random family and the files), and with `random-mm`,
    /// `custom_image`, `custom_audio` and ShareGPT's media entries, each one's media.
    Samples(Vec<SampleRequest>, Option<Media>),
    /// `--dataset-name timed_trace`: the trace's records, built later from shared fragments.
    Trace(Box<TraceReplay>),
    /// `--multi-turn`: conversations, each one session.
    Conversations(Conversations),
    /// `--dataset-name agentic_trace`: trees of streams.
    Agentic(Box<AgenticReplay>),
}

impl Loaded {
    /// The `--dry-run` summary.
    pub fn describe(&self) -> String {
        match self {
            Loaded::Samples(r, None) => DatasetStats::from_requests(r).to_string(),
            Loaded::Trace(t) => t.stats().to_string(),
            Loaded::Conversations(c) => super::multi_turn::describe(c),
            Loaded::Agentic(a) => a.describe(),
            Loaded::Samples(r, Some(Media::Chat(mm))) => {
                let items: usize = mm.iter().map(|m| m.parts.len()).sum();
                format!("{}\nContent parts: {items}", DatasetStats::from_requests(r))
            }
            Loaded::Samples(r, Some(Media::Audio(clips))) => {
                let secs: f64 = clips.iter().map(|c| c.duration_s).sum();
                format!("{}\nAudio: {secs:.2} s", DatasetStats::from_requests(r))
            }
        }
    }

    /// Every request's bytes (before the clock), and what the runs ask of the dataset.
    pub fn prepare(&self, cx: &PrepareCx<'_>) -> Result<(Prepared, RunDataset)> {
        match self {
            Loaded::Samples(r, media) => prepare::prepare(cx, r, media.as_ref()),
            Loaded::Trace(t) => prepare::prepare_trace(cx, t),
            Loaded::Conversations(c) => prepare::prepare_conversations(cx, c),
            Loaded::Agentic(a) => prepare::prepare_agentic(cx, a),
        }
    }
}

/// The one dispatch of a run: the dataset `config` names, built with `tokenizer`. Random text
/// prompts are re-aligned to the server's tokenizer through `align` when given (Python 0.33
/// does that for generation backends).
pub fn for_run(
    config: &Config,
    tokenizer: Option<&Tokenizer>,
    align: Option<Arc<dyn TokenizeEndpoint>>,
    console: &Console,
) -> Result<Loaded> {
    if let Some(m) = &config.multi_turn {
        return Ok(Loaded::Conversations(conversations(config, m, tokenizer)?));
    }
    if let DatasetParams::AgenticTrace(_) = &config.dataset.params {
        return Ok(Loaded::Agentic(Box::new(AgenticReplay::load(config)?)));
    }
    if let DatasetParams::TimedTrace(p) = &config.dataset.params {
        return Ok(Loaded::Trace(Box::new(TraceReplay::load(
            config, p, console,
        )?)));
    }
    if let DatasetParams::RandomMm { random, mm } = &config.dataset.params {
        // Python does not re-align random-mm's text to the server's tokenizer.
        let requests = Cx::new(config, tokenizer, console).random(random)?;
        let images = random_mm::items(mm, requests.len(), config.dataset.seed)?;
        let media = images.into_iter().map(ChatMedia::beside_text).collect();
        return Ok(Loaded::Samples(requests, Some(Media::Chat(media))));
    }
    if let (DatasetParams::Custom(p), DatasetName::CustomAudio) =
        (&config.dataset.params, config.dataset.name)
    {
        let (requests, clips) = Cx::new(config, tokenizer, console).custom_audio(*p)?;
        return Ok(Loaded::Samples(requests, Some(Media::Audio(clips))));
    }
    if let (DatasetParams::Custom(p), DatasetName::CustomImage) =
        (&config.dataset.params, config.dataset.name)
    {
        let (requests, media) = Cx::new(config, tokenizer, console).custom_image(*p)?;
        return Ok(Loaded::Samples(requests, Some(Media::Chat(media))));
    }
    if let DatasetParams::ShareGpt(opts) = &config.dataset.params {
        let cx = Cx::new(config, tokenizer, console);
        let data = ShareGpt::load(&sharegpt_path(config.dataset.path.as_deref())?)?;
        if data.has_media() {
            let (requests, media) = cx.sharegpt_media(&data, *opts)?;
            return Ok(Loaded::Samples(requests, Some(Media::Chat(media))));
        }
        let requests = cx.sharegpt_from(&data, *opts)?;
        let requests = within_max_model_len(config, requests, console);
        return Ok(Loaded::Samples(requests, None));
    }
    let mut requests = build(config, tokenizer, console)?;
    if let Some(endpoint) = align {
        if let Some(msg) = align_to_server(&mut requests, endpoint.as_ref()).message() {
            console.line(msg);
        }
    }
    Ok(Loaded::Samples(requests, None))
}

/// The requests of every dataset but `timed_trace`, `--max-model-len` applied.
pub fn build(
    config: &Config,
    tokenizer: Option<&Tokenizer>,
    console: &Console,
) -> Result<Vec<SampleRequest>> {
    let ds = &config.dataset;
    let cx = Cx::new(config, tokenizer, console);
    let requests = match &ds.params {
        // The random dataset applies --max-model-len while it generates.
        DatasetParams::Random(p) => return cx.random(p),
        DatasetParams::RandomRerank {
            random,
            no_reranker,
        } => return cx.random_rerank(random, !no_reranker),
        DatasetParams::ShareGpt(opts) => cx.sharegpt(*opts)?,
        DatasetParams::Custom(p) if ds.name == DatasetName::Custom => cx.custom(*p)?,
        DatasetParams::Sonnet(p) => cx.sonnet(*p)?,
        DatasetParams::PrefixRepetition(p) => cx.prefix_repetition(*p)?,
        DatasetParams::BurstGpt => cx.burstgpt()?,
        DatasetParams::SpecBench {
            output_len,
            category,
        } => cx.spec_bench(*output_len, category.as_deref())?,
        DatasetParams::SpeedBench(p) => cx.speed_bench(p)?,
        DatasetParams::Hf(p) => cx.hf(p)?,
        other => anyhow::bail!(
            "--dataset-name {}: not implemented yet ({other:?})",
            ds.name.name()
        ),
    };
    Ok(within_max_model_len(config, requests, console))
}

/// `--max-model-len`: the requests that fit (the dropped ones are noted).
fn within_max_model_len(
    config: &Config,
    requests: Vec<SampleRequest>,
    console: &Console,
) -> Vec<SampleRequest> {
    match config.dataset.max_model_len {
        Some(max) => {
            let (kept, dropped) = retain_within(requests, max);
            note_dropped(dropped, console);
            kept
        }
        None => requests,
    }
}

/// `--multi-turn`: synthetic conversations from the random dataset's flags, or ShareGPT's
/// conversations with all their turns, as the configuration built them, with the run's
/// [`Sampling`].
pub fn conversations(
    config: &Config,
    m: &MultiTurnConfig,
    tokenizer: Option<&Tokenizer>,
) -> Result<Conversations> {
    let tok = tokenizer::required(tokenizer, "multi-turn conversations")?;
    let sampling = config.dataset_sampling();
    match &m.conversations {
        ConversationParams::Synthetic(p) => {
            conversations::synthetic(&SyntheticOptions::of(p, &sampling), tok)
        }
        ConversationParams::ShareGpt(p) => {
            let path = sharegpt_path(config.dataset.path.as_deref())?;
            let opts = ShareGptConversationOptions::of(p, &sampling);
            Ok(conversations::sharegpt(&path, &opts, tok)?)
        }
    }
}

/// What every dataset builder reads.
struct Cx<'a> {
    config: &'a Config,
    tokenizer: Option<&'a Tokenizer>,
    sampling: Sampling,
    console: &'a Console,
}

impl<'a> Cx<'a> {
    fn new(config: &'a Config, tokenizer: Option<&'a Tokenizer>, console: &'a Console) -> Self {
        Cx {
            config,
            tokenizer,
            sampling: config.dataset_sampling(),
            console,
        }
    }

    fn tok(&self, what: &str) -> Result<&Tokenizer> {
        Ok(tokenizer::required(self.tokenizer, what)?)
    }

    /// `--dataset-path`, or the one line saying what `name` needs there.
    fn path(&self, needs: &str) -> Result<&Path> {
        self.config
            .dataset
            .path
            .as_deref()
            .map(Path::new)
            .with_context(|| {
                format!(
                    "--dataset-name {} needs --dataset-path {needs}",
                    self.config.dataset.name
                )
            })
    }

    /// The tokenizer's chat template with `--chat-template-kwargs`; raw text with
    /// `--skip-chat-template` or without a tokenizer.
    fn chat_format(&self, what: &str) -> Result<ChatFormat> {
        let ds = &self.config.dataset;
        match self.tokenizer {
            Some(tok) if !ds.skip_chat_template => Ok(ChatFormat::of_tokenizer(
                tok,
                ds.chat_template_kwargs.clone(),
                what,
            )?),
            _ => Ok(ChatFormat::raw()),
        }
    }

    fn random(&self, p: &RandomParams) -> Result<Vec<SampleRequest>> {
        let cfg = self.random_config(p);
        let sampled = random::sample(&cfg, self.tok("the random dataset")?)?;
        note_dropped(sampled.filtered, self.console);
        if p.batch_size > 1 {
            return batched::batch(
                &sampled.requests,
                p.batch_size,
                &self.sampling.request_id_prefix,
            );
        }
        Ok(sampled.requests)
    }

    /// `--dataset-name random-rerank`: a query and documents per request.
    fn random_rerank(&self, p: &RandomParams, reranker: bool) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the random-rerank dataset")?;
        batched::random_rerank(&self.random_config(p), p.batch_size, reranker, tok)
    }

    fn random_config(&self, p: &RandomParams) -> RandomConfig {
        RandomConfig::of(p, &self.sampling, self.config.dataset.max_model_len)
    }

    fn sharegpt(&self, opts: ShareGptOptions) -> Result<Vec<SampleRequest>> {
        let data = ShareGpt::load(&sharegpt_path(self.config.dataset.path.as_deref())?)?;
        self.sharegpt_from(&data, opts)
    }

    fn sharegpt_from(&self, data: &ShareGpt, opts: ShareGptOptions) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the sharegpt dataset")?;
        Ok(data.sample(&self.sampling, opts, tok)?)
    }

    /// ShareGPT entries with `image`/`video` keys: each request and its content parts,
    /// `--max-model-len` applied to the pairs.
    fn sharegpt_media(
        &self,
        data: &ShareGpt,
        opts: ShareGptOptions,
    ) -> Result<(Vec<SampleRequest>, Vec<ChatMedia>)> {
        let tok = self.tok("the sharegpt dataset")?;
        let chat = self.config.dataset.enable_multimodal_chat;
        let pairs = data.sample_with_media(&self.sampling, opts, tok, chat)?;
        let before = pairs.len();
        let kept: Vec<_> = match self.config.dataset.max_model_len {
            Some(max) => pairs.into_iter().filter(|(r, _)| fits(r, max)).collect(),
            None => pairs,
        };
        note_dropped(before - kept.len(), self.console);
        Ok(kept.into_iter().unzip())
    }

    /// `custom_audio`: the custom samples and each one's WAV, every distinct file read and
    /// checked once (Python reads them before the run too).
    fn custom_audio(&self, opts: CustomOptions) -> Result<(Vec<SampleRequest>, Vec<AudioClip>)> {
        let data = Custom::load(self.path("FILE.jsonl")?)?;
        let format = self.chat_format("the custom_audio dataset")?;
        let pairs = data.sample_audio(&self.sampling, opts, &format, self.tokenizer)?;
        let files: Vec<&str> = pairs.iter().map(|(_, f)| f.as_str()).collect();
        let per_request = wav::clips(&files)?;
        Ok((pairs.into_iter().map(|(r, _)| r).collect(), per_request))
    }

    /// `custom_image`: the rows' prompts and their image (or interleaved) content parts.
    fn custom_image(&self, p: CustomOptions) -> Result<(Vec<SampleRequest>, Vec<ChatMedia>)> {
        let data = CustomImage::load(self.path("FILE.jsonl")?)?;
        // Python sends `output_len or 0`: -1 would be sent as is, and rejected.
        let output_len = p.output_len.context(
            "--dataset-name custom_image: rows carry no output length; give \
             --custom-output-len N (N > 0)",
        )?;
        Ok(data
            .sample(&self.sampling, output_len, self.tokenizer)?
            .into_iter()
            .unzip())
    }

    fn custom(&self, opts: CustomOptions) -> Result<Vec<SampleRequest>> {
        let data = Custom::load(self.path("FILE.jsonl")?)?;
        self.sample_custom(&data, opts, &self.sampling, "the custom dataset")
    }

    /// The custom dataset's sampling, shared by custom, spec_bench and speed_bench.
    fn sample_custom(
        &self,
        data: &Custom,
        opts: CustomOptions,
        sampling: &Sampling,
        what: &str,
    ) -> Result<Vec<SampleRequest>> {
        let format = self.chat_format(what)?;
        Ok(data.sample(sampling, opts, &format, self.tokenizer)?)
    }

    fn hf(&self, opts: &HfOptions) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the hf dataset")?;
        let path = self.config.dataset.path.as_deref().with_context(|| {
            "--dataset-name hf needs --dataset-path ORG/NAME (a Hub dataset) or a local \
             file or directory"
        })?;
        let data = hf::load(path, opts, &HubAccess::from_env())?;
        let format = if data.is_bfcl() {
            let backend = self.config.server.backend;
            if backend != Backend::OpenaiChat {
                anyhow::bail!(
                    "--dataset-path {path}: the BFCL set sends each request's tool schemas \
                     with chat completions; it needs --backend openai-chat, not {backend}"
                );
            }
            // Python counts with the template when there is one, --skip-chat-template or not.
            let (tok, kwargs) = (tok, self.config.dataset.chat_template_kwargs.clone());
            ChatFormat::of_tokenizer(tok, kwargs, "BFCL").unwrap_or_else(|_| ChatFormat::raw())
        } else if data.is_templated() {
            self.chat_format("the hf dataset")?
        } else {
            ChatFormat::raw()
        };
        Ok(data.sample(&self.sampling, opts.output_len, &format, tok)?)
    }

    fn sonnet(&self, opts: SonnetOptions) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the sonnet dataset")?;
        let data = match self.config.dataset.path.as_deref() {
            Some(path) => Sonnet::load(Path::new(path))?,
            None => Sonnet::builtin(),
        };
        let format = self.chat_format("the sonnet dataset")?;
        Ok(data.sample(&self.sampling, opts, &format, tok)?)
    }

    fn prefix_repetition(&self, opts: PrefixRepetitionOptions) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the prefix_repetition dataset")?;
        Ok(prefix_repetition::sample(&self.sampling, opts, tok)?)
    }

    fn burstgpt(&self) -> Result<Vec<SampleRequest>> {
        let tok = self.tok("the burstgpt dataset")?;
        let data = BurstGpt::load(self.path("BurstGPT.csv")?)?;
        Ok(data.sample(&self.sampling, tok)?)
    }

    fn spec_bench(&self, output_len: usize, category: Option<&str>) -> Result<Vec<SampleRequest>> {
        let data = spec_bench::load(self.path("question.jsonl")?, category)?;
        let sampling = self.seeded(spec_bench::SEED);
        let opts = CustomOptions {
            output_len: Some(output_len),
        };
        self.sample_custom(&data, opts, &sampling, "the spec_bench dataset")
    }

    fn speed_bench(&self, p: &SpeedBenchOptions) -> Result<Vec<SampleRequest>> {
        let dir = self.path(
            "DIR (the directory NeMo-Skills' speed-bench/prepare.py writes, one \
             <subset>.jsonl per split)",
        )?;
        let mut data = speed_bench::load(dir, &p.subset, p.category.as_deref())?;
        if let Some(max) = p.max_input_len {
            data.truncate_prompts(self.tok("--speed-bench-max-input-len")?, max)?;
        }
        let sampling = self.seeded(speed_bench::SEED);
        let opts = CustomOptions {
            output_len: Some(p.output_len),
        };
        self.sample_custom(&data, opts, &sampling, "the speed_bench dataset")
    }

    /// The sampling with a dataset's fixed seed (Python builds some without `--seed`).
    fn seeded(&self, seed: u64) -> Sampling {
        Sampling {
            seed,
            ..self.sampling.clone()
        }
    }
}

fn note_dropped(n: usize, console: &Console) {
    if n > 0 {
        console.note(format_args!("--max-model-len dropped {n} requests"));
    }
}

/// `--dataset-path`, else Python's ShareGPT file from the HF cache (or the Hub).
fn sharegpt_path(path: Option<&str>) -> Result<PathBuf> {
    if let Some(p) = path {
        return Ok(PathBuf::from(p));
    }
    dataset_file(
        &HubAccess::from_env(),
        sharegpt::HUB_DATASET,
        sharegpt::HUB_FILE,
        &format!("pass --dataset-path <path to {}>", sharegpt::HUB_FILE),
    )
    .context("--dataset-name sharegpt without --dataset-path")
}
