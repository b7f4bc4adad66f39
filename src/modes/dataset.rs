//! The one dataset dispatch: the validated [`DatasetConfig`] and the tokenizer in, the run's
//! [`SampleRequest`]s out, every dataset through [`build`]. Each dataset lives in its own
//! module of [`crate::datasets`] and takes its own small options; this is the only place
//! that maps the configuration onto them, so `datasets` never imports `config`.
//!
//! `timed_trace` is the exception for now: its replay shares prompt fragments between
//! requests and carries arrival times, so it is built by [`super::trace::TraceReplay`].

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::config::{Config, DatasetParams};
use crate::datasets::hub_file::{dataset_file, HubAccess};
use crate::datasets::max_model_len::retain_within;
use crate::datasets::random::{self, RandomConfig};
use crate::datasets::sharegpt::{self, ShareGpt, ShareGptOptions};
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
