//! One benchmark, start to finish (Python's `main` + `benchmark()`), read top-down: the
//! [`Plan`] is built once (server, model, tokenizer, dataset, every request's bytes, the
//! engine), the server is checked and warmed up, then the [`Runs`] the command line asks
//! for (one point, a sweep's points, or repetitions) are scheduled, run and reported on it.

use anyhow::Result;

use crate::config::Config;
use crate::output::result_files::check_target;
use crate::output::stdio::Console;

use super::outcome::nothing_ran;
pub use super::outcome::{NothingRan, Outcome};
use super::plan::Plan;
use super::runs::{self, Runs};
use crate::runtime::stop_handle::StopHandle;

/// The notes the flags and the environment left, before anything is built.
fn warnings(config: &Config, console: &Console) {
    for w in &config.warnings {
        console.warning(w);
    }
    if let Some(w) = crate::runtime::uring_setup_env_warning() {
        console.warning(w);
    }
}

/// `--dry-run`: the dataset built (on the server's tokenizer when the embedded mock is the
/// server) and described; nothing is sent, saved or armed.
pub fn dry_run(config: &Config, console: &Console) -> Result<Outcome> {
    warnings(config, console);
    Plan::describe(&runs::plan_config(config), console).map_err(nothing_ran)?;
    Ok(Outcome::Completed)
}

/// Runs the benchmark the configuration describes, stopped early through `stop`.
pub fn run(config: &Config, console: &Console, stop: &StopHandle) -> Result<Outcome> {
    warnings(config, console);
    if config.report.save {
        // Before anything is sent: a run whose result cannot be saved is not worth running.
        check_target(
            config.output.result_dir.as_deref(),
            config.output.result_filename.as_deref(),
            config.report.append,
        )
        .map_err(nothing_ran)?;
    }
    if let Some(export) = &config.output.export_requests {
        // Like the result file: checked before anything is sent.
        export.check_target().map_err(nothing_ran)?;
    }
    super::live_board::listen(config, console).map_err(nothing_ran)?;
    // From here, not only from the measured run: a Ctrl-C, SIGTERM or `timeout` while the
    // plan is built or the server is awaited then stops the run before it sends anything,
    // and the run still reports (every request not sent) and saves its result, instead of
    // the process dying with nothing said.
    stop.arm();
    let config = &*runs::plan_config(config);
    let mut plan = Plan::build(config, console, stop).map_err(nothing_ran)?;
    plan.ready_check(config).map_err(nothing_ran)?;
    if !stop.stop_requested() {
        plan.warm_up(config)?;
    }
    Runs::of(config, &plan.prepared).run(&mut plan, config)
}
