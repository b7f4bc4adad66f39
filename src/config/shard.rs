//! Sharded runs (`--shard K/N`, `--shard auto`) and a shared start time (`--start-at`): one
//! benchmark split over several processes or machines, each sending its share of one run's
//! requests on one common time axis, merged afterwards by `vllm-bench merge`.
//!
//! The orchestrators that start the ranks already number them: Slurm sets `SLURM_PROCID` and
//! `SLURM_NTASKS`, a Kubernetes Indexed Job sets `JOB_COMPLETION_INDEX` (the count, which
//! Kubernetes does not pass, comes from `VLLM_BENCH_SHARDS`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ConfigError;
use crate::cli::Cli;
use crate::datasets::limits;

/// Shard `index` of `count`: the sessions `i` with `i % count == index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// True if session `i` of the one-process run belongs to this shard.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }

    /// This shard's part of `total` workers: the shares of all shards add up to `total`.
    pub fn share(&self, total: usize) -> usize {
        total / self.count + usize::from(self.index < total % self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How far in the past `--start-at` may be when the run starts: clocks of different machines
/// and the start of processes differ by that much, more means the shards' axes would not
/// be one.
pub const START_AT_SLACK: Duration = Duration::from_secs(1);

/// `--shard` and `--start-at`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ShardConfig {
    pub shard: Option<Shard>,
    /// Unix time in seconds, as given.
    pub start_at: Option<f64>,
}

impl ShardConfig {
    /// `--start-at` as a wall-clock instant (`None` without it; validation keeps it within
    /// [`limits::MAX_SECONDS`] of now, so the checked conversion always succeeds).
    pub fn start_time(&self) -> Option<SystemTime> {
        self.start_at
            .and_then(|t| Duration::try_from_secs_f64(t).ok())
            .and_then(|d| UNIX_EPOCH.checked_add(d))
    }
}

/// Resolves `--shard` (reading the orchestrator's variables for `auto`) and `--start-at`.
pub fn resolve(cli: &Cli) -> Result<ShardConfig, ConfigError> {
    let shard = match cli.shard.shard.as_deref() {
        None => None,
        Some("auto") => Some(from_env(|k| std::env::var(k).ok())?),
        Some(text) => Some(parse(text)?),
    };
    let start_at = cli.shard.start_at;
    if let Some(t) = start_at {
        if !(t.is_finite() && t > 0.0) {
            return Err(ConfigError::number(
                "--start-at",
                t,
                "expected a Unix time in seconds, e.g. $(( $(date +%s) + 30 ))",
            ));
        }
        check_not_past(t, SystemTime::now())?;
    }
    if let Some(s) = shard {
        check_combinations(cli, s)?;
    }
    Ok(ShardConfig { shard, start_at })
}

/// `K/N` with `0 <= K < N`.
pub fn parse(text: &str) -> Result<Shard, ConfigError> {
    let bad = |why: &str| ConfigError::value("--shard", text, why);
    let (k, n) = text
        .split_once('/')
        .ok_or_else(|| bad("expected K/N (shard K of N, counted from 0) or auto"))?;
    let number = |s: &str| s.trim().parse::<usize>().ok();
    let (Some(index), Some(count)) = (number(k), number(n)) else {
        return Err(bad("K and N must be whole numbers, e.g. 0/4"));
    };
    if count == 0 {
        return Err(bad("N must be at least 1"));
    }
    if index >= count {
        return Err(bad("K must be below N (shards are numbered 0 to N-1)"));
    }
    Ok(Shard { index, count })
}

/// `--shard auto`: Slurm's rank variables, else a Kubernetes Indexed Job's index with
/// `VLLM_BENCH_SHARDS`.
pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Shard, ConfigError> {
    let pairs = [
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("JOB_COMPLETION_INDEX", "VLLM_BENCH_SHARDS"),
    ];
    for (index, count) in pairs {
        match (var(index), var(count)) {
            (Some(k), Some(n)) => {
                return parse(&format!("{}/{}", k.trim(), n.trim())).map_err(|_| {
                    ConfigError::value(
                        "--shard",
                        "auto",
                        format!(
                            "{index}={k:?} and {count}={n:?} do not name shard K of N \
                             (0 <= K < N)"
                        ),
                    )
                })
            }
            (Some(_), None) => {
                return Err(ConfigError::value(
                    "--shard",
                    "auto",
                    format!("{index} is set but {count} is not; set it to the number of shards"),
                ))
            }
            _ => {}
        }
    }
    Err(ConfigError::value(
        "--shard",
        "auto",
        "neither SLURM_PROCID/SLURM_NTASKS (Slurm) nor JOB_COMPLETION_INDEX/VLLM_BENCH_SHARDS \
         (Kubernetes Indexed Job) is set; pass --shard K/N instead",
    ))
}

/// A start time more than [`START_AT_SLACK`] before `now` is refused, and so is one further
/// ahead than the longest wait vllm-bench accepts ([`limits::MAX_SECONDS`], 365 days).
pub fn check_not_past(start_at: f64, now: SystemTime) -> Result<(), ConfigError> {
    let now_s = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    if let Err(why) = limits::duration_from_secs((start_at - now_s).max(0.0)) {
        return Err(ConfigError::value(
            "--start-at",
            crate::pyfmt::float_repr(start_at),
            format!(
                "the wait until then {why}; pass a Unix time in seconds a little ahead, e.g. \
                 $(( $(date +%s) + 30 ))"
            ),
        ));
    }
    let late = now_s - start_at;
    if late > START_AT_SLACK.as_secs_f64() {
        return Err(ConfigError::value(
            "--start-at",
            crate::pyfmt::float_repr(start_at),
            format!(
                "is {late:.1} s in the past; pass a time a little ahead of the slowest \
                 shard's start, e.g. $(( $(date +%s) + 30 ))"
            ),
        ));
    }
    Ok(())
}

/// What a shard cannot be combined with: several measured runs per invocation, and limits
/// too small to give every shard a share.
fn check_combinations(cli: &Cli, shard: Shard) -> Result<(), ConfigError> {
    let with = |flag: &str, why: &str| {
        ConfigError::flag("--shard", format!("cannot be combined with {flag}: {why}"))
    };
    if cli.sweep.sweep_max_concurrency.is_some() || cli.sweep.sweep_request_rate.is_some() {
        return Err(with(
            "a sweep",
            "run one sharded benchmark per sweep point instead",
        ));
    }
    if cli.multi_run.num_runs > 1 {
        return Err(with(
            "--num-runs",
            "run the sharded benchmark once per repetition instead",
        ));
    }
    let n = shard.count;
    let limits = [
        ("--max-concurrency", cli.rate.max_concurrency),
        (
            "--multi-turn-concurrency",
            cli.multi_turn.multi_turn_concurrency,
        ),
        ("--num-prompts", Some(cli.dataset.num_prompts)),
    ];
    for (flag, value) in limits {
        if let Some(v) = value.filter(|&v| v < n) {
            return Err(ConfigError::flag(
                flag,
                format!("{v} is fewer than the {n} shards; every shard needs at least one"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_of_n_parses_and_checks_its_range() {
        assert_eq!(parse("2/3").unwrap(), Shard { index: 2, count: 3 });
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2", "1/2/3"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--shard "), "{bad}: {e}");
        }
    }

    #[test]
    fn shares_add_up_and_owners_partition() {
        for n in 1..6 {
            for total in [n, 7, 100, 101] {
                let shards = (0..n).map(|index| Shard { index, count: n });
                assert_eq!(shards.clone().map(|s| s.share(total)).sum::<usize>(), total);
                for i in 0..50 {
                    assert_eq!(shards.clone().filter(|s| s.owns(i)).count(), 1);
                }
            }
        }
    }

    #[test]
    fn auto_reads_slurm_then_kubernetes() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4")]);
        assert_eq!(from_env(slurm).unwrap(), Shard { index: 1, count: 4 });
        let k8s = env(&[("JOB_COMPLETION_INDEX", "2"), ("VLLM_BENCH_SHARDS", "3")]);
        assert_eq!(from_env(k8s).unwrap(), Shard { index: 2, count: 3 });
        let half = from_env(env(&[("JOB_COMPLETION_INDEX", "2")])).unwrap_err();
        assert!(half.to_string().contains("VLLM_BENCH_SHARDS"), "{half}");
        let none = from_env(env(&[])).unwrap_err().to_string();
        assert!(
            none.contains("SLURM_PROCID") && none.contains("--shard K/N"),
            "{none}"
        );
        let out_of_range = env(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")]);
        assert!(from_env(out_of_range).is_err());
    }

    #[test]
    fn a_start_time_long_past_is_refused() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(check_not_past(999.5, now).is_ok());
        assert!(check_not_past(2_000.0, now).is_ok());
        let e = check_not_past(990.0, now).unwrap_err().to_string();
        assert!(e.contains("10.0 s in the past"), "{e}");
        let e = check_not_past(1e20, now).unwrap_err().to_string();
        assert!(
            e.starts_with("--start-at 1e+20: the wait until then is more than"),
            "{e}"
        );
    }
}
