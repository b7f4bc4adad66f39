//! The trace formats we read and how a file's format is recognised.
//!
//! Detection looks at content, not names: the first non-empty line of a JSONL trace is a JSON
//! object (Bailian when it carries `chat_id`/`parent_chat_id`, else Mooncake); a CSV trace
//! starts with a header naming its columns (Azure: `ContextTokens`; BurstGPT:
//! `Request tokens`). The extension only matters for the error message when nothing fits.

use std::fmt;
use std::str::FromStr;

/// Why a file's format was not recognised (the reader adds the file name and the fix).
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("the first line looks like JSON but does not parse: {0}")]
    BadJson(serde_json::Error),
    #[error(
        "the first line is neither a JSON object (Mooncake/Bailian JSONL) nor a CSV header \
         with `ContextTokens` (Azure) or `Request tokens` (BurstGPT)"
    )]
    Unrecognised,
}

/// A format name that is none of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace format {0:?}; expected one of mooncake, bailian, azure, burstgpt")]
pub struct UnknownFormatName(pub String);

/// A supported trace layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Mooncake (FAST'25) JSONL: `timestamp` (ms), `input_length`, `output_length`,
    /// `hash_ids` (one per `chunk` tokens, 512 in the release). Field names configurable.
    Mooncake,
    /// Alibaba Bailian (Qwen) JSONL: Mooncake's fields with `timestamp` in seconds, 16-token
    /// blocks, plus `chat_id`, `parent_chat_id` (-1 for a first turn) and `turn`.
    Bailian,
    /// Azure LLM inference CSV: `TIMESTAMP` (datetime), `ContextTokens`, `GeneratedTokens`.
    /// No prefix structure: every prompt is unique.
    Azure,
    /// BurstGPT CSV: `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`,
    /// `Total tokens`, `Log Type`. Rows with 0 response tokens are failures and dropped.
    BurstGpt,
}

impl TraceFormat {
    /// Every format, in the order they are documented.
    pub const ALL: [TraceFormat; 4] = [Self::Mooncake, Self::Bailian, Self::Azure, Self::BurstGpt];

    /// The lower-case name used on the command line and in summaries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mooncake => "mooncake",
            Self::Bailian => "bailian",
            Self::Azure => "azure",
            Self::BurstGpt => "burstgpt",
        }
    }

    /// Tokens per hash id in the published traces of this format (512 for Mooncake, 16 for
    /// Bailian). Azure and BurstGPT have no hash ids, so the value does not matter for them.
    /// Python's `--timed-trace-chunk-hash-size` defaults to 16 whatever the format.
    pub fn default_chunk_size(self) -> u32 {
        match self {
            Self::Bailian => 16,
            Self::Mooncake | Self::Azure | Self::BurstGpt => 512,
        }
    }

    /// Seconds per timestamp unit in the published traces (Mooncake: ms → 0.001). Azure
    /// datetimes are converted to seconds by the reader. Python's
    /// `--timed-trace-sec-multiplier` defaults to 1 whatever the format.
    pub fn default_sec_multiplier(self) -> f64 {
        match self {
            Self::Mooncake => 0.001,
            Self::Bailian | Self::Azure | Self::BurstGpt => 1.0,
        }
    }

    /// Whether records carry hash ids (shared prefixes) at all.
    pub fn has_prefix_structure(self) -> bool {
        matches!(self, Self::Mooncake | Self::Bailian)
    }

    /// Recognises the format from the first non-empty line of the file.
    pub(crate) fn detect(first_line: &str) -> Result<Self, DetectError> {
        let line = first_line.trim_start_matches('\u{feff}').trim();
        if line.starts_with('{') {
            let obj: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).map_err(DetectError::BadJson)?;
            return Ok(
                if obj.contains_key("chat_id") || obj.contains_key("parent_chat_id") {
                    Self::Bailian
                } else {
                    Self::Mooncake
                },
            );
        }
        let header: Vec<&str> = line
            .split(',')
            .map(|c| c.trim().trim_matches('"'))
            .collect();
        if header.contains(&"ContextTokens") {
            return Ok(Self::Azure);
        }
        if header.contains(&"Request tokens") {
            return Ok(Self::BurstGpt);
        }
        Err(DetectError::Unrecognised)
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = UnknownFormatName;

    /// Parses a format name (case-insensitive; `burst-gpt` and `burst_gpt` accepted).
    fn from_str(s: &str) -> Result<Self, UnknownFormatName> {
        let norm: String = s
            .chars()
            .filter(|c| !matches!(c, '-' | '_'))
            .collect::<String>()
            .to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|f| f.name() == norm)
            .ok_or_else(|| UnknownFormatName(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format() {
        let mooncake =
            r#"{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}"#;
        assert_eq!(
            TraceFormat::detect(mooncake).ok(),
            Some(TraceFormat::Mooncake)
        );
        let bailian = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.5}"#;
        assert_eq!(
            TraceFormat::detect(bailian).ok(),
            Some(TraceFormat::Bailian)
        );
        assert_eq!(
            TraceFormat::detect("TIMESTAMP,ContextTokens,GeneratedTokens").ok(),
            Some(TraceFormat::Azure)
        );
        assert_eq!(
            TraceFormat::detect(
                "\u{feff}Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r"
            )
            .ok(),
            Some(TraceFormat::BurstGpt)
        );
        assert!(TraceFormat::detect("a,b,c")
            .unwrap_err()
            .to_string()
            .contains("neither"));
        assert!(TraceFormat::detect("{oops")
            .unwrap_err()
            .to_string()
            .contains("does not parse"));
    }

    #[test]
    fn names_round_trip() {
        for f in TraceFormat::ALL {
            assert_eq!(f.name().parse::<TraceFormat>(), Ok(f));
        }
        assert_eq!(
            "Burst-GPT".parse::<TraceFormat>(),
            Ok(TraceFormat::BurstGpt)
        );
        assert!("sharegpt"
            .parse::<TraceFormat>()
            .unwrap_err()
            .to_string()
            .contains("unknown trace format"));
    }
}
