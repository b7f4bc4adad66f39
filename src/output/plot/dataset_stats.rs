//! `--plot-dataset-stats`: Python's four panels as inline SVG — histograms (30 bins, numpy's
//! edges) of prompt tokens, output tokens and their sum, and the tokens of each request
//! stacked (prompt under output). Above 1,000 requests the stacked panel shows the mean of
//! consecutive groups of requests (one bar per group, at most 1,000 bars), so the page stays
//! small; the histograms always count every request.

use std::fmt::Write;

use super::page;
use super::svg::Axes;
use crate::metrics::RequestOutput;

const BINS: usize = 30;
/// Bars at most in the per-request panel.
pub const MAX_BARS: usize = 1000;
const PROMPT_COLOUR: &str = "steelblue";
const OUTPUT_COLOUR: &str = "coral";
const TOTAL_COLOUR: &str = "mediumseagreen";
const W: f64 = 560.0;
const H: f64 = 360.0;

/// numpy's `histogram(values, bins)`: equal-width bins over `[min, max]` (the last bin
/// closed; a single value gets the range ±0.5). Returns the edges and the counts.
pub fn histogram(values: &[u64], bins: usize) -> (Vec<f64>, Vec<u64>) {
    let lo = values.iter().copied().min().unwrap_or(0) as f64;
    let hi = values.iter().copied().max().unwrap_or(0) as f64;
    let (lo, hi) = if lo == hi {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    };
    let width = (hi - lo) / bins as f64;
    let edges: Vec<f64> = (0..=bins).map(|i| lo + width * i as f64).collect();
    let mut counts = vec![0u64; bins];
    for &v in values {
        let b = (((v as f64 - lo) / width) as usize).min(bins - 1);
        counts[b] += 1;
    }
    (edges, counts)
}

/// One histogram panel.
fn histogram_svg(out: &mut String, title: &str, x_label: &str, values: &[u64], colour: &str) {
    let (edges, counts) = histogram(values, BINS);
    let top = counts.iter().copied().max().unwrap_or(0) as f64;
    let axes = Axes {
        y: (0.0, top.max(1.0) * 1.05),
        ..Axes::fit((edges[0], edges[BINS]), (0.0, 1.0), W, H)
    };
    axes.open(out, title, x_label, "Frequency");
    for (i, &c) in counts.iter().enumerate() {
        let (x0, x1) = (axes.px(edges[i]), axes.px(edges[i + 1]));
        let (y0, y1) = (axes.py(0.0), axes.py(c as f64));
        let _ = write!(
            out,
            "<rect class=\"bin\" x=\"{x0:.2}\" y=\"{y1:.2}\" width=\"{:.2}\" height=\"{:.2}\" \
             fill=\"{colour}\" fill-opacity=\"0.7\" stroke=\"black\" stroke-width=\"0.5\">\
             <title>{:.1} – {:.1}: {c}</title></rect>",
            (x1 - x0).max(0.5),
            y0 - y1,
            edges[i],
            edges[i + 1]
        );
    }
    out.push_str("</svg>");
}

/// The stacked per-request panel (or per group of requests above [`MAX_BARS`]).
fn stacked_svg(out: &mut String, prompt: &[u64], output: &[u64]) {
    let n = prompt.len();
    let groups = n.clamp(1, MAX_BARS);
    let mean = |v: &[u64], a: usize, b: usize| v[a..b].iter().sum::<u64>() as f64 / (b - a) as f64;
    let bars: Vec<(usize, usize, f64, f64)> = (0..groups)
        .map(|g| {
            let (a, b) = (
                g * n / groups,
                ((g + 1) * n / groups).max(g * n / groups + 1),
            );
            let b = b.min(n);
            (a, b, mean(prompt, a, b), mean(output, a, b))
        })
        .collect();
    let top = bars.iter().map(|b| b.2 + b.3).fold(0.0, f64::max);
    let axes = Axes {
        y: (0.0, top.max(1.0) * 1.05),
        ..Axes::fit((0.0, n as f64), (0.0, 1.0), W, H)
    };
    let title = if groups < n {
        format!("Tokens per Request (Stacked; mean of {} groups)", groups)
    } else {
        "Tokens per Request (Stacked)".to_string()
    };
    axes.open(out, &title, "Request ID", "Tokens");
    for &(a, b, p, o) in &bars {
        let (x0, x1) = (axes.px(a as f64), axes.px(b as f64));
        let w = ((x1 - x0) * 0.9).max(0.5);
        let (base, mid, top) = (axes.py(0.0), axes.py(p), axes.py(p + o));
        let who = if b - a == 1 {
            format!("request {a}")
        } else {
            format!("requests {a}–{}", b - 1)
        };
        let _ = write!(
            out,
            "<g class=\"bar\"><title>{who}: prompt {p:.1}, output {o:.1}</title>\
             <rect x=\"{x0:.2}\" y=\"{mid:.2}\" width=\"{w:.2}\" height=\"{:.2}\" \
             fill=\"{PROMPT_COLOUR}\" fill-opacity=\"0.7\"/>\
             <rect x=\"{x0:.2}\" y=\"{top:.2}\" width=\"{w:.2}\" height=\"{:.2}\" \
             fill=\"{OUTPUT_COLOUR}\" fill-opacity=\"0.7\"/></g>",
            base - mid,
            mid - top
        );
    }
    out.push_str("</svg>");
}

/// The page for the requests of a run (prompt and output tokens as the result reports them).
pub fn render(outputs: &[RequestOutput], title: &str) -> String {
    let prompt: Vec<u64> = outputs.iter().map(|o| o.prompt_len).collect();
    let output: Vec<u64> = outputs.iter().map(|o| o.output_tokens).collect();
    let total: Vec<u64> = prompt.iter().zip(&output).map(|(p, o)| p + o).collect();
    let mut body = String::new();
    let _ = write!(
        body,
        "<p class=\"note\">{} requests; hover a bar for its figures.</p>\
         <ul class=\"legend\"><li><span class=\"swatch\" style=\"background:{PROMPT_COLOUR}\">\
         </span>Prompt Tokens</li><li><span class=\"swatch\" style=\"background:{OUTPUT_COLOUR}\">\
         </span>Output Tokens</li></ul>\n<div class=\"grid\">",
        outputs.len()
    );
    if outputs.is_empty() {
        body.push_str("<p>No data available for dataset statistics plot</p>");
    } else {
        let panels: [(&str, &str, &[u64], &str); 3] = [
            (
                "Prompt Tokens Distribution",
                "Prompt Tokens",
                &prompt,
                PROMPT_COLOUR,
            ),
            (
                "Output Tokens Distribution",
                "Output Tokens",
                &output,
                OUTPUT_COLOUR,
            ),
            (
                "Total Tokens Distribution",
                "Total Tokens (Prompt + Output)",
                &total,
                TOTAL_COLOUR,
            ),
        ];
        for (t, x, v, c) in panels {
            histogram_svg(&mut body, t, x, v, c);
        }
        stacked_svg(&mut body, &prompt, &output);
    }
    body.push_str("</div>\n");
    // `page` escapes the title itself; escaping it here too showed `&amp;` as text.
    page(title, &body, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_follow_numpy() {
        let (edges, counts) = histogram(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 5);
        assert_eq!(edges, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // The last bin is closed: 8, 9 and 10.
        assert_eq!(counts, [2, 2, 2, 2, 3]);
        let (edges, counts) = histogram(&[7, 7, 7], 2);
        assert_eq!(edges, [6.5, 7.0, 7.5]);
        assert_eq!(counts, [0, 3]);
    }

    #[test]
    fn every_request_is_counted_and_large_runs_are_grouped() {
        let outputs: Vec<RequestOutput> = (0..2500)
            .map(|i| RequestOutput {
                prompt_len: 100 + i % 7,
                output_tokens: 20,
                ..RequestOutput::default()
            })
            .collect();
        let html = render(&outputs, "stats");
        assert_eq!(html.matches("class=\"bin\"").count(), 3 * BINS);
        assert_eq!(html.matches("class=\"bar\"").count(), MAX_BARS);
        assert!(html.contains("mean of 1000 groups"));
    }

    #[test]
    fn dataset_stats_title_is_escaped_once() {
        let outputs = [RequestOutput {
            prompt_len: 3,
            output_tokens: 2,
            ..RequestOutput::default()
        }];
        let html = render(&outputs, "a&b <r>");
        assert!(html.contains("<title>a&amp;b &lt;r&gt;</title>"), "{html}");
        assert!(html.contains("<h1>a&amp;b &lt;r&gt;</h1>"), "{html}");
        assert!(
            !html.contains("&amp;amp;") && !html.contains("&amp;lt;"),
            "{html}"
        );
    }
}
