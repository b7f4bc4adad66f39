//! `multipart/form-data` bodies (`/v1/audio/transcriptions`): the text fields by name and the
//! size of the uploaded file. The delimiter is read from the body's first line (a form
//! starts with `--boundary`), so the request's `Content-Type` is not needed.

use memchr::memmem;

/// The parts of a form that the mock reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Form<'a> {
    /// `(name, value)` of every part without a filename.
    pub fields: Vec<(&'a str, &'a str)>,
    /// Bytes of the `file` part.
    pub file_len: Option<usize>,
}

impl<'a> Form<'a> {
    pub fn field(&self, name: &str) -> Option<&'a str> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

/// Why a body is not a form.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    #[error("not a multipart/form-data body (no leading --boundary line)")]
    NoBoundary,
    #[error("a form part has no blank line after its headers")]
    NoHeaders,
    #[error("a form part's headers name no field (Content-Disposition name=\"...\")")]
    NoName,
    #[error("a form field is not UTF-8")]
    NotText,
}

/// The `name="…"` (or `filename="…"`) parameter of a part's headers.
fn param<'a>(headers: &'a str, key: &str) -> Option<&'a str> {
    let at = headers.find(&format!("; {key}=\""))? + key.len() + 4;
    headers[at..].split('"').next()
}

pub fn parse(body: &[u8]) -> Result<Form<'_>, FormError> {
    let line_end = memmem::find(body, b"\r\n").ok_or(FormError::NoBoundary)?;
    let delimiter = &body[..line_end];
    if delimiter.len() < 3 || !delimiter.starts_with(b"--") {
        return Err(FormError::NoBoundary);
    }
    let mut next = [b"\r\n".as_slice(), delimiter].concat();
    let mut form = Form::default();
    let mut rest = &body[line_end + 2..];
    loop {
        let head_end = memmem::find(rest, b"\r\n\r\n").ok_or(FormError::NoHeaders)?;
        let headers = std::str::from_utf8(&rest[..head_end]).map_err(|_| FormError::NotText)?;
        let content = &rest[head_end + 4..];
        let end = memmem::find(content, &next).ok_or(FormError::NoBoundary)?;
        let value = &content[..end];
        let name = param(headers, "name").ok_or(FormError::NoName)?;
        if param(headers, "filename").is_some() {
            form.file_len = Some(value.len());
        } else {
            let text = std::str::from_utf8(value).map_err(|_| FormError::NotText)?;
            form.fields.push((name, text));
        }
        rest = &content[end + next.len()..];
        if rest.starts_with(b"--") {
            return Ok(form);
        }
        rest = rest.strip_prefix(b"\r\n").ok_or(FormError::NoBoundary)?;
        next.truncate(2 + delimiter.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_the_file() {
        let body = b"--xyz\r\nContent-Type: audio/wav\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\n\r\nRIFF\r\n--xy\r\n--xyz\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--xyz\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\nTrue\r\n--xyz--\r\n";
        let f = parse(body).unwrap();
        assert_eq!(
            f.file_len,
            Some(10),
            "the file may contain a partial delimiter"
        );
        assert_eq!(f.field("model"), Some("whisper"));
        assert_eq!(f.field("stream"), Some("True"));
        assert_eq!(f.field("language"), None);
    }

    #[test]
    fn non_forms_are_errors() {
        assert_eq!(parse(b"{\"a\":1}").unwrap_err(), FormError::NoBoundary);
        assert_eq!(
            parse(b"--b\r\nno blank line").unwrap_err(),
            FormError::NoHeaders
        );
        assert_eq!(
            parse(b"--b\r\nX: y\r\n\r\nv\r\n--b--\r\n").unwrap_err(),
            FormError::NoName
        );
    }
}
