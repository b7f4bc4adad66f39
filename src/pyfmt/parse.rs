//! Reading numbers the way Python's `int()` and `float()` do (`" 12"`, `+3`, `1_000`, `inf`,
//! `1e3`): flags, dotted JSON arguments and the goodput SLOs (`--goodput ttft:1_000`) all take
//! numbers in Python's spelling, so the command line, the config and the metrics share one
//! reader. The written side (`repr(float)`) is the parent module.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
