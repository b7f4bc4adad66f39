//! Sharded runs under a real Slurm: the one-node cluster of `scripts/servers/slurm-local.sh`
//! (slurmctld, slurmd and munge on this host, 8 task slots), with the ranks reaching an
//! in-process mock on 127.0.0.1. docs/distributed.md's `sbatch` script submitted as written
//! (`sbatch --wait`), `srun -n 3` directly, and a rank that fails. Each merge is compared with
//! one process's run of the same workload (requests, ids, prompt hashes, totals, and the
//! metrics of the union).
//!
//! The cluster is started once per test binary (a no-op when `.ci/run` started it). Where it
//! cannot start (no root, no Debian packages), the tests print `SKIP:` and pass, unless
//! `VLLM_BENCH_REQUIRE_REAL_SERVERS=1` (CI), where that fails them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use vllm_bench::mock::MockServer;

use crate::e2e::mock;
use crate::shards::{assert_merge_is_one_run, at_one_start, doc_block, doc_env, read_json};
use crate::util::{run_command, server_script, server_start_command, skip_or_fail, Run, TempDir};

/// Slurm's own limit on every job here (minutes): a job outlives a test that gave up on it
/// (the test's own timeout kills `srun`/`sbatch`, not the job), so it must end by itself.
const JOB_MINUTES: &str = "4";

/// True when the one-node cluster runs (started here if needed, once); else `SKIP:` (or a
/// failure under `VLLM_BENCH_REQUIRE_REAL_SERVERS=1`) and false.
fn slurm() -> bool {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        let script = server_script("slurm-local.sh");
        if !script.exists() {
            return Err(format!("{} does not exist", script.display()));
        }
        let cmd = server_start_command(&script);
        let run = run_command(cmd, "slurm-local.sh start");
        if run.code != 0 {
            let last = run.stderr.lines().last().unwrap_or("").to_string();
            return Err(format!("start failed (exit {}): {last}", run.code));
        }
        Ok(())
    });
    match started {
        Ok(()) => true,
        Err(why) => {
            skip_or_fail("slurm-local.sh", why);
            false
        }
    }
}

/// The rank's command of the documented script: the body of its `srun bash -c '...'`.
fn rank_command(script: &str) -> String {
    let start = script.find("srun bash -c '").expect("an srun bash -c line") + 14;
    let len = script[start..].find('\'').expect("a closing quote");
    script[start..start + len].to_string()
}

/// The mock's logged model requests from `from` on: (X-Request-Id, prompt hash), sorted.
fn logged(server: &MockServer, from: usize) -> Vec<(String, u64)> {
    let mut seen: Vec<(String, u64)> = server.request_log()[from..]
        .iter()
        .filter(|r| r.path.ends_with("/completions"))
        .map(|r| {
            (
                r.request_id.clone().expect("an X-Request-Id"),
                r.prompt_hash.expect("a prompt"),
            )
        })
        .collect();
    seen.sort();
    seen
}

/// The prefix the ranks derived for their request ids (`bench-XXXXXXXX-`): every id is it
/// followed by the request's number.
fn id_prefix(requests: &[(String, u64)]) -> String {
    let prefixes: BTreeMap<&str, usize> =
        requests.iter().fold(BTreeMap::new(), |mut m, (id, _)| {
            let cut = id.trim_end_matches(|c: char| c.is_ascii_digit());
            *m.entry(cut).or_default() += 1;
            m
        });
    assert_eq!(prefixes.len(), 1, "one prefix for all ranks: {prefixes:?}");
    prefixes.into_keys().next().unwrap().to_string()
}

/// The shard results `shard-K.json` of `results` and their merge, against one process
/// running the same rank command (`SLURM_PROCID=0 SLURM_NTASKS=1`, so it records the same
/// per-request facts) with the ranks' request-id prefix: the same requests with the same
/// ids and prompts reached the server, and the merge is that run's (see
/// [`assert_merge_is_one_run`]).
fn assert_like_one_process(server: &MockServer, command: &str, results: &Path, shards: usize) {
    let by_ranks = logged(server, 0);
    assert_eq!(by_ranks.len(), 24, "the ranks' requests at the server");
    let prefix = id_prefix(&by_ranks);
    let from = server.request_log().len();
    let single = results.with_file_name("single");
    std::fs::create_dir_all(&single).unwrap();
    let one = format!("{command} --request-id-prefix {prefix}");
    at_one_start(1, |_, start_at| {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &one]).current_dir(&single);
        doc_env(&mut cmd, &server.base_url(), &single);
        cmd.env("SLURM_PROCID", "0")
            .env("SLURM_NTASKS", "1")
            .env("START_AT", start_at);
        run_command(cmd, "one process")
    });
    assert_eq!(
        logged(server, from),
        by_ranks,
        "one process sends the ranks' requests (ids, prompts)"
    );
    let docs: Vec<Value> = (0..shards)
        .map(|k| read_json(&results.join(format!("shard-{k}.json"))))
        .collect();
    let merged = read_json(&results.join("merged.json"));
    assert_eq!(merged["vllm_bench_shard_count"], shards, "{merged}");
    let check = &merged["vllm_bench_start_check"]["shards"];
    assert_eq!(check.as_array().map(Vec::len), Some(shards), "{merged}");
    assert_merge_is_one_run(&read_json(&single.join("shard-0.json")), &docs, &merged);
}

/// A directory for one test: the documented script, `results/` and the jobs' output.
struct Job {
    dir: TempDir,
    server: MockServer,
}

impl Job {
    fn new(name: &str) -> Job {
        Job {
            dir: TempDir::new(name),
            server: mock(|_| {}),
        }
    }

    fn results(&self) -> PathBuf {
        self.dir.path().join("results")
    }

    /// A command in the job's directory with the documented script's variables.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.dir.path());
        doc_env(&mut cmd, &self.server.base_url(), &self.results());
        cmd
    }
}

/// `srun -n 3` of `rank` (a bash script) at one `--start-at`, retried (bounded) when a busy
/// machine missed it; the run of the last try.
fn srun_three(job: &Job, rank: &str) -> Run {
    std::fs::create_dir_all(job.results()).unwrap();
    for margin in [8.0, 20.0, 60.0] {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let start_at = format!("{:.3}", now.as_secs_f64() + margin);
        let mut cmd = job.command("srun");
        cmd.args(["-n", "3", "--oversubscribe", "--time", JOB_MINUTES])
            .args(["--job-name", "vllm-bench-test", "bash", "-c", rank])
            .env("START_AT", &start_at);
        let run = run_command(cmd, "srun -n 3");
        if !run.stderr.contains("in the past") {
            return run;
        }
    }
    panic!("the ranks never started before their --start-at");
}

#[test]
fn the_documented_sbatch_script_merges_to_the_one_process_run() {
    if !slurm() {
        return;
    }
    let job = Job::new("sbatch");
    let script = doc_block("slurm");
    let path = job.dir.path().join("job.sbatch");
    std::fs::write(&path, &script).unwrap();
    // As written, but for the node count: this cluster is one node, so its 3 ranks share
    // it (command-line options override the script's #SBATCH lines).
    let run = ["8", "20", "60"]
        .iter()
        .map(|delay| {
            let mut cmd = job.command("sbatch");
            cmd.args(["--wait", "--nodes=1", "--ntasks=3", "--ntasks-per-node=3"])
                .args(["--oversubscribe", "--time", JOB_MINUTES])
                .arg(format!("--output={}/job-%j.out", job.dir.arg()))
                .arg(&path)
                .env("START_DELAY", delay);
            let run = run_command(cmd, "sbatch --wait");
            let output = job_output(job.dir.path());
            (run, output)
        })
        .find(|(_, output)| !output.contains("in the past"))
        .expect("the ranks started before their --start-at");
    let (run, output) = run;
    assert_eq!(run.code, 0, "{}\n{}\n{output}", run.stdout, run.stderr);
    for k in 0..3 {
        assert!(output.contains(&format!("Shard {k}/3:")), "{output}");
    }
    assert!(output.contains("Shards merged:"), "{output}");
    assert_like_one_process(&job.server, &rank_command(&script), &job.results(), 3);
}

/// The output files of the jobs in `dir` (the last one's last), concatenated.
fn job_output(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.to_string_lossy().ends_with(".out"))
        .collect();
    files.sort();
    let last = files.last().cloned();
    last.map_or_else(String::new, |p| {
        std::fs::read_to_string(p).unwrap_or_default()
    })
}

#[test]
fn srun_of_three_ranks_merges_to_the_one_process_run() {
    if !slurm() {
        return;
    }
    let job = Job::new("srun");
    let rank = rank_command(&doc_block("slurm"));
    let run = srun_three(&job, &rank);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let results = job.results();
    let files: Vec<String> = (0..3)
        .map(|k| {
            results
                .join(format!("shard-{k}.json"))
                .display()
                .to_string()
        })
        .collect();
    let mut cmd = job.command(env!("CARGO_BIN_EXE_vllm-bench"));
    cmd.arg("merge").args(&files).args([
        "--result-dir",
        results.to_str().unwrap(),
        "--result-filename",
        "merged.json",
    ]);
    let merged = run_command(cmd, "merge");
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_like_one_process(&job.server, &rank, &results, 3);
}

#[test]
fn a_failed_rank_makes_the_merge_name_its_shard() {
    if !slurm() {
        return;
    }
    let job = Job::new("srun-fail");
    // Rank 2 gets a flag vllm-bench does not know, and exits 2 at once.
    let rank = format!(
        "bad=; if [ \"$SLURM_PROCID\" = 2 ]; then bad=--no-such-flag; fi\n{} $bad",
        rank_command(&doc_block("slurm"))
    );
    let run = srun_three(&job, &rank);
    assert_ne!(run.code, 0, "srun reports the failed rank");
    assert!(run.stderr.contains("--no-such-flag"), "{}", run.stderr);
    let results = job.results();
    assert!(!results.join("shard-2.json").exists());
    // The documented merge line, over the files that are there.
    let mut cmd = job.command("bash");
    cmd.args([
        "-c",
        "vllm-bench merge \"$RESULTS\"/shard-*.json --result-dir \"$RESULTS\" \
         --result-filename merged.json",
    ]);
    let merged = run_command(cmd, "merge");
    assert_eq!(merged.code, 2, "{}\n{}", merged.stdout, merged.stderr);
    let lines: Vec<&str> = merged.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("shard 2/3 is missing (given: 0/3, 1/3)"),
        "{}",
        lines[0]
    );
    assert!(!results.join("merged.json").exists());
}
