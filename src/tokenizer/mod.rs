//! Tokenizers: the one [`Tokenizer`] type the rest of the crate uses, and how it is found.
//!
//! Three tiers, tried in this order (the README's "Tokenizer Support"):
//!
//! 1. **Hugging Face `tokenizer.json`** ([`hf`]) — `--tokenizer` as a local directory or file,
//!    or a Hub id resolved from the local HF cache and, unless `HF_HUB_OFFLINE` is set,
//!    downloaded once into that cache ([`hub`]). `tokenizer_config.json` /
//!    `special_tokens_map.json` beside it supply the special tokens Python's `transformers`
//!    would report.
//! 2. **tiktoken** ([`tiktoken`]) — a built-in encoding name (`cl100k_base`, `o200k_base`, …)
//!    or a `.tiktoken` / `tiktoken.model` rank file, as Kimi and old Qwen models ship.
//! 3. **Server-side** ([`server`]) — `POST /tokenize` and `/detokenize` on the server under
//!    test, through a [`TokenizeEndpoint`] the caller provides; used only when the first two
//!    tiers find nothing and the caller allows it.
//!
//! The directory a tokenizer came from also gives its chat template ([`chat_template`],
//! rendered with minijinja as `transformers`' `apply_chat_template`), which the file datasets
//! use to count and send prompts.
//!
//! A tokenizer is loaded once before the run and shared read-only (`&Tokenizer` is
//! `Send + Sync`); all the per-request work (dataset generation, re-tokenizing outputs) calls
//! it from rayon workers.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rayon::prelude::*;

pub mod chat_template;
mod compact_bpe;
pub mod error;
pub mod hf;
mod hf_json;
pub mod hub;
pub mod pat_str;
pub mod server;
pub mod special;
pub mod tiktoken;
mod word_cache;

pub use chat_template::{ChatTemplate, ChatTemplateError};
pub use error::{RankFileError, TokenizerError};

/// The result of the tokenizer module's operations.
pub type Result<T, E = TokenizerError> = std::result::Result<T, E>;
pub use server::{ServerTokenizer, TokenizeEndpoint};

/// `--tokenizer-mode`, as Python accepts it.
///
/// We only have "fast" (Rust) tokenizers: `auto` and `hf` load them; `slow` (the Python
/// SentencePiece classes) and `mistral` (`mistral_common`'s tekken format) are accepted on the
/// command line but refused with a clear message when a tokenizer is actually loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenizerMode {
    #[default]
    Auto,
    Hf,
    Slow,
    Mistral,
}

impl FromStr for TokenizerMode {
    type Err = TokenizerError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "hf" => Ok(Self::Hf),
            "slow" => Ok(Self::Slow),
            "mistral" => Ok(Self::Mistral),
            other => Err(TokenizerError::UnknownMode(other.to_owned())),
        }
    }
}

impl fmt::Display for TokenizerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Hf => "hf",
            Self::Slow => "slow",
            Self::Mistral => "mistral",
        })
    }
}

/// Which tier a loaded tokenizer came from (for logs and `--dry-run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    HuggingFace,
    Tiktoken,
    Server,
}

impl fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::HuggingFace => "huggingface tokenizer.json",
            Self::Tiktoken => "tiktoken",
            Self::Server => "server /tokenize",
        })
    }
}

/// Everything that decides which tokenizer `--tokenizer` names.
#[derive(Debug, Clone)]
pub struct TokenizerOptions {
    /// `--tokenizer` (or `--model` when absent), exactly as given: a path, a Hub id or a
    /// tiktoken encoding name. Kept verbatim as Python's `tokenizer_id`.
    pub id: String,
    /// `--tokenizer-mode`.
    pub mode: TokenizerMode,
    /// Hub revision (branch, tag or commit); `main` when `None`.
    pub revision: Option<String>,
    /// Never touch the network (`HF_HUB_OFFLINE`); [`TokenizerOptions::new`] reads the env.
    pub offline: bool,
    /// The HF hub cache directory; [`TokenizerOptions::new`] resolves it like `huggingface_hub`.
    pub hub_cache: Option<PathBuf>,
}

impl TokenizerOptions {
    /// Options for `id` with defaults taken from the environment (`HF_HUB_OFFLINE`,
    /// `HF_HUB_CACHE`, `HF_HOME`, `XDG_CACHE_HOME`, `HOME`).
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            mode: TokenizerMode::Auto,
            revision: None,
            offline: hub::offline_from_env(),
            hub_cache: hub::cache_dir_from_env(),
        }
    }

    /// Sets `--tokenizer-mode`.
    pub fn mode(mut self, mode: TokenizerMode) -> Self {
        self.mode = mode;
        self
    }
}

/// Where a tokenizer's bytes live once resolved (tiers 1 and 2).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Located {
    HfJson(PathBuf),
    TiktokenFile(PathBuf),
    TiktokenBuiltin(tiktoken::Builtin),
}

/// A loaded tokenizer. Cheap to share (`&Tokenizer` across threads); clone the `Arc` you keep
/// it in, not the tokenizer.
pub struct Tokenizer {
    id: String,
    backend: Backend,
    /// Every id that must never appear in a synthetic prompt: [`Tokenizer::all_special_ids`]
    /// plus every added token (see [`Tokenizer::control_token_ids`]). Sorted, deduplicated.
    control_ids: Vec<u32>,
    /// The directory the tokenizer's files came from (HF or tiktoken file tiers), where
    /// `tokenizer_config.json` and its `chat_template` live.
    dir: Option<PathBuf>,
}

enum Backend {
    Hf(Box<hf::HfTokenizer>),
    Tiktoken(Box<tiktoken::TiktokenTokenizer>),
    Server(ServerTokenizer),
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("id", &self.id)
            .field("kind", &self.kind())
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

impl Tokenizer {
    /// Loads the tokenizer `opts.id` names from tiers 1 and 2 (local files, the HF cache, a
    /// Hub download, tiktoken). Errors are one line naming the path or id and how to fix it.
    pub fn load(opts: &TokenizerOptions) -> Result<Self> {
        refuse_unsupported_mode(opts)?;
        let located = locate(opts)?;
        Self::from_located(&opts.id, located)
    }

    /// Like [`Tokenizer::load`], but when no local/Hub/tiktoken tokenizer exists for the id
    /// (and only then: a broken file is still an error), falls back to the server's
    /// `/tokenize` endpoint. Returns the tokenizer and, on fallback, the reason to print.
    pub fn load_or_server(
        opts: &TokenizerOptions,
        endpoint: Arc<dyn TokenizeEndpoint>,
    ) -> Result<(Self, Option<String>)> {
        refuse_unsupported_mode(opts)?;
        match locate(opts) {
            Ok(located) => Ok((Self::from_located(&opts.id, located)?, None)),
            Err(err @ TokenizerError::NotFound(_)) => {
                let tok = Self::server(&opts.id, endpoint)?;
                Ok((
                    tok,
                    Some(format!("{err:#}; using the server's /tokenize instead")),
                ))
            }
            Err(err) => Err(err),
        }
    }

    /// A server-side tokenizer (tier 3) named `id`.
    pub fn server(id: &str, endpoint: Arc<dyn TokenizeEndpoint>) -> Result<Self> {
        let server = ServerTokenizer::new(endpoint)?;
        Ok(Self::with_backend(id, Backend::Server(server)))
    }

    /// Loads an HF `tokenizer.json` (its `tokenizer_config.json` is read from the same
    /// directory when present).
    pub fn from_hf_file(id: &str, path: impl Into<PathBuf>) -> Result<Self> {
        Self::from_located(id, Located::HfJson(path.into()))
    }

    /// Loads a tiktoken encoding by built-in name or from a rank file.
    pub fn from_tiktoken(id: &str, name_or_path: &str) -> Result<Self> {
        let located = match tiktoken::Builtin::from_name(name_or_path) {
            Some(b) => Located::TiktokenBuiltin(b),
            None => Located::TiktokenFile(PathBuf::from(name_or_path)),
        };
        Self::from_located(id, located)
    }

    fn from_located(id: &str, located: Located) -> Result<Self> {
        let dir = match &located {
            Located::HfJson(p) | Located::TiktokenFile(p) => p.parent().map(PathBuf::from),
            Located::TiktokenBuiltin(_) => None,
        };
        let backend = match located {
            Located::HfJson(path) => Backend::Hf(Box::new(hf::HfTokenizer::from_file(&path)?)),
            Located::TiktokenFile(path) => {
                Backend::Tiktoken(Box::new(tiktoken::TiktokenTokenizer::from_file(&path)?))
            }
            Located::TiktokenBuiltin(b) => {
                Backend::Tiktoken(Box::new(tiktoken::TiktokenTokenizer::builtin(b)?))
            }
        };
        Ok(Self {
            dir,
            ..Self::with_backend(id, backend)
        })
    }

    fn with_backend(id: &str, backend: Backend) -> Self {
        let mut control_ids: Vec<u32> = match &backend {
            Backend::Hf(t) => t
                .all_special_ids()
                .iter()
                .chain(t.added_token_ids())
                .copied()
                .collect(),
            Backend::Tiktoken(t) => t.unusable_ids().to_vec(),
            Backend::Server(_) => Vec::new(),
        };
        control_ids.sort_unstable();
        control_ids.dedup();
        Self {
            id: id.to_owned(),
            backend,
            control_ids,
            dir: None,
        }
    }

    /// The directory of the tokenizer's files (`None` for built-in tiktoken encodings and
    /// the server's tokenizer).
    pub fn files_dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// The chat template of `tokenizer_config.json` (or `chat_template.jinja`) in
    /// [`Tokenizer::files_dir`]; `Ok(None)` when there is none.
    pub fn chat_template(&self) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        match &self.dir {
            Some(d) => ChatTemplate::from_dir(d),
            None => Ok(None),
        }
    }

    /// The tokenizer name as given (Python's `tokenizer_id`, written to the result JSON).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Which tier this tokenizer came from.
    pub fn kind(&self) -> TokenizerKind {
        match self.backend {
            Backend::Hf(_) => TokenizerKind::HuggingFace,
            Backend::Tiktoken(_) => TokenizerKind::Tiktoken,
            Backend::Server(_) => TokenizerKind::Server,
        }
    }

    /// `tokenizer.encode(text, add_special_tokens=...)`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        match &self.backend {
            Backend::Hf(t) => t.encode(text, add_special_tokens),
            Backend::Tiktoken(t) => Ok(t.encode(text, add_special_tokens)),
            Backend::Server(t) => t.encode(text, add_special_tokens),
        }
    }

    /// [`Tokenizer::encode`] of many texts, in parallel (rayon), results in input order.
    pub fn encode_batch<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        texts
            .par_iter()
            .map(|t| self.encode(t.as_ref(), add_special_tokens))
            .collect()
    }

    /// `tokenizer.decode(ids, skip_special_tokens=...)`.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        match &self.backend {
            Backend::Hf(t) => t.decode(ids, skip_special_tokens),
            Backend::Tiktoken(t) => t.decode(ids, skip_special_tokens),
            Backend::Server(t) => t.decode(ids, skip_special_tokens),
        }
    }

    /// `encode(text, false)` with each token's byte range in `text`, for tokenizers that can
    /// tell (HF: the encoding's offsets; tiktoken: token byte lengths). `None` for the
    /// server tier. A token that covers part of a multi-byte character may report the whole
    /// character, so consecutive ranges can overlap; callers cut only where they do not.
    pub fn encode_with_offsets(&self, text: &str) -> Result<Option<TokenSpans>> {
        match &self.backend {
            Backend::Hf(t) => t.encode_with_offsets(text).map(Some),
            Backend::Tiktoken(t) => Ok(Some(t.encode_with_offsets(text))),
            Backend::Server(_) => Ok(None),
        }
    }

    /// Number of tokens in `text` without special tokens — the metrics' output-length
    /// fallback, Python's `len(tokenizer(text, add_special_tokens=False).input_ids)`.
    ///
    /// Local tokenizers cannot fail here; a server-side tokenizer that cannot reach the
    /// server counts 0 (use [`Tokenizer::try_count_tokens`] to see the error).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.try_count_tokens(text).unwrap_or(0)
    }

    /// [`Tokenizer::count_tokens`], reporting failures.
    pub fn try_count_tokens(&self, text: &str) -> Result<usize> {
        match &self.backend {
            Backend::Hf(t) => t.count(text),
            Backend::Tiktoken(t) => Ok(t.encode(text, false).len()),
            Backend::Server(t) => Ok(t.encode(text, false)?.len()),
        }
    }

    /// Python's `tokenizer.vocab_size`: the base vocabulary **without** added tokens (for
    /// Qwen3 151,643, not 151,669). Token ids `0..vocab_size()` are what the random dataset
    /// walks. 0 for a server-side tokenizer whose endpoint does not report it.
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Hf(t) => t.vocab_size(),
            Backend::Tiktoken(t) => t.vocab_size(),
            Backend::Server(t) => t.vocab_size().unwrap_or(0),
        }
    }

    /// Python's `tokenizer.all_special_ids`: the ids of the named special tokens (bos, eos,
    /// unk, sep, pad, cls, mask) and `additional_special_tokens`, in that order, without
    /// duplicates. Added tokens flagged special but not named are *not* included (as in
    /// `transformers`); see [`Tokenizer::control_token_ids`] for the stricter set.
    pub fn all_special_ids(&self) -> &[u32] {
        match &self.backend {
            Backend::Hf(t) => t.all_special_ids(),
            Backend::Tiktoken(t) => t.special_ids(),
            Backend::Server(_) => &[],
        }
    }

    /// [`Tokenizer::all_special_ids`] plus every added token (`added_tokens` of
    /// `tokenizer.json`, special or not), sorted. A synthetic prompt must avoid all of them:
    /// SmolLM2's `<file_sep>` or Qwen3's `<think>` are not in `all_special_ids`, yet a prompt
    /// that contains them changes what the model does.
    pub fn control_token_ids(&self) -> &[u32] {
        &self.control_ids
    }

    /// Python's `tokenizer.num_special_tokens_to_add()`: tokens `encode(.., true)` adds to a
    /// single sequence (a BOS for Llama-style tokenizers, 0 for Qwen and SmolLM2).
    pub fn num_special_tokens_to_add(&self) -> usize {
        match &self.backend {
            Backend::Hf(t) => t.num_special_tokens_to_add(),
            Backend::Tiktoken(t) => t.num_special_tokens_to_add(),
            Backend::Server(t) => t.num_special_tokens_to_add(),
        }
    }
}

/// A tokenizer the run cannot do without, or the one-line error `--skip-tokenizer-init` gets.
///
/// With `--skip-tokenizer-init` Python loads no tokenizer (`tokenizer_id` is `null` in the
/// result JSON); an output length the server did not report then counts as 1 token
/// ([`output_len_fallback`]), the console leaves out "Total generated tokens", both output
/// token throughputs and "Total token throughput", and every dataset that builds or measures
/// prompts with a tokenizer (random, sonnet, sharegpt, …) fails — Python with an
/// `AttributeError` on `None`, we with this message.
pub fn required<'a>(tokenizer: Option<&'a Tokenizer>, needed_for: &str) -> Result<&'a Tokenizer> {
    tokenizer.ok_or_else(|| TokenizerError::Required {
        needed_for: needed_for.to_owned(),
    })
}

/// Output tokens of a successful request whose server reported none: Python's
/// `len(tokenizer(generated_text, add_special_tokens=False).input_ids)`, or 1 without a
/// tokenizer (`--skip-tokenizer-init`).
pub fn output_len_fallback(tokenizer: Option<&Tokenizer>, generated_text: &str) -> usize {
    tokenizer.map_or(1, |t| t.count_tokens(generated_text))
}

/// Token ids of a text with the byte range each one covers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenSpans {
    pub ids: Vec<u32>,
    /// `(start, end)` byte offsets into the encoded text, one per id.
    pub offsets: Vec<(usize, usize)>,
}

/// The error [`locate`] returns when nothing exists under the name (as opposed to a file that
/// exists but is broken). [`Tokenizer::load_or_server`] falls back to the server only then.
fn refuse_unsupported_mode(opts: &TokenizerOptions) -> Result<()> {
    match opts.mode {
        TokenizerMode::Auto | TokenizerMode::Hf => Ok(()),
        TokenizerMode::Slow => Err(TokenizerError::SlowModeUnsupported),
        TokenizerMode::Mistral => Err(TokenizerError::MistralModeUnsupported),
    }
}

/// Resolves `opts.id` to a file or built-in encoding, in tier order.
fn locate(opts: &TokenizerOptions) -> Result<Located> {
    let id = opts.id.as_str();
    if id.is_empty() {
        return Err(TokenizerError::EmptyId);
    }
    let path = std::path::Path::new(id);
    if path.exists() {
        return locate_path(path);
    }
    if let Some(b) = tiktoken::Builtin::from_name(id) {
        return Ok(Located::TiktokenBuiltin(b));
    }
    if looks_like_path(id) {
        return Err(TokenizerError::NotFound(format!(
            "tokenizer path {id} does not exist; pass --tokenizer <directory with tokenizer.json>"
        )));
    }
    hub::locate(opts)
}

/// A name that can only be meant as a filesystem path (a Hub id is `name` or `org/name`).
fn looks_like_path(id: &str) -> bool {
    id.starts_with('/')
        || id.starts_with('.')
        || id.starts_with('~')
        || id.matches('/').count() > 1
        || id.ends_with(".json")
        || id.ends_with(".tiktoken")
        || id.ends_with(".model")
}

/// A local file or directory named by `--tokenizer`.
fn locate_path(path: &std::path::Path) -> Result<Located> {
    if path.is_file() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".tiktoken") || name.ends_with(".model") {
            return Ok(Located::TiktokenFile(path.to_owned()));
        }
        return Ok(Located::HfJson(path.to_owned()));
    }
    match find_in_dir(path)? {
        Some(located) => Ok(located),
        None => Err(TokenizerError::NotFound(format!(
            "no tokenizer in {}: it has no tokenizer.json and no *.tiktoken / tiktoken.model; \
             point --tokenizer at a directory that has one (or a Hub id / tiktoken encoding name)",
            path.display()
        ))),
    }
}

/// The tokenizer file inside a model directory (a local checkout or a Hub snapshot):
/// `tokenizer.json` first, then a tiktoken rank file.
fn find_in_dir(dir: &std::path::Path) -> Result<Option<Located>> {
    let json = dir.join("tokenizer.json");
    if json.is_file() {
        return Ok(Some(Located::HfJson(json)));
    }
    if let Some(file) = tiktoken::find_rank_file(dir)? {
        return Ok(Some(Located::TiktokenFile(file)));
    }
    if dir.join("tekken.json").is_file() {
        return Err(TokenizerError::TekkenOnly {
            dir: dir.to_owned(),
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_parses_python_names_and_rejects_others() {
        assert_eq!(
            "auto".parse::<TokenizerMode>().unwrap(),
            TokenizerMode::Auto
        );
        assert_eq!("hf".parse::<TokenizerMode>().unwrap(), TokenizerMode::Hf);
        assert_eq!(
            "slow".parse::<TokenizerMode>().unwrap(),
            TokenizerMode::Slow
        );
        assert_eq!(
            "mistral".parse::<TokenizerMode>().unwrap(),
            TokenizerMode::Mistral
        );
        let err = "fast".parse::<TokenizerMode>().unwrap_err().to_string();
        assert!(err.contains("--tokenizer-mode fast"), "{err}");
    }

    #[test]
    fn tokenizer_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Tokenizer>();
    }

    #[test]
    fn skip_tokenizer_init_paths() {
        let err = required(None, "--dataset-name random")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--dataset-name random needs a tokenizer"),
            "{err}"
        );
        assert!(err.contains("--skip-tokenizer-init"), "{err}");
        assert_eq!(output_len_fallback(None, "three words here"), 1);
        assert_eq!(output_len_fallback(None, ""), 1);
    }

    #[test]
    fn path_like_names_are_not_hub_ids() {
        assert!(looks_like_path("/a/b"));
        assert!(looks_like_path("./tok"));
        assert!(looks_like_path("a/b/c"));
        assert!(looks_like_path("x.tiktoken"));
        assert!(!looks_like_path("Qwen/Qwen3-8B"));
        assert!(!looks_like_path("gpt2"));
    }
}
