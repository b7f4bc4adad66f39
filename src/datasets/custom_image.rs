//! The `custom_image` dataset (Python 0.33 `CustomImageDataset`): a JSONL file whose rows are
//! either `{"prompt": "...", "image_files": ["a.png", "https://..."]}` or interleaved
//! `{"content": [{"type": "text", ...}, {"type": "image", "image": "a.png"},
//! {"type": "image_url", "image_url": {"url": ...}}]}`.
//!
//! As in Python: rows are shuffled with `random.seed(seed)` (not with `--disable-shuffle`),
//! used in that order up to `--num-prompts`, then oversampled; the prompt length is the
//! tokenizer's count of the prompt (of the joined text parts for `content` rows), 1 without a
//! tokenizer; the output length is `--custom-output-len`. Images are sent as URLs, never read:
//! a local path becomes `file://PATH` (the server reads it, so it must be allowed to), `http(s)`,
//! `file://` and `data:image/` URLs pass as they are. `--custom-ensure-client-side-data`
//! (reading and re-encoding them here) is not implemented.

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::{json, Map, Value};

use super::error::DatasetError;
use super::media::{ChatMedia, ContentPart};
use super::pyrandom::PyRandom;
use super::sampling::{oversample_pairs, Sampling};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// One row, its parts already in the form sent.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    /// The text counted for the prompt length (and sent as the prompt for legacy rows).
    text: String,
    media: ChatMedia,
}

/// The loaded file.
#[derive(Debug)]
pub struct CustomImage {
    rows: Vec<Row>,
}

/// Python's `process_image` of a string: the URL sent.
pub(super) fn image_url(image: &str) -> String {
    const AS_IS: [&str; 4] = ["http://", "https://", "file://", "data:image/"];
    if AS_IS.iter().any(|p| image.starts_with(p)) {
        image.to_string()
    } else {
        format!("file://{image}")
    }
}

fn image_part(url: &str, extra: Option<&Map<String, Value>>) -> ContentPart {
    let mut image_url = Map::new();
    image_url.insert("url".into(), Value::String(self::image_url(url)));
    for (k, v) in extra.into_iter().flatten().filter(|(k, _)| *k != "url") {
        image_url.insert(k.clone(), v.clone());
    }
    ContentPart::from_json(&json!({ "type": "image_url", "image_url": image_url }))
}

impl CustomImage {
    /// Reads `path` (JSONL only, as Python).
    pub fn load(path: &Path) -> Result<Self, DatasetError> {
        Self::parse(path, &super::custom::jsonl_text(path, "custom_image")?)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, DatasetError> {
        Ok(Self {
            rows: super::custom::jsonl_rows(path, text, parse_row)?,
        })
    }

    /// Python's `CustomImageDataset.sample`: each request and its content parts.
    pub fn sample(
        &self,
        s: &Sampling,
        output_len: usize,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<(SampleRequest, ChatMedia)>, DatasetError> {
        let mut order: Vec<&Row> = self.rows.iter().collect();
        if s.shuffle {
            PyRandom::new(s.seed).shuffle(&mut order);
        }
        order.truncate(s.num_requests);
        let mut pairs = order
            .par_iter()
            .enumerate()
            .map(|(i, row)| {
                let prompt_len = match tokenizer {
                    Some(tok) => tok
                        .encode(&row.text, true)
                        .map_err(DatasetError::Tokenize)?
                        .len(),
                    None => 1,
                };
                let req = SampleRequest {
                    prompt: Prompt::Text(Arc::from(row.text.as_str())),
                    prompt_len,
                    expected_output_len: output_len,
                    request_id: Some(s.request_id(i)),
                };
                Ok((req, row.media.clone()))
            })
            .collect::<Result<Vec<_>, DatasetError>>()?;
        oversample_pairs(&mut pairs, s, "custom_image")?;
        Ok(pairs)
    }
}

fn parse_row(path: &Path, line: usize, text: &str) -> Result<Row, DatasetError> {
    let at = |why: String| DatasetError::line(path, line, why);
    let v: Value = serde_json::from_str(text).map_err(|e| at(format!("not JSON: {e}")))?;
    let Value::Object(obj) = v else {
        return Err(at("not a JSON object".into()));
    };
    if let Some(content) = obj.get("content") {
        return content_row(content).map_err(at);
    }
    let (Some(prompt), Some(files)) = (obj.get("prompt"), obj.get("image_files")) else {
        return Err(at(
            "needs \"prompt\" and \"image_files\", or \"content\" (a list of text and image parts)"
                .into(),
        ));
    };
    let Value::String(prompt) = prompt else {
        return Err(at("\"prompt\" must be a string".into()));
    };
    let files = match files {
        Value::Array(f) if !f.is_empty() => f,
        _ => return Err(at("\"image_files\" must be a non-empty list".into())),
    };
    let parts = files
        .iter()
        .map(|f| match f {
            Value::String(f) => Ok(image_part(f, None)),
            other => Err(at(format!(
                "an image file must be a path or URL string, not {other}"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Row {
        text: prompt.clone(),
        media: ChatMedia::beside_text(parts),
    })
}

/// A `content` row: every part in the form sent, and the joined text.
fn content_row(content: &Value) -> Result<Row, String> {
    let parts = match content {
        Value::Array(p) if !p.is_empty() => p,
        _ => return Err("\"content\" must be a non-empty list of text and image parts".into()),
    };
    let mut text = String::new();
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let kind = part.get("type").and_then(Value::as_str);
        match kind {
            Some("text") => {
                let t = part
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("a text part needs a string \"text\"")?;
                text.push_str(t);
                out.push(ContentPart::from_json(
                    &json!({ "type": "text", "text": t }),
                ));
            }
            Some("image") => match part.get("image") {
                Some(Value::String(image)) => out.push(image_part(image, None)),
                _ => return Err("an image part needs \"image\": a path or URL string".into()),
            },
            Some("image_url") => match part.get("image_url") {
                Some(Value::String(url)) => out.push(image_part(url, None)),
                Some(Value::Object(o)) => match o.get("url") {
                    Some(Value::String(url)) => out.push(image_part(url, Some(o))),
                    _ => return Err("\"image_url\" needs a string \"url\"".into()),
                },
                _ => return Err("\"image_url\" must be a string or an object".into()),
            },
            other => {
                let other = other.unwrap_or("none");
                return Err(format!(
                    "content part type {other:?}: use text, image or image_url"
                ));
            }
        }
    }
    Ok(Row {
        text,
        media: ChatMedia {
            parts: out,
            replaces_text: true,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CustomImage, DatasetError> {
        CustomImage::parse(Path::new("i.jsonl"), text)
    }

    fn json_of(p: &ContentPart) -> Value {
        serde_json::from_slice(&p.to_vec()).unwrap()
    }

    #[test]
    fn legacy_rows_send_file_urls_after_the_prompt() {
        let c = parse(
            r#"{"prompt": "How many?", "image_files": ["a/b.png", "https://x/y.jpg", "data:image/png;base64,AA"]}"#,
        )
        .unwrap();
        let row = &c.rows[0];
        assert_eq!(row.text, "How many?");
        assert!(!row.media.replaces_text);
        let urls: Vec<Value> = row
            .media
            .parts
            .iter()
            .map(|p| json_of(p)["image_url"]["url"].clone())
            .collect();
        assert_eq!(
            urls,
            [
                json!("file://a/b.png"),
                json!("https://x/y.jpg"),
                json!("data:image/png;base64,AA")
            ]
        );
    }

    #[test]
    fn content_rows_are_the_whole_content_and_their_text_is_counted() {
        let c = parse(
            r#"{"content": [{"type": "text", "text": "Compare "}, {"type": "image", "image": "p1.png"}, {"type": "text", "text": "and"}, {"type": "image_url", "image_url": {"url": "p2.png", "detail": "low"}}]}"#,
        )
        .unwrap();
        let row = &c.rows[0];
        assert_eq!(row.text, "Compare and");
        assert!(row.media.replaces_text);
        let parts: Vec<Value> = row.media.parts.iter().map(json_of).collect();
        assert_eq!(
            parts,
            [
                json!({"type": "text", "text": "Compare "}),
                json!({"type": "image_url", "image_url": {"url": "file://p1.png"}}),
                json!({"type": "text", "text": "and"}),
                json!({"type": "image_url", "image_url": {"url": "file://p2.png", "detail": "low"}}),
            ]
        );
    }

    #[test]
    fn bad_rows_name_the_line() {
        for (text, want) in [
            (r#"{"prompt": "x"}"#, "needs \"prompt\" and \"image_files\""),
            (r#"{"prompt": "x", "image_files": []}"#, "non-empty list"),
            (
                r#"{"content": [{"type": "audio"}]}"#,
                "use text, image or image_url",
            ),
            ("[1]", "not a JSON object"),
        ] {
            let e = parse(&format!("\n{text}\n")).unwrap_err().to_string();
            assert!(
                e.contains("i.jsonl") && e.contains('2') && e.contains(want),
                "{e}"
            );
        }
    }

    #[test]
    fn sampling_shuffles_cuts_and_oversamples() {
        let text: String = (0..3)
            .map(|i| format!("{{\"prompt\": \"p{i}\", \"image_files\": [\"{i}.png\"]}}\n"))
            .collect();
        let c = parse(&text).unwrap();
        let s = Sampling {
            num_requests: 5,
            seed: 0,
            shuffle: false,
            oversample: true,
            request_id_prefix: "r-".into(),
        };
        let got = c.sample(&s, 9, None).unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0].0.expected_output_len, 9);
        assert_eq!(got[4].0.request_id.as_deref(), Some("r-4"));
        for (req, media) in &got {
            let Prompt::Text(t) = &req.prompt else {
                panic!()
            };
            let url = json_of(&media.parts[0])["image_url"]["url"].clone();
            assert_eq!(
                url,
                json!(format!("file://{}.png", &t[1..])),
                "prompt and image stay paired"
            );
        }
    }
}
