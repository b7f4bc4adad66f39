//! The per-adapter lines a LoRA run adds after Python's block (requests, TTFT and TPOT
//! means of each `--lora-modules` adapter), and the matching result-JSON keys.

use std::fmt::Write;

use crate::output::json::{Json, JsonObject};

/// One adapter's share of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterSummary {
    pub name: String,
    /// Requests sent naming this adapter.
    pub requests: u64,
    pub completed: u64,
    pub mean_ttft_ms: f64,
    pub mean_tpot_ms: f64,
}

/// The console lines, in `--lora-modules` order (empty for no adapters).
pub fn render(adapters: &[AdapterSummary]) -> String {
    let mut out = String::new();
    if adapters.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{:-^50}", "LoRA adapters");
    for a in adapters {
        let _ = writeln!(
            out,
            "{:<40} {} requests ({} ok), mean TTFT {:.2} ms, mean TPOT {:.2} ms",
            format!("{}:", a.name),
            a.requests,
            a.completed,
            a.mean_ttft_ms,
            a.mean_tpot_ms
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
    out
}

/// `vllm_bench_lora_adapters` (the adapter of each request, in the order of Python's
/// per-request lists) and `vllm_bench_lora_summary` (per adapter, as printed).
pub fn to_json<'a>(per_request: &[String], adapters: &[AdapterSummary]) -> JsonObject<'a> {
    let mut doc = JsonObject::new();
    let names = per_request.iter().map(|n| Json::str(n.clone())).collect();
    doc.set("vllm_bench_lora_adapters", Json::List(names));
    let mut summary = JsonObject::new();
    for a in adapters {
        let mut one = JsonObject::new();
        one.set("requests", Json::UInt(a.requests));
        one.set("completed", Json::UInt(a.completed));
        one.set("mean_ttft_ms", Json::Float(a.mean_ttft_ms));
        one.set("mean_tpot_ms", Json::Float(a.mean_tpot_ms));
        summary.set(a.name.clone(), Json::Object(one));
    }
    doc.set("vllm_bench_lora_summary", Json::Object(summary));
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_adapter_after_a_rule() {
        let a = AdapterSummary {
            name: "sql".into(),
            requests: 5,
            completed: 4,
            mean_ttft_ms: 12.345,
            mean_tpot_ms: 1.0,
        };
        let text = render(std::slice::from_ref(&a));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "------------------LoRA adapters-------------------"
        );
        assert_eq!(
            lines[1],
            "sql:                                     5 requests (4 ok), mean TTFT 12.35 ms, mean TPOT 1.00 ms"
        );
        assert_eq!(render(&[]), "");
        let doc = to_json(&["sql".to_string(), "sql".to_string()], &[a]);
        let text = Json::Object(doc).to_json_string();
        assert!(
            text.contains(r#""vllm_bench_lora_adapters": ["sql", "sql"]"#),
            "{text}"
        );
        assert!(text.contains(r#""mean_ttft_ms": 12.345"#), "{text}");
    }
}
