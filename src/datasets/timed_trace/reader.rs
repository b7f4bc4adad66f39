//! Streaming trace reader: line by line (never the whole file in memory), one parser per
//! format, the malformed-line policy, the replay window and `num_prompts`, and the arrival
//! time of every kept record.
//!
//! Timing follows Python's `timed_trace` + `get_request(self_timed=True)`: a record's trace
//! time is `timestamp × sec_multiplier` seconds and it is sent that long after the run
//! starts; records keep file order (Python does not sort either). The window and rebase
//! options shift that origin (see [`ReplayWindow`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::csv::{AzureParser, BurstGptParser, CsvError};
use super::format::TraceFormat;
use super::jsonl::{self, JsonLabels, JsonLineError};
use super::record::{DropReason, Row, TraceRecord};
use super::TraceError;
use crate::datasets::limits::{self, SizeError};
use crate::datasets::{Prompt, SampleRequest};

/// Why one line of a trace does not parse: the format parser's reason, or a line that is not
/// text. [`TraceError::Malformed`] adds the file and line (or, under [`OnMalformed::Skip`],
/// the report's examples do).
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("not UTF-8 text ({0})")]
    NotUtf8(std::str::Utf8Error),
    /// A CSV header that lacks a column the format needs.
    #[error("{format} header: {error}")]
    Header {
        format: &'static str,
        error: CsvError,
    },
    #[error(transparent)]
    Csv(#[from] CsvError),
    #[error(transparent)]
    Json(#[from] JsonLineError),
    /// A token count over what one request may hold ([`limits::check_tokens`]): it would be
    /// generated in memory before the clock starts.
    #[error("{field}: {error}")]
    Length {
        field: &'static str,
        error: SizeError,
    },
}

/// What to do with a line that does not parse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnMalformed {
    /// Stop with an error naming the file and line (default).
    #[default]
    Error,
    /// Leave the line out and count it in [`ReadReport::malformed_skipped`].
    Skip,
}

/// Which part of the trace to replay and where the run's clock starts, in seconds of the
/// scaled trace clock (`timestamp × sec_multiplier`, the same scale as arrival times).
///
/// A record is replayed when `start_s <= trace_time < start_s + duration_s`. Its arrival is
/// `trace_time − origin` (never below 0), where the origin is `start_s`, or with `rebase`
/// the earliest kept trace time (so the first request goes out at t = 0). The defaults
/// (start 0, no duration, no rebase) are Python's: arrival = trace time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReplayWindow {
    /// Trace time at which the replay starts.
    pub start_s: f64,
    /// Length of the replayed span; `None` = to the end.
    pub duration_s: Option<f64>,
    /// Send the earliest kept record at t = 0.
    pub rebase: bool,
}

impl ReplayWindow {
    fn contains(&self, t: f64) -> bool {
        t >= self.start_s && self.duration_s.is_none_or(|d| t < self.start_s + d)
    }
}

/// How to read a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceOptions {
    /// `None`: recognise the format from the first line.
    pub format: Option<TraceFormat>,
    /// JSON field names (Mooncake/Bailian).
    pub labels: JsonLabels,
    /// Seconds per timestamp unit (Python `--timed-trace-sec-multiplier`, default 1; the
    /// Mooncake release needs 0.001).
    pub sec_multiplier: f64,
    /// The replayed span and clock origin.
    pub window: ReplayWindow,
    /// Keep only the first N replayable records in file order (Python `--num-prompts`).
    pub num_prompts: Option<usize>,
    /// Error on a bad line, or skip and count it.
    pub on_malformed: OnMalformed,
    /// BurstGPT: replay only rows of this `Model` (e.g. `GPT-4`); `None` = all models.
    pub burstgpt_model: Option<String>,
    /// `--max-model-len`: raises the per-request token ceiling rows are checked against.
    pub max_model_len: Option<usize>,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            format: None,
            labels: JsonLabels::default(),
            sec_multiplier: 1.0,
            window: ReplayWindow::default(),
            num_prompts: None,
            on_malformed: OnMalformed::Error,
            burstgpt_model: None,
            max_model_len: None,
        }
    }
}

impl TraceOptions {
    fn validate(&self) -> Result<(), TraceError> {
        let bad = |what: String| Err(TraceError::Option(what));
        if !(self.sec_multiplier.is_finite() && self.sec_multiplier >= 0.0) {
            return bad(format!(
                "--timed-trace-sec-multiplier {}: must be a finite number >= 0 (0.001 for \
                 millisecond timestamps)",
                self.sec_multiplier
            ));
        }
        if !self.window.start_s.is_finite() {
            return bad(format!(
                "replay window start {} s: must be finite",
                self.window.start_s
            ));
        }
        if let Some(d) = self.window.duration_s {
            if !(d.is_finite() && d > 0.0) {
                return bad(format!(
                    "replay window duration {d} s: must be a finite number > 0"
                ));
            }
        }
        Ok(())
    }
}

/// How many lines went where: a short run is never silent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Data lines read (header and blank lines excluded).
    pub data_lines: u64,
    /// Malformed lines left out under [`OnMalformed::Skip`].
    pub malformed_skipped: u64,
    /// The messages of the first few skipped lines (`file:line: reason`).
    pub malformed_examples: Vec<String>,
    /// BurstGPT failures (0 response tokens) left out.
    pub failed_dropped: u64,
    /// BurstGPT rows of other models left out.
    pub other_model_dropped: u64,
    /// Records outside the replay window.
    pub outside_window: u64,
    /// Reading stopped once `num_prompts` records were kept (the rest was not read).
    pub stopped_at_num_prompts: bool,
}

/// A kept row whose token counts fit one request ([`limits::check_tokens`]), else a
/// malformed line: its prompt would be generated in memory before the clock starts.
fn within_limits(row: Row, max_model_len: Option<usize>) -> Result<Row, LineError> {
    if let Row::Keep(d) = &row {
        for (field, n) in [
            ("input length", d.input_len),
            ("output length", d.output_len),
        ] {
            limits::check_tokens(u64::from(n), max_model_len)
                .map_err(|error| LineError::Length { field, error })?;
        }
    }
    Ok(row)
}

/// The error for a line that does not parse.
fn malformed(name: &str, line: u64, reason: LineError) -> TraceError {
    TraceError::Malformed {
        name: name.to_string(),
        line,
        reason: Box::new(reason),
    }
}

/// How many skipped-line messages a report keeps.
const MAX_EXAMPLES: usize = 5;

/// A trace read into memory: the records to replay, in file order, with arrival times.
#[derive(Debug, Clone)]
pub struct TimedTrace {
    /// The file name used in messages.
    pub name: String,
    /// The format read.
    pub format: TraceFormat,
    /// The multiplier applied to timestamps.
    pub sec_multiplier: f64,
    /// Trace time (s) that became t = 0 of the run.
    pub origin_s: f64,
    /// The replayed records, in file order.
    pub records: Vec<TraceRecord>,
    /// What was left out, and why.
    pub report: ReadReport,
}

/// One format's line parser.
enum Parser<'o> {
    Json {
        labels: &'o JsonLabels,
        bailian: bool,
    },
    Azure(AzureParser),
    BurstGpt(BurstGptParser),
}

impl<'o> Parser<'o> {
    /// The parser of `format`, given the file's first non-empty line: a CSV header is
    /// consumed; a JSONL first line comes back as the first data line to parse.
    fn new(
        format: TraceFormat,
        first_no: u64,
        first: String,
        opts: &'o TraceOptions,
    ) -> Result<(Self, Option<(u64, String)>), LineError> {
        let header_err = |error| LineError::Header {
            format: format.name(),
            error,
        };
        Ok(match format {
            TraceFormat::Mooncake | TraceFormat::Bailian => (
                Parser::Json {
                    labels: &opts.labels,
                    bailian: format == TraceFormat::Bailian,
                },
                Some((first_no, first)),
            ),
            TraceFormat::Azure => (
                Parser::Azure(AzureParser::new(&first).map_err(header_err)?),
                None,
            ),
            TraceFormat::BurstGpt => (
                Parser::BurstGpt(
                    BurstGptParser::new(&first, opts.burstgpt_model.clone()).map_err(header_err)?,
                ),
                None,
            ),
        })
    }

    fn parse(&mut self, line: &str) -> Result<Row, LineError> {
        Ok(match self {
            Parser::Json { labels, bailian } => jsonl::parse_line(line, labels, *bailian)?,
            Parser::Azure(p) => p.parse(line)?,
            Parser::BurstGpt(p) => p.parse(line)?,
        })
    }
}

/// Non-blank lines of a reader with their 1-based numbers; a line that is not UTF-8 comes
/// back as [`LineError::NotUtf8`] so the malformed policy applies to it.
struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line_no: u64,
}

impl<R: BufRead> Lines<R> {
    fn next(&mut self) -> std::io::Result<Option<(u64, Result<&str, LineError>)>> {
        loop {
            self.buf.clear();
            if self.reader.read_until(b'\n', &mut self.buf)? == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        let text = std::str::from_utf8(&self.buf)
            .map(|s| s.trim_end_matches(['\n', '\r']))
            .map_err(LineError::NotUtf8);
        Ok(Some((self.line_no, text)))
    }
}

impl TimedTrace {
    /// Reads the trace at `path` (streaming, line by line).
    pub fn load(path: impl AsRef<Path>, opts: &TraceOptions) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|error| TraceError::Io {
            name: name.clone(),
            error,
        })?;
        Self::from_reader(BufReader::with_capacity(1 << 16, file), &name, opts)
    }

    /// Reads a trace from any buffered reader; `name` labels messages.
    pub fn from_reader(
        reader: impl BufRead,
        name: &str,
        opts: &TraceOptions,
    ) -> Result<Self, TraceError> {
        opts.validate()?;
        let io_err = |error| TraceError::Io {
            name: name.to_string(),
            error,
        };
        let mut lines = Lines {
            reader,
            buf: Vec::new(),
            line_no: 0,
        };
        let Some((first_no, first)) = lines.next().map_err(io_err)? else {
            return Err(TraceError::NoRecords {
                name: name.to_string(),
                detail: "the file is empty".into(),
            });
        };
        let first = first
            .map_err(|reason| malformed(name, first_no, reason))?
            .trim_start_matches('\u{feff}')
            .to_string();
        let format = match opts.format {
            Some(f) => f,
            None => TraceFormat::detect(&first).map_err(|reason| TraceError::UnknownFormat {
                name: name.to_string(),
                reason,
            })?,
        };
        let (mut parser, mut pending) = Parser::new(format, first_no, first, opts)
            .map_err(|reason| malformed(name, first_no, reason))?;

        let mut trace = TimedTrace {
            name: name.to_string(),
            format,
            sec_multiplier: opts.sec_multiplier,
            origin_s: opts.window.start_s,
            records: Vec::new(),
            report: ReadReport::default(),
        };
        if opts.num_prompts == Some(0) {
            return Ok(trace);
        }
        loop {
            let (line_no, parsed) = match pending.take() {
                Some((no, text)) => (no, parser.parse(&text)),
                None => match lines.next().map_err(io_err)? {
                    None => break,
                    Some((no, Ok(text))) => (no, parser.parse(text)),
                    Some((no, Err(reason))) => (no, Err(reason)),
                },
            };
            if !trace.take(line_no, parsed, opts)? {
                break;
            }
        }
        trace.finish(opts)
    }

    /// Accounts for one data line; `Ok(false)` once `num_prompts` records are kept.
    fn take(
        &mut self,
        line: u64,
        parsed: Result<Row, LineError>,
        opts: &TraceOptions,
    ) -> Result<bool, TraceError> {
        let index = self.report.data_lines;
        self.report.data_lines += 1;
        let parsed = parsed.and_then(|row| within_limits(row, opts.max_model_len));
        let d = match parsed {
            Ok(Row::Keep(d)) => d,
            Ok(Row::Drop(DropReason::Failed)) => {
                self.report.failed_dropped += 1;
                return Ok(true);
            }
            Ok(Row::Drop(DropReason::OtherModel)) => {
                self.report.other_model_dropped += 1;
                return Ok(true);
            }
            Err(reason) if opts.on_malformed == OnMalformed::Skip => {
                self.report.malformed_skipped += 1;
                if self.report.malformed_examples.len() < MAX_EXAMPLES {
                    let example = format!("{}:{line}: {reason}", self.name);
                    self.report.malformed_examples.push(example);
                }
                return Ok(true);
            }
            Err(reason) => return Err(malformed(&self.name, line, reason)),
        };
        let trace_time_s = d.timestamp * opts.sec_multiplier;
        if !opts.window.contains(trace_time_s) {
            self.report.outside_window += 1;
            return Ok(true);
        }
        self.records.push(TraceRecord {
            index,
            line,
            timestamp: d.timestamp,
            trace_time_s,
            arrival_s: 0.0,
            input_len: d.input_len,
            output_len: d.output_len,
            hash_ids: d.hash_ids,
            chat: d.chat,
        });
        let more = Some(self.records.len()) != opts.num_prompts;
        self.report.stopped_at_num_prompts = !more;
        Ok(more)
    }

    /// Rejects an empty replay, then sets arrivals and parent links.
    fn finish(mut self, opts: &TraceOptions) -> Result<Self, TraceError> {
        if self.records.is_empty() {
            return Err(TraceError::NoRecords {
                detail: self.empty_detail(opts),
                name: self.name,
            });
        }
        self.set_arrivals(opts.window)?;
        self.link_parents();
        Ok(self)
    }

    /// Why nothing is left, for the error message.
    fn empty_detail(&self, opts: &TraceOptions) -> String {
        let r = &self.report;
        let mut parts = vec![format!("{} data lines read", r.data_lines)];
        if r.malformed_skipped > 0 {
            parts.push(format!("{} malformed skipped", r.malformed_skipped));
        }
        if r.failed_dropped > 0 {
            parts.push(format!("{} failed requests dropped", r.failed_dropped));
        }
        if r.other_model_dropped > 0 {
            parts.push(format!(
                "{} rows of other models than {:?}",
                r.other_model_dropped,
                opts.burstgpt_model.as_deref().unwrap_or_default()
            ));
        }
        if r.outside_window > 0 {
            let end = opts.window.duration_s.map_or("end".to_string(), |d| {
                format!("{}", opts.window.start_s + d)
            });
            parts.push(format!(
                "{} outside the window [{}, {end}) s (timestamps × {})",
                r.outside_window, opts.window.start_s, opts.sec_multiplier
            ));
        }
        parts.join(", ")
    }

    /// Sets every arrival from the origin (window start, or earliest kept with rebase), each
    /// one a time the engine can wait for ([`limits::duration_from_secs`]), else the error
    /// names the first record's line that is not.
    fn set_arrivals(&mut self, window: ReplayWindow) -> Result<(), TraceError> {
        if window.rebase {
            self.origin_s = self
                .records
                .iter()
                .map(|r| r.trace_time_s)
                .fold(f64::INFINITY, f64::min);
        }
        for r in &mut self.records {
            // Python sends a request whose delay is not positive at once.
            let arrival = (r.trace_time_s - self.origin_s).max(0.0);
            if let Err(why) = limits::duration_from_secs(arrival) {
                return Err(TraceError::Arrival {
                    name: self.name.clone(),
                    line: r.line,
                    arrival_s: arrival,
                    why,
                });
            }
            r.arrival_s = arrival;
        }
        Ok(())
    }

    /// Points each Bailian turn at its parent's position when the parent is replayed and
    /// comes earlier in the file (a later "parent" would make a cycle-prone wait).
    fn link_parents(&mut self) {
        let mut position: HashMap<i64, usize> = HashMap::new();
        for i in 0..self.records.len() {
            let Some(chat) = self.records[i].chat.as_mut() else {
                continue;
            };
            chat.parent = chat.parent_chat_id.and_then(|p| position.get(&p).copied());
            position.entry(chat.chat_id).or_insert(i);
        }
    }

    /// Arrival offsets (s after the run start) of the records, in record order: the
    /// schedule the engine replays.
    pub fn arrival_offsets(&self) -> Vec<f64> {
        self.records.iter().map(|r| r.arrival_s).collect()
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is replayed (only with `num_prompts = 0`).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Record `i` as a [`SampleRequest`] with materialized token ids and Python's request
    /// id (`prefix` + file index). Convenient for small runs and tests; large replays
    /// should send [`PromptBuilder::prompt_json_parts`](super::PromptBuilder::prompt_json_parts)
    /// instead of materializing every prompt.
    pub fn sample_request(
        &self,
        i: usize,
        builder: &super::PromptBuilder,
        request_id_prefix: &str,
    ) -> SampleRequest {
        let rec = &self.records[i];
        SampleRequest {
            prompt: Prompt::TokenIds(builder.prompt_ids(rec).into()),
            prompt_len: rec.input_len as usize,
            expected_output_len: rec.output_len as usize,
            request_id: Some(format!("{request_id_prefix}{}", rec.index)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, opts: &TraceOptions) -> Result<TimedTrace, TraceError> {
        TimedTrace::from_reader(text.as_bytes(), "t.jsonl", opts)
    }

    const THREE: &str = "{\"timestamp\": 1000, \"input_length\": 4, \"output_length\": 1}\n\
                         \n\
                         {\"timestamp\": 3000, \"input_length\": 5, \"output_length\": 2}\r\n\
                         {\"timestamp\": 2000, \"input_length\": 6, \"output_length\": 3}";

    #[test]
    fn reads_in_file_order_with_python_arrivals() {
        let opts = TraceOptions {
            sec_multiplier: 0.001,
            ..Default::default()
        };
        let t = read(THREE, &opts).unwrap();
        assert_eq!(t.format, TraceFormat::Mooncake);
        assert_eq!(t.arrival_offsets(), vec![1.0, 3.0, 2.0]);
        let lines: Vec<u64> = t.records.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 3, 4]);
        let idx: Vec<u64> = t.records.iter().map(|r| r.index).collect();
        assert_eq!(idx, vec![0, 1, 2]);
        assert_eq!(t.report.data_lines, 3);
    }

    #[test]
    fn window_rebase_and_num_prompts() {
        let mut opts = TraceOptions {
            sec_multiplier: 0.001,
            window: ReplayWindow {
                start_s: 1.5,
                duration_s: Some(1.5),
                rebase: false,
            },
            ..Default::default()
        };
        let t = read(THREE, &opts).unwrap();
        assert_eq!(t.arrival_offsets(), vec![0.5]); // 2.0 − 1.5; 3.0 is at the window's end
        assert_eq!(t.report.outside_window, 2);
        opts.window = ReplayWindow {
            start_s: 0.0,
            duration_s: None,
            rebase: true,
        };
        let t = read(THREE, &opts).unwrap();
        assert_eq!(t.arrival_offsets(), vec![0.0, 2.0, 1.0]);
        assert_eq!(t.origin_s, 1.0);
        opts.num_prompts = Some(2);
        let t = read(THREE, &opts).unwrap();
        assert_eq!(t.len(), 2);
        assert!(t.report.stopped_at_num_prompts);
    }

    #[test]
    fn empty_results_are_errors() {
        let e = read("\n\n", &TraceOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.jsonl: no request to replay (the file is empty)");
        let opts = TraceOptions {
            sec_multiplier: 0.001,
            window: ReplayWindow {
                start_s: 10.0,
                duration_s: Some(5.0),
                rebase: false,
            },
            ..Default::default()
        };
        let e = read(THREE, &opts).unwrap_err().to_string();
        assert!(
            e.contains("3 outside the window [10, 15) s (timestamps × 0.001)"),
            "{e}"
        );
    }

    #[test]
    fn bad_options_are_rejected() {
        for opts in [
            TraceOptions {
                sec_multiplier: -1.0,
                ..Default::default()
            },
            TraceOptions {
                sec_multiplier: f64::NAN,
                ..Default::default()
            },
            TraceOptions {
                window: ReplayWindow {
                    start_s: 0.0,
                    duration_s: Some(0.0),
                    rebase: false,
                },
                ..Default::default()
            },
        ] {
            assert!(matches!(read(THREE, &opts), Err(TraceError::Option(_))));
        }
    }

    #[test]
    fn a_byte_order_mark_is_ignored() {
        let text = "\u{feff}{\"timestamp\": 2, \"input_length\": 1, \"output_length\": 1}\n";
        let t = read(text, &TraceOptions::default()).unwrap();
        assert_eq!(t.arrival_offsets(), vec![2.0]);
    }

    #[test]
    fn invalid_utf8_is_a_malformed_line() {
        let mut bytes = b"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n".to_vec();
        bytes.extend_from_slice(b"\xff\xfe\n");
        let e = TimedTrace::from_reader(&bytes[..], "t.jsonl", &TraceOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.jsonl:2: not UTF-8 text"), "{e}");
    }
}
