//! Why a tokenizer could not be loaded or used: one typed error for the module's API, so a
//! caller can tell the cases apart (a missing tokenizer falls back to the server's
//! `/tokenize`, a broken file does not) without matching on text.
//!
//! Every message is one line that names the path, id or flag and says how to fix it. Where
//! the cause is another error (an I/O or JSON error, a rank-file line, the server's answer)
//! it is the error's `source()`, and `{:#}` prints `what: cause`, whether the error is
//! formatted as it is or wrapped in anyhow at the top.

use std::fmt;
use std::path::PathBuf;

pub use super::chat_template::ChatTemplateError;

/// An error of the tokenizer module.
///
/// Its `Display` is the one line; `{:#}` adds the causes (`what: cause: ...`) as anyhow's
/// does, so the error prints the same whether a caller formats it or wraps it in anyhow.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// `--tokenizer-mode` names no mode Python knows.
    UnknownMode(String),
    /// `--tokenizer-mode slow`: Python's slow (SentencePiece) classes, which we do not have.
    SlowModeUnsupported,
    /// `--tokenizer-mode mistral`: `mistral_common`'s tekken format, which we cannot load.
    MistralModeUnsupported,
    /// `--tokenizer ''`.
    EmptyId,
    /// No tokenizer where the id points (no such path, nothing in the directory, not on the
    /// Hub or the Hub unreachable): the one case a caller may fall back to the server.
    NotFound(String),
    /// A directory with only a mistral `tekken.json`.
    TekkenOnly { dir: PathBuf },
    /// A step that needs a tokenizer under `--skip-tokenizer-init`.
    Required { needed_for: String },
    /// The `tokenizer.json` cannot be read.
    ReadTokenizerFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The tiktoken rank file cannot be read.
    ReadTiktokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file beside the tokenizer (its config, a `tokenization*.py`) cannot be read.
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON file beside the tokenizer does not parse.
    InvalidJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A JSON file beside the tokenizer holds something else than an object.
    NotJsonObject { path: PathBuf },
    /// A `tokenizer.json` the tokenizers crate refuses (bad JSON, a model type it does not
    /// support, ...): `reason` is its word.
    InvalidTokenizerJson { path: PathBuf, reason: String },
    /// The loaded `tokenizer.json` would not give up its truncation setting.
    Truncation { path: PathBuf, reason: String },
    /// The tokenizers crate failed to encode.
    Encode(String),
    /// The tokenizers crate failed to decode.
    Decode(String),
    /// An id past the tiktoken vocabulary.
    UnknownTokenId(u32),
    /// A built-in tiktoken encoding that does not build (a broken embedded file).
    BuiltinEncoding { name: String, reason: String },
    /// A file that is not a tiktoken rank file.
    NotARankFile {
        path: PathBuf,
        #[source]
        source: RankFileError,
    },
    /// The `pat_str` of a tiktoken tokenizer is not a regex the crate compiles.
    PatternRegex { path: PathBuf, reason: String },
    /// An `added_tokens_decoder` key of `tokenizer_config.json` that is not a number.
    AddedTokenId { path: PathBuf, id: String },
    /// The Hub client cannot be set up (`HF_ENDPOINT`, the cache directory).
    HubSetup(String),
    /// A file of the repo failed to download.
    HubDownload {
        name: String,
        id: String,
        reason: String,
    },
    /// The repo's file list named nothing to download.
    NothingToDownload { id: String },
    /// The downloaded files hold no tokenizer.
    NoTokenizerInDownload { path: PathBuf },
    /// The server's `/tokenize` or `/detokenize` failed; `what` says which and how to fix it.
    Server {
        what: &'static str,
        #[source]
        source: anyhow::Error,
    },
    /// A chat template that cannot be read, compiled or rendered.
    ChatTemplate(ChatTemplateError),
}

/// Why bytes are not a tiktoken rank file (`<base64> <rank>` lines); lines count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RankFileError {
    #[error("the file is not text")]
    NotText,
    #[error("line {0}: expected '<base64> <rank>'")]
    MissingRank(usize),
    #[error("line {line}: invalid base64 {token:?}")]
    InvalidBase64 { line: usize, token: String },
    #[error("line {line}: invalid rank {rank:?}")]
    InvalidRank { line: usize, rank: String },
    #[error("no tokens in the file")]
    Empty,
    #[error("rank {rank} is far beyond the number of tokens ({tokens})")]
    RankTooLarge { rank: u32, tokens: usize },
    #[error("rank {0} appears twice")]
    DuplicateRank(u32),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TokenizerError as E;
        match self {
            E::UnknownMode(mode) => write!(
                f,
                "--tokenizer-mode {mode}: unknown mode; use one of auto, hf, slow, mistral"
            )?,
            E::SlowModeUnsupported => f.write_str(
                "--tokenizer-mode slow is not supported: it needs Python's slow (SentencePiece) \
                 tokenizer classes; use --tokenizer-mode auto (tokenizer.json, tiktoken or the \
                 server)",
            )?,
            E::MistralModeUnsupported => f.write_str(
                "--tokenizer-mode mistral is not supported: mistral_common's tekken format has \
                 no Rust loader here; point --tokenizer at a repo that ships tokenizer.json, or \
                 use --tokenizer-mode auto",
            )?,
            E::EmptyId => f.write_str(
                "--tokenizer is empty: pass a directory with tokenizer.json, a Hub id or a \
                 tiktoken encoding name",
            )?,
            E::NotFound(why) => f.write_str(why)?,
            E::TekkenOnly { dir } => write!(
                f,
                "{} only has a mistral tekken.json, which is not supported; point --tokenizer \
                 at a repo that ships tokenizer.json",
                dir.display()
            )?,
            E::Required { needed_for } => write!(
                f,
                "{needed_for} needs a tokenizer, but --skip-tokenizer-init is set; drop \
                 --skip-tokenizer-init (and pass --tokenizer if the model has no local one)"
            )?,
            E::ReadTokenizerFile { path, .. } => write!(
                f,
                "cannot read tokenizer file {}; check the --tokenizer path",
                path.display()
            )?,
            E::ReadTiktokenFile { path, .. } => write!(
                f,
                "cannot read tiktoken file {}; check the --tokenizer path",
                path.display()
            )?,
            E::Read { path, .. } => write!(f, "cannot read {}", path.display())?,
            E::InvalidJson { path, .. } => {
                write!(f, "{} is not valid JSON; fix or remove it", path.display())?
            }
            E::NotJsonObject { path } => write!(
                f,
                "{} is not a JSON object; fix or remove it",
                path.display()
            )?,
            E::InvalidTokenizerJson { path, reason } => write!(
                f,
                "{} is not a valid tokenizer.json ({reason}); re-download it or point \
                 --tokenizer elsewhere",
                path.display()
            )?,
            E::Truncation { path, reason } => {
                write!(f, "{}: cannot disable truncation: {reason}", path.display())?
            }
            E::Encode(why) => write!(f, "tokenizer cannot encode the text: {why}")?,
            E::Decode(why) => write!(f, "tokenizer cannot decode the ids: {why}")?,
            E::UnknownTokenId(id) => write!(f, "token id {id} is not in the tiktoken vocabulary")?,
            E::BuiltinEncoding { name, reason } => write!(
                f,
                "cannot build the built-in tiktoken encoding {name}: {reason}"
            )?,
            E::NotARankFile { path, .. } => write!(
                f,
                "{} is not a tiktoken rank file (expected '<base64> <rank>' lines; \
                 SentencePiece .model files are not supported)",
                path.display()
            )?,
            E::PatternRegex { path, reason } => write!(
                f,
                "the pat_str regex for {} does not compile: {reason}",
                path.display()
            )?,
            E::AddedTokenId { path, id } => write!(
                f,
                "{}: added token id {id:?} is not a number",
                path.display()
            )?,
            E::HubSetup(why) => write!(f, "cannot set up the HF Hub client: {why}")?,
            E::HubDownload { name, id, reason } => write!(
                f,
                "downloading {name} of {id} from the Hub failed: {reason}"
            )?,
            E::NothingToDownload { id } => write!(f, "no tokenizer file to download for {id}")?,
            E::NoTokenizerInDownload { path } => write!(
                f,
                "downloaded {} but found no tokenizer in it",
                path.display()
            )?,
            E::Server { what, .. } => f.write_str(what)?,
            E::ChatTemplate(e) => write!(f, "{e}")?,
        }
        if f.alternate() {
            let mut source = std::error::Error::source(self);
            while let Some(cause) = source {
                write!(f, ": {cause}")?;
                source = cause.source();
            }
        }
        Ok(())
    }
}

impl From<ChatTemplateError> for TokenizerError {
    fn from(e: ChatTemplateError) -> Self {
        TokenizerError::ChatTemplate(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternate_form_adds_the_causes_as_anyhow_does() {
        let e = TokenizerError::NotARankFile {
            path: PathBuf::from("x.tiktoken"),
            source: RankFileError::MissingRank(3),
        };
        let line = "x.tiktoken is not a tiktoken rank file (expected '<base64> <rank>' lines; \
                    SentencePiece .model files are not supported)";
        assert_eq!(e.to_string(), line);
        let with_cause = format!("{line}: line 3: expected '<base64> <rank>'");
        assert_eq!(format!("{e:#}"), with_cause);
        assert_eq!(format!("{:#}", anyhow::Error::from(e)), with_cause);
    }

    #[test]
    fn a_mode_we_cannot_serve_says_what_to_use_instead() {
        assert_eq!(
            TokenizerError::SlowModeUnsupported.to_string(),
            "--tokenizer-mode slow is not supported: it needs Python's slow (SentencePiece) \
             tokenizer classes; use --tokenizer-mode auto (tokenizer.json, tiktoken or the server)"
        );
    }
}
