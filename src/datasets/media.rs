//! What a multimodal request carries besides its text, as shared bytes built before the
//! clock: chat content parts (`random-mm`'s images, `custom_image`'s image URLs and
//! interleaved content). The request builder references them; they are never copied or
//! re-serialized per request.

use bytes::Bytes;
use serde_json::Value;

/// One chat content part (`{"type":"image_url",…}`, `{"type":"text",…}`), as shared byte
/// strings whose concatenation is its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentPart {
    pub parts: Vec<Bytes>,
}

impl ContentPart {
    /// A part serialized once from its JSON value.
    pub fn from_json(value: &Value) -> Self {
        let bytes = serde_json::to_vec(value).expect("a JSON value serializes");
        ContentPart {
            parts: vec![Bytes::from(bytes)],
        }
    }

    /// The JSON of the part (tests, and the rare caller that needs it whole).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// A request's chat content beyond its text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatMedia {
    pub parts: Vec<ContentPart>,
    /// The parts are the whole content (`custom_image`'s interleaved `content` rows: Python
    /// sends them as the prompt); otherwise they follow (or precede) the prompt's text part.
    pub replaces_text: bool,
}

impl ChatMedia {
    /// Items placed beside the prompt's text.
    pub fn beside_text(parts: Vec<ContentPart>) -> Self {
        ChatMedia {
            parts,
            replaces_text: false,
        }
    }
}
