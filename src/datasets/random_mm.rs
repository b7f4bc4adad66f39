//! The `random-mm` dataset's multimodal items (Python 0.33 `RandomMultiModalDataset`): the
//! text prompts are the `random` dataset's; this module decides how many items each request
//! carries and of which `(height, width, frames)` bucket, then makes the images.
//!
//! Python's sampling, kept: zero-probability buckets are dropped and the rest renormalized;
//! the per-modality caps (`--random-mm-limit-mm-per-prompt`) only count for modalities that
//! have a bucket; the item count is uniform in `[max(0, floor(n·(1−r))), min(Σcaps,
//! ceil(n·(1+r)))]`; each item is drawn by bucket probability, and a modality that reaches
//! its cap has its buckets removed (the rest renormalized). Randomness is our own (one seeded
//! stream per request, as the random dataset does), so a seed gives the same items on any
//! number of threads but not numpy's draws. Videos (`frames > 1`) are not implemented: a
//! bucket of one with a positive probability is refused.
//!
//! Images are made in parallel before the clock (see [`super::synthetic_image`]).

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::media::ContentPart;
use super::synthetic_image::{ImageError, ImageFamily};

/// A `(height, width, frames)` bucket; `frames == 1` is an image.
pub type BucketKey = (u32, u32, u32);

/// The `--random-mm-*` options, as validated by the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomMmParams {
    pub base_items_per_request: usize,
    pub num_mm_items_range_ratio: f64,
    /// Per-modality caps, in the order given.
    pub limit_mm_per_prompt: Vec<(String, u64)>,
    /// Buckets and probabilities, in the order given.
    pub bucket_config: Vec<(BucketKey, f64)>,
}

/// Why the items cannot be planned or made.
#[derive(Debug, thiserror::Error)]
pub enum RandomMmError {
    #[error(
        "--random-mm-bucket-config: video buckets ({0:?} has {1} frames) are not implemented \
         yet in vllm-bench; give them probability 0 or remove them"
    )]
    Video(BucketKey, u32),
    #[error(
        "--random-mm-base-items-per-request {base} with --random-mm-num-mm-items-range-ratio \
         {ratio}: at least {min} items per request, but --random-mm-limit-mm-per-prompt allows \
         {max}"
    )]
    Range {
        base: usize,
        ratio: f64,
        min: usize,
        max: usize,
    },
    #[error("--random-mm-bucket-config: {0}")]
    Image(#[from] ImageError),
}

/// What the item sampler works from, after Python's normalization.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemSampling {
    /// Buckets with a positive probability, normalized to sum to 1, in the order given.
    pub buckets: Vec<(BucketKey, f64)>,
    /// The image cap (the only modality implemented).
    pub image_limit: u64,
    pub min_items: usize,
    pub max_items: usize,
}

impl ItemSampling {
    /// Python's `get_mm_item_sampling_params`.
    pub fn new(p: &RandomMmParams) -> Result<Self, RandomMmError> {
        let kept: Vec<(BucketKey, f64)> = p
            .bucket_config
            .iter()
            .copied()
            .filter(|(_, prob)| *prob > 0.0)
            .collect();
        if let Some(((h, w, frames), _)) = kept.iter().find(|((_, _, f), _)| *f != 1) {
            return Err(RandomMmError::Video((*h, *w, *frames), *frames));
        }
        let total: f64 = kept.iter().map(|(_, prob)| prob).sum();
        let buckets = kept
            .into_iter()
            .map(|(k, prob)| (k, prob / total))
            .collect();
        let image_limit = p
            .limit_mm_per_prompt
            .iter()
            .find(|(k, _)| k == "image")
            .map_or(0, |(_, v)| *v);
        let base = p.base_items_per_request as f64;
        let r = p.num_mm_items_range_ratio;
        let cap = usize::try_from(image_limit).unwrap_or(usize::MAX);
        let max_items = cap.min((base * (1.0 + r)).ceil() as usize);
        let min_items = ((base * (1.0 - r)).floor()).max(0.0) as usize;
        if min_items > max_items {
            return Err(RandomMmError::Range {
                base: p.base_items_per_request,
                ratio: r,
                min: min_items,
                max: max_items,
            });
        }
        Ok(Self {
            buckets,
            image_limit,
            min_items,
            max_items,
        })
    }

    /// The buckets of one request's items (Python's `get_mm_item_iterator`; with images
    /// only, the cap is reached only if the count exceeds it, which the range prevents).
    pub fn draw(&self, rng: &mut StdRng) -> Vec<BucketKey> {
        let n = rng.random_range(self.min_items..=self.max_items);
        let mut out = Vec::with_capacity(n);
        while out.len() < n && (out.len() as u64) < self.image_limit {
            let mut x = rng.random::<f64>();
            let mut pick = self.buckets.last().map(|(k, _)| *k);
            for (k, prob) in &self.buckets {
                if x < *prob {
                    pick = Some(*k);
                    break;
                }
                x -= prob;
            }
            match pick {
                Some(k) => out.push(k),
                None => break,
            }
        }
        out
    }
}

/// A per-request (or per-item) stream id mixed into the seed.
fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Stream ids: item plans, the shared image of a size, and each item's own stripe.
const PLAN_STREAM: u64 = 0x6d6d_706c;
const FAMILY_STREAM: u64 = 0x6d6d_6661;
const ITEM_STREAM: u64 = 0x6d6d_6974;

/// The image content parts of each of `n` requests, made in parallel.
pub fn items(
    p: &RandomMmParams,
    n: usize,
    seed: u64,
) -> Result<Vec<Vec<ContentPart>>, RandomMmError> {
    let sampling = ItemSampling::new(p)?;
    let plans: Vec<Vec<BucketKey>> = (0..n)
        .into_par_iter()
        .map(|i| sampling.draw(&mut StdRng::seed_from_u64(mix(seed, PLAN_STREAM, i as u64))))
        .collect();
    let mut families = BTreeMap::new();
    for (h, w, _) in sampling.buckets.iter().map(|(k, _)| *k) {
        if let std::collections::btree_map::Entry::Vacant(e) = families.entry((h, w)) {
            let family_seed = mix(seed, FAMILY_STREAM, (u64::from(h) << 32) | u64::from(w));
            e.insert(ImageFamily::new(h, w, family_seed)?);
        }
    }
    plans
        .par_iter()
        .enumerate()
        .map(|(i, plan)| {
            plan.iter()
                .enumerate()
                .map(|(j, (h, w, _))| {
                    let item_seed = mix(seed, ITEM_STREAM, ((i as u64) << 16) | j as u64);
                    Ok(families[&(*h, *w)].image(item_seed)?)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(buckets: &[(BucketKey, f64)], base: usize, ratio: f64, limit: u64) -> RandomMmParams {
        RandomMmParams {
            base_items_per_request: base,
            num_mm_items_range_ratio: ratio,
            limit_mm_per_prompt: vec![("image".into(), limit), ("video".into(), 1)],
            bucket_config: buckets.to_vec(),
        }
    }

    #[test]
    fn counts_follow_pythons_range_and_the_cap() {
        let p = params(&[((8, 8, 1), 1.0)], 3, 0.5, 4);
        let s = ItemSampling::new(&p).unwrap();
        // floor(3·0.5) = 1, min(4, ceil(3·1.5) = 5) = 4.
        assert_eq!((s.min_items, s.max_items), (1, 4));
        let mut seen = [0usize; 5];
        for i in 0..2000 {
            let n = s.draw(&mut StdRng::seed_from_u64(i)).len();
            seen[n] += 1;
        }
        assert_eq!(seen[0], 0);
        assert!(seen[1..].iter().all(|&c| c > 350), "{seen:?}");
        let fixed = ItemSampling::new(&params(&[((8, 8, 1), 1.0)], 2, 0.0, 255)).unwrap();
        assert_eq!((fixed.min_items, fixed.max_items), (2, 2));
        let err = ItemSampling::new(&params(&[((8, 8, 1), 1.0)], 5, 0.0, 2)).unwrap_err();
        assert!(err.to_string().contains("at least 5 items"), "{err}");
    }

    #[test]
    fn bucket_probabilities_are_honoured_after_renormalizing() {
        // Zero-probability and video buckets at 0 are dropped; 1:3 becomes 0.25/0.75.
        let p = params(
            &[
                ((8, 8, 1), 1.0),
                ((16, 8, 1), 3.0),
                ((4, 4, 1), 0.0),
                ((8, 8, 16), 0.0),
            ],
            1,
            0.0,
            255,
        );
        let s = ItemSampling::new(&p).unwrap();
        assert_eq!(s.buckets, [((8, 8, 1), 0.25), ((16, 8, 1), 0.75)]);
        let mut small = 0;
        for i in 0..4000 {
            if s.draw(&mut StdRng::seed_from_u64(i)) == [(8, 8, 1)] {
                small += 1;
            }
        }
        assert!(
            (900..1100).contains(&small),
            "{small} of 4000 in the 0.25 bucket"
        );
    }

    #[test]
    fn videos_are_refused_and_items_are_made() {
        let err = ItemSampling::new(&params(&[((8, 8, 4), 1.0)], 1, 0.0, 255)).unwrap_err();
        assert!(err.to_string().contains("video buckets"), "{err}");
        let p = params(&[((32, 24, 1), 1.0)], 2, 0.0, 255);
        let made = items(&p, 3, 7).unwrap();
        assert_eq!(made.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 2]);
        assert_ne!(made[0][0], made[0][1]);
        assert_eq!(made, items(&p, 3, 7).unwrap(), "seeded");
    }
}
