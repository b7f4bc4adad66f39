//! Python's text forms of numbers: `repr(float)` / `str(float)` and `format(x, ".2f")`, and
//! of JSON documents (`json.dump`: the result files, and the error texts Python's client
//! builds with `json.dumps`), in [`json`].
//! Reading numbers the way `int()` and `float()` do is [`parse`] ([`py_int`], [`py_float`]).
//!
//! The console block, the result JSON, the result file name and several messages embed
//! Python-formatted floats (`40.0`, `inf`, `1e-05`, `2.7940000109083485e-06`, `1e+16`).
//! Rust's `Display` differs (`40`, `0.00001`, `10000000000000000`), so this module rebuilds
//! Python's layout from Rust's shortest round-trip digits (`{:e}`), which are the same digits
//! Python's `repr` picks (both produce the shortest string that reads back to the same
//! double, nearest to the exact value).

use std::fmt::Write;

pub mod json;
mod parse;

pub use parse::{py_float, py_int};

/// Appends Python's `repr(x)` of a float (also `str(x)` in Python 3).
///
/// Layout rule (CPython `float_repr_style = 'short'`): with the value written as
/// `0.DIGITS × 10^decpt`, positional notation is used when `-4 < decpt <= 16`, otherwise
/// scientific with at least two exponent digits (`1e-05`, `1.5e+16`). Integral values keep a
/// `.0`. Non-finite values are `inf`, `-inf` and `nan`.
pub fn push_float_repr(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    let mut sci = String::with_capacity(32);
    // `{:e}` yields the shortest round-trip digits: "-1.2345e-5", "1e16".
    let _ = write!(sci, "{:e}", x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Value = 0.DIGITS × 10^decpt.
    let decpt = exp + 1;
    if negative {
        out.push('-');
    }
    if decpt > -4 && decpt <= 16 {
        push_positional(out, &digits, decpt);
    } else {
        push_scientific(out, &digits, exp);
    }
}

/// `DIGITS` placed around the decimal point at `decpt`, with at least one digit each side.
fn push_positional(out: &mut String, digits: &str, decpt: i32) {
    if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..-decpt {
            out.push('0');
        }
        out.push_str(digits);
        return;
    }
    let point = decpt as usize;
    if digits.len() <= point {
        out.push_str(digits);
        for _ in digits.len()..point {
            out.push('0');
        }
        out.push_str(".0");
    } else {
        out.push_str(&digits[..point]);
        out.push('.');
        out.push_str(&digits[point..]);
    }
}

/// `D[.DDD]e±XX`, Python's exponent form (sign always, at least two exponent digits).
fn push_scientific(out: &mut String, digits: &str, exp: i32) {
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", exp.unsigned_abs());
}

/// Python's `repr(x)` of a float as a new string.
pub fn float_repr(x: f64) -> String {
    let mut s = String::new();
    push_float_repr(&mut s, x);
    s
}

/// Python's `format(x, ".2f")`: correctly rounded (ties to even on the exact binary value),
/// `inf` / `-inf` / `nan` for non-finite values.
pub fn fixed2(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's fixed-precision formatting rounds the exact decimal expansion of the double,
    // ties to even, as CPython's dtoa does.
    format!("{x:.2}")
}

/// Python's `json.dumps(value)` with its defaults: `", "` and `": "` separators, keys in
/// document order, non-ASCII escaped (`ensure_ascii=True`), floats as `repr`. Used for the
/// error text of a failed request, which Python builds this way (so results compare equal).
///
/// The text is strict JSON: a `serde_json::Value` cannot hold a non-finite number (its
/// parser refuses `NaN`), so Python's `NaN`/`Infinity` never arise here; should one appear,
/// it is written as `null`, the rule of every JSON document we write ([`json`]).
pub fn json_dumps(value: &serde_json::Value) -> String {
    json::Json::Value(std::borrow::Cow::Borrowed(value)).to_json_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_dumps_matches_python() {
        // Expected texts from CPython 3.12 `json.dumps`.
        let v: serde_json::Value = serde_json::from_str(
            r#"{"type":"error","code":"server_error","message":"caf\u00e9 \"x\"\n\ud83d\ude00","param":null,"n":[1,2.5,1e-05,true,-3]}"#,
        )
        .unwrap();
        assert_eq!(
            json_dumps(&v),
            r#"{"type": "error", "code": "server_error", "message": "caf\u00e9 \"x\"\n\ud83d\ude00", "param": null, "n": [1, 2.5, 1e-05, true, -3]}"#
        );
        assert_eq!(json_dumps(&serde_json::json!({})), "{}");
    }

    #[test]
    fn repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (2522.0, "2522.0"),
            (40.0, "40.0"),
            (0.5, "0.5"),
            (1.0, "1.0"),
            (99.9, "99.9"),
            (0.0001, "0.0001"),
            (1e-05, "1e-05"),
            (2.7940000109083485e-06, "2.7940000109083485e-06"),
            (8.669900034874445e-05, "8.669900034874445e-05"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (2.6520138539999607, "2.6520138539999607"),
            (2724.12546273, "2724.12546273"),
            (-0.25, "-0.25"),
            (-1e-07, "-1e-07"),
            (1e22, "1e+22"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (100.0, "100.0"),
            (0.1, "0.1"),
        ];
        for &(x, want) in cases {
            assert_eq!(float_repr(x), want, "repr of {x:e}");
        }
    }

    #[test]
    fn fixed2_matches_python() {
        // Python: format(x, '.2f')
        let cases: &[(f64, &str)] = &[
            (2.6520138539999607, "2.65"),
            (96.0, "96.00"),
            (206195.59, "206195.59"),
            (0.125, "0.12"), // exact tie → even
            (0.375, "0.38"), // exact tie → even
            (2.675, "2.67"), // 2.67499999... in binary
            (1.005, "1.00"), // 1.00499999...
            (-0.001, "-0.00"),
            (0.0, "0.00"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for &(x, want) in cases {
            assert_eq!(fixed2(x), want, "fixed2 of {x:e}");
        }
    }
}
