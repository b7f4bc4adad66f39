//! Scalar values read the way Python reads them, so a command line that works with
//! `vllm bench serve` works here: `int()` (`" 12"`, `+3`, `1_000`), `float()` (`inf`, `1e3`,
//! `1_000.5`), vLLM's `human_readable_int` (`1k`, `2M`) and the value rule of dotted JSON
//! arguments (`json.loads`, then a human int, then the plain string).
//!
//! The `parse_*` functions are clap value parsers: they return a short reason on failure, which
//! the CLI error turns into `--flag VALUE: reason`.

use serde_json::Value;

pub use crate::pyfmt::{py_float, py_int};

/// vLLM's `human_readable_int`: `1k` = 1000, `25.6k` = 25600, `1K` = 1024, `2M` = 2·2²⁰
/// (binary suffixes take no decimals); otherwise a plain Python int.
pub fn human_readable_int(s: &str) -> Option<i128> {
    let t = s.trim();
    if let Some(suffix) = t.chars().last().filter(|c| "kmgtKMGT".contains(*c)) {
        let number = &t[..t.len() - 1];
        let plain = !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && number.bytes().next().is_some_and(|b| b.is_ascii_digit())
            && number.bytes().last().is_some_and(|b| b.is_ascii_digit())
            && number.bytes().filter(|&b| b == b'.').count() <= 1;
        if plain {
            let exp = match suffix.to_ascii_lowercase() {
                'k' => 1,
                'm' => 2,
                'g' => 3,
                _ => 4,
            };
            return if suffix.is_ascii_lowercase() {
                let v: f64 = number.parse().ok()?;
                // int(float(number) * mult): truncation toward zero, as Python's int().
                Some((v * 1000f64.powi(exp)).trunc() as i128)
            } else {
                let v: i128 = number.parse().ok()?; // decimals are an error in Python
                v.checked_mul(1i128 << (10 * exp))
            };
        }
    }
    py_int(t)
}

/// The value of a dotted argument (`--extra-body.key VALUE`): JSON if it parses, else a human
/// int (`1k`), else the string itself.
pub fn dotted_value(s: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(s) {
        return v;
    }
    match human_readable_int(s) {
        Some(i) => i64::try_from(i)
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(s)),
        None => Value::from(s),
    }
}

/// Why a value parser refused a value; clap prints it after the flag and the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("expected an integer")]
    NotInteger,
    #[error("expected a non-negative integer")]
    Negative,
    #[error("integer out of range")]
    OutOfRange,
    #[error("expected a number")]
    NotNumber,
    #[error("a port must be between 1 and 65535")]
    Port,
}

/// clap value parser: a Python int that fits `T` (e.g. `usize`, `u16`, `i64`).
pub fn parse_int<T: TryFrom<i128>>(s: &str) -> Result<T, ValueError> {
    let v = py_int(s).ok_or(ValueError::NotInteger)?;
    T::try_from(v).map_err(|_| {
        if v < 0 {
            ValueError::Negative
        } else {
            ValueError::OutOfRange
        }
    })
}

/// clap value parser: a Python float (`inf` and `nan` included; rules reject them where they
/// make no sense).
pub fn parse_float(s: &str) -> Result<f64, ValueError> {
    py_float(s).ok_or(ValueError::NotNumber)
}

/// clap value parser for `--port`: an integer in 1..=65535.
pub fn parse_port(s: &str) -> Result<u16, ValueError> {
    match py_int(s) {
        Some(v) if (1..=65535).contains(&v) => Ok(v as u16),
        Some(_) => Err(ValueError::Port),
        None => Err(ValueError::NotInteger),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn human_ints_follow_vllm() {
        assert_eq!(human_readable_int("1k"), Some(1000));
        assert_eq!(human_readable_int("1K"), Some(1024));
        assert_eq!(human_readable_int("25.6k"), Some(25600));
        assert_eq!(human_readable_int("2M"), Some(2 << 20));
        assert_eq!(human_readable_int("80g"), Some(80_000_000_000));
        assert_eq!(human_readable_int("1.5K"), None);
        assert_eq!(human_readable_int("42"), Some(42));
        assert_eq!(human_readable_int("k"), None);
    }

    #[test]
    fn dotted_values_try_json_then_human_int_then_string() {
        assert_eq!(dotted_value("0.5"), json!(0.5));
        assert_eq!(dotted_value("true"), json!(true));
        assert_eq!(dotted_value("[1,2]"), json!([1, 2]));
        assert_eq!(dotted_value("{\"a\": 1}"), json!({"a": 1}));
        assert_eq!(dotted_value("1k"), json!(1000));
        assert_eq!(dotted_value("hello"), json!("hello"));
        assert_eq!(dotted_value("\"quoted\""), json!("quoted"));
    }

    #[test]
    fn value_parsers_give_reasons() {
        assert_eq!(parse_int::<usize>("10"), Ok(10));
        assert_eq!(parse_int::<usize>("-1"), Err(ValueError::Negative));
        assert_eq!(parse_int::<u8>("300"), Err(ValueError::OutOfRange));
        assert_eq!(parse_port("8000"), Ok(8000));
        assert!(parse_port("0").is_err());
        assert!(parse_port("65536").is_err());
        assert_eq!(parse_float("x"), Err(ValueError::NotNumber));
        assert_eq!(
            ValueError::Negative.to_string(),
            "expected a non-negative integer"
        );
    }
}
