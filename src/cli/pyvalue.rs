//! Scalar values read the way Python reads them, so a command line that works with
//! `vllm bench serve` works here: `int()` (`" 12"`, `+3`, `1_000`), `float()` (`inf`, `1e3`,
//! `1_000.5`), vLLM's `human_readable_int` (`1k`, `2M`) and the value rule of dotted JSON
//! arguments (`json.loads`, then a human int, then the plain string).
//!
//! The `parse_*` functions are clap value parsers: they return a short reason on failure, which
//! the CLI error turns into `--flag VALUE: reason`.

use serde_json::Value;

/// Python `int(s)`: surrounding whitespace, an optional sign, ASCII digits with single
/// underscores between them.
pub fn py_int(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let cleaned = strip_digit_underscores(digits)?;
    if cleaned.is_empty() || !cleaned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i128 = cleaned.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// Python `float(s)`: whitespace, `inf`/`infinity`/`nan` in any case, exponents, single
/// underscores between digits.
pub fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let cleaned = strip_digit_underscores(t)?;
    // Rust accepts "inf"/"infinity"/"nan" case-insensitively, like Python; it has no other
    // spellings Python rejects except a leading '+' on nan, which Python accepts too.
    cleaned.parse::<f64>().ok()
}

/// Removes underscores that sit between two digits; `None` for any other underscore
/// (Python rejects `_1`, `1_`, `1__0`).
fn strip_digit_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in b.iter().enumerate() {
        if c == b'_' {
            let before = i > 0 && b[i - 1].is_ascii_digit();
            let after = b.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(before && after) {
                return None;
            }
        } else {
            out.push(c as char);
        }
    }
    Some(out)
}

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
    fn ints_follow_python() {
        assert_eq!(py_int(" 12 "), Some(12));
        assert_eq!(py_int("+3"), Some(3));
        assert_eq!(py_int("-7"), Some(-7));
        assert_eq!(py_int("1_000"), Some(1000));
        for bad in ["", "1.0", "_1", "1_", "1__0", "0x10", "abc", "1e3"] {
            assert_eq!(py_int(bad), None, "{bad}");
        }
    }

    #[test]
    fn floats_follow_python() {
        assert_eq!(py_float("inf"), Some(f64::INFINITY));
        assert_eq!(py_float("Infinity"), Some(f64::INFINITY));
        assert_eq!(py_float("-inf"), Some(f64::NEG_INFINITY));
        assert!(py_float("nan").is_some_and(f64::is_nan));
        assert_eq!(py_float("1e3"), Some(1000.0));
        assert_eq!(py_float(" 0.5 "), Some(0.5));
        assert_eq!(py_float("1_000.5"), Some(1000.5));
        assert_eq!(py_float("-0.5"), Some(-0.5));
        for bad in ["", "1,5", "abc", "1__0"] {
            assert_eq!(py_float(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_like_python_float() {
        let ok: &[(&str, f64)] = &[
            ("30", 30.0),
            (" 8.5 ", 8.5),
            ("1e3", 1000.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("+2", 2.0),
            ("-0.25", -0.25),
            ("1_000", 1000.0),
            ("1_0.2_5", 10.25),
            ("inf", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ];
        for &(text, want) in ok {
            assert_eq!(py_float(text), Some(want), "{text:?}");
        }
        assert!(py_float("NaN").is_some_and(f64::is_nan));
        for bad in ["", "abc", "1__0", "_1", "1_", "1_.5", "1e", "0x10", "1 0"] {
            assert_eq!(py_float(bad), None, "{bad:?}");
        }
    }

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
