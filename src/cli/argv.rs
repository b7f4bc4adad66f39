//! Rewrites the raw argument list the way vLLM's `FlexibleArgumentParser` and argparse do
//! before clap sees it, so every Python spelling keeps working:
//!
//! - `_` → `-` in option names (only the name, up to the first `.`; `--key=value` rewrites only
//!   `key`; values are never touched);
//! - dotted JSON arguments (`--extra-body.temperature 0.5`, `--extra_body.top_k=5`,
//!   `--extra-body.stop+ a,b`) merged into one JSON object per option and appended at the end,
//!   so they replace an explicit `--extra-body '{...}'` (as Python does);
//! - unambiguous prefixes (`--num-prom 10`), with argparse's ambiguity error;
//! - `--help=KEYWORD` (help restricted to matching options or one group).
//!
//! Deliberate differences, both more lenient: a separate token such as `-0.5` is a negative
//! number, not a dotted argument (Python fails on `--temperature -0.5`), and repeated list
//! options (`--header`, `--metadata`, `--goodput`, `--lora-modules`) accumulate.

use serde_json::{Map, Value};

use super::pyvalue::{dotted_value, py_float};

/// Why an argument list cannot be rewritten, in argparse's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    /// `options` lists the matching names, `--` included.
    #[error("ambiguous option: --{name} could match {options}")]
    Ambiguous { name: String, options: String },
    #[error("{0}: expected a value after it")]
    MissingValue(String),
    #[error("unrecognized argument '{0}' (long options start with '--')")]
    SingleDash(String),
}

/// The long option names the parser knows: each name or alias, with the id of its option.
#[derive(Debug, Clone)]
pub struct KnownFlags {
    names: Vec<(String, String)>,
}

impl KnownFlags {
    /// `names`: (long name without `--`, option id). Aliases share their option's id.
    pub fn new(names: Vec<(String, String)>) -> Self {
        KnownFlags { names }
    }

    /// Resolves a long name (without `--`) exactly or by unambiguous prefix.
    fn resolve(&self, name: &str) -> Result<Option<&str>, ArgvError> {
        if let Some((n, _)) = self.names.iter().find(|(n, _)| n == name) {
            return Ok(Some(n));
        }
        let matches: Vec<&(String, String)> = self
            .names
            .iter()
            .filter(|(n, _)| n.starts_with(name))
            .collect();
        let first = match matches.first() {
            None => return Ok(None),
            Some(m) => m,
        };
        if matches.iter().all(|(_, id)| *id == first.1) {
            return Ok(Some(&first.0));
        }
        let options: Vec<String> = matches.iter().map(|(n, _)| format!("--{n}")).collect();
        Err(ArgvError::Ambiguous {
            name: name.to_owned(),
            options: options.join(", "),
        })
    }
}

/// The argument list after rewriting, ready for clap.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    /// Arguments (without the program name).
    pub args: Vec<String>,
    /// The keyword of `--help=KEYWORD`, if given.
    pub help_keyword: Option<String>,
}

/// Applies every rewrite, in Python's order: names, dotted arguments, then prefixes.
pub fn rewrite(raw: Vec<String>, known: &KnownFlags) -> Result<Rewritten, ArgvError> {
    let (named, help_keyword) = normalise_names(raw);
    let merged = collect_dotted(named)?;
    let args = expand_prefixes(merged, known)?;
    Ok(Rewritten { args, help_keyword })
}

/// Index of the bare `--` that ends option processing, or the length.
fn options_end(args: &[String]) -> usize {
    args.iter().position(|a| a == "--").unwrap_or(args.len())
}

/// `_` → `-` in the name part of every `--` token; `--help=KW` → `--help` + keyword.
fn normalise_names(raw: Vec<String>) -> (Vec<String>, Option<String>) {
    let end = options_end(&raw);
    let mut keyword = None;
    let mut out = Vec::with_capacity(raw.len());
    for (i, arg) in raw.into_iter().enumerate() {
        if i >= end || !arg.starts_with("--") {
            out.push(arg);
        } else if let Some(kw) = arg.strip_prefix("--help=") {
            keyword = Some(kw.to_lowercase());
            out.push("--help".to_owned());
        } else {
            let (key, value) = match arg.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (arg.as_str(), None),
            };
            // The name is everything up to the first '.', which starts dotted keys.
            let cut = key.find('.').unwrap_or(key.len());
            let mut rewritten = key[..cut].replace('_', "-");
            rewritten.push_str(&key[cut..]);
            if let Some(v) = value {
                rewritten.push('=');
                rewritten.push_str(v);
            }
            out.push(rewritten);
        }
    }
    (out, keyword)
}

/// True for a token such as `-0.5` or `-1e-3`: a value, not a dotted argument.
fn is_negative_number(token: &str) -> bool {
    token.starts_with('-') && py_float(token).is_some()
}

/// Removes dotted arguments (and their values) and appends one `--option JSON` pair per
/// option, merged in order (later keys win, `key+` lists concatenate).
fn collect_dotted(args: Vec<String>) -> Result<Vec<String>, ArgvError> {
    let end = options_end(&args);
    let mut kept = Vec::with_capacity(args.len());
    let mut merged: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let dotted = i < end
            && arg.starts_with('-')
            && arg.contains('.')
            && !is_negative_number(arg)
            && arg.split('=').next().is_some_and(|k| k.contains('.'));
        if !dotted {
            kept.push(arg.clone());
            i += 1;
            continue;
        }
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k, v.to_owned()),
            None => {
                let v = args
                    .get(i + 1)
                    .ok_or_else(|| ArgvError::MissingValue(arg.clone()))?;
                i += 1;
                (arg.as_str(), v.clone())
            }
        };
        let (key, value) = match key.strip_suffix('+') {
            Some(k) => (k, Value::from(value.split(',').collect::<Vec<_>>())),
            None => (key, dotted_value(&value)),
        };
        let mut path = key.split('.');
        let option = path.next().unwrap_or_default().to_owned();
        let nested = path.rev().fold(value, |acc, k| {
            let mut m = Map::new();
            m.insert(k.to_owned(), acc);
            Value::Object(m)
        });
        let Value::Object(update) = nested else {
            unreachable!("a dotted key has at least one segment after the option")
        };
        match merged.iter_mut().find(|(o, _)| *o == option) {
            Some((_, existing)) => merge_into(existing, update),
            None => merged.push((option, update)),
        }
        i += 1;
    }
    for (option, map) in merged {
        kept.push(option);
        kept.push(Value::Object(map).to_string());
    }
    Ok(kept)
}

/// Python's `recursive_dict_update`: objects merge, lists concatenate, anything else replaces.
fn merge_into(target: &mut Map<String, Value>, update: Map<String, Value>) {
    for (k, v) in update {
        match (target.get_mut(&k), v) {
            (Some(Value::Object(t)), Value::Object(u)) => merge_into(t, u),
            (Some(Value::Array(t)), Value::Array(u)) => t.extend(u),
            (_, v) => {
                target.insert(k, v);
            }
        }
    }
}

/// Replaces unambiguous prefixes of long options by the full name; single-dash words
/// (`-num-prompts`) are rejected as Python does.
fn expand_prefixes(args: Vec<String>, known: &KnownFlags) -> Result<Vec<String>, ArgvError> {
    let end = options_end(&args);
    let mut out = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        if i >= end {
            out.push(arg);
            continue;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            // Unknown (or empty) names go through unchanged: clap reports them, with a
            // suggestion when one is close.
            if name.is_empty() {
                out.push(arg);
                continue;
            }
            let resolved = match known.resolve(name)? {
                Some(full) => full.to_owned(),
                None => name.to_owned(),
            };
            out.push(match value {
                Some(v) => format!("--{resolved}={v}"),
                None => format!("--{resolved}"),
            });
        } else if is_single_dash_word(&arg) {
            return Err(ArgvError::SingleDash(arg));
        } else {
            out.push(arg);
        }
    }
    Ok(out)
}

/// `-num-prompts`: a dash followed by a word of several letters (not `-h`, not a number).
fn is_single_dash_word(arg: &str) -> bool {
    let rest = match arg.strip_prefix('-') {
        Some(r) => r,
        None => return false,
    };
    rest.len() > 1 && rest.starts_with(|c: char| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known() -> KnownFlags {
        let names = [
            "num-prompts",
            "num-warmups",
            "extra-body",
            "random-input-len",
            "temperature",
            "top-p",
            "seed",
            "speed-bench-dataset-subset",
            "speed-bench-config",
            "help",
        ];
        KnownFlags::new(
            names
                .iter()
                .map(|n| {
                    let id = if *n == "speed-bench-config" {
                        "speed-bench-dataset-subset"
                    } else {
                        n
                    };
                    (n.to_string(), id.to_string())
                })
                .collect(),
        )
    }

    fn rw(args: &[&str]) -> Result<Vec<String>, String> {
        rewrite(args.iter().map(|s| s.to_string()).collect(), &known())
            .map(|r| r.args)
            .map_err(|e| e.to_string())
    }

    fn sv(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn underscores_become_dashes_in_names_only() {
        assert_eq!(
            rw(&["--random_input_len", "5"]).unwrap(),
            sv(&["--random-input-len", "5"])
        );
        assert_eq!(
            rw(&["--random-input_len=a_b"]).unwrap(),
            sv(&["--random-input-len=a_b"])
        );
        // Unknown names are left for clap (which suggests the closest option).
        assert_eq!(rw(&["--x_y=1"]).unwrap(), sv(&["--x-y=1"]));
        assert_eq!(rw(&["--=1"]).unwrap(), sv(&["--=1"]));
    }

    #[test]
    fn prefixes_expand_and_ambiguity_is_an_error() {
        assert_eq!(
            rw(&["--num-prom", "10"]).unwrap(),
            sv(&["--num-prompts", "10"])
        );
        assert_eq!(rw(&["--num_prom=10"]).unwrap(), sv(&["--num-prompts=10"]));
        assert_eq!(
            rw(&["--num", "10"]).unwrap_err(),
            "ambiguous option: --num could match --num-prompts, --num-warmups"
        );
        // Exact names win over longer ones that share the prefix.
        assert_eq!(rw(&["--seed", "1"]).unwrap(), sv(&["--seed", "1"]));
        // An alias and its option are one choice.
        assert_eq!(
            rw(&["--speed-bench-d", "x"]).unwrap(),
            sv(&["--speed-bench-dataset-subset", "x"])
        );
    }

    #[test]
    fn dotted_arguments_merge_into_one_trailing_object() {
        let out = rw(&[
            "--extra_body.top_k",
            "5",
            "--seed",
            "1",
            "--extra-body.min_p=0.1",
            "--extra-body.stop+",
            "x,y",
            "--extra-body.nested.a",
            "1k",
            "--extra-body.stop+",
            "z",
            "--extra-body.name",
            "plain",
        ])
        .unwrap();
        assert_eq!(&out[..2], &sv(&["--seed", "1"])[..]);
        assert_eq!(out[2], "--extra-body");
        let v: Value = serde_json::from_str(&out[3]).unwrap();
        assert_eq!(
            v,
            json!({"top_k": 5, "min_p": 0.1, "stop": ["x", "y", "z"],
                   "nested": {"a": 1000}, "name": "plain"})
        );
    }

    #[test]
    fn dotted_object_replaces_an_explicit_one() {
        let out = rw(&["--extra-body", "{\"a\":1}", "--extra-body.b", "2"]).unwrap();
        assert_eq!(
            out,
            sv(&["--extra-body", "{\"a\":1}", "--extra-body", "{\"b\":2}"])
        );
    }

    #[test]
    fn dots_in_values_are_not_dotted_arguments() {
        assert_eq!(
            rw(&["--temperature=0.5", "--top-p", "0.9"]).unwrap(),
            sv(&["--temperature=0.5", "--top-p", "0.9"])
        );
        assert_eq!(
            rw(&["--temperature", "-0.5", "--top-p", "0.9"]).unwrap(),
            sv(&["--temperature", "-0.5", "--top-p", "0.9"])
        );
        assert_eq!(
            rw(&["--extra-body.x"]).unwrap_err(),
            "--extra-body.x: expected a value after it"
        );
    }

    #[test]
    fn single_dash_words_and_help_keywords() {
        assert!(rw(&["-num-prompts", "3"])
            .unwrap_err()
            .contains("'-num-prompts'"));
        assert_eq!(rw(&["-h"]).unwrap(), sv(&["-h"]));
        let r = rewrite(sv(&["--help=Sampling"]), &known()).unwrap();
        assert_eq!(r.args, sv(&["--help"]));
        assert_eq!(r.help_keyword.as_deref(), Some("sampling"));
    }

    #[test]
    fn nothing_after_a_bare_double_dash_is_rewritten() {
        assert_eq!(
            rw(&["--seed", "1", "--", "--num_prom"]).unwrap(),
            sv(&["--seed", "1", "--", "--num_prom"])
        );
    }
}
