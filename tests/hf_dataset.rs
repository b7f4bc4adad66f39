//! `--dataset-name hf` end to end: a Hub dataset found offline in an HF cache the test
//! builds (parquet written here, in the layout `huggingface_hub` writes), a local directory,
//! a dataset Python does not know read by column, and the one-line errors.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

use crate::e2e::mock;
use crate::util::{vllm_bench_env, TempDir};

/// A parquet file of UTF-8 string columns.
fn write_parquet(path: &Path, columns: &[(&str, Vec<String>)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let fields: String = columns
        .iter()
        .map(|(name, _)| format!("REQUIRED BYTE_ARRAY {name} (UTF8);"))
        .collect();
    let schema = Arc::new(parse_message_type(&format!("message schema {{ {fields} }}")).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut writer = SerializedFileWriter::new(File::create(path).unwrap(), schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    for (_, values) in columns {
        let mut col = group.next_column().unwrap().expect("a column per field");
        let data: Vec<ByteArray> = values.iter().map(|v| ByteArray::from(v.as_str())).collect();
        col.typed::<ByteArrayType>()
            .write_batch(&data, None, None)
            .unwrap();
        col.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();
}

/// `<hub>/datasets--org--name/snapshots/<commit>/` with `refs/main`, as the Hub client
/// leaves a downloaded dataset.
fn snapshot(hub: &Path, id: &str) -> std::path::PathBuf {
    let repo = hub.join(format!("datasets--{}", id.replace('/', "--")));
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
    repo.join("snapshots/0123abcd")
}

fn questions(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("Question {i}: what is {i} plus {i}? Show the steps."))
        .collect()
}

fn run(dir: &TempDir, hf_home: &Path, extra: &[&str]) -> crate::util::Run {
    let tokenizer = crate::util::smollm2();
    let mut args = vec![
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().unwrap(),
        "--dataset-name",
        "hf",
        "--num-prompts",
        "6",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ];
    args.extend(extra);
    vllm_bench_env(&args, dir.path(), &[("HF_HOME", hf_home)])
}

/// The bodies of the model requests the mock logged.
fn bodies(server: &vllm_bench::mock::MockServer) -> Vec<String> {
    server
        .request_log()
        .into_iter()
        .filter(|q| q.path == "/v1/completions")
        .filter_map(|q| q.body)
        .collect()
}

/// [`run`] that must succeed; its result.
fn run_ok(dir: &TempDir, hf_home: &Path, extra: &[&str]) -> Value {
    let out = run(dir, hf_home, extra);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    result(dir)
}

fn result(dir: &TempDir) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap()
}

#[test]
fn a_cached_hub_dataset_runs_offline_with_its_python_loader() {
    let server = mock(|c| c.request_log_bodies = true);
    let url = server.base_url();
    let dir = TempDir::new("hf-gsm8k");
    let home = dir.path().join("hf-home");
    let snap = snapshot(&home.join("hub"), "openai/gsm8k");
    // GSM8K: subset `main`, split `test` by default; `train` must not be read.
    write_parquet(
        &snap.join("main/test-00000-of-00001.parquet"),
        &[("question", questions(4)), ("answer", vec!["2".into(); 4])],
    );
    write_parquet(
        &snap.join("main/train-00000-of-00001.parquet"),
        &[
            ("question", vec!["TRAIN".into(); 3]),
            ("answer", vec!["x".into(); 3]),
        ],
    );
    let r = run_ok(
        &dir,
        &home,
        &[
            "--base-url",
            &url,
            "--dataset-path",
            "openai/gsm8k",
            "--hf-output-len",
            "5",
        ],
    );
    assert_eq!(r["completed"], 6, "4 rows oversampled to 6");
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 6);
    assert!(
        !bodies.iter().any(|b| b.contains("TRAIN")),
        "the train split was read"
    );
    // The chat template of the tokenizer wraps every question.
    assert!(
        bodies.iter().all(|b| b.contains("<|im_start|>user")),
        "{bodies:?}"
    );
    assert!(r["output_lens"].as_array().unwrap().iter().all(|n| n == 5));
}

#[test]
fn a_local_directory_of_an_unknown_dataset_is_read_by_column() {
    let server = mock(|_| {});
    let url = server.base_url();
    let dir = TempDir::new("hf-local");
    let data = dir.path().join("my-set/data");
    write_parquet(
        &data.join("train-00000-of-00001.parquet"),
        &[("body", questions(8))],
    );
    std::fs::write(data.join("test.jsonl"), "{\"body\": \"TEST SPLIT\"}\n").unwrap();
    let path = dir.path().join("my-set");
    let path = path.to_str().unwrap();
    let base = [
        "--base-url",
        url.as_str(),
        "--dataset-path",
        path,
        "--skip-chat-template",
    ];
    let no_column = run(&dir, dir.path(), &base);
    assert_eq!(no_column.code, 2, "{}", no_column.stderr);
    assert!(
        no_column
            .stderr
            .contains("no prompt column found (columns: body)")
            && no_column.stderr.contains("--hf-text-column"),
        "{}",
        no_column.stderr
    );
    let mut args = base.to_vec();
    args.extend(["--hf-text-column", "body"]);
    assert_eq!(run_ok(&dir, dir.path(), &args)["completed"], 6);
    let mut test_split = args.clone();
    test_split.extend(["--hf-split", "test", "--num-prompts", "1"]);
    assert_eq!(run(&dir, dir.path(), &test_split).code, 0);
    let wrong = [args.as_slice(), &["--hf-split", "validation"]].concat();
    let bad = run(&dir, dir.path(), &wrong);
    assert!(
        bad.code == 2 && bad.stderr.contains("splits found: test, train"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_missing_dataset_offline_is_one_line_saying_what_to_do() {
    let dir = TempDir::new("hf-missing");
    let out = run(
        &dir,
        dir.path(),
        &["--mock-server", "--dataset-path", "org/absent"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("HF_HUB_OFFLINE") && lines[0].contains("--dataset-path"),
        "{}",
        lines[0]
    );
    let mm = run(
        &dir,
        dir.path(),
        &[
            "--mock-server",
            "--dataset-path",
            "lmarena-ai/VisionArena-Chat",
        ],
    );
    assert!(
        mm.code == 2 && mm.stderr.contains("needs images"),
        "{}",
        mm.stderr
    );
}

#[test]
fn chat_logs_take_the_first_user_turn_and_its_answer() {
    let server = mock(|c| c.request_log_bodies = true);
    let url = server.base_url();
    let dir = TempDir::new("hf-chatlog");
    let data = dir.path().join("chats");
    std::fs::create_dir_all(&data).unwrap();
    let line = |i: usize| {
        serde_json::json!({"conversation": [
            {"role": "system", "content": "SYSTEM TEXT"},
            {"role": "user", "content": format!("Tell me about the number {i} in detail.")},
            {"role": "assistant", "content": "It is a number with many interesting properties."},
        ]})
        .to_string()
    };
    let text: String = (0..5).map(|i| line(i) + "\n").collect();
    std::fs::write(data.join("train.jsonl"), text).unwrap();
    let r = run_ok(
        &dir,
        dir.path(),
        &[
            "--base-url",
            &url,
            "--dataset-path",
            data.to_str().unwrap(),
            "--num-prompts",
            "5",
        ],
    );
    let lens: Vec<u64> = r["output_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(
        lens.iter().all(|&n| n == lens[0] && n > 4),
        "the answer's length: {lens:?}"
    );
    let bodies = bodies(&server);
    assert!(
        bodies
            .iter()
            .all(|b| b.contains("Tell me about") && !b.contains("SYSTEM")),
        "{bodies:?}"
    );
}

#[test]
fn blazedit_keeps_the_rows_within_its_distance_bounds() {
    let server = mock(|c| c.request_log_bodies = true);
    let url = server.base_url();
    let dir = TempDir::new("hf-blazedit");
    let data = dir.path().join("edit");
    std::fs::create_dir_all(&data).unwrap();
    let rows: String = [0.1, 0.5, 0.9]
        .iter()
        .map(|d| {
            serde_json::json!({"code": format!("print({d})"), "change_request": "rename it",
                "norm_distance": d})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(data.join("train.jsonl"), rows).unwrap();
    let r = run_ok(
        &dir,
        dir.path(),
        &[
            "--base-url",
            &url,
            "--dataset-path",
            data.to_str().unwrap(),
            "--hf-name",
            "vdaita/edit_5k_char",
            "--blazedit-min-distance",
            "0.3",
            "--blazedit-max-distance",
            "0.6",
            "--skip-chat-template",
            "--no-oversample",
        ],
    );
    assert_eq!(r["completed"], 1, "only the 0.5 row");
    assert_eq!(r["output_lens"][0], 4000);
    let body = bodies(&server).remove(0);
    assert!(
        body.contains("print(0.5)") && body.contains("Change request:\\nrename it"),
        "{body}"
    );
}

#[test]
fn bfcl_rows_are_chat_requests_with_their_tools() {
    let server = mock(|c| c.request_log_bodies = true);
    let url = server.base_url();
    let dir = TempDir::new("hf-bfcl");
    let data = dir.path().join("bfcl");
    std::fs::create_dir_all(&data).unwrap();
    let row = |category: &str, i: usize| {
        serde_json::json!({
            "id": format!("{category}_{i}"),
            "question": [[{"role": "user", "content": format!("{category} question {i}")}]],
            "function": [{"name": "f", "description": "d",
                "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}}}],
        })
        .to_string()
            + "\n"
    };
    for category in ["simple", "multiple"] {
        let text: String = (0..3).map(|i| row(category, i)).collect();
        std::fs::write(data.join(format!("BFCL_v3_{category}.json")), text).unwrap();
    }
    let mut args = vec![
        "--base-url",
        url.as_str(),
        "--backend",
        "openai-chat",
        "--dataset-path",
        data.to_str().unwrap(),
        "--hf-name",
        "gorilla-llm/Berkeley-Function-Calling-Leaderboard",
        "--bfcl-categories",
        "simple,multiple",
        "--disable-shuffle",
    ];
    let r = run_ok(&dir, dir.path(), &args);
    assert_eq!(r["completed"], 6);
    assert!(r["output_lens"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n == 512));
    let bodies: Vec<Value> = server
        .request_log()
        .into_iter()
        .filter(|q| q.path == "/v1/chat/completions")
        .filter_map(|q| q.body)
        .map(|b| serde_json::from_str(&b).unwrap())
        .collect();
    // Interleaved by category, the question as the messages, the functions as tools.
    let asked: Vec<&str> = bodies
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap())
        .collect();
    assert!(asked.contains(&"simple question 0") && asked.contains(&"multiple question 2"));
    for b in &bodies {
        assert_eq!(b["tool_choice"], "auto");
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(b["messages"].as_array().unwrap().len(), 1);
    }
    args.extend(["--bfcl-categories", "nope"]);
    let missing = run(&dir, dir.path(), &args);
    assert!(
        missing.code == 2 && missing.stderr.contains("BFCL category 'nope' not found"),
        "{}",
        missing.stderr
    );
}
