//! A shard's facts as its result file saves them: [`save`] maps each field of [`RunFacts`]
//! to the shard section (`output::shard_file::ShardSection`, serde's one serialization of
//! it), and `modes::merged_facts` maps N such sections back to one [`RunFacts`]. The two
//! directions sit beside the fields they carry, so a fact added to `RunFacts` is saved here
//! and read back there, and the shard file holds nothing else the merge reads.
//!
//! Beside the facts, a shard saves where it sits among the shards ([`ShardPlace`]): its
//! number, the workload's fingerprint, each request's index in the one-process run, the
//! hash of its bytes and its arrival offset, the per-core histograms (added up by the
//! merge) and the whole run's settings where its own differ (its share of the concurrency).

use crate::metrics::steady_state::SteadyStateParams;
use crate::output::shard_file::{
    GpuExporter, Requests, Settings, ShardRequest, ShardSection, StartBlock, StartFacts, FORMAT,
};

use super::run_facts::RunFacts;

/// Where a shard sits among the shards of its run: what it saves beside its facts.
pub struct ShardPlace {
    pub shard: usize,
    pub shards: usize,
    /// The workload all shards share, 16 hex digits.
    pub fingerprint: String,
    /// `--start-at`, Unix seconds.
    pub start_at: Option<f64>,
    /// Per request (in the facts' order), its index in the one-process run, the hash of a
    /// session's first request bytes, and its arrival offset, seconds.
    pub index: Vec<u32>,
    pub hash: Vec<Option<u64>>,
    pub scheduled: Vec<f64>,
    /// Requests this shard planned (completed + failed + cancelled + not sent).
    pub planned: usize,
    /// The whole run's `--max-concurrency` (the facts hold this shard's share).
    pub max_concurrency: Option<u64>,
    /// The whole run's steady-state settings, when they apply.
    pub steady_state: Option<SteadyStateParams>,
    /// Per core: ttft, itl, e2el and dispatch lag, encoded (`shard_file::encode_core`).
    pub histograms: Vec<[String; 4]>,
    pub start: Option<StartFacts>,
    pub start_block: Option<StartBlock>,
}

/// The shard section of `facts`, a shard's facts, at `place`.
pub fn save(facts: &RunFacts<'_>, place: ShardPlace) -> ShardSection {
    let r = &facts.requests;
    let lens = facts.output_lens();
    let several = facts.replica_urls.len() > 1;
    let mut requests = Requests {
        generated_text: facts.settings.save_detailed.then(Vec::new),
        ..Requests::default()
    };
    for (j, output) in facts.outputs.iter().enumerate() {
        let (start_ns, end_ns) = r.spans[j];
        requests.push(ShardRequest {
            index: place.index[j],
            hash: place.hash[j],
            scheduled: place.scheduled[j],
            start_ns,
            end_ns,
            output,
            output_len: lens[j],
            turn: r
                .turns
                .as_ref()
                .map(|(ids, numbers)| (ids[j].as_str(), numbers[j])),
            replica: several.then(|| r.replica.get(j).copied().unwrap_or(0)),
            adapter: r.adapter.as_ref().map(|a| a[j]),
            audio_s: r.audio_s.as_ref().map(|a| a[j]),
        });
    }
    let settings = &facts.settings;
    let server_metrics = facts
        .server
        .metrics
        .filter(|m| !m.endpoints.is_empty())
        .and_then(|m| {
            let text = crate::output::server_metrics::to_json(m).to_json_string();
            let mut doc: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&text).ok()?;
            doc.remove(crate::output::server_metrics::KEY)
        });
    ShardSection {
        format: FORMAT,
        shard: place.shard,
        shards: place.shards,
        fingerprint: place.fingerprint,
        start_at: place.start_at,
        planned: place.planned,
        not_sent: facts.not_sent,
        not_sent_session_ended: facts.not_sent_session_ended,
        cancelled: facts.cancelled,
        duration: facts.duration_s,
        interrupted: facts.interrupted,
        run: crate::output::json::RunInfo {
            max_concurrency: place.max_concurrency,
            ..facts.info.clone()
        },
        settings: Settings {
            percentiles: settings.percentiles.clone(),
            percentile_metrics: settings
                .percentile_metrics
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(","),
            goodput: [
                settings.goodput.ttft_ms,
                settings.goodput.tpot_ms,
                settings.goodput.e2el_ms,
            ],
            goodput_ttfo: settings.goodput.ttfo_ms,
            has_tokenizer: facts.count_tokens.is_some(),
            save_detailed: settings.save_detailed,
            steady_state: place.steady_state,
        },
        failures: facts.failures.clone(),
        requests,
        histograms: place.histograms,
        engine: facts.engine.clone(),
        health: facts.health.first().map(|p| p.health.clone()),
        prefix_cache: facts.prefix_cache,
        start: place.start,
        start_block: place.start_block,
        replicas: if several {
            facts.replica_urls.clone()
        } else {
            Vec::new()
        },
        adapters: facts.adapter_names.clone(),
        rps_events: facts.rps_events.clone(),
        probes: facts.probes.clone(),
        server_metrics,
        agentic: facts.agentic.clone(),
        gpu_telemetry: facts
            .gpu
            .iter()
            .map(|(url, s)| GpuExporter::save(url, s))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::config::MergeConfig;
    use crate::metrics::goodput::GoodputConfig;
    use crate::metrics::metric_stats::MetricKind;
    use crate::metrics::report::TaskKind;
    use crate::metrics::RequestOutput;
    use crate::output::facts::{Cancelled, EngineFacts, PartHealth, PrefixCache};
    use crate::output::health::{ClientHealth, CoreHealth};
    use crate::output::json::{RpsChangeEvent, RunInfo};
    use crate::output::run_result::Shards;
    use crate::output::shard_file::CoreStartFacts;
    use crate::output::stdio::Console;
    use crate::server_metrics::gpu::dcgm;
    use crate::server_metrics::{EndpointMetrics, Figures, Series, ServerMetrics};

    use super::super::run_facts::{MetricSettings, RequestFacts, ServerView};

    const N: usize = 30;

    fn output(i: usize) -> RequestOutput {
        let f = i as f64;
        let success = i % 9 != 4;
        RequestOutput {
            success,
            error: if success {
                String::new()
            } else {
                "HTTP 503".into()
            },
            latency: 0.2 + f * 0.011,
            // Every third answered without usage: its length is the tokenizer's count.
            output_tokens: if i.is_multiple_of(3) {
                0
            } else {
                4 + (i % 4) as u64
            },
            ttft: 0.03 + f * 0.002,
            itl: (0..3).map(|k| 0.005 + k as f64 * 0.001).collect(),
            prompt_len: 20 + i as u64,
            start_time: f * 0.04,
            client_queue_time: 0.0002 * f,
            ttfo: success.then_some(0.05 + f * 0.002),
            reasoning_tokens: Some(2),
            generated_text: "a b c d e".into(),
            ..RequestOutput::default()
        }
    }

    fn scrape() -> ServerMetrics {
        let mut figures = Figures::default();
        figures
            .counters
            .insert(crate::server_metrics::vllm::REQUEST_SUCCESS.into(), 27.0);
        figures.series.t = vec![-0.5, 0.6, 1.8];
        ServerMetrics {
            endpoints: vec![EndpointMetrics {
                url: "http://server/metrics".into(),
                scrapes: 3,
                failed: 0,
                figures,
            }],
            notes: Vec::new(),
        }
    }

    /// A DCGM exporter's scrapes of two GPUs: power, utilisation and the energy counter,
    /// one reading missing and one not a number.
    fn gpu_scrapes() -> Series {
        let mut s = Series {
            t: vec![-0.25, 0.5, 1.0, 1.5, 1.875],
            ..Series::default()
        };
        for (g, base) in [("0", 1e6), ("1", 2e6)] {
            let gpu = crate::server_metrics::exposition::Gpu {
                host: "node".into(),
                gpu: g.into(),
            };
            let mut set = |name: &str, values: Vec<Option<f64>>| {
                s.per_gpu
                    .entry(name.into())
                    .or_default()
                    .insert(gpu.clone(), values);
            };
            set(
                dcgm::TOTAL_ENERGY_CONSUMPTION,
                vec![
                    Some(base),
                    Some(base + 3e4),
                    None,
                    Some(base + 9e4),
                    Some(base + 1.1e5),
                ],
            );
            set(
                dcgm::POWER_USAGE,
                vec![
                    Some(90.0),
                    Some(110.5),
                    Some(f64::NAN),
                    Some(130.25),
                    Some(95.0),
                ],
            );
            set(
                dcgm::GPU_UTIL,
                vec![Some(0.0), Some(40.0), Some(60.0), Some(70.0), Some(0.0)],
            );
        }
        s
    }

    /// One run's facts with every feature a shard can have: LoRA adapters, audio, turns,
    /// replicas, probes, a ramp-up, cancellation, goodput with TTFO, the steady state, the
    /// engine and client health, a trace's prefix cache, a start at `--start-at`, the
    /// server's scrape and a GPU exporter's.
    fn facts<'a>(
        outputs: &'a [RequestOutput],
        (server, gpu): (&'a ServerMetrics, &'a Series),
        count: crate::metrics::calculator::CountTokens<'a>,
        start: &StartBlock,
    ) -> RunFacts<'a> {
        let core = CoreHealth {
            core: 0,
            busy_fraction: 0.25,
            wait_fraction: Some(0.01),
            longest_stall: Duration::from_micros(300),
            window: Duration::from_secs(2),
        };
        RunFacts {
            info: RunInfo {
                date: "20261203-120000".into(),
                backend: "openai-chat".into(),
                label: Some("all".into()),
                model_id: "m".into(),
                tokenizer_id: Some("t".into()),
                num_prompts: N as u64,
                metadata: vec![("k".into(), "v".into())],
                request_rate: 15.0,
                burstiness: 1.0,
                max_concurrency: Some(4),
                ramp_up: None,
            },
            task: TaskKind::Generation,
            duration_s: 1.75,
            settings: MetricSettings {
                percentiles: vec![50.0, 90.0, 99.0],
                percentile_metrics: MetricKind::parse_list("ttft,ttfo,tpot,itl,e2el"),
                goodput: GoodputConfig {
                    ttft_ms: Some(60.0),
                    ttfo_ms: Some(80.0),
                    ..GoodputConfig::default()
                },
                save_detailed: true,
                steady_state: Some(SteadyStateParams {
                    threshold: 0.5,
                    max_concurrency: 4,
                    min_window_s: Some(0.1),
                }),
            },
            count_tokens: Some(count),
            outputs,
            requests: RequestFacts {
                spans: (0..N)
                    .map(|i| {
                        let start = (outputs[i].start_time * 1e9) as u64;
                        (start, start + (outputs[i].latency * 1e9) as u64)
                    })
                    .collect(),
                turns: Some((
                    (0..N).map(|i| format!("c{}", i / 3)).collect(),
                    (0..N).map(|i| (i % 3) as u64 + 1).collect(),
                )),
                adapter: Some((0..N).map(|i| (i % 2) as u32).collect()),
                audio_s: Some((0..N).map(|i| 0.5 + i as f64 * 0.1).collect()),
                replica: (0..N).map(|i| (i % 2) as u16).collect(),
                index: (0..N as u32).collect(),
                shard: None,
            },
            adapter_names: vec!["sql".into(), "chat".into()],
            replica_urls: vec!["http://a:1".into(), "http://b:2".into()],
            probes: vec![Some(0.01), None, Some(0.03), Some(0.02)],
            rps_events: vec![RpsChangeEvent {
                rps: 15,
                timestamp: "2026-12-03T12:00:00".into(),
            }],
            engine: Some(EngineFacts {
                cores: 1,
                driver: "io_uring".into(),
                uring_setup: Some("defer".into()),
                workers: 4,
                cpus_kept_awake: true,
            }),
            dispatch_lag: None,
            health: vec![PartHealth {
                name: String::new(),
                health: ClientHealth {
                    cores: vec![core],
                    arrivals: N,
                    late_arrivals: 1,
                    answered: N - 3,
                    median_latency: Some(Duration::from_millis(40)),
                },
                dispatch_lag: None,
            }],
            failures: vec![("http_503".into(), 3, "HTTP 503".into())],
            not_sent: 2,
            not_sent_session_ended: 1,
            cancelled: Some(Cancelled {
                requests: 1,
                not_sent_session: 1,
                context_overflows: 2,
            }),
            interrupted: false,
            prefix_cache: Some(PrefixCache {
                ideal_token_hit_ratio: 0.5,
                ideal_block_hit_ratio: 0.25,
                measured_hit_ratio: Some(0.125),
            }),
            start: crate::output::start::start_section(Some(start)),
            server: ServerView {
                metrics: Some(server),
                from_shard: None,
            },
            shards: Shards::Whole,
            epoch_ns: Vec::new(),
            gpu: vec![("http://gpu-node:9400/metrics", gpu)],
            agentic: Some(agentic()),
        }
    }

    /// An agentic replay's facts: trace-a replayed once (SPEC TC1's timeline), in profiling.
    fn agentic() -> crate::metrics::agentic::AgenticFacts {
        use crate::datasets::agentic::{
            derive, Phase, ReplayOutcome, ReplayRecord, StreamKind, WekaTrace,
        };
        let trace = include_str!("../../tests/fixtures/agentic/traces/trace-a.json");
        let s = |x: f64| (x * 1e9) as i64;
        let records = [
            (0, 0, 0.0),
            (1, 0, 0.5),
            (1, 1, 1.5),
            (0, 1, 3.5),
            (0, 2, 5.3),
        ]
        .map(|(stream, turn, sent)| ReplayRecord {
            tree: 0,
            pass: 0,
            lane: 0,
            stream,
            kind: [StreamKind::Root, StreamKind::Subagent][stream as usize],
            turn,
            phase: Phase::Profiling,
            sent_ns: s(sent),
            first_token_ns: Some(s(sent + 0.1)),
            end_ns: s(sent + 0.5),
            itl_intervals: 2,
            prompt_tokens: 200,
            output_tokens: 40,
            cached_tokens: Some(64),
            outcome: ReplayOutcome::Completed,
        });
        crate::metrics::agentic::AgenticFacts {
            records: records.to_vec(),
            shapes: vec![crate::metrics::agentic::TreeShape::of(&derive(
                &WekaTrace::parse(trace).unwrap(),
            ))],
            settings: crate::metrics::agentic::AgenticSettings {
                duration_s: Some(60.0),
                streaming: true,
                ignore_eos: true,
                cache_bust: true,
                system_idle_cap_s: Some(10.0),
                forbidden: Vec::new(),
                cancelled: false,
                threshold_crossed: None,
                server_prefix_cache_hit: Some(0.25),
            },
        }
    }

    /// Every key of `a` (the run's document) in `b` (the merge's) with its value, floats
    /// equal but for their last bits; the keys `a` has and `b` lacks are named.
    fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => differences(v, w, &format!("{at}.{k}"), out),
                        None => out.push(format!("{at}.{k} missing from the merge")),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    differences(v, w, &format!("{at}[{i}]"), out);
                }
            }
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                if (x - y).abs() > 1e-9 * x.abs().max(y.abs()).max(1.0) {
                    out.push(format!("{at}: {x} != {y}"));
                }
            }
            _ if a != b => out.push(format!("{at}: {a} != {b}")),
            _ => {}
        }
    }

    /// The facts a shard saves are the run's facts: its file, merged alone, gives back every
    /// key of the run's result with its value (and the run's console block).
    #[test]
    fn a_saved_run_merged_alone_reports_every_key_of_the_run() {
        let outputs: Vec<RequestOutput> = (0..N).map(output).collect();
        let server = scrape();
        let gpu = gpu_scrapes();
        let scrapes = (&server, &gpu);
        let count = |text: &str| text.split(' ').count();
        let start = StartBlock {
            late_ms: 0.0,
            lead_s: 2.0,
            cores: vec![CoreStartFacts {
                core: 0,
                connections: 4,
                connecting_s: 0.01,
                ready_ms: -1990.0,
            }],
        };
        let run = facts(&outputs, scrapes, &count, &start).result();
        let run_doc: Value =
            serde_json::from_str(&run.document().unwrap().to_json_string()).unwrap();
        for key in [
            "rtfx",
            "per_turn_metrics",
            "vllm_bench_lora_summary",
            "vllm_bench_replicas",
            "probe_median_e2el_ms",
            "rps_change_events",
            "vllm_bench_cancelled",
            "mean_ttfo_ms",
            "request_goodput",
            "steady_state",
            "vllm_bench_client_health",
            "vllm_bench_trace_ideal_prefix_hit_ratio",
            "vllm_bench_start",
            "vllm_bench_server_metrics",
            "vllm_bench_agentic",
            "vllm_bench_gpu_telemetry",
        ] {
            assert!(
                run_doc.get(key).is_some_and(|v| !v.is_null()),
                "{key} not in the run's result"
            );
        }
        let place = ShardPlace {
            shard: 0,
            shards: 1,
            fingerprint: "00000000000000ab".into(),
            start_at: Some(1.8e9),
            index: (0..N as u32).collect(),
            hash: (0..N as u64).map(Some).collect(),
            scheduled: outputs.iter().map(|o| o.start_time).collect(),
            planned: N + 3,
            max_concurrency: Some(4),
            steady_state: facts(&outputs, scrapes, &count, &start)
                .settings
                .steady_state,
            histograms: vec![crate::output::shard_file::encode_core(
                &crate::engine::recorder::Histograms::default(),
            )],
            start: None,
            start_block: Some(start.clone()),
        };
        let section = save(&facts(&outputs, scrapes, &count, &start), place);
        let dir = std::env::temp_dir().join(format!("vllm-bench-saved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k0.json");
        let mut doc = serde_json::Map::new();
        doc.insert(
            crate::output::shard_file::KEY.into(),
            serde_json::to_value(&section).unwrap(),
        );
        std::fs::write(&file, Value::Object(doc).to_string()).unwrap();
        let args = MergeConfig {
            files: vec![file],
            result_dir: Some(dir.clone()),
            result_filename: Some("m.json".into()),
            export_requests: None,
        };
        let (console, captured) = Console::capture();
        let merged = super::super::merge::run(&args, &console).unwrap();
        let merged_doc: Value =
            serde_json::from_str(&std::fs::read_to_string(merged.path).unwrap()).unwrap();
        let mut wrong = Vec::new();
        differences(&run_doc, &merged_doc, "", &mut wrong);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // The console block too, but for the merge's own lines (which shards it is of).
        let stdout = captured.lock().unwrap().stdout.clone();
        let ours = |s: &str| !s.starts_with("Shard") && !s.contains(".json");
        let lines = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| ours(l))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(lines(&stdout), lines(&run.render(false)));
        let _ = std::fs::remove_dir_all(dir);
    }
}
