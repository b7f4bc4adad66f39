//! The one Python-literal value on the command line: `--random-mm-bucket-config`, a dict from
//! `(height, width, frames)` tuples to probabilities, read by Python with `ast.literal_eval`:
//! `{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}`. Keys may also be quoted tuples
//! (`{"(256, 256, 1)": 0.5}`, the JSON form), which Python normalises the same way.

/// A `(height, width, frames)` bucket key; `frames == 1` is an image, more is a video.
pub use crate::datasets::random_mm::BucketKey;

/// Why a bucket dict does not parse; positions are 1-based byte offsets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    #[error("expected '{expected}' at position {at}")]
    Expected { expected: char, at: usize },
    #[error("expected a non-negative integer at position {0}")]
    Integer(usize),
    #[error("expected a number at position {0}")]
    Number(usize),
    #[error("keys must be (height, width, frames) tuples")]
    KeyNotTuple,
    #[error("unexpected text after the closing '}}'")]
    TrailingText,
}

/// Parses the bucket dict, keeping the written order.
pub fn parse_bucket_config(s: &str) -> Result<Vec<(BucketKey, f64)>, LiteralError> {
    let mut p = Cursor {
        s: s.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let mut out = Vec::new();
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = match p.peek() {
            Some(q @ (b'"' | b'\'')) => {
                p.i += 1;
                let key = p.tuple()?;
                p.expect(q)?;
                key
            }
            _ => p.tuple()?,
        };
        p.expect(b':')?;
        let prob = p.number()?;
        if let Some(entry) = out.iter_mut().find(|(k, _)| *k == key) {
            entry.1 = prob; // a repeated key keeps its first position, as in a Python dict
        } else {
            out.push((key, prob));
        }
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        p.expect(b',')?;
    }
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(LiteralError::TrailingText);
    }
    Ok(out)
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), LiteralError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(LiteralError::Expected {
                expected: c as char,
                at: self.i + 1,
            })
        }
    }

    fn token(&mut self) -> &str {
        self.skip_ws();
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || b"+-._".contains(c))
        {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default()
    }

    fn int(&mut self) -> Result<u32, LiteralError> {
        let at = self.i + 1;
        let t = self.token().to_owned();
        t.parse().map_err(|_| LiteralError::Integer(at))
    }

    fn number(&mut self) -> Result<f64, LiteralError> {
        let at = self.i + 1;
        let t = self.token().to_owned();
        crate::cli::pyvalue::py_float(&t).ok_or(LiteralError::Number(at))
    }

    fn tuple(&mut self) -> Result<BucketKey, LiteralError> {
        self.expect(b'(').map_err(|_| LiteralError::KeyNotTuple)?;
        let h = self.int()?;
        self.expect(b',')?;
        let w = self.int()?;
        self.expect(b',')?;
        let t = self.int()?;
        self.eat(b',');
        self.expect(b')')?;
        Ok((h, w, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_and_json_forms_parse() {
        assert_eq!(
            parse_bucket_config("{(256, 256, 1): 0.5, (720,1280,16): 0.0}").unwrap(),
            vec![((256, 256, 1), 0.5), ((720, 1280, 16), 0.0)]
        );
        assert_eq!(
            parse_bucket_config(r#"{"(1024, 800, 1)": 1.0,}"#).unwrap(),
            vec![((1024, 800, 1), 1.0)]
        );
        assert_eq!(parse_bucket_config("{}").unwrap(), vec![]);
        assert_eq!(
            parse_bucket_config("{(1,1,1): 0.2, (1,1,1): 0.7}").unwrap(),
            vec![((1, 1, 1), 0.7)]
        );
    }

    #[test]
    fn malformed_input_is_reported() {
        assert!(parse_bucket_config("{(1, 2): 0.5}").is_err());
        assert!(parse_bucket_config("{(1, 2, 3) 0.5}").is_err());
        assert!(parse_bucket_config("[(1, 2, 3)]").is_err());
        assert!(parse_bucket_config("{(1, 2, 3): x}").is_err());
        assert!(parse_bucket_config("{(1, 2, 3): 1} extra").is_err());
        assert!(parse_bucket_config("{(-1, 2, 3): 1}").is_err());
    }
}
