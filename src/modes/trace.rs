//! Timed-trace replay in a benchmark run (`--dataset-name timed_trace`): reads the trace,
//! builds every request before the clock from shared prompt fragments, gives the engine the
//! trace's arrival offsets, and measures the server's prefix cache against the trace's ideal.
//!
//! Memory: a request is `[head, body head, prompt parts…, body tail]` where the prompt
//! parts are the [`PromptBuilder`]'s shared block fragments (or, in text mode, shared decoded
//! blocks), so building all requests costs the distinct blocks plus a few pointers per block
//! use, not one copy of every prompt. The builder's reuse plan keeps its own cache from
//! holding blocks no later request needs.
//!
//! Order: requests keep the trace's file order (Python's); the engine sends request `i` at
//! its arrival offset, so an out-of-order trace delays the records after a late one (the
//! `--dry-run` summary counts them).

use std::sync::Mutex;

use anyhow::{Context, Result};
use rayon::prelude::*;

use crate::backends::{Api, BodyError, BodyOptions, BodyTemplate};
use crate::config::{Config, TimedTraceParams};
use crate::datasets::timed_trace::{
    PromptBuilder, TextPrompter, TimedTrace, TokenSpace, TraceOptions, TraceRecord, TraceStats,
};
use crate::http::request::{HeadTemplate, PreparedRequest};
use crate::output::facts::PrefixCache;
use crate::output::stdio::Console;
use crate::tokenizer::Tokenizer;

use crate::control_plane::Target;
use crate::server_metrics::exposition::Scrape;

/// A loaded trace and how its prompts are built.
pub struct TraceReplay {
    pub trace: TimedTrace,
    params: TimedTraceParams,
}

impl TraceReplay {
    /// Reads the trace (`--dataset-path`), keeping the first `--num-prompts` records of the
    /// replay window. Skipped malformed lines are reported on stderr.
    pub fn load(
        config: &Config,
        params: &TimedTraceParams,
        console: &Console,
    ) -> Result<TraceReplay> {
        let path = config
            .dataset
            .path
            .as_deref()
            .context("--dataset-path: required for --dataset-name timed_trace")?;
        let opts = TraceOptions {
            num_prompts: Some(config.dataset.num_prompts),
            max_model_len: config.dataset.max_model_len,
            ..params.read.clone()
        };
        let trace = TimedTrace::load(path, &opts)?;
        let r = &trace.report;
        if r.malformed_skipped > 0 {
            console.note(format_args!(
                "skipped {} malformed trace lines, e.g. {}",
                r.malformed_skipped,
                r.malformed_examples.first().map_or("", String::as_str)
            ));
        }
        Ok(TraceReplay {
            trace,
            params: params.clone(),
        })
    }

    fn chunk(&self) -> u32 {
        u32::try_from(self.params.chunk_hash_size).unwrap_or(u32::MAX)
    }

    /// The `--dry-run` summary (and the ideal hit ratio of the run's extras).
    pub fn stats(&self) -> TraceStats {
        TraceStats::compute(&self.trace, self.chunk())
    }

    /// Arrival offsets (s from the run start), in request order.
    pub fn arrival_offsets(&self) -> Vec<f64> {
        self.trace.arrival_offsets()
    }

    /// Every request's bytes, built in parallel before the clock: the prompt as shared
    /// token-id fragments, or with `prompt_text` as shared decoded blocks. Request ids are
    /// Python's (`--request-id-prefix` + the record's index in the file).
    /// `opts(i)` gives the body options of record `i` (its LoRA adapter's `model`).
    pub fn prepare<'o>(
        &self,
        api: Api,
        head: &HeadTemplate,
        opts: &(dyn Fn(usize) -> &'o BodyOptions + Sync),
        request_id_prefix: &str,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<PreparedRequest>> {
        let tok = crate::tokenizer::required(tokenizer, "the timed_trace dataset")?;
        let vocab = u32::try_from(tok.vocab_size()).unwrap_or(u32::MAX);
        let space = TokenSpace::new(vocab, tok.control_token_ids())?;
        let builder = PromptBuilder::new(space, self.chunk())?.with_reuse_plan(&self.trace.records);
        let text = self.params.prompt_text.then(TextPrompter::new);
        let decode_error = Mutex::new(None::<String>);
        let decode = |ids: &[u32]| -> String {
            tok.decode(ids, false).unwrap_or_else(|e| {
                let mut slot = decode_error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert_with(|| format!("{e:#}"));
                String::new()
            })
        };
        let build = |(i, rec): (usize, &TraceRecord)| -> Result<PreparedRequest, BodyError> {
            let prompt = match &text {
                Some(t) => t.text_json_parts(&builder, rec, &decode),
                None => builder.prompt_json_parts(rec),
            };
            let body = BodyTemplate::new(api, rec.output_len as usize, opts(i))?.parts(prompt);
            let id = format!("{request_id_prefix}{}", rec.index);
            Ok(head.build_parts(Some(&id), Some("application/json"), body))
        };
        let built: Result<Vec<_>, BodyError> = self
            .trace
            .records
            .par_iter()
            .enumerate()
            .map(build)
            .collect();
        let built = built?;
        if let Some(e) = decode_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            anyhow::bail!("--timed-trace-prompt-text: cannot decode a prompt block: {e}");
        }
        Ok(built)
    }

    /// The client's prompt length per request (the trace's `input_length`).
    /// With `--timed-trace-wait-parent`, the request each request must wait for (a Bailian
    /// child turn's parent, when the parent is replayed too and comes earlier).
    pub fn parents(&self) -> Option<Vec<Option<u32>>> {
        self.params.wait_parent.then(|| {
            self.trace
                .records
                .iter()
                .map(|r| r.chat.as_ref().and_then(|c| c.parent).map(|p| p as u32))
                .collect()
        })
    }

    /// Each record's `replicas::block_key`: its first prefix block, or its own index.
    pub fn prompt_keys(&self) -> Vec<u64> {
        self.trace
            .records
            .iter()
            .map(|r| super::replicas::block_key(&r.hash_ids, r.index))
            .collect()
    }

    pub fn prompt_lens(&self) -> Vec<u32> {
        self.trace.records.iter().map(|r| r.input_len).collect()
    }

    /// The output length per request (the trace's `output_length`).
    pub fn output_lens(&self) -> Vec<usize> {
        self.trace
            .records
            .iter()
            .map(|r| r.output_len as usize)
            .collect()
    }
}

/// The counters `vllm:prefix_cache_queries` and `vllm:prefix_cache_hits` of a scrape (summed
/// over label sets by the parser); `None` when the server does not export both.
pub fn prefix_cache_counters(scrape: &Scrape) -> Option<(f64, f64)> {
    Some((
        *scrape.counters.get("vllm:prefix_cache_queries")?,
        *scrape.counters.get("vllm:prefix_cache_hits")?,
    ))
}

/// The server's prefix-cache counters now; `None` when `/metrics` is missing or lacks them.
pub fn scrape_prefix_cache(target: &Target) -> Option<(f64, f64)> {
    prefix_cache_counters(&target.metrics(target.control_timeout)?)
}

/// The hit ratio between two scrapes (`None` when nothing was queried in between).
pub fn measured_hit_ratio(before: (f64, f64), after: (f64, f64)) -> Option<f64> {
    let queries = after.0 - before.0;
    (queries > 0.0).then(|| ((after.1 - before.1) / queries).clamp(0.0, 1.0))
}

/// The trace's ideal prefix-cache hit ratios and the measured one, for the extras.
pub fn prefix_cache_extras(stats: &TraceStats, measured_hit_ratio: Option<f64>) -> PrefixCache {
    PrefixCache {
        ideal_token_hit_ratio: stats.token_hit_ratio(),
        ideal_block_hit_ratio: stats.block_hit_ratio(),
        measured_hit_ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cache_counters_are_summed_over_labels() {
        use crate::server_metrics::exposition;
        let text = "# HELP vllm:prefix_cache_queries_total q\n\
                    # TYPE vllm:prefix_cache_queries_total counter\n\
                    vllm:prefix_cache_queries_total{model_name=\"a\"} 100.0\n\
                    vllm:prefix_cache_queries_total{model_name=\"b\",x=\"}\"} 50\n\
                    vllm:prefix_cache_queries_total_created 17\n\
                    vllm:prefix_cache_hits_total 30\n";
        let counters = |text| prefix_cache_counters(&exposition::parse(text).unwrap());
        assert_eq!(counters(text), Some((150.0, 30.0)));
        assert_eq!(counters("vllm:prefix_cache_hits_total 3\n"), None);
    }

    #[test]
    fn measured_ratio_is_the_difference_of_two_scrapes() {
        assert_eq!(measured_hit_ratio((100.0, 10.0), (300.0, 110.0)), Some(0.5));
        assert_eq!(measured_hit_ratio((5.0, 1.0), (5.0, 1.0)), None);
    }
}
