//! The `vllm-bench` program: parse the command line, validate it, run the mode it asks for
//! (a benchmark, or `--compare` of saved results) and turn every outcome into an exit code
//! (0 when at least one request succeeded or the comparison was printed, 1 when a run failed
//! or none of its requests succeeded, 2 bad input or nothing ran, 130 interrupted by Ctrl-C
//! or SIGTERM) with one line on stderr — never a panic.

use std::ffi::OsString;

use crate::cli;
use crate::config::{self, Config, MergeConfig, Mode};
use crate::modes;
use crate::output::stdio::Console;
use crate::runtime::stop_handle::StopHandle;

/// Runs the program on `args` (program name first) with the process's stdout and stderr,
/// stopped by Ctrl-C and SIGTERM; returns the exit code.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    run(args, &Console::stdio(), &StopHandle::on_signals())
}

/// Runs the program on `args`, writing to `console`, stopped through `stop` (the process's
/// signals, or a test's [`StopHandle::manual`]: nothing process-wide, so a whole run can go
/// through a test's own process); returns the exit code. A failed write
/// to stdout never stops the run (its result is saved first): a closed pipe (`| head`) then
/// keeps the run's exit code and says nothing, any other write error is one line and exit 1.
pub fn run(args: impl IntoIterator<Item = OsString>, console: &Console, stop: &StopHandle) -> i32 {
    let code = dispatch(args.into_iter().collect(), console, stop);
    match console.take_stdout_error() {
        None => code,
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Some(e) => {
            console.err_line(format_args!("error: cannot write to standard output: {e}"));
            if code == 0 {
                1
            } else {
                code
            }
        }
    }
}

/// The mode the command line asks for, and its exit code.
fn dispatch(args: Vec<OsString>, console: &Console, stop: &StopHandle) -> i32 {
    if let [_, flag] = args.as_slice() {
        if flag == "--version" || flag == "-V" {
            // Answered before the (large) flag table is built: start-up time is a target.
            console.line(format_args!("vllm-bench {}", env!("CARGO_PKG_VERSION")));
            return 0;
        }
    }
    let parsed = match cli::parse_invocation(args) {
        Ok(c) => c,
        Err(e) if e.is_info() => {
            console.out(&e);
            return 0;
        }
        Err(e) => {
            console.err_line(format_args!("error: {e}"));
            return i32::from(e.exit_code());
        }
    };
    let mode = match config::resolve(parsed) {
        Ok(m) => m,
        Err(e) => {
            // One line per problem (`--slo` reports every malformed term).
            for line in e.to_string().lines() {
                console.err_line(format_args!("error: {line}"));
            }
            return i32::from(e.exit_code());
        }
    };
    match mode {
        Mode::Compare { files, warnings } => compare(&warnings, &files, console),
        Mode::PlotSummary(file) => plot_summary(&file, console),
        Mode::Merge(merge_config) => merge(&merge_config, console),
        Mode::Synthesize { params, output } => synthesize(&params, &output, console),
        Mode::Bench(config) => bench(
            &config,
            console,
            modes::benchmark::run(&config, console, stop),
        ),
        Mode::DryRun(config) => bench(
            &config,
            console,
            modes::benchmark::dry_run(&config, console),
        ),
    }
}

/// The exit code of a benchmark or `--dry-run` that ended with `outcome`: 0 when at least one
/// request succeeded (or the dry run described its dataset), 1 when none did or the run
/// failed, 2 when nothing ran, 130 when interrupted.
fn bench(
    config: &Config,
    console: &Console,
    outcome: anyhow::Result<modes::benchmark::Outcome>,
) -> i32 {
    match outcome {
        Ok(modes::benchmark::Outcome::Completed) => 0,
        Ok(modes::benchmark::Outcome::Interrupted) => crate::runtime::stop_handle::INTERRUPTED_EXIT,
        Ok(modes::benchmark::Outcome::NoneSucceeded {
            failed,
            cancelled,
            example,
        }) => {
            // Two flags cut requests on purpose: name the one(s) given.
            let by = match (
                config.rate.cancellation.is_some(),
                config.engine.time_bound.is_some(),
            ) {
                (true, true) => "--request-cancellation-rate or the --duration bound",
                (false, true) => "the --duration bound (after --duration-grace)",
                _ => "--request-cancellation-rate",
            };
            let why = match (failed, cancelled) {
                (0, c) => format!("{c} cancelled by {by}"),
                (f, c) => format!(
                    "{f} failed{}, e.g. {}",
                    if c > 0 {
                        format!(", {c} cancelled")
                    } else {
                        String::new()
                    },
                    crate::safe_text::Escaped(example.lines().next().unwrap_or("no reason given"))
                ),
            };
            console.err_line(format_args!(
                "error: no request succeeded ({why}); the result above says why"
            ));
            1
        }
        Ok(modes::benchmark::Outcome::SloNotMet { why }) => {
            console.err_line(format_args!("error: no capacity meets the SLO: {why}"));
            1
        }
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) if e.is::<modes::benchmark::NothingRan>() || over_os_limits(&e) => {
            console.err_line(format_args!("error: {e:#}"));
            2
        }
        Err(e) => {
            console.err_line(format_args!("error: {e:#}"));
            1
        }
    }
}

/// `--plot-summary FILE`: its page beside it (`.html`); 0 when written, 2 for a file that
/// is not a summary.
fn plot_summary(file: &std::path::Path, console: &Console) -> i32 {
    use crate::output::plot;
    // A summary of points or runs: far below this even for thousands of them.
    let text = match crate::whole_file::read_to_string(file, 256 << 20) {
        Ok(t) => t,
        Err(e) => {
            console.err_line(format_args!("error: --plot-summary {e}"));
            return 2;
        }
    };
    let summary = match plot::runs_plot::Summary::from_json(&text) {
        Ok(s) => s,
        Err(e) => {
            console.err_line(format_args!(
                "error: --plot-summary {}: {e}; give a sweep-summary-*.json, an \
                 slo-search-summary-*.json or a --num-runs result file",
                file.display()
            ));
            return 2;
        }
    };
    let path = file.with_extension("html");
    let title = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let html = plot::runs_plot::render(&summary, &title);
    match std::fs::write(&path, html) {
        Ok(()) => {
            console.line(format_args!("Summary plot saved to: {}", path.display()));
            0
        }
        Err(e) => {
            console.err_line(format_args!("error: cannot write {}: {e}", path.display()));
            1
        }
    }
}

/// `--compare`: 0 when the table was printed, 2 for a file that is not a result.
fn compare(warnings: &[String], files: &[std::path::PathBuf], console: &Console) -> i32 {
    for w in warnings {
        console.warning(w);
    }
    match modes::compare::run(files, console) {
        Ok(()) => 0,
        Err(e) => {
            console.err_line(format_args!("error: {e}"));
            2
        }
    }
}

/// `vllm-bench merge`: 0 when the merged result was written, 2 for input that cannot be
/// merged, 1 when it cannot be written.
fn merge(args: &MergeConfig, console: &Console) -> i32 {
    match modes::merge::run(args, console) {
        Ok(merged) => {
            if let Some(w) = merged.warning() {
                console.err_line(w);
            }
            0
        }
        Err(e @ modes::merge::MergeError::Save(_)) => {
            console.err_line(format_args!("error: {e}"));
            1
        }
        Err(e) => {
            console.err_line(format_args!("error: {e}"));
            2
        }
    }
}

/// `vllm-bench synthesize agentic`: 0 when the corpus was written, 2 when it could not be.
fn synthesize(
    params: &crate::datasets::agentic::synthesize::SynthesisParams,
    output: &std::path::Path,
    console: &Console,
) -> i32 {
    match modes::synthesize::run(params, output) {
        Ok(summary) => {
            console.line(summary);
            0
        }
        Err(e) => {
            console.err_line(format_args!("error: {e}"));
            2
        }
    }
}

/// The planned connections do not fit the open-file or port limits: refused before that run
/// sent anything, and fixed by the user's limits or flags, so exit 2 as documented.
fn over_os_limits(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<crate::engine::EngineError>(),
            Some(crate::engine::EngineError::Limits(_))
        )
    })
}

/// `vllm-bench ... | head` must not report an error (ripgrep's rule).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_captured(args: &[&str]) -> (i32, crate::output::stdio::Captured) {
        let (console, captured) = Console::capture();
        let argv = std::iter::once("vllm-bench").chain(args.iter().copied());
        let code = run(argv.map(OsString::from), &console, &StopHandle::manual());
        let out = captured.lock().unwrap().clone();
        (code, out)
    }

    #[test]
    fn the_program_runs_in_process_with_its_output_captured() {
        let (code, out) = run_captured(&["--version"]);
        assert_eq!(code, 0);
        assert_eq!(
            out.stdout,
            format!("vllm-bench {}\n", env!("CARGO_PKG_VERSION"))
        );
        let (code, out) = run_captured(&["--num-prompts", "abc"]);
        assert_eq!(code, 2);
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(
            out.stderr.starts_with("error: ") && out.stderr.lines().count() == 1,
            "{out:?}"
        );
    }

    #[test]
    fn merge_accepts_the_python_spelling_of_its_flags() {
        let missing = std::env::temp_dir().join(format!(
            "vllm-bench-no-such-shard-{}.json",
            std::process::id()
        ));
        let missing = missing.to_str().unwrap();
        let (code, out) = run_captured(&["merge", missing, "--result_dir", missing]);
        assert_eq!(code, 2);
        assert_eq!(
            out.stderr.lines().collect::<Vec<_>>(),
            [format!(
                "error: {missing}: cannot read it: No such file or directory (os error 2)"
            )],
            "{out:?}"
        );
    }
}
