//! The features beyond one plain run: steady-state metrics, server profiling, sweeps,
//! multi-turn conversations, LoRA adapters, repeated runs and result comparison. Each has its
//! own settings and its rules about which other flags it needs.

use std::path::PathBuf;
use std::time::Duration;

use super::dataset::DatasetParams;
use super::parse::comma_list;
use super::slo::SloConfig;
use super::{ConfigError, RateConfig};
use crate::cli::{pyvalue, Cli, DatasetName, LoraAssignment};
use crate::datasets::conversations::{
    ConversationParams, ShareGptConversationParams, SyntheticParams,
};
use crate::datasets::limits;
use crate::datasets::sharegpt::ShareGptOptions;
use crate::pyfmt::float_repr;

/// Steady-state window detection (closed loop only).
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyStateConfig {
    /// False with `--no-steady-state`.
    pub enabled: bool,
    /// Fraction of `--max-concurrency` that opens the window, in (0, 1].
    pub threshold: f64,
    /// `None`: `max(10, 0.1 × duration)`.
    pub min_window_sec: Option<f64>,
}

/// Every steady-state flag, `--no-steady-state` last.
const STEADY_STATE_FLAGS: [&str; 3] = [
    "--steady-state-threshold",
    "--steady-state-min-window",
    "--no-steady-state",
];

/// When the server's profiler runs (`--profile`, `--profile-batch-threshold`,
/// `--profile-duration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileWhen {
    Never,
    /// Started before the measured run's preamble, stopped after its console block.
    WholeRun,
    /// Started once `/metrics` shows `running` requests, for `duration`.
    AtBatch {
        running: usize,
        duration: Duration,
    },
}

/// What a sweep varies.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepAxis {
    MaxConcurrency(Vec<usize>),
    /// Rates, `f64::INFINITY` included.
    RequestRate(Vec<f64>),
}

/// The measured runs one benchmark makes, decided here once (`--num-runs`, the sweep flags,
/// `--slo-search`, which refuse each other's combinations): `modes::runs` dispatches on it
/// and nothing asks the flags again.
#[derive(Debug, Clone, PartialEq)]
pub enum RunKind {
    /// One measured run.
    One,
    /// `--num-runs N`, N ≥ 2: the same run N times, then their spread.
    Repeat(usize),
    /// `--sweep-max-concurrency` or `--sweep-request-rate`: one run per value.
    Sweep(SweepConfig),
    /// `--slo-search`: probes chosen one after another, each probed value run
    /// `runs_per_value` times (`--num-runs`).
    Search {
        slo: Box<SloConfig>,
        runs_per_value: usize,
    },
}

impl RunKind {
    /// The kind `num_runs`, `sweep` and `slo` select (config has refused the combinations).
    pub(super) fn of(num_runs: usize, sweep: Option<SweepConfig>, slo: Option<SloConfig>) -> Self {
        match (slo, sweep) {
            (Some(slo), _) => RunKind::Search {
                slo: Box::new(slo),
                runs_per_value: num_runs,
            },
            (None, Some(sweep)) => RunKind::Sweep(sweep),
            (None, None) if num_runs > 1 => RunKind::Repeat(num_runs),
            (None, None) => RunKind::One,
        }
    }

    /// The sweep, when this is one.
    pub fn sweep(&self) -> Option<&SweepConfig> {
        match self {
            RunKind::Sweep(s) => Some(s),
            _ => None,
        }
    }
}

/// A sweep: one run per value.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    pub axis: SweepAxis,
    /// `num_prompts = concurrency × factor` (concurrency sweeps only).
    pub num_prompts_factor: Option<usize>,
    pub reset_prefix_cache: bool,
}

/// Multi-turn conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiTurnConfig {
    /// The conversations' source and shape (the datasets' own options).
    pub conversations: ConversationParams,
    pub concurrency: Option<usize>,
    pub delay_ms: u64,
}

/// LoRA adapters requests are spread over.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    pub modules: Vec<String>,
    pub assignment: LoraAssignment,
}

/// Repeated runs and result comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiRunConfig {
    /// `--same-prompts`: every point, repetition and probe re-sends the plan's prompts
    /// instead of its own (`modes::sweep_prompts::point_seed`).
    pub same_prompts: bool,
    /// `--compare BASELINE CANDIDATE [...]`: compare saved result files (at least two)
    /// instead of running.
    pub compare: Option<Vec<PathBuf>>,
}

/// The steady-state flags: checked, and a note when they cannot take effect (they only
/// apply to a closed loop of a generation backend, at least at one sweep point; see
/// `modes::steady_state_gate`).
pub(super) fn steady_state(
    cli: &Cli,
    rate: &RateConfig,
    sweep: Option<&SweepConfig>,
    warnings: &mut Vec<String>,
) -> Result<SteadyStateConfig, ConfigError> {
    let s = &cli.steady_state;
    let given: Vec<&str> = STEADY_STATE_FLAGS
        .into_iter()
        .filter(|f| cli.was_given(f))
        .collect();
    let closed = match sweep.map(|s| &s.axis) {
        None => rate.is_closed_loop(),
        Some(SweepAxis::MaxConcurrency(caps)) => caps
            .iter()
            .any(|&c| rate.is_closed_loop_at(Some(c), rate.request_rate)),
        Some(SweepAxis::RequestRate(rates)) => rates
            .iter()
            .any(|&r| rate.is_closed_loop_at(rate.max_concurrency, r)),
    };
    let applies = closed && !cli.server.backend.is_pooling() && !cli.multi_turn.multi_turn;
    if !given.is_empty() && !applies {
        warnings.push(format!(
            "{}: steady-state metrics are computed for a closed loop of a generation backend \
             only (--max-concurrency with --request-rate inf, not --multi-turn); no effect here",
            given.join(", ")
        ));
    } else if s.no_steady_state && given.len() > 1 {
        warnings.push(format!(
            "{}: no effect with --no-steady-state",
            given[..given.len() - 1].join(", ")
        ));
    }
    let t = s.steady_state_threshold;
    if !(t > 0.0 && t <= 1.0) {
        return Err(ConfigError::number(
            "--steady-state-threshold",
            t,
            "must be in (0, 1]",
        ));
    }
    if let Some(w) = s
        .steady_state_min_window
        .filter(|w| !(w.is_finite() && *w > 0.0))
    {
        return Err(ConfigError::number(
            "--steady-state-min-window",
            w,
            "must be a positive number of seconds",
        ));
    }
    Ok(SteadyStateConfig {
        enabled: !s.no_steady_state,
        threshold: t,
        min_window_sec: s.steady_state_min_window,
    })
}

pub(super) fn profiling(cli: &Cli) -> Result<ProfileWhen, ConfigError> {
    let p = &cli.profiling;
    if let Some(n) = p.profile_batch_threshold {
        if !p.profile {
            return Err(ConfigError::flag(
                "--profile-batch-threshold",
                "needs --profile",
            ));
        }
        if n == 0 {
            return Err(ConfigError::value(
                "--profile-batch-threshold",
                0,
                "must be at least 1",
            ));
        }
    }
    if cli.was_given("--profile-duration") && p.profile_batch_threshold.is_none() {
        return Err(ConfigError::flag(
            "--profile-duration",
            "needs --profile-batch-threshold",
        ));
    }
    let d = p.profile_duration;
    if !(d > 0.0 && limits::duration_from_secs(d).is_ok()) {
        return Err(ConfigError::value(
            "--profile-duration",
            float_repr(d),
            "must be a positive number of seconds, at most 31536000 (365 days)",
        ));
    }
    Ok(match (p.profile, p.profile_batch_threshold) {
        (false, _) => ProfileWhen::Never,
        (true, None) => ProfileWhen::WholeRun,
        (true, Some(running)) => ProfileWhen::AtBatch {
            running,
            // Checked above: positive, finite, at most a year.
            duration: Duration::from_secs_f64(d),
        },
    })
}

pub(super) fn sweep(cli: &Cli) -> Result<Option<SweepConfig>, ConfigError> {
    let s = &cli.sweep;
    let axis = match (&s.sweep_max_concurrency, &s.sweep_request_rate) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::flag(
                "--sweep-max-concurrency",
                "cannot be combined with --sweep-request-rate; sweep one at a time",
            ))
        }
        (Some(list), None) => {
            if cli.was_given("--max-concurrency") {
                return Err(ConfigError::flag(
                    "--max-concurrency",
                    "conflicts with --sweep-max-concurrency, which sets it per point",
                ));
            }
            SweepAxis::MaxConcurrency(comma_list("--sweep-max-concurrency", list, |v| {
                match pyvalue::py_int(v) {
                    Some(n) if n >= 1 => usize::try_from(n).map_err(|_| "too large".to_owned()),
                    _ => Err("expected an integer of at least 1".to_owned()),
                }
            })?)
        }
        (None, Some(list)) => {
            if cli.was_given("--request-rate") {
                return Err(ConfigError::flag(
                    "--request-rate",
                    "conflicts with --sweep-request-rate, which sets it per point",
                ));
            }
            let rates = comma_list("--sweep-request-rate", list, |v| {
                match pyvalue::py_float(v) {
                    Some(r) if r > 0.0 => Ok(r),
                    _ => Err("expected a rate greater than 0, or inf".to_owned()),
                }
            })?;
            for &r in &rates {
                super::rate::schedulable("--sweep-request-rate", r, cli.dataset.num_prompts)?;
            }
            SweepAxis::RequestRate(rates)
        }
        (None, None) => {
            // A capacity search resets the prefix cache per probe as a sweep does per point
            // (`SloConfig::reset_prefix_cache`).
            let searching = cli.slo.slo_search.is_some();
            for flag in ["--sweep-num-prompts-factor", "--reset-prefix-cache"] {
                if cli.was_given(flag) && !(searching && flag == "--reset-prefix-cache") {
                    return Err(ConfigError::flag(
                        flag,
                        "needs --sweep-max-concurrency or --sweep-request-rate",
                    ));
                }
            }
            return Ok(None);
        }
    };
    if let Some(f) = s.sweep_num_prompts_factor {
        if !matches!(axis, SweepAxis::MaxConcurrency(_)) {
            return Err(ConfigError::flag(
                "--sweep-num-prompts-factor",
                "needs --sweep-max-concurrency",
            ));
        }
        if f == 0 {
            return Err(ConfigError::value(
                "--sweep-num-prompts-factor",
                0,
                "must be at least 1",
            ));
        }
        if let SweepAxis::MaxConcurrency(caps) = &axis {
            // Each point plans `concurrency × factor` prompts.
            let most = caps.iter().max().copied().unwrap_or(1);
            let count = (most as u64).saturating_mul(f as u64);
            limits::check_requests(count).map_err(|why| {
                ConfigError::value(
                    "--sweep-num-prompts-factor",
                    f,
                    format!("concurrency {most} × {f} prompts: {why}"),
                )
            })?;
        }
    }
    Ok(Some(SweepConfig {
        axis,
        num_prompts_factor: s.sweep_num_prompts_factor,
        reset_prefix_cache: s.reset_prefix_cache,
    }))
}

/// The multi-turn flags other than `--multi-turn` itself.
const MULTI_TURN_FLAGS: [&str; 8] = [
    "--multi-turn-num-turns",
    "--multi-turn-min-turns",
    "--multi-turn-max-turns",
    "--multi-turn-concurrency",
    "--multi-turn-delay-ms",
    "--per-turn-input-len",
    "--multi-turn-prefix-global-ratio",
    "--multi-turn-prefix-conversation-ratio",
];

pub(super) fn multi_turn(
    cli: &Cli,
    params: &DatasetParams,
) -> Result<Option<MultiTurnConfig>, ConfigError> {
    let m = &cli.multi_turn;
    if !m.multi_turn {
        return match MULTI_TURN_FLAGS.iter().find(|f| cli.was_given(f)) {
            Some(flag) => Err(ConfigError::flag(flag, "needs --multi-turn")),
            None => Ok(None),
        };
    }
    let backend = cli.server.backend;
    if !backend.sends_chat_messages() {
        return Err(ConfigError::flag(
            "--multi-turn",
            format!("needs --backend openai-chat or anthropic-messages (got {backend})"),
        ));
    }
    let dataset = cli.dataset.dataset_name;
    let not_conversational = || {
        ConfigError::flag(
            "--multi-turn",
            format!("works with --dataset-name random or sharegpt (got {dataset})"),
        )
    };
    if !matches!(dataset, DatasetName::Random | DatasetName::Sharegpt) {
        return Err(not_conversational());
    }
    if m.multi_turn_num_turns == 0 {
        return Err(ConfigError::value(
            "--multi-turn-num-turns",
            0,
            "must be at least 1",
        ));
    }
    let (min, max) = (m.multi_turn_min_turns, m.multi_turn_max_turns);
    if dataset == DatasetName::Random {
        // Every turn of a synthetic conversation is a request planned before the clock:
        // 4,000,000,000 turns built for minutes, in silence, until memory ran out.
        let turns = m.multi_turn_num_turns.max(max);
        let total = (cli.dataset.num_prompts as u64).saturating_mul(turns as u64);
        limits::check_requests(total).map_err(|why| {
            ConfigError::value(
                "--multi-turn-num-turns",
                turns,
                format!(
                    "{} conversations × {turns} turns: {why}",
                    cli.dataset.num_prompts
                ),
            )
        })?;
    }
    // A wait between turns is a time like any other (at most 365 days).
    let delay = m.multi_turn_delay_ms;
    limits::duration_from_secs(delay as f64 / 1000.0)
        .map_err(|why| ConfigError::value("--multi-turn-delay-ms", delay, why))?;
    if min > 0 && max > 0 && min > max {
        return Err(ConfigError::value(
            "--multi-turn-min-turns",
            min,
            format!("must not exceed --multi-turn-max-turns ({max})"),
        ));
    }
    if m.multi_turn_concurrency == Some(0) {
        return Err(ConfigError::value(
            "--multi-turn-concurrency",
            0,
            "must be at least 1",
        ));
    }
    let (global, conversation) = (
        m.multi_turn_prefix_global_ratio,
        m.multi_turn_prefix_conversation_ratio,
    );
    for (flag, r) in [
        ("--multi-turn-prefix-global-ratio", global),
        ("--multi-turn-prefix-conversation-ratio", conversation),
    ] {
        if !(0.0..1.0).contains(&r) {
            return Err(ConfigError::value(flag, r, "must be in [0, 1)"));
        }
    }
    if dataset == DatasetName::Sharegpt {
        let random_only = [
            ("--multi-turn-prefix-global-ratio", global > 0.0),
            ("--multi-turn-prefix-conversation-ratio", conversation > 0.0),
            ("--per-turn-input-len", m.per_turn_input_len > 0),
        ];
        if let Some((flag, _)) = random_only.iter().find(|(_, given)| *given) {
            return Err(ConfigError::flag(
                flag,
                "shapes synthetic turns: it needs --dataset-name random (ShareGPT turns are \
                 the recorded ones)",
            ));
        }
    }
    if global + conversation >= 1.0 {
        return Err(ConfigError::invalid(format!(
            "--multi-turn-prefix-global-ratio {global} + --multi-turn-prefix-conversation-ratio \
             {conversation}: must sum to less than 1"
        )));
    }
    let conversations = match params {
        DatasetParams::Random(random) => {
            let pick = |n: usize| if n == 0 { m.multi_turn_num_turns } else { n };
            ConversationParams::Synthetic(SyntheticParams {
                random: random.clone(),
                turns: (pick(min), pick(max)),
                per_turn_input_len: m.per_turn_input_len,
                prefix_ratios: (global, conversation),
            })
        }
        DatasetParams::ShareGpt(ShareGptOptions { output_len }) => {
            ConversationParams::ShareGpt(ShareGptConversationParams {
                min_turns: min,
                max_turns: max,
                output_len: *output_len,
            })
        }
        _ => return Err(not_conversational()),
    };
    Ok(Some(MultiTurnConfig {
        conversations,
        concurrency: m.multi_turn_concurrency,
        delay_ms: m.multi_turn_delay_ms,
    }))
}

pub(super) fn lora(cli: &Cli) -> Result<Option<LoraConfig>, ConfigError> {
    let l = &cli.lora;
    if l.lora_modules.is_empty() {
        if cli.was_given("--lora-assignment") {
            return Err(ConfigError::flag(
                "--lora-assignment",
                "needs --lora-modules",
            ));
        }
        return Ok(None);
    }
    let backend = cli.server.backend;
    if backend.is_pooling() {
        return Err(ConfigError::flag(
            "--lora-modules",
            format!("LoRA routing applies to generation backends only (got --backend {backend})"),
        ));
    }
    if let Some(empty) = l.lora_modules.iter().find(|m| m.trim().is_empty()) {
        return Err(ConfigError::value(
            "--lora-modules",
            empty,
            "empty adapter name",
        ));
    }
    for m in &l.lora_modules {
        super::parse::no_control("--lora-modules", m)?;
    }
    Ok(Some(LoraConfig {
        modules: l.lora_modules.clone(),
        assignment: l.lora_assignment,
    }))
}

pub(super) fn multi_run(cli: &Cli) -> Result<MultiRunConfig, ConfigError> {
    let m = &cli.multi_run;
    if m.num_runs == 0 {
        return Err(ConfigError::value("--num-runs", 0, "must be at least 1"));
    }
    let sweeping =
        cli.sweep.sweep_max_concurrency.is_some() || cli.sweep.sweep_request_rate.is_some();
    if m.num_runs > 1 && sweeping {
        return Err(ConfigError::flag(
            "--num-runs",
            "cannot be combined with a sweep; run the sweep once per repetition",
        ));
    }
    let searching = cli.slo.slo_search.is_some();
    if m.same_prompts && !(sweeping || searching || m.num_runs > 1) {
        return Err(ConfigError::flag(
            "--same-prompts",
            "needs a sweep, --num-runs 2 or more, or --slo-search: one run has no earlier \
             point whose prompts it could re-send",
        ));
    }
    let compare = match &m.compare[..] {
        [] => None,
        [_] => {
            return Err(ConfigError::flag(
                "--compare",
                "expected at least two result files: BASELINE CANDIDATE [...]",
            ))
        }
        files => {
            // Nothing else applies to a comparison; a flag given with it must not look as
            // if it had an effect. (Flags set from the environment, VLLM_BENCH_CORES, are not
            // the user's doing on this command line.)
            if let Some(flag) = cli
                .given()
                .iter()
                .find(|f| *f != "--compare" && !cli.is_from_env(f))
            {
                return Err(ConfigError::flag(
                    "--compare",
                    format!(
                        "compares saved result files and runs no benchmark; {flag} has no \
                         effect with it"
                    ),
                ));
            }
            Some(files.iter().map(PathBuf::from).collect())
        }
    };
    Ok(MultiRunConfig {
        same_prompts: m.same_prompts,
        compare,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_kind_of_run_is_decided_from_the_flags_once() {
        let kind = |args: &[&str]| Config::of_args(args).runs;
        assert_eq!(kind(&[]), RunKind::One);
        assert_eq!(kind(&["--num-runs", "1"]), RunKind::One);
        assert_eq!(kind(&["--num-runs", "3"]), RunKind::Repeat(3));
        let RunKind::Sweep(sweep) = kind(&["--sweep-max-concurrency", "1,4"]) else {
            panic!("a sweep");
        };
        assert_eq!(sweep.axis, SweepAxis::MaxConcurrency(vec![1, 4]));
        let search = kind(&[
            "--slo-search",
            "max-concurrency",
            "--slo",
            "ttft:p99=150",
            "--num-runs",
            "2",
        ]);
        let RunKind::Search {
            slo,
            runs_per_value,
        } = search
        else {
            panic!("a search: {search:?}");
        };
        assert_eq!((slo.terms.len(), runs_per_value), (1, 2));
    }
}
