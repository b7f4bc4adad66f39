//! The single list of what the parser accepts but vllm-bench cannot run yet: Python flags,
//! backends and datasets (and a few vllm-bench reference features). Validation refuses them
//! with one clear line, and `--help` marks them. Implementing a feature means deleting its
//! entries here.
//!
//! An entry is either `--flag` (refused when given at all) or `--flag value` (refused for that
//! value of a choice flag). The list lives with the parser (which marks the help); the
//! refusal itself is validation's (`config::unimplemented`).

use super::{Backend, DatasetName};

/// Everything accepted for compatibility but not implemented yet.
pub const UNIMPLEMENTED: &[&str] = &["--custom-ensure-client-side-data"];

/// True if `flag` (`--num-runs`) is refused whenever it is given.
pub fn is_flag(flag: &str) -> bool {
    UNIMPLEMENTED.contains(&flag)
}

/// True if `value` of the choice flag `flag` (`--backend openai-audio`) is refused.
pub fn is_choice(flag: &str, value: &str) -> bool {
    UNIMPLEMENTED
        .iter()
        .any(|e| e.split_once(' ') == Some((flag, value)))
}

/// Backends not implemented yet, by name.
pub fn backends() -> Vec<&'static str> {
    Backend::all()
        .iter()
        .map(|b| b.name())
        .filter(|n| is_choice("--backend", n))
        .collect()
}

/// Datasets not implemented yet, by name.
pub fn datasets() -> Vec<&'static str> {
    DatasetName::all()
        .iter()
        .map(|d| d.name())
        .filter(|n| is_choice("--dataset-name", n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_entry_names_a_real_flag_or_choice() {
        let cmd = crate::cli::command();
        for entry in UNIMPLEMENTED {
            let (flag, value) = match entry.split_once(' ') {
                Some((f, v)) => (f, Some(v)),
                None => (*entry, None),
            };
            let long = flag.trim_start_matches("--");
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("{entry}: no such flag"));
            if let Some(v) = value {
                assert!(
                    arg.get_possible_values().iter().any(|p| p.get_name() == v),
                    "{entry}: no such choice"
                );
            }
        }
    }

    #[test]
    fn every_backend_and_dataset_of_python_runs() {
        assert!(backends().is_empty(), "{:?}", backends());
        assert!(datasets().is_empty(), "{:?}", datasets());
        assert!(is_flag("--custom-ensure-client-side-data"));
        assert!(!is_choice("--backend", "openai-audio"));
    }
}
