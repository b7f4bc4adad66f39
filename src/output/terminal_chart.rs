//! The terminal chart printed under the result block: output tokens per second and requests
//! in flight per second of the run, as bars of Unicode eighth blocks (Python draws the same
//! two series with termplotlib and gnuplot when they are installed; we need neither).
//!
//! The series are Python's one-second grid ([`crate::metrics::peaks::per_second`]): chunks
//! per second and requests active during each second. A run longer than the chart is wide is
//! drawn with each column the mean of the seconds it covers; the title keeps the true peak.

use std::fmt::Write;

use crate::metrics::peaks::PerSecond;

/// Rows of one chart; each row holds eight levels (`▁` to `█`).
const ROWS: usize = 4;
/// Columns at most (a run of more seconds is averaged down to this).
pub const MAX_WIDTH: usize = 60;
/// Width of the y-axis labels.
const LABEL: usize = 8;
const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Both charts, or nothing when the run has no successful request.
pub fn render(grid: Option<&PerSecond>) -> String {
    let Some(grid) = grid else {
        return String::new();
    };
    let mut out = String::new();
    chart(&mut out, "Output tokens per second", &grid.chunks);
    chart(&mut out, "Requests in flight per second", &grid.active);
    out
}

/// One chart: a title with the peak, `ROWS` rows of bars, the time axis.
fn chart(out: &mut String, title: &str, series: &[u64]) {
    let peak = series.iter().copied().max().unwrap_or(0);
    let _ = writeln!(out, "{title} (peak {peak})");
    let columns = columns(series, MAX_WIDTH);
    let top = columns.iter().copied().fold(0.0, f64::max);
    // Height of each column in eighths of a row.
    let heights: Vec<usize> = columns
        .iter()
        .map(|&v| {
            if top > 0.0 {
                (v / top * (ROWS * 8) as f64).round() as usize
            } else {
                0
            }
        })
        .collect();
    for row in 0..ROWS {
        let label = match row {
            0 => format!("{top:.0}"),
            r if r == ROWS - 1 => "0".to_string(),
            _ => String::new(),
        };
        let base = (ROWS - 1 - row) * 8;
        let bars: String = heights
            .iter()
            .map(|&h| EIGHTHS[h.saturating_sub(base).min(8)])
            .collect();
        let _ = writeln!(out, "{label:>LABEL$} │{}", bars.trim_end());
    }
    let width = columns.len();
    let _ = writeln!(out, "{:>LABEL$} └{}", "", "─".repeat(width));
    let end = format!("{}s", series.len());
    // Under the axis line, from its corner to its end.
    let pad = (width + 1).saturating_sub(2 + end.len()).max(1);
    let _ = writeln!(out, "{:>LABEL$} 0s{}{end}", "", " ".repeat(pad));
}

/// `series` in at most `width` columns, each the mean of the seconds it covers.
fn columns(series: &[u64], width: usize) -> Vec<f64> {
    let n = series.len();
    if n <= width {
        return series.iter().map(|&v| v as f64).collect();
    }
    (0..width)
        .map(|c| {
            let (a, b) = (c * n / width, (c + 1) * n / width);
            let part = &series[a..b.max(a + 1)];
            part.iter().sum::<u64>() as f64 / part.len() as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constructed_run_draws_exactly() {
        let grid = PerSecond {
            chunks: vec![0, 3, 16, 32, 20],
            active: vec![1, 2, 2, 2, 1],
        };
        let expected = "\
Output tokens per second (peak 32)
      32 │   █
         │   █▄
         │  ███
       0 │ ▃███
         └─────
         0s  5s
Requests in flight per second (peak 2)
       2 │ ███
         │ ███
         │█████
       0 │█████
         └─────
         0s  5s
";
        assert_eq!(render(Some(&grid)), expected);
    }

    #[test]
    fn long_runs_are_averaged_to_the_width() {
        let series: Vec<u64> = (0..120).map(|i| i % 2).collect();
        let cols = columns(&series, MAX_WIDTH);
        assert_eq!(cols.len(), MAX_WIDTH);
        assert!(cols.iter().all(|&c| c == 0.5));
    }

    #[test]
    fn no_successful_request_draws_nothing() {
        assert_eq!(render(None), "");
    }
}
