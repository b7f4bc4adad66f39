//! What parsing the command line can end in besides a [`Cli`](super::Cli): help or version text
//! to print (exit 0), or a usage error rendered as one line (exit 2).
//!
//! clap's own errors are several lines (message, tip, usage, "For more information"); they are
//! reduced here to `--flag VALUE: reason` or `unrecognized argument '--x' (did you mean
//! '--y'?)`.

use std::borrow::Cow;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The outcome of parsing when no [`Cli`](super::Cli) comes out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// `--help` or `--help=KEYWORD`: text for stdout (ends with a newline); exit code 0.
    Help(String),
    /// `--version`: text for stdout (ends with a newline); exit code 0.
    Version(String),
    /// A usage error: one line for stderr; exit code 2.
    Usage(String),
}

impl CliError {
    /// The process exit code: 0 for help and version, 2 for a usage error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Help(_) | CliError::Version(_) => 0,
            CliError::Usage(_) => 2,
        }
    }

    /// True for help and version output, which go to stdout and are not failures.
    pub fn is_info(&self) -> bool {
        self.exit_code() == 0
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Help(s) | CliError::Version(s) | CliError::Usage(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CliError {}

/// Converts a clap error into a [`CliError`].
pub(crate) fn from_clap(err: clap::Error) -> CliError {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            CliError::Help(with_newline(err.to_string()))
        }
        ErrorKind::DisplayVersion => CliError::Version(with_newline(err.to_string())),
        _ => CliError::Usage(one_line(&err)),
    }
}

/// Help and version text end with exactly one newline, so callers `print!` it as is.
pub(crate) fn with_newline(text: String) -> String {
    let mut text = text.trim_end().to_owned();
    text.push('\n');
    text
}

fn context_str(err: &clap::Error, kind: ContextKind) -> Option<String> {
    match err.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::StyledStr(s) => Some(s.to_string()),
        _ => None,
    }
}

fn context_list(err: &clap::Error, kind: ContextKind) -> Vec<String> {
    match err.get(kind) {
        Some(ContextValue::Strings(v)) => v.clone(),
        Some(ContextValue::StyledStrs(v)) => v.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    }
}

/// `--port <PORT>` → `--port`.
fn flag_of(arg: &str) -> &str {
    arg.split([' ', '=']).next().unwrap_or(arg)
}

fn one_line(err: &clap::Error) -> String {
    let arg = context_str(err, ContextKind::InvalidArg);
    let value = context_str(err, ContextKind::InvalidValue);
    match (err.kind(), arg.as_deref(), value.as_deref()) {
        (ErrorKind::InvalidValue, Some(arg), Some("")) => {
            format!("{}: a value is required", flag_of(arg))
        }
        (ErrorKind::InvalidValue, Some(arg), Some(value)) => {
            let valid = context_list(err, ContextKind::ValidValue);
            let hint = closest(value, &valid)
                .map(|c| format!("did you mean {}? ", quote(c)))
                .unwrap_or_default();
            format!(
                "{} {}: invalid choice ({hint}choose from {})",
                flag_of(arg),
                quote(value),
                valid.join(", ")
            )
        }
        (ErrorKind::ValueValidation, Some(arg), Some(value)) => {
            let reason = std::error::Error::source(err)
                .map(ToString::to_string)
                .unwrap_or_else(|| "invalid value".to_owned());
            format!("{} {}: {reason}", flag_of(arg), quote(value))
        }
        (ErrorKind::WrongNumberOfValues, Some(arg), _) => {
            let number = |kind| match err.get(kind) {
                Some(ContextValue::Number(n)) => n.to_string(),
                _ => "?".to_owned(),
            };
            format!(
                "{}: expected {} values, got {}",
                flag_of(arg),
                number(ContextKind::ExpectedNumValues),
                number(ContextKind::ActualNumValues)
            )
        }
        (ErrorKind::UnknownArgument, Some(arg), _) => {
            let mut line = format!("unrecognized argument '{arg}'");
            if let Some(s) = context_str(err, ContextKind::SuggestedArg) {
                line.push_str(&format!(" (did you mean '{s}'?)"));
            } else if let Some(tip) = context_list(err, ContextKind::Suggested).first() {
                line.push_str(&format!(" ({tip})"));
            }
            line
        }
        (ErrorKind::MissingRequiredArgument, _, _) => {
            let missing = context_list(err, ContextKind::InvalidArg).join(", ");
            match context_str(err, ContextKind::Usage) {
                Some(usage) => format!(
                    "missing {missing}; {}",
                    usage.trim().replacen("Usage:", "usage:", 1)
                ),
                None => format!("missing {missing}"),
            }
        }
        _ => fallback(err),
    }
}

/// The choice a mistyped `value` most likely meant: the nearest by edit distance (case and
/// `_`/`-` aside), when it is near enough to be a typo (a third of its length, at least 1).
fn closest<'v>(value: &str, choices: &'v [String]) -> Option<&'v str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    let value = norm(value);
    let (distance, best) = choices
        .iter()
        .map(|c| (edit_distance(&value, &norm(c)), c.as_str()))
        .min_by_key(|(d, _)| *d)?;
    (distance <= (value.chars().count() / 3).max(1)).then_some(best)
}

/// Levenshtein distance with adjacent transpositions (optimal string alignment), by chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![(0..=b.len()).collect::<Vec<usize>>()];
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (rows[i - 1][j] + 1)
                .min(row[j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(rows[i - 2][j - 2] + 1);
            }
        }
        rows.push(row);
    }
    rows[a.len()][b.len()]
}

/// The first line of clap's message without its `error: ` prefix.
fn fallback(err: &clap::Error) -> String {
    let text = err.to_string();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first
        .trim()
        .strip_prefix("error: ")
        .unwrap_or(first.trim())
        .to_owned()
}
/// Quotes a value for an error line the way a shell would need it: bare when it is plain,
/// single-quoted otherwise (`''` for the empty string).
pub fn quote(value: &str) -> Cow<'_, str> {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,=+@%".contains(c));
    if plain {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!("'{}'", value.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quote_is_bare_when_plain_and_shell_quoted_otherwise() {
        assert_eq!(quote("a-b/c.d"), "a-b/c.d");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
