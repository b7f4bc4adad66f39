//! Every request's bytes, built in parallel before the clock starts: the dataset's
//! requests, a trace replay's shared-fragment requests, or a multi-turn run's first turns and
//! the plan of its later ones. Each kind's builder also gives the [`RunDataset`] the run
//! keeps of it (sessions, arrival times, post-run extras).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rayon::prelude::*;

use crate::backends::audio;
use crate::backends::conversation::ChatBody;
use crate::backends::{
    build_body, build_body_parts, input_sequences, Api, BodyError, BodyOptions, ResponseMode,
};

use crate::config::{Config, DatasetParams};
use crate::datasets::conversations::{Conversation, Conversations};
use crate::datasets::media::ChatMedia;
use crate::datasets::timed_trace::TokenSpace;
use crate::datasets::wav::AudioClip;
use crate::datasets::SampleRequest;
use crate::engine::{Probe, Workload};
use crate::http::request::{HeadTemplate, Method, PreparedRequest};
use crate::tokenizer::Tokenizer;

use super::agentic::AgenticReplay;
use super::agentic_replay::{AgenticRun, ReplayOptions, SYSTEM_IDLE_CAP};
use super::lora::{AdapterOptions, LoraPlan};
use super::multi_turn::ConversationPlan;
use super::replicas;
use super::run_dataset::RunDataset;
use super::trace::{prefix_cache_extras, TraceReplay};
use crate::control_plane::Target;

/// The media of each request of a multimodal dataset.
pub enum Media {
    /// `random-mm`, `custom_image`: chat content parts.
    Chat(Vec<ChatMedia>),
    /// `custom_audio`: the audio file each request uploads.
    Audio(Vec<AudioClip>),
}

/// What every kind's builder reads.
pub struct PrepareCx<'a> {
    pub config: &'a Config,
    pub target: &'a Target,
    pub api: Api,
    /// The `model` field of every body (`--served-model-name`, else the model).
    pub model_name: &'a str,
    pub tokenizer: Option<&'a Tokenizer>,
}

/// Every request's bytes, built in parallel before the clock starts.
pub struct Prepared {
    /// The first request of each session (for every dataset but multi-turn and trace
    /// chains, each request).
    pub requests: Arc<[PreparedRequest]>,
    pub prompt_lens: Arc<[u32]>,
    pub output_lens: Vec<usize>,
    pub mode: ResponseMode,
    /// `--probe-request-rate`: the probe request and its interval.
    pub probe: Option<Probe>,
    /// `--lora-modules`: the adapter of every record.
    pub lora: Option<Arc<LoraPlan>>,
    /// With LoRA, the first requests with the base model's `model` field: the ready check
    /// and the warm-ups use them, as Python's test request names `--model`.
    pub warm: Option<Arc<[PreparedRequest]>>,
    /// `--replica-affinity session` with several replicas: each first request's prompt key
    /// (`replicas::prompt_key`), aligned with `requests`.
    pub prompt_keys: Option<Arc<[u64]>>,
}

impl Prepared {
    /// The same requests with `probe` beside them.
    pub fn with_probe(self, probe: Option<Probe>) -> Prepared {
        Prepared { probe, ..self }
    }

    /// The first `n` requests (cycled), all at once, for warmups and the ready check.
    pub fn subset(&self, n: usize, max_concurrency: Option<usize>) -> Workload {
        let from = self.warm.as_ref().unwrap_or(&self.requests);
        let pick = |i: usize| i % from.len().max(1);
        Workload {
            requests: (0..n).map(|i| from[pick(i)].clone()).collect(),
            client_prompt_lens: (0..n).map(|i| self.prompt_lens[pick(i)]).collect(),
            arrivals: None,
            max_concurrency,
            mode: self.mode,
            sessions: None,
            expected_tokens: self.output_lens.first().copied().unwrap_or(0),
            probe: None,
            // Request `i` on replica `i mod R`: `n` at least R asks every replica.
            replica_of: None,
            cancel: None,
            time_bound: None,
        }
    }
}

/// The head every request of the run shares.
fn head_template(config: &Config, target: &Target) -> HeadTemplate {
    HeadTemplate::new(
        Method::Post,
        &target.base.request_path(&config.server.endpoint),
        &target.base.host_header(),
        &target.headers,
    )
}

/// Everything in a body but the prompt and the output length.
fn body_options(config: &Config, model_name: &str) -> BodyOptions {
    BodyOptions {
        model: model_name.to_string(),
        logprobs: config.request.logprobs.map(i64::from),
        ignore_eos: config.request.ignore_eos,
        extra_body: config.request.extra_body.clone(),
    }
}

/// The body options of each of `n` requests (or conversations): with `--lora-modules`,
/// the adapter each one names.
fn adapter_options(config: &Config, model_name: &str, n: usize) -> AdapterOptions {
    let base = body_options(config, model_name);
    AdapterOptions::new(base, config.lora.as_ref(), n, config.dataset.seed)
}

/// With LoRA, the first requests (as many as the warm-ups use, at least one for the ready
/// check) built again with the base model.
fn warm_requests(
    config: &Config,
    opts: &AdapterOptions,
    build: impl Fn(usize, &BodyOptions) -> Result<PreparedRequest, BodyError>,
    total: usize,
) -> Result<Option<Arc<[PreparedRequest]>>, BodyError> {
    if !opts.is_lora() {
        return Ok(None);
    }
    let n = config.request.num_warmups.max(1).min(total);
    let built: Result<Vec<_>, _> = (0..n).map(|i| build(i, opts.base())).collect();
    Ok(Some(built?.into()))
}

/// One request per sample; `media` gives each sample's images (`random-mm`: chat content
/// parts) or audio file (`custom_audio`: a multipart upload), which the body references
/// without copying.
pub fn prepare(
    cx: &PrepareCx<'_>,
    requests: &[SampleRequest],
    media: Option<&Media>,
) -> Result<(Prepared, RunDataset)> {
    let (config, target, api, model_name) = (cx.config, cx.target, cx.api, cx.model_name);
    let head = head_template(config, target);
    let opts = adapter_options(config, model_name, requests.len());
    // aiohttp draws a uuid4 boundary per form; one per run serves as well. Drawn from
    // --seed, so the shards of a run send the same bytes (their fingerprint must agree).
    let mixed = crate::mix::mix64(config.dataset.seed ^ 0x6d75_6c74_6970_6172);
    let boundary = format!("{mixed:016x}{:016x}", crate::mix::mix64(mixed));
    let form_type = audio::content_type(&boundary);
    let build = |i: usize, o: &BodyOptions| -> Result<PreparedRequest, BodyError> {
        let r = &requests[i];
        let id = r.request_id.as_deref();
        let json = Some("application/json");
        match media {
            Some(Media::Chat(mm)) if mm.get(i).is_some_and(|m| !m.parts.is_empty()) => {
                let body = build_body_parts(api, &r.prompt, r.expected_output_len, o, &mm[i], id)?;
                Ok(head.build_parts(id, json, body))
            }
            Some(Media::Audio(clips)) if api == Api::Audio => {
                let body = audio::audio_body(r.expected_output_len, o, &clips[i], &boundary);
                Ok(head.build_parts(id, Some(&form_type), body))
            }
            _ => {
                let body = build_body(api, &r.prompt, r.expected_output_len, o)?;
                Ok(head.build(id, json, &body))
            }
        }
    };
    let built: Result<Vec<_>, BodyError> = (0..requests.len())
        .into_par_iter()
        .map(|i| build(i, opts.of(i)))
        .collect();
    let seqs: Vec<u32> = requests
        .iter()
        .map(|r| input_sequences(api, &r.prompt))
        .collect();
    let prepared = Prepared {
        requests: built?.into(),
        prompt_lens: requests.iter().map(|r| r.prompt_len as u32).collect(),
        output_lens: requests.iter().map(|r| r.expected_output_len).collect(),
        mode: api.response_mode(),
        probe: None,
        lora: opts.plan(|r| r, requests.len()).map(Arc::new),
        warm: warm_requests(config, &opts, build, requests.len())?,
        prompt_keys: replicas::wants_prompt_keys(config).then(|| {
            requests
                .iter()
                .map(|r| replicas::prompt_key(&r.prompt))
                .collect()
        }),
    };
    let dataset = RunDataset::Samples {
        input_sequences: seqs.iter().any(|&n| n != 1).then(|| seqs.into()),
        audio_s: match media {
            Some(Media::Audio(clips)) => Some(clips.iter().map(|c| c.duration_s).collect()),
            _ => None,
        },
    };
    Ok((prepared, dataset))
}

/// `--probe-request-rate`: Python's probe, the text prompt "Hi" asking for one token with
/// the run's other body fields and no request id, sent `1 / rate` after each answer.
pub fn probe(
    config: &Config,
    target: &Target,
    api: Api,
    model_name: &str,
) -> Result<Option<Probe>> {
    let rate = config.rate.probe_request_rate;
    if rate <= 0.0 {
        return Ok(None);
    }
    let opts = body_options(config, model_name);
    let body = build_body(api, &crate::datasets::Prompt::Text("Hi".into()), 1, &opts)?;
    Ok(Some(Probe {
        request: head_template(config, target).build(None, Some("application/json"), &body),
        interval: Duration::from_secs_f64(1.0 / rate),
    }))
}

/// A multi-turn run's first turns, and the plan that builds the later ones.
pub fn prepare_conversations(
    cx: &PrepareCx<'_>,
    conversations: &Conversations,
) -> Result<(Prepared, RunDataset)> {
    let (config, api) = (cx.config, cx.api);
    // One adapter per conversation: every turn of it names the same one (sticky).
    let opts = adapter_options(config, cx.model_name, conversations.list.len());
    // Synthetic answers get their planned length without --ignore-eos.
    let min_tokens = matches!(config.dataset.params, DatasetParams::Random(_));
    let base = ChatBody::new(api, opts.base(), min_tokens)?;
    let per_adapter = opts
        .adapters()
        .iter()
        .map(|o| ChatBody::new(api, o, min_tokens))
        .collect::<Result<Vec<_>, _>>()?;
    let bodies = (0..conversations.list.len())
        .map(|c| {
            opts.adapter_index(c)
                .map_or(&base, |a| &per_adapter[a])
                .clone()
        })
        .collect();
    let think = Duration::from_millis(config.multi_turn.as_ref().map_or(0, |m| m.delay_ms));
    let head = head_template(config, cx.target);
    let plan = ConversationPlan::new(conversations, head, bodies, think);
    let (requests, prompt_lens) = plan.first_requests();
    let turn_of = plan.turn_of_records();
    let lora = opts.plan(|r| turn_of[r].conversation as usize, turn_of.len());
    let warm = opts
        .is_lora()
        .then(|| plan.first_requests_with(&base).into());
    let prepared = Prepared {
        requests: requests.into(),
        prompt_lens: prompt_lens.into(),
        output_lens: vec![plan.max_output_len()],
        mode: api.response_mode(),
        probe: None,
        lora: lora.map(Arc::new),
        warm,
        prompt_keys: replicas::wants_prompt_keys(config).then(|| {
            let first =
                |c: &Conversation| c.turns.first().map_or(0, |t| replicas::text_key(&t.text));
            conversations.list.iter().map(first).collect()
        }),
    };
    Ok((prepared, RunDataset::Conversations(Arc::new(plan))))
}

/// The agentic replay's requests, every turn of every stream (see `super::agentic_replay`).
pub fn prepare_agentic(
    cx: &PrepareCx<'_>,
    replay: &AgenticReplay,
) -> Result<(Prepared, RunDataset)> {
    let config = cx.config;
    let DatasetParams::AgenticTrace(params) = &config.dataset.params else {
        anyhow::bail!("--dataset-name agentic_trace: its options were not resolved");
    };
    let lanes = config.rate.max_concurrency.ok_or_else(|| {
        anyhow::anyhow!(
            "--dataset-name agentic_trace: --max-concurrency N is required (the number of \
             trees replayed at once, AIPerf's --concurrency)"
        )
    })?;
    if config.engine.time_bound.is_none() {
        anyhow::bail!(
            "--dataset-name agentic_trace: --duration S is required (the lanes take the next \
             trace whenever a tree ends, so the replay runs until its time bound; AgentX: 1800)"
        );
    }
    // The lanes send each tree's turns on the traces' own timing: a rate, a ramp or a
    // cancellation draw (all per request index of a fixed schedule) would be ignored.
    let unused = [
        (config.rate.request_rate.is_finite(), "--request-rate"),
        (config.rate.ramp_up.is_some(), "--ramp-up-strategy"),
        (
            config.rate.cancellation.is_some(),
            "--request-cancellation-rate",
        ),
    ];
    if let Some((_, flag)) = unused.iter().find(|(set, _)| *set) {
        anyhow::bail!(
            "--dataset-name agentic_trace: {flag} does not apply (the lanes send each tree's \
             turns on the traces' own timing, as AIPerf's agentic replay does); leave it out"
        );
    }
    let tok = crate::tokenizer::required(cx.tokenizer, "the agentic_trace dataset")?;
    let vocab = u32::try_from(tok.vocab_size()).unwrap_or(u32::MAX);
    let space = TokenSpace::new(vocab, tok.control_token_ids())?;
    let decode = |ids: &[u32]| tok.decode(ids, false).unwrap_or_default();
    let body = ChatBody::new(cx.api, &body_options(config, cx.model_name), false)?;
    let head = head_template(config, cx.target);
    let opts = ReplayOptions {
        lanes,
        start_ratio: params.start_ratio,
        warmup_per_lane: params.warmup_per_lane,
        trace_idle_cap: params.trace_idle_cap,
        system_idle_cap: Some(SYSTEM_IDLE_CAP),
        seed: config.dataset.seed,
        mode: cx.api.response_mode(),
        failed_request_threshold: Some(params.failed_request_threshold),
        shard: config.shard.shard,
    };
    let run = match &replay.dag {
        Some(dag) => {
            let count = |text: &str| tok.count_tokens(text) as u64;
            let options = body_options(config, cx.model_name);
            AgenticRun::prepare_dag(dag, &head, cx.api, &options, &count, opts)?
        }
        None => AgenticRun::prepare(&replay.trees, &head, &body, &space, &decode, opts)?,
    };
    let prepared = Prepared {
        requests: run.lane_requests(),
        prompt_lens: vec![0; lanes].into(),
        output_lens: vec![run.expected_tokens()],
        mode: cx.api.response_mode(),
        probe: None,
        lora: None,
        warm: None,
        prompt_keys: None,
    };
    Ok((prepared, RunDataset::Agentic(run)))
}

/// A trace replay's requests, built from shared prompt fragments (see `super::trace`).
pub fn prepare_trace(cx: &PrepareCx<'_>, trace: &TraceReplay) -> Result<(Prepared, RunDataset)> {
    let (config, api, tokenizer) = (cx.config, cx.api, cx.tokenizer);
    let n = trace.prompt_lens().len();
    let opts = adapter_options(config, cx.model_name, n);
    let head = head_template(config, cx.target);
    let id_prefix = &config.request.request_id_prefix;
    let requests = trace.prepare(api, &head, &|i| opts.of(i), id_prefix, tokenizer)?;
    let warm = match opts.is_lora() {
        true => {
            let base = trace.prepare(api, &head, &|_| opts.base(), id_prefix, tokenizer)?;
            let k = config.request.num_warmups.max(1).min(base.len());
            Some(base.into_iter().take(k).collect())
        }
        false => None,
    };
    let prepared = Prepared {
        requests: requests.into(),
        prompt_lens: trace.prompt_lens().into(),
        output_lens: trace.output_lens(),
        mode: api.response_mode(),
        probe: None,
        lora: opts.plan(|r| r, n).map(Arc::new),
        warm,
        prompt_keys: replicas::wants_prompt_keys(config).then(|| trace.prompt_keys().into()),
    };
    let dataset = RunDataset::Trace {
        arrivals: config
            .rate
            .self_timed
            .then(|| trace.arrival_offsets().into()),
        parents: trace.parents().map(Into::into),
        ideal: prefix_cache_extras(&trace.stats(), None),
    };
    Ok((prepared, dataset))
}

#[cfg(test)]
impl Prepared {
    /// `n` prepared single-request sessions (request `i` has `i` prompt tokens and asks for
    /// 4), for the tests of the steps that take prepared requests.
    pub fn single_requests(n: usize) -> Prepared {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        Prepared {
            requests: (0..n)
                .map(|i| head.build(Some(&i.to_string()), None, b""))
                .collect(),
            prompt_lens: (0..n as u32).collect(),
            output_lens: vec![4; n],
            mode: ResponseMode::Whole,
            probe: None,
            lora: None,
            warm: None,
            prompt_keys: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subset_cycles_the_first_requests_all_at_once() {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        let p = Prepared {
            requests: (0..3)
                .map(|i| head.build(Some(&i.to_string()), None, b""))
                .collect(),
            prompt_lens: vec![10, 11, 12].into(),
            output_lens: vec![5, 6, 7],
            mode: ResponseMode::Whole,
            probe: None,
            lora: None,
            warm: None,
            prompt_keys: None,
        };
        let w = p.subset(5, Some(2));
        assert_eq!(&*w.client_prompt_lens, &[10, 11, 12, 10, 11]);
        assert_eq!(w.requests[3].to_vec(), p.requests[0].to_vec());
        assert!(
            w.arrivals.is_none() && w.sessions.is_none(),
            "independent, at once"
        );
        assert_eq!((w.max_concurrency, w.expected_tokens), (Some(2), 5));
    }
}
