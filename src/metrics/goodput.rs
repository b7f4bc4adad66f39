//! Goodput service-level objectives (`--goodput ttft:30 tpot:8 e2el:400`): parsing with
//! Python's `parse_goodput` / `check_goodput_args` rules and messages, and the per-request
//! "is this request good?" test used by the calculator.
//!
//! This is the one `--goodput` parser: the configuration calls it and words its errors in the
//! `--flag VALUE: reason` style from the structured [`GoodputError`]. Two deliberate departures
//! from Python: a `nan` value is refused as a format error (Python accepts it, and then no
//! request can ever meet the SLO), and `ttfo` (time to first output token, ours) is a key too:
//! a request whose tokens were all reasoning never meets a `ttfo` SLO.

use crate::pyfmt::float_repr;
use crate::pyfmt::py_float;

/// The SLOs given with `--goodput`, in milliseconds. An empty config means "no goodput":
/// Python then prints no goodput line and saves `request_goodput: null`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GoodputConfig {
    pub ttft_ms: Option<f64>,
    pub ttfo_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

/// Why a `--goodput` value was rejected. The text after `--goodput: ` is Python's message;
/// `pair` is the offending `KEY:VALUE` as given (for a repeated key, the one whose value won).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoodputError {
    #[error(
        "--goodput {pair:?}: Invalid format found for service level objectives. Specify \
         service level objectives for goodput as \"KEY:VALUE\" pairs, where the key is a \
         metric name, and the value is a number in milliseconds."
    )]
    Format {
        pair: String,
        /// The pair is `KEY:VALUE`; only its value is not a number.
        key_value: bool,
    },
    #[error(
        "--goodput: Invalid metric name found, {name}: {value}. The service level objective \
         name should be one of ['ttft', 'ttfo', 'tpot', 'e2el']. "
    )]
    Name {
        name: String,
        value: String,
        pair: String,
    },
    #[error(
        "--goodput: Invalid value found, {name}: {value}. The service level objective value \
         should be non-negative."
    )]
    Negative {
        name: String,
        value: String,
        pair: String,
    },
}

impl GoodputError {
    /// The offending `KEY:VALUE` as given.
    pub fn pair(&self) -> &str {
        match self {
            GoodputError::Format { pair, .. }
            | GoodputError::Name { pair, .. }
            | GoodputError::Negative { pair, .. } => pair,
        }
    }
}

impl GoodputConfig {
    /// Parses `KEY:VALUE` pairs as Python does: every pair must split on `:` into exactly
    /// two parts with a float value (else a format error); a repeated key keeps its first
    /// position and its last value; then each key, in that order, must be `ttft`, `tpot` or
    /// `e2el` and its value non-negative.
    pub fn parse<S: AsRef<str>>(pairs: &[S]) -> Result<Self, GoodputError> {
        // (name, value, the pair it came from)
        let mut entries: Vec<(&str, f64, &str)> = Vec::new();
        for pair in pairs {
            let pair = pair.as_ref();
            let format_error = |key_value| GoodputError::Format {
                pair: pair.to_string(),
                key_value,
            };
            let mut parts = pair.split(':');
            let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format_error(false));
            };
            let value = py_float(value)
                .filter(|v| !v.is_nan())
                .ok_or_else(|| format_error(true))?;
            match entries.iter_mut().find(|(n, _, _)| *n == name) {
                Some(entry) => (entry.1, entry.2) = (value, pair),
                None => entries.push((name, value, pair)),
            }
        }
        let mut config = GoodputConfig::default();
        for (name, value, pair) in entries {
            let slot = match name {
                "ttft" => &mut config.ttft_ms,
                "ttfo" => &mut config.ttfo_ms,
                "tpot" => &mut config.tpot_ms,
                "e2el" => &mut config.e2el_ms,
                _ => {
                    return Err(GoodputError::Name {
                        name: name.to_string(),
                        value: float_repr(value),
                        pair: pair.to_string(),
                    });
                }
            };
            if value < 0.0 {
                return Err(GoodputError::Negative {
                    name: name.to_string(),
                    value: float_repr(value),
                    pair: pair.to_string(),
                });
            }
            *slot = Some(value);
        }
        Ok(config)
    }

    /// True when no SLO was given (Python: `if not goodput_config_dict`).
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none()
            && self.ttfo_ms.is_none()
            && self.tpot_ms.is_none()
            && self.e2el_ms.is_none()
    }

    /// Whether one successful request meets every given SLO. Inputs are seconds; `tpot_s`
    /// is 0 for requests with at most one output token, as in Python; `ttfo_s` is `None`
    /// for a request that never sent an output token (it fails a `ttfo` SLO).
    pub fn is_good(&self, ttft_s: f64, ttfo_s: Option<f64>, tpot_s: f64, e2el_s: f64) -> bool {
        // Python compares `slo_ms / 1000 >= value_s`; NaN never meets an SLO.
        let meets = |slo_ms: Option<f64>, value_s: f64| match slo_ms {
            Some(ms) => ms / 1000.0 >= value_s,
            None => true,
        };
        let ttfo_met = match (self.ttfo_ms, ttfo_s) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(_), Some(v)) => meets(self.ttfo_ms, v),
        };
        meets(self.ttft_ms, ttft_s)
            && ttfo_met
            && meets(self.tpot_ms, tpot_s)
            && meets(self.e2el_ms, e2el_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs() {
        let c = GoodputConfig::parse(&["ttft:30", "tpot:8", "e2el:400"]).unwrap();
        assert_eq!(c.ttft_ms, Some(30.0));
        assert_eq!(c.tpot_ms, Some(8.0));
        assert_eq!(c.e2el_ms, Some(400.0));
        assert!(!c.is_empty());
        assert!(GoodputConfig::parse::<&str>(&[]).unwrap().is_empty());
        // Last value wins; Python float syntax.
        let c = GoodputConfig::parse(&["ttft:1", "ttft: 2.5e1 "]).unwrap();
        assert_eq!(c.ttft_ms, Some(25.0));
    }

    #[test]
    fn format_errors() {
        for bad in ["ttft", "ttft:1:2", "ttft:abc", "ttft:", ":"] {
            let err = GoodputConfig::parse(&[bad]).unwrap_err();
            assert!(matches!(err, GoodputError::Format { .. }), "{bad}");
            assert!(err
                .to_string()
                .contains("Invalid format found for service level objectives."));
        }
    }

    #[test]
    fn errors_name_the_pair_and_nan_is_refused() {
        let err = GoodputConfig::parse(&["ttft:nan"]).unwrap_err();
        assert_eq!(
            err,
            GoodputError::Format {
                pair: "ttft:nan".into(),
                key_value: true
            }
        );
        let err = GoodputConfig::parse(&["ttft=1"]).unwrap_err();
        assert!(matches!(
            err,
            GoodputError::Format {
                key_value: false,
                ..
            }
        ));
        // A repeated key reports the pair whose value won.
        let err = GoodputConfig::parse(&["tpot:1", "tpot:-1"]).unwrap_err();
        assert_eq!(err.pair(), "tpot:-1");
        assert_eq!(GoodputConfig::parse(&["x:1"]).unwrap_err().pair(), "x:1");
    }

    #[test]
    fn validation_messages_match_python() {
        let err = GoodputConfig::parse(&["foo:1"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--goodput: Invalid metric name found, foo: 1.0. The service level objective name \
             should be one of ['ttft', 'ttfo', 'tpot', 'e2el']. "
        );
        let err = GoodputConfig::parse(&["tpot:-2"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--goodput: Invalid value found, tpot: -2.0. The service level objective value \
             should be non-negative."
        );
        // Python checks keys in dict order: the first offending pair is reported.
        let err = GoodputConfig::parse(&["ttft:-1", "foo:1"]).unwrap_err();
        assert!(matches!(err, GoodputError::Negative { .. }));
        // Formats are all checked before names.
        let err = GoodputConfig::parse(&["foo:1", "ttft"]).unwrap_err();
        assert!(matches!(err, GoodputError::Format { .. }));
    }

    #[test]
    fn good_requests() {
        let c = GoodputConfig {
            ttft_ms: Some(30.0),
            tpot_ms: Some(8.0),
            ..GoodputConfig::default()
        };
        assert!(c.is_good(0.030, None, 0.008, 99.0));
        assert!(!c.is_good(0.0301, None, 0.0, 0.0));
        assert!(!c.is_good(0.01, None, 0.0081, 0.0));
        assert!(!c.is_good(f64::NAN, None, 0.0, 0.0));
        assert!(GoodputConfig::default().is_good(1e9, None, 1e9, 1e9));
    }

    #[test]
    fn a_ttfo_slo_is_missed_by_a_request_that_only_reasoned() {
        let c = GoodputConfig::parse(&["ttfo:500"]).unwrap();
        assert_eq!(c.ttfo_ms, Some(500.0));
        assert!(!c.is_empty());
        assert!(c.is_good(0.01, Some(0.5), 0.0, 9.0));
        assert!(!c.is_good(0.01, Some(0.501), 0.0, 9.0));
        assert!(!c.is_good(0.01, None, 0.0, 9.0));
    }
}
