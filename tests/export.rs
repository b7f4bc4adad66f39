//! `--export-requests FILE`: every format read back (Parquet with the parquet crate and with
//! pyarrow, which `.ci/run` installs; CSV and JSON lines by hand) has one row per planned
//! request, and its values are the result's per-request lists (`--save-detailed`); a merge
//! exports the union of its shards; a bad target or format is refused before anything is
//! sent.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::e2e::mock;
use crate::util::{mock_random_args, run_in_process, vllm_bench, TempDir};

/// One cell as read back: null, a number or text.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

impl Cell {
    fn f(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            _ => None,
        }
    }
    fn i(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => Some(*v),
            _ => None,
        }
    }
    fn s(&self) -> Option<&str> {
        match self {
            Cell::Text(t) => Some(t),
            _ => None,
        }
    }
}

type Table = Vec<BTreeMap<String, Cell>>;

fn read_parquet(path: &Path) -> Table {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(name, field)| {
                    let cell = match field {
                        Field::Null => Cell::Null,
                        Field::Long(v) => Cell::Int(*v),
                        Field::Double(v) => Cell::Float(*v),
                        Field::Str(s) => Cell::Text(s.clone()),
                        other => panic!("{name}: unexpected {other:?}"),
                    };
                    (name.clone(), cell)
                })
                .collect()
        })
        .collect()
}

fn read_jsonl(path: &Path) -> Table {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let Value::Object(map) = serde_json::from_str(line).unwrap() else {
                panic!("a JSON object per line: {line}")
            };
            map.into_iter()
                .map(|(k, v)| {
                    let cell = match v {
                        Value::Null => Cell::Null,
                        Value::Number(n) if n.is_i64() => Cell::Int(n.as_i64().unwrap()),
                        Value::Number(n) => Cell::Float(n.as_f64().unwrap()),
                        Value::String(s) => Cell::Text(s),
                        other => panic!("{k}: unexpected {other}"),
                    };
                    (k, cell)
                })
                .collect()
        })
        .collect()
}

/// RFC 4180 fields of one CSV text (quoted fields may hold commas, quotes and newlines).
fn csv_records(text: &str) -> Vec<Vec<(String, bool)>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut in_quotes, mut chars) = (false, false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (in_quotes, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => in_quotes = false,
            (true, c) => field.push(c),
            (false, '"') => (in_quotes, quoted) = (true, true),
            (false, ',') => record.push((std::mem::take(&mut field), std::mem::take(&mut quoted))),
            (false, '\n') => {
                record.push((std::mem::take(&mut field), std::mem::take(&mut quoted)));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    records
}

fn read_csv(path: &Path) -> Table {
    let records = csv_records(&std::fs::read_to_string(path).unwrap());
    let header: Vec<String> = records[0].iter().map(|(f, _)| f.clone()).collect();
    records[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.len(), header.len(), "{r:?}");
            header
                .iter()
                .zip(r)
                .map(|(name, (f, quoted))| {
                    let cell = if f.is_empty() && !quoted {
                        Cell::Null
                    } else if *quoted {
                        Cell::Text(f.clone())
                    } else if let Ok(v) = f.parse::<i64>() {
                        Cell::Int(v)
                    } else if let Ok(v) = f.parse::<f64>() {
                        Cell::Float(v)
                    } else {
                        Cell::Text(f.clone())
                    };
                    (name.clone(), cell)
                })
                .collect()
        })
        .collect()
}

fn read_table(path: &Path) -> Table {
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => read_parquet(path),
        Some("csv") => read_csv(path),
        Some("jsonl") => read_jsonl(path),
        other => panic!("{other:?}"),
    }
}

/// The result's per-request lists (`--save-detailed`) against the table's columns.
fn assert_rows_are_the_result(table: &Table, doc: &Value, planned: usize) {
    assert_eq!(table.len(), planned, "one row per planned request");
    let list = |k: &str| doc[k].as_array().unwrap_or_else(|| panic!("{k}")).clone();
    let (ttfts, latencies, itls) = (list("ttfts"), list("latencies"), list("itls"));
    let (input, output, queue) = (list("input_lens"), list("output_lens"), list("queue_times"));
    let (starts, errors) = (list("start_times"), list("errors"));
    assert_eq!(ttfts.len(), planned);
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-9, "{what}: {a} vs {b}");
    let mut failed = 0;
    for (i, row) in table.iter().enumerate() {
        assert_eq!(row["id"].i(), Some(i as i64), "ids in the run's order");
        let outcome = row["outcome"].s().unwrap();
        let ok = errors[i].as_str() == Some("");
        assert_eq!(outcome, if ok { "completed" } else { "failed" });
        assert_eq!(row["prompt_tokens"].i(), input[i].as_i64());
        assert_eq!(row["output_tokens"].i(), output[i].as_i64());
        close(
            row["client_queue_s"].f().unwrap(),
            queue[i].as_f64().unwrap(),
            "queue",
        );
        let gaps: Vec<f64> = itls[i]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(row["itl_count"].i(), Some(gaps.len() as i64));
        if let Some(max) = gaps.iter().copied().reduce(f64::max) {
            close(row["itl_max_s"].f().unwrap(), max, "itl max");
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            close(row["itl_mean_s"].f().unwrap(), mean, "itl mean");
        }
        // Sends are ns on the wall clock, starts seconds on the run's: equal spacing.
        let sent = row["sent_ns"].i().unwrap();
        let first_sent = table[0]["sent_ns"].i().unwrap();
        let spacing = starts[i].as_f64().unwrap() - starts[0].as_f64().unwrap();
        assert!(
            ((sent - first_sent) as f64 / 1e9 - spacing).abs() < 2e-6,
            "send {i}"
        );
        let scheduled = row["scheduled_ns"].i().unwrap();
        assert!((sent - scheduled - (queue[i].as_f64().unwrap() * 1e9).round() as i64).abs() <= 1);
        if ok {
            close(
                row["ttft_s"].f().unwrap(),
                ttfts[i].as_f64().unwrap(),
                "ttft",
            );
            close(
                row["e2el_s"].f().unwrap(),
                latencies[i].as_f64().unwrap(),
                "e2el",
            );
            let ttft_ns = row["first_token_ns"].i().unwrap() - sent;
            assert!((ttft_ns as f64 / 1e9 - ttfts[i].as_f64().unwrap()).abs() < 2e-9);
            // The last byte came with or after the last token (E2EL's end).
            let end_ns = row["end_ns"].i().unwrap() - sent;
            assert!(
                end_ns as f64 / 1e9 >= latencies[i].as_f64().unwrap() - 2e-6,
                "end {i}"
            );
            let n = output[i].as_i64().unwrap();
            if n > 1 {
                let tpot =
                    (latencies[i].as_f64().unwrap() - ttfts[i].as_f64().unwrap()) / (n - 1) as f64;
                close(row["tpot_s"].f().unwrap(), tpot, "tpot");
            }
            assert_eq!(row["failure_reason"], Cell::Null);
        } else {
            failed += 1;
            assert_eq!(row["failure_reason"].s(), errors[i].as_str());
            assert_eq!(row["ttft_s"], Cell::Null, "no TTFT for a failed request");
        }
        assert_eq!(row["tree"], Cell::Null, "not agentic");
        assert_eq!(row["conversation"], Cell::Null, "not multi-turn");
        assert_eq!(row["replica"], Cell::Null, "one server");
    }
    assert_eq!(failed, doc["failed"].as_i64().unwrap(), "failed rows");
}

fn run_with_export(url: &str, dir: &TempDir, file: &str, extra: &[&str]) -> Value {
    let base = mock_random_args(url);
    let target = dir.path().join(file).display().to_string();
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--num-prompts",
        "40",
        "--request-rate",
        "400",
        "--seed",
        "5",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
        "--export-requests",
        &target,
    ]);
    args.extend(extra);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains(&format!("Exported 40 requests to {target}")),
        "{}",
        run.stderr
    );
    crate::shards::read_json(&dir.path().join("r.json"))
}

#[test]
fn every_format_reads_back_as_the_results_per_request_lists() {
    // Some requests fail (HTTP 500, whose reason phrase has a space), so failed rows and
    // their reasons are read back too.
    let server = mock(|c| {
        c.faults.error_500 = 0.2;
        c.jitter = std::time::Duration::from_millis(2);
    });
    for file in ["r.parquet", "r.csv", "r.jsonl"] {
        let dir = TempDir::new(&format!("export-{file}"));
        let doc = run_with_export(&server.base_url(), &dir, file, &[]);
        assert!(doc["failed"].as_i64().unwrap() > 0, "the mock failed some");
        let table = read_table(&dir.path().join(file));
        assert_rows_are_the_result(&table, &doc, 40);
        let columns: Vec<&String> = table[0].keys().collect();
        assert_eq!(columns.len(), 24, "{file}: {columns:?}");
        pyarrow_agrees(&dir.path().join(file), 40);
    }
}

/// pyarrow reads the Parquet file too: a second, independent reader (`.ci/run` installs it;
/// elsewhere a `SKIP:` line without it, through `util::skip_or_fail`).
fn pyarrow_agrees(path: &Path, rows: usize) {
    if path.extension().and_then(|e| e.to_str()) != Some("parquet") {
        return;
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, pyarrow.parquet as pq; print(pq.read_table(sys.argv[1]).num_rows)",
        ])
        .arg(path)
        .output();
    let what = "pyarrow (the second Parquet reader)";
    let o = match out {
        Ok(o) => o,
        Err(e) => return crate::util::skip_or_fail(what, &format!("cannot run python3: {e}")),
    };
    let stderr = String::from_utf8_lossy(&o.stderr);
    if stderr.contains("No module named 'pyarrow'") {
        return crate::util::skip_or_fail(what, "python3 has no pyarrow (pip install pyarrow)");
    }
    // Installed: it must read the file, and find every row.
    assert!(
        o.status.success(),
        "pyarrow could not read the file:\n{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), rows.to_string());
}

#[test]
fn a_bad_format_or_target_is_refused_before_anything_is_sent() {
    let dir = TempDir::new("export-refused");
    let server = mock(|_| {});
    let base = mock_random_args(&server.base_url());
    let at = |file: &str| dir.path().join(file).display().to_string();
    for (file, says) in [
        (at("r.json"), format!("--export-requests {}: the format is taken from the extension: use .parquet, .csv or .jsonl", at("r.json"))),
        (at("missing/r.csv"), format!("--export-requests {}: {} is not a directory", at("missing/r.csv"), at("missing"))),
        (dir.arg().to_string(), format!("--export-requests {}: the format is taken from the extension", dir.arg())),
    ] {
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        args.extend(["--num-prompts", "3", "--disable-tqdm", "--export-requests", &file]);
        let run = run_in_process(&args);
        assert_eq!(run.code, 2, "{file}: {}", run.stderr);
        assert!(run.stderr.contains(&says), "{file}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "one line: {}", run.stderr);
    }
    std::fs::create_dir(dir.path().join("d.csv")).unwrap();
    let d_csv = at("d.csv");
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--num-prompts",
        "3",
        "--disable-tqdm",
        "--export-requests",
        &d_csv,
    ]);
    let run = run_in_process(&args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    assert!(server.request_log().is_empty(), "nothing was sent");
}

#[test]
fn a_merge_exports_the_union_of_its_shards() {
    let dir = TempDir::new("export-merge");
    let server = mock(|_| {});
    let base = mock_random_args(&server.base_url());
    crate::shards::at_one_start(2, |k, start_at| {
        let mut args: Vec<String> = base.clone();
        for a in [
            "--num-prompts",
            "20",
            "--request-rate",
            "200",
            "--seed",
            "3",
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
            "--shard",
            &format!("{k}/2"),
            "--start-at",
            start_at,
            "--result-filename",
            &format!("s{k}.json"),
            "--export-requests",
            &format!("s{k}.csv"),
        ] {
            args.push(a.to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        vllm_bench(&args, dir.path())
    });
    let at = |file: &str| dir.path().join(file).display().to_string();
    let run = run_in_process(&[
        "merge",
        &at("s0.json"),
        &at("s1.json"),
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "m.json",
        "--export-requests",
        &at("m.parquet"),
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let merged = read_table(&dir.path().join("m.parquet"));
    let doc = crate::shards::read_json(&dir.path().join("m.json"));
    assert_rows_are_the_result(&merged, &doc, 20);
    // Each shard's own export holds its own requests; the merged one says whose each is.
    for k in 0..2i64 {
        let own = read_table(&dir.path().join(format!("s{k}.csv")));
        let ids: Vec<i64> = own.iter().map(|r| r["id"].i().unwrap()).collect();
        let in_merge: Vec<i64> = merged
            .iter()
            .filter(|r| r["shard"].i() == Some(k))
            .map(|r| r["id"].i().unwrap())
            .collect();
        assert_eq!(ids, in_merge, "shard {k}");
        assert!(!ids.is_empty());
        // The same send instants on the wall clock (a shard that started late counts its
        // times from its own start: the merge adds its lateness, saved in ms, back).
        for r in &own {
            let m = &merged[r["id"].i().unwrap() as usize];
            let (a, b) = (r["sent_ns"].i().unwrap(), m["sent_ns"].i().unwrap());
            assert!((a - b).abs() <= 1_000, "shard {k}: {a} vs {b}");
        }
    }
    // A merge checks its export's target before reading anything.
    let run = run_in_process(&[
        "merge",
        &at("s0.json"),
        &at("s1.json"),
        "--export-requests",
        &at("m.txt"),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(".parquet, .csv or .jsonl"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_schema_is_documented_column_by_column() {
    use vllm_bench::output::request_export::{Kind, COLUMNS};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/export.md")).unwrap();
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(
        rows.len(),
        COLUMNS.len(),
        "one table row per column, no more"
    );
    for (row, c) in rows.iter().zip(&COLUMNS) {
        let kind = match c.kind {
            Kind::Int => "int64",
            Kind::Float => "double",
            Kind::Text => "string",
        };
        let null = if c.nullable { "yes" } else { "no" };
        let expected = format!("| `{}` | {kind} | {null} | {} |", c.name, c.doc);
        assert_eq!(*row, expected, "docs/export.md, in the schema's order");
    }
}
