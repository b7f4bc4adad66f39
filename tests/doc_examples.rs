//! Every documented example is a test: each `vllm-bench` command in a `bash`, `sh`, `shell`
//! or `console` code block of README.md and docs/*.md runs with the built binary, and one
//! that fails is a failing test.
//!
//! How a block is read and run:
//! - Continuation lines (`\` at the end) are joined, `# comments` cut (outside quotes), words
//!   split as the shell does (quotes, backslashes); a leading `VAR=value` is the command's
//!   environment; a `$ ` prompt (console blocks) is dropped; a `...` word (the rest of your
//!   command line) is dropped.
//! - Every command runs in a fresh temporary directory laid out like the root of a clone (a
//!   `tests` link to the repository's, so the samples it ships, e.g.
//!   `tests/fixtures/data/sharegpt.first300.json`, are where the docs say), holding small,
//!   valid copies of the reader's own files the docs name (`prompts.jsonl`, `audio.jsonl`,
//!   `images.jsonl`, a downloaded ShareGPT or trace file, ...: [`write_fixtures`]), with
//!   `HF_HUB_OFFLINE=1` and an empty `HF_HOME`; the commands of one block run in order in one
//!   directory (a `--compare` reads what the block wrote).
//! - Commands run byte for byte as printed, with ONE substitution: the server. `--mock-server`
//!   runs as written; the value of `--base-url`, of `--host` and of `--port` is replaced by an
//!   in-process `MockServer`'s, and a command that names no server (the default
//!   `http://127.0.0.1:8000`) gets `--base-url` with the mock's URL. Nothing else is added,
//!   dropped or rewritten, so an example that would run for minutes fails the test
//!   ([`COMMAND_TIMEOUT`]): give it a `--num-prompts` that keeps it short.
//! - A command followed by a comment line `# error: TEXT` (a documented refusal) or
//!   `# needs the Hub: TEXT` (it downloads a model or dataset; offline it stops with TEXT)
//!   must exit non-zero with TEXT on stderr (a trailing `...` or `(...)` is cut); one followed
//!   by `# needs root: TEXT` (it asks the kernel for what only root may) must exit 0 or stop
//!   with TEXT, whichever this machine allows; every other command must exit 0.
//! - A block that is a shell script (a line starting `for`, `while`, `if` or `wait`, or a `$`
//!   anywhere) runs whole under `bash -e`, with a `vllm-bench` wrapper first on `PATH` that
//!   makes the same substitutions.
//!
//! Not run (a clear rule each): a block right after `<!-- test: NAME -->` (docs/distributed.md:
//! tests/shards.rs and tests/slurm.rs run those as written), a block right after
//! `<!-- not run: REASON -->` (a release build, a long benchmark), and `docs/performance.md`
//! (its commands are `bench-overhead/` scripts that build release binaries and run for
//! minutes).

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use vllm_bench::mock::{MockConfig, MockServer};

use crate::util::TempDir;

/// Longest one documented command may take (debug build, two shared cores).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

/// Blocks run at once. A command mostly waits on the mock's timeline (its first token at
/// 20 ms, then one every 5 ms): the commands' CPU time is about a quarter of their time
/// (2026-12-04, load average 6 to 10, debug build: 505 s summed, about 120 s of CPU), so
/// four at a time use about one core where two at a time used half of one.
const PARALLEL_BLOCKS: usize = 4;

/// What the doc says a command does.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Success,
    /// `# error: TEXT`: a documented refusal.
    Error(String),
    /// `# needs the Hub: TEXT`: offline, it stops with TEXT.
    NeedsHub(String),
    /// `# needs root: TEXT`: it runs where the test may do what it asks (root), and stops
    /// with TEXT where it may not.
    NeedsRoot(String),
}

/// One documented command.
#[derive(Debug, Clone)]
struct DocCommand {
    env: Vec<(String, String)>,
    args: Vec<String>,
    expect: Expect,
}

/// A runnable code block: its commands, or a script run whole.
#[derive(Debug, Clone)]
struct Block {
    origin: String,
    commands: Vec<DocCommand>,
    script: Option<String>,
}

/// A fenced code block: its info string, the marker comment above it, its text and first line.
struct Fenced {
    lang: String,
    marker: Option<String>,
    text: String,
    line: usize,
}

/// The fenced code blocks of a Markdown text.
fn fenced_blocks(text: &str) -> Vec<Fenced> {
    let mut blocks = Vec::new();
    let mut current: Option<Fenced> = None;
    let mut last_comment: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => {
                    current = Some(Fenced {
                        lang: info.trim().to_string(),
                        marker: last_comment.take(),
                        text: String::new(),
                        line: n + 2,
                    })
                }
            }
        } else if let Some(block) = current.as_mut() {
            block.text.push_str(line);
            block.text.push('\n');
        } else if trimmed.starts_with("<!--") {
            last_comment = Some(trimmed.to_string());
        } else if !trimmed.is_empty() {
            last_comment = None;
        }
    }
    blocks
}

/// Shell words of `line` with comments cut: single and double quotes, backslash escapes.
/// `None` for an unterminated quote.
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            word.push(chars.next()?)
                        }
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// Whether `word` is a `VAR=value` environment assignment.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// The expectation a comment line states, if it is a marker.
fn marker(line: &str) -> Option<Expect> {
    let comment = line.trim().strip_prefix('#')?.trim();
    let cut = |text: &str| {
        let text = text.trim();
        let text = text.strip_suffix("(...)").unwrap_or(text);
        let text = text.strip_suffix("...").unwrap_or(text);
        text.trim_end().to_string()
    };
    if let Some(text) = comment.strip_prefix("error: ") {
        Some(Expect::Error(cut(text)))
    } else if let Some(text) = comment.strip_prefix("needs root: ") {
        Some(Expect::NeedsRoot(cut(text)))
    } else {
        comment
            .strip_prefix("needs the Hub: ")
            .map(|text| Expect::NeedsHub(cut(text)))
    }
}

/// Whether a block is a shell script rather than a list of commands.
fn is_script(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        !l.starts_with('#')
            && (["for ", "while ", "if ", "wait"]
                .iter()
                .any(|k| l.starts_with(k))
                || l.contains('$') && !l.starts_with("$ "))
    })
}

/// The runnable blocks of one document (`doc` relative to the repository).
fn doc_blocks(doc: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for fenced in fenced_blocks(text) {
        if !matches!(fenced.lang.as_str(), "bash" | "sh" | "shell" | "console") {
            continue;
        }
        let skipped = fenced
            .marker
            .as_deref()
            .is_some_and(|m| m.starts_with("<!-- test:") || m.starts_with("<!-- not run:"));
        if skipped {
            continue;
        }
        let origin = format!("{doc}:{}", fenced.line);
        let joined = fenced.text.replace("\\\n", " ");
        let lines: Vec<&str> = joined.lines().collect();
        let mut commands = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim_start();
            let line = line.strip_prefix("$ ").unwrap_or(line);
            let Some(words) = shell_words(line) else {
                panic!("{origin}: unterminated quote in `{line}`");
            };
            let n_env = words.iter().take_while(|w| is_assignment(w)).count();
            if words.get(n_env).map(String::as_str) != Some("vllm-bench") {
                continue;
            }
            let env = words[..n_env]
                .iter()
                .map(|w| {
                    let (k, v) = w.split_once('=').expect("an assignment");
                    (k.to_string(), v.to_string())
                })
                .collect();
            let args = words[n_env + 1..]
                .iter()
                .filter(|w| *w != "...")
                .cloned()
                .collect();
            let expect = lines
                .get(i + 1)
                .and_then(|next| marker(next))
                .unwrap_or(Expect::Success);
            commands.push(DocCommand { env, args, expect });
        }
        if commands.is_empty() {
            continue;
        }
        let script = is_script(&fenced.text).then(|| fenced.text.clone());
        if script.is_some() {
            assert!(
                commands.iter().all(|c| c.expect == Expect::Success),
                "{origin}: a script block cannot mark an expected error"
            );
        }
        out.push(Block {
            origin,
            commands,
            script,
        });
    }
    out
}

/// README.md and docs/*.md (except performance.md), in a fixed order.
fn documents() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "performance.md")
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// `args` with the server pointed at `mock_url`; nothing else changes.
fn rewrite(args: &[String], mock_url: &str) -> Vec<String> {
    let port = mock_url.rsplit(':').next().expect("a port in the mock URL");
    let mut out = Vec::with_capacity(args.len() + 6);
    let mut has_server = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = |it: &mut std::slice::Iter<String>| it.next().cloned().unwrap_or_default();
        match a.as_str() {
            "--base-url" => {
                value(&mut it);
                out.extend(["--base-url".to_string(), mock_url.to_string()]);
                has_server = true;
            }
            "--host" => {
                value(&mut it);
                out.extend(["--host".to_string(), "127.0.0.1".to_string()]);
                has_server = true;
            }
            "--port" => {
                value(&mut it);
                out.extend(["--port".to_string(), port.to_string()]);
                has_server = true;
            }
            a if a.starts_with("--base-url=") => {
                out.push(format!("--base-url={mock_url}"));
                has_server = true;
            }
            a => {
                has_server |= a == "--mock-server";
                out.push(a.to_string());
            }
        }
    }
    // These talk to no server at all.
    let serverless = out
        .first()
        .is_some_and(|a| a == "merge" || a == "synthesize")
        || out.iter().any(|a| {
            a == "--compare" || a == "--plot-summary" || a == "--version" || a.starts_with("--help")
        });
    if !has_server && !serverless {
        out.extend(["--base-url".to_string(), mock_url.to_string()]);
    }
    out
}

/// The `vllm-bench` wrapper a script block finds first on `PATH`: [`rewrite`]'s rules in
/// shell (scripts use `--mock-server` or `--base-url`, and `merge`).
const WRAPPER: &str = r#"#!/usr/bin/env bash
args=()
server=
while [ $# -gt 0 ]; do
  case "$1" in
    --base-url) args+=(--base-url "$DOC_MOCK_URL"); server=1; shift 2 ;;
    --mock-server) args+=("$1"); server=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ "${args[0]}" = merge ] || [ "${args[0]}" = synthesize ]; then exec "$DOC_BIN" "${args[@]}"; fi
[ -n "$server" ] || args+=(--base-url "$DOC_MOCK_URL")
exec "$DOC_BIN" "${args[@]}"
"#;

/// What one run left behind.
struct Outcome {
    code: Option<i32>,
    /// From the start to the exit (or the kill).
    took: Duration,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` in `dir` with the test environment, killed after [`COMMAND_TIMEOUT`].
fn run(mut cmd: Command, dir: &Path) -> Outcome {
    cmd.current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HOME", dir.join(".hf-home"))
        .env_remove("HF_TOKEN")
        .env_remove("VLLM_BENCH_CORES")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn a documented command");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code,
        took: started.elapsed(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// The failure of `outcome` against `expect`, if any.
fn judge(expect: &Expect, outcome: &Outcome) -> Option<String> {
    if outcome.stdout.contains("panicked at") || outcome.stderr.contains("panicked at") {
        return Some("panicked".to_string());
    }
    match (expect, outcome.code) {
        (_, None) => Some(format!("no exit within {COMMAND_TIMEOUT:?}")),
        (Expect::Success | Expect::NeedsRoot(_), Some(0)) => None,
        (Expect::Success, Some(code)) => Some(format!("exit {code}")),
        (Expect::Error(text) | Expect::NeedsHub(text) | Expect::NeedsRoot(text), Some(code)) => {
            if code == 0 {
                Some(format!("exit 0, but the doc shows `{text}`"))
            } else if !outcome.stderr.contains(text.as_str()) {
                Some(format!("exit {code} without the documented `{text}`"))
            } else {
                None
            }
        }
    }
}

/// What one block's run left: its failures, and how long each command (or the whole
/// script) took.
#[derive(Default)]
struct BlockRun {
    failures: Vec<String>,
    took: Vec<(Duration, String)>,
}

/// Runs one block in a fresh directory.
fn run_block(block: &Block, mock_url: &str) -> BlockRun {
    let dir = TempDir::new("doc-example");
    write_fixtures(dir.path());
    // The root of a clone: the samples the repository ships are where the docs say.
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        dir.path().join("tests"),
    )
    .expect("link tests/ into the example's directory");
    let bin = env!("CARGO_BIN_EXE_vllm-bench");
    let report = |what: &str, why: String, o: &Outcome| {
        let tail = |s: &str| {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(8)..].join("\n")
        };
        format!(
            "{}: `{what}`: {why}\n--- stdout (end)\n{}\n--- stderr (end)\n{}",
            block.origin,
            tail(&o.stdout),
            tail(&o.stderr)
        )
    };
    if let Some(script) = &block.script {
        let bin_dir = dir.path().join(".doc-bin");
        std::fs::create_dir_all(&bin_dir).expect("wrapper dir");
        let wrapper = bin_dir.join("vllm-bench");
        std::fs::write(&wrapper, WRAPPER).expect("write the wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the wrapper");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("bash");
        cmd.args(["-e", "-c", script])
            .env("PATH", path)
            .env("DOC_BIN", bin)
            .env("DOC_MOCK_URL", mock_url);
        let outcome = run(cmd, dir.path());
        return BlockRun {
            failures: judge(&Expect::Success, &outcome)
                .map(|why| report("the whole block", why, &outcome))
                .into_iter()
                .collect(),
            took: vec![(outcome.took, format!("{} (script)", block.origin))],
        };
    }
    let mut done = BlockRun::default();
    for c in &block.commands {
        let args = rewrite(&c.args, mock_url);
        let mut cmd = Command::new(bin);
        cmd.args(&args).envs(c.env.iter().map(|(k, v)| (k, v)));
        let outcome = run(cmd, dir.path());
        let shown = format!("vllm-bench {}", c.args.join(" "));
        if let Some(why) = judge(&c.expect, &outcome) {
            done.failures.push(report(&shown, why, &outcome));
        }
        done.took
            .push((outcome.took, format!("{}: {shown}", block.origin)));
    }
    done
}

/// A WAV file: 16-bit PCM, mono, 16 kHz, `samples` samples of a quiet saw wave.
fn wav(samples: u32) -> Vec<u8> {
    let data_len = samples * 2;
    let mut w = Vec::with_capacity(44 + data_len as usize);
    w.extend(b"RIFF");
    w.extend((36 + data_len).to_le_bytes());
    w.extend(b"WAVEfmt ");
    w.extend(16u32.to_le_bytes());
    w.extend(1u16.to_le_bytes()); // PCM
    w.extend(1u16.to_le_bytes()); // mono
    w.extend(16_000u32.to_le_bytes());
    w.extend(32_000u32.to_le_bytes());
    w.extend(2u16.to_le_bytes());
    w.extend(16u16.to_le_bytes());
    w.extend(b"data");
    w.extend(data_len.to_le_bytes());
    for i in 0..samples {
        w.extend((((i % 100) as i16) * 10).to_le_bytes());
    }
    w
}

/// The files the docs' examples name, small and valid, written into `dir`.
fn write_fixtures(dir: &Path) {
    let write = |name: &str, content: &[u8]| {
        let path: PathBuf = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("fixture dir");
        }
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {name}: {e}"));
    };
    let sentences = [
        "What is the capital of France, and why did it become the capital?",
        "Write a short poem about the sea at night, with the moon above it.",
        "Explain how a hash map works to a student who knows arrays well.",
        "List three reasons to learn a second language as an adult today.",
        "Describe the water cycle in four sentences for a curious child.",
        "Summarize the plot of a detective story you would like to read.",
        "How do bees find their way back to the hive after a long flight?",
        "Give me a recipe for a quick dinner with rice, eggs and spinach.",
    ];
    let mut prompts = String::new();
    let mut images = String::new();
    let mut audio = String::new();
    let mut questions = String::new();
    let mut speed = String::new();
    let mut gsm8k = String::new();
    let mut my_set = String::new();
    let mut sharegpt = Vec::new();
    let mut mm = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let q = serde_json::to_string(s).expect("a JSON string");
        prompts.push_str(&format!("{{\"prompt\": {q}, \"output_tokens\": 8}}\n"));
        images.push_str(&format!(
            "{{\"prompt\": {q}, \"image_files\": [\"a.png\"]}}\n"
        ));
        audio.push_str(&format!(
            "{{\"prompt\": {q}, \"audio\": \"a.wav\", \"output_tokens\": 8}}\n"
        ));
        let category = if i % 2 == 0 {
            "writing"
        } else {
            "math_reasoning"
        };
        questions.push_str(&format!(
            "{{\"question_id\": {i}, \"category\": \"{category}\", \"turns\": [{q}]}}\n"
        ));
        speed.push_str(&format!(
            "{{\"category\": \"low_entropy\", \"messages\": [{{\"role\": \"user\", \"content\": {q}}}]}}\n"
        ));
        gsm8k.push_str(&format!(
            "{{\"question\": {q}, \"answer\": \"It is explained above. #### 42\"}}\n"
        ));
        my_set.push_str(&format!("{{\"body\": {q}}}\n"));
        let turns: Vec<serde_json::Value> = (0..4)
            .map(|t| {
                let from = if t % 2 == 0 { "human" } else { "gpt" };
                let value = sentences[(i + t) % sentences.len()];
                serde_json::json!({"from": from, "value": value})
            })
            .collect();
        sharegpt.push(serde_json::json!({"id": format!("c{i}"), "conversations": turns}));
        mm.push(serde_json::json!({
            "id": format!("m{i}"), "image": "a.png", "conversations": &turns[..2]
        }));
    }
    write("prompts.jsonl", prompts.as_bytes());
    write("images.jsonl", images.as_bytes());
    write("audio.jsonl", audio.as_bytes());
    write("a.wav", &wav(1600));
    // A 1x1 PNG: sent as a file:// URL, never read by the client.
    write(
        "a.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\x0f\0\0\x01\x01\0\x05\x18\xd8N\0\0\0\0IEND\xaeB`\x82",
    );
    write("question.jsonl", questions.as_bytes());
    write("speed-bench/qualitative.jsonl", speed.as_bytes());
    write("speed-bench/throughput_16k.jsonl", speed.as_bytes());
    write("gsm8k/main/test.jsonl", gsm8k.as_bytes());
    write("my-set/test.jsonl", my_set.as_bytes());
    let sharegpt = serde_json::to_vec(&sharegpt).expect("ShareGPT JSON");
    write("ShareGPT_V3_unfiltered_cleaned_split.json", &sharegpt);
    write("mm.json", &serde_json::to_vec(&mm).expect("ShareGPT JSON"));
    // Traces with arrivals a few hundred milliseconds apart.
    let mooncake =
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 5, \"hash_ids\": [0, 1]}\n\
        {\"timestamp\": 100, \"input_length\": 60, \"output_length\": 3, \"hash_ids\": [0, 1, 2]}\n\
        {\"timestamp\": 200, \"input_length\": 20, \"output_length\": 4, \"hash_ids\": [3]}\n\
        {\"timestamp\": 300, \"input_length\": 40, \"output_length\": 2, \"hash_ids\": [0, 4]}\n";
    write("conversation_trace.jsonl", mooncake.as_bytes());
    // docs/agentic.md: the repository's sample agentic traces, as a directory.
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces");
    for name in ["trace-a.json", "trace-b.json", "trace-c.json"] {
        let text = std::fs::read(samples.join(name)).expect("sample agentic trace");
        write(&format!("traces/{name}"), &text);
    }
    write("mooncake_conversation_trace.jsonl", mooncake.as_bytes());
    write(
        "qwen_trace.jsonl",
        b"{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 10.0, \"input_length\": 40, \"output_length\": 4, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2, 3]}\n\
{\"chat_id\": 2, \"parent_chat_id\": 1, \"timestamp\": 10.2, \"input_length\": 60, \"output_length\": 4, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 3, 4]}\n",
    );
    write(
        "AzureLLMInferenceTrace_conv.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n\
2023-11-16 18:15:46.6805900,37,4\n2023-11-16 18:15:46.7805900,39,5\n\
2023-11-16 18:15:46.8805900,20,3\n2023-11-16 18:15:46.9805900,30,2\n",
    );
    let burstgpt = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
        0,GPT-4,40,5,45,Conversation log\n0,ChatGPT,30,4,34,Conversation log\n\
        0,GPT-4,50,3,53,API log\n0,GPT-4,20,6,26,Conversation log\n\
        1,GPT-4,35,4,39,Conversation log\n1,GPT-4,25,0,25,Conversation log\n";
    write("BurstGPT.csv", burstgpt.as_bytes());
    write("BurstGPT_1.csv", burstgpt.as_bytes());
}

/// All runnable blocks of the documentation.
fn all_blocks() -> Vec<Block> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    documents()
        .iter()
        .flat_map(|doc| {
            let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| {
                panic!("{doc}: {e}");
            });
            doc_blocks(doc, &text)
        })
        .collect()
}

/// Every documented command runs as documented: exit 0, or the error line the doc shows.
/// [`PARALLEL_BLOCKS`] blocks at a time, each in its own directory.
#[test]
fn every_documented_command_runs_as_documented() {
    let blocks = all_blocks();
    let commands: usize = blocks.iter().map(|b| b.commands.len()).sum();
    let marked = |hub: bool| {
        blocks
            .iter()
            .flat_map(|b| &b.commands)
            .filter(|c| match c.expect {
                Expect::NeedsHub(_) => hub,
                Expect::Error(_) => !hub,
                Expect::Success | Expect::NeedsRoot(_) => false,
            })
            .count()
    };
    assert!(commands > 50, "only {commands} documented commands found");
    let mock = MockServer::start(MockConfig {
        first_token_delay: Duration::from_millis(2),
        token_interval: Duration::from_millis(1),
        ..MockConfig::default()
    })
    .expect("mock server starts");
    let url = mock.base_url();
    let started = Instant::now();
    let queue = Mutex::new(blocks.iter().collect::<VecDeque<_>>());
    let done = Mutex::new(BlockRun::default());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_BLOCKS {
            s.spawn(|| loop {
                let Some(block) = queue.lock().unwrap().pop_front() else {
                    break;
                };
                let run = run_block(block, &url);
                let mut done = done.lock().unwrap();
                done.failures.extend(run.failures);
                done.took.extend(run.took);
            });
        }
    });
    let BlockRun {
        failures,
        took: mut slowest,
    } = done.into_inner().unwrap();
    // Where the time goes, for whoever makes an example cheaper.
    slowest.sort_by_key(|(took, _)| std::cmp::Reverse(*took));
    let summed: Duration = slowest.iter().map(|(d, _)| *d).sum();
    println!(
        "commands' time summed: {:.1} s; the slowest:",
        summed.as_secs_f64()
    );
    for (d, what) in slowest.iter().take(15) {
        println!("{:>6.2} s  {what}", d.as_secs_f64());
    }
    println!(
        "{commands} documented commands in {} blocks ({} needing the Hub, {} expected errors): \
         {} failed, {:.1} s",
        blocks.len(),
        marked(true),
        marked(false),
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn commands_are_read_as_the_shell_reads_them() {
    assert_eq!(
        shell_words(r#"vllm-bench --x '{"a": 1}' "b c" d\ e # comment"#).unwrap(),
        ["vllm-bench", "--x", r#"{"a": 1}"#, "b c", "d e"]
    );
    let doc = "```bash\n# a comment\nVLLM_BENCH_CORES=2 vllm-bench --mock-server \\\n  \
        --num-prompts 10 ...   # why\nvllm-bench --bad\n# error: --bad: no such flag (...)\n\
        ```\n\n<!-- test: x -->\n```bash\nvllm-bench --skipped\n```\n\
        ```text\nvllm-bench --not-a-shell-block\n```\n";
    let blocks = doc_blocks("d.md", doc);
    assert_eq!(blocks.len(), 1);
    let c = &blocks[0].commands;
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].env, [("VLLM_BENCH_CORES".into(), "2".into())]);
    assert_eq!(c[0].args, ["--mock-server", "--num-prompts", "10"]);
    assert_eq!(c[0].expect, Expect::Success);
    assert_eq!(c[1].expect, Expect::Error("--bad: no such flag".into()));
    assert!(blocks[0].script.is_none());
    let root = doc_blocks(
        "d.md",
        "```sh\nvllm-bench --keep-cpus-awake\n# needs root: cannot ask (...)\n```\n",
    );
    assert_eq!(
        root[0].commands[0].expect,
        Expect::NeedsRoot("cannot ask".into())
    );
    let ran = |code, stderr: &str| Outcome {
        code: Some(code),
        took: Duration::ZERO,
        stdout: String::new(),
        stderr: stderr.to_string(),
    };
    let expect = &root[0].commands[0].expect;
    assert_eq!(judge(expect, &ran(0, "")), None, "as root it runs");
    assert_eq!(
        judge(expect, &ran(2, "error: cannot ask x")),
        None,
        "else it stops so"
    );
    assert!(judge(expect, &ran(2, "error: something else")).is_some());
    let script = doc_blocks(
        "d.md",
        "```bash\nfor k in 0 1; do\n  vllm-bench --shard $k/2 &\ndone\nwait\n```\n",
    );
    assert!(script[0].script.is_some());
}

#[test]
fn only_the_server_is_substituted() {
    let url = "http://127.0.0.1:4242";
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rewrite(
            &s(&["--host", "h", "--port", "8000", "--num-prompts", "1000"]),
            url
        ),
        s(&[
            "--host",
            "127.0.0.1",
            "--port",
            "4242",
            "--num-prompts",
            "1000"
        ])
    );
    assert_eq!(
        rewrite(
            &s(&[
                "--base-url",
                "https://h:8443/p",
                "--insecure",
                "--seed",
                "1"
            ]),
            url
        ),
        s(&["--base-url", url, "--insecure", "--seed", "1"])
    );
    assert_eq!(
        rewrite(&s(&["--temperature", "0.7"]), url),
        s(&["--temperature", "0.7", "--base-url", url])
    );
    assert_eq!(
        rewrite(&s(&["--mock-server", "--num-prompts", "20"]), url),
        s(&["--mock-server", "--num-prompts", "20"])
    );
    assert_eq!(
        rewrite(&s(&["--compare", "a.json", "b.json"]), url),
        s(&["--compare", "a.json", "b.json"])
    );
    assert_eq!(
        rewrite(&s(&["merge", "a.json"]), url),
        s(&["merge", "a.json"])
    );
}
