//! The one error type of configuration: a single line naming the flag, the value and the
//! reason (`--burstiness 0: must be greater than 0`), and whether the problem is a mistake or a
//! feature we have not built yet. Either way the process exits with code 2, as argparse does
//! for usage errors.

use std::fmt::Display;

use crate::cli::quote;

/// Why a configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// A value or combination of flags that cannot work.
    Invalid,
    /// A valid Python flag, backend or dataset that vllm-bench does not implement yet.
    NotImplemented,
}

/// A configuration error, rendered as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    message: String,
}

impl ConfigError {
    /// `--flag VALUE: reason`.
    pub fn value(flag: &str, value: impl Display, reason: impl Display) -> Self {
        let value = value.to_string();
        Self::invalid(format!("{flag} {}: {reason}", quote(&value)))
    }

    /// `--flag X: reason` for a number given as a float: as typed for the usual ones (`0`,
    /// `-1`, `0.5`), in Python's `repr` (`1e+308`, `1e-310`) where `Display` would print
    /// hundreds of digits.
    pub fn number(flag: &str, x: f64, reason: impl Display) -> Self {
        let plain = x.to_string();
        if plain.len() <= 20 {
            Self::value(flag, plain, reason)
        } else {
            Self::value(flag, crate::pyfmt::float_repr(x), reason)
        }
    }

    /// `--flag: reason`.
    pub fn flag(flag: &str, reason: impl Display) -> Self {
        Self::invalid(format!("{flag}: {reason}"))
    }

    /// Any other invalid configuration.
    pub fn invalid(message: impl Into<String>) -> Self {
        ConfigError {
            kind: ConfigErrorKind::Invalid,
            message: message.into(),
        }
    }

    /// `what` (`--sweep-max-concurrency`, `--backend openai-audio`) is not implemented yet.
    pub fn not_implemented(what: &str) -> Self {
        ConfigError {
            kind: ConfigErrorKind::NotImplemented,
            message: format!(
                "{what}: not implemented yet in vllm-bench (accepted for compatibility with \
                 `vllm bench serve`; remove it to run)"
            ),
        }
    }

    /// Mistake or missing feature.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The process exit code: 2, as for any usage error.
    pub fn exit_code(&self) -> u8 {
        2
    }
}

impl Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_flag_value_and_reason() {
        let e = ConfigError::value("--burstiness", "0", "must be greater than 0");
        assert_eq!(e.to_string(), "--burstiness 0: must be greater than 0");
        assert_eq!(e.kind(), ConfigErrorKind::Invalid);
        assert_eq!(e.exit_code(), 2);
        let e = ConfigError::number("--request-timeout-sec", 1e308, "too long");
        assert_eq!(e.to_string(), "--request-timeout-sec 1e+308: too long");
        let e = ConfigError::number("--burstiness", 1e-310, "x");
        assert_eq!(e.to_string(), "--burstiness 1e-310: x");
        let e = ConfigError::number("--burstiness", -1.0, "x");
        assert_eq!(e.to_string(), "--burstiness -1: x");
        let e = ConfigError::value("--header", "a b", "expected KEY=VALUE");
        assert_eq!(e.to_string(), "--header 'a b': expected KEY=VALUE");
    }

    #[test]
    fn not_implemented_is_its_own_kind() {
        let e = ConfigError::not_implemented("--num-runs");
        assert_eq!(e.kind(), ConfigErrorKind::NotImplemented);
        assert!(e.message().starts_with("--num-runs: not implemented yet"));
        assert!(!e.message().contains('\n'));
    }
}
