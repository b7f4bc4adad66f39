//! Which prompts each measured run of an invocation sends (a sweep's points, `--num-runs`
//! repetitions, SLO probes): its own, drawn with a seed derived from `--seed`, unless
//! `--same-prompts`. A run that re-sent an earlier one's prompts would be answered from the
//! server's prefix cache and measure the cache, not the load ([`super::sweep_cache`] says
//! when one did).

use std::borrow::Cow;

use anyhow::Result;

use crate::config::Config;
use crate::http::request::PreparedRequest;

use super::plan::Plan;
use super::point::Point;

/// The seed of measured run `n` (from 0) of an invocation: a sweep's point, a `--num-runs`
/// repetition or an SLO probe. The first is `--seed` itself, so a one-point sweep is the
/// plain run; run `n` after it takes the high 32 bits of the `n`-th output of SplitMix64
/// seeded with `--seed` (32 bits: numpy's `RandomState`, which some datasets sample with,
/// takes no more). The same command line sends the same prompts at the same point.
pub fn point_seed(seed: u64, n: usize) -> u64 {
    if n == 0 {
        return seed;
    }
    let mut z = seed.wrapping_add((n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) >> 32
}

/// The configuration measured run `n` (from 0) is run and reported with: its own seed
/// ([`point_seed`]), the plan's requests rebuilt from it; or, with `--same-prompts` (and
/// for the first run, whose prompts the plan holds), `config` as it is.
pub fn own_prompts<'c>(plan: &mut Plan, config: &'c Config, n: usize) -> Result<Cow<'c, Config>> {
    if n == 0 || config.multi_run.same_prompts {
        return Ok(Cow::Borrowed(config));
    }
    let mut c = config.clone();
    c.dataset.seed = point_seed(config.dataset.seed, n);
    plan.prepare_again(&c)?;
    Ok(Cow::Owned(c))
}

/// The requests `point` sent: the plan's first ones (what the cache watch compares across
/// runs).
pub fn sent_by<'p>(plan: &'p Plan, point: &Point) -> &'p [PreparedRequest] {
    let all = &plan.prepared.requests;
    &all[..point.num_prompts.min(all.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_after_the_first_has_its_own_seed_derived_from_the_seed() {
        assert_eq!(point_seed(7, 0), 7, "the first run is the plain run");
        let seeds: Vec<u64> = (0..64).map(|n| point_seed(7, n)).collect();
        let distinct: std::collections::HashSet<&u64> = seeds.iter().collect();
        assert_eq!(distinct.len(), 64, "{seeds:?}");
        assert!(
            seeds[1..].iter().all(|&s| s <= u64::from(u32::MAX)),
            "numpy takes 32 bits"
        );
        assert_eq!(point_seed(7, 3), point_seed(7, 3), "deterministic");
        assert_ne!(point_seed(8, 1), point_seed(7, 1), "from --seed");
    }
}
