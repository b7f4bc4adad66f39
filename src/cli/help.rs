//! `--help=KEYWORD`, as vLLM's parser offers it: the options of one group (`--help=sampling
//! parameters`), the options whose names contain the keyword (`--help=ramp`), or everything
//! (`--help=all`); beyond vLLM, also the options whose group title contains the keyword or
//! whose help has it as a word (`--help=rate` lists --burstiness and --max-concurrency).

use clap::{Arg, Command};

/// Renders help restricted to `keyword` (already lower-cased); `None` when no group or
/// option matches it (a usage error: a typo must not look like an empty answer).
pub(crate) fn keyword_help(cmd: Command, keyword: &str) -> Option<String> {
    let kw = keyword.replace('_', "-");
    if kw == "all" {
        return Some(cmd.clone().render_help().to_string());
    }
    let kw = kw.to_lowercase();
    let heading = |a: &Arg| a.get_help_heading().map(str::to_lowercase);
    let in_group = |a: &Arg| heading(a).is_some_and(|h| h == kw);
    // Beyond Python (names only): a group whose title contains the keyword, or the keyword
    // as a whole word of the help text (`rate` finds --burstiness and --max-concurrency,
    // not every help that says "generate").
    let related = |a: &Arg| {
        a.get_long().is_some_and(|l| l.contains(&kw))
            || heading(a).is_some_and(|h| h.contains(&kw))
            || a.get_help()
                .is_some_and(|h| has_word(&h.to_string().to_lowercase(), &kw))
    };
    let by_group = cmd.get_arguments().any(&in_group);
    let keep = |a: &Arg| if by_group { in_group(a) } else { related(a) };
    if !cmd.get_arguments().any(&keep) {
        return None;
    }
    let mut filtered = cmd
        .mut_args(|a| {
            let show = keep(&a);
            a.hide(!show)
        })
        .disable_help_flag(true)
        .disable_version_flag(true);
    Some(filtered.render_help().to_string())
}

/// Whether `word` occurs in `text` with no letter, digit or `-` right before or after it.
fn has_word(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '-';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

#[cfg(test)]
mod tests {
    use super::has_word;

    #[test]
    fn whole_words_only() {
        assert!(has_word("the request rate, in req/s", "rate"));
        assert!(has_word("rate", "rate"));
        assert!(!has_word("generate prompts", "rate"));
        assert!(!has_word("rate-limit", "rate"));
        assert!(has_word("max concurrency (requests)", "max concurrency"));
    }
}
