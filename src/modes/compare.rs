//! `--compare A.json B.json [...]`: read saved results (ours or Python's) and print them side
//! by side with each one's change from the first. No server, no dataset, no engine.

use std::io::Write as _;
use std::path::PathBuf;

use crate::output::compare::render;
use crate::output::result_file::{load, ResultFileError};

/// Why a comparison could not be printed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A file that is not a result (bad input: exit 2).
    #[error(transparent)]
    File(#[from] ResultFileError),
    /// stdout failed (other than a closed pipe, which is not an error).
    #[error("cannot write the comparison: {0}")]
    Write(std::io::Error),
}

/// Reads every file (the first one that is not a result stops it) and prints the table.
pub fn run(paths: &[PathBuf]) -> Result<(), CompareError> {
    let results = paths
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let text = render(&results);
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CompareError::Write(e)),
        _ => Ok(()),
    }
}
