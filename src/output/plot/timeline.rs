//! `--plot-timeline`: one row per request — its client queue, its TTFT, then its inter-token
//! gaps coloured by `--timeline-itl-thresholds` (Python's three classes, labels and colours)
//! — drawn on a canvas by our own script, with hover text, zoom and pan.
//!
//! Python (plotly) makes one SVG shape per token, which a browser cannot hold at 10,000
//! requests of hundreds of tokens. Here consecutive gaps of the same class are merged into
//! one segment (their boundaries kept exact), the data is embedded as flat integer arrays in
//! microseconds, and a canvas draws only what is in view. The page reports what it drew in
//! the DOM: `data-rows` on the canvas is the number of request rows (one per request), and
//! `data-segments` the segments drawn.
//!
//! When the run scraped the server's `/metrics` (`crate::server_metrics`), its running /
//! waiting / KV-cache usage gauges are drawn in a strip under the request rows on the same
//! time axis (zoom and pan move both), so a TTFT spike can be read against the server's
//! queue at that moment; `data-server-samples` on the canvas is the samples the strip drew.
//! Without samples the page is as before.
//!
//! A reasoning model's request (one whose first output token came after its first token:
//! TTFO > TTFT) has its thinking part, from the first token to the first output token, drawn
//! apart in its own colour over the gaps, and named in the hover text; the legend shows it
//! only when some request thought.

use std::fmt::Write;

use super::{page, svg::escape};
use crate::metrics::RequestOutput;
use crate::server_metrics::{self as sm, Series};

/// Python's colours: TTFT, then the three ITL classes; ours: queue and failed.
const TTFT_COLOUR: &str = "#636EFA";
const ITL_COLOURS: [&str; 3] = ["#109618", "#FF7F0E", "#D62728"];
const QUEUE_COLOUR: &str = "#C8C8C8";
const FAILED_COLOUR: &str = "#555555";
/// The server strip's running, waiting and KV-cache usage lines.
const SERVER_COLOURS: [&str; 3] = ["#1F77B4", "#E377C2", "#7F7F7F"];
const SERVER_LABELS: [&str; 3] = [
    "Server running requests",
    "Server waiting requests",
    "Server KV-cache usage %",
];
/// Ours: the thinking part of a reasoning request (plotly's fourth colour).
const THINKING_COLOUR: &str = "#AB63FA";

const SCRIPT: &str = include_str!("assets/timeline.js");

/// Python's legend labels for thresholds `low` and `high` (ms).
pub fn itl_labels(low: f64, high: f64) -> [String; 3] {
    [
        format!("ITL < {low:.0}ms"),
        format!("{low:.0}ms ≤ ITL < {high:.0}ms"),
        format!("ITL ≥ {high:.0}ms"),
    ]
}

/// Python's class of one gap (seconds) for thresholds in ms.
fn class_of(itl: f64, (low, high): (f64, f64)) -> u8 {
    if itl < low / 1000.0 {
        0
    } else if itl < high / 1000.0 {
        1
    } else {
        2
    }
}

/// What the page draws, in microseconds from the earliest arrival.
#[derive(Debug, Default, PartialEq)]
pub struct TimelineData {
    /// Per request: arrival, send, first token, end, prompt tokens, output tokens, ok (1/0),
    /// first segment index (8 numbers each).
    pub requests: Vec<i64>,
    /// ITL segments, one number each: `3 × (end − previous end) + class`, the previous end
    /// being the request's first token for its first segment (deltas keep the numbers short;
    /// each end is rounded on its own, so the boundaries do not drift). Request `i`'s run
    /// from its first segment index to the next request's.
    pub segments: Vec<i64>,
    /// The server's gauges at each scrape, when the run has them.
    pub server: Option<ServerData>,
    /// Per request: the end of its thinking part, its first output token; minus its end when
    /// every token was reasoning; 0 when it did not think. Empty when no request did.
    pub thinking: Vec<i64>,
}

/// Which scale of the strip a line is read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripScale {
    /// A count (requests): the left scale, from 0 to the most any line of it reached.
    Count,
    /// A percentage: the right scale, 0 to 100.
    Percent,
}

/// One line of the strip under the rows: a gauge read at each scrape (seconds from the
/// run's epoch, the epoch of the outputs' `start_time`), `None` where a scrape lacked it.
/// A gauge is a level read at the scrape: the page draws it as steps (the value held until
/// the next scrape), never as a ramp between two readings, which would show change that
/// was never measured.
#[derive(Debug, Clone, PartialEq)]
pub struct StripLine {
    pub label: String,
    pub colour: &'static str,
    pub scale: StripScale,
    /// Decimals shown in the hover text.
    pub digits: u8,
    pub t: Vec<f64>,
    pub values: Vec<Option<f64>>,
}

impl StripLine {
    fn has_data(&self) -> bool {
        self.values.iter().flatten().any(|v| v.is_finite())
    }
}

/// The server's running and waiting requests and KV-cache usage (in percent) from its
/// scrape series: only the gauges the server has (a line without data is neither drawn nor
/// in the legend).
pub fn server_lines(series: &Series) -> Vec<StripLine> {
    let gauges: [(&[&str], StripScale, f64, u8); 3] = [
        (sm::RUNNING, StripScale::Count, 1.0, 0),
        (sm::WAITING, StripScale::Count, 1.0, 0),
        (sm::KV_CACHE_USAGE, StripScale::Percent, 100.0, 1),
    ];
    gauges
        .into_iter()
        .enumerate()
        .filter_map(|(i, (names, scale, factor, digits))| {
            let values = series.gauge(names)?;
            Some(StripLine {
                label: SERVER_LABELS[i].to_string(),
                colour: SERVER_COLOURS[i],
                scale,
                digits,
                t: series.t.clone(),
                values: values.iter().map(|v| v.map(|v| v * factor)).collect(),
            })
        })
        .filter(StripLine::has_data)
        .collect()
}

/// The strip's lines on the timeline's axis: per line, the scrape times (µs from the
/// earliest arrival; the first scrape, before the run, can be negative) and its values.
/// Only lines with data; `None` when no line has any.
#[derive(Debug, Default, PartialEq)]
pub struct ServerData {
    pub lines: Vec<(StripLine, Vec<i64>)>,
}

impl ServerData {
    /// `lines` (times in seconds from the run's epoch) shifted to the timeline's origin
    /// `t0` (seconds from the same epoch).
    fn of(lines: &[StripLine], t0: f64) -> Option<ServerData> {
        let lines: Vec<(StripLine, Vec<i64>)> = lines
            .iter()
            .filter(|l| l.has_data() && !l.t.is_empty())
            .map(|l| (l.clone(), l.t.iter().map(|&t| us(t - t0)).collect()))
            .collect();
        (!lines.is_empty()).then_some(ServerData { lines })
    }
}

fn us(seconds: f64) -> i64 {
    (seconds * 1e6).round() as i64
}

impl TimelineData {
    /// The timeline of `outputs` (in request order), with the strip's `lines` (on the same
    /// epoch as the outputs' `start_time`) under the rows.
    pub fn of(
        outputs: &[RequestOutput],
        thresholds: (f64, f64),
        lines: &[StripLine],
    ) -> TimelineData {
        let mut t0 = outputs
            .iter()
            .map(|o| o.start_time - o.client_queue_time)
            .fold(f64::INFINITY, f64::min);
        if !t0.is_finite() {
            t0 = 0.0; // no request: the scrapes alone, from the run's start
        }
        let mut data = TimelineData {
            requests: Vec::with_capacity(outputs.len() * 8),
            segments: Vec::new(),
            server: ServerData::of(lines, t0),
            thinking: Vec::new(),
        };
        let mut thought = false;
        for o in outputs {
            let start = o.start_time - t0;
            let first = start + o.ttft;
            data.requests.extend([
                us(start - o.client_queue_time),
                us(start),
                us(first),
                us(start + o.latency),
                o.prompt_len as i64,
                o.output_tokens as i64,
                i64::from(o.success),
                data.segments.len() as i64,
            ]);
            let thinking_end = match o.ttfo {
                _ if !o.success => 0,
                Some(ttfo) if ttfo > o.ttft => us(start + ttfo),
                Some(_) => 0,
                // Successful without an output token: all of it was reasoning (negative).
                None => -us(start + o.latency).max(1),
            };
            thought |= thinking_end != 0;
            data.thinking.push(thinking_end);
            // Python's arithmetic: each gap added to the previous token's time.
            let mut t = first;
            let mut ends: Vec<(i64, u8)> = Vec::new();
            for gap in o.itl.iter() {
                t += gap;
                let class = class_of(gap, thresholds);
                match ends.last_mut() {
                    Some((end, c)) if *c == class => *end = us(t),
                    _ => ends.push((us(t), class)),
                }
            }
            let mut previous = us(first);
            for (end, class) in ends {
                data.segments.push(3 * (end - previous) + i64::from(class));
                previous = end;
            }
        }
        if !thought {
            data.thinking.clear();
        }
        data
    }
}

/// The page for `outputs` with ITL thresholds `(low, high)` in ms, and the strip's `lines`
/// (the server's gauges, [`server_lines`], and any other scraped series) under the rows.
pub fn render(
    outputs: &[RequestOutput],
    thresholds: (f64, f64),
    title: &str,
    lines: &[StripLine],
) -> String {
    let data = TimelineData::of(outputs, thresholds, lines);
    let labels = itl_labels(thresholds.0, thresholds.1);
    let mut body = String::new();
    body.push_str("<ul class=\"legend\" id=\"legend\">");
    let mut item = |colour: &str, label: &str, class: &str| {
        let _ = write!(
            body,
            "<li data-class=\"{class}\"><span class=\"swatch\" style=\"background:{colour}\">\
             </span>{}</li>",
            escape(label)
        );
    };
    item(QUEUE_COLOUR, "Client queue", "queue");
    item(TTFT_COLOUR, "TTFT", "ttft");
    if !data.thinking.is_empty() {
        item(THINKING_COLOUR, "Thinking (until TTFO)", "thinking");
    }
    for (i, (colour, label)) in ITL_COLOURS.iter().zip(&labels).enumerate() {
        item(colour, label, &format!("itl{i}"));
    }
    item(FAILED_COLOUR, "Failed", "failed");
    if let Some(server) = &data.server {
        for (i, (line, _)) in server.lines.iter().enumerate() {
            item(line.colour, &line.label, &format!("server{i}"));
        }
    }
    body.push_str("</ul>\n");
    let _ = writeln!(
        body,
        "<p class=\"note\">{} requests. Wheel: zoom time · Shift+wheel: zoom rows · drag: pan · \
         double-click or <button id=\"reset\">reset</button> · hover a row for its figures.</p>",
        outputs.len()
    );
    body.push_str(
        "<div id=\"timeline-wrap\"><canvas id=\"timeline\"></canvas><div id=\"tip\"></div></div>\n",
    );
    let mut script = String::with_capacity(data.requests.len() * 8 + data.segments.len() * 7);
    script.push_str("const DATA = {\"requests\":");
    push_ints(&mut script, &data.requests);
    script.push_str(",\"segments\":");
    push_ints(&mut script, &data.segments);
    script.push_str(",\"thinking\":");
    push_ints(&mut script, &data.thinking);
    let _ = write!(
        script,
        ",\"colours\":{{\"queue\":\"{QUEUE_COLOUR}\",\"ttft\":\"{TTFT_COLOUR}\",\
         \"failed\":\"{FAILED_COLOUR}\",\"thinking\":\"{THINKING_COLOUR}\",\"itl\":[\"{}\",\"{}\",\"{}\"]}},\"labels\":[",
        ITL_COLOURS[0], ITL_COLOURS[1], ITL_COLOURS[2]
    );
    for (i, l) in labels.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(script, "{sep}\"{l}\"");
    }
    script.push(']');
    if let Some(server) = &data.server {
        script.push_str(",\"server\":{\"lines\":[");
        for (i, (line, t)) in server.lines.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let scale = match line.scale {
                StripScale::Count => "count",
                StripScale::Percent => "percent",
            };
            let _ = write!(
                script,
                "{sep}{{\"label\":{},\"colour\":\"{}\",\"scale\":\"{scale}\",\"digits\":{},\"t\":",
                js_string(&line.label),
                line.colour,
                line.digits
            );
            push_ints(&mut script, t);
            script.push_str(",\"v\":");
            push_values(&mut script, &line.values);
            script.push('}');
        }
        script.push_str("]}");
    }
    script.push_str("};\n");
    script.push_str(SCRIPT);
    page(title, &body, Some(&script))
}

/// `text` as a JSON string safe inside an inline script (a label can name a scraped host:
/// `<` is escaped, so no `</script>` closes the element).
fn js_string(text: &str) -> String {
    serde_json::Value::from(text)
        .to_string()
        .replace('<', "\\u003c")
}

fn push_ints(out: &mut String, values: &[i64]) {
    out.push('[');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{v}");
    }
    out.push(']');
}

/// Gauge values as a JSON list, `null` where missing (or not a finite number).
fn push_values(out: &mut String, values: &[Option<f64>]) {
    out.push('[');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match v.filter(|v| v.is_finite()) {
            Some(v) => {
                let _ = write!(out, "{v}");
            }
            None => out.push_str("null"),
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::vllm;

    fn req(start: f64, queue: f64, ttft: f64, itl: &[f64], ok: bool) -> RequestOutput {
        RequestOutput {
            success: ok,
            start_time: start,
            client_queue_time: queue,
            ttft,
            itl: itl.to_vec().into(),
            latency: ttft + itl.iter().sum::<f64>(),
            prompt_len: 10,
            output_tokens: itl.len() as u64 + 1,
            ttfo: ok.then_some(ttft),
            ..RequestOutput::default()
        }
    }

    #[test]
    fn gaps_of_one_class_merge_and_boundaries_stay_exact() {
        let outputs = [
            req(100.5, 0.5, 0.1, &[0.01, 0.02, 0.03, 0.06, 0.01], true),
            req(101.0, 0.0, 0.2, &[], false),
        ];
        let d = TimelineData::of(&outputs, (25.0, 50.0), &[]);
        // t0 = the first request's arrival (100.0).
        assert_eq!(
            d.requests,
            [
                0, 500_000, 600_000, 730_000, 10, 6, 1, 0, 1_000_000, 1_000_000, 1_200_000,
                1_200_000, 10, 1, 0, 4
            ]
        );
        // 10 ms + 20 ms (class 0, merged), 30 ms (class 1), 60 ms (class 2), 10 ms (class 0).
        assert_eq!(d.segments, [90_000, 90_001, 180_002, 30_000]);
        assert!(d.thinking.is_empty(), "no request thought");
    }

    #[test]
    fn the_thinking_part_ends_at_the_first_output_token() {
        let mut thought = req(0.0, 0.0, 0.1, &[0.1, 0.1, 0.1], true);
        thought.ttfo = Some(0.3);
        let mut plain = req(1.0, 0.0, 0.1, &[0.1], true);
        plain.ttfo = Some(0.1);
        let mut only_thought = req(2.0, 0.0, 0.1, &[0.1], true);
        only_thought.ttfo = None;
        let failed = req(3.0, 0.0, 0.1, &[], false);
        let d = TimelineData::of(&[thought, plain, only_thought, failed], (25.0, 50.0), &[]);
        assert_eq!(d.thinking, [300_000, 0, -2_200_000, 0]);
        let mut a = req(0.0, 0.0, 0.1, &[0.1], true);
        a.ttfo = Some(0.2);
        let html = render(&[a], (25.0, 50.0), "t", &[]);
        assert!(html.contains("Thinking (until TTFO)"), "legend");
        assert!(html.contains("\"thinking\":[200000]"), "data");
    }

    #[test]
    fn the_legend_has_pythons_labels() {
        assert_eq!(
            itl_labels(25.0, 50.0),
            ["ITL < 25ms", "25ms ≤ ITL < 50ms", "ITL ≥ 50ms"]
        );
        let html = render(&[req(0.0, 0.0, 0.1, &[0.03], true)], (25.0, 50.0), "t", &[]);
        assert!(html.contains("25ms ≤ ITL &lt; 50ms"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("\"server\":") && !html.contains("Server running"));
    }

    #[test]
    fn the_servers_gauges_share_the_requests_time_axis() {
        let mut series = Series {
            t: vec![-0.25, 0.5, 1.5],
            ..Series::default()
        };
        series
            .gauges
            .insert(vllm::RUNNING.into(), vec![Some(0.0), Some(3.0), Some(1.0)]);
        series.gauges.insert(
            vllm::KV_CACHE_USAGE.into(),
            vec![Some(0.0), None, Some(0.5)],
        );
        // A gauge the server has but never reported a value of: no line, no legend entry.
        series
            .gauges
            .insert(vllm::WAITING.into(), vec![None, None, None]);
        // The first request arrived 0.5 s after the run's start (its epoch).
        let outputs = [req(1.0, 0.5, 0.1, &[0.01], true)];
        let lines = server_lines(&series);
        let d = TimelineData::of(&outputs, (25.0, 50.0), &lines);
        assert_eq!(d.requests[0], 0, "the axis starts at the first arrival");
        let s = d.server.expect("the gauges are kept");
        let labels: Vec<&str> = s.lines.iter().map(|(l, _)| l.label.as_str()).collect();
        assert_eq!(
            labels,
            ["Server running requests", "Server KV-cache usage %"],
            "only the series with data"
        );
        assert_eq!(s.lines[0].1, [-750_000, 0, 1_000_000]);
        assert_eq!(s.lines[0].0.values, [Some(0.0), Some(3.0), Some(1.0)]);
        assert_eq!(s.lines[1].0.values, [Some(0.0), None, Some(50.0)]);
        let html = render(&outputs, (25.0, 50.0), "t", &lines);
        assert!(
            html.contains(
                "\"server\":{\"lines\":[{\"label\":\"Server running requests\",\
                 \"colour\":\"#1F77B4\",\"scale\":\"count\",\"digits\":0,\
                 \"t\":[-750000,0,1000000],\"v\":[0,3,1]}"
            ),
            "{html}"
        );
        assert!(html.contains(
            "\"scale\":\"percent\",\"digits\":1,\"t\":[-750000,0,1000000],\"v\":[0,null,50]"
        ));
        assert!(html.contains("Server KV-cache usage %"));
        assert!(
            !html.contains("Server waiting requests"),
            "a series without data is not in the legend"
        );
        // Samples without any of the three gauges draw no strip.
        let other = Series {
            t: vec![0.0, 1.0],
            gauges: [("dcgm_power".to_string(), vec![Some(1.0), Some(2.0)])].into(),
            ..Series::default()
        };
        assert!(
            TimelineData::of(&outputs, (25.0, 50.0), &server_lines(&other))
                .server
                .is_none()
        );
    }

    #[test]
    fn a_label_cannot_close_the_script() {
        let line = StripLine {
            label: "GPU 0 (</script><b>)".into(),
            colour: "#000000",
            scale: StripScale::Percent,
            digits: 0,
            t: vec![0.0, 1.0],
            values: vec![Some(1.0), Some(2.0)],
        };
        let html = render(&[], (25.0, 50.0), "t", &[line]);
        assert!(!html.contains("</script><b>"), "{html}");
        assert!(html.contains("GPU 0 (\\u003c/script>"));
    }
}
