//! Text from outside (a server's `model_id`, a result file's keys and strings, an error
//! body) made safe to print on a terminal: control characters become visible escapes.
//!
//! Why: a terminal acts on escape sequences. A result file or a server that puts `ESC [ 2 J`
//! or an OSC title sequence into a string we print could clear the screen, rewrite earlier
//! lines (hiding a regression in a `--compare` table) or retitle the window. Printing the
//! escape (`\x1b`) shows what the string holds and does nothing to the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character (C0, DEL, C1) and every bidirectional-override
/// character written as an escape: `\x1b`, `\x7f`, `\u{202e}`. Borrowed when nothing
/// needed escaping (the common case).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Control characters, and the bidi controls that reorder what follows them on screen.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert!(matches!(printable("org/model-7b ü"), Cow::Borrowed(_)));
        assert_eq!(printable("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(printable("t\x1b]0;x\x07"), "t\\x1b]0;x\\x07");
        assert_eq!(printable("\n\r\t\x7f\u{9b}"), "\\x0a\\x0d\\x09\\x7f\\x9b");
        assert_eq!(printable("ab\u{202e}cd"), "ab\\u{202e}cd");
    }
}
