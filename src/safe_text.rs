//! Text that is safe to show: what a server sent, escaped so it cannot drive the terminal,
//! and what a user typed, with its secrets taken out.
//!
//! Why one module on the ground floor: text from outside reaches the console through many
//! doors (a failed request's error, an `error` event of a stream, a model name, a status
//! line), and every one of them must go through the same escaping; a URL or a JSON value a
//! user typed can carry a credential (`http://user:key@host`, `?api_key=...`) and reaches
//! error lines from several flags. One helper each, used by every printer, so no door is
//! forgotten and the rules are written once.
//!
//! - [`escape`] / [`Escaped`]: control characters (C0, DEL, C1) and the bidirectional
//!   formatting characters (which reorder what the terminal shows) become visible escapes
//!   (`\x1b`, `\x0a`, `\x9b`, `\u{202e}`); everything else, non-ASCII text included, is
//!   kept. A terminal acts on escape sequences: a server or a result file that puts
//!   `ESC [ 2 J` or an OSC title sequence into a string we print could clear the screen,
//!   rewrite earlier lines (hiding a regression in a `--compare` table) or retitle the
//!   window; printed as an escape, it shows what the string holds and does nothing.
//! - [`redact_url`]: the user information of a URL (`user:password@`) and the value of
//!   every query parameter become `***`.

use std::borrow::Cow;
use std::fmt::{self, Display, Write};

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// True for a character that must not reach a terminal as it is: a control character
/// (C0, DEL, C1: `\x1b` starts an escape sequence, `\r` overwrites the line, `\u{9b}` is a
/// one-byte CSI) or a bidirectional formatting character (it reorders the text shown).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` shown safely: every control or bidirectional formatting character as an escape
/// (`\x1b`, `\x0a`, `\x9b`, `\u{202e}`). Borrowed when nothing needs escaping (the common
/// case).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(Escaped(text).to_string())
}

/// `text` of several lines shown safely: as [`escape`], but line feeds and tabs are kept.
/// The console's last line of defence: every block and line it writes goes through it, so
/// server text that reached a message without [`escape`] still cannot drive the terminal.
pub fn escape_keeping_lines(text: &str) -> Cow<'_, str> {
    let unsafe_here = |c: char| is_unsafe(c) && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_here) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let _ = write_escaped(&mut out, text, unsafe_here);
    Cow::Owned(out)
}

/// [`escape`] as a `Display`, for `format!` and `writeln!` without a copy.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(f, self.0, is_unsafe)
    }
}

/// Writes `text` with each character `unsafe_here` picks as `\xNN` (below U+0100) or
/// `\u{N}`.
fn write_escaped(
    out: &mut impl Write,
    text: &str,
    unsafe_here: impl Fn(char) -> bool,
) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(&unsafe_here) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        if (c as u32) < 0x100 {
            write!(out, "\\x{:02x}", c as u32)?;
        } else {
            write!(out, "\\u{{{:x}}}", c as u32)?;
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// `url` with its credentials replaced by [`REDACTED`]: the user information before the
/// host (`http://user:key@host` → `http://***@host`) and the value of every query parameter
/// (`?api_key=sk-1&x=2` → `?api_key=***&x=***`; which names hold secrets differs from server
/// to server, so none is shown). Control characters are escaped too ([`escape`]). Text
/// that is not a URL is only escaped, unless it holds an `@` before its first `/`, which is
/// redacted as user information.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let userinfo = rest[..authority_end].rfind('@');
    let query = rest.find('?');
    if userinfo.is_none() && query.is_none() {
        return escape(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    let after_user = match userinfo {
        Some(at) => {
            out.push_str(REDACTED);
            &rest[at..]
        }
        None => rest,
    };
    match after_user.find('?') {
        None => out.push_str(after_user),
        Some(q) => {
            out.push_str(&after_user[..=q]);
            let (query, fragment) = match after_user[q + 1..].find('#') {
                Some(h) => after_user[q + 1..].split_at(h),
                None => (&after_user[q + 1..], ""),
            };
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match pair.split_once('=') {
                    Some((name, _)) => {
                        let _ = write!(out, "{name}={REDACTED}");
                    }
                    None => out.push_str(pair),
                }
            }
            out.push_str(fragment);
        }
    }
    Cow::Owned(escape(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(escape("plain café 日本"), Cow::Borrowed(_)));
        assert_eq!(
            escape("\x1b[2J\x1b]0;pwned\x07ok"),
            "\\x1b[2J\\x1b]0;pwned\\x07ok"
        );
        assert_eq!(escape("a\r\nb\tc\0\x7f"), "a\\x0d\\x0ab\\x09c\\x00\\x7f");
        assert_eq!(escape("\u{9b}31m \u{202e}txt"), "\\x9b31m \\u{202e}txt");
        assert_eq!(Escaped("x\x1by").to_string(), "x\\x1by");
        assert_eq!(
            escape_keeping_lines("line 1\n\tline\x1b[2K 2\r\n"),
            "line 1\n\tline\\x1b[2K 2\\x0d\n"
        );
        // Nothing unsafe is left, whatever the input.
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!escape(&all).chars().any(is_unsafe));
    }

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact_url("http://user:sk-secret@host:8000/v1"),
            "http://***@host:8000/v1"
        );
        assert_eq!(redact_url("https://tok@h"), "https://***@h");
        assert_eq!(
            redact_url("http://h:1/metrics?api_key=sk-1&x=2&flag#frag"),
            "http://h:1/metrics?api_key=***&x=***&flag#frag"
        );
        assert_eq!(
            redact_url("http://u:p@h/p?token=t"),
            "http://***@h/p?token=***"
        );
        // An `@` in the path is not user information.
        assert_eq!(redact_url("http://h/a@b"), "http://h/a@b");
        assert_eq!(redact_url("user:pw@h:1"), "***@h:1");
        assert!(matches!(
            redact_url("http://127.0.0.1:8000"),
            Cow::Borrowed(_)
        ));
        assert_eq!(redact_url("http://h/\x1b[1m"), "http://h/\\x1b[1m");
        assert_eq!(redact_url("http://\x1b:pw@h?k=\x1b"), "http://***@h?k=***");
    }
}
