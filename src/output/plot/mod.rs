//! Plots as self-contained HTML files that open offline: the request timeline
//! (`--plot-timeline`), the dataset's length histograms (`--plot-dataset-stats`) and sweep /
//! repeated-run charts (`vllm-bench plot`). Everything a page needs is inline — data, styles,
//! SVG, our own small scripts — so a page makes no network request when it is viewed.
//!
//! Each plot module turns finished figures into a page; [`page`] is the one HTML shell and
//! [`svg`] the one chart toolkit (axes, ticks, escaping) the static plots share. Nothing here
//! runs during a measurement.

pub mod dataset_stats;
pub mod runs_plot;
pub mod svg;
pub mod timeline;

use std::path::{Path, PathBuf};

/// Stylesheet shared by every page.
const STYLE: &str = include_str!("assets/page.css");

/// One HTML page: `title`, `body` (trusted markup built by the plot modules) and, if any,
/// an inline script.
pub fn page(title: &str, body: &str, script: Option<&str>) -> String {
    let mut out = String::with_capacity(body.len() + script.map_or(0, str::len) + 2048);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<title>");
    out.push_str(&svg::escape(title));
    out.push_str("</title>\n<style>\n");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<h1>");
    out.push_str(&svg::escape(title));
    out.push_str("</h1>\n");
    out.push_str(body);
    if let Some(js) = script {
        out.push_str("<script>\n");
        out.push_str(js);
        out.push_str("\n</script>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// Python's naming: the result file's path with its extension replaced
/// (`Path(file_name).with_suffix(".timeline.html")`).
pub fn beside(result: &Path, suffix: &str) -> PathBuf {
    crate::output::result_files::derived(result, "", Some(suffix))
}

/// Writes a plot, creating its directory; says where on stdout as Python does. A plot
/// that cannot be written is a warning, not a failed run (the result is already saved).
pub fn write(path: &Path, html: &str, what: &str, console: &super::stdio::Console) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(path, html) {
        Ok(()) => console.line(format_args!("{what} saved to: {}", path.display())),
        Err(e) => console.warning(format_args!(
            "cannot write the {what} {}: {e}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_named_after_the_result_file_as_python_does() {
        let p = |s: &str| beside(Path::new(s), "timeline.html");
        assert_eq!(p("r/a-1qps.json"), Path::new("r/a-1qps.timeline.html"));
        assert_eq!(p("runs.jsonl"), Path::new("runs.timeline.html"));
        assert_eq!(p("noext"), Path::new("noext.timeline.html"));
    }

    #[test]
    fn the_page_escapes_its_title() {
        let html = page("a<b", "<p>x</p>", None);
        assert!(html.contains("<title>a&lt;b</title>"));
        assert!(!html.contains("<script>"));
    }
}
