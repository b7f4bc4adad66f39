//! Everything decided and built once, before any clock starts: the I/O driver and cores,
//! the server and its model, the tokenizer, the dataset through the one dispatch, every
//! request's bytes ([`super::prepare`]) and what the runs ask of the dataset
//! ([`RunDataset`]), and the persistent engine; plus the ready check, the warm-ups and the
//! profiler calls that use them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rayon::prelude::*;

use crate::backends::Api;
use crate::config::{Config, DatasetParams, RunKind, ServerLocation};
use crate::control_plane::{wait_until_ready, EarlyProbe, Target};
use crate::engine::{Engine, EngineOptions};
use crate::mock::MockServer;
use crate::output::stdio::Console;
use crate::runtime::cpu_latency::CpusKeptAwake;
use crate::runtime::stop_handle::StopHandle;
use crate::runtime::{available_cores, resolve_driver, ResolvedDriver};
use crate::tokenizer::{Tokenizer, TokenizerOptions};

use super::prepare::{probe, PrepareCx, Prepared};
use super::profiling::Profiled;
use super::run_dataset::RunDataset;
use super::trace::TraceReplay;

/// Everything decided and built before the clock starts.
pub struct Plan {
    pub target: Arc<Target>,
    /// The embedded mock (`--mock-server`), kept running for the whole run.
    pub mock: Option<MockServer>,
    pub model_id: String,
    pub tokenizer: Option<Arc<Tokenizer>>,
    pub prepared: Prepared,
    /// What the runs ask of the dataset: sessions, arrival times, post-run extras.
    pub dataset: RunDataset,
    pub engine_opts: EngineOptions,
    /// Started once: the ready check, the warm-ups and the measured run share its threads,
    /// rings and kept-alive connections.
    pub engine: Engine,
    /// The app's console: every line a run prints goes through it.
    pub console: Console,
    /// The app's stop (Ctrl-C, SIGTERM): the runs arm it and watch it.
    pub stop: StopHandle,
    /// The server's `/metrics` asked while the plan was built.
    pub metrics_probe: Option<EarlyProbe>,
    /// `--keep-cpus-awake`: idle CPUs poll instead of sleeping for as long as the plan
    /// lives (every warm-up and measured run of it).
    pub cpus_awake: Option<CpusKeptAwake>,
}

impl Plan {
    /// Resolves the server, model and tokenizer and builds every request.
    pub fn build(config: &Config, console: &Console, stop: &StopHandle) -> Result<Plan> {
        check_connections_fit(config)?;
        // First: without root it stops here, not after minutes of building the dataset.
        let cpus_awake = config
            .engine
            .keep_cpus_awake
            .then(CpusKeptAwake::hold)
            .transpose()?;
        let Server {
            driver,
            client_cores,
            mock_tokenizer,
            target,
            mock,
        } = Server::resolve(config, console)?;
        if mock.is_none() && config.request.ready_check_timeout_sec == 0 {
            // With a ready check, waiting for the server to come up is what was asked for.
            target.check_reachable()?;
        }
        let model_id = match &config.model.model {
            Some(m) => m.clone(),
            None => target.first_model()?,
        };
        // Beside the tokenizer and the prompts: its wait overlaps theirs.
        let metrics_probe = (mock.is_none() && config.server_metrics.enabled)
            .then(|| EarlyProbe::start(&target, config.scrape_timeout()))
            .flatten();
        // A --model the server does not list: asked now, said before the run.
        let requested = config.model.served_model_name.as_ref();
        let model_check = (config.model.model.is_some() && mock.is_none())
            .then(|| target.check_model(requested.unwrap_or(&model_id)));
        let tokenizer = match mock_tokenizer {
            Some(t) => Some(t),
            None => {
                load_tokenizer(config, &target, mock.is_some(), &model_id, console)?.map(Arc::new)
            }
        };
        let (prepared, dataset) = on_scratch_threads(|| {
            let tokenizer = tokenizer.as_deref();
            build_requests(
                config,
                &target,
                mock.as_ref(),
                &model_id,
                tokenizer,
                console,
            )
        })?;
        let engine_opts = EngineOptions {
            cores: client_cores,
            pin: true,
            driver,
            request_timeout: config.engine.request_timeout,
            preconnect: config.engine.preconnect,
            keep_all_text: config.report.detailed,
            max_response_events: config.engine.max_response_events,
            interrupt_grace: config.engine.interrupt_grace,
        };
        if let Some(warning) = model_check.and_then(|c| c.warning()) {
            console.warning(warning);
        }
        let engine = Engine::start(target.replicas(), engine_opts.clone())?;
        Ok(Plan {
            target,
            mock,
            model_id,
            tokenizer,
            prepared,
            dataset,
            engine_opts,
            engine,
            console: console.clone(),
            stop: stop.clone(),
            metrics_probe,
            cpus_awake,
        })
    }

    /// `--dry-run`: the dataset built on the same server, model and tokenizer a run would
    /// use, and its summary printed; nothing is sent (the model is `--model`, else
    /// `--tokenizer`; only the embedded mock, part of this process, is asked for it) and no
    /// engine is started.
    pub fn describe(config: &Config, console: &Console) -> Result<()> {
        let Server {
            mock_tokenizer,
            target,
            mock,
            ..
        } = Server::resolve(config, console)?;
        let model_id = match (&config.model.model, &config.model.tokenizer) {
            (Some(m), _) => m.clone(),
            (None, Some(t)) => t.clone(),
            // `config` refuses a dry run without either unless the mock is the server.
            (None, None) => target.first_model()?,
        };
        if let DatasetParams::TimedTrace(p) = &config.dataset.params {
            // A trace's summary needs no tokenizer: described before one is loaded.
            console.line(TraceReplay::load(config, p, console)?.stats());
            return Ok(());
        }
        let tokenizer = match mock_tokenizer {
            Some(t) => Some(t),
            None => {
                load_tokenizer(config, &target, mock.is_some(), &model_id, console)?.map(Arc::new)
            }
        };
        // Not aligned to the server's tokenizer: a dry run asks no server.
        let loaded = on_scratch_threads(|| {
            super::dataset::for_run(config, tokenizer.as_deref(), None, console)
        })?;
        console.line(loaded.describe());
        Ok(())
    }

    /// Rebuilds every request's bytes from `config` on the same server, tokenizer and
    /// engine: a sweep point, repetition or SLO probe with its own seed
    /// ([`super::sweep_prompts::point_seed`]) gets its own prompts, so it does not re-send (and the
    /// server's prefix cache does not answer) an earlier one's. The dataset says what it
    /// says again (its lines are those of the new prompts).
    pub fn prepare_again(&mut self, config: &Config) -> Result<()> {
        let (target, mock, model_id) = (&self.target, self.mock.as_ref(), self.model_id.as_str());
        let (tokenizer, console) = (self.tokenizer.as_deref(), &self.console);
        (self.prepared, self.dataset) = on_scratch_threads(|| {
            build_requests(config, target, mock, model_id, tokenizer, console)
        })?;
        Ok(())
    }

    /// `--ready-check-timeout-sec`: one real request until it succeeds; with several
    /// replicas, one to each until every one has answered.
    pub fn ready_check(&self, config: &Config) -> Result<()> {
        if config.request.ready_check_timeout_sec == 0 {
            return Ok(());
        }
        let timeout = Duration::from_secs(config.request.ready_check_timeout_sec);
        self.console.line(format_args!(
            "Waiting for endpoint to become up in {}s",
            timeout.as_secs()
        ));
        let urls: Vec<String> = self.target.replica_urls();
        if urls.len() > 1 {
            return super::replicas::wait_until_all_ready(
                timeout,
                &urls,
                |which| one_request_each(&self.engine, &self.prepared, which),
                || self.stop.stop_requested(),
            );
        }
        Ok(wait_until_ready(
            timeout,
            || one_request(&self.engine, &self.prepared),
            || self.stop.stop_requested(),
        )?)
    }

    /// `--num-warmups`: requests outside the measured window.
    pub fn warm_up(&self, config: &Config) -> Result<()> {
        if config.request.num_warmups == 0 {
            return Ok(());
        }
        self.console.line(format_args!(
            "Warming up with {} requests...",
            config.request.num_warmups
        ));
        let warm = self
            .prepared
            .subset(config.request.num_warmups, config.max_in_flight());
        self.engine.run(warm, |_| {})?;
        self.console.line("Warmup run completed.");
        Ok(())
    }

    /// `--profile`: `POST /start_profile` or `/stop_profile`, as Python does it: the lines
    /// Python prints, and a server that refuses is a warning, not the end of the run.
    pub fn profiler(&self, action: &str) {
        super::profiling::Server::profile(&self.profiled(), action);
    }

    /// The server as the profiler sees it, its lines going to the run's console.
    pub fn profiled(&self) -> Profiled {
        Profiled {
            target: self.target.clone(),
            console: self.console.clone(),
        }
    }
}

/// The server a plan (or a dry run's description) is built against, with what was decided
/// to reach it: the I/O driver, the client's cores, and with `--mock-server` the embedded
/// mock and the tokenizer it counts with.
struct Server {
    driver: ResolvedDriver,
    client_cores: Vec<usize>,
    mock_tokenizer: Option<Arc<Tokenizer>>,
    target: Arc<Target>,
    mock: Option<MockServer>,
}

impl Server {
    fn resolve(config: &Config, console: &Console) -> Result<Server> {
        let (driver, note) = resolve_driver(config.engine.io_driver)?;
        if let Some(note) = note {
            console.note(note);
        }
        let (client_cores, mock_core) = split_cores(config);
        if config.engine.num_cores_asked && client_cores.len() < config.engine.num_cores {
            console.note(format_args!(
                "the client runs on {} of the {} cores asked for: --mock-server keeps core {} \
                 for the embedded mock",
                client_cores.len(),
                config.engine.num_cores,
                mock_core.map_or_else(|| "?".to_string(), |c| c.to_string())
            ));
        }
        let mock_tokenizer = mock_tokenizer(config)?;
        let (target, mock) =
            super::target::resolve(config, driver, mock_core, mock_tokenizer.clone(), console)?;
        Ok(Server {
            driver,
            client_cores,
            mock_tokenizer,
            target: Arc::new(target),
            mock,
        })
    }
}

/// The open-file and port limits checked before anything is built, when the run's
/// connections are known from the flags alone: a synthetic dataset has exactly
/// `--num-prompts` requests, one connection each up to `--max-concurrency`. Building
/// 200,000 prompts took 48 s and 1.5 GB before the engine's own check refused them; other
/// runs (files, sweeps, searches, shards, conversations) are still checked by the engine
/// before their clock starts.
fn check_connections_fit(config: &Config) -> Result<()> {
    let simple = matches!(config.runs, RunKind::One | RunKind::Repeat(_))
        && config.multi_turn.is_none()
        && config.shard.shard.is_none();
    if !(simple && config.dataset.name.is_synthetic()) {
        return Ok(());
    }
    let n = config.dataset.num_prompts;
    let connections = config.rate.max_concurrency.map_or(n, |c| c.min(n));
    crate::engine::limits::ensure_capacity(connections, config.engine.local_addrs)?;
    Ok(())
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
    mock: bool,
    model_id: &str,
    console: &Console,
) -> Result<Option<Tokenizer>> {
    if config.model.skip_tokenizer_init {
        return Ok(None);
    }
    let id = config
        .model
        .tokenizer
        .clone()
        .unwrap_or_else(|| model_id.to_string());
    if mock && config.model.tokenizer.is_none() {
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
        console.note(why);
    }
    Ok(Some(tok))
}

/// With `--mock-server`, an explicit `--tokenizer` is loaded before the mock starts: the mock
/// counts prompt tokens with it, so the server's counts are the client's (see
/// [`crate::mock::MockConfig::tokenizer`]). It must load, as in [`load_tokenizer`].
fn mock_tokenizer(config: &Config) -> Result<Option<Arc<Tokenizer>>> {
    let id = match (&config.server.location, &config.model.tokenizer) {
        (ServerLocation::EmbeddedMock, Some(id)) if !config.model.skip_tokenizer_init => id,
        _ => return Ok(None),
    };
    let mode = config.model.tokenizer_mode.parse();
    let opts = TokenizerOptions::new(id.as_str()).mode(mode.map_err(anyhow::Error::msg)?);
    Ok(Some(Arc::new(Tokenizer::load(&opts)?)))
}

/// Python 0.33 re-aligns random text prompts to the server's own tokenizer.
fn needs_alignment(config: &Config) -> bool {
    matches!(&config.dataset.params, DatasetParams::Random(p) if !p.prompt_token_ids)
        && Api::for_backend(config.server.backend).is_some_and(|a| a.is_generation())
}

/// Every request's bytes and what the runs ask of the dataset.
fn build_requests(
    config: &Config,
    target: &Arc<Target>,
    mock: Option<&MockServer>,
    model_id: &str,
    tokenizer: Option<&Tokenizer>,
    console: &Console,
) -> Result<(Prepared, RunDataset)> {
    let align = needs_alignment(config).then(|| target.tokenize_endpoint(model_id));
    let loaded = super::dataset::for_run(config, tokenizer, align, console)?;
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
        .unwrap_or_else(|| model_id.to_string());
    let cx = PrepareCx {
        config,
        target,
        api,
        model_name: &model_name,
        tokenizer,
    };
    // The loaded prompts are in the requests' bytes now: they go with `loaded`.
    let (prepared, dataset) = loaded.prepare(&cx)?;
    let prepared = prepared.with_probe(probe(config, target, api, &model_name)?);
    if let Some(mock) = mock {
        // Here, before the clock, rather than on the mock's core during the run.
        mock.count_ahead(prepared.requests.par_iter().map(|r| r.to_vec()));
    }
    Ok((prepared, dataset))
}

/// Runs `work` on a thread pool of its own that ends with it.
///
/// Dataset generation tokenizes on every thread it runs on, and the BPE word cache
/// ([`crate::tokenizer`]'s, like the crate's before it) is per thread, freed only when
/// the thread exits (~10 MB each with a 150k-token vocabulary). On rayon's global pool those
/// caches would live through the run; on this pool they go with its threads, before the
/// engine starts.
fn on_scratch_threads<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("vllm-bench-prep-{i}"))
        .build()
    {
        Ok(pool) => pool.install(work),
        // No threads to spare: the global pool does the same work.
        Err(_) => work(),
    }
}

/// One request to each replica of `which` at once (the ready check of several replicas);
/// the replicas whose request failed, with the error.
fn one_request_each(
    engine: &Engine,
    prepared: &Prepared,
    which: &[usize],
) -> Result<Vec<(usize, String)>> {
    let mut w = prepared.subset(which.len(), Some(which.len()));
    w.replica_of = Some(which.iter().map(|&r| r as u16).collect());
    let report = engine.run(w, |_| {})?;
    let mut answered = vec![None; which.len()];
    for (o, rec) in report.merged.outputs.iter().zip(&report.merged.records) {
        if let Some(slot) = answered.get_mut(rec.index as usize) {
            *slot = Some(if o.success {
                None
            } else {
                Some(o.error.clone())
            });
        }
    }
    Ok(which
        .iter()
        .zip(answered)
        .filter_map(|(&r, a)| match a {
            Some(None) => None,
            Some(Some(e)) => Some((r, e)),
            None => Some((r, "no response".to_string())),
        })
        .collect())
}

/// One request through the engine (the ready check).
fn one_request(engine: &Engine, prepared: &Prepared) -> Result<()> {
    // One worker: the run takes one core of the engine.
    let report = engine.run(prepared.subset(1, Some(1)), |_| {})?;
    match report.merged.outputs.first() {
        Some(o) if o.success => Ok(()),
        Some(o) => Err(anyhow::Error::msg(o.error.clone())),
        None => Err(anyhow::anyhow!("no response")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOCK_RUN: [&str; 7] = [
        "--mock-server",
        "--num-prompts",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
    ];

    #[test]
    fn a_plan_against_the_embedded_mock_prepares_every_request_before_the_clock() {
        let (console, captured) = Console::capture();
        let plan = Plan::build(&Config::of_args(&MOCK_RUN), &console, &StopHandle::manual())
            .expect("the plan builds");
        assert!(plan.mock.is_some(), "the embedded mock serves it");
        assert_eq!(plan.prepared.requests.len(), 3);
        assert_eq!(&plan.prepared.prompt_lens[..], [8, 8, 8]);
        assert_eq!(plan.prepared.output_lens, [2, 2, 2]);
        assert!(plan.tokenizer.is_some());
        assert!(!plan.engine_opts.cores.is_empty());
        let out = captured.lock().unwrap().clone();
        assert!(out.stdout.is_empty(), "building prints no result: {out:?}");
    }

    #[test]
    fn a_dry_run_plan_prints_its_dataset_and_builds_no_engine() {
        let (console, captured) = Console::capture();
        let mut args = MOCK_RUN.to_vec();
        args.push("--dry-run");
        Plan::describe(&Config::of_args(&args), &console).expect("the dry run succeeds");
        let out = captured.lock().unwrap().clone();
        assert!(out.stdout.contains("Requests: 3 (text prompts)"), "{out:?}");
    }
}
