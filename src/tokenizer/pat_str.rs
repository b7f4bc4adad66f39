//! Reads a tiktoken split pattern (`pat_str`) out of a model's Python tokenizer source.
//!
//! Repos that ship a tiktoken rank file (Kimi's `tiktoken.model`, Qwen-1's `qwen.tiktoken`)
//! define the pre-tokenizer regex only in their `tokenization_*.py`, e.g.
//! `pat_str = "|".join([r"""[\p{Han}]+""", r"""..."""])` or `PAT_STR = r"""..."""`. We never
//! run that code; this module parses the one assignment statically. Supported right-hand
//! sides: one string literal or several adjacent ones (implicit concatenation, optionally in
//! parentheses), and `"<sep>".join([...])` / `.join((...))` over such literals. Literals may
//! be raw or not, single- or triple-quoted; `#` comments between list items are skipped.
//! Anything else (variables, f-strings, function calls) is not understood and yields `None`.

/// The `pat_str` / `PAT_STR` value assigned in `source`, if it can be read statically.
pub fn extract(source: &str) -> Option<String> {
    let mut search_from = 0;
    while let Some(pos) = find_assignment(source, search_from) {
        let mut p = Parser {
            src: source.as_bytes(),
            pos,
        };
        if let Some(value) = p.expression() {
            return Some(value);
        }
        search_from = pos;
    }
    None
}

/// Byte offset just after `pat_str =` (case-insensitive name, not `==`), from `from`.
fn find_assignment(source: &str, from: usize) -> Option<usize> {
    let lower = source.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut start = from;
    while let Some(rel) = lower[start..].find("pat_str") {
        let at = start + rel;
        start = at + "pat_str".len();
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]) || bytes[at - 1] == b'.';
        let after_ok = bytes.get(start).is_none_or(|&b| !is_ident_byte(b));
        if !before_ok || !after_ok {
            continue;
        }
        let mut p = start;
        // An optional annotation (`pat_str: str = ...`).
        while p < bytes.len() && bytes[p] != b'=' && bytes[p] != b'\n' {
            p += 1;
        }
        if bytes.get(p) == Some(&b'=') && bytes.get(p + 1) != Some(&b'=') {
            return Some(p + 1);
        }
    }
    None
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    /// `literal+` | `( literal+ )` | `literal.join([literal+, ...])`.
    fn expression(&mut self) -> Option<String> {
        self.skip_space(false);
        if self.peek() == Some(b'(') {
            self.pos += 1;
            let inner = self.expression()?;
            self.skip_space(true);
            return self.eat(b')').then_some(inner);
        }
        let first = self.concatenated_literals(false)?;
        self.skip_space(false);
        if self.src[self.pos..].starts_with(b".join(") {
            self.pos += ".join(".len();
            let items = self.sequence()?;
            self.skip_space(true);
            return self.eat(b')').then(|| items.join(&first));
        }
        Some(first)
    }

    /// `[a, b, ...]` or `(a, b, ...)` of literals (trailing comma allowed).
    fn sequence(&mut self) -> Option<Vec<String>> {
        self.skip_space(true);
        let close = match self.peek()? {
            b'[' => b']',
            b'(' => b')',
            _ => return None,
        };
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_space(true);
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.concatenated_literals(true)?);
            self.skip_space(true);
            if !self.eat(b',') {
                self.skip_space(true);
                return self.eat(close).then_some(items);
            }
        }
    }

    /// One or more adjacent string literals (Python joins them).
    fn concatenated_literals(&mut self, multiline: bool) -> Option<String> {
        let mut out = self.literal()?;
        loop {
            let save = self.pos;
            self.skip_space(multiline);
            match self.literal() {
                Some(next) => out.push_str(&next),
                None => {
                    self.pos = save;
                    return Some(out);
                }
            }
        }
    }

    /// A string literal with an optional `r`/`u` prefix (bytes and f-strings are refused).
    fn literal(&mut self) -> Option<String> {
        let start = self.pos;
        let mut raw = false;
        while let Some(b) = self.peek() {
            match b {
                b'r' | b'R' => raw = true,
                b'u' | b'U' => {}
                _ => break,
            }
            self.pos += 1;
        }
        let quote = match self.peek() {
            Some(q @ (b'"' | b'\'')) => q,
            _ => {
                self.pos = start;
                return None;
            }
        };
        let triple = self.src[self.pos..].starts_with(&[quote; 3]);
        self.pos += if triple { 3 } else { 1 };
        let body_start = self.pos;
        let body_end = loop {
            match self.peek()? {
                b'\\' => self.pos += 2,
                b'\n' if !triple => return None,
                q if q == quote => {
                    if !triple {
                        break self.pos;
                    }
                    if self.src[self.pos..].starts_with(&[quote; 3]) {
                        break self.pos;
                    }
                    self.pos += 1;
                }
                _ => self.pos += 1,
            }
        };
        self.pos = body_end + if triple { 3 } else { 1 };
        let body = std::str::from_utf8(&self.src[body_start..body_end]).ok()?;
        Some(if raw { body.to_owned() } else { unescape(body) })
    }

    /// Skips blanks (and newlines and `#` comments when inside brackets).
    fn skip_space(&mut self, multiline: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'\\' if self.src.get(self.pos + 1) == Some(&b'\n') => self.pos += 2,
                b'\n' | b'\r' if multiline => self.pos += 1,
                b'#' if multiline => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }
}

/// Python's escape processing for a non-raw literal; unknown escapes keep their backslash
/// (as Python does, which is what makes `"\p{L}"` work in a non-raw string).
fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\n') => {}
            Some(k @ ('x' | 'u' | 'U')) => {
                let width = match k {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = (0..width).filter_map(|_| chars.next()).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push('\\');
                        out.push(k);
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_raw_triple_quoted_literal() {
        let src = "class T:\n    PAT_STR = r\"\"\"(?i:'s|'t)|\\p{N}| ?[^\\s\\p{L}]+\"\"\"\n";
        assert_eq!(extract(src).unwrap(), r"(?i:'s|'t)|\p{N}| ?[^\s\p{L}]+");
    }

    #[test]
    fn join_over_a_list_with_comments_and_concatenation() {
        let src = r#"
    def __init__(self):
        pat_str = "|".join(
            [
                r"""[\p{Han}]+""",  # CJK
                r"""\p{N}{1,3}""",
                # a comment line
                r"[\r\n]" r"+",
            ]
        )
"#;
        assert_eq!(extract(src).unwrap(), r"[\p{Han}]+|\p{N}{1,3}|[\r\n]+");
    }

    #[test]
    fn non_raw_escapes_follow_python() {
        let src = "pat_str = '\\\\s+(?!\\\\S)|\\p{L}\\n'\n";
        assert_eq!(extract(src).unwrap(), "\\s+(?!\\S)|\\p{L}\n");
    }

    #[test]
    fn comparisons_and_other_names_are_skipped() {
        assert_eq!(extract("if pat_str == 'x':\n    pass\n"), None);
        assert_eq!(extract("my_pat_str = 'x'\n"), None);
        assert_eq!(
            extract("pat_str = build()\npat_str = 'ok'\n").unwrap(),
            "ok"
        );
    }
}
