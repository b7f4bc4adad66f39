//! The Prometheus text exposition format (version 0.0.4, and the OpenMetrics text that
//! vLLM's `prometheus_client` and DCGM exporters also emit), read into what a run reports:
//! counters, gauges and histograms by family name, each summed over its label sets.
//!
//! Written here rather than taken from a crate: the one small parser on crates.io
//! (`prometheus-parse` 0.2) recognises `# TYPE` lines with a `\w+` pattern, which does not
//! match vLLM's `vllm:`-prefixed names, and pulls in `regex` and `chrono` for it.
//!
//! Strict about the sample lines (a line that is not `name[{labels}] value [timestamp]`
//! fails the whole scrape: a body that is an HTML error page or JSON is not metrics) and
//! lenient about everything the figures do not need (`# HELP`, other comments, timestamps,
//! OpenMetrics exemplars and `# EOF`).

use std::collections::BTreeMap;

/// Why a body is not Prometheus text: the first line that is not, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub reason: &'static str,
}

/// What a family's `# TYPE` line says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
    /// Summaries, info, state sets and untyped samples: kept as gauges when their name is a
    /// plain sample of the family (a summary's quantiles are not summed over label sets).
    Other,
}

/// A histogram summed over its label sets: cumulative counts per upper bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// `(le, cumulative count)`, ascending by `le`; the last bound is `+Inf` when the
    /// server sent it.
    pub buckets: Vec<(f64, f64)>,
    pub count: f64,
    pub sum: f64,
}

/// One scrape: every family the figures use, keyed by the family name as the server spells
/// it (a counter without its `_total` suffix).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Counters summed over label sets.
    pub counters: BTreeMap<String, f64>,
    /// Gauges over label sets: summed, except a ratio (a name ending in `_perc`, `_ratio`
    /// or `_usage`, e.g. `vllm:kv_cache_usage_perc`), which is averaged (two engines at 50 %
    /// are not at 100 %).
    pub gauges: BTreeMap<String, f64>,
    pub histograms: BTreeMap<String, Histogram>,
    /// The counters and gauges of series labelled with a `gpu` (a DCGM exporter's), per
    /// GPU, besides their sums above: a run's GPU telemetry is per device.
    pub per_gpu: BTreeMap<String, BTreeMap<Gpu, f64>>,
}

/// A GPU as NVIDIA's DCGM exporter labels its series: its host (`Hostname`, empty when the
/// exporter gives none) and its index on the host (`gpu`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gpu {
    pub host: String,
    pub gpu: String,
}

/// Gauges whose label sets are averaged rather than summed.
fn is_ratio(name: &str) -> bool {
    ["_perc", "_ratio", "_usage", "_percent"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// One sample line.
struct Sample<'a> {
    name: &'a str,
    /// The `le` label's value, when there is one (histogram buckets).
    le: Option<f64>,
    /// The `gpu` and `Hostname` labels, when the series has a `gpu` one.
    gpu: Option<Gpu>,
    value: f64,
}

/// Parses a whole exposition body.
pub fn parse(text: &str) -> Result<Scrape, ParseError> {
    let mut kinds: BTreeMap<&str, Kind> = BTreeMap::new();
    // Gauge sums with their label-set counts (ratios are averaged at the end).
    let mut gauges: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    // Per histogram: bucket sums per bound (keyed by the bound's bits: exact, ordered later).
    let mut buckets: BTreeMap<String, BTreeMap<u64, f64>> = BTreeMap::new();
    let mut scrape = Scrape::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |reason| ParseError {
            line: i + 1,
            reason,
        };
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    return Err(err("a # TYPE line without a name and a type"));
                };
                let kind = match kind {
                    "counter" => Kind::Counter,
                    "gauge" => Kind::Gauge,
                    "histogram" => Kind::Histogram,
                    _ => Kind::Other,
                };
                kinds.insert(name, kind);
            }
            continue;
        }
        let sample = sample(line).map_err(err)?;
        let (family, kind) = family_of(&kinds, sample.name);
        match kind {
            Kind::Counter => {
                if sample.name.ends_with("_created") {
                    continue;
                }
                let f = family.strip_suffix("_total").unwrap_or(family);
                *scrape.counters.entry(f.to_string()).or_default() += sample.value;
                per_gpu(&mut scrape, f, &sample);
            }
            Kind::Histogram => {
                let part = &sample.name[family.len()..];
                match part {
                    "_bucket" => {
                        let le = sample.le.ok_or(err("a histogram bucket without `le`"))?;
                        *buckets
                            .entry(family.to_string())
                            .or_default()
                            .entry(order_key(le))
                            .or_default() += sample.value;
                    }
                    "_count" => {
                        scrape
                            .histograms
                            .entry(family.to_string())
                            .or_default()
                            .count += sample.value
                    }
                    "_sum" => {
                        scrape.histograms.entry(family.to_string()).or_default().sum += sample.value
                    }
                    _ => {} // `_created`, `_gcount`, ...
                }
            }
            Kind::Gauge | Kind::Other => {
                if (kind == Kind::Other && sample.name != family) || family.ends_with("_created") {
                    // A summary's `_sum`/`_count`, an info's `_info`, ...; `_created` is a
                    // start timestamp, not a level.
                    continue;
                }
                if kind == Kind::Other && sample.name.ends_with("_total") {
                    // Untyped `_total`: a counter by Prometheus' naming convention.
                    let f = &sample.name[..sample.name.len() - "_total".len()];
                    *scrape.counters.entry(f.to_string()).or_default() += sample.value;
                    continue;
                }
                let g = gauges.entry(family.to_string()).or_default();
                g.0 += sample.value;
                g.1 += 1;
                per_gpu(&mut scrape, family, &sample);
            }
        }
    }
    for (name, (sum, n)) in gauges {
        let v = if is_ratio(&name) { sum / n as f64 } else { sum };
        scrape.gauges.insert(name, v);
    }
    for (name, b) in buckets {
        let h = scrape.histograms.entry(name).or_default();
        h.buckets = b.into_iter().map(|(k, v)| (from_order_key(k), v)).collect();
    }
    Ok(scrape)
}

/// Keeps a GPU-labelled sample per GPU (the sum of its label sets on that GPU).
fn per_gpu(scrape: &mut Scrape, family: &str, sample: &Sample) {
    if let Some(gpu) = &sample.gpu {
        *scrape
            .per_gpu
            .entry(family.to_string())
            .or_default()
            .entry(gpu.clone())
            .or_default() += sample.value;
    }
}

/// The family a sample belongs to and its kind: the longest declared family that the
/// sample's name is, or extends with a suffix its kind has (`_total`, `_bucket`, ...).
fn family_of<'a>(kinds: &BTreeMap<&str, Kind>, name: &'a str) -> (&'a str, Kind) {
    const SUFFIXES: [&str; 6] = ["_total", "_created", "_bucket", "_count", "_sum", "_info"];
    if let Some(&k) = kinds.get(name) {
        return (name, k);
    }
    for s in SUFFIXES {
        if let Some(stem) = name.strip_suffix(s) {
            if let Some(&k) = kinds.get(stem) {
                return (stem, k);
            }
        }
    }
    (name, Kind::Other)
}

/// A key that orders finite and infinite `f64` bounds (no NaN: refused by the caller).
fn order_key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn from_order_key(k: u64) -> f64 {
    if k >> 63 == 1 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

/// Reads `name[{labels}] value [timestamp] [# exemplar]`.
fn sample(line: &str) -> Result<Sample<'_>, &'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("not a metric name");
    }
    let mut rest = &line[name_end..];
    let (mut le, mut gpu) = (None, None);
    if let Some(labels) = rest.strip_prefix('{') {
        let (l, g, after) = label_set(labels)?;
        (le, gpu) = (l, g);
        rest = after;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("no space between the name and the value");
    }
    let mut words = rest.split_whitespace();
    let value = words.next().ok_or("no value")?;
    let value = number(value).ok_or("a value that is not a number")?;
    match words.next() {
        None | Some("#") => {}
        Some(ts) if ts.parse::<f64>().is_ok() => {
            if !matches!(words.next(), None | Some("#")) {
                return Err("text after the timestamp");
            }
        }
        Some(_) => return Err("text after the value"),
    }
    Ok(Sample {
        name,
        le,
        gpu,
        value,
    })
}

/// Reads a label set after its `{`: the `le` value if any, the GPU if labelled, and the
/// text after the `}`.
fn label_set(mut s: &str) -> Result<(Option<f64>, Option<Gpu>, &str), &'static str> {
    let mut le = None;
    let (mut gpu, mut host) = (None, None);
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            let gpu = gpu.map(|gpu| Gpu {
                host: host.unwrap_or_default(),
                gpu,
            });
            return Ok((le, gpu, after));
        }
        let key_end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("an unterminated label set")?;
        let key = &s[..key_end];
        if key.is_empty() {
            return Err("a label without a name");
        }
        s = s[key_end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or("a label without `=`")?
            .trim_start();
        s = s.strip_prefix('"').ok_or("a label value without quotes")?;
        let (value, after) = quoted(s)?;
        if key == "le" {
            let bound = number(&value).ok_or("an `le` label that is not a number")?;
            if bound.is_nan() {
                return Err("an `le` label that is NaN");
            }
            le = Some(bound);
        } else if key == "gpu" {
            gpu = Some(value);
        } else if key == "Hostname" {
            host = Some(value);
        }
        s = after.trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels not separated by `,`");
        }
    }
}

/// A quoted label value after its opening quote: the unescaped value and the text after the
/// closing quote.
fn quoted(s: &str) -> Result<(String, &str), &'static str> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, c)) => out.push(c),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err("an unterminated label value")
}

/// A sample value: a float, `+Inf`/`-Inf`/`NaN` in any case.
fn number(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "+inf" | "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 20.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e9
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 6.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.55
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="n"} 3.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="n"} 3.0
vllm:time_to_first_token_seconds_count{model_name="n"} 3.0
vllm:time_to_first_token_seconds_sum{model_name="n"} 0.15
"#;

    #[test]
    fn vllm_families_are_summed_over_label_sets() {
        let s = parse(VLLM).unwrap();
        assert_eq!(s.gauges["vllm:num_requests_running"], 5.0);
        assert_eq!(
            s.gauges["vllm:kv_cache_usage_perc"], 0.375,
            "a ratio is averaged"
        );
        assert_eq!(s.counters["vllm:prompt_tokens"], 120.0);
        assert_eq!(
            s.counters["vllm:request_success"], 10.0,
            "_created is not a count"
        );
        assert!(!s.gauges.contains_key("vllm:prompt_tokens_created"));
        let h = &s.histograms["vllm:time_to_first_token_seconds"];
        assert_eq!(h.buckets, [(0.1, 4.0), (f64::INFINITY, 5.0)]);
        assert_eq!(h.count, 5.0);
        assert!((h.sum - 0.7).abs() < 1e-12, "{}", h.sum);
    }

    #[test]
    fn escapes_timestamps_exemplars_and_untyped_samples_are_read() {
        let text = "# some comment\nup 1 1700000000000\n\
                    weird_total{path=\"a\\\"}b\\\\\",x=\"\\n\"} 7\n\
                    # TYPE c counter\nc_total 2 # {trace_id=\"x\"} 1\n# EOF\n";
        let s = parse(text).unwrap();
        assert_eq!(s.gauges["up"], 1.0);
        assert_eq!(s.counters["weird"], 7.0);
        assert_eq!(s.counters["c"], 2.0);
    }

    #[test]
    fn garbage_is_an_error_with_its_line() {
        for (body, line) in [
            ("<html><body>502</body></html>", 1),
            ("{\"error\": \"nope\"}", 1),
            ("# TYPE a gauge\na 1\na{x=\"unterminated} 2\n", 3),
            ("a one\n", 1),
            ("# TYPE h histogram\nh_bucket{le=\"NaN\"} 1\n", 2),
            ("# TYPE h histogram\nh_bucket 1\n", 2),
            ("a 1 2 3\n", 1),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.line, line, "{body:?}: {e}");
        }
        assert_eq!(parse("").unwrap(), Scrape::default());
    }

    #[test]
    fn bounds_keep_their_order() {
        let mut v = [f64::INFINITY, -1.0, 0.0, 2.5, 0.001, f64::NEG_INFINITY];
        let mut keys: Vec<u64> = v.iter().map(|&x| order_key(x)).collect();
        keys.sort_unstable();
        v.sort_by(f64::total_cmp);
        let back: Vec<f64> = keys.into_iter().map(from_order_key).collect();
        assert_eq!(back, v);
    }
}

#[cfg(test)]
mod scale_tests {
    use super::*;

    #[test]
    fn a_page_of_100k_names_parses_without_quadratic_work() {
        // Issue 36: a /metrics of 100,000 distinct names. A generous bound (debug build,
        // shared cores): a guard against quadratic work, not a benchmark.
        let mut body = String::new();
        for i in 0..100_000 {
            body += &format!("# TYPE m_{i} counter\nm_{i}_total{{a=\"b\"}} {i}\n");
        }
        let started = std::time::Instant::now();
        let s = parse(&body).unwrap();
        let took = started.elapsed();
        assert_eq!(s.counters.len(), 100_000);
        eprintln!("parsed 100k names in {took:?}");
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    }
}
