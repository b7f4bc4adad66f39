//! A [`RunResult`] printed and saved: the console block and the result document, the one
//! place either is assembled, for a live run and merged shards alike. Above the model
//! (`run_result`) and the section printers (`console`, `extras`, `steady_state`, `lora`,
//! `terminal_chart`), so none of them needs the other.

use std::borrow::Cow;

use crate::metrics::peaks::per_second;
use crate::metrics::report::TaskKind;
use crate::output::console::{render_block, render_notices, render_turn_block};
use crate::output::extras;
use crate::output::json::{append_extras, build_result, turn_metrics, Json, JsonObject};
use crate::output::lora;
use crate::output::run_result::{RunResult, Shards};
use crate::output::shard_file::KEY;
use crate::output::{steady_state_block, terminal_chart};

impl RunResult<'_> {
    /// The console block: Python's notices and block, the per-second chart when `chart`,
    /// the per-turn blocks, the adapters, the steady state, our block and later sections.
    pub fn render(&self, chart: bool) -> String {
        let mut out = render_notices(self.outputs, self.task);
        out.push_str(&render_block(&self.report));
        if self.task == TaskKind::Generation && chart {
            out.push_str(&terminal_chart::render(per_second(self.outputs).as_ref()));
        }
        for (turn, r) in self.turns.iter().flat_map(|t| &t.reports) {
            out.push_str(&render_turn_block(*turn, r));
        }
        if let Some(a) = &self.adapters {
            out.push_str(&lora::render(&a.summaries));
        }
        out.push_str(&steady_state_block::render(self.steady_state.as_ref()));
        out.push_str(&extras::render(self));
        for s in &self.sections {
            out.push_str(&s.console);
        }
        out
    }

    /// The result document: Python's keys (`json::build_result`), then ours.
    pub fn document(&self) -> Result<JsonObject<'_>, serde_json::Error> {
        let mut doc = build_result(
            &self.info,
            &self.report,
            self.outputs,
            &self.rps_events,
            self.save_detailed,
        );
        if let Some(t) = &self.turns {
            let list = t
                .reports
                .iter()
                .map(|(n, r)| Json::Object(turn_metrics(*n, r)))
                .collect();
            doc.set("per_turn_metrics", Json::List(list));
            let ids = t
                .conversations
                .iter()
                .map(|c| Json::str(c.as_str()))
                .collect();
            doc.set("vllm_bench_conversation_ids", Json::List(ids));
            doc.set("vllm_bench_turns", Json::UInts(t.numbers.as_slice().into()));
        }
        if let Some(a) = &self.adapters {
            append_extras(&mut doc, lora::to_json(&a.per_request, &a.summaries));
        }
        append_extras(&mut doc, extras::to_json(self));
        append_extras(
            &mut doc,
            steady_state_block::to_json(self.steady_state.as_ref()),
        );
        for s in &self.sections {
            append_extras(&mut doc, s.json.clone());
        }
        match &self.shards {
            Shards::Whole => {}
            Shards::Part(section) => {
                doc.set(KEY, Json::Value(Cow::Owned(serde_json::to_value(section)?)));
            }
            Shards::Merged(m) => {
                doc.set("vllm_bench_shard_count", Json::UInt(m.parts.len() as u64));
                doc.set("vllm_bench_fingerprint", Json::str(m.fingerprint.as_str()));
                doc.set("vllm_bench_start_at", Json::opt(m.start_at, Json::Float));
                let figures: Vec<serde_json::Value> = m
                    .parts
                    .iter()
                    .map(|p| serde_json::Value::Object(p.figures.clone()))
                    .collect();
                doc.set(
                    "vllm_bench_shards",
                    Json::Value(Cow::Owned(serde_json::Value::Array(figures))),
                );
            }
        }
        Ok(doc)
    }
}
