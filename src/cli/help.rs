//! `--help=KEYWORD`, as vLLM's parser offers it: the options of one group (`--help=sampling
//! parameters`), the options whose names contain the keyword (`--help=ramp`), or everything
//! (`--help=all`).

use clap::{Arg, Command};

/// Renders help restricted to `keyword` (already lower-cased).
pub(crate) fn keyword_help(cmd: Command, keyword: &str) -> String {
    let kw = keyword.replace('_', "-");
    if kw == "all" {
        return cmd.clone().render_help().to_string();
    }
    let in_group = |a: &Arg| a.get_help_heading().is_some_and(|h| h.to_lowercase() == kw);
    let named = |a: &Arg| a.get_long().is_some_and(|l| l.contains(&kw));
    let by_group = cmd.get_arguments().any(&in_group);
    let keep = |a: &Arg| if by_group { in_group(a) } else { named(a) };
    if !cmd.get_arguments().any(&keep) {
        return format!(
            "No group or arguments matching '{kw}'. Use '--help' to see every option \
             or '--help=all'.\n"
        );
    }
    let mut filtered = cmd
        .mut_args(|a| {
            let show = keep(&a);
            a.hide(!show)
        })
        .disable_help_flag(true)
        .disable_version_flag(true);
    filtered.render_help().to_string()
}
