//! `vllm-bench synthesize agentic`: writes the generator's sessions
//! (`datasets::agentic::synthesize`) as one Weka trace file each, `--output DIR/{id}.json`,
//! the layout `--dataset-name agentic_trace --dataset-path DIR` reads. A directory that
//! already holds trace files is refused rather than mixed into.

use std::path::{Path, PathBuf};

use crate::datasets::agentic::synthesize::{session, trace_id, SynthesisParams};

/// Why the corpus could not be written: one line naming the directory.
#[derive(Debug, thiserror::Error)]
#[error("--output {}: {why}", path.display())]
pub struct SynthesizeError {
    path: PathBuf,
    why: String,
}

fn fail(path: &Path, why: impl std::fmt::Display) -> SynthesizeError {
    SynthesizeError {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// Writes the corpus; returns the summary line.
pub fn run(p: &SynthesisParams, dir: &Path) -> Result<String, SynthesizeError> {
    if p.sessions == 0 {
        return Err(fail(dir, "--num-sessions 0: nothing to write"));
    }
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    let taken = std::fs::read_dir(dir)
        .map_err(|e| fail(dir, e))?
        .filter_map(|e| e.ok())
        .any(|e| e.path().extension().is_some_and(|x| x == "json"));
    if taken {
        return Err(fail(
            dir,
            "already holds *.json trace files; write to an empty or new directory",
        ));
    }
    let (mut requests, mut subagents) = (0usize, 0usize);
    for i in 0..p.sessions {
        let trace = session(p, i);
        for e in trace["requests"].as_array().into_iter().flatten() {
            match e["requests"].as_array() {
                Some(inner) => {
                    subagents += 1;
                    requests += inner.len();
                }
                None => requests += 1,
            }
        }
        let file = dir.join(format!("{}.json", trace_id(p.seed, i)));
        std::fs::write(&file, format!("{trace}\n")).map_err(|e| fail(&file, e))?;
    }
    Ok(format!(
        "Wrote {} sessions ({requests} requests, {subagents} subagents; seed {}) to {}",
        p.sessions,
        p.seed,
        dir.display()
    ))
}
