//! What every file dataset shares with Python's `BenchmarkDataset`: the selection options
//! (`--num-prompts`, `--seed`, `--disable-shuffle`, `--no-oversample`, `--request-id-prefix`),
//! the length filter `is_valid_sequence`, and `maybe_oversample_requests`.

use rayon::prelude::*;

use super::error::DatasetError;
use super::pyrandom::PyRandom;
use super::SampleRequest;

/// How a dataset picks its samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampling {
    /// `--num-prompts`.
    pub num_requests: usize,
    /// `--seed` (Python's `random.seed`).
    pub seed: u64,
    /// `--disable-shuffle`: keep the file's order.
    pub shuffle: bool,
    /// Not `--no-oversample`: repeat random samples until there are `num_requests`.
    pub oversample: bool,
    /// `--request-id-prefix`; sample `i` gets id `prefix + i`.
    pub request_id_prefix: String,
}

impl Sampling {
    /// The request id of the `i`th sample.
    pub fn request_id(&self, i: usize) -> String {
        format!("{}{i}", self.request_id_prefix)
    }
}

/// Python's `is_valid_sequence` with its defaults (min 4, prompt ≤ 1024, total ≤ 2048): the
/// pruning rules the ShareGPT and Hugging Face loaders inherited from the old benchmark
/// scripts. `fixed_output` skips the minimum-output check (Python does when the output
/// length is given by a flag) but the total still counts it.
pub fn is_valid_sequence(prompt_len: usize, output_len: usize, fixed_output: bool) -> bool {
    is_valid_sequence_within(prompt_len, output_len, fixed_output, (1024, 2048))
}

/// [`is_valid_sequence`] with other `(max_prompt_len, max_total_len)` (Python's AIMO loader
/// allows 2048 and 32000).
pub fn is_valid_sequence_within(
    prompt_len: usize,
    output_len: usize,
    fixed_output: bool,
    (max_prompt_len, max_total_len): (usize, usize),
) -> bool {
    const MIN_LEN: usize = 4;
    prompt_len >= MIN_LEN
        && (fixed_output || output_len >= MIN_LEN)
        && prompt_len <= max_prompt_len
        && prompt_len + output_len <= max_total_len
}

/// Python's "take the rows in order until `num` pass": `candidate` turns a row into a
/// sample or drops it (`None`). Rows are done in parallel a chunk at a time, a chunk a
/// little larger than what is still needed, so rows past the last one taken are mostly
/// never tokenized; an error is the first one in order. The caller numbers the samples.
pub fn take_in_order<T, X, F>(order: &[T], num: usize, candidate: F) -> Result<Vec<X>, DatasetError>
where
    T: Sync,
    X: Send,
    F: Fn(&T) -> Result<Option<X>, DatasetError> + Sync,
{
    let mut samples = Vec::with_capacity(num);
    let mut next = 0;
    while samples.len() < num && next < order.len() {
        let end = (next + chunk_len(num - samples.len())).min(order.len());
        let made: Vec<_> = order[next..end].par_iter().map(&candidate).collect();
        next = end;
        for m in made {
            if samples.len() >= num {
                break;
            }
            samples.extend(m?);
        }
    }
    Ok(samples)
}

/// How many rows to do at once when `need` more samples are wanted: a little more than
/// needed (some are rejected), never so few that the threads idle.
fn chunk_len(need: usize) -> usize {
    (need + need / 4).max(256)
}

/// Python's `maybe_oversample_requests`: below `num_requests`, re-seed `random` and append
/// `random.choice(samples)` copies (prompts shared, not copied) with fresh ids
/// `prefix + (len + i)`; `what` names the dataset for the error when nothing is left to
/// choose from.
pub fn maybe_oversample(
    samples: &mut Vec<SampleRequest>,
    s: &Sampling,
    what: &str,
) -> Result<(), DatasetError> {
    let have = samples.len();
    let extra: Vec<SampleRequest> = oversample_picks(have, s, what)?
        .into_iter()
        .enumerate()
        .map(|(i, pick)| SampleRequest {
            request_id: Some(s.request_id(have + i)),
            ..samples[pick].clone()
        })
        .collect();
    samples.extend(extra);
    Ok(())
}

/// Which of `have` samples each oversampled request repeats (Python's
/// `random.choice(requests)` per missing request, seeded), none when no oversampling is due.
pub fn oversample_picks(have: usize, s: &Sampling, what: &str) -> Result<Vec<usize>, DatasetError> {
    if !s.oversample || have >= s.num_requests {
        return Ok(Vec::new());
    }
    if have == 0 {
        return Err(DatasetError::Unusable(format!(
            "{what}: no sample passed the selection, nothing to oversample from; check the \
             file and the length options"
        )));
    }
    let mut rng = PyRandom::new(s.seed);
    Ok((0..s.num_requests - have)
        .map(|_| rng.choice_index(have).expect("have is not zero"))
        .collect())
}

/// [`maybe_oversample`] for samples that carry something beside their request (their
/// multimodal parts): each copy takes its pick's extra along.
pub fn oversample_pairs<T: Clone>(
    pairs: &mut Vec<(SampleRequest, T)>,
    s: &Sampling,
    what: &str,
) -> Result<(), DatasetError> {
    let have = pairs.len();
    for (i, pick) in oversample_picks(have, s, what)?.into_iter().enumerate() {
        let (req, extra) = pairs[pick].clone();
        let req = SampleRequest {
            request_id: Some(s.request_id(have + i)),
            ..req
        };
        pairs.push((req, extra));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::Prompt;
    use std::sync::Arc;

    #[test]
    fn chunks_cover_what_is_needed() {
        assert_eq!(chunk_len(1), 256);
        assert_eq!(chunk_len(10_000), 12_500);
    }

    #[test]
    fn validity_follows_python() {
        assert!(is_valid_sequence(4, 4, false));
        assert!(!is_valid_sequence(3, 100, false));
        assert!(!is_valid_sequence(100, 3, false));
        assert!(is_valid_sequence(100, 3, true));
        assert!(is_valid_sequence(1024, 1024, false));
        assert!(!is_valid_sequence(1025, 10, false));
        assert!(!is_valid_sequence(1000, 1049, true));
    }

    fn sampling(n: usize) -> Sampling {
        Sampling {
            num_requests: n,
            seed: 0,
            shuffle: true,
            oversample: true,
            request_id_prefix: "p-".into(),
        }
    }

    fn sample(i: usize) -> SampleRequest {
        SampleRequest {
            prompt: Prompt::Text(Arc::from(format!("prompt {i}"))),
            prompt_len: i,
            expected_output_len: 1,
            request_id: Some(format!("p-{i}")),
        }
    }

    #[test]
    fn oversampling_shares_prompts_and_numbers_ids_on() {
        let mut v: Vec<_> = (0..3).map(sample).collect();
        maybe_oversample(&mut v, &sampling(8), "test").unwrap();
        assert_eq!(v.len(), 8);
        let ids: Vec<_> = v.iter().map(|r| r.request_id.clone().unwrap()).collect();
        assert_eq!(ids, (0..8).map(|i| format!("p-{i}")).collect::<Vec<_>>());
        // random.seed(0); [random.choice(range(3)) for _ in range(5)] == [1, 1, 0, 1, 2]
        let picks: Vec<_> = v[3..].iter().map(|r| r.prompt_len).collect();
        assert_eq!(picks, [1, 1, 0, 1, 2]);
        let (Prompt::Text(a), Prompt::Text(b)) = (&v[1].prompt, &v[3].prompt) else {
            unreachable!()
        };
        assert!(Arc::ptr_eq(a, b), "an oversampled prompt is shared");
    }

    #[test]
    fn no_oversample_and_nothing_to_choose_from() {
        let mut v: Vec<_> = (0..2).map(sample).collect();
        let s = Sampling {
            oversample: false,
            ..sampling(5)
        };
        maybe_oversample(&mut v, &s, "test").unwrap();
        assert_eq!(v.len(), 2);
        let e = maybe_oversample(&mut Vec::new(), &sampling(5), "sharegpt").unwrap_err();
        assert!(e.to_string().starts_with("sharegpt: no sample"), "{e}");
    }
}
