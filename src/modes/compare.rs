//! `--compare A.json B.json [...]`: read saved results (ours or Python's) and print them side
//! by side with each one's change from the first. No server, no dataset, no engine.

use std::path::PathBuf;

use crate::output::compare::{render, workload_warnings};
use crate::output::result_file::{load, ResultFileError};
use crate::output::stdio::Console;

/// Why a comparison could not be printed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A file that is not a result (bad input: exit 2).
    #[error(transparent)]
    File(#[from] ResultFileError),
}

/// Reads every file (the first one that is not a result stops it) and prints the table.
pub fn run(paths: &[PathBuf], console: &Console) -> Result<(), CompareError> {
    let results = paths
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    for w in workload_warnings(&results) {
        console.warning(w);
    }
    console.out(render(&results));
    Ok(())
}
