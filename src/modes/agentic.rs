//! `--dataset-name agentic_trace`: the Weka traces of `--dataset-path` read, checked and turned
//! into trees of streams with every turn's prompt layout, before anything is sent. A bad file
//! stops the run here with one line naming the file, the trace and the field.
//!
//! This is the data side of AIPerf's `AGENTIC_REPLAY` (SPEC §1.1, §2), described by
//! `--dry-run`; the replay's timing on the engine's cores is `super::agentic_replay`.

use std::path::Path;

use anyhow::Result;

use crate::config::Config;
use crate::datasets::agentic::dag::DagFile;
use crate::datasets::agentic::{self, layouts, StreamKind, Tree};
use crate::datasets::DatasetError;

/// AIPerf replays every corpus with 64-token blocks whatever a trace declares (SPEC §1.1).
pub const BLOCK_SIZE: u32 = 64;

/// The loaded corpus: one tree per trace, in file order (the lanes' sampling order); or a
/// `dag_jsonl` file's trees of literal messages (then `trees` is empty).
pub struct AgenticReplay {
    pub trees: Vec<Tree>,
    pub dag: Option<DagFile>,
}

impl AgenticReplay {
    /// Reads `--dataset-path` and derives every trace's tree; each stream's prompt layouts
    /// are built once here so that a trace whose prompts cannot be built is refused now.
    pub fn load(config: &Config) -> Result<AgenticReplay> {
        let path = config.dataset.path.as_deref().unwrap_or_default();
        Ok(AgenticReplay::from_path(Path::new(path))?)
    }

    /// [`AgenticReplay::load`] from a path.
    pub fn from_path(path: &Path) -> Result<AgenticReplay, DatasetError> {
        let corpus = agentic::read(path)?;
        if corpus.dag.is_some() {
            return Ok(AgenticReplay {
                trees: Vec::new(),
                dag: corpus.dag,
            });
        }
        let mut trees = Vec::with_capacity(corpus.traces.len());
        for (file, trace) in &corpus.traces {
            let mut tree = agentic::derive(trace);
            tree.start = corpus.start;
            for s in &tree.streams {
                layouts(s, BLOCK_SIZE).map_err(|e| DatasetError::file(file, e))?;
            }
            trees.push(tree);
        }
        Ok(AgenticReplay { trees, dag: None })
    }

    /// The `--dry-run` summary: trees, streams and requests by kind, branches, barriers.
    pub fn describe(&self) -> String {
        if let Some(dag) = &self.dag {
            return describe_dag(dag);
        }
        let mut streams = [0usize; StreamKind::ALL.len()];
        let mut requests = [0usize; StreamKind::ALL.len()];
        let (mut joined, mut background, mut barriers, mut prompt_tokens) = (0, 0, 0, 0u64);
        let (mut hits, mut blocks) = (0u64, 0u64);
        for t in &self.trees {
            let (h, b) = t.ideal_block_hits();
            hits += h;
            blocks += b;
            for s in &t.streams {
                let k = StreamKind::ALL
                    .iter()
                    .position(|&x| x == s.kind)
                    .unwrap_or(0);
                streams[k] += 1;
                requests[k] += s.turns.len();
                barriers += s.barriers.iter().filter(|b| !b.is_empty()).count();
                prompt_tokens += s.turns.iter().map(|r| r.input).sum::<u64>();
            }
            for b in &t.branches {
                match b.join_turn {
                    Some(_) => joined += 1,
                    None => background += 1,
                }
            }
        }
        let by_kind = |counts: &[usize]| by_kind(&StreamKind::ALL, counts);
        format!(
            "Agentic traces: {} trees\nStreams: {} ({})\nRequests: {} ({})\n\
             Branches: {joined} joined, {background} background\n\
             Turns behind a barrier: {barriers}\nPrompt tokens (recorded): {prompt_tokens}\n\
             Ideal prefix-cache block hits: {hits} of {blocks} ({:.1}%)",
            self.trees.len(),
            streams.iter().sum::<usize>(),
            by_kind(&streams),
            requests.iter().sum::<usize>(),
            by_kind(&requests),
            100.0 * hits as f64 / blocks.max(1) as f64,
        )
    }
}

/// `root 3, subagent 2, ...`: each kind's count.
fn by_kind(kinds: &[StreamKind], counts: &[usize]) -> String {
    kinds
        .iter()
        .zip(counts)
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `dag_jsonl` file's `--dry-run` summary: sessions, trees, streams and requests by kind,
/// links.
fn describe_dag(dag: &DagFile) -> String {
    let kinds = [StreamKind::Root, StreamKind::Spawned, StreamKind::Forked];
    let (mut streams, mut requests) = ([0usize; 3], [0usize; 3]);
    let (mut joined, mut background, mut forks) = (0, 0, 0);
    for t in &dag.trees {
        for s in &t.streams {
            let k = kinds.iter().position(|&x| x == s.kind).unwrap_or(0);
            streams[k] += 1;
            requests[k] += dag.sessions[s.session as usize].turns.len();
        }
        for l in &t.links {
            match (l.fork, l.join) {
                (true, _) => forks += l.children.len(),
                (false, Some(_)) => joined += l.children.len(),
                (false, None) => background += l.children.len(),
            }
        }
    }
    let by_kind = |counts: &[usize]| by_kind(&kinds, counts);
    format!(
        "dag_jsonl sessions: {}, roots (a tree each): {}\nStreams: {} ({})\n\
         Requests: {} ({})\nChildren: {joined} spawned and joined, {background} spawned in the \
         background, {forks} forked",
        dag.sessions.len(),
        dag.trees.len(),
        streams.iter().sum::<usize>(),
        by_kind(&streams),
        requests.iter().sum::<usize>(),
        by_kind(&requests),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces")
    }

    #[test]
    fn the_sample_directory_describes_its_trees() {
        let r = AgenticReplay::from_path(&fixtures()).unwrap();
        let ids: Vec<&str> = r.trees.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["trace-a", "trace-b", "trace-c"]);
        let d = r.describe();
        assert!(d.contains("Agentic traces: 3 trees"), "{d}");
        assert!(
            d.contains("Streams: 5 (root 3, subagent 2, aux 0, wg 0, fa 0)"),
            "{d}"
        );
        assert!(d.contains("Requests: 11 (root 8, subagent 3,"), "{d}");
        assert!(d.contains("Branches: 1 joined, 1 background"), "{d}");
        // trace-a 12/22, trace-b 4+7 of 4+7+8, trace-c 1 of 1+2+1.
        assert!(
            d.contains("Ideal prefix-cache block hits: 24 of 45 (53.3%)"),
            "{d}"
        );
    }

    #[test]
    fn the_dag_sample_describes_its_tree() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/dag/sample.jsonl");
        let r = AgenticReplay::from_path(&path).unwrap();
        assert!(r.trees.is_empty());
        assert_eq!(
            r.describe(),
            "dag_jsonl sessions: 3, roots (a tree each): 1\n\
             Streams: 3 (root 1, spawn 2, fork 0)\n\
             Requests: 5 (root 3, spawn 2, fork 0)\n\
             Children: 2 spawned and joined, 0 spawned in the background, 0 forked"
        );
    }

    #[test]
    fn a_trace_whose_prefix_cannot_be_built_names_its_file() {
        let dir = std::env::temp_dir().join(format!("agentic-prefix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = std::fs::read_to_string(fixtures().join("trace-b.json"))
            .unwrap()
            .replace("\"tool_tokens\": 96", "\"tool_tokens\": 960");
        let file = dir.join("b.json");
        std::fs::write(&file, text).unwrap();
        let e = AgenticReplay::from_path(&file).err().unwrap().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("b.json") && e.contains("tools+system prefix"),
            "{e}"
        );
    }
}
