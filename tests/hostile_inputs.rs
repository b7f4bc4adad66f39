//! Integration tests: hostile inputs (issue 36, items 7, 9, 10, 14, 16). Each test is named
//! after the symptom it once showed. Memory cases run the binary under an address-space
//! limit (`ulimit -v`, RLIMIT_AS), so a regression fails the test instead of eating the
//! machine.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::input_limits::{args, mock, one_line_refusal, refused};
use crate::util::{run_in_process, vllm_bench_via, Run, TempDir};

/// Runs the binary with `args` under an address-space limit of `mib` MiB (and, when given,
/// an open-file limit).
fn under_limits(mib: u64, nofile: Option<u32>, args: &[&str], dir: &TempDir) -> Run {
    let nofile = nofile.map_or(String::new(), |n| format!("ulimit -n {n} && "));
    let script = format!("{nofile}ulimit -v {} && exec \"$0\" \"$@\"", mib * 1024);
    vllm_bench_via(&["sh", "-c", &script], args, dir.path(), &[])
}

/// The result file a run saved in `dir` (the only `.json` there), parsed.
fn saved_result(dir: &TempDir) -> serde_json::Value {
    let file = std::fs::read_dir(dir.path())
        .expect("read the run's directory")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a saved result");
    serde_json::from_slice(&std::fs::read(file).expect("read the result")).expect("valid JSON")
}

/// A word `nan` (any case) in `text`, not inside a longer word.
fn has_nan(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("nan"))
}

// ---------------------------------------------------------------------------------------------
// Item 7: every request cancelled.

#[test]
fn request_cancellation_rate_100_prints_no_nan_and_exits_1() {
    let dir = TempDir::new("cancel-all");
    let m = mock();
    let a = args(
        &m,
        &[
            "--num-prompts",
            "12",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--request-cancellation-rate",
            "100",
            "--save-result",
        ],
    );
    let run = under_limits(2048, None, &a, &dir);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(!has_nan(&run.stdout), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("Request throughput (req/s):              0.00"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("error: no request succeeded (12 cancelled by --request-cancellation-rate)"),
        "{}",
        run.stderr
    );
    let doc = saved_result(&dir);
    for key in [
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
    ] {
        assert_eq!(doc[key], serde_json::json!(0.0), "{key}: {doc}");
    }
    assert!(doc["duration"].as_f64().is_some_and(|d| d > 0.0), "{doc}");
}

// ---------------------------------------------------------------------------------------------
// Item 9: the ramp-up's rate-change list.

#[test]
fn ramp_up_end_rps_1e9_is_refused_before_the_run_not_an_abort_after_it() {
    let dir = TempDir::new("ramp-1e9");
    let m = mock();
    let a = args(
        &m,
        &[
            "--num-prompts",
            "3",
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "1",
            "--ramp-up-end-rps",
            "1000000000",
        ],
    );
    let e = one_line_refusal(under_limits(1024, None, &a, &dir), "ramp to 1e9");
    assert!(
        e.contains("--ramp-up-end-rps 1000000000: must be at most 100000"),
        "{e}"
    );
    assert!(
        !dir.path().read_dir().unwrap().any(|_| true),
        "nothing saved"
    );
}

#[test]
fn ramp_up_to_the_highest_end_rps_keeps_its_result_in_bounded_memory() {
    let dir = TempDir::new("ramp-max");
    let m = mock();
    let a = args(
        &m,
        &[
            "--num-prompts",
            "3",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "1",
            "--ramp-up-end-rps",
            "100000",
            "--save-result",
        ],
    );
    let run = under_limits(1024, None, &a, &dir);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events = saved_result(&dir)["rps_change_events"]
        .as_array()
        .expect("rps_change_events")
        .len();
    assert_eq!(events, 100_000, "every integer rate from 1 to 100000 once");
}

// ---------------------------------------------------------------------------------------------
// Item 10: sizes that used to allocate gigabytes before the first request.

#[test]
fn timed_trace_chunk_hash_size_of_16m_serializes_only_the_prompt_not_the_block() {
    // 40 records of 16 tokens, each on its own block of 16,777,216 tokens: whole blocks
    // were about 117 MB of JSON each (4.7 GB); the prompts need 16 tokens of each.
    let dir = TempDir::new("trace-chunk");
    let file = dir.path().join("t.jsonl");
    let rows: String = (0..40)
        .map(|i| {
            format!(
                "{{\"timestamp\": {i}, \"input_length\": 16, \"output_length\": 1, \
                 \"hash_ids\": [{i}]}}\n"
            )
        })
        .collect();
    std::fs::write(&file, rows).expect("write the trace");
    let m = mock();
    let a = args(
        &m,
        &[
            "--backend",
            "vllm",
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            file.to_str().expect("utf-8 path"),
            "--timed-trace-sec-multiplier",
            "0.0001",
            "--max-model-len",
            "16777216",
            "--timed-trace-chunk-hash-size",
            "16777216",
        ],
    );
    let run = under_limits(1024, None, &a, &dir);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Successful requests:                     40"),
        "{}",
        run.stdout
    );
}

#[test]
fn timed_trace_chunk_hash_size_4294967295_is_refused_with_its_range() {
    let e = refused(&[
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        "t.jsonl",
        "--timed-trace-chunk-hash-size",
        "4294967295",
    ]);
    assert!(
        e.contains("--timed-trace-chunk-hash-size 4294967295: must be between 1 and 1048576"),
        "{e}"
    );
}

#[test]
fn max_model_len_999999999999_is_refused_not_a_32_gb_abort() {
    let dir = TempDir::new("max-model-len");
    let m = mock();
    let a = args(
        &m,
        &[
            "--max-model-len",
            "999999999999",
            "--random-input-len",
            "999999999",
        ],
    );
    let e = one_line_refusal(under_limits(1024, None, &a, &dir), "max-model-len 1e12");
    assert!(
        e.contains("--max-model-len 999999999999: 999999999999 tokens are more than the 16777216"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 16: floats and the open-file limit.

#[test]
fn burstiness_1e308_runs_instead_of_a_gamma_error_without_the_flag() {
    let dir = TempDir::new("burst-1e308");
    let m = mock();
    let a = args(
        &m,
        &[
            "--num-prompts",
            "4",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--request-rate",
            "200",
            "--burstiness",
            "1e308",
        ],
    );
    let run = under_limits(2048, None, &a, &dir);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Burstiness factor: 1e+308 (Gamma distribution)"),
        "{}",
        run.stdout
    );
    let e = refused(&["--request-rate", "5", "--burstiness", "1e-310"]);
    assert_eq!(
        e,
        "error: --burstiness 1e-310: must be a positive, finite number (1 is Poisson, below 1 \
         burstier, above 1 steadier)"
    );
}

#[test]
fn request_timeout_sec_1e308_is_refused_without_309_digits() {
    let e = refused(&["--request-timeout-sec", "1e308"]);
    assert_eq!(
        e,
        "error: --request-timeout-sec 1e+308: must be a positive number of seconds, at most \
         31536000 (365 days)"
    );
}

/// The sibling scan: every flag that takes a value, given a huge, a negative huge and a
/// subnormal float, is taken or refused in one short line, never with a float printed as
/// hundreds of digits.
#[test]
fn no_flag_prints_a_float_as_hundreds_of_digits() {
    let mut tried = 0;
    for arg in vllm_bench::cli::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !arg.get_action().takes_values() || long.starts_with("mock-") {
            continue;
        }
        let flag = format!("--{long}");
        for value in ["1e308", "-1e308", "1e-310"] {
            let argv = ["vllm-bench", flag.as_str(), value];
            let Ok(cli) = vllm_bench::cli::parse_from(argv) else {
                continue;
            };
            tried += 1;
            if let Err(e) = vllm_bench::config::Config::from_cli(cli) {
                let m = e.to_string();
                let digits = m
                    .split(|c: char| !c.is_ascii_digit())
                    .map(str::len)
                    .max()
                    .unwrap_or(0);
                assert!(digits < 25, "{flag} {value}: {m}");
                assert!(!m.contains('\n'), "{flag} {value}: {m}");
            }
        }
    }
    assert!(tried > 50, "only {tried} flag values tried");
}

#[test]
fn ready_check_timeout_sec_u64_max_is_refused_not_a_panic() {
    let e = refused(&["--ready-check-timeout-sec", "18446744073709551615"]);
    assert!(
        e.contains("--ready-check-timeout-sec 18446744073709551615: is more than 31536000 s"),
        "{e}"
    );
}

#[test]
fn multi_turn_num_turns_4e9_and_a_delay_of_u64_max_are_refused_before_building() {
    let e = refused(&[
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--multi-turn-num-turns",
        "4000000000",
    ]);
    assert!(
        e.contains("--multi-turn-num-turns 4000000000: 4 conversations × 4000000000 turns"),
        "{e}"
    );
    assert!(e.contains("more than the 10000000 one run may plan"), "{e}");
    let e = refused(&[
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--multi-turn-delay-ms",
        "18446744073709551615",
    ]);
    assert!(
        e.contains("--multi-turn-delay-ms 18446744073709551615: is more than 31536000 s"),
        "{e}"
    );
}

#[test]
fn open_file_limit_is_checked_before_building_200000_prompts() {
    // 200,000 prompts took 48 s and 1.5 GB before the limit was checked; under 512 MiB of
    // address space that build cannot even happen, so only a check before it passes.
    let dir = TempDir::new("nofile-early");
    let m = mock();
    let a = args(
        &m,
        &[
            "--num-prompts",
            "200000",
            "--random-input-len",
            "64",
            "--random-output-len",
            "2",
        ],
    );
    let run = under_limits(512, Some(128), &a, &dir);
    let e = one_line_refusal(run, "200000 connections under ulimit -n 128");
    assert!(e.contains("RLIMIT_NOFILE"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Item 14: server text, secrets and headers.

/// A scripted server on 127.0.0.1: every POST gets `answer` (a whole HTTP response), any
/// other request a 404; each connection is closed after one answer. The request heads are
/// kept. Stops by itself after 60 s.
struct Scripted {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

fn scripted(answer: &'static str) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => {
                    if let Some(head) = answer_one(s, answer) {
                        kept.lock().unwrap().push(head);
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Scripted { url, heads }
}

/// Reads one request (head and `Content-Length` body) from `s` and answers it.
fn answer_one(mut s: TcpStream, answer: &str) -> Option<String> {
    s.set_nonblocking(false).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let reply = if head.starts_with("POST") {
        answer
    } else {
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    };
    s.write_all(reply.as_bytes()).ok()?;
    Some(head)
}

/// An Anthropic stream whose `error` event carries escape sequences (clear the screen, set
/// the window title, ring the bell).
const ANTHROPIC_ERROR: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
    Connection: close\r\n\r\n\
    event: error\n\
    data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\
    \"\\u001b[2J\\u001b]0;pwned\\u0007boom\\r\\nFAKE LINE\"}}\n\n";

/// The same as a Responses stream (`error` as a string: dumped as JSON by Python's rule).
const RESPONSES_ERROR: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
    Connection: close\r\n\r\n\
    data: {\"type\":\"error\",\"code\":\"x\",\"message\":\"\\u001b[2J\\u009b31mboom\"}\n\n";

#[test]
fn error_event_escape_sequences_never_reach_the_terminal_raw() {
    for (backend, answer) in [
        ("anthropic-messages", ANTHROPIC_ERROR),
        ("openai-responses", RESPONSES_ERROR),
    ] {
        let server = scripted(answer);
        let dir = TempDir::new("error-escapes");
        let m = mock();
        // The embedded mock's flags, minus --mock-server: the scripted server answers.
        let m: Vec<String> = m.into_iter().filter(|a| a != "--mock-server").collect();
        let a = args(
            &m,
            &[
                "--base-url",
                &server.url,
                "--backend",
                backend,
                "--num-prompts",
                "2",
                "--random-input-len",
                "8",
                "--random-output-len",
                "2",
                "--no-server-metrics",
            ],
        );
        let run = under_limits(2048, None, &a, &dir);
        assert_eq!(run.code, 1, "{backend}: {}\n{}", run.stdout, run.stderr);
        for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            assert!(
                !text.contains(['\x1b', '\x07', '\r', '\u{9b}']),
                "{backend} {name}: {text:?}"
            );
        }
        assert!(
            run.stdout.contains("\\x1b[2J") || run.stdout.contains("\\u001b[2J"),
            "{backend}: the escape shown, not acted on: {}",
            run.stdout
        );
        assert!(
            !run.stdout.lines().any(|l| l.starts_with("FAKE LINE")),
            "{backend}: a server's line break starts no line of ours: {}",
            run.stdout
        );
    }
}

#[test]
fn credentials_in_urls_and_a_malformed_extra_body_are_never_echoed() {
    const SECRET: &str = "sk-live-SECRET-31337";
    let cases: Vec<Vec<String>> = vec![
        vec![
            "--base-url".into(),
            format!("http://user:{SECRET}@127.0.0.1:1/v1"),
        ],
        vec!["--base-url".into(), format!("user:{SECRET}@127.0.0.1:1")],
        vec![
            "--server-metrics-url".into(),
            format!("http://127.0.0.1:9400/metrics?api_key={SECRET}"),
        ],
        vec![
            "--extra-body".into(),
            format!("{{\"api_key\": \"{SECRET}\""),
        ],
        vec!["--extra-body".into(), format!("[\"{SECRET}\"]")],
    ];
    for case in &cases {
        let argv: Vec<&str> = ["--model", "m", "--num-prompts", "2"]
            .into_iter()
            .chain(case.iter().map(String::as_str))
            .collect();
        let run = run_in_process(&argv);
        assert_eq!(run.code, 2, "{case:?}: {}", run.stderr);
        for text in [&run.stdout, &run.stderr] {
            assert!(!text.contains(SECRET), "{case:?}: {text}");
        }
        assert!(run.stderr.contains(&case[0]), "{case:?}: {}", run.stderr);
    }
}

#[test]
fn header_content_length_is_refused_and_host_is_sent_once_as_given() {
    for framing in ["Content-Length=5", "Transfer-Encoding: chunked"] {
        let e = refused(&["--header", framing]);
        assert!(e.contains("frames every request body itself"), "{e}");
    }
    const OK: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
        Connection: close\r\n\r\n\
        data: {\"choices\":[{\"text\":\"hi\"}]}\n\ndata: [DONE]\n\n";
    let server = scripted(OK);
    let dir = TempDir::new("host-header");
    let m: Vec<String> = mock()
        .into_iter()
        .filter(|a| a != "--mock-server")
        .collect();
    let a = args(
        &m,
        &[
            "--base-url",
            &server.url,
            "--backend",
            "openai",
            "--num-prompts",
            "2",
            "--random-input-len",
            "8",
            "--random-output-len",
            "1",
            "--no-server-metrics",
            "--header",
            "Host: api.example.com",
        ],
    );
    let run = under_limits(2048, None, &a, &dir);
    let heads = server.heads.lock().unwrap().clone();
    let posts: Vec<&String> = heads.iter().filter(|h| h.starts_with("POST")).collect();
    assert!(!posts.is_empty(), "{}\n{}", run.stdout, run.stderr);
    for head in posts {
        let hosts: Vec<&str> = head
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
            .collect();
        assert_eq!(hosts, ["Host: api.example.com"], "{head}");
    }
}
