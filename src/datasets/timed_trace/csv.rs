//! Azure LLM inference and BurstGPT CSV records.
//!
//! Columns are found by header name, so extra or reordered columns are fine. Fields may be
//! double-quoted (RFC 4180: `""` is a quote). Azure `TIMESTAMP`s are datetimes
//! (`2023-11-16 18:15:46.6805900`, optionally with `T`, `Z` or a `±HH:MM` offset); the reader
//! turns them into seconds after the first row. BurstGPT `Timestamp`s are seconds.

use std::borrow::Cow;

use super::record::{DropReason, Row, RowData};

/// Why a CSV header or row does not parse. The reader adds the file and line; each message
/// names the column or field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    #[error("unterminated quoted field")]
    Unterminated,
    #[error("text after a closing quote: {0:?}")]
    AfterQuote(String),
    #[error("the header lacks column(s) {missing} (it has: {present})")]
    MissingColumns { missing: String, present: String },
    #[error("the row has {len} fields, no {name:?} column")]
    NoField { len: usize, name: String },
    #[error("{name:?} is not a non-negative integer (got {got:?})")]
    NotCount { name: String, got: String },
    #[error("\"Timestamp\" is not a finite number (got {0:?})")]
    NotFiniteTimestamp(String),
    #[error("\"TIMESTAMP\" {got:?} is not a datetime like 2023-11-16 18:15:46.6805900 ({why})")]
    NotDatetime { got: String, why: &'static str },
}

/// Splits one CSV line into fields (quotes removed).
pub(crate) fn split(line: &str) -> Result<Vec<Cow<'_, str>>, CsvError> {
    let mut fields = Vec::new();
    let mut rest = line;
    loop {
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let after = loop {
                match chars.next() {
                    Some((i, '"')) => {
                        if quoted[i + 1..].starts_with('"') {
                            value.push('"');
                            chars.next();
                        } else {
                            break &quoted[i + 1..];
                        }
                    }
                    Some((_, c)) => value.push(c),
                    None => return Err(CsvError::Unterminated),
                }
            };
            fields.push(Cow::Owned(value));
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None if after.trim().is_empty() => return Ok(fields),
                None => return Err(CsvError::AfterQuote(after.to_string())),
            }
        } else {
            match rest.find(',') {
                Some(i) => {
                    fields.push(Cow::Borrowed(rest[..i].trim()));
                    rest = &rest[i + 1..];
                }
                None => {
                    fields.push(Cow::Borrowed(rest.trim()));
                    return Ok(fields);
                }
            }
        }
    }
}

/// Positions of the named columns in a header, or an error listing what is missing.
fn columns<const N: usize>(header: &str, names: [&str; N]) -> Result<[usize; N], CsvError> {
    let cols = split(header)?;
    let find = |name: &str| {
        cols.iter()
            .position(|c| c.trim_start_matches('\u{feff}').trim() == name)
    };
    let mut out = [0; N];
    let mut missing = Vec::new();
    for (slot, name) in out.iter_mut().zip(names) {
        match find(name) {
            Some(i) => *slot = i,
            None => missing.push(name),
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(CsvError::MissingColumns {
            missing: missing.join(", "),
            present: cols.join(", "),
        })
    }
}

/// The `i`-th field of a row, or an error naming the column.
fn field<'a>(fields: &'a [Cow<'a, str>], i: usize, name: &str) -> Result<&'a str, CsvError> {
    fields
        .get(i)
        .map(|f| f.as_ref())
        .ok_or_else(|| CsvError::NoField {
            len: fields.len(),
            name: name.to_string(),
        })
}

/// A token count: a non-negative integer (`12.0` accepted).
fn count(s: &str, name: &str) -> Result<u32, CsvError> {
    let bad = || CsvError::NotCount {
        name: name.to_string(),
        got: s.to_string(),
    };
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let f: f64 = s.parse().map_err(|_| bad())?;
    if f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f) {
        Ok(f as u32)
    } else {
        Err(bad())
    }
}

/// Reads Azure LLM inference rows.
#[derive(Debug)]
pub(crate) struct AzureParser {
    cols: [usize; 3],
    /// The first row's instant: timestamps are seconds after it.
    epoch: Option<Instant>,
}

impl AzureParser {
    pub(crate) fn new(header: &str) -> Result<Self, CsvError> {
        Ok(Self {
            cols: columns(header, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])?,
            epoch: None,
        })
    }

    pub(crate) fn parse(&mut self, line: &str) -> Result<Row, CsvError> {
        let f = split(line)?;
        let [ts, ctx, gen] = self.cols;
        let at = parse_datetime(field(&f, ts, "TIMESTAMP")?)?;
        let input_len = count(field(&f, ctx, "ContextTokens")?, "ContextTokens")?;
        let output_len = count(field(&f, gen, "GeneratedTokens")?, "GeneratedTokens")?;
        let epoch = *self.epoch.get_or_insert(at);
        Ok(Row::Keep(RowData {
            timestamp: at.seconds_since(epoch),
            input_len,
            output_len,
            hash_ids: Box::default(),
            chat: None,
        }))
    }
}

/// Reads BurstGPT rows; failed rows (0 response tokens) and, when a model is chosen, rows
/// of other models are dropped.
#[derive(Debug)]
pub(crate) struct BurstGptParser {
    cols: [usize; 4],
    model: Option<String>,
}

impl BurstGptParser {
    pub(crate) fn new(header: &str, model: Option<String>) -> Result<Self, CsvError> {
        Ok(Self {
            cols: columns(
                header,
                ["Timestamp", "Model", "Request tokens", "Response tokens"],
            )?,
            model,
        })
    }

    pub(crate) fn parse(&mut self, line: &str) -> Result<Row, CsvError> {
        let f = split(line)?;
        let [ts, model, req, resp] = self.cols;
        let raw_ts = field(&f, ts, "Timestamp")?;
        let timestamp = raw_ts
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| CsvError::NotFiniteTimestamp(raw_ts.to_string()))?;
        let input_len = count(field(&f, req, "Request tokens")?, "Request tokens")?;
        let output_len = count(field(&f, resp, "Response tokens")?, "Response tokens")?;
        if let Some(want) = &self.model {
            if field(&f, model, "Model")? != want {
                return Ok(Row::Drop(DropReason::OtherModel));
            }
        }
        if output_len == 0 {
            return Ok(Row::Drop(DropReason::Failed));
        }
        Ok(Row::Keep(RowData {
            timestamp,
            input_len,
            output_len,
            hash_ids: Box::default(),
            chat: None,
        }))
    }
}

/// A UTC instant with nanosecond resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Instant {
    secs: i64,
    nanos: u32,
}

impl Instant {
    fn seconds_since(self, epoch: Instant) -> f64 {
        (self.secs - epoch.secs) as f64 + (f64::from(self.nanos) - f64::from(epoch.nanos)) * 1e-9
    }
}

/// Days from 1970-01-01 to the civil date (proleptic Gregorian; H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]` (naive times are UTC).
pub(crate) fn parse_datetime(s: &str) -> Result<Instant, CsvError> {
    let bad = |why: &'static str| CsvError::NotDatetime {
        got: s.to_string(),
        why,
    };
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<u32, CsvError> {
        let part = s.get(r).ok_or_else(|| bad("too short"))?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad("expected digits"));
        }
        part.parse().map_err(|_| bad("expected digits"))
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b' ' | b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad("wrong layout"));
    }
    let (year, month, day) = (i64::from(num(0..4)?), num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time"));
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("empty fraction"));
        }
        // Keep nanoseconds; further digits (Azure writes 7) are below the resolution.
        for (i, c) in frac.bytes().take(9).take(digits).enumerate() {
            nanos += u32::from(c - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &frac[digits..];
    }
    let offset_secs = match rest {
        "" | "Z" => 0,
        _ if rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let (h, m) = (num(s.len() - 5..s.len() - 3)?, num(s.len() - 2..s.len())?);
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * i64::from(h * 3600 + m * 60)
        }
        _ => return Err(bad("unexpected text after the seconds")),
    };
    let secs = days_from_civil(year, month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset_secs;
    Ok(Instant { secs, nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_plain_and_quoted_fields() {
        assert_eq!(split("a, b ,c").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(
            split(r#""x,y","say ""hi""",3"#).unwrap(),
            vec!["x,y", "say \"hi\"", "3"]
        );
        assert_eq!(split("a,,").unwrap(), vec!["a", "", ""]);
        assert!(split(r#""open,1"#)
            .unwrap_err()
            .to_string()
            .contains("unterminated"));
        assert!(split(r#""a"b,1"#)
            .unwrap_err()
            .to_string()
            .contains("after a closing quote"));
    }

    #[test]
    fn datetimes() {
        let t0 = parse_datetime("1970-01-01 00:00:00").unwrap();
        assert_eq!(t0, Instant { secs: 0, nanos: 0 });
        let t = parse_datetime("2023-11-16 18:15:46.6805900").unwrap();
        assert_eq!(t.secs, 1_700_158_546);
        assert_eq!(t.nanos, 680_590_000);
        assert_eq!(parse_datetime("2023-11-16T18:15:46.6805900Z").unwrap(), t);
        assert_eq!(
            parse_datetime("2023-11-16 20:15:46.68059+02:00").unwrap(),
            t
        );
        assert_eq!(
            parse_datetime("2024-02-29 00:00:00").unwrap().secs,
            1_709_164_800
        );
        let later = parse_datetime("2023-11-17 00:00:00.5").unwrap();
        assert!((later.seconds_since(t) - (20_654.0 + 0.5 - 0.68059)).abs() < 1e-9);
        for bad in [
            "2023-02-29 00:00:00",
            "2023-11-16",
            "2023-11-16 25:00:00",
            "2023/11/16 18:15:46",
            "2023-11-16 18:15:46.",
            "2023-11-16 18:15:46 UTC",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn azure_rows_are_seconds_after_the_first() {
        let mut p = AzureParser::new("TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        let first = p.parse("2023-11-16 18:15:46.6805900,374,44").unwrap();
        let second = p.parse("2023-11-16 18:15:50.1805900,1200,3").unwrap();
        let (Row::Keep(a), Row::Keep(b)) = (first, second) else {
            panic!()
        };
        assert_eq!((a.timestamp, a.input_len, a.output_len), (0.0, 374, 44));
        assert!((b.timestamp - 3.5).abs() < 1e-9);
        assert!(p
            .parse("2023-11-16 18:15:50,x,3")
            .unwrap_err()
            .to_string()
            .contains("\"ContextTokens\""));
        assert!(p
            .parse("2023-11-16 18:15:50,5")
            .unwrap_err()
            .to_string()
            .contains("no \"GeneratedTokens\" column"));
        let e = AzureParser::new("TIMESTAMP,ContextTokens")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks column(s) GeneratedTokens"), "{e}");
    }

    #[test]
    fn burstgpt_drops_failures_and_other_models() {
        let header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
        let mut p = BurstGptParser::new(header, None).unwrap();
        let Row::Keep(d) = p.parse("5,ChatGPT,472,18,490,Conversation log").unwrap() else {
            panic!()
        };
        assert_eq!((d.timestamp, d.input_len, d.output_len), (5.0, 472, 18));
        assert_eq!(
            p.parse("6,GPT-4,0,0,0,Conversation log").unwrap(),
            Row::Drop(DropReason::Failed)
        );
        let mut gpt4 = BurstGptParser::new(header, Some("GPT-4".into())).unwrap();
        assert_eq!(
            gpt4.parse("5,ChatGPT,472,18,490,Conversation log").unwrap(),
            Row::Drop(DropReason::OtherModel)
        );
        assert!(p
            .parse("x,ChatGPT,1,1,2,API log")
            .unwrap_err()
            .to_string()
            .contains("\"Timestamp\""));
    }
}
