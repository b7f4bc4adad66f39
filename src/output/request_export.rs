//! `--export-requests FILE`: one row per request of the run, in a format a dataframe tool
//! reads in one line (`.parquet`, `.csv`, `.jsonl`, chosen by the extension). Python's
//! `--save-detailed` lists sit inside one JSON document as parallel arrays; this is the same
//! data (and more: the epoch times, replica, adapter, outcome) as a table.
//!
//! The schema is [`COLUMNS`], the one list every format is written from (and
//! docs/export.md documents, checked by a test). Rows are streamed: CSV and JSON lines row
//! by row, Parquet a row group of [`ROW_GROUP`] rows at a time, so memory stays bounded
//! whatever the run's size. The file is written beside its target and renamed over it
//! (`result_files::save_streamed`), so a full disk never leaves half a table.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// What the export format is, from the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Parquet,
    Csv,
    JsonLines,
}

impl ExportFormat {
    /// The format `path` names by its extension (`None`: not one of ours).
    pub fn of(path: &Path) -> Option<ExportFormat> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("parquet") => Some(ExportFormat::Parquet),
            Some("csv") => Some(ExportFormat::Csv),
            Some("jsonl") => Some(ExportFormat::JsonLines),
            _ => None,
        }
    }
}

/// Why `--export-requests` names no format of ours (with the fix).
pub const UNKNOWN_FORMAT: &str =
    "the format is taken from the extension: use .parquet, .csv or .jsonl";

/// `--export-requests FILE`: where and how.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestExport {
    pub path: std::path::PathBuf,
    pub format: ExportFormat,
}

impl RequestExport {
    /// The export of `path`, or `None` when its extension names no format.
    pub fn of(path: &Path) -> Option<RequestExport> {
        Some(RequestExport {
            path: path.to_path_buf(),
            format: ExportFormat::of(path)?,
        })
    }

    /// A sweep point's or repetition's export: `suffix` before the extension.
    pub fn with_suffix(&self, suffix: &str) -> RequestExport {
        RequestExport {
            path: super::result_files::derived(&self.path, suffix, None),
            format: self.format,
        }
    }

    /// Checks before the run that the file can be written (as the result file is).
    pub fn check_target(&self) -> anyhow::Result<()> {
        super::result_files::check_other_target(&self.path, "--export-requests")
    }

    /// Writes `rows` (atomically) and returns how many.
    pub fn write<'r>(&self, rows: impl Iterator<Item = RequestRow<'r>>) -> anyhow::Result<usize> {
        write(&self.path, self.format, rows)
    }
}

/// A column's type in every format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit integer (Parquet INT64).
    Int,
    /// A 64-bit float (Parquet DOUBLE).
    Float,
    /// UTF-8 text (Parquet BYTE_ARRAY, UTF8).
    Text,
}

/// One column: its name, type, whether it is ever null, and what it holds.
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
    pub doc: &'static str,
}

const fn col(name: &'static str, kind: Kind, nullable: bool, doc: &'static str) -> Column {
    Column {
        name,
        kind,
        nullable,
        doc,
    }
}

/// The schema, in order. Times `*_ns` are ns since the Unix epoch (the run's wall-clock
/// start plus the monotonic offsets measured from it); durations `*_s` are seconds, as in
/// Python's per-request lists.
pub const COLUMNS: [Column; 24] = [
    col("id", Kind::Int, true, "the request's index in the run (the plan's order); null for a request never measured (not sent, or cancelled on purpose)"),
    col("conversation", Kind::Text, true, "--multi-turn: the conversation's id"),
    col("turn", Kind::Int, true, "--multi-turn: the turn, from 1"),
    col("tree", Kind::Int, true, "agentic replay: the trace's tree; null otherwise"),
    col("stream", Kind::Int, true, "agentic replay: the stream within the tree; null otherwise"),
    col("replica", Kind::Text, true, "with --base-url repeated (replicas): the server URL the request went to; null with one server"),
    col("shard", Kind::Int, true, "--shard K/N or a merge: the shard K that sent it"),
    col("lora", Kind::Text, true, "--lora-modules: the adapter it asked for"),
    col("scheduled_ns", Kind::Int, true, "when the schedule released it (sent_ns - client_queue_s)"),
    col("sent_ns", Kind::Int, true, "when it was sent (Python's start_time)"),
    col("first_token_ns", Kind::Int, true, "when its first token came (sent + TTFT); null when failed"),
    col("first_output_token_ns", Kind::Int, true, "when its first token that is not reasoning came (sent + TTFO); null when failed or all reasoning"),
    col("end_ns", Kind::Int, true, "when its response ended (last byte)"),
    col("ttft_s", Kind::Float, true, "time to first token (Python's ttfts); null when failed"),
    col("tpot_s", Kind::Float, true, "(E2EL - TTFT) / (output tokens - 1), Python's per-request TPOT; null when failed or under 2 tokens"),
    col("e2el_s", Kind::Float, true, "end-to-end latency (Python's latencies); null when failed"),
    col("itl_count", Kind::Int, true, "inter-token gaps (Python's itls, each list's length)"),
    col("itl_mean_s", Kind::Float, true, "their mean; null without gaps"),
    col("itl_max_s", Kind::Float, true, "their largest; null without gaps"),
    col("prompt_tokens", Kind::Int, true, "prompt tokens (Python's input_lens)"),
    col("output_tokens", Kind::Int, true, "output tokens the metrics counted (Python's output_lens: usage, else the tokenizer's count; 0 when failed)"),
    col("outcome", Kind::Text, false, "completed, failed, cancelled (on purpose: --request-cancellation-rate, or cut at --duration's end) or not_sent"),
    col("failure_reason", Kind::Text, true, "the error (Python's errors); null unless failed"),
    col("client_queue_s", Kind::Float, true, "from its release by the schedule to its send (Python's queue_times)"),
];

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed,
    Cancelled,
    NotSent,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::NotSent => "not_sent",
        }
    }
}

/// One request's row; `None` is null. Field order is [`COLUMNS`]'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestRow<'a> {
    pub id: Option<u64>,
    pub conversation: Option<&'a str>,
    pub turn: Option<u64>,
    pub tree: Option<u64>,
    pub stream: Option<u64>,
    pub replica: Option<&'a str>,
    pub shard: Option<u64>,
    pub lora: Option<&'a str>,
    pub scheduled_ns: Option<i64>,
    pub sent_ns: Option<i64>,
    pub first_token_ns: Option<i64>,
    pub first_output_token_ns: Option<i64>,
    pub end_ns: Option<i64>,
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2el_s: Option<f64>,
    pub itl_count: Option<u64>,
    pub itl_mean_s: Option<f64>,
    pub itl_max_s: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub outcome: Option<Outcome>,
    pub failure_reason: Option<&'a str>,
    pub client_queue_s: Option<f64>,
}

/// One cell, as every format writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    Int(i64),
    Float(f64),
    Text(&'a str),
}

fn int(v: Option<u64>) -> Cell<'static> {
    v.map_or(Cell::Null, |v| {
        Cell::Int(i64::try_from(v).unwrap_or(i64::MAX))
    })
}

fn time(v: Option<i64>) -> Cell<'static> {
    v.map_or(Cell::Null, Cell::Int)
}

fn float(v: Option<f64>) -> Cell<'static> {
    v.filter(|v| v.is_finite()).map_or(Cell::Null, Cell::Float)
}

fn text(v: Option<&str>) -> Cell<'_> {
    v.map_or(Cell::Null, Cell::Text)
}

impl<'a> RequestRow<'a> {
    /// The row's cells in [`COLUMNS`]' order.
    pub fn cells(&self) -> [Cell<'a>; 24] {
        [
            int(self.id),
            text(self.conversation),
            int(self.turn),
            int(self.tree),
            int(self.stream),
            text(self.replica),
            int(self.shard),
            text(self.lora),
            time(self.scheduled_ns),
            time(self.sent_ns),
            time(self.first_token_ns),
            time(self.first_output_token_ns),
            time(self.end_ns),
            float(self.ttft_s),
            float(self.tpot_s),
            float(self.e2el_s),
            int(self.itl_count),
            float(self.itl_mean_s),
            float(self.itl_max_s),
            int(self.prompt_tokens),
            int(self.output_tokens),
            Cell::Text(self.outcome.unwrap_or(Outcome::NotSent).name()),
            text(self.failure_reason),
            float(self.client_queue_s),
        ]
    }
}

/// Rows per Parquet row group: what the Parquet writer holds in memory at once.
pub const ROW_GROUP: usize = 65_536;

/// Writes `rows` to `path` in `format` (atomically: beside it, then renamed) and returns
/// how many rows were written.
pub fn write<'r>(
    path: &Path,
    format: ExportFormat,
    rows: impl Iterator<Item = RequestRow<'r>>,
) -> anyhow::Result<usize> {
    let mut count = 0usize;
    super::result_files::save_streamed(path, |file| {
        let counted = rows.inspect(|_| count += 1);
        match format {
            ExportFormat::Csv => write_csv(std::io::BufWriter::new(file), counted),
            ExportFormat::JsonLines => write_jsonl(std::io::BufWriter::new(file), counted),
            ExportFormat::Parquet => write_parquet(file, counted),
        }
    })?;
    Ok(count)
}

fn write_csv<'r>(
    mut out: impl Write,
    rows: impl Iterator<Item = RequestRow<'r>>,
) -> std::io::Result<()> {
    let header: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    writeln!(out, "{}", header.join(","))?;
    for row in rows {
        for (i, cell) in row.cells().iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            match cell {
                Cell::Null => {}
                Cell::Int(v) => write!(out, "{v}")?,
                Cell::Float(v) => write!(out, "{v}")?,
                Cell::Text(t) => csv_text(&mut out, t)?,
            }
        }
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// RFC 4180: quoted when it holds a comma, a quote or a line break (or is empty, so it is
/// not read as null), quotes doubled.
fn csv_text(out: &mut impl Write, t: &str) -> std::io::Result<()> {
    if t.is_empty() || t.contains([',', '"', '\n', '\r']) {
        write!(out, "\"{}\"", t.replace('"', "\"\""))
    } else {
        out.write_all(t.as_bytes())
    }
}

fn write_jsonl<'r>(
    mut out: impl Write,
    rows: impl Iterator<Item = RequestRow<'r>>,
) -> std::io::Result<()> {
    for row in rows {
        out.write_all(b"{")?;
        for (i, (cell, column)) in row.cells().iter().zip(&COLUMNS).enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "\"{}\":", column.name)?;
            match cell {
                Cell::Null => out.write_all(b"null")?,
                Cell::Int(v) => write!(out, "{v}")?,
                Cell::Float(v) => write!(out, "{}", serde_json::Value::from(*v))?,
                Cell::Text(t) => serde_json::to_writer(&mut out, t)?,
            }
        }
        out.write_all(b"}\n")?;
    }
    out.flush()
}

/// The Parquet schema of [`COLUMNS`].
fn parquet_schema() -> parquet::schema::types::Type {
    use parquet::basic::{ConvertedType, Repetition, Type as Physical};
    use parquet::schema::types::Type;
    let fields = COLUMNS
        .iter()
        .map(|c| {
            let physical = match c.kind {
                Kind::Int => Physical::INT64,
                Kind::Float => Physical::DOUBLE,
                Kind::Text => Physical::BYTE_ARRAY,
            };
            let mut b =
                Type::primitive_type_builder(c.name, physical).with_repetition(if c.nullable {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                });
            if c.kind == Kind::Text {
                b = b.with_converted_type(ConvertedType::UTF8);
            }
            Arc::new(b.build().expect("a valid column"))
        })
        .collect();
    Type::group_type_builder("request")
        .with_fields(fields)
        .build()
        .expect("a valid schema")
}

/// One column of a row group being gathered: values and definition levels.
#[derive(Default)]
struct Gathered {
    ints: Vec<i64>,
    floats: Vec<f64>,
    texts: Vec<parquet::data_type::ByteArray>,
    levels: Vec<i16>,
}

fn write_parquet<'r>(
    file: &mut std::fs::File,
    rows: impl Iterator<Item = RequestRow<'r>>,
) -> std::io::Result<()> {
    write_parquet_inner(file, rows).map_err(std::io::Error::other)
}

fn write_parquet_inner<'r>(
    file: &mut std::fs::File,
    mut rows: impl Iterator<Item = RequestRow<'r>>,
) -> parquet::errors::Result<()> {
    use parquet::data_type::{ByteArrayType, DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_created_by(format!("vllm-bench {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer = SerializedFileWriter::new(file, Arc::new(parquet_schema()), Arc::new(props))?;
    loop {
        let mut columns: Vec<Gathered> = COLUMNS.iter().map(|_| Gathered::default()).collect();
        let mut n = 0;
        for row in rows.by_ref().take(ROW_GROUP) {
            n += 1;
            for (cell, g) in row.cells().iter().zip(&mut columns) {
                match cell {
                    Cell::Null => g.levels.push(0),
                    Cell::Int(v) => {
                        g.ints.push(*v);
                        g.levels.push(1);
                    }
                    Cell::Float(v) => {
                        g.floats.push(*v);
                        g.levels.push(1);
                    }
                    Cell::Text(t) => {
                        g.texts.push(t.as_bytes().to_vec().into());
                        g.levels.push(1);
                    }
                }
            }
        }
        if n == 0 {
            break; // no row group at all for no rows: a valid, empty table
        }
        let mut group = writer.next_row_group()?;
        for (g, c) in columns.iter().zip(&COLUMNS) {
            let mut w = group.next_column()?.expect("one writer per column");
            let levels = c.nullable.then_some(g.levels.as_slice());
            match c.kind {
                Kind::Int => w.typed::<Int64Type>().write_batch(&g.ints, levels, None)?,
                Kind::Float => w
                    .typed::<DoubleType>()
                    .write_batch(&g.floats, levels, None)?,
                Kind::Text => w
                    .typed::<ByteArrayType>()
                    .write_batch(&g.texts, levels, None)?,
            };
            w.close()?;
        }
        group.close()?;
        if n < ROW_GROUP {
            break;
        }
    }
    writer.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_the_extension_and_anything_else_is_refused() {
        let of = |p: &str| ExportFormat::of(Path::new(p));
        assert_eq!(of("a/r.parquet"), Some(ExportFormat::Parquet));
        assert_eq!(of("r.CSV"), Some(ExportFormat::Csv));
        assert_eq!(of("r.jsonl"), Some(ExportFormat::JsonLines));
        assert_eq!(of("r.json"), None);
        assert_eq!(of("requests"), None);
        let e = RequestExport::of(Path::new("out/r.parquet")).unwrap();
        assert_eq!(e.with_suffix("-run2").path, Path::new("out/r-run2.parquet"));
    }

    #[test]
    fn csv_quotes_what_would_split_a_field() {
        let mut out = Vec::new();
        csv_text(&mut out, "HTTP 500, \"oops\"\nline").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"HTTP 500, \"\"oops\"\"\nline\""
        );
        let mut out = Vec::new();
        csv_text(&mut out, "").unwrap();
        assert_eq!(out, b"\"\"");
    }

    #[test]
    fn every_row_has_one_cell_per_column() {
        let row = RequestRow {
            id: Some(3),
            outcome: Some(Outcome::Failed),
            failure_reason: Some("x"),
            ..RequestRow::default()
        };
        let cells = row.cells();
        assert_eq!(cells.len(), COLUMNS.len());
        assert_eq!(cells[0], Cell::Int(3));
        let outcome = COLUMNS.iter().position(|c| c.name == "outcome").unwrap();
        assert_eq!(cells[outcome], Cell::Text("failed"));
        assert!(COLUMNS.iter().all(|c| c.nullable || c.name == "outcome"));
    }
}
