//! Sharded runs (`--shard K/N`, `--start-at`) and `vllm-bench merge`, against the in-process
//! mock: the shards of a run send exactly the one-process run's requests, and their merge
//! reports what one process would have.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::e2e::{assert_refused, mock};
use crate::interrupt::{collect_lines, wait_exit, STEP_TIMEOUT};
use crate::util::{run_in_process, vllm_bench_env, vllm_bench_via, Run, TempDir};

/// The workload every shard and the one-process run share: 24 requests at 200 req/s,
/// 5 in flight at most, fixed ids.
fn workload_args(url: &str) -> Vec<String> {
    let mut args = crate::util::mock_random_args(url);
    for a in [
        "--num-prompts",
        "24",
        "--request-rate",
        "200",
        "--max-concurrency",
        "5",
        "--seed",
        "11",
        "--request-id-prefix",
        "shard-test-",
        "--disable-tqdm",
        "--save-result",
    ] {
        args.push(a.to_string());
    }
    args
}

pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Per request of a shard result: index → (request hash, arrival offset).
pub(crate) fn requests_of(doc: &Value) -> BTreeMap<u64, (Value, f64)> {
    let r = &doc["vllm_bench_shard"]["requests"];
    let column = |k: &str| r[k].as_array().expect("a column").clone();
    let (index, hash, scheduled) = (column("index"), column("request_hash"), column("scheduled"));
    index
        .iter()
        .zip(hash)
        .zip(scheduled)
        .map(|((i, h), s)| (i.as_u64().unwrap(), (h, s.as_f64().unwrap())))
        .collect()
}

/// Runs `count` shards at once, `launch(k, start_at)` starting shard k, all with one
/// `--start-at`. A start time that passed while a busy machine started the processes is
/// retried with a later one (bounded). Every shard must succeed.
pub(crate) fn at_one_start(count: usize, launch: impl Fn(usize, &str) -> Run + Sync) -> Vec<Run> {
    for margin in [6.0, 20.0, 60.0] {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let start_at = format!("{:.3}", now.as_secs_f64() + margin);
        let runs: Vec<Run> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..count)
                .map(|k| {
                    let (launch, start_at) = (&launch, &start_at);
                    s.spawn(move || launch(k, start_at))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if runs.iter().any(|r| r.stderr.contains("in the past")) {
            continue;
        }
        for (k, r) in runs.iter().enumerate() {
            assert_eq!(r.code, 0, "shard {k}:\n{}\n{}", r.stdout, r.stderr);
        }
        return runs;
    }
    panic!("the shards never started before their --start-at");
}

/// The flags that make shard k of a run writing `shard{k}.json` into `dir`.
fn shard_flags(
    args: &[String],
    shard: &str,
    start_at: &str,
    dir: &TempDir,
    k: usize,
) -> Vec<String> {
    let mut a = args.to_vec();
    let name = format!("shard{k}.json");
    for extra in [
        "--shard",
        shard,
        "--start-at",
        start_at,
        "--result-dir",
        dir.arg(),
    ] {
        a.push(extra.to_string());
    }
    a.extend(["--result-filename".to_string(), name]);
    a
}

/// [`at_one_start`] on this machine: shard k with `env(k)` and `--shard spec(k)`.
fn run_shards(
    args: &[String],
    dir: &TempDir,
    count: usize,
    spec: impl Fn(usize) -> String + Sync,
    env: impl Fn(usize) -> Vec<(&'static str, String)> + Sync,
) -> Vec<Run> {
    at_one_start(count, |k, start_at| {
        let a = shard_flags(args, &spec(k), start_at, dir, k);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let vars = env(k);
        if vars.is_empty() {
            return run_in_process(&a);
        }
        // Variables of its own (Slurm's, a Kubernetes Job's): a process of its own.
        let vars: Vec<(&str, &Path)> = vars
            .iter()
            .map(|(n, v)| (*n, Path::new(v.as_str())))
            .collect();
        vllm_bench_env(&a, dir.path(), &vars)
    })
}

/// `vllm-bench merge` (in process) of `files` in `dir` (the run has no working directory:
/// each is read at `dir/file`) into `dir/out`.
pub(crate) fn merge(dir: &TempDir, files: &[String], out: &str) -> Run {
    let paths: Vec<String> = files
        .iter()
        .map(|f| dir.path().join(f).to_str().expect("utf-8 path").to_owned())
        .collect();
    let mut a = vec!["merge"];
    a.extend(paths.iter().map(String::as_str));
    a.extend(["--result-dir", dir.arg(), "--result-filename", out]);
    run_in_process(&a)
}

fn shard_files(count: usize) -> Vec<String> {
    (0..count).map(|k| format!("shard{k}.json")).collect()
}

/// Shard results (`shards[k]` from shard k) and their merge against one process's run of
/// the same workload (`--shard 0/1`, so it records the same per-request facts): the shards
/// sent exactly its requests (index → hash of the request bytes, which covers ids and
/// prompts, and arrival offset), shard k the indices i ≡ k (mod N); the merge has its
/// counts and token totals, and its latency figures are those of the union of the shards'
/// requests.
pub(crate) fn assert_merge_is_one_run(single: &Value, shards: &[Value], merged: &Value) {
    let count = shards.len();
    let mut union = BTreeMap::new();
    for (k, doc) in shards.iter().enumerate() {
        let section = &doc["vllm_bench_shard"];
        assert_eq!(section["shard"], k, "{section}");
        for (i, facts) in requests_of(doc) {
            assert_eq!(i % count as u64, k as u64, "request {i} in shard {k}");
            assert!(union.insert(i, facts).is_none(), "request {i} twice");
        }
    }
    assert_eq!(union, requests_of(single), "the one-process run's requests");
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "num_prompts",
        "max_concurrency",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
    // Python's means over the successful requests of the union (ms): TTFT, TPOT (of the
    // requests with more than one output token) and E2EL (when it is a percentile metric).
    let (mut ttft, mut tpot, mut e2el) = (Vec::new(), Vec::new(), Vec::new());
    for doc in shards {
        let r = &doc["vllm_bench_shard"]["requests"];
        let column = |k: &str| r[k].as_array().unwrap_or_else(|| panic!("{k}")).clone();
        let (ok, first, latency, len) = (
            column("success"),
            column("ttft"),
            column("latency"),
            column("output_len"),
        );
        for j in (0..ok.len()).filter(|&j| ok[j] == true) {
            let (t, l, n) = (
                first[j].as_f64().unwrap(),
                latency[j].as_f64().unwrap(),
                len[j].as_u64().unwrap(),
            );
            ttft.push(t);
            e2el.push(l);
            if n > 1 {
                tpot.push((l - t) / (n - 1) as f64);
            }
        }
    }
    for (metric, values) in [
        ("mean_ttft_ms", ttft),
        ("mean_tpot_ms", tpot),
        ("mean_e2el_ms", e2el),
    ] {
        let Some(got) = merged[metric].as_f64() else {
            assert_eq!(metric, "mean_e2el_ms", "{merged}");
            continue;
        };
        let mean = values.iter().sum::<f64>() / values.len() as f64 * 1e3;
        assert!(
            (got - mean).abs() <= 1e-9 * mean.abs().max(1.0),
            "{metric}: {got}, the union's {mean}"
        );
    }
    assert_eq!(merged["vllm_bench_shards"].as_array().unwrap().len(), count);
    assert!(
        merged.get("vllm_bench_shard").is_none(),
        "a merged result is not a shard"
    );
}

/// N shards (the variables of Slurm or a Kubernetes Indexed Job, `--shard auto`) against
/// one run of the same workload.
fn shards_equal_one_run(count: usize, env: impl Fn(usize) -> Vec<(&'static str, String)> + Sync) {
    let server = mock(|_| {});
    let url = server.base_url();
    let dir = TempDir::new("shards");
    let args = workload_args(&url);
    let mut single: Vec<&str> = args.iter().map(String::as_str).collect();
    single.extend(["--shard", "0/1", "--result-dir", dir.arg()]);
    single.extend(["--result-filename", "single.json"]);
    let one = run_in_process(&single);
    assert_eq!(one.code, 0, "{}\n{}", one.stdout, one.stderr);
    let runs = run_shards(&args, &dir, count, |_| "auto".into(), env);
    for (k, r) in runs.iter().enumerate() {
        assert!(
            r.stdout.contains(&format!("Shard {k}/{count}:")),
            "{}",
            r.stdout
        );
        assert!(r.stdout.contains("Measured run starts at"), "{}", r.stdout);
    }
    let single_doc = read_json(&dir.path().join("single.json"));
    assert_eq!(requests_of(&single_doc).len(), 24);
    let docs: Vec<Value> = (0..count)
        .map(|k| read_json(&dir.path().join(format!("shard{k}.json"))))
        .collect();
    let workers: u64 = docs
        .iter()
        .map(|d| d["max_concurrency"].as_u64().unwrap())
        .sum();
    assert_eq!(
        workers, 5,
        "the shards' workers add up to --max-concurrency"
    );
    let merged = merge(&dir, &shard_files(count), "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert!(
        merged.stdout.contains("Serving Benchmark Result"),
        "{}",
        merged.stdout
    );
    assert!(merged
        .stdout
        .contains(&format!("Shards merged:                           {count}")));
    let m = read_json(&dir.path().join("merged.json"));
    assert_merge_is_one_run(&single_doc, &docs, &m);
    assert_eq!(m["completed"], 24);
    // The shards share the server: the merge shows one shard's scrape (its window covers
    // the merged run, the one-process run before it outside), which saw every shard's
    // requests, once.
    let scrape = &m["vllm_bench_server_metrics"];
    let from = scrape["from_shard"]
        .as_u64()
        .unwrap_or_else(|| panic!("{scrape}"));
    assert!(from < count as u64, "{scrape}");
    assert_eq!(scrape["counters"]["vllm:request_success"], 24.0, "{scrape}");
    assert!(
        merged.stdout.contains(&format!("{from}/{count}")),
        "{}",
        merged.stdout
    );
    assert_eq!(m["vllm_bench_shards"].as_array().unwrap().len(), count);
    // The client is judged once over every shard (worst cause first), each shard beside.
    let health = &m["vllm_bench_client_health"];
    assert!(
        health["verdict"].as_str().unwrap().starts_with("client: "),
        "{health}"
    );
    assert_eq!(
        health["shards"].as_array().unwrap().len(),
        count,
        "{health}"
    );
    let busy = merged
        .stdout
        .lines()
        .find(|l| l.starts_with("Client core busy (%):"))
        .unwrap_or_else(|| panic!("{}", merged.stdout));
    for k in 0..count {
        assert!(busy.contains(&format!("{k}/{count}: ")), "{busy}");
        let verdict = format!("  shard {k}/{count}: client: ");
        assert!(merged.stdout.contains(&verdict), "{}", merged.stdout);
    }
    let cores: u64 = (0..count)
        .map(|k| {
            let doc = read_json(&dir.path().join(format!("shard{k}.json")));
            doc["vllm_bench_engine_cores"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(m["vllm_bench_engine_cores"], cores);
    assert!(
        m.get("vllm_bench_shard").is_none(),
        "a merged result is not a shard"
    );
    // No shard scraped a GPU exporter: no GPU section.
    assert!(m.get("vllm_bench_gpu_telemetry").is_none(), "{m}");
    assert!(
        !merged.stdout.contains("GPU Telemetry"),
        "{}",
        merged.stdout
    );
}

/// Two shards scraping one DCGM exporter (the mock's: 50 mJ per generated token on each of
/// its 2 GPUs): the merge keeps one series of it, so it counts its GPUs once and gives the
/// exact energy of both shards' tokens, and J/token over the merged output tokens.
#[test]
fn two_shards_scraping_one_dcgm_exporter_merge_to_its_exact_energy() {
    let server = crate::gpu_telemetry::dcgm_mock(2);
    let url = server.base_url();
    let dir = TempDir::new("shards-gpu");
    let args = crate::gpu_telemetry::dcgm_args(&url, &format!("{url}/metrics"));
    run_shards(&args, &dir, 2, |k| format!("{k}/2"), |_| Vec::new());
    let merged = merge(&dir, &shard_files(2), "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    let m = read_json(&dir.path().join("merged.json"));
    let tokens = m["total_output_tokens"].as_u64().unwrap();
    assert_eq!(tokens, 12 * 20, "{m}");
    let t = &m["vllm_bench_gpu_telemetry"];
    assert_eq!(t["gpus"], 2, "{t}");
    assert_eq!(t["energy_source"], "energy_counter");
    crate::gpu_telemetry::assert_energy(t, 2.0 * 0.05 * tokens as f64, tokens);
    assert_eq!(merged.stdout.matches(" GPU Telemetry ").count(), 1);
    assert!(
        merged.stdout.contains(&format!(
            "{:<40} 0.1000",
            "Energy per output token (J/token):"
        )),
        "{}",
        merged.stdout
    );
}

/// Shard 0 scrapes one exporter (2 GPUs, the server's), shard 1 another (1 GPU that
/// serves nothing): the merge shows the three GPUs, each exporter's, and their energy over
/// the merged output tokens.
#[test]
fn two_shards_with_other_dcgm_exporters_merge_to_both_exporters_gpus() {
    let (server, idle) = (
        crate::gpu_telemetry::dcgm_mock(2),
        crate::gpu_telemetry::dcgm_mock(1),
    );
    let url = server.base_url();
    let exporters = [
        format!("{url}/metrics"),
        format!("{}/metrics", idle.base_url()),
    ];
    let dir = TempDir::new("shards-gpus");
    at_one_start(2, |k, start_at| {
        let args = crate::gpu_telemetry::dcgm_args(&url, &exporters[k]);
        let a = shard_flags(&args, &format!("{k}/2"), start_at, &dir, k);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_in_process(&a)
    });
    let merged = merge(&dir, &shard_files(2), "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    let m = read_json(&dir.path().join("merged.json"));
    let t = &m["vllm_bench_gpu_telemetry"];
    assert_eq!(t["gpus"], 3, "{t}");
    let per_gpu = t["per_gpu"].as_array().unwrap();
    let urls: Vec<&str> = per_gpu.iter().map(|g| g["url"].as_str().unwrap()).collect();
    assert_eq!(urls, [&exporters[0], &exporters[0], &exporters[1]], "{t}");
    // The idle exporter's GPU drew no energy; the total is the GPUs' sum, per merged token.
    assert_eq!(per_gpu[2]["energy_j"].as_f64(), Some(0.0), "{t}");
    let sum: f64 = per_gpu
        .iter()
        .map(|g| g["energy_j"].as_f64().unwrap())
        .sum();
    assert!(sum > 0.0, "{t}");
    let tokens = m["total_output_tokens"].as_u64().unwrap();
    assert_eq!(tokens, 12 * 20);
    crate::gpu_telemetry::assert_energy(t, sum, tokens);
}

#[test]
fn two_slurm_ranks_send_the_one_process_run() {
    shards_equal_one_run(2, |k| {
        vec![
            ("SLURM_PROCID", k.to_string()),
            ("SLURM_NTASKS", "2".to_string()),
        ]
    });
}

#[test]
fn three_indexed_job_pods_send_the_one_process_run() {
    shards_equal_one_run(3, |k| {
        vec![
            ("JOB_COMPLETION_INDEX", k.to_string()),
            ("VLLM_BENCH_SHARDS", "3".to_string()),
        ]
    });
}

#[test]
fn merge_refuses_what_is_not_one_run() {
    let server = mock(|_| {});
    let url = server.base_url();
    let dir = TempDir::new("merge-refusals");
    let args = workload_args(&url);
    run_shards(&args, &dir, 2, |k| format!("{k}/2"), |_| Vec::new());
    // Another seed: another workload.
    let mut other: Vec<&str> = args.iter().map(String::as_str).collect();
    other.extend(["--seed", "12", "--shard", "1/2", "--result-dir", dir.arg()]);
    other.extend(["--result-filename", "other.json"]);
    let r = run_in_process(&other);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let cases: [(&[&str], &str); 4] = [
        (
            &["shard0.json", "other.json"],
            "a shard of a different workload",
        ),
        (&["shard0.json"], "shard 1/2 is missing"),
        (&["shard0.json", "shard0.json"], "are both shard 0/2"),
        (&["shard0.json", "nope.json"], "nope.json: cannot read it"),
    ];
    for (files, needle) in cases {
        let files: Vec<String> = files.iter().map(|f| f.to_string()).collect();
        let run = merge(&dir, &files, "m.json");
        assert_eq!(run.code, 2, "{files:?}: {}", run.stderr);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{files:?}: {lines:?}");
        assert!(lines[0].contains(needle), "{files:?}: {lines:?}");
    }
    // A result that is not a shard's.
    std::fs::write(dir.path().join("plain.json"), "{\"completed\": 1}").unwrap();
    let run = merge(&dir, &["plain.json".into()], "m.json");
    assert!(
        run.code == 2 && run.stderr.contains("not a shard result"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("m.json").exists());
}

#[test]
fn bad_shard_flags_are_one_line() {
    let url = "http://127.0.0.1:9";
    let base = ["--base-url", url, "--model", "m", "--num-prompts", "10"];
    let with = |extra: &[&'static str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a
    };
    assert_refused(&with(&["--shard", "3/3"]), "--shard 3/3: K must be below N");
    assert_refused(&with(&["--shard", "two"]), "expected K/N");
    assert_refused(&with(&["--start-at", "1000"]), "s in the past");
    assert_refused(
        &with(&["--shard", "0/2", "--max-concurrency", "1"]),
        "--max-concurrency: 1 is fewer than the 2 shards",
    );
    assert_refused(
        &with(&["--shard", "0/2", "--num-runs", "2"]),
        "cannot be combined with --num-runs",
    );
    let mut args = with(&["--shard", "auto"]);
    args.push("--disable-tqdm");
    let run = run_in_process(&args);
    // The test's own environment may be a Slurm job; only judge a clean one.
    if std::env::var_os("SLURM_PROCID").is_none()
        && std::env::var_os("JOB_COMPLETION_INDEX").is_none()
    {
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("--shard auto") && run.stderr.contains("SLURM_PROCID"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn conversations_stay_whole_within_a_shard() {
    let server = mock(|_| {});
    let url = server.base_url();
    let dir = TempDir::new("shard-conversations");
    let tokenizer = crate::util::smollm2();
    let target = crate::util::chat_mock_flags(&url, tokenizer.to_str().unwrap());
    let conversations = [
        "--multi-turn",
        "--multi-turn-num-turns",
        "3",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        "5",
        "--disable-tqdm",
        "--save-result",
    ];
    let args: Vec<String> = [&target[..], &conversations[..]]
        .concat()
        .iter()
        .map(|s| s.to_string())
        .collect();
    run_shards(&args, &dir, 2, |k| format!("{k}/2"), |_| Vec::new());
    let mut all = Vec::new();
    for k in 0..2 {
        let doc = read_json(&dir.path().join(format!("shard{k}.json")));
        let ids = doc["vllm_bench_conversation_ids"]
            .as_array()
            .unwrap()
            .clone();
        let index = doc["vllm_bench_shard"]["requests"]["index"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(ids.len(), index.len());
        all.extend(ids.iter().map(|c| (c.as_str().unwrap().to_string(), k)));
    }
    assert_eq!(all.len(), 15, "5 conversations of 3 turns");
    let mut owner = BTreeMap::new();
    for (conversation, k) in all {
        assert_eq!(
            *owner.entry(conversation.clone()).or_insert(k),
            k,
            "{conversation} split"
        );
    }
    assert_eq!(owner.len(), 5);
    let merged = merge(&dir, &shard_files(2), "merged.json");
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert!(
        merged.stdout.contains("===== Turn 3 ====="),
        "{}",
        merged.stdout
    );
    let m = read_json(&dir.path().join("merged.json"));
    assert_eq!(m["completed"], 15);
    let turns = m["per_turn_metrics"].as_array().expect("per-turn figures");
    assert_eq!(turns.len(), 3);
    assert!(turns.iter().all(|t| t["completed"] == 5), "{turns:?}");
    let numbers = m["vllm_bench_turns"].as_array().unwrap();
    assert_eq!(numbers.iter().filter(|n| **n == 1).count(), 5);
    assert_eq!(
        m["vllm_bench_conversation_ids"].as_array().unwrap().len(),
        15
    );
}

/// Network namespaces this test made itself, deleted (with their veth pairs) on drop.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A server namespace and `shards` client namespaces, client k joined to the server by a
/// veth pair on 10.213.k.0/24 (the server at .1, the client at .2).
fn make_namespaces(shards: usize) -> Result<Namespaces, String> {
    let tag = std::process::id() % 100_000;
    let server = format!("vbs{tag}");
    let mut made = Namespaces(vec![server.clone()]);
    ip(&["netns", "add", &server])?;
    ip(&["-n", &server, "link", "set", "lo", "up"])?;
    for k in 0..shards {
        let client = format!("vbc{tag}-{k}");
        ip(&["netns", "add", &client])?;
        made.0.push(client.clone());
        let (a, b) = (format!("vbs{tag}x{k}"), format!("vbc{tag}x{k}"));
        ip(&[
            "link", "add", &a, "netns", &server, "type", "veth", "peer", "name", &b, "netns",
            &client,
        ])?;
        ip(&[
            "-n",
            &server,
            "addr",
            "add",
            &format!("10.213.{k}.1/24"),
            "dev",
            &a,
        ])?;
        ip(&[
            "-n",
            &client,
            "addr",
            "add",
            &format!("10.213.{k}.2/24"),
            "dev",
            &b,
        ])?;
        ip(&["-n", &server, "link", "set", &a, "up"])?;
        ip(&["-n", &client, "link", "set", &b, "up"])?;
        ip(&["-n", &client, "link", "set", "lo", "up"])?;
    }
    Ok(made)
}

/// `mock-llm-server` inside namespace `ns`, killed on drop.
struct NsServer(Child);

impl Drop for NsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the mock in `ns` on every address of the namespace and waits (bounded) for its
/// listening line.
fn start_ns_server(ns: &str, port: u16) -> NsServer {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_mock-llm-server")])
        .args(["--host", "0.0.0.0", "--port", &port.to_string()])
        .args(["--first-token-delay-ms", "5", "--token-interval-ms", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mock-llm-server in its namespace");
    let stderr = child.stderr.take().expect("stderr");
    let server = NsServer(child);
    let mut lines = BufReader::new(stderr).lines();
    // Bounded by the server: it prints the line or exits (and the pipe closes).
    let listening = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with("listening on"));
    assert!(listening, "mock-llm-server in {ns} did not start");
    // Keep draining so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    server
}

#[test]
fn shards_in_their_own_network_namespaces_merge_to_one_run() {
    let shards = 2;
    let ns = match make_namespaces(shards) {
        Ok(ns) => ns,
        Err(why) => {
            crate::util::skip_or_fail("network namespaces", &why);
            return;
        }
    };
    let port = 8000;
    let _server = start_ns_server(&ns.0[0], port);
    let dir = TempDir::new("shard-netns");
    at_one_start(shards, |k, start_at| {
        let args = workload_args(&format!("http://10.213.{k}.1:{port}"));
        let a = shard_flags(&args, &format!("{k}/{shards}"), start_at, &dir, k);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let client = ns.0[k + 1].as_str();
        vllm_bench_via(&["ip", "netns", "exec", client], &a, dir.path(), &[])
    });
    let merged = merge(&dir, &shard_files(shards), "merged.json");
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = read_json(&dir.path().join("merged.json"));
    assert_eq!(
        (m["completed"].as_u64(), m["failed"].as_u64()),
        (Some(24), Some(0))
    );
    let seen: Vec<u64> = (0..shards)
        .flat_map(|k| {
            let doc = read_json(&dir.path().join(format!("shard{k}.json")));
            requests_of(&doc).into_keys().collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen.len(), 24);
}

/// The code block of docs/distributed.md after the marker `<!-- test: NAME -->`.
pub(crate) fn doc_block(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/distributed.md");
    let doc = std::fs::read_to_string(&path).expect("docs/distributed.md");
    let marker = format!("<!-- test: {name} -->");
    let after = &doc[doc.find(&marker).unwrap_or_else(|| panic!("no {marker}")) + marker.len()..];
    let body = &after[after.find("```").expect("a code block") + 3..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    body[..body.find("```").expect("a closing fence")].to_string()
}

/// The one YAML document of `text`; a parse error or another count fails naming `what`.
fn yaml_doc(text: &str, what: &str) -> Yaml {
    let mut docs = YamlLoader::load_from_str(text)
        .unwrap_or_else(|e| panic!("{what} is not YAML: {e}\n{text}"));
    assert_eq!(docs.len(), 1, "{what}: one YAML document expected\n{text}");
    docs.remove(0)
}

/// A string field of a manifest, failing with its path when it is missing or not a string.
fn yaml_str<'a>(node: &'a Yaml, path: &str) -> &'a str {
    node.as_str()
        .unwrap_or_else(|| panic!("{path} must be a string, got {node:?}"))
}

/// Checks `job` against what the Job API (batch/v1) requires and what a Job's pods must
/// have, and returns its first container: `apiVersion: batch/v1`, `kind: Job`, a DNS-label
/// `metadata.name`, a pod template whose `restartPolicy` is `Never` or `OnFailure` (the
/// API refuses `Always` for a Job), containers with a name, an image, and `command`/`args`
/// lists of strings, env values that are strings (an unquoted number is refused), and
/// volume mounts that name a declared volume.
fn assert_valid_job<'a>(job: &'a Yaml, what: &str) -> &'a Yaml {
    assert_eq!(
        job["apiVersion"].as_str(),
        Some("batch/v1"),
        "{what}: apiVersion"
    );
    assert_eq!(job["kind"].as_str(), Some("Job"), "{what}: kind");
    let name = yaml_str(&job["metadata"]["name"], "metadata.name");
    assert!(
        !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-'),
        "{what}: metadata.name {name:?} is not a DNS label"
    );
    let pod = &job["spec"]["template"]["spec"];
    let restart = yaml_str(&pod["restartPolicy"], "spec.template.spec.restartPolicy");
    assert!(
        ["Never", "OnFailure"].contains(&restart),
        "{what}: a Job's restartPolicy must be Never or OnFailure, not {restart}"
    );
    let volumes: Vec<&str> = pod["volumes"]
        .as_vec()
        .map(|v| {
            v.iter()
                .map(|v| yaml_str(&v["name"], "volumes[].name"))
                .collect()
        })
        .unwrap_or_default();
    let containers = pod["containers"]
        .as_vec()
        .unwrap_or_else(|| panic!("{what}: spec.template.spec.containers must be a list"));
    assert!(!containers.is_empty(), "{what}: no container");
    for c in containers {
        yaml_str(&c["name"], "containers[].name");
        assert!(!yaml_str(&c["image"], "containers[].image").is_empty());
        for key in ["command", "args"] {
            let list = c[key]
                .as_vec()
                .unwrap_or_else(|| panic!("{what}: containers[].{key} must be a list"));
            for item in list {
                yaml_str(item, &format!("containers[].{key}[]"));
            }
        }
        for var in c["env"].as_vec().map(Vec::as_slice).unwrap_or_default() {
            let var_name = yaml_str(&var["name"], "env[].name");
            yaml_str(&var["value"], &format!("env {var_name}: value"));
        }
        for mount in c["volumeMounts"]
            .as_vec()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let m = yaml_str(&mount["name"], "volumeMounts[].name");
            assert!(volumes.contains(&m), "{what}: mount {m} names no volume");
            yaml_str(&mount["mountPath"], "volumeMounts[].mountPath");
        }
    }
    &containers[0]
}

/// A container's environment variable `name`, as the pod sees it.
fn container_env<'a>(container: &'a Yaml, name: &str) -> Option<&'a str> {
    container["env"]
        .as_vec()?
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .and_then(|v| v["value"].as_str())
}

/// The shell script a documented Job's container runs: `command: ["sh", "-c"]` and the script
/// as its one argument, as Kubernetes reads the YAML.
fn container_script(manifest: &str, what: &str) -> String {
    let job = yaml_doc(manifest, what);
    let container = assert_valid_job(&job, what);
    let command: Vec<&str> = container["command"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(command, ["sh", "-c"], "{what}: command");
    let args = container["args"].as_vec().unwrap();
    assert_eq!(args.len(), 1, "{what}: one script in args");
    args[0].as_str().unwrap().to_string()
}

/// The variables the documented scripts read, for a small run against `url` into `results`.
pub(crate) fn doc_env(cmd: &mut Command, url: &str, results: &Path) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("VLLM_URL", url)
        .env("MODEL", "mock-model")
        .env("PROMPTS", "24")
        .env("CONCURRENCY", "4")
        .env("RESULTS", results)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VLLM_BENCH_CORES");
}

fn merged_count(results: &Path) -> u64 {
    let m = read_json(&results.join("merged.json"));
    assert_eq!(m["vllm_bench_shard_count"], 2, "{m}");
    m["completed"].as_u64().unwrap()
}

#[test]
fn the_documented_indexed_job_runs_as_written() {
    let server = mock(|_| {});
    let dir = TempDir::new("indexed-job");
    let shard = container_script(&doc_block("kubernetes-shard"), "the Indexed Job");
    let merge_script = container_script(&doc_block("kubernetes-merge"), "the merge Job");
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    at_one_start(2, |k, start_at| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &shard]).current_dir(dir.path());
        doc_env(&mut cmd, &server.base_url(), &results);
        cmd.env("JOB_COMPLETION_INDEX", k.to_string())
            .env("VLLM_BENCH_SHARDS", "2")
            .env("START_AT", start_at);
        crate::util::run_command(cmd, "an Indexed Job pod")
    });
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &merge_script]).current_dir(dir.path());
    doc_env(&mut cmd, &server.base_url(), &results);
    let merged = crate::util::run_command(cmd, "the merge Job");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert_eq!(merged_count(&results), 24);
}

/// The documented submit step (`sed ... job.yaml | kubectl apply -f -`), run as written with
/// a stand-in `kubectl` that only records what it was given: there is no cluster here, so
/// the rendered manifest is checked against the Job API's required fields, not applied.
#[test]
fn the_documented_submit_step_renders_a_valid_indexed_job() {
    let dir = TempDir::new("indexed-job-render");
    std::fs::write(dir.path().join("job.yaml"), doc_block("kubernetes-shard")).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(
        &kubectl,
        "#!/bin/sh\n[ \"$*\" = \"apply -f -\" ] || { echo \"kubectl stand-in: $*\" >&2; exit 64; }\n\
         cat > \"$KUBECTL_APPLIED\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let applied = dir.path().join("applied.yaml");
    let submit = doc_block("kubernetes-submit");
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = now();
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", &submit])
        .current_dir(dir.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("KUBECTL_APPLIED", &applied);
    let run = crate::util::run_command(cmd, "the documented submit step");
    let after = now();
    assert_eq!(run.code, 0, "{submit}\n{}{}", run.stdout, run.stderr);

    let rendered = std::fs::read_to_string(&applied).expect("kubectl was given the manifest");
    assert!(!rendered.contains("@START_AT@"), "{rendered}");
    let job = yaml_doc(&rendered, "the rendered Indexed Job");
    let container = assert_valid_job(&job, "the rendered Indexed Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"]
        .as_i64()
        .expect("spec.completions is an integer");
    assert!(n >= 1, "completions {n}");
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(n),
        "parallelism = completions"
    );
    assert_eq!(
        container_env(container, "VLLM_BENCH_SHARDS"),
        Some(n.to_string().as_str()),
        "VLLM_BENCH_SHARDS = completions"
    );
    let start_at: u64 = container_env(container, "START_AT")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("START_AT is not Unix seconds:\n{rendered}"));
    // Ahead of the submission by enough for pods to be scheduled, and not absurdly far.
    assert!(
        (before + 30..=after + 3600).contains(&start_at),
        "START_AT {start_at} is not 30 s to 1 h after submitting ({before}..={after})"
    );
    let script = container["args"][0].as_str().unwrap();
    for needed in [
        "--shard auto",
        "--start-at \"$START_AT\"",
        "--result-filename \"shard-$JOB_COMPLETION_INDEX.json\"",
    ] {
        assert!(
            script.contains(needed),
            "the pod's script lacks {needed}:\n{script}"
        );
    }
    // The pods write where the merge Job reads.
    let merge = yaml_doc(&doc_block("kubernetes-merge"), "the merge Job");
    let merge_container = assert_valid_job(&merge, "the merge Job");
    assert_eq!(
        merge["spec"]["template"]["spec"]["volumes"],
        spec["template"]["spec"]["volumes"]
    );
    assert_eq!(
        container_env(merge_container, "RESULTS"),
        container_env(container, "RESULTS")
    );
}

/// Starts `args` in its own process group with stdout and stderr read on threads; the
/// receiver hears when a stdout line starts with `marker`.
fn spawn_watched(
    args: &[String],
    cwd: &Path,
    marker: &'static str,
) -> (
    Child,
    std::sync::mpsc::Receiver<()>,
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .args(args)
        .current_dir(cwd)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VLLM_BENCH_CORES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn vllm-bench");
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let out = collect_lines(child.stdout.take().expect("stdout"), marker, seen_tx);
    let (unused_tx, _) = std::sync::mpsc::channel();
    let err = collect_lines(child.stderr.take().expect("stderr"), "\u{0}", unused_tx);
    (child, seen_rx, out, err)
}

#[test]
fn a_shard_interrupted_before_start_at_writes_strict_json_and_merges() {
    // Both shards wait for a start five minutes away and are interrupted while waiting (a
    // run that ignored the signal fails on the bounded wait, not by passing late).
    let dir = TempDir::new("shard-interrupted");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_at = format!("{:.3}", now.as_secs_f64() + 300.0);
    let base: Vec<String> = [
        "--mock-server",
        "--num-prompts",
        "8",
        "--disable-tqdm",
        "--save-result",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut shards = Vec::new();
    for k in 0..2 {
        let args = shard_flags(&base, &format!("{k}/2"), &start_at, &dir, k);
        shards.push(spawn_watched(&args, dir.path(), "Measured run starts at"));
    }
    for (child, waiting, _, _) in &shards {
        if waiting.recv_timeout(STEP_TIMEOUT).is_ok() {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        }
    }
    for (k, (mut child, _, out, err)) in shards.into_iter().enumerate() {
        let code = wait_exit(&mut child, STEP_TIMEOUT);
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        assert!(
            out.contains("Measured run starts at"),
            "shard {k}:\n{out}\n{err}"
        );
        assert_eq!(code, Some(130), "shard {k}:\n{out}\n{err}");
        let text = std::fs::read_to_string(dir.path().join(format!("shard{k}.json")))
            .unwrap_or_else(|e| panic!("shard {k} saved no result: {e}\n{err}"));
        for token in ["NaN", "Infinity"] {
            assert!(!text.contains(token), "shard {k} wrote {token}: {text}");
        }
        let doc: Value = serde_json::from_str(&text).expect("strict JSON");
        assert_eq!(doc["vllm_bench_interrupted"], true, "shard {k}");
        assert_eq!(doc["vllm_bench_shard"]["interrupted"], true, "shard {k}");
        assert_eq!(doc["completed"], 0, "shard {k}: nothing was sent");
        // Nothing counted reads 0.0, as Python prints a run with no success (never NaN).
        assert_eq!(
            doc["request_throughput"].as_f64(),
            Some(0.0),
            "shard {k}: nothing over 0 s"
        );
    }

    let run = merge(&dir, &shard_files(2), "merged.json");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.starts_with("warning: interrupted shard(s) "))
        .unwrap_or_else(|| panic!("no warning: {}", run.stderr));
    let named = |k: usize| {
        format!(
            "{k}/2 ({})",
            dir.path().join(format!("shard{k}.json")).display()
        )
    };
    assert!(
        warning.contains(&named(0)) && warning.contains(&named(1)),
        "{warning}"
    );
    assert!(run.stdout.contains("Interrupted:"), "{}", run.stdout);
    let text = std::fs::read_to_string(dir.path().join("merged.json")).unwrap();
    assert!(!text.contains("NaN"), "{text}");
    let merged: Value = serde_json::from_str(&text).expect("strict JSON");
    assert_eq!(merged["vllm_bench_interrupted"], true);
    let count = |k: &str| {
        merged[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {merged}"))
    };
    assert_eq!(
        count("completed") + count("failed") + count("vllm_bench_not_sent"),
        8,
        "every request accounted for"
    );

    // --compare reads both the shard's and the merged result.
    let (shard0, merged_file) = (
        dir.path().join("shard0.json"),
        dir.path().join("merged.json"),
    );
    let cmp = run_in_process(&[
        "--compare",
        shard0.to_str().expect("utf-8 path"),
        merged_file.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(cmp.code, 0, "{}", cmp.stderr);
    assert!(cmp.stdout.contains("completed"), "{}", cmp.stdout);
}

#[test]
fn a_shard_that_starts_after_start_at_is_flagged_by_the_merge() {
    // Shard 0 waits for a start a few seconds ahead; shard 1 is only started once that start
    // has passed by 100 ms (a start up to 1 s past is still taken), so its clock and its
    // first request are at least that late.
    let dir = TempDir::new("shard-late");
    let base: Vec<String> = [
        "--mock-server",
        "--num-prompts",
        "8",
        "--disable-tqdm",
        "--save-result",
    ]
    .map(str::to_owned)
    .to_vec();
    for margin in [4.0, 10.0, 30.0] {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let t = now.as_secs_f64() + margin;
        let start_at = format!("{t:.3}");
        let (first, late) = std::thread::scope(|s| {
            let first = s.spawn(|| {
                let a = shard_flags(&base, "0/2", &start_at, &dir, 0);
                run_in_process(&a.iter().map(String::as_str).collect::<Vec<_>>())
            });
            // Bounded: t is at most `margin` seconds away.
            while SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
                < t + 0.1
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let a = shard_flags(&base, "1/2", &start_at, &dir, 1);
            let late = run_in_process(&a.iter().map(String::as_str).collect::<Vec<_>>());
            (first.join().unwrap(), late)
        });
        if first.stderr.contains("in the past") || late.stderr.contains("in the past") {
            continue; // A busy machine took longer than the slack to build the plan.
        }
        assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
        assert_eq!(late.code, 0, "{}\n{}", late.stdout, late.stderr);
        assert!(
            late.stdout.contains("ms ago: this shard starts late"),
            "{}",
            late.stdout
        );
        let run = merge(&dir, &shard_files(2), "merged.json");
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let warnings: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with("warning: the shards did not start together"))
            .collect();
        assert_eq!(warnings.len(), 1, "{}", run.stderr);
        assert!(
            warnings[0].contains("tolerance 50 ms") && warnings[0].contains("1/2 +"),
            "{}",
            warnings[0]
        );
        assert!(run.stdout.contains("Start spread (ms):"), "{}", run.stdout);
        let m = read_json(&dir.path().join("merged.json"));
        let check = &m["vllm_bench_start_check"];
        assert_eq!(check["together"], false, "{check}");
        let shard1 = &check["shards"][1];
        assert_eq!(shard1["shard"], "1/2", "{check}");
        for key in ["ready_ms", "late_ms"] {
            let v = shard1[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: {check}"));
            assert!(v >= 100.0, "{key} {v}: started after --start-at + 100 ms");
        }
        // Its clock started when it was ready: its first request went out on its own time.
        assert!(shard1["first_send_late_ms"].is_number(), "{check}");
        assert!(check["spread_ms"].as_f64().unwrap() > 50.0, "{check}");
        return;
    }
    panic!("the late shard never started within the second a start may be past");
}

/// `a` (the run's) found in `b` (the merge's), equal but for the last bits of floats (a
/// merge sums in the one-process run's request order, a run in its records' order) and
/// the order of per-request number lists. Every key of an object of `a` must be in `b`'s
/// (a key the run reports and the merge drops fails by its path); `b` may add its own
/// (which shard a figure is from).
fn assert_same(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
                "{at}: {x} != {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            let sorted = |v: &[Value]| {
                let mut v = v.to_vec();
                if v.iter().all(Value::is_number) {
                    v.sort_by(|p, q| p.as_f64().unwrap().total_cmp(&q.as_f64().unwrap()));
                }
                v
            };
            for (i, (p, q)) in sorted(x).iter().zip(sorted(y).iter()).enumerate() {
                assert_same(p, q, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let theirs = y
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k} missing from the merge"));
                assert_same(v, theirs, &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

/// The sections of a console block, by their title lines.
fn sections(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("==") || l.starts_with("--"))
        .filter(|l| l.trim_matches(|c| c == '=' || c == '-').len() > 1)
        .collect()
}

/// `args` as shard `spec` (`K/N`) saving `name` into `dir`, at `--start-at at` when given.
fn part_args(
    args: &[String],
    dir: &TempDir,
    spec: &str,
    name: &str,
    at: Option<&str>,
) -> Vec<String> {
    let mut a = args.to_vec();
    let flags = ["--disable-tqdm", "--save-result", "--shard", spec];
    a.extend(flags.iter().map(|f| f.to_string()));
    a.extend(["--result-dir", dir.arg(), "--result-filename", name].map(String::from));
    if let Some(at) = at {
        a.extend(["--start-at".to_string(), at.to_string()]);
    }
    a
}

/// Runs `args` as one process (`--shard 0/1`, saving `shard0.json` into `dir`) and as 3
/// shards (`three{K}.json`), all four at once (at one `--start-at` when `start_at`: one wait
/// for all), each of which must succeed. Returns the run; the shards' results are in `dir`.
fn one_run_and_three_shards(args: &[String], dir: &TempDir, start_at: bool) -> Run {
    let launch = |k: usize, at: &str| {
        let at = start_at.then_some(at);
        let a = match k {
            0 => part_args(args, dir, "0/1", "shard0.json", at),
            k => part_args(
                args,
                dir,
                &format!("{}/3", k - 1),
                &format!("three{}.json", k - 1),
                at,
            ),
        };
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_in_process(&a)
    };
    let mut runs = match start_at {
        true => at_one_start(4, launch),
        false => std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|k| {
                    let launch = &launch;
                    s.spawn(move || launch(k, ""))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        }),
    };
    for (k, r) in runs.iter().enumerate() {
        assert_eq!(r.code, 0, "process {k}:\n{}\n{}", r.stdout, r.stderr);
    }
    runs.remove(0)
}

/// Merges the only shard of `run` (`shard0.json` in `dir`): the merge must print the run's
/// sections in its order, and its result must hold every key of the run's (but the shard
/// section) with the run's value, `keys` among them. Returns the merge's output.
fn assert_one_shard_merges_to_the_run(run: &Run, dir: &TempDir, keys: &[&str]) -> Run {
    let merged = merge(dir, &shard_files(1), "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert_eq!(
        sections(&merged.stdout),
        sections(&run.stdout),
        "{}",
        merged.stdout
    );
    let one = read_json(&dir.path().join("shard0.json"));
    let m = read_json(&dir.path().join("merged.json"));
    for key in keys {
        let v = one
            .get(*key)
            .unwrap_or_else(|| panic!("{key} not in the run's result"));
        assert!(!v.is_null(), "{key} is null in the run's result");
    }
    for (key, value) in one.as_object().unwrap() {
        if key != "vllm_bench_shard" {
            let theirs = m
                .get(key)
                .unwrap_or_else(|| panic!("{key} missing from the merge"));
            assert_same(value, theirs, key);
        }
    }
    merged
}

/// The labelled lines of a console block from Python's first title on, by section: each
/// section's title and the labels of its lines (the text up to the first `:` within the
/// label column; table rows and values are not compared, their figures depend on timing).
fn block_labels(stdout: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let titled = |l: &str| sections(l).len() == 1;
    for line in stdout
        .lines()
        .skip_while(|l| !l.contains(" Serving Benchmark Result "))
    {
        if titled(line) {
            out.push((line.to_string(), Vec::new()));
            continue;
        }
        let label = line.char_indices().find(|&(_, c)| c == ':').map(|(i, _)| i);
        if let (Some(i), Some(last)) = (label.filter(|&i| i <= 40), out.last_mut()) {
            last.1.push(line[..=i].to_string());
        }
    }
    out
}

/// The merge's console block holds the run's: its sections in the run's order (the merge may
/// add its own, such as the shards' starts) and, in each, every labelled line of the run's
/// (the merge may add which shard a figure is from). A line the run shows and the merge
/// lacks fails by its section and label.
fn assert_block_holds_the_runs(run: &str, merged: &str) {
    let theirs = block_labels(merged);
    assert!(
        !block_labels(run).is_empty(),
        "no block in the run's output:\n{run}"
    );
    let mut at = 0;
    for (title, labels) in block_labels(run) {
        let found = theirs[at..]
            .iter()
            .position(|(t, _)| *t == title)
            .unwrap_or_else(|| panic!("section {title:?} missing from the merge (or out of the run's order):\n{merged}"));
        at += found;
        for label in labels {
            assert!(
                theirs[at].1.contains(&label),
                "section {title:?}: line {label:?} missing from the merge:\n{merged}"
            );
        }
        at += 1;
    }
}

/// Every key of `a` (the run's result) in `b` (the merge's), recursively; values are not
/// compared (they depend on timing) but for `null` against a value, which is only checked to
/// be a figure on both sides. Lists of objects are compared by their first element. A key
/// the run reports and the merge lacks fails by its path.
fn assert_keys_hold(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let theirs = y
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k} missing from the merge"));
                assert_keys_hold(v, theirs, &format!("{at}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if let (Some(p @ Value::Object(_)), Some(q)) = (x.first(), y.first()) {
                assert_keys_hold(p, q, &format!("{at}[0]"));
            }
        }
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Number(_), Value::Number(_)) => {}
        _ => assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "{at}: {a} against {b}"
        ),
    }
}

/// Merges the 3 shards of [`one_run_and_three_shards`] (`three{K}.json` in `dir`) against
/// `run`, the same workload as one process (its result `shard0.json`): the merged console
/// block holds the run's sections and lines, the merged result every key of the run's (but
/// its shard section), and `same` (the figures that do not depend on timing) with the run's
/// values.
fn assert_three_shards_merge_like_the_run(run: &Run, dir: &TempDir, same: &[&str]) {
    let files: Vec<String> = (0..3).map(|k| format!("three{k}.json")).collect();
    let merged = merge(dir, &files, "merged3.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert_block_holds_the_runs(&run.stdout, &merged.stdout);
    let mut one = read_json(&dir.path().join("shard0.json"));
    one.as_object_mut().unwrap().remove("vllm_bench_shard");
    let m = read_json(&dir.path().join("merged3.json"));
    assert_keys_hold(&one, &m, "");
    // And nothing the run does not report but which shards a merge is of.
    let merge_only = [
        "vllm_bench_shard_count",
        "vllm_bench_fingerprint",
        "vllm_bench_start_at",
        "vllm_bench_shards",
        "vllm_bench_start_check",
    ];
    let extra: Vec<&String> = m
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| one.get(k.as_str()).is_none() && !merge_only.contains(&k.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "the merge reports {extra:?}, the run does not"
    );
    for key in same {
        let v = one
            .get(*key)
            .unwrap_or_else(|| panic!("{key} not in the run's result"));
        assert_same(v, &m[*key], key);
    }
}

/// Every feature a shard can run at once, against two replicas of a reasoning mock: LoRA
/// adapters, TTFO, goodput, cancellation, the server's metrics, replicas, probes,
/// `--start-at` and the steady state; the merge of its only shard must report all of it
/// back, and 3 shards of it merged every section, line and key of it.
#[test]
fn lora_replicas_ttfo_goodput_cancellation_probes_and_server_metrics_merge_to_the_run() {
    let reasoning = |c: &mut vllm_bench::mock::MockConfig| {
        c.first_token_delay = std::time::Duration::from_millis(10);
        c.reasoning_tokens = 2;
        c.thinking_delay = std::time::Duration::from_millis(15);
    };
    let (a, b) = (mock(reasoning), mock(reasoning));
    let dir = TempDir::new("one-shard-features");
    let mut args = crate::util::mock_random_args(&a.base_url());
    args.extend(
        [
            "--base-url",
            &b.base_url(),
            "--backend",
            "openai-chat",
            "--num-prompts",
            "40",
            "--max-concurrency",
            "4",
            "--seed",
            "5",
            "--lora-modules",
            "sql",
            "chat",
            "--percentile-metrics",
            "ttft,ttfo,tpot,itl,e2el",
            "--goodput",
            "ttft:500",
            "ttfo:800",
            "--request-cancellation-rate",
            "20",
            "--request-cancellation-delay",
            "0.005",
            "--probe-request-rate",
            "50",
        ]
        .map(String::from),
    );
    let run = one_run_and_three_shards(&args, &dir, true);
    let merged = assert_one_shard_merges_to_the_run(
        &run,
        &dir,
        &[
            "vllm_bench_lora_adapters",
            "vllm_bench_lora_summary",
            "mean_ttfo_ms",
            "request_goodput",
            "vllm_bench_cancelled",
            "vllm_bench_server_metrics",
            "vllm_bench_replicas",
            "steady_state",
            "vllm_bench_start",
            "probe_completed",
        ],
    );
    for title in [
        "LoRA adapters",
        " Server Metrics ",
        " Steady-State Metrics ",
    ] {
        assert!(run.stdout.contains(title), "{title}: {}", run.stdout);
        assert!(merged.stdout.contains(title), "{title}: {}", merged.stdout);
    }
    assert_three_shards_merge_like_the_run(
        &run,
        &dir,
        &[
            "completed",
            "failed",
            "num_prompts",
            "max_concurrency",
            "total_input_tokens",
            "total_output_tokens",
            "vllm_bench_cancelled",
            "vllm_bench_lora_adapters",
        ],
    );
}

/// Audio with Python's RTFx: the merge of the only shard (and of 3) computes it again, from
/// each request's audio length the shards saved.
#[test]
fn an_audio_run_merges_to_its_rtfx_from_one_and_three_shards() {
    let server = mock(|_| {});
    let dir = TempDir::new("one-shard-audio");
    let jsonl = crate::backends::audio_dataset(&dir, &[0.5, 1.0, 1.5, 0.25]);
    let mut args = crate::util::mock_random_args(&server.base_url());
    args.extend(
        [
            "--backend",
            "openai-audio",
            "--dataset-name",
            "custom_audio",
            "--dataset-path",
            jsonl.to_str().unwrap(),
            "--custom-output-len",
            "-1",
            "--skip-chat-template",
            "--num-prompts",
            "4",
        ]
        .map(String::from),
    );
    let run = one_run_and_three_shards(&args, &dir, false);
    let merged = assert_one_shard_merges_to_the_run(&run, &dir, &["rtfx"]);
    let line = "RTFx (Inverse Real-Time Factor):";
    let of = |out: &str| out.lines().find(|l| l.starts_with(line)).map(str::to_owned);
    assert!(of(&run.stdout).is_some(), "{}", run.stdout);
    assert_eq!(of(&merged.stdout), of(&run.stdout));
    assert_three_shards_merge_like_the_run(
        &run,
        &dir,
        &[
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
        ],
    );
}

/// Multi-turn: the per-turn blocks and every request's conversation and turn, merged from
/// the only shard and from 3.
#[test]
fn a_multi_turn_run_merges_to_its_turns_from_one_and_three_shards() {
    let server = mock(|_| {});
    let dir = TempDir::new("one-shard-turns");
    let mut args = crate::util::mock_random_args(&server.base_url());
    args.extend(
        [
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--num-prompts",
            "5",
        ]
        .map(String::from),
    );
    let run = one_run_and_three_shards(&args, &dir, false);
    assert_one_shard_merges_to_the_run(
        &run,
        &dir,
        &[
            "per_turn_metrics",
            "vllm_bench_conversation_ids",
            "vllm_bench_turns",
        ],
    );
    assert_three_shards_merge_like_the_run(
        &run,
        &dir,
        &[
            "completed",
            "total_input_tokens",
            "vllm_bench_conversation_ids",
            "vllm_bench_turns",
        ],
    );
}

#[test]
fn merging_the_only_shard_of_a_run_gives_its_report_back() {
    let server = mock(|c| c.first_token_delay = std::time::Duration::from_millis(10));
    let dir = TempDir::new("one-shard");
    let mut args = crate::util::mock_random_args(&server.base_url());
    let flags = [
        "--num-prompts",
        "40",
        "--max-concurrency",
        "4",
        "--seed",
        "3",
        "--disable-tqdm",
        "--save-result",
        "--shard",
        "0/1",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "shard0.json",
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let merged = merge(&dir, &shard_files(1), "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);

    // Python's block, the steady state, ours with the engine and the client's health.
    let expected = sections(&run.stdout);
    for title in [
        " Serving Benchmark Result ",
        " Steady-State Metrics ",
        "vllm-bench",
    ] {
        assert!(expected.iter().any(|l| l.contains(title)), "{}", run.stdout);
    }
    assert_eq!(sections(&merged.stdout), expected, "{}", merged.stdout);
    for line in [
        "Engine:",
        "Client core busy (%):",
        "Arrivals sent >1 ms late:",
    ] {
        let label = |out: &str| out.lines().find(|l| l.starts_with(line)).map(str::to_owned);
        assert_eq!(label(&merged.stdout), label(&run.stdout), "{line}");
    }
    let verdict = |out: &str| {
        out.lines()
            .rfind(|l| l.starts_with("client: "))
            .map(str::to_owned)
    };
    assert!(verdict(&run.stdout).is_some(), "{}", run.stdout);
    assert_eq!(verdict(&merged.stdout), verdict(&run.stdout));

    // Every key of the run's result, with its value.
    let one = read_json(&dir.path().join("shard0.json"));
    let m = read_json(&dir.path().join("merged.json"));
    for key in [
        "steady_state",
        "vllm_bench_client_health",
        "vllm_bench_engine_cores",
        "vllm_bench_io_driver",
        "vllm_bench_workers",
    ] {
        assert!(one.get(key).is_some(), "{key} in the run's result");
    }
    assert!(one["steady_state"].is_object(), "{}", one["steady_state"]);
    for (key, value) in one.as_object().unwrap() {
        if key != "vllm_bench_shard" {
            let theirs = m
                .get(key)
                .unwrap_or_else(|| panic!("{key} missing from the merge"));
            assert_same(value, theirs, key);
        }
    }
}
