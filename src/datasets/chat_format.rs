//! The prompt as the file datasets count and send it: one user message rendered with the
//! tokenizer's chat template and the generation prompt (Python's
//! `tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
//! add_generation_prompt=True, tokenize=False, **chat_template_kwargs)`), or the raw text with
//! `--skip-chat-template`.

use serde_json::{Map, Value};

use super::error::DatasetError;
use crate::tokenizer::{ChatTemplate, Tokenizer};

/// Applies (or skips) the chat template.
pub struct ChatFormat {
    template: Option<ChatTemplate>,
    kwargs: Option<Map<String, Value>>,
}

impl ChatFormat {
    /// Raw prompts (`--skip-chat-template`).
    pub fn raw() -> Self {
        Self {
            template: None,
            kwargs: None,
        }
    }

    /// The tokenizer's template with `--chat-template-kwargs`; an error naming `what` (the
    /// dataset) when the tokenizer has none.
    pub fn of_tokenizer(
        tok: &Tokenizer,
        kwargs: Option<Map<String, Value>>,
        what: &str,
    ) -> Result<Self, DatasetError> {
        let template = tok
            .chat_template()
            .map_err(|e| DatasetError::Unusable(e.to_string()))?
            .ok_or_else(|| {
                DatasetError::Unusable(format!(
                    "{what} renders prompts with the tokenizer's chat template, but tokenizer \
                     {} has none (no \"chat_template\" in its tokenizer_config.json); pass a \
                     --tokenizer that has one, or --skip-chat-template",
                    tok.id()
                ))
            })?;
        Ok(Self {
            template: Some(template),
            kwargs,
        })
    }

    /// True when prompts are rendered.
    pub fn is_templated(&self) -> bool {
        self.template.is_some()
    }

    /// `messages` (`[{"role", "content"}, ...]`) rendered with the generation prompt; raw,
    /// their contents one after the other, a blank line apart.
    pub fn apply_messages(&self, messages: &Value) -> Result<String, DatasetError> {
        match &self.template {
            Some(t) => t
                .render(messages, true, self.kwargs.as_ref())
                .map_err(|e| DatasetError::Unusable(e.to_string())),
            None => Ok(messages
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n")),
        }
    }

    /// `prompt` as a rendered single-user-message chat (or unchanged).
    pub fn apply(&self, prompt: &str) -> Result<String, DatasetError> {
        match &self.template {
            Some(t) => t
                .render_user(prompt, self.kwargs.as_ref())
                .map_err(|e| DatasetError::Unusable(e.to_string())),
            None => Ok(prompt.to_owned()),
        }
    }
}
