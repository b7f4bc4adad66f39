//! The last plain token chunk of an OpenAI-style stream, kept to read the next ones without
//! parsing them (see [`ChunkTemplate`]).

use std::ops::Range;

/// Longest chunk a [`ChunkTemplate`] keeps (an OpenAI-style token chunk is ~200 bytes).
const TEMPLATE_MAX: usize = 1024;
/// Room a template takes beyond a chunk that outgrows it.
const TEMPLATE_SLACK: usize = 24;
/// A template's first room, reserved with the stream's other buffers before its first
/// request, so that a typical chunk (~200 bytes) is kept without allocating mid-response.
const TEMPLATE_INITIAL: usize = 256;

/// The last plain token chunk of one stream, to recognise the next ones without parsing.
///
/// Why: a server streams a response as chunks that differ only in their text (the `id`,
/// `created`, `model` and every other field repeat), and parsing each one whole was about
/// half of the client's user time per event. A chunk that is byte for byte the template
/// outside the text string, with a text free of quotes, backslashes and control bytes and
/// valid UTF-8, is that same JSON document with another string in that one place: it is
/// valid, and decodes to the template's fields with that text. Only templates whose other
/// fields are empty are kept (no finish reason, usage, error, reasoning or tool calls), so a
/// match is a plain token chunk. Anything else (the first and last chunks, a text with an
/// escape) is parsed, and a plain token chunk parsed becomes the next template.
#[derive(Debug)]
pub struct ChunkTemplate {
    /// The template chunk as received (before simd-json unescaped it in place).
    bytes: Vec<u8>,
    /// The text string's content is `bytes[prefix..bytes.len() - suffix]`.
    prefix: usize,
    suffix: usize,
    armed: bool,
}

impl Default for ChunkTemplate {
    fn default() -> Self {
        ChunkTemplate {
            bytes: Vec::with_capacity(TEMPLATE_INITIAL),
            prefix: 0,
            suffix: 0,
            armed: false,
        }
    }
}

impl ChunkTemplate {
    /// `data`'s text when `data` is the template with a plain text.
    ///
    /// A match also proves that `data` holds no line break (`\n`, `\r`): an armed template
    /// holds none (see [`ChunkTemplate::arm`]) and a plain text is free of control bytes. The
    /// SSE layer relies on that to take a whole event's bytes without its own line search.
    pub(super) fn matched<'d>(&self, data: &'d [u8]) -> Option<&'d str> {
        std::str::from_utf8(&data[self.plain_range(data)?]).ok()
    }

    /// [`ChunkTemplate::matched`] as the text's range in `data` (for a caller that goes on
    /// to borrow `data` mutably when there is no match).
    pub(super) fn matched_range(&self, data: &[u8]) -> Option<Range<usize>> {
        let range = self.plain_range(data)?;
        std::str::from_utf8(&data[range.clone()])
            .is_ok()
            .then_some(range)
    }

    /// The range of `data`'s text when `data` is the template outside a text free of
    /// quotes, backslashes and control bytes (its UTF-8 not checked yet).
    fn plain_range(&self, data: &[u8]) -> Option<Range<usize>> {
        let (t, p, s) = (&self.bytes, self.prefix, self.suffix);
        if !self.armed || data.len() < p + s || data[..p] != t[..p] {
            return None;
        }
        let end = data.len() - s;
        if data[end..] != t[t.len() - s..] {
            return None;
        }
        let plain = data[p..end]
            .iter()
            .all(|&b| b >= 0x20 && b != b'"' && b != b'\\');
        plain.then_some(p..end)
    }

    /// Keeps a copy of `data` before it is parsed (parsing rewrites it), disarmed until
    /// [`ChunkTemplate::arm`] finds it a plain token chunk.
    pub(super) fn stage(&mut self, data: &[u8]) {
        self.armed = false;
        self.bytes.clear();
        if data.len() <= TEMPLATE_MAX {
            // Grown to the chunks seen, not doubled: at 10,000 streams each spare byte is
            // 10 kB (the slack covers the text's length varying between chunks).
            if self.bytes.capacity() < data.len() {
                self.bytes.reserve_exact(data.len() + TEMPLATE_SLACK);
            }
            self.bytes.extend_from_slice(data);
        }
    }

    /// Arms the staged chunk as the template: its parse found a plain token chunk (no
    /// finish reason, usage, error, reasoning or tool calls) whose `text` borrows the
    /// payload that started at `base`. A chunk with a line break (the data of a multi-line
    /// SSE event, joined with `\n`) is never armed, so that a match proves a chunk one line.
    pub(super) fn arm(&mut self, base: *const u8, text: &str) {
        if self.bytes.is_empty() || memchr::memchr2(b'\n', b'\r', &self.bytes).is_some() {
            return;
        }
        // simd-json leaves (or unescapes) a string right after its opening quote.
        let start = (text.as_ptr() as usize).wrapping_sub(base as usize);
        if start == 0 || start >= self.bytes.len() || self.bytes[start - 1] != b'"' {
            return;
        }
        let Some(end) = string_end(&self.bytes, start) else {
            return;
        };
        self.prefix = start;
        self.suffix = self.bytes.len() - end;
        self.armed = true;
    }
}

/// Index of the quote closing the JSON string whose content starts at `start`.
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while i < json.len() {
        match json[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}
