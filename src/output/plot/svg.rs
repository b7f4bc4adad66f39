//! The small SVG toolkit of the static plots: escaping, "nice" tick steps, and a pair of
//! linear axes that map data to pixels and draw their frame, ticks and labels. Hover text is
//! SVG's own `<title>` (the browser shows it; no script needed).

use std::fmt::Write;

/// Text safe inside HTML/SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Tick positions covering `[lo, hi]` at a 1-2-5 step, about `target` of them.
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A tick label with as many decimals as the tick step needs (none for whole steps).
pub fn label(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step.is_finite() {
        (-step.log10().floor()).clamp(0.0, 9.0) as usize
    } else {
        0
    };
    format!("{v:.decimals$}")
}

/// The step between consecutive ticks (1 when there is only one).
fn step_of(ticks: &[f64]) -> f64 {
    match ticks {
        [a, b, ..] => b - a,
        _ => 1.0,
    }
}

/// Two linear axes in a `width` × `height` SVG with room for labels around the plot area.
#[derive(Debug, Clone, Copy)]
pub struct Axes {
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub width: f64,
    pub height: f64,
}

const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

impl Axes {
    /// Axes over the data ranges, widened a little so no point sits on the frame, and a
    /// degenerate range widened to something drawable.
    pub fn fit(x: (f64, f64), y: (f64, f64), width: f64, height: f64) -> Axes {
        Axes {
            x: pad(x, 0.04),
            y: pad(y, 0.06),
            width,
            height,
        }
    }

    pub fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x.0) / (self.x.1 - self.x.0) * (self.width - LEFT - RIGHT)
    }

    pub fn py(&self, y: f64) -> f64 {
        self.height - BOTTOM - (y - self.y.0) / (self.y.1 - self.y.0) * (self.height - TOP - BOTTOM)
    }

    /// Opens the `<svg>` and draws the title, grid, ticks and axis labels; close it with
    /// `</svg>` after the data.
    pub fn open(&self, out: &mut String, title: &str, x_label: &str, y_label: &str) {
        self.frame(out, title, x_label, y_label, (true, true));
    }

    /// [`Axes::open`] for a chart whose x positions are categories: no numeric x ticks (the
    /// caller labels its positions).
    pub fn open_categorical(&self, out: &mut String, title: &str, x_label: &str, y_label: &str) {
        self.frame(out, title, x_label, y_label, (false, true));
    }

    /// [`Axes::open`] with the caller's x ticks (position, label): a numeric axis with a
    /// slot of its own beyond the numbers (`inf`).
    pub fn open_with_x_ticks(
        &self,
        out: &mut String,
        title: &str,
        x_label: &str,
        y_label: &str,
        x_ticks: &[(f64, String)],
    ) {
        self.frame(out, title, x_label, y_label, (false, true));
        for (t, text) in x_ticks {
            self.x_tick(out, *t, text);
        }
    }

    /// One x tick: its mark under the axis and its label.
    fn x_tick(&self, out: &mut String, t: f64, text: &str) {
        let (x, y0) = (self.px(t), self.py(self.y.0));
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y0:.1}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            y0 + 4.0,
            y0 + 16.0,
            escape(text)
        );
    }

    /// [`Axes::open`] for a strip of values along x: no y ticks (y is only room).
    pub fn open_strip(&self, out: &mut String, title: &str, x_label: &str) {
        self.frame(out, title, x_label, "", (true, false));
    }

    /// The frame, with numeric tick labels on the axes `(x, y)` asked for.
    fn frame(
        &self,
        out: &mut String,
        title: &str,
        x_label: &str,
        y_label: &str,
        (x_ticks, y_ticks): (bool, bool),
    ) {
        let (w, h) = (self.width, self.height);
        let _ = write!(
            out,
            "<svg class=\"chart\" width=\"{w}\" \
             height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">"
        );
        let _ = write!(
            out,
            "<text class=\"title\" x=\"{}\" y=\"18\" text-anchor=\"middle\">{}</text>",
            w / 2.0,
            escape(title)
        );
        let (x0, x1) = (self.px(self.x.0), self.px(self.x.1));
        let (y0, y1) = (self.py(self.y.0), self.py(self.y.1));
        let y_ticks = if y_ticks {
            ticks(self.y.0, self.y.1, 5)
        } else {
            Vec::new()
        };
        let y_step = step_of(&y_ticks);
        for &t in &y_ticks {
            let y = self.py(t);
            let _ = write!(
                out,
                "<line class=\"gridline\" x1=\"{x0:.1}\" x2=\"{x1:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                x0 - 4.0,
                y + 4.0,
                label(t, y_step)
            );
        }
        let x_ticks = if x_ticks {
            ticks(self.x.0, self.x.1, 6)
        } else {
            Vec::new()
        };
        let x_step = step_of(&x_ticks);
        for &t in &x_ticks {
            self.x_tick(out, t, &label(t, x_step));
        }
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{x0:.1}\" x2=\"{x1:.1}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\"/>\
             <line class=\"axis\" x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{y0:.1}\" y2=\"{y1:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            (x0 + x1) / 2.0,
            h - 8.0,
            escape(x_label),
            (y0 + y1) / 2.0,
            escape(y_label)
        );
    }
}

/// `r` widened by `share` of its length on both sides (a point range by ±1 or ±10%).
fn pad(r: (f64, f64), share: f64) -> (f64, f64) {
    let (lo, hi) = r;
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi <= lo {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - d, lo + d);
    }
    let d = (hi - lo) * share;
    (lo - d, hi + d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_step_by_one_two_five() {
        assert_eq!(ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1000.0, 4), [0.0, 500.0, 1000.0]);
        assert_eq!(ticks(5.0, 5.0, 4), [5.0]);
    }

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn axes_map_the_padded_range_onto_the_plot_area() {
        let a = Axes::fit((0.0, 100.0), (0.0, 10.0), 400.0, 300.0);
        assert!(a.px(0.0) > LEFT && a.px(100.0) < 400.0 - RIGHT);
        assert!(a.py(0.0) < 300.0 - BOTTOM && a.py(10.0) > TOP);
        assert_eq!(label(2.0, 1.0), "2");
        assert_eq!(label(1024.2, 0.2), "1024.2");
        assert_eq!(label(0.25, 0.05), "0.25");
    }
}
