//! Where the summary of several measured runs goes (a sweep's, repeated runs', an SLO
//! search's): whether it is saved, its path beside the results, and its `--plot` page.

use crate::config::Config;
use crate::output::localtime::LocalDateTime;
use crate::output::plot;

/// Where a summary document goes: beside the results, named after `--result-filename`
/// when given (`output::result_files::ResultFiles::summary`).
pub fn summary_path(config: &Config, kind: &str) -> std::path::PathBuf {
    config
        .output
        .result_files()
        .summary(kind, &LocalDateTime::now().result_date())
}

/// The page of the summary saved at `path`: the same name, `.html`.
pub fn page_path(path: &std::path::Path) -> std::path::PathBuf {
    crate::output::result_files::derived(path, "", Some("html"))
}

/// `--plot`: the summary's page at `path` (the summary document's, with `.html`).
pub fn write_summary_plot(
    path: &std::path::Path,
    summary: &plot::runs_plot::Summary,
    console: &crate::output::stdio::Console,
) {
    let title = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    plot::write(
        path,
        &plot::runs_plot::render(summary, &title),
        "Summary plot",
        console,
    );
}
