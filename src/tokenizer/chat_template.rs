//! Chat templates: `tokenizer.apply_chat_template(messages, add_generation_prompt=...,
//! tokenize=False, **kwargs)` of `transformers`, rendered with minijinja.
//!
//! The template is `chat_template` of `tokenizer_config.json` (a string, or a list of
//! `{"name", "template"}` of which `default` is used), else a `chat_template.jinja` file
//! beside it. The environment matches `transformers`' own: `trim_blocks` and
//! `lstrip_blocks`, loop controls, `raise_exception`, Python's string methods
//! (minijinja-contrib's pycompat), and a `tojson` that writes what Python's `json.dumps`
//! writes (`", "` and `": "` separators, no ASCII or HTML escaping; minijinja's own escapes
//! `<`, `>`, `&` and `'`). The context is the messages, `add_generation_prompt`, the named
//! special tokens (`bos_token`, `eos_token`, …) and `--chat-template-kwargs` on top.

use std::path::{Path, PathBuf};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;
use serde_json::Map;

use super::special::SpecialTokensConfig;

/// Why a chat template cannot be loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    /// `tokenizer_config.json` is unreadable or its `chat_template` is not usable.
    #[error("{}: {why}", path.display())]
    Config { path: PathBuf, why: String },
    /// The template does not compile.
    #[error("the chat template of {}: {why}", path.display())]
    Syntax { path: PathBuf, why: String },
    /// The template failed while rendering (`raise_exception` or a type error).
    #[error("rendering the chat template of {}: {why}", path.display())]
    Render { path: PathBuf, why: String },
}

/// A compiled chat template with the special tokens it may refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    specials: Vec<(&'static str, String)>,
    /// Where the template came from, for errors.
    source: PathBuf,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// The template of the tokenizer files in `dir`, if they have one.
    pub fn from_dir(dir: &Path) -> Result<Option<Self>, ChatTemplateError> {
        let Some((source, text)) = find(dir)? else {
            return Ok(None);
        };
        let specials = SpecialTokensConfig::from_dir(dir)
            .map_err(|e| ChatTemplateError::Config {
                path: source.clone(),
                why: format!("{e:#}"),
            })?
            .named;
        Self::compile(source, text, specials).map(Some)
    }

    /// Compiles `text` (`source` names it in errors).
    pub fn compile(
        source: PathBuf,
        text: String,
        specials: Vec<(&'static str, String)>,
    ) -> Result<Self, ChatTemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid");
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, text)
            .map_err(|e| ChatTemplateError::Syntax {
                path: source.clone(),
                why: one_line(&e),
            })?;
        Ok(Self {
            env,
            specials,
            source,
        })
    }

    /// Renders `messages` (a JSON list of `{"role", "content"}`) as `transformers` does.
    pub fn render(
        &self,
        messages: &serde_json::Value,
        add_generation_prompt: bool,
        kwargs: Option<&Map<String, serde_json::Value>>,
    ) -> Result<String, ChatTemplateError> {
        let mut ctx = Map::new();
        ctx.insert("messages".into(), messages.clone());
        ctx.insert("tools".into(), serde_json::Value::Null);
        ctx.insert("documents".into(), serde_json::Value::Null);
        ctx.insert(
            "add_generation_prompt".into(),
            serde_json::Value::Bool(add_generation_prompt),
        );
        for (k, v) in &self.specials {
            ctx.insert((*k).into(), serde_json::Value::String(v.clone()));
        }
        for (k, v) in kwargs.into_iter().flatten() {
            ctx.insert(k.clone(), v.clone());
        }
        let render = || -> Result<String, Error> {
            self.env
                .get_template(NAME)?
                .render(Value::from(Serde(&ctx)))
        };
        render().map_err(|e| ChatTemplateError::Render {
            path: self.source.clone(),
            why: one_line(&e),
        })
    }

    /// One user message with `content`, rendered with the generation prompt: what the
    /// datasets send and count (Python's `[{"role": "user", "content": prompt}]`).
    pub fn render_user(
        &self,
        content: &str,
        kwargs: Option<&Map<String, serde_json::Value>>,
    ) -> Result<String, ChatTemplateError> {
        let messages = serde_json::json!([{ "role": "user", "content": content }]);
        self.render(&messages, true, kwargs)
    }
}

/// The template text and the file it came from.
fn find(dir: &Path) -> Result<Option<(PathBuf, String)>, ChatTemplateError> {
    let config = dir.join("tokenizer_config.json");
    let from_config = match std::fs::read_to_string(&config) {
        Ok(text) => template_of_config(&config, &text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(ChatTemplateError::Config {
                path: config,
                why: e.to_string(),
            })
        }
    };
    if let Some(t) = from_config {
        return Ok(Some((config, t)));
    }
    let jinja = dir.join("chat_template.jinja");
    match std::fs::read_to_string(&jinja) {
        Ok(t) => Ok(Some((jinja, t))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ChatTemplateError::Config {
            path: jinja,
            why: e.to_string(),
        }),
    }
}

fn template_of_config(path: &Path, text: &str) -> Result<Option<String>, ChatTemplateError> {
    let bad = |why: String| ChatTemplateError::Config {
        path: path.to_owned(),
        why,
    };
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    match doc.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(t)) => Ok(Some(t.clone())),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(|t| t.as_str())
            .map(|t| Some(t.to_owned()))
            .ok_or_else(|| bad("\"chat_template\" is a list without a \"default\" entry".into())),
        Some(_) => Err(bad("\"chat_template\" must be a string or a list".into())),
    }
}

fn one_line(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s.replace('\n', " ")
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`, as `transformers`'
/// `tojson`.
fn tojson(value: Value, kwargs: minijinja::value::Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, fmt))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonFormatter,
        )),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    Ok(Value::from_safe_string(text))
}

/// `json.dumps`' default separators: `", "` between items, `": "` after keys.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(t: &str) -> ChatTemplate {
        ChatTemplate::compile("t.json".into(), t.into(), vec![("bos_token", "<s>".into())]).unwrap()
    }

    #[test]
    fn renders_like_transformers() {
        let t = compile(
            "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content.strip() }}\n{% endfor %}\
             {% if add_generation_prompt %}[assistant]{% endif %}",
        );
        assert_eq!(
            t.render_user("  hi  ", None).unwrap(),
            "<s>[user] hi\n[assistant]"
        );
    }

    #[test]
    fn kwargs_reach_the_template_and_tojson_is_pythons() {
        let t = compile("{% if enable_thinking is false %}no-think {% endif %}{{ x | tojson }}");
        let kwargs: Map<_, _> = serde_json::from_str(
            r#"{"enable_thinking": false, "x": {"a": [1, "<é>"], "b": null}}"#,
        )
        .unwrap();
        assert_eq!(
            t.render_user("q", Some(&kwargs)).unwrap(),
            r#"no-think {"a": [1, "<é>"], "b": null}"#
        );
    }

    #[test]
    fn errors_are_one_line_naming_the_file() {
        let e = ChatTemplate::compile("cfg.json".into(), "{% if %}".into(), vec![])
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("the chat template of cfg.json: "), "{e}");
        assert!(!e.contains('\n'));
        let t = compile("{{ raise_exception('only user turns') }}");
        let e = t.render_user("q", None).unwrap_err().to_string();
        assert!(e.contains("only user turns"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_named_list_uses_default() {
        let cfg = r#"{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}"#;
        assert_eq!(
            template_of_config(Path::new("c"), cfg).unwrap().as_deref(),
            Some("D")
        );
        assert!(template_of_config(Path::new("c"), r#"{"chat_template": 3}"#).is_err());
        assert_eq!(template_of_config(Path::new("c"), "{}").unwrap(), None);
    }
}
