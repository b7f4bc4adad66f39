//! The dataset: options every dataset shares, and the parameters of the selected one, with
//! the general `--input-len`/`--output-len` mapped onto it as Python does. A dataset's own
//! options are its module's type in [`crate::datasets`] (one type per dataset, built here,
//! read there): the run adds only what every dataset shares ([`DatasetConfig`]'s fields,
//! which a sweep's points and repetitions change).

use serde_json::{Map, Value};

use super::literal::parse_bucket_config;
use super::parse::{comma_list, json_object};
use super::ConfigError;
use crate::cli::{pyvalue::py_float, Backend, Cli, DatasetName, TraceFormatChoice};
use crate::datasets::custom::CustomOptions;
use crate::datasets::hf::HfOptions;
use crate::datasets::limits;
use crate::datasets::prefix_repetition::PrefixRepetitionOptions;
use crate::datasets::random::{RandomParams, RangeRatio};
use crate::datasets::random_mm::RandomMmParams;
use crate::datasets::sharegpt::ShareGptOptions;
use crate::datasets::sonnet::SonnetOptions;
use crate::datasets::speed_bench::SpeedBenchOptions;
use crate::datasets::timed_trace::{
    JsonLabels, OnMalformed, ReplayWindow, TraceFormat, TraceOptions,
};

/// The resolved dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetConfig {
    pub name: DatasetName,
    /// `--dataset-path`: a file, directory or HF dataset id.
    pub path: Option<String>,
    pub num_prompts: usize,
    pub seed: u64,
    /// Drop requests whose prompt + output length exceeds this.
    pub max_model_len: Option<usize>,
    pub no_oversample: bool,
    pub disable_shuffle: bool,
    pub no_stream: bool,
    pub skip_chat_template: bool,
    pub enable_multimodal_chat: bool,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub params: DatasetParams,
}

/// The selected dataset's own parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetParams {
    Random(RandomParams),
    RandomMm {
        random: RandomParams,
        mm: RandomMmParams,
    },
    RandomRerank {
        random: RandomParams,
        no_reranker: bool,
    },
    ShareGpt(ShareGptOptions),
    BurstGpt,
    Sonnet(SonnetOptions),
    Hf(HfOptions),
    /// custom, custom_audio and custom_image.
    Custom(CustomOptions),
    PrefixRepetition(PrefixRepetitionOptions),
    SpecBench {
        output_len: usize,
        category: Option<String>,
    },
    SpeedBench(SpeedBenchOptions),
    TimedTrace(TimedTraceParams),
    /// `agentic_trace`: Weka Claude-Code traces (`--dataset-path` file or directory).
    AgenticTrace(AgenticParams),
}

/// The agentic replay's timing knobs (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgenticParams {
    /// `--agentic-start-ratio MIN,MAX`: where in its span a lane's first tree starts.
    pub start_ratio: (f64, f64),
    /// `--agentic-warmup-per-lane K`.
    pub warmup_per_lane: usize,
    /// `--agentic-trace-idle-cap SEC`.
    pub trace_idle_cap: Option<std::time::Duration>,
    /// `--agentic-failed-request-threshold`: the failure share past which the run stops.
    pub failed_request_threshold: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimedTraceParams {
    /// `--timed-trace-chunk-hash-size`: tokens per hashed block.
    pub chunk_hash_size: usize,
    /// How the trace is read: `--timed-trace-format`, `--timed-trace-label-*`,
    /// `--timed-trace-sec-multiplier`, the window (`--timed-trace-start-sec`,
    /// `--timed-trace-duration-sec`, `--timed-trace-rebase`), `--timed-trace-skip-malformed`.
    /// Its `num_prompts` and `max_model_len` are the run's, left unset here: the replay
    /// sets them when it loads (a sweep's point changes the count).
    pub read: TraceOptions,
    /// Send decoded text instead of token ids (`--timed-trace-prompt-text`; always for
    /// chat, whose messages carry text).
    pub prompt_text: bool,
    /// `--timed-trace-wait-parent`: a child turn waits for its parent turn to finish.
    pub wait_parent: bool,
}

/// Resolves the dataset for `backend`.
pub(super) fn resolve(cli: &Cli, backend: Backend) -> Result<DatasetConfig, ConfigError> {
    let d = &cli.dataset;
    if d.num_prompts == 0 {
        return Err(ConfigError::value("--num-prompts", 0, "must be at least 1"));
    }
    limits::check_requests(d.num_prompts as u64)
        .map_err(|why| ConfigError::value("--num-prompts", d.num_prompts, why))?;
    if d.max_model_len == Some(0) {
        return Err(ConfigError::value(
            "--max-model-len",
            0,
            "must be at least 1",
        ));
    }
    if let Some(m) = d.max_model_len {
        limits::check_max_model_len(m as u64)
            .map_err(|why| ConfigError::value("--max-model-len", m, why))?;
    }
    if let (true, Some(path)) = (d.dataset_name.is_synthetic(), &d.dataset_path) {
        return Err(ConfigError::value(
            "--dataset-path",
            path,
            format!(
                "the {} dataset is synthetic and reads no file; use a file dataset such as \
                 --dataset-name sharegpt, custom or hf",
                d.dataset_name
            ),
        ));
    }
    if let Some(path) = &d.dataset_path {
        check_dataset_path(d.dataset_name, path)?;
    }
    if d.random.prompt_token_ids {
        check_prompt_token_ids(d.dataset_name, backend)?;
    }
    let params = params(cli)?;
    check_lengths(&lengths(cli, &params), d.max_model_len)?;
    let chat_template_kwargs = match &d.chat_template_kwargs {
        Some(s) => Some(json_object("--chat-template-kwargs", s)?),
        None => None,
    };
    Ok(DatasetConfig {
        name: d.dataset_name,
        path: d.dataset_path.clone(),
        num_prompts: d.num_prompts,
        seed: d.seed,
        max_model_len: d.max_model_len,
        no_oversample: d.no_oversample,
        disable_shuffle: d.disable_shuffle,
        no_stream: d.no_stream,
        skip_chat_template: d.skip_chat_template,
        enable_multimodal_chat: d.enable_multimodal_chat,
        chat_template_kwargs,
        params,
    })
}

/// One length a dataset is asked to generate: the flag that sets it, its value, and the
/// most tokens it can put in one request (with its jitter, prefix or batch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Length {
    pub flag: &'static str,
    pub value: usize,
    pub largest: u64,
}

impl Length {
    fn exact(flag: &'static str, value: usize) -> Length {
        Length {
            flag,
            value,
            largest: value as u64,
        }
    }
}

/// The one size check of every length flag (random and its family, sonnet,
/// prefix_repetition, the output lengths, `--per-turn-input-len`): each must fit one request
/// ([`limits::check_tokens`]), checked before any prompt is generated.
pub(super) fn check_lengths(
    lengths: &[Length],
    max_model_len: Option<usize>,
) -> Result<(), ConfigError> {
    for l in lengths {
        limits::check_tokens(l.largest, max_model_len).map_err(|why| {
            let reach = if l.largest == l.value as u64 {
                String::new()
            } else {
                "with its range ratio, prefix or batch, ".to_owned()
            };
            ConfigError::value(l.flag, l.value, format!("{reach}{why}"))
        })?;
    }
    Ok(())
}

/// The lengths `params` generate, each with the flag the user gave for it.
fn lengths(cli: &Cli, params: &DatasetParams) -> Vec<Length> {
    let d = &cli.dataset;
    let input_flag = if d.input_len.is_some() {
        "--input-len"
    } else {
        "--random-input-len"
    };
    let output_flag = |own: &'static str| {
        if d.output_len.is_some() {
            "--output-len"
        } else {
            own
        }
    };
    let random = |r: &RandomParams| {
        let body = limits::jittered_max(r.input_len, r.range_ratio.input);
        let prompt = (r.prefix_len as u64).saturating_add(body);
        vec![
            Length::exact("--random-prefix-len", r.prefix_len),
            Length {
                flag: input_flag,
                value: r.input_len,
                largest: prompt,
            },
            Length {
                flag: "--random-batch-size",
                value: r.batch_size,
                largest: prompt.saturating_mul(r.batch_size as u64),
            },
            Length {
                flag: output_flag("--random-output-len"),
                value: r.output_len,
                largest: limits::jittered_max(r.output_len, r.range_ratio.output),
            },
        ]
    };
    let mut out = match params {
        DatasetParams::Random(r)
        | DatasetParams::RandomMm { random: r, .. }
        | DatasetParams::RandomRerank { random: r, .. } => random(r),
        DatasetParams::Sonnet(s) => vec![
            Length::exact("--sonnet-prefix-len", s.prefix_len),
            Length::exact(
                if d.input_len.is_some() {
                    "--input-len"
                } else {
                    "--sonnet-input-len"
                },
                s.input_len,
            ),
            Length::exact(output_flag("--sonnet-output-len"), s.output_len),
        ],
        DatasetParams::PrefixRepetition(p) => vec![
            Length::exact("--prefix-repetition-prefix-len", p.prefix_len),
            Length {
                flag: "--prefix-repetition-suffix-len",
                value: p.suffix_len,
                largest: (p.prefix_len as u64).saturating_add(p.suffix_len as u64),
            },
            Length::exact(output_flag("--prefix-repetition-output-len"), p.output_len),
        ],
        DatasetParams::ShareGpt(ShareGptOptions { output_len }) => output_len
            .map(|n| Length::exact(output_flag("--sharegpt-output-len"), n))
            .into_iter()
            .collect(),
        DatasetParams::Hf(h) => h
            .output_len
            .map(|n| Length::exact(output_flag("--hf-output-len"), n))
            .into_iter()
            .collect(),
        DatasetParams::Custom(c) => c
            .output_len
            .map(|n| Length::exact(output_flag("--custom-output-len"), n))
            .into_iter()
            .collect(),
        DatasetParams::SpecBench { output_len, .. } => {
            vec![Length::exact(
                output_flag("--spec-bench-output-len"),
                *output_len,
            )]
        }
        DatasetParams::SpeedBench(s) => {
            let mut v = vec![Length::exact(
                output_flag("--speed-bench-output-len"),
                s.output_len,
            )];
            v.extend(
                s.max_input_len
                    .map(|n| Length::exact("--speed-bench-max-input-len", n)),
            );
            v
        }
        DatasetParams::BurstGpt | DatasetParams::TimedTrace(_) | DatasetParams::AgenticTrace(_) => {
            Vec::new()
        }
    };
    if cli.multi_turn.multi_turn {
        out.push(Length::exact(
            "--per-turn-input-len",
            cli.multi_turn.per_turn_input_len,
        ));
    }
    out
}

/// `--dataset-path`, when it exists here: a regular file, or a directory for the datasets
/// that read one (hf's local dataset directories, speed_bench, BFCL). A FIFO, socket or
/// device would block the read forever or never end, so it is refused, as is a directory
/// for the datasets that read one file. A path that does not exist is left to the dataset
/// (hf and spec_bench take Hub ids; the loaders name a missing file).
fn check_dataset_path(name: DatasetName, path: &str) -> Result<(), ConfigError> {
    // Follows symlinks (`ln -s` to a dataset is fine); never opens the file.
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let one_file = matches!(
        name,
        DatasetName::Sharegpt
            | DatasetName::Burstgpt
            | DatasetName::Sonnet
            | DatasetName::Custom
            | DatasetName::CustomAudio
            | DatasetName::CustomImage
            | DatasetName::TimedTrace
    );
    if meta.is_file() || (meta.is_dir() && !one_file) {
        return Ok(());
    }
    let what = if meta.is_dir() {
        format!("is a directory; the {name} dataset reads one file")
    } else {
        "is not a regular file (a FIFO, socket or device would block or never end); give \
         the dataset file itself"
            .to_owned()
    };
    Err(ConfigError::value("--dataset-path", path, what))
}

/// Token ids are only generated by the random dataset and only sendable as a completions,
/// embeddings or pooling `prompt`/`input`.
fn check_prompt_token_ids(name: DatasetName, backend: Backend) -> Result<(), ConfigError> {
    if name != DatasetName::Random {
        return Err(ConfigError::flag(
            "--prompt-token-ids",
            format!("only the random dataset generates token ids (got --dataset-name {name})"),
        ));
    }
    let sendable = matches!(
        backend,
        Backend::Vllm | Backend::Openai | Backend::OpenaiEmbeddings | Backend::VllmPooling
    );
    if !sendable {
        return Err(ConfigError::flag(
            "--prompt-token-ids",
            format!(
                "the {backend} backend sends text; use vllm, openai, openai-embeddings or \
                 vllm-pooling"
            ),
        ));
    }
    Ok(())
}

fn params(cli: &Cli) -> Result<DatasetParams, ConfigError> {
    let d = &cli.dataset;
    let output_len = d.output_len;
    Ok(match d.dataset_name {
        DatasetName::Random => DatasetParams::Random(random(cli)?),
        DatasetName::RandomMm => DatasetParams::RandomMm {
            random: random(cli)?,
            mm: random_mm(cli)?,
        },
        DatasetName::RandomRerank => DatasetParams::RandomRerank {
            random: random(cli)?,
            no_reranker: d.random.no_reranker,
        },
        DatasetName::Sharegpt => DatasetParams::ShareGpt(ShareGptOptions {
            output_len: output_len.or(d.sharegpt.sharegpt_output_len),
        }),
        DatasetName::Burstgpt => DatasetParams::BurstGpt,
        DatasetName::Sonnet => DatasetParams::Sonnet(SonnetOptions {
            input_len: d.input_len.unwrap_or(d.sonnet.sonnet_input_len),
            output_len: output_len.unwrap_or(d.sonnet.sonnet_output_len),
            prefix_len: d.sonnet.sonnet_prefix_len,
            // Python 0.11: the chat server renders the template itself.
            send_rendered: !cli.server.backend.sends_chat_messages(),
        }),
        DatasetName::Hf => DatasetParams::Hf(hf(cli)?),
        DatasetName::Custom | DatasetName::CustomAudio | DatasetName::CustomImage => {
            DatasetParams::Custom(custom(cli)?)
        }
        DatasetName::PrefixRepetition => {
            let p = &d.prefix_repetition;
            if p.prefix_repetition_num_prefixes == 0 {
                return Err(ConfigError::value(
                    "--prefix-repetition-num-prefixes",
                    0,
                    "must be at least 1",
                ));
            }
            DatasetParams::PrefixRepetition(PrefixRepetitionOptions {
                prefix_len: p.prefix_repetition_prefix_len,
                suffix_len: p.prefix_repetition_suffix_len,
                num_prefixes: p.prefix_repetition_num_prefixes,
                output_len: output_len.unwrap_or(p.prefix_repetition_output_len),
            })
        }
        DatasetName::SpecBench => DatasetParams::SpecBench {
            output_len: output_len.unwrap_or(d.spec_bench.spec_bench_output_len),
            category: d.spec_bench.spec_bench_category.clone(),
        },
        DatasetName::SpeedBench => DatasetParams::SpeedBench(SpeedBenchOptions {
            subset: clap::ValueEnum::to_possible_value(&d.speed_bench.speed_bench_dataset_subset)
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default(),
            output_len: output_len.unwrap_or(d.speed_bench.speed_bench_output_len),
            category: d.speed_bench.speed_bench_category.clone(),
            max_input_len: d.speed_bench.speed_bench_max_input_len,
        }),
        DatasetName::TimedTrace => DatasetParams::TimedTrace(timed_trace(cli)?),
        DatasetName::AgenticTrace => {
            if d.dataset_path.is_none() {
                return Err(ConfigError::flag(
                    "--dataset-path",
                    "required for --dataset-name agentic_trace (a Weka trace JSON file, or a \
                     directory of them)",
                ));
            }
            DatasetParams::AgenticTrace(agentic(cli)?)
        }
    })
}

fn agentic(cli: &Cli) -> Result<AgenticParams, ConfigError> {
    let a = &cli.dataset.agentic;
    let flag = "--agentic-start-ratio";
    let ratio = a.agentic_start_ratio.split_once(',').and_then(|(lo, hi)| {
        Some((
            lo.trim().parse::<f64>().ok()?,
            hi.trim().parse::<f64>().ok()?,
        ))
    });
    let start_ratio = match ratio {
        Some((lo, hi)) if (0.0..=1.0).contains(&lo) && (lo..=1.0).contains(&hi) => (lo, hi),
        _ => {
            return Err(ConfigError::flag(
                flag,
                format!(
                    "{:?}: must be MIN,MAX with 0 <= MIN <= MAX <= 1 (e.g. 0.25,0.75)",
                    a.agentic_start_ratio
                ),
            ))
        }
    };
    let trace_idle_cap = match a.agentic_trace_idle_cap {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 31_536_000.0 => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(s) => {
            return Err(ConfigError::number(
                "--agentic-trace-idle-cap",
                s,
                "must be more than 0 seconds, at most 31536000 (a year)".to_string(),
            ))
        }
    };
    let threshold = a.agentic_failed_request_threshold;
    if !(0.0..=1.0).contains(&threshold) {
        return Err(ConfigError::flag(
            &format!("--agentic-failed-request-threshold {threshold}"),
            "must be a share from 0 to 1 (AgentX: 0.1)",
        ));
    }
    Ok(AgenticParams {
        start_ratio,
        warmup_per_lane: a.agentic_warmup_per_lane,
        trace_idle_cap,
        failed_request_threshold: threshold,
    })
}

fn random(cli: &Cli) -> Result<RandomParams, ConfigError> {
    let d = &cli.dataset;
    let r = &d.random;
    let output_len = d.output_len.unwrap_or(r.random_output_len);
    if output_len == 0 && !cli.server.backend.is_pooling() {
        let flag = if d.output_len.is_some() {
            "--output-len"
        } else {
            "--random-output-len"
        };
        return Err(ConfigError::value(flag, 0, "must be at least 1"));
    }
    if r.random_batch_size == 0 {
        return Err(ConfigError::value(
            "--random-batch-size",
            0,
            "must be at least 1",
        ));
    }
    if r.random_batch_size > 1 && !cli.server.backend.is_pooling() {
        return Err(ConfigError::value(
            "--random-batch-size",
            r.random_batch_size,
            format!(
                "batches inputs for pooling backends (embeddings, pooling, rerank), not                  --backend {}",
                cli.server.backend
            ),
        ));
    }
    Ok(RandomParams {
        input_len: d.input_len.unwrap_or(r.random_input_len),
        output_len,
        prefix_len: r.random_prefix_len,
        range_ratio: range_ratio(&r.random_range_ratio)?,
        batch_size: r.random_batch_size,
        prompt_token_ids: r.prompt_token_ids,
    })
}

/// `--random-range-ratio`: one number for both lengths, or `{"input": r, "output": r}` with
/// both keys (Python's `_resolve_range_ratios`); each ratio must be in `[0, 1)`.
pub(super) fn range_ratio(s: &str) -> Result<RangeRatio, ConfigError> {
    const FLAG: &str = "--random-range-ratio";
    let ratio = match py_float(s) {
        Some(r) => RangeRatio::both(r),
        None => {
            let obj = json_object(FLAG, s)
                .map_err(|_| ConfigError::value(FLAG, s, "expected a number or a JSON object"))?;
            let (mut input, mut output) = (None, None);
            for (k, v) in &obj {
                let slot = match k.as_str() {
                    "input" => &mut input,
                    "output" => &mut output,
                    other => {
                        return Err(ConfigError::value(
                            FLAG,
                            s,
                            format!("unknown key '{other}' (use \"input\" and \"output\")"),
                        ))
                    }
                };
                *slot = Some(v.as_f64().ok_or_else(|| {
                    ConfigError::value(FLAG, s, format!("\"{k}\" must be a number"))
                })?);
            }
            let (Some(input), Some(output)) = (input, output) else {
                return Err(ConfigError::value(
                    FLAG,
                    s,
                    "an object needs both \"input\" and \"output\"",
                ));
            };
            RangeRatio { input, output }
        }
    };
    ratio
        .check()
        .map_err(|why| ConfigError::value(FLAG, s, why.to_string()))?;
    Ok(ratio)
}

fn random_mm(cli: &Cli) -> Result<RandomMmParams, ConfigError> {
    let m = &cli.dataset.random_mm;
    let ratio = m.random_mm_num_mm_items_range_ratio;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(ConfigError::number(
            "--random-mm-num-mm-items-range-ratio",
            ratio,
            "must be in [0, 1]",
        ));
    }
    const LIMIT: &str = "--random-mm-limit-mm-per-prompt";
    let limit_text = &m.random_mm_limit_mm_per_prompt;
    let limit = json_object(LIMIT, limit_text)?
        .into_iter()
        .map(|(k, v)| match v.as_u64() {
            Some(n) => Ok((k, n)),
            None => Err(ConfigError::value(
                LIMIT,
                limit_text,
                format!("\"{k}\" must be a non-negative integer"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    const BUCKETS: &str = "--random-mm-bucket-config";
    let buckets_text = &m.random_mm_bucket_config;
    let buckets = parse_bucket_config(buckets_text)
        .map_err(|why| ConfigError::value(BUCKETS, buckets_text, why))?;
    let base = m.random_mm_base_items_per_request as u64;
    limits::check_items(base).map_err(|e| {
        ConfigError::value("--random-mm-base-items-per-request", base, e.to_string())
    })?;
    for (_, n) in &limit {
        limits::check_items(*n)
            .map_err(|e| ConfigError::value(LIMIT, limit_text, e.to_string()))?;
    }
    for ((h, w, frames), p) in &buckets {
        limits::check_image(*h as u64, *w as u64)
            .map_err(|e| ConfigError::value(BUCKETS, buckets_text, e.to_string()))?;
        if !(p.is_finite() && *p >= 0.0) {
            return Err(ConfigError::value(
                BUCKETS,
                buckets_text,
                format!("the probability of ({h}, {w}, {frames}) must be a non-negative number"),
            ));
        }
        let modality = if *frames == 1 { "image" } else { "video" };
        if !limit.iter().any(|(k, _)| k == modality) {
            return Err(ConfigError::value(
                BUCKETS,
                buckets_text,
                format!("modality {modality} of ({h}, {w}, {frames}) is not in {LIMIT}"),
            ));
        }
    }
    if buckets.iter().all(|(_, p)| *p == 0.0) {
        return Err(ConfigError::value(
            BUCKETS,
            buckets_text,
            "needs at least one bucket with a positive probability",
        ));
    }
    Ok(RandomMmParams {
        base_items_per_request: m.random_mm_base_items_per_request,
        num_mm_items_range_ratio: ratio,
        limit_mm_per_prompt: limit,
        bucket_config: buckets,
    })
}

/// The `--hf-*` options; `--asr-min/max-audio-len-sec` are checked here and not applied
/// (no ASR loader filters by them yet).
fn hf(cli: &Cli) -> Result<HfOptions, ConfigError> {
    let h = &cli.dataset.hf;
    let blazedit = (h.blazedit_min_distance, h.blazedit_max_distance);
    for (flag, v) in [
        ("--blazedit-min-distance", blazedit.0),
        ("--blazedit-max-distance", blazedit.1),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(ConfigError::value(flag, v, "must be in [0, 1]"));
        }
    }
    if blazedit.0 > blazedit.1 {
        return Err(ConfigError::value(
            "--blazedit-min-distance",
            blazedit.0,
            format!("must not exceed --blazedit-max-distance ({})", blazedit.1),
        ));
    }
    let asr = (h.asr_min_audio_len_sec, h.asr_max_audio_len_sec);
    if asr.0.is_nan() || asr.0 < 0.0 || asr.1.is_nan() || asr.0 > asr.1 {
        return Err(ConfigError::value(
            "--asr-min-audio-len-sec",
            asr.0,
            format!(
                "must be non-negative and not exceed --asr-max-audio-len-sec ({})",
                asr.1
            ),
        ));
    }
    let bfcl_categories = match &h.bfcl_categories {
        Some(list) => comma_list("--bfcl-categories", list, |s| Ok(s.to_owned()))?,
        None => ["simple", "live_simple", "multiple"]
            .map(str::to_owned)
            .to_vec(),
    };
    Ok(HfOptions {
        subset: h.hf_subset.clone(),
        split: h.hf_split.clone(),
        name: h.hf_name.clone(),
        output_len: cli.dataset.output_len.or(h.hf_output_len),
        text_column: h.hf_text_column.clone(),
        blazedit_distance: blazedit,
        bfcl_categories,
    })
}

/// `--custom-output-len` (`--custom-ensure-client-side-data` is refused before this, as
/// not implemented: `super::unimplemented`).
fn custom(cli: &Cli) -> Result<CustomOptions, ConfigError> {
    let c = &cli.dataset.custom;
    let output_len = match (cli.dataset.output_len, c.custom_output_len) {
        (Some(n), _) => Some(n),
        (None, -1) => None,
        (None, n) => Some(usize::try_from(n).map_err(|_| {
            ConfigError::value(
                "--custom-output-len",
                n,
                "must be a token count, or -1 to keep the dataset's",
            )
        })?),
    };
    Ok(CustomOptions { output_len })
}

fn timed_trace(cli: &Cli) -> Result<TimedTraceParams, ConfigError> {
    let t = &cli.dataset.timed_trace;
    // A block longer than a request may be is never needed whole (prompts are cut to
    // their length), and its size would be a typo.
    let most = limits::token_limit(cli.dataset.max_model_len);
    let chunk = t.timed_trace_chunk_hash_size;
    if chunk == 0 || chunk as u64 > most {
        return Err(ConfigError::value(
            "--timed-trace-chunk-hash-size",
            chunk,
            format!(
                "must be between 1 and {most}, the most tokens one request may hold (the \
                 trace's block size: 512 for Mooncake, 16 for Bailian)"
            ),
        ));
    }
    // Seconds per timestamp unit: a unit longer than the longest time accepted is a typo
    // (0.001 is for millisecond timestamps), and it would overflow the arrival times.
    let m = t.timed_trace_sec_multiplier;
    if !(m > 0.0 && limits::duration_from_secs(m).is_ok()) {
        return Err(ConfigError::value(
            "--timed-trace-sec-multiplier",
            crate::pyfmt::float_repr(m),
            "must be a positive number of seconds per timestamp unit, at most 31536000 \
             (365 days); 0.001 for millisecond timestamps",
        ));
    }
    if cli.dataset.dataset_path.is_none() {
        return Err(ConfigError::flag(
            "--dataset-path",
            "required for --dataset-name timed_trace (a Mooncake/Bailian JSONL or \
             Azure/BurstGPT CSV trace)",
        ));
    }
    Ok(TimedTraceParams {
        chunk_hash_size: t.timed_trace_chunk_hash_size,
        read: TraceOptions {
            format: match t.timed_trace_format {
                TraceFormatChoice::Auto => None,
                TraceFormatChoice::Mooncake => Some(TraceFormat::Mooncake),
                TraceFormatChoice::Bailian => Some(TraceFormat::Bailian),
                TraceFormatChoice::Azure => Some(TraceFormat::Azure),
                TraceFormatChoice::Burstgpt => Some(TraceFormat::BurstGpt),
            },
            labels: JsonLabels {
                timestamp: t.timed_trace_label_timestamp.clone(),
                input_length: t.timed_trace_label_input_length.clone(),
                output_length: t.timed_trace_label_output_length.clone(),
                hash_ids: t.timed_trace_label_hash_ids.clone(),
            },
            sec_multiplier: m,
            window: replay_window(t)?,
            num_prompts: None,
            on_malformed: if t.timed_trace_skip_malformed {
                OnMalformed::Skip
            } else {
                OnMalformed::Error
            },
            burstgpt_model: None,
            max_model_len: None,
        },
        prompt_text: t.timed_trace_prompt_text || cli.server.backend.sends_chat_messages(),
        wait_parent: t.timed_trace_wait_parent,
    })
}

/// `--timed-trace-start-sec`/`--timed-trace-duration-sec`/`--timed-trace-rebase`.
fn replay_window(t: &crate::cli::TimedTraceArgs) -> Result<ReplayWindow, ConfigError> {
    let start = t.timed_trace_start_sec;
    if !(start.is_finite() && start >= 0.0) {
        return Err(ConfigError::number(
            "--timed-trace-start-sec",
            start,
            "must be a number of seconds >= 0",
        ));
    }
    if let Some(d) = t.timed_trace_duration_sec {
        if !(d.is_finite() && d > 0.0) {
            return Err(ConfigError::number(
                "--timed-trace-duration-sec",
                d,
                "must be a number of seconds > 0",
            ));
        }
    }
    Ok(ReplayWindow {
        start_s: start,
        duration_s: t.timed_trace_duration_sec,
        rebase: t.timed_trace_rebase,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agentic_failure_threshold_is_a_share_defaulting_to_agentx() {
        let base = [
            "--backend",
            "openai-chat",
            "--dataset-name",
            "agentic_trace",
            "--dataset-path",
            "t",
        ];
        let params = |extra: &[&str]| {
            let args: Vec<&str> = base.iter().chain(extra).copied().collect();
            crate::config::Config::of_args(&args).dataset.params
        };
        let threshold = |r: f64| {
            DatasetParams::AgenticTrace(AgenticParams {
                start_ratio: (0.25, 0.75),
                warmup_per_lane: 0,
                trace_idle_cap: None,
                failed_request_threshold: r,
            })
        };
        assert_eq!(params(&[]), threshold(0.1));
        assert_eq!(
            params(&["--agentic_failed_request_threshold", "0.25"]),
            threshold(0.25)
        );
        let cli = crate::cli::parse_from(
            ["vllm-bench"]
                .iter()
                .chain(&base)
                .chain(&["--agentic-failed-request-threshold", "1.5"]),
        )
        .unwrap();
        let e = crate::config::Config::from_cli(cli)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--agentic-failed-request-threshold 1.5: must be a share from 0 to 1"),
            "{e}"
        );
    }

    #[test]
    fn range_ratio_takes_a_number_or_an_object() {
        assert_eq!(
            range_ratio("0.25").unwrap(),
            RangeRatio {
                input: 0.25,
                output: 0.25
            }
        );
        assert_eq!(
            range_ratio(r#"{"input": 0.3, "output": 0.5}"#).unwrap(),
            RangeRatio {
                input: 0.3,
                output: 0.5
            }
        );
        for (bad, why) in [
            ("1", "1: must be in [0, 1)"),
            (
                r#"{"input": 0.3, "output": 1}"#,
                r#"}': "output" must be in [0, 1)"#,
            ),
            (
                r#"{"input": -0.3, "output": 0.5}"#,
                r#"}': "input" must be in [0, 1)"#,
            ),
            (
                r#"{"output": 0.5}"#,
                r#"an object needs both "input" and "output""#,
            ),
            ("-0.1", "must be in [0, 1)"),
            ("nan", "must be in [0, 1)"),
            ("abc", "expected a number or a JSON object"),
            (
                r#"{"in": 0.1}"#,
                "unknown key 'in' (use \"input\" and \"output\")",
            ),
            (r#"{"input": "x"}"#, "\"input\" must be a number"),
        ] {
            let e = range_ratio(bad).unwrap_err().to_string();
            assert!(e.ends_with(why), "{bad}: {e}");
            assert!(e.starts_with("--random-range-ratio "), "{e}");
        }
    }
}
