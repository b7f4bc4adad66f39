//! Integration tests: cli.
//!
//! The parser and the reference lists stay in step (every Python flag and choice, every flag of
//! the vllm-bench reference, and exactly our documented additions), Python's parsing quirks
//! behave as documented, and each validation rule gives its one-line message.

use std::path::PathBuf;

use serde_json::json;
use vllm_bench::cli::{self, Backend, Cli, CliError, DatasetName};
use vllm_bench::config::{
    self, Config, ConfigError, ConfigErrorKind, DatasetParams, Mode, ProfileWhen, ServerLocation,
};
use vllm_bench::engine::DriverChoice;
use vllm_bench::metrics::goodput::GoodputConfig;
use vllm_bench::metrics::metric_stats::MetricKind;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The text of `tests/fixtures/<rel>` (`crate::util::fixture`).
fn read_fixture(rel: &str) -> String {
    let path = crate::util::fixture(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(args: &[&str]) -> Result<Cli, CliError> {
    cli::parse_from(std::iter::once("vllm-bench").chain(args.iter().copied()))
}

fn config(args: &[&str]) -> Result<Config, String> {
    let cli = parse(args).map_err(|e| e.to_string())?;
    Config::from_cli(cli).map_err(|e| e.to_string())
}

fn ok(args: &[&str]) -> Config {
    config(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The error of a command line that must fail validation: one line, exit code 2.
fn config_error(args: &[&str]) -> ConfigError {
    let cli = parse(args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"));
    let err = Config::from_cli(cli).expect_err("should fail validation");
    assert_eq!(err.exit_code(), 2);
    assert!(!err.message().contains('\n'), "{}", err.message());
    err
}

fn invalid(args: &[&str]) -> String {
    let err = config_error(args);
    assert_eq!(err.kind(), ConfigErrorKind::Invalid, "{}", err.message());
    err.message().to_owned()
}

/// The error of a command line that must fail parsing: one line, exit code 2.
fn usage_error(args: &[&str]) -> String {
    match parse(args) {
        Err(CliError::Usage(msg)) => {
            assert!(!msg.contains('\n'), "{msg}");
            assert_eq!(CliError::Usage(msg.clone()).exit_code(), 2);
            msg
        }
        other => panic!("{args:?}: expected a usage error, got {other:?}"),
    }
}

/// A value the parser accepts for `flag` (choices: the first one).
fn sample_values(cmd: &clap::Command, flag: &str) -> Vec<String> {
    let long = flag.trim_start_matches("--");
    let arg = cmd
        .get_arguments()
        .find(|a| {
            a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|al| al.contains(&long))
        })
        .unwrap_or_else(|| panic!("{flag}: unknown to the parser"));
    if !arg.get_action().takes_values() {
        return Vec::new();
    }
    let value = arg
        .get_possible_values()
        .first()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_else(|| "1".to_owned());
    let count = arg.get_num_args().map_or(1, |r| r.min_values().max(1));
    vec![value; count]
}

/// Long names (and aliases) the parser knows, without `--help`/`--version`.
fn parser_flags() -> Vec<String> {
    let cmd = cli::command();
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        for l in a
            .get_long()
            .into_iter()
            .chain(a.get_all_aliases().unwrap_or_default())
        {
            out.push(format!("--{l}"));
        }
    }
    out
}

/// A minimal POSIX-shell word splitter for the documented example commands (quotes, `\`
/// line continuations).
fn shell_words(cmd: &str) -> Vec<String> {
    let joined = cmd.replace("\\\n", " ");
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = joined.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '"' {
                        break;
                    }
                    cur.push(q);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

// ---------------------------------------------------------------------------------------------
// The parser and the reference lists stay in step

const PYTHON_FLAGS: &str = "reference/python-serve-flags.txt";
const PYTHON_CHOICES: &str = "reference/python-serve-choices.txt";
const SEED: &str = "seeds/002_f5d917b9393e9164.txt";

/// Flags of the vllm-bench reference (the seed README) that Python does not have.
const SEED_EXTRA_FLAGS: &[&str] = &[
    "--compare",
    "--dry-run",
    "--hf-text-column",
    "--max-model-len",
    "--multi-turn",
    "--multi-turn-concurrency",
    "--multi-turn-delay-ms",
    "--multi-turn-max-turns",
    "--multi-turn-min-turns",
    "--multi-turn-num-turns",
    "--multi-turn-prefix-conversation-ratio",
    "--multi-turn-prefix-global-ratio",
    "--no-steady-state",
    "--num-runs",
    "--per-turn-input-len",
    "--profile-batch-threshold",
    "--profile-duration",
    "--prompt-token-ids",
    "--reset-prefix-cache",
    "--same-prompts",
    "--sonnet-input-len",
    "--sonnet-output-len",
    "--sonnet-prefix-len",
    "--speed-bench-config",
    "--speed-bench-max-input-len",
    "--steady-state-min-window",
    "--steady-state-threshold",
    "--sweep-max-concurrency",
    "--sweep-num-prompts-factor",
    "--sweep-request-rate",
    "--sweep-summary-percentiles",
];

/// Our timed-trace replay flags (window, format, malformed lines, text prompts).
const TRACE_FLAGS: &[&str] = &[
    "--timed-trace-duration-sec",
    "--timed-trace-format",
    "--timed-trace-prompt-text",
    "--timed-trace-rebase",
    "--timed-trace-skip-malformed",
    "--timed-trace-start-sec",
    "--timed-trace-wait-parent",
];

/// Our report flags (issue 15).
const REPORT_FLAGS: &[&str] = &["--plot", "--plot-summary", "--terminal-chart"];

/// Our engine flags.
const ENGINE_FLAGS: &[&str] = &[
    "--connect-timeout-sec",
    "--duration",
    "--duration-grace",
    "--interrupt-grace-sec",
    "--io-driver",
    "--keep-cpus-awake",
    "--local-addrs",
    "--max-response-events",
    "--mock-server",
    "--no-preconnect",
    "--num-cores",
    "--request-timeout-sec",
];

/// Sharded runs across processes and machines (docs/distributed.md).
const SHARD_FLAGS: &[&str] = &["--shard", "--start-at"];

/// Several replicas (docs/servers.md, "Several replicas").
const REPLICA_FLAGS: &[&str] = &["--replica-affinity"];

/// The server's Prometheus metrics over the run (docs/server-metrics.md, issue 29).
const SERVER_METRICS_FLAGS: &[&str] = &[
    "--no-server-metrics",
    "--server-metrics-interval",
    "--server-metrics-url",
];

/// Requests the client cancels on purpose (docs/run-modes.md, issue 31).
const CANCEL_FLAGS: &[&str] = &[
    "--request-cancellation-delay",
    "--request-cancellation-rate",
];

/// The embedded mock's reasoning, to try TTFO (docs/reasoning.md, issue 31).
const REASONING_FLAGS: &[&str] = &["--mock-reasoning-tokens", "--mock-thinking-ms"];

/// Watching a run live: the dashboard and the client's own /metrics (docs/live.md, issue 41).
const LIVE_FLAGS: &[&str] = &["--metrics-listen", "--ui"];

/// The SLO capacity search and its slotted mock (docs/slo-search.md, issue 30).
const SLO_FLAGS: &[&str] = &[
    "--mock-slots",
    "--slo",
    "--slo-goodput",
    "--slo-search",
    "--slo-search-max-requests",
    "--slo-search-max-time",
    "--slo-search-range",
    "--slo-search-tolerance",
];

/// The agentic replay's own flags (docs/agentic.md).
const AGENTIC_FLAGS: &[&str] = &[
    "--agentic-failed-request-threshold",
    "--agentic-start-ratio",
    "--agentic-trace-idle-cap",
    "--agentic-warmup-per-lane",
];

/// Per-request export and GPU telemetry (docs/export.md, docs/server-metrics.md, issue 41).
const EXPORT_FLAGS: &[&str] = &["--export-requests", "--gpu-telemetry"];

fn python_flags() -> Vec<String> {
    read_fixture(PYTHON_FLAGS)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("--"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_python_flag_is_accepted() {
    let flags = python_flags();
    assert!(flags.len() > 100, "the flag list looks truncated");
    let cmd = cli::command();
    for flag in flags.iter().filter(|f| *f != "--help") {
        let mut args = vec![flag.clone()];
        args.extend(sample_values(&cmd, flag));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let parsed = parse(&refs).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(parsed.was_given(flag), "{flag} was not recorded as given");
    }
    assert_eq!(parse(&["--help"]).unwrap_err().exit_code(), 0);
}

#[test]
fn our_additional_flags_are_exactly_the_documented_ones() {
    let python = python_flags();
    let mut extra: Vec<String> = parser_flags()
        .into_iter()
        .filter(|f| !python.contains(f))
        .collect();
    extra.sort();
    let mut documented: Vec<String> = SEED_EXTRA_FLAGS
        .iter()
        .chain(ENGINE_FLAGS)
        .chain(TRACE_FLAGS)
        .chain(REPORT_FLAGS)
        .chain(SHARD_FLAGS)
        .chain(SERVER_METRICS_FLAGS)
        .chain(REPLICA_FLAGS)
        .chain(CANCEL_FLAGS)
        .chain(REASONING_FLAGS)
        .chain(SLO_FLAGS)
        .chain(AGENTIC_FLAGS)
        .chain(LIVE_FLAGS)
        .chain(EXPORT_FLAGS)
        .map(|s| s.to_string())
        .collect();
    documented.sort();
    assert_eq!(extra, documented);
    assert_eq!(parse(&["--version"]).unwrap_err().exit_code(), 0);
}

#[test]
fn every_flag_of_the_vllm_bench_reference_is_accepted() {
    // Server-side flags (`vllm serve --enable-lora ...`) and install commands in the README.
    const NOT_CLIENT_FLAGS: &[&str] = &[
        "--enable-lora",
        "--max-loras",
        "--max-lora-rank",
        "--git",
        "--release",
        "--to",
    ];
    let text = read_fixture(SEED);
    let known = parser_flags();
    let mut seen = 0;
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if !word.starts_with("--") || word.len() < 3 || NOT_CLIENT_FLAGS.contains(&word) {
            continue;
        }
        if word == "--help" || word == "--version" {
            continue;
        }
        seen += 1;
        assert!(
            known.iter().any(|k| k == word),
            "{word} from the reference is unknown"
        );
    }
    assert!(seen > 100);
}

#[test]
fn every_example_command_of_the_reference_parses() {
    let text = read_fixture(SEED);
    let lines: Vec<&str> = text.lines().collect();
    let mut examples = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        // A command: `vllm-bench` (maybe after an env assignment) followed by flags.
        let after = line
            .strip_prefix("HF_TOKEN=hf_xxx ")
            .unwrap_or(line)
            .strip_prefix("vllm-bench ");
        let starts = after.is_some_and(|rest| {
            let rest = rest.trim_start();
            rest.starts_with("--") || rest == "\\"
        });
        if !starts || line.contains("--git") {
            i += 1;
            continue;
        }
        let mut cmd = String::from(line);
        while cmd.ends_with('\\') && i + 1 < lines.len() {
            i += 1;
            cmd.push('\n');
            cmd.push_str(lines[i]);
        }
        let words = shell_words(&cmd);
        let start = words.iter().position(|w| w == "vllm-bench").unwrap();
        let args: Vec<&str> = words[start + 1..].iter().map(String::as_str).collect();
        if let Err(e) = parse(&args) {
            panic!("example {args:?} does not parse: {e}");
        }
        examples += 1;
        i += 1;
    }
    assert!(examples >= 25, "only {examples} examples found");
}

/// Sections of the choices file: `# --flag choices (default: ...)` then one value per line.
fn python_choices() -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in read_fixture(PYTHON_CHOICES).lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("# ") {
            let flag = rest.split_whitespace().next().unwrap().to_owned();
            out.push((flag, Vec::new()));
        } else if !line.is_empty() {
            out.last_mut().unwrap().1.push(line.to_owned());
        }
    }
    out
}

#[test]
fn every_python_choice_is_accepted() {
    let sections = python_choices();
    let flags: Vec<&str> = sections.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        flags,
        [
            "--backend",
            "--dataset-name",
            "--lora-assignment",
            "--ramp-up-strategy",
            "--speed-bench-dataset-subset"
        ]
    );
    for (flag, values) in &sections {
        assert!(!values.is_empty(), "{flag}");
        for v in values {
            let parsed = parse(&[flag, v]).unwrap_or_else(|e| panic!("{flag} {v}: {e}"));
            assert!(parsed.was_given(flag));
        }
    }
    // Our backends are Python's plus anthropic-messages; our datasets are Python's plus
    // sonnet and agentic_trace.
    let backends: Vec<&str> = Backend::all()
        .iter()
        .map(|b| b.name())
        .filter(|b| *b != "anthropic-messages")
        .collect();
    let mut python_backends = sections[0].1.clone();
    python_backends.sort();
    let mut ours: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
    ours.sort();
    assert_eq!(ours, python_backends);
    let mut datasets: Vec<String> = DatasetName::all()
        .iter()
        .map(|d| d.name().to_owned())
        .filter(|d| d != "sonnet" && d != "agentic_trace")
        .collect();
    datasets.sort();
    let mut python_datasets = sections[1].1.clone();
    python_datasets.sort();
    assert_eq!(datasets, python_datasets);
}

#[test]
fn golden_command_lines_resolve_to_their_configs() {
    let root = crate::util::fixture("golden/python-0.33");
    let mut checked = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("command.txt").exists())
        .collect();
    dirs.sort();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("command.txt")).unwrap();
        let command = text
            .lines()
            .find_map(|l| l.strip_prefix("command: "))
            .unwrap();
        let words = shell_words(command);
        assert_eq!(&words[..3], ["vllm", "bench", "serve"]);
        let args: Vec<&str> = words[3..].iter().map(String::as_str).collect();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let cfg = config(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = if name.contains("timed-trace") {
            assert!(cfg.rate.self_timed && cfg.request.ignore_eos, "{name}");
            DatasetName::TimedTrace
        } else {
            DatasetName::Random
        };
        assert_eq!(cfg.dataset.name, expected, "{name}");
        assert_eq!(cfg.model.model.as_deref(), Some("mock-model"));
        assert_eq!(cfg.output.result_filename.as_deref(), Some("result.json"));
        assert!(cfg.report.detailed && cfg.output.disable_tqdm);
        checked += 1;
    }
    assert_eq!(checked, 6);

    let chat = ok(&shell_words(
        "--host 127.0.0.1 --port 18431 --model mock-model --backend openai-chat \
         --endpoint /v1/chat/completions --num-prompts 150 --request-rate 100 \
         --max-concurrency 8 --percentile-metrics \
         ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue \
         --metric-percentiles 50,95,99",
    )
    .iter()
    .map(String::as_str)
    .collect::<Vec<_>>());
    assert_eq!(chat.server.request_path(), "/v1/chat/completions");
    assert_eq!(chat.output.percentile_metrics.len(), 6);
    assert_eq!(chat.output.metric_percentiles, [50.0, 95.0, 99.0]);
    assert_eq!(chat.rate.request_rate, 100.0);
    assert_eq!(chat.rate.max_concurrency, Some(8));
}

// ---------------------------------------------------------------------------------------------
// Python's parsing quirks

#[test]
fn underscores_work_in_names_but_values_are_untouched() {
    for args in [
        ["--random_input_len", "5"],
        ["--random_input_len=5", ""],
        ["--random-input_len", "5"],
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        assert_eq!(
            parse(&args).unwrap().dataset.random.random_input_len,
            5,
            "{args:?}"
        );
    }
    let cli = parse(&["--label", "my_label", "--request_id_prefix=a_b-"]).unwrap();
    assert_eq!(cli.output.label.as_deref(), Some("my_label"));
    assert_eq!(cli.request.request_id_prefix.as_deref(), Some("a_b-"));
    // Case matters and single dashes are not long options, as in Python.
    assert!(usage_error(&["--Seed", "1"]).starts_with("unrecognized argument '--Seed'"));
    assert!(usage_error(&["-num-prompts", "1"]).contains("'-num-prompts'"));
}

#[test]
fn unambiguous_prefixes_are_expanded() {
    assert_eq!(
        parse(&["--num-prom", "10"]).unwrap().dataset.num_prompts,
        10
    );
    assert_eq!(
        parse(&["--num_prom", "10"]).unwrap().dataset.num_prompts,
        10
    );
    assert_eq!(parse(&["--num-prom=10"]).unwrap().dataset.num_prompts, 10);
    assert!(parse(&["--disable-tq"]).unwrap().output.disable_tqdm);
    assert!(parse(&["--num-prom", "10"])
        .unwrap()
        .was_given("--num-prompts"));
}

#[test]
fn ambiguous_prefixes_are_an_error() {
    let msg = usage_error(&["--num", "10"]);
    assert!(
        msg.starts_with("ambiguous option: --num could match "),
        "{msg}"
    );
    assert!(
        msg.contains("--num-prompts") && msg.contains("--num-warmups"),
        "{msg}"
    );
}

#[test]
fn unknown_options_get_a_suggestion() {
    let msg = usage_error(&["--num-prompt-s", "10"]);
    assert!(
        msg.starts_with("unrecognized argument '--num-prompt-s'"),
        "{msg}"
    );
}

#[test]
fn dotted_extra_body_is_merged_into_one_object() {
    let cfg = ok(&[
        "--extra-body.temperature",
        "0.5",
        "--extra_body.top_k",
        "5",
        "--extra-body.min_p=0.1",
        "--extra-body.stop+",
        "a,b",
        "--extra-body.max_num",
        "1k",
        "--extra-body.chat_template_kwargs.enable_thinking",
        "false",
        "--extra-body.name",
        "plain text",
    ]);
    assert_eq!(
        serde_json::Value::Object(cfg.request.extra_body),
        json!({"temperature": 0.5, "top_k": 5, "min_p": 0.1, "stop": ["a", "b"],
               "max_num": 1000, "chat_template_kwargs": {"enable_thinking": false},
               "name": "plain text"})
    );
}

#[test]
fn dotted_extra_body_replaces_an_explicit_one() {
    let cfg = ok(&["--extra-body", r#"{"a": 1}"#, "--extra-body.b", "2"]);
    assert_eq!(
        serde_json::Value::Object(cfg.request.extra_body),
        json!({"b": 2})
    );
}

#[test]
fn extra_body_wins_over_sampling_flags() {
    let cfg = ok(&[
        "--temperature",
        "0.7",
        "--top-k",
        "3",
        "--extra-body",
        r#"{"temperature": 0.1, "seed": 5}"#,
    ]);
    assert_eq!(
        serde_json::Value::Object(cfg.request.extra_body),
        json!({"top_k": 3, "temperature": 0.1, "seed": 5})
    );
    assert_eq!(cfg.sampling.temperature, Some(0.7));
}

#[test]
fn the_last_repeated_option_wins() {
    let cli = parse(&["--seed", "1", "--num-prompts", "3", "--seed=2"]).unwrap();
    assert_eq!(cli.dataset.seed, 2);
    assert_eq!(
        cli.warnings(),
        ["duplicate options, the last value wins: --seed"]
    );
    let cli = parse(&["--self-timed", "--no-self-timed"]).unwrap();
    assert!(cli.dataset.timed_trace.no_self_timed && !cli.dataset.timed_trace.self_timed);
}

#[test]
fn equals_values_work() {
    let cli = parse(&["--model=org/m=1", "--header=a=b", "--port=9000"]).unwrap();
    assert_eq!(cli.model.model.as_deref(), Some("org/m=1"));
    assert_eq!(cli.request.header, ["a=b"]);
    assert_eq!(cli.server.port, 9000);
}

#[test]
fn negative_numbers_are_values() {
    // Python fails on `--temperature -0.5 --top-p 0.9` (it reads `-0.5` as a dotted
    // argument); we accept it.
    let cfg = ok(&["--temperature", "-0.5", "--top-p", "0.9", "--top-k", "-1"]);
    assert_eq!(cfg.sampling.temperature, Some(-0.5));
    assert_eq!(cfg.sampling.top_p, Some(0.9));
    assert_eq!(cfg.sampling.top_k, Some(-1));
    assert_eq!(ok(&["--temperature=-0.5"]).sampling.temperature, Some(-0.5));
    assert_eq!(
        ok(&["--temperature", "-0.5"]).sampling.temperature,
        Some(-0.5)
    );
    let msg = usage_error(&["--num-prompts", "-5"]);
    assert_eq!(msg, "--num-prompts -5: expected a non-negative integer");
}

#[test]
fn python_number_forms_are_accepted() {
    let cli = parse(&[
        "--num-prompts",
        "1_000",
        "--request-rate",
        "1e2",
        "--seed",
        " 7",
    ])
    .unwrap();
    assert_eq!(cli.dataset.num_prompts, 1000);
    assert_eq!(cli.rate.request_rate, 100.0);
    assert_eq!(cli.dataset.seed, 7);
    assert_eq!(
        parse(&["--request-rate", "Infinity"])
            .unwrap()
            .rate
            .request_rate,
        f64::INFINITY
    );
    assert_eq!(
        usage_error(&["--num-prompts", "ten"]),
        "--num-prompts ten: expected an integer"
    );
    assert_eq!(
        usage_error(&["--port", "70000"]),
        "--port 70000: a port must be between 1 and 65535"
    );
}

#[test]
fn both_spellings_of_dataset_names_are_accepted() {
    // Python accepts only `timed_trace` (values are never rewritten); we are lenient for our
    // own dataset names and report Python's spelling.
    for name in ["timed_trace", "timed-trace"] {
        let cli = parse(&["--dataset-name", name]).unwrap();
        assert_eq!(cli.dataset.dataset_name, DatasetName::TimedTrace);
    }
    for name in ["random-mm", "random_mm"] {
        assert_eq!(
            parse(&["--dataset-name", name])
                .unwrap()
                .dataset
                .dataset_name,
            DatasetName::RandomMm
        );
    }
    for name in ["speed_bench", "speed-bench"] {
        assert_eq!(
            parse(&["--dataset-name", name])
                .unwrap()
                .dataset
                .dataset_name,
            DatasetName::SpeedBench
        );
    }
    let msg = usage_error(&["--dataset-name", "shaergpt"]);
    assert!(
        msg.starts_with(
            "--dataset-name shaergpt: invalid choice (did you mean sharegpt? choose from sharegpt,"
        ),
        "{msg}"
    );
    // Backend names stay exact, as in Python; the near one is suggested.
    assert!(usage_error(&["--backend", "openai_chat"]).starts_with(
        "--backend openai_chat: invalid choice (did you mean openai-chat? choose from"
    ));
}

#[test]
fn a_misspelled_backend_gets_did_you_mean() {
    // Issue 36: a misspelled --backend got the list of choices and no hint.
    let msg = usage_error(&["--backend", "opneai-chat"]);
    assert!(
        msg.starts_with("--backend opneai-chat: invalid choice (did you mean openai-chat? "),
        "{msg}"
    );
    let msg = usage_error(&["--backend", "anthropic"]);
    assert!(!msg.contains("did you mean"), "too far from any: {msg}");
    let msg = usage_error(&["--backend", "vllm-reranks"]);
    assert!(msg.contains("did you mean vllm-rerank?"), "{msg}");
}

#[test]
fn help_is_grouped_and_marks_unimplemented_flags() {
    let CliError::Help(text) = parse(&["--help"]).unwrap_err() else {
        panic!("expected help");
    };
    let groups = [
        "Server connection:",
        "Model & tokenizer:",
        "Dataset:",
        "Dataset: random:",
        "Rate control:",
        "Sampling parameters:",
        "Output & results:",
        "Request options:",
        "Steady-state:",
        "Profiling:",
        "Sweep:",
        "Multi-turn:",
        "LoRA:",
        "Multi-run & comparison:",
        "Engine:",
    ];
    let mut last = 0;
    for g in groups {
        let at = text
            .find(&format!("\n{g}\n"))
            .unwrap_or_else(|| panic!("no group {g}"));
        assert!(at > last, "{g} out of order");
        last = at;
    }
    let marked = text
        .lines()
        .skip_while(|l| !l.contains("--custom-ensure-client-side-data"))
        .take(3)
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(marked.contains("[not implemented yet]"), "{marked}");
    assert!(text.contains("[env: VLLM_BENCH_CORES=]"));
    assert!(text.contains("[default: inf]"));
}

// ---------------------------------------------------------------------------------------------
// Validation

#[test]
fn defaults_resolve_like_python() {
    let cfg = ok(&[]);
    assert_eq!(cfg.server.backend, Backend::Openai);
    assert_eq!(cfg.server.endpoint, "/v1/completions");
    assert_eq!(
        cfg.server.base_url().unwrap().to_string(),
        "http://127.0.0.1:8000"
    );
    assert_eq!(
        cfg.output.percentile_metrics,
        [MetricKind::Ttft, MetricKind::Tpot, MetricKind::Itl]
    );
    assert_eq!(cfg.output.metric_percentiles, [99.0]);
    assert!(cfg.rate.is_unbounded());
    assert!(!cfg.rate.self_timed);
    // Python turns ignore_eos on for random prompts with completions/chat backends.
    assert!(cfg.request.ignore_eos);
    let prefix = &cfg.request.request_id_prefix;
    assert!(
        prefix.starts_with("bench-") && prefix.ends_with('-') && prefix.len() == 15,
        "{prefix}"
    );
    let DatasetParams::Random(random) = &cfg.dataset.params else {
        panic!("random expected");
    };
    assert_eq!(
        (random.input_len, random.output_len, random.prefix_len),
        (1024, 128, 0)
    );
    assert!(cfg.engine.num_cores >= 1);
    assert!(cfg.engine.preconnect);
    assert_eq!(cfg.engine.request_timeout.as_secs(), 21600);
    assert_eq!(cfg.engine.connect_timeout.as_secs(), 10);
}

#[test]
fn general_lengths_map_onto_the_dataset() {
    let cfg = ok(&[
        "--input-len",
        "7",
        "--output-len",
        "9",
        "--random-input-len",
        "100",
    ]);
    let DatasetParams::Random(r) = &cfg.dataset.params else {
        panic!("random expected");
    };
    assert_eq!((r.input_len, r.output_len), (7, 9));
}

#[test]
fn endpoint_defaults_per_backend() {
    for (backend, endpoint) in [
        ("vllm", "/v1/completions"),
        ("openai", "/v1/completions"),
        ("openai-chat", "/v1/chat/completions"),
        ("openai-embeddings", "/v1/embeddings"),
        ("vllm-pooling", "/pooling"),
        ("vllm-rerank", "/rerank"),
    ] {
        assert_eq!(
            ok(&["--backend", backend]).server.endpoint,
            endpoint,
            "{backend}"
        );
    }
    assert_eq!(
        invalid(&["--backend", "openai-chat", "--endpoint", "/v1/completions"]),
        "--endpoint /v1/completions: the openai-chat backend needs a path ending in \
         'chat/completions' (e.g. /v1/chat/completions)"
    );
}

#[test]
fn base_url_wins_over_host_and_port() {
    let cfg = ok(&[
        "--base-url",
        "https://api.example.com:8443/proxy/",
        "--host",
        "10.0.0.1",
    ]);
    let url = cfg.server.base_url().unwrap();
    assert_eq!(url.authority(), "api.example.com:8443");
    assert_eq!(cfg.server.request_path(), "/proxy/v1/completions");
    assert_eq!(
        cfg.warnings,
        ["--base-url is given, so --host and --port are ignored"]
    );
    assert_eq!(
        invalid(&["--base-url", "localhost:8000"]),
        "--base-url localhost:8000: missing scheme; did you mean http://localhost:8000?"
    );
    assert_eq!(
        ok(&["--host", "::1", "--port", "9000"])
            .server
            .base_url()
            .unwrap()
            .to_string(),
        "http://[::1]:9000"
    );
    assert_eq!(
        invalid(&["--host", "a b"]),
        "--host 'a b': not a valid host name or IP address"
    );
}

#[test]
fn mock_server_needs_no_address() {
    let cfg = ok(&["--mock-server"]);
    assert_eq!(cfg.server.location, ServerLocation::EmbeddedMock);
    assert_eq!(cfg.server.request_path(), "/v1/completions");
    assert!(invalid(&["--mock-server", "--base-url", "http://h"])
        .starts_with("--base-url http://h: conflicts with --mock-server"));
    assert!(invalid(&["--mock-server", "--port", "9000"])
        .starts_with("--host/--port: conflict with --mock-server"));
}

#[test]
fn burstiness_must_be_positive() {
    let range = "must be a positive, finite number (1 is Poisson, below 1 burstier, above 1 \
                 steadier)";
    assert_eq!(
        invalid(&["--burstiness", "0"]),
        format!("--burstiness 0: {range}")
    );
    assert_eq!(
        invalid(&["--burstiness", "-1"]),
        format!("--burstiness -1: {range}")
    );
    assert_eq!(
        invalid(&["--burstiness", "1e-310"]),
        format!("--burstiness 1e-310: {range}")
    );
    assert_eq!(
        ok(&["--burstiness", "0.5", "--request-rate", "40"])
            .rate
            .burstiness,
        0.5
    );
}

#[test]
fn request_rate_and_concurrency_must_be_positive() {
    assert!(
        invalid(&["--request-rate", "0"]).starts_with("--request-rate 0: must be greater than 0")
    );
    assert_eq!(
        invalid(&["--max-concurrency", "0"]),
        "--max-concurrency 0: must be greater than 0"
    );
    assert_eq!(
        invalid(&["--num-prompts", "0"]),
        "--num-prompts 0: must be at least 1"
    );
}

#[test]
fn random_range_ratio_must_be_in_unit_interval() {
    assert_eq!(
        invalid(&["--random-range-ratio", "1"]),
        "--random-range-ratio 1: must be in [0, 1)"
    );
    assert_eq!(
        invalid(&["--random-range-ratio", "-0.1"]),
        "--random-range-ratio -0.1: must be in [0, 1)"
    );
    let cfg = ok(&[
        "--random-range-ratio.input",
        "0.3",
        "--random-range-ratio.output",
        "0.5",
    ]);
    let DatasetParams::Random(r) = &cfg.dataset.params else {
        panic!("random expected");
    };
    assert_eq!((r.range_ratio.input, r.range_ratio.output), (0.3, 0.5));
}

#[test]
fn ramp_up_rules_follow_python() {
    let cfg = ok(&[
        "--ramp-up-strategy",
        "linear",
        "--ramp-up-start-rps",
        "10",
        "--ramp-up-end-rps",
        "100",
    ]);
    let ramp = cfg.rate.ramp_up.unwrap();
    assert_eq!((ramp.start_rps, ramp.end_rps), (10, 100));
    assert_eq!(
        invalid(&["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"]),
        "--ramp-up-strategy: needs both --ramp-up-start-rps and --ramp-up-end-rps"
    );
    assert_eq!(
        invalid(&["--ramp-up-start-rps", "1"]),
        "--ramp-up-start-rps: needs --ramp-up-strategy"
    );
    assert_eq!(
        invalid(&["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "5", "--request-rate", "3"]),
        "--request-rate 3: conflicts with --ramp-up-strategy, which controls the rate; remove --request-rate"
    );
    assert_eq!(
        invalid(&[
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "9",
            "--ramp-up-end-rps",
            "5"
        ]),
        "--ramp-up-start-rps 9: must not exceed --ramp-up-end-rps (5)"
    );
    assert_eq!(
        invalid(&[
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "-1",
            "--ramp-up-end-rps",
            "5"
        ]),
        "--ramp-up-start-rps -1: must be non-negative"
    );
    assert_eq!(
        invalid(&[
            "--ramp-up-strategy",
            "exponential",
            "--ramp-up-start-rps",
            "0",
            "--ramp-up-end-rps",
            "5"
        ]),
        "--ramp-up-start-rps 0: must be at least 1 for the exponential ramp-up"
    );
    // An explicit infinite rate is what ramp-up needs, so it is fine (Python checks the value).
    assert!(config(&[
        "--ramp-up-strategy",
        "linear",
        "--ramp-up-start-rps",
        "1",
        "--ramp-up-end-rps",
        "5",
        "--request-rate",
        "inf"
    ])
    .is_ok());
}

#[test]
fn goodput_keys_and_values_are_checked() {
    let cfg = ok(&["--goodput", "ttft:30", "tpot:8", "e2el:400"]);
    assert_eq!(
        cfg.output.goodput,
        GoodputConfig {
            ttft_ms: Some(30.0),
            tpot_ms: Some(8.0),
            e2el_ms: Some(400.0),
            ttfo_ms: None
        }
    );
    assert_eq!(
        invalid(&["--goodput", "itl:5"]),
        "--goodput itl:5: unknown metric 'itl' (choose from ttft, ttfo, tpot, e2el)"
    );
    assert_eq!(
        invalid(&["--goodput", "ttft:-5"]),
        "--goodput ttft:-5: must be non-negative"
    );
    assert!(invalid(&["--goodput", "ttft=5"]).starts_with("--goodput ttft=5: expected KEY:VALUE"));
}

#[test]
fn percentile_metric_names_are_checked() {
    assert!(invalid(&["--percentile-metrics", "ttft,p99"]).starts_with(
        "--percentile-metrics ttft,p99: 'p99': unknown metric (choose from ttft, ttfo, tpot"
    ));
    let cfg = ok(&["--backend", "openai-embeddings"]);
    assert_eq!(cfg.output.percentile_metrics, [MetricKind::E2el]);
    assert!(invalid(&["--metric-percentiles", "50,120"]).contains("between 0 and 100"));
}

#[test]
fn sampling_flags_are_for_generation_backends() {
    let cfg = ok(&["--backend", "openai-embeddings", "--temperature", "0.5"]);
    assert!(cfg.request.extra_body.is_empty());
    assert_eq!(
        cfg.warnings,
        ["sampling parameters are ignored by the openai-embeddings backend"]
    );
    assert_eq!(
        invalid(&[
            "--backend",
            "openai-audio",
            "--dataset-name",
            "custom_audio",
            "--top-p",
            "0.5"
        ]),
        "--top-p: sampling parameters are only supported by the openai-compatible backends \
         (vllm, openai, openai-chat, openai-responses), not openai-audio"
    );
    assert_eq!(
        invalid(&["--temperature", "nan"]),
        "--temperature NaN: must be a finite number"
    );
}

#[test]
fn self_timed_is_only_for_timed_trace() {
    assert_eq!(
        invalid(&["--self-timed"]),
        "--self-timed: only valid with --dataset-name timed_trace"
    );
    assert_eq!(
        invalid(&["--no-self-timed"]),
        "--no-self-timed: only valid with --dataset-name timed_trace"
    );
    assert_eq!(
        invalid(&[
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            "t.jsonl",
            "--backend",
            "vllm-pooling"
        ]),
        "--dataset-name timed_trace: needs --backend vllm, openai or openai-chat (its prompts \
         are token ids or their decoded text), not vllm-pooling"
    );
    assert_eq!(
        invalid(&["--dataset-name", "timed_trace"]),
        "--dataset-path: required for --dataset-name timed_trace (a Mooncake/Bailian JSONL or \
         Azure/BurstGPT CSV trace)"
    );
}

/// The configuration builds the conversations' own options: the turn range resolved (0 means
/// `--multi-turn-num-turns`), the random dataset's flags for synthetic turns, ShareGPT's
/// turn limits and output length raw; the run's count and seed are not in them.
#[test]
fn multi_turn_options_are_built_by_the_configuration() {
    use vllm_bench::datasets::conversations::{
        ConversationParams, ShareGptConversationParams, SyntheticParams,
    };
    let chat = ["--backend", "openai-chat", "--multi-turn"];
    let cfg = ok(&[
        &chat[..],
        &[
            "--multi-turn-num-turns",
            "4",
            "--multi-turn-max-turns",
            "6",
            "--per-turn-input-len",
            "12",
            "--random-range-ratio",
            r#"{"input": 0.25, "output": 0.5}"#,
            "--multi-turn-prefix-global-ratio",
            "0.25",
        ],
    ]
    .concat());
    let DatasetParams::Random(random) = &cfg.dataset.params else {
        panic!("random expected");
    };
    assert_eq!(
        cfg.multi_turn.expect("--multi-turn").conversations,
        ConversationParams::Synthetic(SyntheticParams {
            random: random.clone(),
            turns: (4, 6),
            per_turn_input_len: 12,
            prefix_ratios: (0.25, 0.0),
        })
    );
    let sharegpt = crate::util::fixture("data/sharegpt.first300.json");
    let cfg = ok(&[
        &chat[..],
        &[
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            sharegpt.to_str().unwrap(),
            "--multi-turn-min-turns",
            "2",
            "--sharegpt-output-len",
            "9",
        ],
    ]
    .concat());
    assert_eq!(
        cfg.multi_turn.expect("--multi-turn").conversations,
        ConversationParams::ShareGpt(ShareGptConversationParams {
            min_turns: 2,
            max_turns: 0,
            output_len: Some(9),
        })
    );
}

#[test]
fn multi_turn_requires_openai_chat() {
    assert_eq!(
        invalid(&["--multi-turn"]),
        "--multi-turn: needs --backend openai-chat or anthropic-messages (got openai)"
    );
    assert_eq!(
        invalid(&["--multi-turn-num-turns", "4"]),
        "--multi-turn-num-turns: needs --multi-turn"
    );
    assert_eq!(
        invalid(&[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-prefix-global-ratio",
            "0.6",
            "--multi-turn-prefix-conversation-ratio",
            "0.5"
        ]),
        "--multi-turn-prefix-global-ratio 0.6 + --multi-turn-prefix-conversation-ratio 0.5: must \
         sum to less than 1"
    );
    assert!(invalid(&[
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--dataset-name",
        "sharegpt",
        "--per-turn-input-len",
        "8"
    ])
    .starts_with("--per-turn-input-len: shapes synthetic turns"));
    assert!(invalid(&[
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--dataset-name",
        "sonnet"
    ])
    .contains("works with --dataset-name random or sharegpt"));
}

#[test]
fn lora_is_rejected_with_pooling_backends() {
    assert_eq!(
        invalid(&["--backend", "vllm-pooling", "--lora-modules", "a", "b"]),
        "--lora-modules: LoRA routing applies to generation backends only (got --backend vllm-pooling)"
    );
    assert_eq!(
        invalid(&["--lora-assignment", "round-robin"]),
        "--lora-assignment: needs --lora-modules"
    );
}

#[test]
fn compare_takes_two_or_more_files_and_nothing_else() {
    assert_eq!(ok(&[]).multi_run.compare, None);
    let cfg = ok(&["--compare", "a.json", "b.json", "c.json"]);
    assert_eq!(
        cfg.multi_run.compare,
        Some(vec!["a.json".into(), "b.json".into(), "c.json".into()])
    );
    let cfg = ok(&["--comp", "a.json", "b.json"]);
    assert_eq!(cfg.multi_run.compare.map(|f| f.len()), Some(2));
    let one = usage_error(&["--compare", "a.json"]);
    assert!(one.contains("--compare"), "{one}");
    for other in [
        &["--compare", "a.json", "b.json", "--num-prompts", "5"][..],
        &["--num-prompts", "5", "--compare", "a.json", "b.json"][..],
    ] {
        assert_eq!(
            invalid(other),
            "--compare: compares saved result files and runs no benchmark; --num-prompts has \
             no effect with it"
        );
    }
    assert!(invalid(&["--compare", "a", "b", "--num-runs", "2"]).contains("--num-runs has no"));
}

#[test]
fn steady_state_flags_are_checked_and_said_when_they_cannot_apply() {
    let closed = ["--max-concurrency", "8"];
    let cfg = ok(&closed);
    assert!(cfg.steady_state.enabled);
    assert_eq!(cfg.steady_state.threshold, 0.95);
    assert_eq!(cfg.steady_state.min_window_sec, None);
    assert!(cfg.rate.is_closed_loop());
    let cfg = ok(&[
        "--max-concurrency",
        "8",
        "--steady_state_threshold",
        "1",
        "--steady-state-min-window",
        "2.5",
    ]);
    assert_eq!(cfg.steady_state.threshold, 1.0);
    assert_eq!(cfg.steady_state.min_window_sec, Some(2.5));
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(
        !ok(&["--max-concurrency", "8", "--no-steady-state"])
            .steady_state
            .enabled
    );
    for bad in ["0", "1.5", "-0.1"] {
        assert_eq!(
            invalid(&["--steady-state-threshold", bad]),
            format!("--steady-state-threshold {bad}: must be in (0, 1]")
        );
    }
    assert_eq!(
        invalid(&["--steady-state-min-window", "0"]),
        "--steady-state-min-window 0: must be a positive number of seconds"
    );
    // Not a closed loop: accepted, and the note says the flag does nothing.
    for args in [
        &["--steady-state-threshold", "0.9"][..],
        &[
            "--max-concurrency",
            "8",
            "--request-rate",
            "10",
            "--no-steady-state",
        ][..],
        &[
            "--max-concurrency",
            "8",
            "--backend",
            "openai-embeddings",
            "--steady-state-min-window",
            "5",
        ][..],
        &[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--max-concurrency",
            "8",
            "--steady-state-threshold",
            "0.9",
        ][..],
    ] {
        let cfg = ok(args);
        assert_eq!(cfg.warnings.len(), 1, "{args:?}: {:?}", cfg.warnings);
        assert!(
            cfg.warnings[0].contains("computed for a closed loop of a generation backend only"),
            "{}",
            cfg.warnings[0]
        );
    }
    assert!(!ok(&["--request-rate", "10"]).rate.is_closed_loop());
    // Sweeps: a point is a closed loop at its own cap and rate.
    let concurrency_sweep = ok(&["--sweep-max-concurrency", "1,4", "--no-steady-state"]);
    assert!(
        concurrency_sweep.warnings.is_empty(),
        "{concurrency_sweep:?}"
    );
    let some_inf = ok(&[
        "--max-concurrency",
        "4",
        "--sweep-request-rate",
        "10,inf",
        "--no-steady-state",
    ]);
    assert!(some_inf.warnings.is_empty(), "{:?}", some_inf.warnings);
    let all_finite = ok(&[
        "--max-concurrency",
        "4",
        "--sweep-request-rate",
        "1,10",
        "--no-steady-state",
    ]);
    assert_eq!(all_finite.warnings.len(), 1, "{:?}", all_finite.warnings);
    let cfg = ok(&[
        "--max-concurrency",
        "8",
        "--no-steady-state",
        "--steady-state-threshold",
        "0.5",
    ]);
    assert_eq!(
        cfg.warnings,
        ["--steady-state-threshold: no effect with --no-steady-state"]
    );
}

#[test]
fn profile_flags_depend_on_each_other() {
    assert_eq!(
        invalid(&["--profile-batch-threshold", "200"]),
        "--profile-batch-threshold: needs --profile"
    );
    assert_eq!(
        invalid(&["--profile", "--profile-duration", "10"]),
        "--profile-duration: needs --profile-batch-threshold"
    );
    assert_eq!(
        invalid(&[
            "--profile",
            "--profile-batch-threshold",
            "1",
            "--profile-duration",
            "0"
        ]),
        "--profile-duration 0.0: must be a positive number of seconds, at most 31536000 \
         (365 days)"
    );
}

#[test]
fn sweep_flags_are_checked() {
    assert_eq!(
        invalid(&["--sweep-max-concurrency", "1,0"]),
        "--sweep-max-concurrency 1,0: '0': expected an integer of at least 1"
    );
    assert!(invalid(&[
        "--sweep-max-concurrency",
        "1",
        "--sweep-request-rate",
        "inf"
    ])
    .starts_with("--sweep-max-concurrency: cannot be combined with --sweep-request-rate"));
    assert_eq!(
        invalid(&["--sweep-num-prompts-factor", "3"]),
        "--sweep-num-prompts-factor: needs --sweep-max-concurrency or --sweep-request-rate"
    );
    assert_eq!(
        invalid(&["--num-runs", "2", "--sweep-request-rate", "1,10,inf"]),
        "--num-runs: cannot be combined with a sweep; run the sweep once per repetition"
    );
}

#[test]
fn dry_run_is_implemented_and_needs_a_model() {
    let cfg = ok(&[
        "--model",
        "m",
        "--num-prompts",
        "100000",
        "--random-input-len",
        "8192",
        "--dry-run",
    ]);
    assert!(cfg.dry_run);
    assert_eq!(
        invalid(&["--dry-run"]),
        "--dry-run: needs --model or --tokenizer (no server is asked for its model)"
    );
}

#[test]
fn metadata_and_headers_are_key_value_pairs() {
    let cfg = ok(&[
        "--metadata",
        "version=0.3.3",
        "tp=1",
        "--header",
        "x-a=1",
        "--header",
        "x-b = 2",
    ]);
    assert_eq!(
        cfg.output.metadata,
        [
            ("version".to_owned(), "0.3.3".to_owned()),
            ("tp".to_owned(), "1".to_owned())
        ]
    );
    assert_eq!(
        cfg.request.headers,
        [
            ("x-a".to_owned(), "1".to_owned()),
            ("x-b".to_owned(), "2".to_owned())
        ]
    );
    assert_eq!(
        invalid(&["--metadata", "oops"]),
        "--metadata oops: expected KEY=VALUE"
    );
    assert_eq!(
        invalid(&["--header", "oops"]),
        "--header: expected KEY=VALUE or 'Key: Value' (the value is not shown: it may be a \
         secret)"
    );
    // curl's form too.
    let cfg = ok(&[
        "--header",
        "Authorization: Bearer t0k=",
        "--header",
        "x-a=1",
    ]);
    assert_eq!(
        cfg.request.headers,
        [
            ("Authorization".to_owned(), "Bearer t0k=".to_owned()),
            ("x-a".to_owned(), "1".to_owned())
        ]
    );
}

#[test]
fn extra_body_must_be_a_json_object() {
    // The value is never shown: a request body may carry a secret.
    assert_eq!(
        invalid(&["--extra-body", "[1, 2]"]),
        "--extra-body: must be a JSON object ({\"key\": value}), not an array (the value is \
         not shown: it may hold a secret)"
    );
    assert!(invalid(&["--extra-body", "{oops"])
        .starts_with("--extra-body: invalid JSON: key must be a string at line 1 column 2"));
}

#[test]
fn dataset_rules() {
    assert!(invalid(&["--dataset-path", "x.json"])
        .starts_with("--dataset-path x.json: the random dataset is synthetic and reads no file"));
    assert_eq!(
        invalid(&["--backend", "openai-chat", "--prompt-token-ids"]),
        "--prompt-token-ids: the openai-chat backend sends text; use vllm, openai, \
         openai-embeddings or vllm-pooling"
    );
    let cfg = ok(&["--backend", "vllm", "--prompt-token-ids"]);
    let DatasetParams::Random(r) = &cfg.dataset.params else {
        panic!("random expected");
    };
    assert!(r.prompt_token_ids);
}

#[test]
fn engine_flags_resolve() {
    let cfg = ok(&[
        "--num-cores",
        "1",
        "--io-driver",
        "epoll",
        "--connect-timeout-sec",
        "2.5",
        "--no-preconnect",
    ]);
    assert_eq!(cfg.engine.num_cores, 1);
    assert_eq!(cfg.engine.io_driver, DriverChoice::Epoll);
    assert_eq!(cfg.engine.connect_timeout.as_millis(), 2500);
    assert!(!cfg.engine.preconnect);
    assert_eq!(
        invalid(&["--num-cores", "0"]),
        "--num-cores/VLLM_BENCH_CORES 0: must be at least 1"
    );
    assert!(invalid(&["--num-cores", "100000"]).contains("cores are available to this process"));
    assert_eq!(
        invalid(&["--request-timeout-sec", "0"]),
        "--request-timeout-sec 0: must be a positive number of seconds, at most 31536000 \
         (365 days)"
    );
}

#[test]
fn unimplemented_features_are_accepted_then_refused_by_name() {
    // Every refused flag (the list in src/cli/unimplemented.rs) parses, then validation
    // refuses it by name.
    for &what in vllm_bench::cli::unimplemented::UNIMPLEMENTED {
        let mut full: Vec<String> = what.split(' ').map(str::to_owned).collect();
        if full.len() == 1 {
            full.extend(sample_values(&cli::command(), what));
        }
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let err = config_error(&full);
        assert_eq!(err.kind(), ConfigErrorKind::NotImplemented, "{full:?}");
        assert!(
            err.message()
                .starts_with(&format!("{what}: not implemented yet in vllm-bench")),
            "{}",
            err.message()
        );
    }
}

fn help_text(args: &[&str]) -> String {
    match parse(args) {
        Err(CliError::Help(text)) => text,
        other => panic!("{args:?}: expected help, got {other:?}"),
    }
}

#[test]
fn help_marks_no_choice_as_not_implemented_when_every_one_runs() {
    let help = help_text(&["--help"]);
    assert!(!help.contains("[not implemented yet: ]"), "{help}");
}

#[test]
fn help_usage_names_the_merge_subcommand() {
    let help = help_text(&["--help"]);
    let usage: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Usage:"))
        .take(2)
        .collect();
    assert_eq!(usage[0], "Usage: vllm-bench [OPTIONS]", "{help}");
    assert!(
        usage[1].trim_start().starts_with("vllm-bench merge "),
        "{help}"
    );
}

fn resolve(args: &[&str]) -> Mode {
    let argv = std::iter::once("vllm-bench").chain(args.iter().copied());
    config::resolve(cli::parse_invocation(argv).unwrap()).unwrap()
}

#[test]
fn merge_takes_python_spellings_and_prefixes_like_every_flag() {
    let Mode::Merge(m) = resolve(&[
        "merge",
        "a.json",
        "--result_dir",
        "out",
        "--result-f",
        "m.json",
        "b.json",
    ]) else {
        panic!("expected a merge");
    };
    assert_eq!(m.files, [PathBuf::from("a.json"), PathBuf::from("b.json")]);
    assert_eq!(m.result_dir, Some(PathBuf::from("out")));
    assert_eq!(m.result_filename.as_deref(), Some("m.json"));
}

#[test]
fn merge_without_files_or_with_an_ambiguous_prefix_is_one_line() {
    let error = |args: &[&str]| {
        let argv = std::iter::once("vllm-bench").chain(args.iter().copied());
        match cli::parse_invocation(argv) {
            Err(CliError::Usage(msg)) => msg,
            other => panic!("{args:?}: expected a usage error, got {other:?}"),
        }
    };
    let e = error(&["merge"]);
    assert!(
        !e.contains('\n') && e.starts_with("missing <SHARD_RESULT>"),
        "{e}"
    );
    let e = error(&["merge", "a.json", "--res", "x"]);
    assert_eq!(
        e,
        "ambiguous option: --res could match --result-dir, --result-filename"
    );
}

#[test]
fn the_mode_is_decided_once_from_the_flags() {
    assert!(matches!(resolve(&[]), Mode::Bench(_)));
    assert!(matches!(
        resolve(&["--dry-run", "--model", "m"]),
        Mode::DryRun(_)
    ));
    assert!(matches!(
        resolve(&["--plot-summary", "s.json"]),
        Mode::PlotSummary(_)
    ));
    let Mode::Compare { files, .. } = resolve(&["--compare", "a.json", "b.json"]) else {
        panic!("expected a comparison");
    };
    assert_eq!(files.len(), 2);
}

#[test]
fn the_report_policy_is_resolved_once_from_the_flags() {
    let cfg = ok(&["--append-result", "--num-runs", "3", "--plot-timeline"]);
    let r = &cfg.report;
    assert!(r.save && r.append && r.quiet && !r.detailed, "{r:?}");
    assert_eq!(r.plots.timeline, Some((25.0, 50.0)));
    assert_eq!(r.profile_when, ProfileWhen::Never);
    let cfg = ok(&["--save-result", "--profile"]);
    assert!(cfg.report.save && !cfg.report.append && !cfg.report.quiet);
    assert_eq!(cfg.report.profile_when, ProfileWhen::WholeRun);
    let cfg = ok(&[
        "--profile",
        "--profile-batch-threshold",
        "8",
        "--profile-duration",
        "2.5",
    ]);
    assert_eq!(
        cfg.report.profile_when,
        ProfileWhen::AtBatch {
            running: 8,
            duration: std::time::Duration::from_millis(2500)
        }
    );
}

#[test]
fn help_for_a_keyword_nothing_matches_is_a_usage_error() {
    let e = usage_error(&["--help=nonexistentword"]);
    assert!(
        e.contains("--help=nonexistentword: no group or option matches"),
        "{e}"
    );
    assert!(help_text(&["--help=ramp"]).contains("--ramp-up-strategy"));
}

#[test]
fn save_detailed_without_a_result_file_is_said() {
    let c = ok(&["--mock-server", "--save-detailed"]);
    assert!(
        c.warnings.iter().any(|w| w.starts_with("--save-detailed ")),
        "{:?}",
        c.warnings
    );
    let c = ok(&["--mock-server", "--save-detailed", "--save-result"]);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn dry_run_against_the_embedded_mock_needs_no_model() {
    let c = ok(&["--mock-server", "--dry-run"]);
    assert!(c.dry_run);
    let e = invalid(&["--base-url", "http://127.0.0.1:1", "--dry-run"]);
    assert!(e.contains("needs --model or --tokenizer"), "{e}");
}
