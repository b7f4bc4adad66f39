//! OpenAI audio transcriptions (`openai-audio`: `/v1/audio/transcriptions`), streamed as
//! chat-shaped OpenAI chunks. Its request body is `multipart/form-data` as Python's client
//! sends it (aiohttp
//! `FormData`): the audio file first (`audio.wav`, `audio/wav`), then every payload field as
//! text, in the payload's order, each value as Python's `str(value)` (`True`, `0.5`, `None`,
//! `{'a': 1}`). The WAV bytes are a shared [`Bytes`] part, never copied into the body.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::openai_chunk::{ChunkReader, ChunkShape};
use super::{body_fields, Api, ApiSpec, BodyOptions, StreamReader};
use crate::datasets::wav::AudioClip;
use crate::pyfmt::push_float_repr;

/// The audio transcriptions API.
pub struct Transcriptions;

impl ApiSpec for Transcriptions {
    /// The payload of `async_request_openai_audio`, in its order, as form fields (the
    /// stream options flattened, as Python sends them in a form); the prompt is the audio.
    fn fields(&self, _: Value, output_len: usize, _: &BodyOptions, body: &mut Map<String, Value>) {
        body.insert("max_completion_tokens".into(), json!(output_len));
        body.insert("stream".into(), json!(true));
        body.insert("language".into(), json!("en"));
        body.insert("stream_include_usage".into(), json!(true));
        body.insert("stream_continuous_usage_stats".into(), json!(true));
    }

    fn reader(&self) -> Option<&'static dyn StreamReader> {
        Some(&ChunkReader(ChunkShape::Audio))
    }
}

/// Python's `str(value)` of a JSON value (`repr` inside containers).
fn py_str(v: &Value, out: &mut String, nested: bool) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => push_float_repr(out, f),
            None => out.push_str(&n.to_string()),
        },
        Value::String(s) if nested => {
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\'' => out.push_str("\\'"),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    _ => out.push(c),
                }
            }
            out.push('\'');
        }
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(item, out, true);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(&Value::String(k.clone()), out, true);
                out.push_str(": ");
                py_str(item, out, true);
            }
            out.push('}');
        }
    }
}

/// The `Content-Type` of a body with `boundary`.
pub fn content_type(boundary: &str) -> String {
    format!("multipart/form-data; boundary={boundary}")
}

/// The form's parts around the shared WAV bytes.
pub fn audio_body(
    output_len: usize,
    opts: &BodyOptions,
    clip: &AudioClip,
    boundary: &str,
) -> Vec<Bytes> {
    let head = format!(
        "--{boundary}\r\nContent-Type: audio/wav\r\nContent-Disposition: form-data; \
         name=\"file\"; filename=\"audio.wav\"\r\n\r\n"
    );
    let mut rest = String::from("\r\n");
    for (k, v) in body_fields(Api::Audio, Value::Null, output_len, opts) {
        rest.push_str(&format!(
            "--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Disposition: form-data; name=\"{k}\"\r\n\r\n"
        ));
        py_str(&v, &mut rest, false);
        rest.push_str("\r\n");
    }
    rest.push_str(&format!("--{boundary}--\r\n"));
    vec![Bytes::from(head), clip.wav.clone(), Bytes::from(rest)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(body: &str, name: &str) -> Option<String> {
        let marker = format!("name=\"{name}\"\r\n\r\n");
        let at = body.find(&marker)? + marker.len();
        Some(body[at..].split("\r\n").next()?.to_string())
    }

    #[test]
    fn form_matches_pythons_payload_and_shares_the_wav() {
        let mut extra = Map::new();
        extra.insert("temperature".into(), json!(0.0));
        extra.insert("stop".into(), json!(["a", "b'c"]));
        let opts = BodyOptions {
            model: "whisper".into(),
            ignore_eos: true,
            extra_body: extra,
            ..BodyOptions::default()
        };
        let clip = AudioClip {
            wav: Bytes::from_static(b"RIFF....WAVE"),
            duration_s: 1.0,
        };
        let parts = audio_body(7, &opts, &clip, "b0und");
        assert_eq!(
            parts[1].as_ptr(),
            clip.wav.as_ptr(),
            "the WAV is not copied"
        );
        let body = String::from_utf8(parts.concat()).unwrap();
        assert!(body.starts_with(
            "--b0und\r\nContent-Type: audio/wav\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\n\r\nRIFF....WAVE\r\n--b0und\r\n"
        ));
        assert!(body.ends_with("\r\n--b0und--\r\n"));
        let names: Vec<&str> = body
            .match_indices("; name=\"")
            .map(|(i, _)| body[i + 8..].split('"').next().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "file",
                "model",
                "max_completion_tokens",
                "stream",
                "language",
                "stream_include_usage",
                "stream_continuous_usage_stats",
                "ignore_eos",
                "temperature",
                "stop"
            ]
        );
        for (name, value) in [
            ("model", "whisper"),
            ("max_completion_tokens", "7"),
            ("stream", "True"),
            ("language", "en"),
            ("stream_continuous_usage_stats", "True"),
            ("temperature", "0.0"),
            ("stop", r"['a', 'b\'c']"),
        ] {
            assert_eq!(field(&body, name).as_deref(), Some(value), "{name}");
        }
        assert_eq!(content_type("b0und"), "multipart/form-data; boundary=b0und");
    }
}
