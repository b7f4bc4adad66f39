//! One benchmark run, start to finish (Python's `main` + `benchmark()`): resolve the server
//! and the model, load the tokenizer, build the dataset and every request's bytes, check the
//! server is ready, run warmups, then the measured run; print Python's block and save the
//! result.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use rayon::prelude::*;

use crate::backends::conversation::ChatBody;
use crate::backends::{build_body, Api, BodyOptions};
use crate::config::Config;
use crate::config::DatasetParams;
use crate::datasets::align::align_to_server;
use crate::datasets::conversations::Conversations;
use crate::datasets::SampleRequest;
use crate::engine::schedule::{arrival_offsets, rps_changes, to_durations, RampUp, RateSpec};
use crate::engine::session::Chains;
use crate::engine::{Engine, EngineOptions, RunReport, Workload};
use crate::http::request::{HeadTemplate, Method};
use crate::metrics::report::{BenchmarkReport, ReportSettings, TaskKind};
use crate::output::console::{
    render_block, render_notices, render_preamble, render_turn_block, Preamble,
};
use crate::output::extras;
use crate::output::json::{
    append_extras, build_result, check_result_target, result_path, save_result, turn_metrics, Json,
    RpsChangeEvent, RunInfo,
};
use crate::output::localtime::LocalDateTime;
use crate::runtime::{available_cores, resolve_driver};
use crate::tokenizer::{Tokenizer, TokenizerOptions};

use super::multi_turn::ConversationPlan;
use super::progress::{install_interrupt_handler, interrupted, Watcher};
use super::target::{wait_until_ready, Target};
use super::trace::{measured_hit_ratio, prefix_cache_extras, scrape_prefix_cache, TraceReplay};

/// How a benchmark that ran ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Ran to the end of its schedule (or was a `--dry-run`).
    Completed,
    /// Stopped by Ctrl-C or SIGTERM; what was measured was reported, marked interrupted.
    Interrupted,
    /// Ran, reported and saved, but not one request succeeded (a server that is down, a
    /// wrong port or protocol): a script must be able to tell this from a good run.
    NoneSucceeded {
        failed: usize,
        /// One failure's reason, for the closing line.
        example: String,
    },
}

/// Runs the benchmark the configuration describes.
pub fn run(config: &Config) -> Result<Outcome> {
    for w in &config.warnings {
        eprintln!("warning: {w}");
    }
    let saves = config.output.save_result || config.output.append_result;
    if saves && !config.dry_run {
        // Before anything is sent: a run whose result cannot be saved is not worth running.
        check_result_target(
            config.output.result_dir.as_deref(),
            config.output.result_filename.as_deref(),
            config.output.append_result,
        )
        .map_err(nothing_ran)?;
    }
    let Some(plan) = Plan::build(config).map_err(nothing_ran)? else {
        return Ok(Outcome::Completed); // --dry-run: the dataset was described, nothing is sent
    };
    plan.ready_check(config).map_err(nothing_ran)?;
    plan.warm_up(config)?;
    let measured = plan.measure(config)?;
    finish(config, &plan, &measured)?;
    Ok(outcome(&measured))
}

/// How the measured run ended: interrupted first, then whether anything succeeded.
fn outcome(measured: &Measured) -> Outcome {
    let outputs = &measured.report.merged.outputs;
    if measured.interrupted {
        return Outcome::Interrupted;
    }
    if outputs.is_empty() || outputs.iter().any(|o| o.success) {
        return Outcome::Completed;
    }
    Outcome::NoneSucceeded {
        failed: outputs.len(),
        example: outputs[0].error.clone(),
    }
}

/// Everything decided and built before the clock starts.
struct Plan {
    target: Arc<Target>,
    model_id: String,
    tokenizer: Option<Tokenizer>,
    trace: Option<TraceReplay>,
    prepared: Prepared,
    engine_opts: EngineOptions,
    /// Started once: the ready check, the warm-ups and the measured run share its threads,
    /// rings and kept-alive connections.
    engine: Engine,
}

/// What the measured run produced.
struct Measured {
    report: RunReport,
    rps_events: Vec<RpsChangeEvent>,
    prefix_cache: Option<extras::PrefixCache>,
    /// Ctrl-C or SIGTERM stopped the run.
    interrupted: bool,
}

impl Plan {
    /// Resolves the server, model and tokenizer and builds every request. `None` after a
    /// `--dry-run` printed its summary.
    fn build(config: &Config) -> Result<Option<Plan>> {
        let (driver, note) = resolve_driver(config.engine.io_driver).map_err(anyhow::Error::msg)?;
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        let (client_cores, mock_core) = split_cores(config);
        let target = Arc::new(Target::resolve(config, driver, mock_core)?);
        let model_id = match (&config.model.model, &config.model.tokenizer) {
            (Some(m), _) => m.clone(),
            // --dry-run sends nothing, so it must not ask the server for its model either.
            (None, Some(t)) if config.dry_run => t.clone(),
            (None, _) => target.first_model()?,
        };
        let trace = match &config.dataset.params {
            DatasetParams::TimedTrace(p) => Some(TraceReplay::load(config, p)?),
            _ => None,
        };
        if let (true, Some(t)) = (config.dry_run, &trace) {
            println!("{}", t.stats());
            return Ok(None);
        }
        let tokenizer = load_tokenizer(config, &target, &model_id)?;
        let conversations = match &config.multi_turn {
            Some(m) => Some(super::dataset::conversations(
                config,
                m,
                tokenizer.as_ref(),
            )?),
            None => None,
        };
        if let (true, Some(c)) = (config.dry_run, &conversations) {
            println!("{}", super::multi_turn::describe(c));
            return Ok(None);
        }
        let requests = match (&trace, &conversations) {
            (None, None) => sample_requests(config, &target, &model_id, tokenizer.as_ref())?,
            _ => Vec::new(),
        };
        if config.dry_run {
            println!(
                "{}",
                crate::datasets::DatasetStats::from_requests(&requests)
            );
            return Ok(None);
        }
        let api = Api::for_backend(config.server.backend).with_context(|| {
            format!(
                "--backend {}: not implemented yet",
                config.server.backend.name()
            )
        })?;
        let model_name = config
            .model
            .served_model_name
            .clone()
            .unwrap_or_else(|| model_id.clone());
        let prepared = match (&trace, &conversations) {
            (Some(t), _) => prepare_trace(config, &target, api, &model_name, t, tokenizer.as_ref()),
            (None, Some(c)) => prepare_conversations(config, &target, &model_name, c),
            (None, None) => prepare(config, &target, api, &model_name, &requests),
        }?;
        let engine_opts = EngineOptions {
            cores: client_cores,
            pin: true,
            driver,
            request_timeout: config.engine.request_timeout,
            preconnect: config.engine.preconnect,
            keep_all_text: config.output.save_detailed,
            interrupt_grace: config.engine.interrupt_grace,
        };
        let engine = Engine::start(target.endpoint.clone(), engine_opts.clone())?;
        Ok(Some(Plan {
            target,
            model_id,
            tokenizer,
            trace,
            prepared,
            engine_opts,
            engine,
        }))
    }

    /// `--ready-check-timeout-sec`: one real request until it succeeds.
    fn ready_check(&self, config: &Config) -> Result<()> {
        if config.request.ready_check_timeout_sec == 0 {
            return Ok(());
        }
        let timeout = Duration::from_secs(config.request.ready_check_timeout_sec);
        println!(
            "Waiting for endpoint to become up in {}s",
            timeout.as_secs()
        );
        wait_until_ready(timeout, || one_request(&self.engine, &self.prepared))
    }

    /// `--num-warmups`: requests outside the measured window.
    fn warm_up(&self, config: &Config) -> Result<()> {
        if config.request.num_warmups == 0 {
            return Ok(());
        }
        println!("Warming up with {} requests...", config.request.num_warmups);
        let warm = self
            .prepared
            .subset(config.request.num_warmups, max_concurrency(config));
        self.engine.run(warm, |_| {})?;
        println!("Warmup run completed.");
        Ok(())
    }

    /// `--profile`: `POST /start_profile` or `/stop_profile`, as Python does it: the lines
    /// Python prints, and a server that refuses is a warning, not the end of the run.
    fn profiler(&self, action: &str) {
        let (doing, done) = match action {
            "start" => ("Starting profiler...", "Profiler started"),
            _ => ("Stopping profiler...", "Profiler stopped"),
        };
        println!("{doing}");
        match self.target.profile(action) {
            Ok(()) => println!("{done}"),
            Err(e) => eprintln!("warning: --profile: {e:#}"),
        }
    }

    /// The measured run: schedule, preamble, profiling start, progress bar, prefix-cache
    /// counters before and after.
    fn measure(&self, config: &Config) -> Result<Measured> {
        let trace_offsets = self
            .trace
            .as_ref()
            .filter(|_| config.rate.self_timed)
            .map(TraceReplay::arrival_offsets);
        let (workload, offsets) =
            schedule(config, &self.prepared, trace_offsets).map_err(nothing_ran)?;
        let cache_before = self
            .trace
            .as_ref()
            .and_then(|_| scrape_prefix_cache(&self.target));
        // Before the line a user (or a script) sees, so a Ctrl-C right after it is handled.
        install_interrupt_handler();
        println!("Starting main benchmark run...");
        if config.profiling.enabled {
            self.profiler("start");
        }
        let ramp = config.rate.ramp_up;
        print!("{}", render_preamble(&preamble(config, ramp.as_ref())));
        crate::http::control::close_idle_connections();
        let wall_start = SystemTime::now();
        let mut watcher = None;
        let show_bar = !config.output.disable_tqdm;
        let report = self.engine.run(workload, |p| {
            watcher = Some(Watcher::start(p, show_bar));
        })?;
        if let Some(w) = watcher {
            w.finish();
        }
        let prefix_cache = self.trace.as_ref().map(|t| {
            let measured = cache_before
                .zip(scrape_prefix_cache(&self.target))
                .and_then(|(before, after)| measured_hit_ratio(before, after));
            prefix_cache_extras(&t.stats(), measured)
        });
        let rps_events = rps_changes(&rate_spec(config), offsets.as_deref().unwrap_or(&[]))
            .into_iter()
            .map(|(rps, at)| RpsChangeEvent {
                rps,
                timestamp: LocalDateTime::at(wall_start + Duration::from_secs_f64(at)).isoformat(),
            })
            .collect();
        Ok(Measured {
            report,
            rps_events,
            prefix_cache,
            interrupted: interrupted(),
        })
    }
}

/// An error before the measured run sent a request (a server that cannot be reached or
/// listed, a tokenizer or dataset that cannot be built, a ready check that timed out): the
/// program exits 2 (nothing ran), not 1 (the run failed). Displays its cause as one line.
#[derive(Debug)]
pub struct NothingRan(anyhow::Error);

impl std::fmt::Display for NothingRan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for NothingRan {}

fn nothing_ran(e: anyhow::Error) -> anyhow::Error {
    NothingRan(e).into()
}

/// The client's cores and, with `--mock-server` on a machine with more than one core, the
/// core the mock gets to itself (the last one).
fn split_cores(config: &Config) -> (Vec<usize>, Option<usize>) {
    let mut all = available_cores();
    let mock = match config.server.location {
        crate::config::ServerLocation::EmbeddedMock if all.len() > 1 => all.pop(),
        _ => None,
    };
    all.truncate(config.engine.num_cores.max(1));
    (all, mock)
}

/// The tokenizer for the dataset and the output-length fallback: local/Hub/tiktoken, then the
/// server's `/tokenize`; `None` with `--skip-tokenizer-init`.
fn load_tokenizer(
    config: &Config,
    target: &Arc<Target>,
    model_id: &str,
) -> Result<Option<Tokenizer>> {
    if config.model.skip_tokenizer_init {
        return Ok(None);
    }
    let id = config
        .model
        .tokenizer
        .clone()
        .unwrap_or_else(|| model_id.to_string());
    if target.mock.is_some() && config.model.tokenizer.is_none() {
        // The embedded mock's own tokenizer is the exact one.
        return Ok(Some(Tokenizer::server(
            &id,
            target.tokenize_endpoint(model_id),
        )?));
    }
    let mode = config
        .model
        .tokenizer_mode
        .parse()
        .map_err(anyhow::Error::msg)?;
    let opts = TokenizerOptions::new(id).mode(mode);
    if config.model.tokenizer.is_some() {
        // An explicit --tokenizer must load, as in Python: a typo in a path should stop the
        // run, not silently switch to the server's tokenizer.
        return Ok(Some(Tokenizer::load(&opts)?));
    }
    let (tok, fallback) = Tokenizer::load_or_server(&opts, target.tokenize_endpoint(model_id))?;
    if let Some(why) = fallback {
        eprintln!("note: {why}");
    }
    Ok(Some(tok))
}

/// Python 0.33 re-aligns random text prompts to the server's own tokenizer.
fn needs_alignment(config: &Config) -> bool {
    matches!(&config.dataset.params, DatasetParams::Random(p) if !p.prompt_token_ids)
        && Api::for_backend(config.server.backend).is_some_and(|a| a.is_generation())
}

/// The dataset's requests, aligned to the server's tokenizer where Python does that.
fn sample_requests(
    config: &Config,
    target: &Arc<Target>,
    model_id: &str,
    tokenizer: Option<&Tokenizer>,
) -> Result<Vec<SampleRequest>> {
    let mut requests = super::dataset::build(config, tokenizer)?;
    if needs_alignment(config) {
        let endpoint = target.tokenize_endpoint(model_id);
        if let Some(msg) = align_to_server(&mut requests, endpoint.as_ref()).message() {
            println!("{msg}");
        }
    }
    Ok(requests)
}

/// Every request's bytes, built in parallel before the clock starts.
pub struct Prepared {
    requests: Arc<[crate::http::request::PreparedRequest]>,
    prompt_lens: Arc<[u32]>,
    output_lens: Vec<usize>,
    mode: crate::backends::ResponseMode,
    /// `--timed-trace-wait-parent`: the request each request waits for.
    parents: Option<Arc<[Option<u32>]>>,
    /// `--multi-turn`: the conversations (`requests` are their first turns).
    conversations: Option<Arc<ConversationPlan>>,
}

impl Prepared {
    /// The first `n` requests (cycled), all at once, for warmups and the ready check.
    fn subset(&self, n: usize, max_concurrency: Option<usize>) -> Workload {
        let pick = |i: usize| i % self.requests.len().max(1);
        Workload {
            requests: (0..n).map(|i| self.requests[pick(i)].clone()).collect(),
            client_prompt_lens: (0..n).map(|i| self.prompt_lens[pick(i)]).collect(),
            arrivals: None,
            max_concurrency,
            mode: self.mode,
            sessions: None,
            expected_tokens: self.output_lens.first().copied().unwrap_or(0),
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

fn prepare(
    config: &Config,
    target: &Target,
    api: Api,
    model_name: &str,
    requests: &[SampleRequest],
) -> Result<Prepared> {
    let head = head_template(config, target);
    let opts = body_options(config, model_name);
    let built: Result<Vec<_>, String> = requests
        .par_iter()
        .map(|r| {
            let body = build_body(api, &r.prompt, r.expected_output_len, &opts)?;
            Ok(head.build(r.request_id.as_deref(), Some("application/json"), &body))
        })
        .collect();
    Ok(Prepared {
        requests: built.map_err(anyhow::Error::msg)?.into(),
        prompt_lens: requests.iter().map(|r| r.prompt_len as u32).collect(),
        output_lens: requests.iter().map(|r| r.expected_output_len).collect(),
        mode: api.response_mode(),
        parents: None,
        conversations: None,
    })
}

/// A multi-turn run's first turns, and the plan that builds the later ones.
fn prepare_conversations(
    config: &Config,
    target: &Target,
    model_name: &str,
    conversations: &Conversations,
) -> Result<Prepared> {
    let opts = body_options(config, model_name);
    // Synthetic answers get their planned length without --ignore-eos.
    let min_tokens = matches!(config.dataset.params, DatasetParams::Random(_));
    let body = ChatBody::new(&opts, min_tokens).map_err(anyhow::Error::msg)?;
    let think = Duration::from_millis(config.multi_turn.as_ref().map_or(0, |m| m.delay_ms));
    let plan = ConversationPlan::new(conversations, head_template(config, target), body, think);
    let (requests, prompt_lens) = plan.first_requests();
    Ok(Prepared {
        requests: requests.into(),
        prompt_lens: prompt_lens.into(),
        output_lens: vec![plan.max_output_len()],
        mode: Api::Chat.response_mode(),
        parents: None,
        conversations: Some(Arc::new(plan)),
    })
}

/// A trace replay's requests, built from shared prompt fragments (see `super::trace`).
fn prepare_trace(
    config: &Config,
    target: &Target,
    api: Api,
    model_name: &str,
    trace: &TraceReplay,
    tokenizer: Option<&Tokenizer>,
) -> Result<Prepared> {
    let requests = trace.prepare(
        api,
        &head_template(config, target),
        &body_options(config, model_name),
        &config.request.request_id_prefix,
        tokenizer,
    )?;
    Ok(Prepared {
        requests: requests.into(),
        prompt_lens: trace.prompt_lens().into(),
        output_lens: trace.output_lens(),
        mode: api.response_mode(),
        parents: trace.parents().map(Into::into),
        conversations: None,
    })
}

/// One request through the engine (the ready check).
fn one_request(engine: &Engine, prepared: &Prepared) -> Result<(), String> {
    // One worker: the run takes one core of the engine.
    let report = engine
        .run(prepared.subset(1, Some(1)), |_| {})
        .map_err(|e| e.to_string())?;
    match report.merged.outputs.first() {
        Some(o) if o.success => Ok(()),
        Some(o) => Err(o.error.clone()),
        None => Err("no response".into()),
    }
}

fn rate_spec(config: &Config) -> RateSpec {
    let r = &config.rate;
    RateSpec {
        request_rate: r.request_rate,
        burstiness: r.burstiness,
        ramp_up: r.ramp_up,
        seed: config.dataset.seed,
    }
}

/// The measured workload: all requests with their arrival offsets (seconds; `None` when all
/// are sent at once): the trace's own offsets when self-timed, else the rate's.
fn schedule(
    config: &Config,
    prepared: &Prepared,
    trace_offsets: Option<Vec<f64>>,
) -> Result<(Workload, Option<Vec<f64>>)> {
    let n = prepared.requests.len();
    let offsets = match trace_offsets {
        Some(o) => Some(o),
        None => arrival_offsets(&rate_spec(config), n).map_err(anyhow::Error::msg)?,
    };
    let arrivals: Option<Arc<[Duration]>> = offsets.as_deref().map(|o| to_durations(o).into());
    let mut workload = Workload {
        requests: prepared.requests.clone(),
        client_prompt_lens: prepared.prompt_lens.clone(),
        arrivals,
        max_concurrency: max_concurrency(config),
        mode: prepared.mode,
        sessions: prepared
            .conversations
            .clone()
            .map(super::multi_turn::source),
        expected_tokens: prepared.output_lens.iter().copied().max().unwrap_or(0),
    };
    if let Some(parents) = &prepared.parents {
        // A child turn waits for its parent: both run in one session.
        let g = Chains::group(
            workload.requests.clone(),
            workload.client_prompt_lens.clone(),
            workload.arrivals.clone(),
            parents,
        );
        workload.requests = g.first_requests;
        workload.client_prompt_lens = g.first_prompt_lens;
        workload.arrivals = g.first_arrivals;
        workload.sessions = Some(g.sessions);
    }
    Ok((workload, offsets))
}

/// The cap on requests in flight: `--multi-turn-concurrency` (conversations in flight,
/// each one request at a time) before `--max-concurrency`.
fn max_concurrency(config: &Config) -> Option<usize> {
    config
        .multi_turn
        .as_ref()
        .and_then(|m| m.concurrency)
        .or(config.rate.max_concurrency)
}

fn preamble<'a>(config: &Config, ramp: Option<&'a RampUp>) -> Preamble<'a> {
    Preamble {
        self_timed: config.rate.self_timed,
        ramp_up: ramp,
        request_rate: config.rate.request_rate,
        burstiness: config.rate.burstiness,
        max_concurrency: max_concurrency(config).map(|c| c as u64),
    }
}

/// Metrics, the console block, our extras, and the result file.
fn finish(config: &Config, plan: &Plan, measured: &Measured) -> Result<()> {
    let run = &measured.report;
    let tokenizer = plan.tokenizer.as_ref();
    let outputs = &run.merged.outputs;
    let task = TaskKind::for_backend(config.server.backend);
    let count = |text: &str| tokenizer.map_or(0, |t| t.count_tokens(text));
    let settings = ReportSettings {
        duration_s: run.duration.as_secs_f64(),
        task,
        count_tokens: tokenizer.is_some().then_some(&count as _),
        percentiles: config.output.metric_percentiles.clone(),
        percentile_metrics: config.output.percentile_metrics.clone(),
        goodput: config.output.goodput.clone(),
        max_concurrency: max_concurrency(config).map(|c| c as u64),
        request_rate: config.rate.request_rate,
    };
    let report = BenchmarkReport::compute(outputs, &settings);
    print!("{}", render_notices(outputs, task));
    print!("{}", render_block(&report));
    let turns = plan.prepared.conversations.as_ref().map(|c| {
        let turn_of = c.turn_of_records();
        let records = &run.merged.records;
        let per_turn = super::multi_turn::per_turn_reports(outputs, records, &turn_of, &settings);
        for (turn, r) in &per_turn {
            print!("{}", render_turn_block(*turn, r));
        }
        (
            per_turn,
            super::multi_turn::request_turns(c, records, &turn_of),
        )
    });
    let mut extra = extras::Extras::from_run(run, &plan.engine_opts);
    extra.prefix_cache = measured.prefix_cache;
    extra.interrupted = measured.interrupted;
    print!("{}", extra.render());
    if config.profiling.enabled {
        // After the block, before the result is saved (Python's order).
        plan.profiler("stop");
    }
    if config.output.save_result || config.output.append_result {
        let info = RunInfo {
            date: LocalDateTime::now().result_date(),
            backend: config.server.backend.name().to_string(),
            label: config.output.label.clone(),
            model_id: plan.model_id.clone(),
            tokenizer_id: tokenizer.map(|t| t.id().to_string()),
            num_prompts: config.dataset.num_prompts as u64,
            metadata: config.output.metadata.clone(),
            request_rate: config.rate.request_rate,
            burstiness: config.rate.burstiness,
            max_concurrency: max_concurrency(config).map(|c| c as u64),
            ramp_up: config.rate.ramp_up,
        };
        let mut doc = build_result(
            &info,
            &report,
            outputs,
            &measured.rps_events,
            config.output.save_detailed,
        );
        if let Some((per_turn, (conversations, turn_numbers))) = &turns {
            let list = per_turn
                .iter()
                .map(|(t, r)| Json::Object(turn_metrics(*t, r)))
                .collect();
            doc.set("per_turn_metrics", Json::List(list));
            let ids = conversations
                .iter()
                .map(|c| Json::str(c.as_str()))
                .collect();
            doc.set("vllm_bench_conversation_ids", Json::List(ids));
            doc.set("vllm_bench_turns", Json::UInts(turn_numbers.into()));
        }
        append_extras(&mut doc, extra.to_json());
        let path = result_path(
            &info,
            config.output.result_filename.as_deref(),
            config.output.result_dir.as_deref(),
        );
        save_result(
            &path,
            config.output.result_dir.as_deref(),
            &doc.to_json_string(),
            config.output.append_result,
        )?;
        eprintln!("Saved the result to {}", path.display());
    }
    Ok(())
}
