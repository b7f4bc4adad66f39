//! The command line: every `vllm bench serve` flag with Python's names, defaults and value
//! forms, the vllm-bench reference's additions and our engine flags, parsed with Python's
//! quirks (`_` for `-`, prefixes, dotted JSON arguments, last one wins).
//!
//! Parsing is two steps: [`argv`] rewrites the argument list the way vLLM's
//! `FlexibleArgumentParser` does, then clap parses it into [`Cli`]. `Cli` holds the flags as
//! given (plus which ones were given); `config::Config::from_cli` resolves defaults and checks
//! every rule that needs more than one flag.

mod args;
mod argv;
mod choices;
mod error;
mod help;
pub mod pyvalue;
pub mod unimplemented;

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, Command, FromArgMatches};

pub use args::{
    CustomArgs, DatasetArgs, EngineArgs, HfArgs, LoraArgs, MergeArgs, ModelArgs, MultiRunArgs,
    MultiTurnArgs, OutputArgs, PrefixRepetitionArgs, ProfilingArgs, RandomArgs, RandomMmArgs,
    RateArgs, RequestArgs, SamplingArgs, ServerArgs, ServerMetricsArgs, ShardArgs, ShareGptArgs,
    SloArgs, SonnetArgs, SpecBenchArgs, SpeedBenchArgs, SteadyStateArgs, SweepArgs, SynthesizeArgs,
    TimedTraceArgs,
};
pub use choices::{SpeedBenchSubset, TraceFormatChoice};
pub use error::{quote, CliError};
// The shared vocabulary, named here too so `config` reads every flag's type from `cli`.
pub use crate::types::{
    Backend, DatasetName, LoraAssignment, RampUp, RampUpStrategy, ReplicaAffinity,
};

const ABOUT: &str =
    "Benchmark client for vLLM and OpenAI-compatible servers; a drop-in for `vllm bench serve`.";

/// The usage lines: a run, and the merge of a sharded run's results.
const USAGE: &str = "vllm-bench [OPTIONS]
       vllm-bench merge [--result-dir DIR] [--result-filename NAME] SHARD_RESULT...
       vllm-bench synthesize agentic --num-sessions N [--seed S] --output DIR";

/// What `vllm-bench synthesize --help` says it does.
const SYNTHESIZE_ABOUT: &str = "Write a synthetic agentic-coding corpus (Weka trace files, one \
per session) for --dataset-name agentic_trace, drawn as `aiperf synthesize agentic-code` draws";

/// What `vllm-bench merge --help` says it does.
const MERGE_ABOUT: &str = "Merge the results of the shards of one run (--shard K/N --save-result) \
into the result one process would have written";

const AFTER_HELP: &str = "\
`vllm-bench merge --help` describes merging the results of `--shard K/N` runs. \
Python spellings work too: --random_input_len 5, unambiguous prefixes (--num-prom 10), \
--key=value, and dotted JSON fields (--extra-body.temperature 0.5, --extra-body.stop+ a,b). \
--help=KEYWORD shows one group, or the options whose names, group or help mention KEYWORD.";

/// Every flag as given on the command line (defaults filled in by clap), grouped as in
/// `--help`. Built only by [`parse_from`], which applies Python's rewrites first.
#[derive(Debug, Clone, Args)]
pub struct Cli {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    #[command(flatten)]
    pub rate: RateArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub request: RequestArgs,
    #[command(flatten)]
    pub steady_state: SteadyStateArgs,
    #[command(flatten)]
    pub profiling: ProfilingArgs,
    #[command(flatten)]
    pub server_metrics: ServerMetricsArgs,
    #[command(flatten)]
    pub sweep: SweepArgs,
    #[command(flatten)]
    pub slo: SloArgs,
    #[command(flatten)]
    pub multi_turn: MultiTurnArgs,
    #[command(flatten)]
    pub lora: LoraArgs,
    #[command(flatten)]
    pub multi_run: MultiRunArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub engine: EngineArgs,

    /// Long names (`--seed`) of the options set on the command line or from the environment,
    /// in command-line order.
    #[arg(skip)]
    given: Vec<String>,
    /// The options of `given` that came from the environment (`--num-cores` from
    /// `VLLM_BENCH_CORES`), not from the command line.
    #[arg(skip)]
    from_env: Vec<String>,
    /// Notes for the user that are not errors (e.g. a repeated option).
    #[arg(skip)]
    warnings: Vec<String>,
}

impl Cli {
    /// True if `flag` (`"--seed"`) was set on the command line or from the environment, as
    /// opposed to left at its default.
    pub fn was_given(&self, flag: &str) -> bool {
        self.given.iter().any(|g| g == flag)
    }

    /// The options set on the command line or from the environment (`--seed`, …), in
    /// command-line order.
    pub fn given(&self) -> &[String] {
        &self.given
    }

    /// True if `flag` (`"--num-cores"`) was set from the environment, not the command line.
    pub fn is_from_env(&self, flag: &str) -> bool {
        self.from_env.iter().any(|g| g == flag)
    }

    /// Notes for the user that do not stop the run.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// The clap command: every flag, with unimplemented flags and choices marked in the help.
pub fn command() -> Command {
    let backends = unimplemented::backends();
    let datasets = unimplemented::datasets();
    let base = Command::new("vllm-bench")
        .version(env!("CARGO_PKG_VERSION"))
        .args_override_self(true)
        .allow_negative_numbers(true)
        .max_term_width(100)
        .override_usage(USAGE);
    // After `augment_args`, which would take `about` from `Cli`'s doc comment.
    Cli::augment_args(base)
        .about(ABOUT)
        .long_about(None)
        .after_help(AFTER_HELP)
        .mut_args(|a| {
            let flag = a.get_long().map(|l| format!("--{l}"));
            match flag {
                Some(f) if unimplemented::is_flag(&f) => {
                    let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                    a.help(format!("{help} [not implemented yet]"))
                }
                _ => a,
            }
        })
        .mut_arg("backend", |a| {
            a.help(format!("Backend (API) to benchmark{}", not_yet(&backends)))
        })
        .mut_arg("dataset_name", |a| {
            a.help(format!(
                "Dataset; '_' and '-' spellings both work{}",
                not_yet(&datasets)
            ))
        })
}

/// The help's mark for the choices of a flag that are refused (nothing when none is).
fn not_yet(refused: &[&str]) -> String {
    if refused.is_empty() {
        String::new()
    } else {
        format!(" [not implemented yet: {}]", refused.join(", "))
    }
}

/// Every long option name and alias (without `--`), with the id of its option.
fn known_flags(cmd: &Command) -> argv::KnownFlags {
    let mut names = vec![
        ("help".to_owned(), "help".to_owned()),
        ("version".to_owned(), "version".to_owned()),
    ];
    for arg in cmd.get_arguments() {
        let id = arg.get_id().to_string();
        for long in arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default())
        {
            names.push((long.to_owned(), id.clone()));
        }
    }
    argv::KnownFlags::new(names)
}

/// What the command line asks for: a run (its flags), or the merge of a sharded run's
/// results (the `merge` subcommand, first on the line).
#[derive(Debug, Clone)]
pub enum Invocation {
    Run(Box<Cli>),
    Merge(MergeArgs),
    Synthesize(SynthesizeArgs),
}

/// The `synthesize` subcommand's clap command.
pub fn synthesize_command() -> Command {
    SynthesizeArgs::augment_args(Command::new("vllm-bench synthesize").args_override_self(true))
        .about(SYNTHESIZE_ABOUT)
        .long_about(None)
}

/// The `merge` subcommand's clap command.
pub fn merge_command() -> Command {
    MergeArgs::augment_args(Command::new("vllm-bench merge").args_override_self(true))
        .about(MERGE_ABOUT)
        .long_about(None)
}

/// Parses a full argument list (program name first): `merge …` into its [`MergeArgs`],
/// anything else into a [`Cli`]. Both go through Python's rewrites (see [`argv`]): `_` for
/// `-`, unambiguous prefixes, `--key=value`, `--help=KEYWORD`.
pub fn parse_invocation<I, T>(args: I) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let (program, mut rest) = split_program(args)?;
    if rest.first().is_some_and(|a| a == "merge") {
        rest.remove(0);
        let cmd = merge_command();
        let (matches, _) = matches_of(&cmd, OsString::from("vllm-bench merge"), rest)?;
        let merge = MergeArgs::from_arg_matches(&matches).map_err(error::from_clap)?;
        return Ok(Invocation::Merge(merge));
    }
    if rest.first().is_some_and(|a| a == "synthesize") {
        rest.remove(0);
        let cmd = synthesize_command();
        let (matches, _) = matches_of(&cmd, OsString::from("vllm-bench synthesize"), rest)?;
        let args = SynthesizeArgs::from_arg_matches(&matches).map_err(error::from_clap)?;
        return Ok(Invocation::Synthesize(args));
    }
    parse_run(program, rest).map(|cli| Invocation::Run(Box::new(cli)))
}

/// Parses a full argument list (program name first) into a [`Cli`].
///
/// Python's spellings are rewritten first (see [`argv`]); help, version and usage errors come
/// back as [`CliError`].
pub fn parse_from<I, T>(args: I) -> Result<Cli, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let (program, rest) = split_program(args)?;
    parse_run(program, rest)
}

/// The program name and the other arguments as UTF-8 text.
fn split_program<I, T>(args: I) -> Result<(OsString, Vec<String>), CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut iter = args.into_iter().map(Into::into);
    let program = iter.next().unwrap_or_else(|| OsString::from("vllm-bench"));
    let rest = iter
        .map(|a| {
            a.into_string()
                .map_err(|bad| CliError::Usage(format!("argument {bad:?} is not valid UTF-8")))
        })
        .collect::<Result<Vec<String>, CliError>>()?;
    Ok((program, rest))
}

/// `cmd`'s matches for `rest` after Python's rewrites, and the rewritten arguments.
fn matches_of(
    cmd: &Command,
    program: OsString,
    rest: Vec<String>,
) -> Result<(ArgMatches, Vec<String>), CliError> {
    let rewritten =
        argv::rewrite(rest, &known_flags(cmd)).map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(keyword) = &rewritten.help_keyword {
        return Err(match help::keyword_help(cmd.clone(), keyword) {
            Some(text) => CliError::Help(error::with_newline(text)),
            None => CliError::Usage(format!(
                "--help={keyword}: no group or option matches; `--help` lists every option \
                 and its groups"
            )),
        });
    }
    let argv: Vec<OsString> = std::iter::once(program)
        .chain(rewritten.args.iter().map(OsString::from))
        .collect();
    let matches = cmd
        .clone()
        .try_get_matches_from(argv)
        .map_err(error::from_clap)?;
    Ok((matches, rewritten.args))
}

/// A run's flags: [`Cli`] with the options given and the notes about them.
fn parse_run(program: OsString, rest: Vec<String>) -> Result<Cli, CliError> {
    let cmd = command();
    let (matches, args) = matches_of(&cmd, program, rest)?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(error::from_clap)?;
    cli.given = given_flags(
        &cmd,
        &matches,
        &[ValueSource::CommandLine, ValueSource::EnvVariable],
    );
    cli.from_env = given_flags(&cmd, &matches, &[ValueSource::EnvVariable]);
    cli.warnings.extend(duplicate_warning(&cmd, &args));
    Ok(cli)
}

/// The long names of the options whose value came from one of `sources`, in command-line
/// order.
fn given_flags(cmd: &Command, matches: &ArgMatches, sources: &[ValueSource]) -> Vec<String> {
    let mut given: Vec<(usize, String)> = cmd
        .get_arguments()
        .filter_map(|arg| {
            let id = arg.get_id().as_str();
            let long = arg.get_long()?;
            let source = matches.value_source(id)?;
            sources.contains(&source).then(|| {
                let pos = matches.index_of(id).unwrap_or(usize::MAX);
                (pos, format!("--{long}"))
            })
        })
        .collect();
    given.sort();
    given.into_iter().map(|(_, flag)| flag).collect()
}

/// Python logs "Found duplicate keys" when a single-value option is repeated (the last one
/// wins); list options accumulate and are not reported.
fn duplicate_warning(cmd: &Command, args: &[String]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut repeated: Vec<String> = Vec::new();
    for a in args.iter().take_while(|a| *a != "--") {
        let Some(body) = a.strip_prefix("--") else {
            continue;
        };
        let name = body.split('=').next().unwrap_or(body);
        let Some(arg) = cmd.get_arguments().find(|x| {
            x.get_long() == Some(name) || x.get_all_aliases().is_some_and(|al| al.contains(&name))
        }) else {
            continue;
        };
        if matches!(arg.get_action(), ArgAction::Append) {
            continue;
        }
        let id = arg.get_id().as_str();
        if seen.contains(&id) {
            let flag = format!("--{}", arg.get_long().unwrap_or(name));
            if !repeated.contains(&flag) {
                repeated.push(flag);
            }
        } else {
            seen.push(id);
        }
    }
    (!repeated.is_empty()).then(|| {
        format!(
            "duplicate options, the last value wins: {}",
            repeated.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, CliError> {
        parse_from(std::iter::once("vllm-bench").chain(args.iter().copied()))
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn defaults_are_pythons() {
        let cli = parse(&[]).unwrap();
        assert_eq!(cli.server.backend, Backend::Openai);
        assert_eq!(cli.server.host, "127.0.0.1");
        assert_eq!(cli.server.port, 8000);
        assert_eq!(cli.dataset.dataset_name, DatasetName::Random);
        assert_eq!(cli.dataset.num_prompts, 1000);
        assert_eq!(cli.dataset.random.random_input_len, 1024);
        assert_eq!(cli.dataset.random.random_output_len, 128);
        assert_eq!(cli.rate.request_rate, f64::INFINITY);
        assert_eq!(cli.rate.burstiness, 1.0);
        assert_eq!(cli.output.metric_percentiles, "99");
        assert_eq!(cli.dataset.timed_trace.timed_trace_chunk_hash_size, 16);
        assert_eq!(cli.dataset.speed_bench.speed_bench_output_len, 4096);
        assert!(cli.given().is_empty());
    }

    #[test]
    fn given_flags_are_tracked_in_order() {
        let cli = parse(&["--seed", "3", "--save-result", "--num_prompts=5"]).unwrap();
        assert_eq!(cli.given(), ["--seed", "--save-result", "--num-prompts"]);
        assert!(cli.was_given("--seed"));
        assert!(!cli.was_given("--port"));
    }

    #[test]
    fn last_value_wins_and_is_reported() {
        let cli = parse(&["--seed", "1", "--seed", "2"]).unwrap();
        assert_eq!(cli.dataset.seed, 2);
        assert_eq!(
            cli.warnings(),
            ["duplicate options, the last value wins: --seed"]
        );
    }

    #[test]
    fn list_options_accumulate() {
        let cli = parse(&["--header", "a=1", "--header", "b=2", "c=3"]).unwrap();
        assert_eq!(cli.request.header, ["a=1", "b=2", "c=3"]);
        assert!(cli.warnings().is_empty());
    }

    #[test]
    fn help_and_version_exit_zero() {
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.exit_code(), 0);
        assert!(help.to_string().starts_with(ABOUT));
        assert!(help.to_string().contains("\nSampling parameters:\n"));
        assert!(help.to_string().ends_with("KEYWORD.\n"));
        let version = parse(&["--version"]).unwrap_err();
        assert_eq!(version.exit_code(), 0);
        assert!(version.to_string().contains(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn help_keyword_filters_options() {
        let CliError::Help(text) = parse(&["--help=ramp"]).unwrap_err() else {
            panic!("expected help");
        };
        assert!(text.contains("--ramp-up-strategy"));
        // (The usage lines name `synthesize`'s `--seed`; the options listed are filtered.)
        assert!(!text.contains("--seed <"), "{text}");
        // Help text and group titles count too, as whole words.
        let CliError::Help(text) = parse(&["--help=rate"]).unwrap_err() else {
            panic!("expected help");
        };
        for flag in ["--request-rate", "--burstiness", "--max-concurrency"] {
            assert!(text.contains(flag), "{flag} in --help=rate:\n{text}");
        }
        let CliError::Help(text) = parse(&["--help=sampling parameters"]).unwrap_err() else {
            panic!("expected help");
        };
        assert!(text.contains("--top-p"));
        assert!(!text.contains("--ramp-up-strategy"));
        let CliError::Usage(text) = parse(&["--help=nothing-like-this"]).unwrap_err() else {
            panic!("expected a usage error");
        };
        assert!(text.starts_with("--help=nothing-like-this: no group or option matches"));
    }
}
