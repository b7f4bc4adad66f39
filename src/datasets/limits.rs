//! The limits on what input may ask for, checked before anything is allocated or scheduled:
//! a time given in seconds (a flag, or a trace's timestamps), the tokens of one request, and
//! the number of requests one run plans.
//!
//! One place for each rule, because the same value arrives through several doors (a flag, a
//! sweep list, a line of a file): every one of them goes through these functions, so a value
//! that `Duration::from_secs_f64` would panic on, or a length that would allocate gigabytes,
//! is refused with one line instead. The functions are total: no input panics (the fuzz
//! targets in `fuzz/` feed them arbitrary numbers).
//!
//! Here rather than in `config` because file content (timed_trace rows) needs them too, and
//! `datasets` is the lowest layer that does.

use std::time::Duration;

/// The longest time any input may name: 365 days (31,536,000 s). Far beyond any benchmark,
/// far inside what `Duration` and the monotonic clock hold (`Instant + Duration` panics on
/// overflow), and small enough that an `f64` of seconds keeps sub-microsecond precision.
pub const MAX_SECONDS: f64 = 31_536_000.0;

/// The most tokens one request may hold without `--max-model-len`: 1,048,576 (2^20), the
/// largest context window of current models. A prompt is generated and kept in memory before
/// the clock starts (4 bytes per token id, more as text), so an unchecked length of 4·10^9
/// tokens took 12.8 GB before failing. `--max-model-len` raises it for a longer context.
pub const MAX_TOKENS_PER_REQUEST: u64 = 1 << 20;

/// The most `--max-model-len` may say: 16,777,216 tokens (2^24), above every context window
/// served today (10 million for the longest). It lifts [`MAX_TOKENS_PER_REQUEST`], so without
/// a bound `--max-model-len 999999999999` let one prompt ask for 32 GB before the run.
pub const MAX_MODEL_LEN: u64 = 1 << 24;

/// The most requests one run may plan: 10,000,000. Far below the engine's real limit (its
/// records are indexed by `u32`, 4,294,967,295), but every planned request is built before the
/// clock starts (its full request bytes, its schedule entry, its reserved record), so ten
/// million short prompts already take gigabytes, and preparing more runs for minutes in
/// silence. Warm-up requests count the same way.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// The most pixels one generated image may have: 4096 × 4096. Every random-mm image is drawn
/// and JPEG-encoded before the clock starts (3 bytes a pixel while it is drawn), and a bucket
/// of 65535 × 65535 asked for 12.8 GB per image; the largest inputs vision models take are
/// well inside this.
pub const MAX_IMAGE_PIXELS: u64 = 4096 * 4096;

/// The most multimodal items one request may carry (`--random-mm-base-items-per-request`
/// and `--random-mm-limit-mm-per-prompt`): 256, far above what servers accept per prompt,
/// and every item is built in memory before the clock starts.
pub const MAX_ITEMS_PER_REQUEST: u64 = 256;

/// Why a number of seconds is not a time vllm-bench accepts. Each message says the accepted
/// range; the caller puts the flag (or file and line) in front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecondsError {
    #[error("is not a number; expected seconds from 0 to 31536000 (365 days)")]
    NotANumber,
    #[error("is negative; expected seconds from 0 to 31536000 (365 days)")]
    Negative,
    #[error("is more than 31536000 s (365 days), the longest time vllm-bench accepts")]
    TooLong,
}

/// `secs` as a `Duration`, when it is in `[0, MAX_SECONDS]`: the one conversion of a time
/// from input. (`-0.0` is 0.)
pub fn duration_from_secs(secs: f64) -> Result<Duration, SecondsError> {
    if secs.is_nan() {
        return Err(SecondsError::NotANumber);
    }
    if secs < 0.0 {
        return Err(SecondsError::Negative);
    }
    if secs > MAX_SECONDS {
        return Err(SecondsError::TooLong);
    }
    // In range, so this neither panics nor rounds to something else.
    Ok(Duration::from_secs_f64(secs))
}

/// The time `count` requests take at `rate` per second (`count / rate`; 0 for an infinite
/// rate): the length of a schedule, whose last arrival the engine waits for. A rate that is
/// not positive is `NotANumber` (callers refuse it with their own message first).
pub fn schedule_span(count: u64, rate: f64) -> Result<Duration, SecondsError> {
    if rate.is_nan() || rate <= 0.0 {
        return Err(SecondsError::NotANumber);
    }
    if rate.is_infinite() {
        return Ok(Duration::ZERO);
    }
    // count ≥ 1 is what makes 1/rate part of the check too.
    duration_from_secs(count.max(1) as f64 / rate)
}

/// The lowest rate at which `count` requests fit in [`MAX_SECONDS`], for the error message.
pub fn min_rate(count: u64) -> f64 {
    count.max(1) as f64 / MAX_SECONDS
}

/// Why a size is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error(
        "{tokens} tokens in one request are more than the {limit} allowed without \
         --max-model-len (pass it for a model with a longer context)"
    )]
    Tokens { tokens: u64, limit: u64 },
    #[error("{tokens} tokens in one request are more than --max-model-len {limit}")]
    TokensOverMaxModelLen { tokens: u64, limit: u64 },
    #[error(
        "{count} requests are more than the 10000000 one run may plan (each is built in \
         memory before the clock starts); split the run, e.g. with --shard"
    )]
    Requests { count: u64 },
    #[error(
        "{height} x {width} is more than the 4096 x 4096 pixels one generated image may have \
         (each is drawn in memory before the clock starts)"
    )]
    ImagePixels { height: u64, width: u64 },
    #[error("{items} items in one request are more than the 256 allowed")]
    Items { items: u64 },
    #[error(
        "{tokens} tokens are more than the 16777216 (2^24) vllm-bench accepts as a context \
         window (every prompt is built in memory before the clock starts)"
    )]
    MaxModelLen { tokens: u64 },
}

/// One generated image of `height` × `width` pixels fits.
pub fn check_image(height: u64, width: u64) -> Result<(), SizeError> {
    match height.checked_mul(width) {
        Some(p) if p <= MAX_IMAGE_PIXELS => Ok(()),
        _ => Err(SizeError::ImagePixels { height, width }),
    }
}

/// `items` multimodal items fit one request.
pub fn check_items(items: u64) -> Result<(), SizeError> {
    if items <= MAX_ITEMS_PER_REQUEST {
        Ok(())
    } else {
        Err(SizeError::Items { items })
    }
}

/// The most tokens one request may hold: [`MAX_TOKENS_PER_REQUEST`], or `--max-model-len`
/// when that is larger (the user vouches for the model's context), never more than
/// [`MAX_MODEL_LEN`].
pub fn token_limit(max_model_len: Option<usize>) -> u64 {
    max_model_len.map_or(MAX_TOKENS_PER_REQUEST, |m| {
        MAX_TOKENS_PER_REQUEST.max((m as u64).min(MAX_MODEL_LEN))
    })
}

/// `--max-model-len` is at most [`MAX_MODEL_LEN`].
pub fn check_max_model_len(tokens: u64) -> Result<(), SizeError> {
    if tokens <= MAX_MODEL_LEN {
        Ok(())
    } else {
        Err(SizeError::MaxModelLen { tokens })
    }
}

/// `tokens` (a prompt, an output, or both) fits one request.
pub fn check_tokens(tokens: u64, max_model_len: Option<usize>) -> Result<(), SizeError> {
    let limit = token_limit(max_model_len);
    if tokens <= limit {
        return Ok(());
    }
    Err(match max_model_len {
        Some(m) if m as u64 == limit => SizeError::TokensOverMaxModelLen { tokens, limit },
        _ => SizeError::Tokens { tokens, limit },
    })
}

/// `count` requests fit one run's plan.
pub fn check_requests(count: u64) -> Result<(), SizeError> {
    if count <= MAX_REQUESTS {
        Ok(())
    } else {
        Err(SizeError::Requests { count })
    }
}

/// The largest length `len·(1+ratio)` (rounded up) a jittered length can take, saturating
/// instead of overflowing; `ratio` outside `[0, 1)` counts as 1 (the caller refuses it).
pub fn jittered_max(len: usize, ratio: f64) -> u64 {
    let ratio = if (0.0..1.0).contains(&ratio) {
        ratio
    } else {
        1.0
    };
    // f64 → u64 saturates; exact enough for a ceiling check.
    (len as f64 * (1.0 + ratio)).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_in_range_convert_and_the_rest_is_refused() {
        assert_eq!(duration_from_secs(0.0), Ok(Duration::ZERO));
        assert_eq!(duration_from_secs(-0.0), Ok(Duration::ZERO));
        assert_eq!(duration_from_secs(1.5), Ok(Duration::from_millis(1500)));
        assert_eq!(
            duration_from_secs(MAX_SECONDS),
            Ok(Duration::from_secs(31_536_000))
        );
        assert_eq!(duration_from_secs(f64::NAN), Err(SecondsError::NotANumber));
        assert_eq!(duration_from_secs(-1e-300), Err(SecondsError::Negative));
        assert_eq!(
            duration_from_secs(f64::NEG_INFINITY),
            Err(SecondsError::Negative)
        );
        for big in [MAX_SECONDS * 1.000_001, 1e20, 1e300, f64::INFINITY] {
            assert_eq!(duration_from_secs(big), Err(SecondsError::TooLong), "{big}");
        }
        assert!(SecondsError::TooLong.to_string().contains("31536000"));
    }

    #[test]
    fn a_schedule_must_fit_the_longest_time() {
        assert_eq!(schedule_span(10, f64::INFINITY), Ok(Duration::ZERO));
        assert_eq!(schedule_span(10, 2.0), Ok(Duration::from_secs(5)));
        assert_eq!(schedule_span(1, 1e-300), Err(SecondsError::TooLong));
        assert_eq!(schedule_span(0, 1e-300), Err(SecondsError::TooLong));
        assert_eq!(
            schedule_span(10_000_000, 0.1),
            Err(SecondsError::TooLong),
            "10^8 s"
        );
        assert!(schedule_span(5, 0.0).is_err());
        assert!(schedule_span(5, f64::NAN).is_err());
        assert!(schedule_span(1000, min_rate(1000)).is_ok());
    }

    #[test]
    fn sizes_have_ceilings() {
        assert!(check_tokens(MAX_TOKENS_PER_REQUEST, None).is_ok());
        assert_eq!(
            check_tokens(4_000_000_000, None),
            Err(SizeError::Tokens {
                tokens: 4_000_000_000,
                limit: MAX_TOKENS_PER_REQUEST
            })
        );
        assert!(check_tokens(2_000_000, Some(4_000_000)).is_ok());
        assert_eq!(
            check_tokens(5_000_000, Some(4_000_000)),
            Err(SizeError::TokensOverMaxModelLen {
                tokens: 5_000_000,
                limit: 4_000_000
            })
        );
        // A small --max-model-len does not lower the ceiling: it filters requests instead.
        assert!(check_tokens(10_000, Some(4096)).is_ok());
        // --max-model-len lifts the ceiling, but only up to MAX_MODEL_LEN.
        assert!(check_tokens(999_999_999_999, Some(999_999_999_999)).is_err());
        assert!(check_tokens(MAX_MODEL_LEN, Some(999_999_999_999)).is_ok());
        assert!(check_max_model_len(MAX_MODEL_LEN).is_ok());
        assert!(check_max_model_len(999_999_999_999).is_err());
        assert!(check_requests(MAX_REQUESTS).is_ok());
        assert!(check_requests(u64::MAX).is_err());
        assert_eq!(jittered_max(1000, 0.5), 1500);
        assert_eq!(jittered_max(usize::MAX, 0.99), u64::MAX);
        assert_eq!(jittered_max(10, f64::NAN), 20);
    }
}
