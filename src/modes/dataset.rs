//! The one dataset dispatch: the validated [`DatasetConfig`] and the tokenizer in, the run's
//! [`SampleRequest`]s out, every dataset through [`build`]. Each dataset lives in its own
//! module of [`crate::datasets`] and takes its own small options; this is the only place
//! that maps the configuration onto them, so `datasets` never imports `config`.
//!
//! `timed_trace` is the exception for now: its replay shares prompt fragments between
//! requests and carries arrival times, so it is built by [`super::trace::TraceReplay`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::cli::{Backend, DatasetName};
use crate::config::{Config, DatasetParams};
use crate::datasets::burstgpt::BurstGpt;
use crate::datasets::chat_format::ChatFormat;
use crate::datasets::custom::{Custom, CustomOptions};
use crate::datasets::hub_file::{dataset_file, HubAccess};
use crate::datasets::max_model_len::retain_within;
use crate::datasets::prefix_repetition::{self, PrefixRepetitionOptions};
use crate::datasets::random::{self, RandomConfig};
use crate::datasets::sharegpt::{self, ShareGpt, ShareGptOptions};
use crate::datasets::sonnet::{Sonnet, SonnetOptions};
use crate::datasets::{spec_bench, speed_bench};
use crate::datasets::{SampleRequest, Sampling};
use crate::tokenizer::{self, Tokenizer};

/// The requests of every dataset but `timed_trace`, `--max-model-len` applied.
pub fn build(config: &Config, tokenizer: Option<&Tokenizer>) -> Result<Vec<SampleRequest>> {
    let ds = &config.dataset;
    let sampling = Sampling {
        num_requests: ds.num_prompts,
        seed: ds.seed,
        shuffle: !ds.disable_shuffle,
        oversample: !ds.no_oversample,
        request_id_prefix: config.request.request_id_prefix.clone(),
    };
    let requests = match &ds.params {
        DatasetParams::Random(p) => {
            let tok = tokenizer::required(tokenizer, "the random dataset")?;
            let cfg = RandomConfig {
                num_prompts: ds.num_prompts,
                input_len: p.input_len,
                output_len: p.output_len,
                prefix_len: p.prefix_len,
                range_ratio: p.range_ratio.input,
                seed: ds.seed,
                prompt_token_ids: p.prompt_token_ids,
                // The random dataset filters while it generates (it reports its own count).
                max_model_len: ds.max_model_len,
                request_id_prefix: Some(sampling.request_id_prefix.clone()),
                ..RandomConfig::default()
            };
            let sampled = random::sample(&cfg, tok)?;
            note_dropped(sampled.filtered);
            return Ok(sampled.requests);
        }
        DatasetParams::ShareGpt { output_len } => {
            let tok = tokenizer::required(tokenizer, "the sharegpt dataset")?;
            let path = sharegpt_path(ds.path.as_deref())?;
            let data = ShareGpt::load(&path)?;
            data.sample(
                &sampling,
                ShareGptOptions {
                    output_len: *output_len,
                },
                tok,
            )?
        }
        DatasetParams::Custom(p) if ds.name == DatasetName::Custom => {
            let path = ds
                .path
                .as_deref()
                .context("--dataset-name custom needs --dataset-path FILE.jsonl")?;
            let data = Custom::load(Path::new(path))?;
            let format = match tokenizer {
                Some(tok) => chat_format(config, tok, "the custom dataset")?,
                None => ChatFormat::raw(),
            };
            let opts = CustomOptions {
                output_len: p.output_len,
            };
            data.sample(&sampling, opts, &format, tokenizer)?
        }
        DatasetParams::Sonnet(p) => {
            let tok = tokenizer::required(tokenizer, "the sonnet dataset")?;
            let data = match ds.path.as_deref() {
                Some(path) => Sonnet::load(Path::new(path))?,
                None => Sonnet::builtin(),
            };
            let opts = SonnetOptions {
                input_len: p.input_len,
                output_len: p.output_len,
                prefix_len: p.prefix_len,
                // Python 0.11: the chat server renders the template itself.
                send_rendered: config.server.backend != Backend::OpenaiChat,
            };
            let format = chat_format(config, tok, "the sonnet dataset")?;
            data.sample(&sampling, opts, &format, tok)?
        }
        DatasetParams::PrefixRepetition(p) => {
            let tok = tokenizer::required(tokenizer, "the prefix_repetition dataset")?;
            let opts = PrefixRepetitionOptions {
                prefix_len: p.prefix_len,
                suffix_len: p.suffix_len,
                num_prefixes: p.num_prefixes,
                output_len: p.output_len,
            };
            prefix_repetition::sample(&sampling, opts, tok)?
        }
        DatasetParams::BurstGpt => {
            let tok = tokenizer::required(tokenizer, "the burstgpt dataset")?;
            let path = ds
                .path
                .as_deref()
                .context("--dataset-name burstgpt needs --dataset-path BurstGPT.csv")?;
            BurstGpt::load(Path::new(path))?.sample(&sampling, tok)?
        }
        DatasetParams::SpecBench {
            output_len,
            category,
        } => {
            let path = ds
                .path
                .as_deref()
                .context("--dataset-name spec_bench needs --dataset-path question.jsonl")?;
            let data = spec_bench::load(Path::new(path), category.as_deref())?;
            let format = match tokenizer {
                Some(tok) => chat_format(config, tok, "the spec_bench dataset")?,
                None => ChatFormat::raw(),
            };
            let fixed_seed = Sampling {
                seed: spec_bench::SEED,
                ..sampling.clone()
            };
            let opts = CustomOptions {
                output_len: Some(*output_len),
            };
            data.sample(&fixed_seed, opts, &format, tokenizer)?
        }
        DatasetParams::SpeedBench(p) => {
            let dir = ds.path.as_deref().context(
                "--dataset-name speed_bench needs --dataset-path DIR: the directory \
                 NeMo-Skills' speed-bench/prepare.py writes (one <subset>.jsonl per split)",
            )?;
            let subset = p
                .subset
                .to_possible_value()
                .map(|v| v.get_name().to_owned())
                .context("every subset has a name")?;
            let mut data = speed_bench::load(Path::new(dir), &subset, p.category.as_deref())?;
            if let Some(max) = p.max_input_len {
                let tok = tokenizer::required(tokenizer, "--speed-bench-max-input-len")?;
                data.truncate_prompts(tok, max)?;
            }
            let format = match tokenizer {
                Some(tok) => chat_format(config, tok, "the speed_bench dataset")?,
                None => ChatFormat::raw(),
            };
            let fixed_seed = Sampling {
                seed: speed_bench::SEED,
                ..sampling.clone()
            };
            let opts = CustomOptions {
                output_len: Some(p.output_len),
            };
            data.sample(&fixed_seed, opts, &format, tokenizer)?
        }
        other => anyhow::bail!(
            "--dataset-name {}: not implemented yet ({other:?})",
            ds.name.name()
        ),
    };
    Ok(match ds.max_model_len {
        Some(max) => {
            let (kept, dropped) = retain_within(requests, max);
            note_dropped(dropped);
            kept
        }
        None => requests,
    })
}

/// The tokenizer's chat template with `--chat-template-kwargs`, or raw text with
/// `--skip-chat-template`.
fn chat_format(config: &Config, tok: &Tokenizer, what: &str) -> Result<ChatFormat> {
    let ds = &config.dataset;
    if ds.skip_chat_template {
        return Ok(ChatFormat::raw());
    }
    Ok(ChatFormat::of_tokenizer(
        tok,
        ds.chat_template_kwargs.clone(),
        what,
    )?)
}

fn note_dropped(n: usize) {
    if n > 0 {
        eprintln!("note: --max-model-len dropped {n} requests");
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
