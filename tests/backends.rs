//! The backends beyond completions/chat end to end against the mock: what the client reads
//! from each API's answers (token counts, generated text), and every request accounted for
//! when the mock injects faults.

use serde_json::Value;

use crate::e2e::{assert_accounted, base_args, count, mock, saved};
use crate::util::{run_in_process, TempDir};
use vllm_bench::mock::FaultConfig;

fn texts(doc: &serde_json::Map<String, Value>) -> Vec<String> {
    doc["generated_texts"]
        .as_array()
        .expect("generated_texts with --save-detailed")
        .iter()
        .map(|t| t.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn responses_reads_text_and_usage_from_typed_events() {
    let server = mock(|c| c.tokens_per_chunk = 2);
    let dir = TempDir::new("responses");
    let mut args = base_args(&server, &dir, 6);
    args.extend(["--backend", "openai-responses"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 6);
    // 4 output tokens in 2 deltas of 2: usage from response.completed, text from deltas.
    assert_eq!(count(&doc, "total_output_tokens"), 24);
    assert!(
        texts(&doc).iter().all(|t| t == " tok tok tok tok"),
        "{doc:?}"
    );
    let itls = doc["itls"].as_array().unwrap();
    assert!(
        itls.iter().all(|l| l.as_array().unwrap().len() == 1),
        "two deltas, one gap"
    );
}

#[test]
fn responses_faults_are_failures_and_every_request_is_accounted_for() {
    let server = mock(|c| {
        c.faults = FaultConfig {
            malformed: 0.25,
            disconnect: 0.25,
            close_after_head: 0.25,
            ..FaultConfig::default()
        }
    });
    let dir = TempDir::new("responses-faults");
    let mut args = base_args(&server, &dir, 16);
    args.extend(["--backend", "openai-responses"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    let doc = saved(&dir);
    assert_accounted(&doc, 16);
    let failed = count(&doc, "failed");
    assert!(
        failed > 0 && failed < 16,
        "{failed} failed:\n{}",
        run.stdout
    );
    assert_eq!(run.code, 0, "some requests succeeded:\n{}", run.stderr);
}

#[test]
fn beam_search_and_no_stream_are_accepted_and_change_nothing() {
    // Python 0.33's serve parses both and sends nothing for them: the run is the same.
    let server = mock(|_| {});
    let dir = TempDir::new("beam");
    let mut args = base_args(&server, &dir, 4);
    args.extend(["--use-beam-search", "--no-stream"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 4);
    assert_eq!(
        count(&doc, "total_output_tokens"),
        16,
        "still streamed, 4 tokens each"
    );
}

/// The JSON bodies the mock received on `path`, with their `x-request-id` and session.
/// In arrival order.
fn bodies(server: &vllm_bench::mock::MockServer, path: &str) -> Vec<(String, String, Value)> {
    let mut log = server.request_log();
    log.sort_by_key(|r| r.arrival);
    log.into_iter()
        .filter(|r| r.path == path)
        .map(|r| {
            let body = serde_json::from_str(r.body.as_deref().expect("request_log_bodies"))
                .expect("a JSON body");
            (
                r.request_id.unwrap_or_default(),
                r.session_id.unwrap_or_default(),
                body,
            )
        })
        .collect()
}

fn run(server: &vllm_bench::mock::MockServer, dir: &TempDir, n: usize, extra: &[&str]) -> String {
    let mut args = base_args(server, dir, n);
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

#[test]
fn responses_body_is_pythons_field_by_field() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("responses-body");
    run(
        &server,
        &dir,
        2,
        &[
            "--backend",
            "openai-responses",
            "--extra-body",
            r#"{"temperature": 0.5}"#,
        ],
    );
    let (_, _, body) = bodies(&server, "/v1/responses").pop().expect("a request");
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // Python: model, input, max_output_tokens, stream, store, then ignore_eos (forced for
    // random, as for every OpenAI-compatible backend) and the extra body.
    assert_eq!(
        keys,
        [
            "model",
            "input",
            "max_output_tokens",
            "stream",
            "store",
            "ignore_eos",
            "temperature"
        ]
    );
    assert_eq!(body["model"], "mock-model");
    assert!(body["input"].is_string());
    assert_eq!(
        (&body["max_output_tokens"], &body["stream"], &body["store"]),
        (&Value::from(4), &Value::Bool(true), &Value::Bool(false))
    );
}

#[test]
fn lora_round_robin_names_adapter_i_mod_n_and_the_base_model_elsewhere() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("lora");
    let out = run(
        &server,
        &dir,
        6,
        &[
            "--lora-modules",
            "sql",
            "chat",
            "--lora-assignment",
            "round-robin",
            "--request-id-prefix",
            "r-",
            "--num-warmups",
            "2",
        ],
    );
    let sent = bodies(&server, "/v1/completions");
    // The two warm-ups (and the ready check, when on) come first and name the base model.
    let (warm, measured) = sent.split_at(sent.len() - 6);
    assert!(warm.len() >= 2, "{} before the run", warm.len());
    assert!(warm.iter().all(|(_, _, b)| b["model"] == "mock-model"));
    for (id, _, body) in measured {
        let i: usize = id.trim_start_matches("r-").parse().unwrap();
        assert_eq!(body["model"], ["sql", "chat"][i % 2], "request {id}");
    }
    let doc = saved(&dir);
    let adapters: Vec<&str> = doc["vllm_bench_lora_adapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(adapters, ["sql", "chat", "sql", "chat", "sql", "chat"]);
    assert_eq!(doc["vllm_bench_lora_summary"]["sql"]["requests"], 3);
    assert!(
        out.contains("------------------LoRA adapters-------------------\nsql:"),
        "{out}"
    );
    assert!(
        out.contains("\nchat:                                    3 requests (3 ok), mean TTFT ")
    );
}

#[test]
fn lora_random_is_seeded_and_multi_turn_keeps_one_adapter_per_conversation() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("lora-mt");
    run(
        &server,
        &dir,
        8,
        &[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--lora-modules",
            "a",
            "b",
            "c",
        ],
    );
    let mut by_session = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (_, session, body) in bodies(&server, "/v1/chat/completions") {
        if !session.is_empty() {
            let model = body["model"].as_str().unwrap().to_string();
            by_session.entry(session).or_default().push(model);
        }
    }
    assert_eq!(by_session.len(), 8);
    for (session, models) in &by_session {
        assert_eq!(models.len(), 3, "{session}");
        assert!(
            models.iter().all(|m| m == &models[0]),
            "{session}: {models:?}"
        );
        assert!(["a", "b", "c"].contains(&models[0].as_str()));
    }
    let doc = saved(&dir);
    assert_eq!(
        doc["vllm_bench_lora_adapters"].as_array().unwrap().len(),
        24
    );
}

/// The JPEG files of a chat body's image parts, and its text parts.
fn images_of(body: &Value) -> (Vec<Vec<u8>>, Vec<String>) {
    use base64::Engine as _;
    let content = body["messages"][0]["content"]
        .as_array()
        .expect("list content");
    let (mut images, mut texts) = (Vec::new(), Vec::new());
    for part in content {
        match part["type"].as_str() {
            Some("image_url") => {
                let url = part["image_url"]["url"].as_str().unwrap();
                let data = url
                    .strip_prefix("data:image/jpeg;base64,")
                    .expect("a JPEG data URL");
                images.push(
                    base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .unwrap(),
                );
            }
            Some("text") => texts.push(part["text"].as_str().unwrap().to_string()),
            other => panic!("unexpected part {other:?}"),
        }
    }
    (images, texts)
}

#[test]
fn random_mm_sends_jpeg_images_after_the_text_within_the_item_limits() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("random-mm");
    let run_out = run(
        &server,
        &dir,
        10,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "random-mm",
            "--random-mm-base-items-per-request",
            "2",
            "--random-mm-num-mm-items-range-ratio",
            "0.5",
            "--random-mm-limit-mm-per-prompt",
            r#"{"image": 2, "video": 0}"#,
            "--random-mm-bucket-config",
            "{(64, 48, 1): 0.5, (32, 40, 1): 0.5, (720, 1280, 16): 0.0}",
        ],
    );
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 10, "{run_out}");
    let sent = bodies(&server, "/v1/chat/completions");
    let measured = &sent[sent.len() - 10..];
    let mut sizes = std::collections::BTreeSet::new();
    for (id, _, body) in measured {
        let content = &body["messages"][0]["content"];
        assert_eq!(
            content[0]["type"], "text",
            "{id}: text first, as Python's openai-chat"
        );
        let (images, texts) = images_of(body);
        assert_eq!(texts.len(), 1);
        // floor(2·0.5) = 1 to min(limit 2, ceil(2·1.5) = 3) = 2 items.
        assert!(
            (1..=2).contains(&images.len()),
            "{id}: {} images",
            images.len()
        );
        for jpeg in &images {
            let mut d = jpeg_decoder::Decoder::new(&jpeg[..]);
            d.decode().expect("a JPEG");
            let info = d.info().unwrap();
            sizes.insert((info.height, info.width));
        }
    }
    assert!(
        sizes.iter().all(|s| [(64, 48), (32, 40)].contains(s)),
        "{sizes:?}"
    );
    assert_eq!(sizes.len(), 2, "both buckets drawn");
}

#[test]
fn random_mm_video_buckets_and_bad_bucket_literals_are_one_line_errors() {
    for (bucket, needle) in [
        ("{(64, 48, 8): 1.0}", "video buckets"),
        ("{(64, 48): 1.0}", "--random-mm-bucket-config"),
        ("{(64, 48, 1): 0.0}", "positive probability"),
    ] {
        let run = run_in_process(&[
            "--mock-server",
            "--dataset-name",
            "random-mm",
            "--num-prompts",
            "2",
            "--random-mm-bucket-config",
            bucket,
        ]);
        assert_eq!(run.code, 2, "{bucket}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{bucket}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    }
}

/// A mono 16-bit PCM WAV of `secs` seconds at 16 kHz (a saw tone), written by the test.
fn write_wav(path: &std::path::Path, secs: f64) {
    let rate = 16_000u32;
    let frames = (secs * f64::from(rate)) as usize;
    let pcm: Vec<u8> = (0..frames)
        .flat_map(|i| (((i % 80) as i16 - 40) * 400).to_le_bytes())
        .collect();
    std::fs::write(path, vllm_bench::datasets::wav::pcm16_wav(1, rate, &pcm)).unwrap();
}

/// A `custom_audio` dataset in `dir`: one row per length in `secs`, each with its own WAV
/// and 6 output tokens.
pub(crate) fn audio_dataset(dir: &TempDir, secs: &[f64]) -> std::path::PathBuf {
    let mut lines = String::new();
    for (i, secs) in secs.iter().enumerate() {
        let wav = dir.path().join(format!("a{i}.wav"));
        write_wav(&wav, *secs);
        lines.push_str(&format!(
            "{{\"prompt\": \"Transcribe.\", \"audio\": \"{}\", \"output_tokens\": 6}}\n",
            wav.display()
        ));
    }
    let jsonl = dir.path().join("audio.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    jsonl
}

#[test]
fn openai_audio_uploads_each_rows_wav_and_reports_rtfx() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("audio");
    let jsonl = audio_dataset(&dir, &[0.5, 1.0, 1.5]);
    let out = run(
        &server,
        &dir,
        3,
        &[
            "--backend",
            "openai-audio",
            "--dataset-name",
            "custom_audio",
            "--dataset-path",
            jsonl.to_str().unwrap(),
            "--custom-output-len",
            "-1",
            "--skip-chat-template",
            "--asr-max-audio-len-sec",
            "30",
        ],
    );
    let doc = saved(&dir);
    assert_accounted(&doc, 3);
    assert_eq!(count(&doc, "completed"), 3, "{out}");
    assert_eq!(count(&doc, "total_output_tokens"), 18);
    let duration = doc["duration"].as_f64().unwrap();
    let rtfx = doc["rtfx"].as_f64().unwrap();
    assert!(
        (rtfx - 3.0 / duration).abs() < 1e-9,
        "rtfx {rtfx}, duration {duration}"
    );
    assert!(out.contains("RTFx (Inverse Real-Time Factor):"), "{out}");
    let log = server.request_log();
    let forms: Vec<&String> = log
        .iter()
        .filter(|r| r.path == "/v1/audio/transcriptions")
        .filter_map(|r| r.body.as_ref())
        .collect();
    assert!(forms.len() >= 3);
    for form in forms {
        assert!(
            form.contains("name=\"file\"; filename=\"audio.wav\"\r\n\r\nRIFF"),
            "{form:.200}"
        );
        for field in [
            "name=\"model\"\r\n\r\nmock-model\r\n",
            "name=\"max_completion_tokens\"\r\n\r\n6\r\n",
            "name=\"stream\"\r\n\r\nTrue\r\n",
            "name=\"language\"\r\n\r\nen\r\n",
            "name=\"stream_include_usage\"\r\n\r\nTrue\r\n",
        ] {
            assert!(form.contains(field), "{field}");
        }
    }
}

#[test]
fn openai_audio_and_custom_audio_go_together() {
    for (args, needle) in [
        (
            &["--backend", "openai-audio"][..],
            "--backend openai-audio: needs --dataset-name custom_audio",
        ),
        (
            &[
                "--dataset-name",
                "custom_audio",
                "--dataset-path",
                "x.jsonl",
            ][..],
            "--dataset-name custom_audio: needs --backend openai-audio",
        ),
    ] {
        let mut argv = vec!["--mock-server", "--num-prompts", "2"];
        argv.extend_from_slice(args);
        let run = run_in_process(&argv);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(needle), "{}", run.stderr);
    }
}

#[test]
fn custom_image_sends_image_urls_and_interleaved_content_as_python() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("custom-image");
    let jsonl = dir.path().join("images.jsonl");
    std::fs::write(
        &jsonl,
        concat!(
            r#"{"prompt": "How many blocks?", "image_files": ["img/a.png", "https://h/b.jpg"]}"#,
            "\n",
            r#"{"content": [{"type": "text", "text": "Compare "}, {"type": "image", "image": "c.png"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    run(
        &server,
        &dir,
        2,
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "custom_image",
            "--dataset-path",
            jsonl.to_str().unwrap(),
            "--custom-output-len",
            "3",
            "--disable-shuffle",
        ],
    );
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 2);
    let sent = bodies(&server, "/v1/chat/completions");
    let contents: Vec<&Value> = sent[sent.len() - 2..]
        .iter()
        .map(|(_, _, b)| &b["messages"][0]["content"])
        .collect();
    let want_legacy = serde_json::json!([
        {"type": "text", "text": "How many blocks?"},
        {"type": "image_url", "image_url": {"url": "file://img/a.png"}},
        {"type": "image_url", "image_url": {"url": "https://h/b.jpg"}}
    ]);
    let want_content = serde_json::json!([
        {"type": "text", "text": "Compare "},
        {"type": "image_url", "image_url": {"url": "file://c.png"}}
    ]);
    assert!(contents.contains(&&want_legacy), "{contents:?}");
    assert!(contents.contains(&&want_content), "{contents:?}");
}

#[test]
fn sharegpt_image_and_video_entries_follow_the_text_or_become_the_chat_content() {
    let dir = TempDir::new("sharegpt-mm");
    let entry = |q: &str, key: &str, path: &str| {
        serde_json::json!({
            "conversations": [
                {"from": "human", "value": q},
                {"from": "gpt", "value": "an answer long enough to be kept by the filter"}
            ],
            key: path
        })
    };
    let file = dir.path().join("mm.json");
    let list = serde_json::json!([
        entry("What is in this picture, please?", "image", "pics/cat.png"),
        entry(
            "What happens in this video, please?",
            "video",
            "https://h/v.mp4"
        ),
    ]);
    std::fs::write(&file, list.to_string()).unwrap();
    for chat in [false, true] {
        let server = mock(|c| c.request_log_bodies = true);
        let mut extra = vec![
            "--backend",
            "openai-chat",
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            file.to_str().unwrap(),
            "--sharegpt-output-len",
            "4",
            "--disable-shuffle",
        ];
        if chat {
            extra.push("--enable-multimodal-chat");
        }
        run(&server, &dir, 2, &extra);
        let sent = bodies(&server, "/v1/chat/completions");
        let contents: Vec<String> = sent[sent.len() - 2..]
            .iter()
            .map(|(_, _, b)| b["messages"][0]["content"].to_string())
            .collect();
        let text_key = if chat {
            r#"{"text":"What is in this picture, please?","type":"text"}"#
        } else {
            r#"{"type":"text","text":"What is in this picture, please?"}"#
        };
        let image = format!(
            r#"[{text_key},{{"type":"image_url","image_url":{{"url":"file://pics/cat.png"}}}}]"#
        );
        assert!(contents.contains(&image), "{chat}: {contents:?}");
        assert!(
            contents
                .iter()
                .any(|c| c
                    .ends_with(r#"{"type":"video_url","video_url":{"url":"https://h/v.mp4"}}]"#)),
            "{contents:?}"
        );
    }
    let refused = run_in_process(&[
        "--mock-server",
        "--num-prompts",
        "2",
        "--enable-multimodal-chat",
    ]);
    assert_eq!(refused.code, 2);
    assert!(
        refused
            .stderr
            .contains("--enable-multimodal-chat: implemented for --dataset-name sharegpt only"),
        "{}",
        refused.stderr
    );
}
