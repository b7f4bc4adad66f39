//! Tier 2: tiktoken encodings (`tiktoken-rs`).
//!
//! Two sources:
//! * **Built-in names** — `r50k_base` (alias `gpt2`), `p50k_base`, `p50k_edit`,
//!   `cl100k_base`, `o200k_base`, embedded in `tiktoken-rs` (no file, no network).
//! * **Rank files** — `*.tiktoken` or `tiktoken.model`: one `<base64 token bytes> <rank>` line
//!   per token (Kimi, Qwen-1). The split regex (`pat_str`) is read from the `tokenization*.py`
//!   files beside the rank file when one assigns it statically ([`super::pat_str`]); otherwise
//!   the cl100k pattern is used. Special tokens come from `tokenizer_config.json`'s
//!   `added_tokens_decoder` (id → content) beside it; `all_special_ids` follows the named
//!   tokens and `additional_special_tokens` of that config as in `transformers`.
//!
//! Text containing a special token's literal text encodes to that special id (like an HF
//! tokenizer's added tokens). Decoding joins token bytes and replaces invalid UTF-8 with
//! U+FFFD (Python's `errors="replace"`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{RankFileError, Result, TokenizerError};
use tiktoken_rs::CoreBPE;

use super::special::SpecialTokensConfig;

/// The split pattern of `cl100k_base`: the default for rank files without a `pat_str`.
pub const CL100K_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A tiktoken encoding embedded in `tiktoken-rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    R50kBase,
    P50kBase,
    P50kEdit,
    Cl100kBase,
    O200kBase,
}

impl Builtin {
    /// The encoding `name` denotes (`gpt2` is `r50k_base`, as in tiktoken).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "r50k_base" | "gpt2" => Self::R50kBase,
            "p50k_base" => Self::P50kBase,
            "p50k_edit" => Self::P50kEdit,
            "cl100k_base" => Self::Cl100kBase,
            "o200k_base" => Self::O200kBase,
            _ => return None,
        })
    }

    fn load(self) -> Result<CoreBPE> {
        let bpe = match self {
            Self::R50kBase => tiktoken_rs::r50k_base(),
            Self::P50kBase => tiktoken_rs::p50k_base(),
            Self::P50kEdit => tiktoken_rs::p50k_edit(),
            Self::Cl100kBase => tiktoken_rs::cl100k_base(),
            Self::O200kBase => tiktoken_rs::o200k_base(),
        };
        bpe.map_err(|e| TokenizerError::BuiltinEncoding {
            name: format!("{self:?}"),
            reason: e.to_string(),
        })
    }

    /// One past the largest ordinary rank (the embedded files' sizes).
    fn ordinary_ranks(self) -> u32 {
        match self {
            Self::R50kBase => 50_256,
            Self::P50kBase | Self::P50kEdit => 50_281,
            Self::Cl100kBase => 100_256,
            Self::O200kBase => 199_998,
        }
    }
}

/// A tiktoken encoding with the tables decoding needs.
pub struct TiktokenTokenizer {
    bpe: CoreBPE,
    /// Bytes of every id (ordinary and special); `None` where the id does not exist.
    decoder: Vec<Option<Box<[u8]>>>,
    /// One past the largest ordinary rank: Python's `vocab_size` (no special tokens).
    vocab_size: usize,
    /// Ids of all special tokens, sorted.
    specials: Vec<u32>,
    /// `all_special_ids` as `transformers` would list them.
    all_special_ids: Vec<u32>,
    /// Ordinary ids below `vocab_size` that have no token (gaps in the rank file) plus the
    /// special ids: what a synthetic prompt must never contain.
    unusable: Vec<u32>,
    bos: Option<u32>,
}

impl TiktokenTokenizer {
    /// A built-in encoding.
    pub fn builtin(which: Builtin) -> Result<Self> {
        let bpe = which.load()?;
        let mut specials = Vec::new();
        let mut special_map = HashMap::new();
        for name in bpe.special_tokens() {
            let ids = bpe.encode_with_special_tokens(name);
            if let [id] = ids[..] {
                specials.push(id);
                special_map.insert(name.to_owned(), id);
            }
        }
        let mut decoder = Vec::new();
        for id in 0..which.ordinary_ranks() {
            decoder.push(builtin_token_bytes(&bpe, id));
        }
        add_specials_to_decoder(&mut decoder, &special_map);
        specials.sort_unstable();
        Ok(Self::assemble(
            bpe,
            decoder,
            which.ordinary_ranks() as usize,
            specials.clone(),
            specials,
            None,
        ))
    }

    /// A rank file (`*.tiktoken`, `tiktoken.model`) with its directory's config and
    /// `tokenization*.py`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read(path).map_err(|source| TokenizerError::ReadTiktokenFile {
            path: path.to_owned(),
            source,
        })?;
        let ranks = parse_rank_file(&text).map_err(|source| TokenizerError::NotARankFile {
            path: path.to_owned(),
            source,
        })?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let pattern = pattern_from_dir(dir)?.unwrap_or_else(|| CL100K_PATTERN.to_owned());
        let special_map = added_tokens_from_config(dir)?;
        let vocab_size = ranks
            .iter()
            .map(|(_, r)| *r as usize + 1)
            .max()
            .unwrap_or(0);
        let mut decoder: Vec<Option<Box<[u8]>>> = vec![None; vocab_size];
        for (bytes, rank) in &ranks {
            decoder[*rank as usize] = Some(bytes.clone().into_boxed_slice());
        }
        add_specials_to_decoder(&mut decoder, &special_map);
        // `collect` builds the hash maps with the hasher `CoreBPE::new` asks for.
        let special_encoder = special_map.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let bpe =
            CoreBPE::new(ranks.into_iter().collect(), special_encoder, &pattern).map_err(|e| {
                TokenizerError::PatternRegex {
                    path: path.to_owned(),
                    reason: e.to_string(),
                }
            })?;
        let mut specials: Vec<u32> = special_map.values().copied().collect();
        specials.sort_unstable();
        let config = SpecialTokensConfig::from_dir(dir)?;
        let all_special_ids = if config.missing {
            specials.clone()
        } else {
            config
                .all_special_tokens()
                .iter()
                .filter_map(|t| special_map.get(*t).copied())
                .collect()
        };
        let bos = (config.add_bos_token == Some(true))
            .then(|| {
                config
                    .named("bos_token")
                    .and_then(|t| special_map.get(t).copied())
            })
            .flatten();
        Ok(Self::assemble(
            bpe,
            decoder,
            vocab_size,
            specials,
            all_special_ids,
            bos,
        ))
    }

    fn assemble(
        bpe: CoreBPE,
        decoder: Vec<Option<Box<[u8]>>>,
        vocab_size: usize,
        specials: Vec<u32>,
        all_special_ids: Vec<u32>,
        bos: Option<u32>,
    ) -> Self {
        let gaps = (0..vocab_size as u32).filter(|&id| decoder[id as usize].is_none());
        let mut unusable: Vec<u32> = gaps.chain(specials.iter().copied()).collect();
        unusable.sort_unstable();
        unusable.dedup();
        Self {
            bpe,
            decoder,
            vocab_size,
            specials,
            all_special_ids,
            unusable,
            bos,
        }
    }

    /// Token ids of `text`; special-token text maps to its id.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Vec<u32> {
        let mut ids = if self.specials.is_empty() {
            self.bpe.encode_ordinary(text)
        } else {
            self.bpe.encode_with_special_tokens(text)
        };
        if add_special_tokens {
            if let Some(bos) = self.bos {
                ids.insert(0, bos);
            }
        }
        ids
    }

    /// Ids of `text` (no BOS) with their byte ranges: tiktoken tokens are byte strings
    /// whose concatenation is the text, so the ranges are running sums of their lengths.
    pub fn encode_with_offsets(&self, text: &str) -> super::TokenSpans {
        let ids = self.encode(text, false);
        let mut offsets = Vec::with_capacity(ids.len());
        let mut pos = 0;
        for &id in &ids {
            let len = self
                .decoder
                .get(id as usize)
                .and_then(Option::as_deref)
                .map_or(0, <[u8]>::len);
            offsets.push((pos, pos + len));
            pos += len;
        }
        super::TokenSpans { ids, offsets }
    }

    /// Text of `ids`; invalid UTF-8 becomes U+FFFD, an unknown id is an error.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if skip_special_tokens && self.specials.binary_search(&id).is_ok() {
                continue;
            }
            let token = self.decoder.get(id as usize).and_then(Option::as_deref);
            bytes.extend_from_slice(token.ok_or(TokenizerError::UnknownTokenId(id))?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One past the largest ordinary rank.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Python's `all_special_ids`.
    pub fn special_ids(&self) -> &[u32] {
        &self.all_special_ids
    }

    /// Ids a synthetic prompt must avoid: specials and rank-file gaps, sorted.
    pub fn unusable_ids(&self) -> &[u32] {
        &self.unusable
    }

    /// 1 when the config asks for a BOS, else 0.
    pub fn num_special_tokens_to_add(&self) -> usize {
        usize::from(self.bos.is_some())
    }
}

/// Bytes of ordinary id `id` of a built-in encoding, or `None` for a gap in its ranks.
///
/// `tiktoken-rs` does not expose its rank table. `decode` of a single id fails either for an
/// unknown id or for a token that is only part of a UTF-8 character; the per-token byte
/// iterator then gives the bytes, and it is only called for ids the first call proved exist.
fn builtin_token_bytes(bpe: &CoreBPE, id: u32) -> Option<Box<[u8]>> {
    match bpe.decode(vec![id]) {
        Ok(text) => Some(text.into_bytes().into_boxed_slice()),
        Err(e) if e.to_string().contains("Invalid token") => None,
        Err(_) => bpe
            ._decode_native_and_split(vec![id])
            .next()
            .map(Vec::into_boxed_slice),
    }
}

fn add_specials_to_decoder(decoder: &mut Vec<Option<Box<[u8]>>>, specials: &HashMap<String, u32>) {
    for (content, &id) in specials {
        let idx = id as usize;
        if decoder.len() <= idx {
            decoder.resize(idx + 1, None);
        }
        decoder[idx] = Some(content.as_bytes().into());
    }
}

/// `*.tiktoken` or `tiktoken.model` in `dir` (first by name), if any.
pub fn find_rank_file(dir: &Path) -> Result<Option<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".tiktoken") || n == "tiktoken.model")
        })
        .collect();
    found.sort();
    Ok(found.into_iter().next())
}

/// Parses `<base64> <rank>` lines (blank lines skipped).
pub fn parse_rank_file(bytes: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, RankFileError> {
    let text = std::str::from_utf8(bytes).map_err(|_| RankFileError::NotText)?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (token, rank) = line
            .split_once(' ')
            .ok_or(RankFileError::MissingRank(n + 1))?;
        let token = base64_decode(token).ok_or_else(|| RankFileError::InvalidBase64 {
            line: n + 1,
            token: token.to_owned(),
        })?;
        let rank: u32 = rank
            .trim()
            .parse()
            .map_err(|_| RankFileError::InvalidRank {
                line: n + 1,
                rank: rank.to_owned(),
            })?;
        out.push((token, rank));
    }
    if out.is_empty() {
        return Err(RankFileError::Empty);
    }
    // CoreBPE::new panics on duplicate ranks, and the decoder table is sized by the largest
    // rank: allow gaps (p50k has one) but not a rank far beyond the number of tokens.
    let limit = (2 * out.len()).max(out.len() + 65_536);
    let mut seen = vec![false; limit];
    for (_, rank) in &out {
        let slot = seen
            .get_mut(*rank as usize)
            .ok_or(RankFileError::RankTooLarge {
                rank: *rank,
                tokens: out.len(),
            })?;
        if std::mem::replace(slot, true) {
            return Err(RankFileError::DuplicateRank(*rank));
        }
    }
    Ok(out)
}

/// Standard base64 (with or without `=` padding).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The `pat_str` assigned in a `tokenization*.py` (or any `*.py`) of `dir`, if one is readable.
fn pattern_from_dir(dir: &Path) -> Result<Option<String>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut sources: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    // tokenization_*.py first, then the rest, each by name.
    sources.sort_by_key(|p| {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        (!name.starts_with("tokenization"), name)
    });
    for path in sources {
        let source = std::fs::read_to_string(&path).map_err(|source| TokenizerError::Read {
            path: path.clone(),
            source,
        })?;
        if let Some(pattern) = super::pat_str::extract(&source) {
            return Ok(Some(pattern));
        }
    }
    Ok(None)
}

/// `added_tokens_decoder` of `tokenizer_config.json` in `dir` as content → id.
fn added_tokens_from_config(dir: &Path) -> Result<HashMap<String, u32>> {
    let path = dir.join("tokenizer_config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(source) => return Err(TokenizerError::Read { path, source }),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| TokenizerError::InvalidJson {
            path: path.clone(),
            source,
        })?;
    let mut out = HashMap::new();
    if let Some(map) = value
        .get("added_tokens_decoder")
        .and_then(|v| v.as_object())
    {
        for (id, token) in map {
            let id: u32 = id.parse().map_err(|_| TokenizerError::AddedTokenId {
                path: path.clone(),
                id: id.clone(),
            })?;
            if let Some(content) = token.get("content").and_then(|c| c.as_str()) {
                out.insert(content.to_owned(), id);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vb-tiktoken-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// 256 single-byte tokens, base64-encoded.
    fn byte_ranks() -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..=255u32)
            .map(|b| {
                format!(
                    "{}{}== {b}",
                    A[(b >> 2) as usize] as char,
                    A[((b & 3) << 4) as usize] as char
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("IHdvcmxk").unwrap(), b" world");
        assert_eq!(base64_decode("4oCU").unwrap(), "—".as_bytes());
        assert!(base64_decode("a").is_none());
        assert!(base64_decode("a*==").is_none());
    }

    #[test]
    fn duplicate_or_huge_ranks_are_refused_but_gaps_are_not() {
        let err = |bytes: &[u8]| parse_rank_file(bytes).unwrap_err().to_string();
        assert!(err(b"YQ== 0\nYg== 0\n").contains("twice"));
        assert!(err(b"YQ== 4000000000\n").contains("far beyond"));
        assert_eq!(parse_rank_file(b"YQ== 0\nYg== 2\n").unwrap().len(), 2);
        assert!(parse_rank_file(b"\n\n").is_err());
    }

    #[test]
    fn kimi_style_pattern_with_class_intersection_loads() {
        let dir = tempdir("kimi");
        std::fs::write(dir.join("tiktoken.model"), byte_ranks()).unwrap();
        std::fs::write(
            dir.join("tokenization_kimi.py"),
            r#"
class TikTokenTokenizer:
    def __init__(self):
        pat_str = "|".join(
            [
                r"""[\p{Han}]+""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        )
"#,
        )
        .unwrap();
        let tok = TiktokenTokenizer::from_file(&dir.join("tiktoken.model")).unwrap();
        assert_eq!(tok.vocab_size(), 256);
        for text in ["Hello 世界 1234, it's", "ünïcödé\r\n  x"] {
            let ids = tok.encode(text, false);
            assert_eq!(
                ids.len(),
                text.len(),
                "byte-level vocabulary: one id per byte"
            );
            assert_eq!(tok.decode(&ids, false).unwrap(), text);
        }
    }
}
