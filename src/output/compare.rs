//! The `--compare` table: the results side by side, each candidate's change from the
//! baseline (the first file), and which way is better.
//!
//! ```text
//! A (baseline): base.json
//!     backend vllm, model_id m, num_prompts 200, request_rate inf, max_concurrency 16, ...
//! B: new.json
//!     ...
//!
//! Metric               Better       A       B     B-A  B vs A
//! request_throughput   higher   75.41   38.28  -37.14 -49.25%  worse
//! completed            higher     200     150     -50 -25.00%  worse
//! ```
//!
//! Numbers are shown as in Python's console block: integers as they are, floats with two
//! decimals (deltas with a sign); `-` where a file has no value. The deltas behind the text
//! are exact (`metrics::comparison`); only the printing rounds.
//!
//! Every string from a file (its path, its facts such as a server-supplied `model_id`, its
//! keys) is printed through [`escape`]: a control character shows as an escape instead
//! of acting on the terminal.

use std::fmt::Write as _;

use super::result_file::SavedResult;
use crate::metrics::comparison::{rows, Change, ComparedMetric, Num};
use crate::safe_text::escape;

/// Column letters: A is the baseline.
fn letter(i: usize) -> String {
    let l = (b'A' + (i % 26) as u8) as char;
    match i / 26 {
        0 => l.to_string(),
        n => format!("{l}{n}"),
    }
}

/// Figures only some runs have: left out when no file has them above zero (`rtfx` of runs
/// without audio is Python's `0.0`, no figure).
const ONLY_WHEN_MEASURED: [&str; 1] = ["rtfx"];

/// How far a candidate's input tokens per request may differ from the baseline's (a share)
/// before the two are said to be different workloads: one dataset and lengths give equal
/// counts, a resampled file a few percent.
const INPUT_DIFFERENCE: f64 = 0.25;

/// The comparison of `results` (`results[0]` is the baseline) as text.
pub fn render(results: &[SavedResult]) -> String {
    let metrics: Vec<&[(String, Option<Num>)]> =
        results.iter().map(|r| r.metrics.as_slice()).collect();
    let mut rows = rows(&metrics);
    rows.retain(|r| {
        !ONLY_WHEN_MEASURED.contains(&r.key.as_str())
            || r.values.iter().flatten().any(|v| v.as_f64() > 0.0)
    });
    let mut out = String::new();
    legend(&mut out, results);
    out.push('\n');
    table(&mut out, results.len(), &rows);
    out
}

/// One line per candidate that ran a different workload than the baseline: another
/// `num_prompts`, or input tokens per completed request more than [`INPUT_DIFFERENCE`]
/// apart. Its figures then differ by the workload, whatever else changed.
pub fn workload_warnings(results: &[SavedResult]) -> Vec<String> {
    let Some((base, candidates)) = results.split_first() else {
        return Vec::new();
    };
    let fact = |r: &SavedResult, k: &str| {
        r.facts
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let metric = |r: &SavedResult, k: &str| {
        r.metrics
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.map(Num::as_f64))
    };
    let input_per_request = |r: &SavedResult| {
        let (tokens, done) = (metric(r, "total_input_tokens")?, metric(r, "completed")?);
        (done > 0.0).then(|| tokens / done)
    };
    let mut out = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let mut evidence = Vec::new();
        if let (Some(a), Some(b)) = (fact(base, "num_prompts"), fact(c, "num_prompts")) {
            if a != b {
                evidence.push(format!("num_prompts {} vs {}", escape(&b), escape(&a)));
            }
        }
        if let (Some(a), Some(b)) = (input_per_request(base), input_per_request(c)) {
            if a > 0.0 && ((b - a) / a).abs() > INPUT_DIFFERENCE {
                evidence.push(format!(
                    "input tokens per request {b:.0} vs {a:.0} ({:+.0} %)",
                    (b - a) / a * 100.0
                ));
            }
        }
        if !evidence.is_empty() {
            out.push(format!(
                "{} ran a different workload than {} (the baseline): {}; its figures differ \
                 by the workload, not only by what changed; compare runs of one workload (the \
                 same dataset, lengths and --num-prompts)",
                letter(i + 1),
                letter(0),
                evidence.join(", ")
            ));
        }
    }
    out
}

/// Which file each letter is, with its run facts.
fn legend(out: &mut String, results: &[SavedResult]) {
    for (i, r) in results.iter().enumerate() {
        let name = if i == 0 {
            format!("{} (baseline)", letter(0))
        } else {
            letter(i)
        };
        let path = r.path.to_string_lossy();
        let _ = writeln!(out, "{name}: {}", escape(&path));
        if !r.facts.is_empty() {
            let facts: Vec<String> = r
                .facts
                .iter()
                .map(|(k, v)| format!("{} {}", escape(k), escape(v)))
                .collect();
            let _ = writeln!(out, "    {}", facts.join(", "));
        }
    }
}

/// The cells of one line: metric, direction, then per result its value and, for candidates,
/// delta, % change and verdict.
fn cells(n: usize, row: &ComparedMetric) -> Vec<String> {
    let mut c = vec![
        escape(&row.key).into_owned(),
        row.direction.word().to_string(),
    ];
    for i in 0..n {
        c.push(row.values[i].map_or_else(|| "-".to_string(), value));
        if i > 0 {
            match row.changes[i - 1] {
                Some(ch) => {
                    c.push(delta(ch.delta));
                    c.push(percent(&ch));
                    c.push(ch.verdict.word().to_string());
                }
                None => c.extend(["-".to_string(), "-".to_string(), String::new()]),
            }
        }
    }
    c
}

fn header(n: usize) -> Vec<String> {
    let mut h = vec!["Metric".to_string(), "Better".to_string()];
    for i in 0..n {
        h.push(letter(i));
        if i > 0 {
            h.push(format!("{}-{}", letter(i), letter(0)));
            h.push(format!("{} vs {}", letter(i), letter(0)));
            h.push(String::new());
        }
    }
    h
}

/// Left-aligned name and direction, right-aligned numbers, a left-aligned verdict; columns
/// as wide as their widest cell, two spaces apart.
fn table(out: &mut String, n: usize, rows: &[ComparedMetric]) {
    let lines: Vec<Vec<String>> = std::iter::once(header(n))
        .chain(rows.iter().map(|r| cells(n, r)))
        .collect();
    let columns = lines[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            if c > 0 {
                text.push_str("  ");
            }
            let w = widths[c];
            let verdict = c >= 3 && (c - 3) % 4 == 3;
            if c < 2 || verdict {
                let _ = write!(text, "{cell:<w$}");
            } else {
                let _ = write!(text, "{cell:>w$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
}

fn value(v: Num) -> String {
    match v {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f:.2}"),
    }
}

fn delta(d: Num) -> String {
    match d {
        Num::Int(i) => format!("{i:+}"),
        Num::Float(f) => format!("{f:+.2}"),
    }
}

fn percent(c: &Change) -> String {
    c.percent
        .map_or_else(|| "n/a".to_string(), |p| format!("{p:+.2}%"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn result(path: &str, metrics: &[(&str, Option<Num>)]) -> SavedResult {
        SavedResult {
            path: PathBuf::from(path),
            facts: vec![("backend".into(), "vllm".into())],
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn two_results_side_by_side() {
        let a = result(
            "base.json",
            &[
                ("completed", Some(Num::Int(200))),
                ("request_throughput", Some(Num::Float(80.0))),
                ("mean_ttft_ms", Some(Num::Float(25.0))),
                ("total_input_tokens", Some(Num::Int(100))),
                ("request_goodput", None),
            ],
        );
        let b = result(
            "new.json",
            &[
                ("completed", Some(Num::Int(200))),
                ("request_throughput", Some(Num::Float(100.0))),
                ("mean_ttft_ms", Some(Num::Float(30.0))),
                ("total_input_tokens", Some(Num::Int(90))),
                ("request_goodput", Some(Num::Float(1.0))),
            ],
        );
        let text = render(&[a, b]);
        let expected = "\
A (baseline): base.json
    backend vllm
B: new.json
    backend vllm

Metric              Better      A       B     B-A   B vs A
completed           higher    200     200      +0   +0.00%  same
request_throughput  higher  80.00  100.00  +20.00  +25.00%  better
mean_ttft_ms        lower   25.00   30.00   +5.00  +20.00%  worse
total_input_tokens            100      90     -10  -10.00%
request_goodput     higher      -    1.00       -        -
";
        assert_eq!(text, expected);
    }

    #[test]
    fn compare_of_different_workloads_warns_and_shows_no_rtfx_without_audio() {
        let run = |path: &str, prompts: &str, done: i64, input: i64| {
            let mut r = result(
                path,
                &[
                    ("completed", Some(Num::Int(done))),
                    ("total_input_tokens", Some(Num::Int(input))),
                    ("rtfx", Some(Num::Float(0.0))),
                ],
            );
            r.facts.push(("num_prompts".into(), prompts.into()));
            r
        };
        // 200 prompts of 128 tokens against 100 of 1711 (+1237 %).
        let a = run("a.json", "200", 200, 25_600);
        let b = run("b.json", "100", 100, 171_100);
        let warnings = workload_warnings(&[a.clone(), b]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "B ran a different workload than A (the baseline): num_prompts 100 vs 200, \
                 input tokens per request 1711 vs 128 (+1237 %)"
            ),
            "{warnings:?}"
        );
        // One workload, measured twice: nothing to say.
        let same = run("c.json", "200", 198, 25_344);
        assert!(workload_warnings(&[a.clone(), same.clone()]).is_empty());
        let text = render(&[a.clone(), same]);
        assert!(!text.contains("rtfx"), "no audio, no rtfx row:\n{text}");
        // A run with audio keeps its row.
        let mut audio = a.clone();
        audio.metrics[2].1 = Some(Num::Float(12.5));
        assert!(render(&[a, audio]).contains("\nrtfx "));
    }

    #[test]
    fn each_candidate_gets_its_own_columns() {
        let r = |p: &str, v: f64| result(p, &[("mean_tpot_ms", Some(Num::Float(v)))]);
        let text = render(&[r("a", 2.0), r("b", 1.0), r("c", 0.0)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[lines.len() - 2],
            "Metric        Better     A     B    B-A   B vs A             C    C-A    C vs A"
        );
        assert_eq!(
            lines[lines.len() - 1],
            "mean_tpot_ms  lower   2.00  1.00  -1.00  -50.00%  better  0.00  -2.00  -100.00%  better"
        );
        assert_eq!(letter(26), "A1");
    }

    #[test]
    fn the_table_escapes_control_characters_in_every_file_string() {
        let mut a = result("a\x1b[1A.json", &[("mean_ttft_ms", Some(Num::Float(2.0)))]);
        a.facts = vec![
            ("model_id".into(), "evil\x1b[2J\x1b]0;pwned\x07model".into()),
            ("label".into(), "x\u{9b}31m".into()),
        ];
        let b = result("b.json", &[("mean_ttft_ms\x1b[8m", Some(Num::Float(1.0)))]);
        let text = render(&[a, b]);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "a control character reached the terminal: {text:?}"
        );
        assert!(text.contains("A (baseline): a\\x1b[1A.json\n"), "{text}");
        assert!(
            text.contains("model_id evil\\x1b[2J\\x1b]0;pwned\\x07model, label x\\x9b31m"),
            "{text}"
        );
        assert!(text.contains("mean_ttft_ms\\x1b[8m"), "{text}");
    }
}
