//! A BPE model with a compact per-thread word cache: the tokens of each word (pre-token) kept
//! as ids and byte offsets, not as the crate's merge state.
//!
//! Why: dataset generation tokenizes every word of a vocabulary walk, so a useful cache holds
//! about one entry per vocabulary word (~150k for Qwen3). The `tokenizers` crate caches a
//! word as its `Word`, 32 bytes per input byte (the symbol list keeps its first capacity after
//! the merges), plus a `String` key: about 260 bytes a word. On two generation threads that
//! was 59 MB of the 116 MB heap peak at 10,000 streams (bench-overhead/results/HISTORY.md). An entry here
//! is the word and 8 bytes per token, about 70 bytes.
//!
//! The tokens are exactly what the model behind it (our [`super::compact_bpe`], or the
//! crate's BPE) returned for the word (BPE without dropout is a pure function of the word),
//! so cached and uncached encodes agree. Like the crate's cache,
//! it lives in a thread local: no lock on the hot path, and it is freed when the thread
//! exits (which is why generation runs on a pool of its own, `modes::plan`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokenizers::models::bpe::{BpeTrainer, BPE};
use tokenizers::{Model, Token};

use super::compact_bpe::CompactBpe;

/// Words each thread's cache may hold. The random dataset's text walks the whole vocabulary,
/// so with fewer entries than vocabulary words most lookups miss (~150k words for Qwen3).
const CAPACITY: usize = 262_144;

/// Longest word cached, in bytes; its offsets then fit in a `u8`. Longer words are rare and
/// are merged every time (the crate's own cache stops at the same length).
const MAX_WORD_LEN: usize = 255;

/// One token of a cached word.
#[derive(Clone, Copy)]
struct Piece {
    id: u32,
    start: u8,
    end: u8,
}

type Words = HashMap<Box<str>, Box<[Piece]>>;

thread_local! {
    /// Each model's words, by model id (a process may hold more than one tokenizer).
    static WORDS: RefCell<HashMap<u64, Words>> = RefCell::new(HashMap::new());
}

/// Source of model ids, so two models never share cached words.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The merging model behind the cache: ours in flat tables, or the crate's for the options
/// ours does not build (see [`super::compact_bpe`]).
enum Bpe {
    Compact(CompactBpe),
    Crate(BPE),
}

/// A BPE model (built without the crate's own cache) behind the compact word cache.
pub(super) struct WordCachedBpe {
    bpe: Bpe,
    id: u64,
}

impl WordCachedBpe {
    /// Wraps the crate's `bpe`, which should be built with a cache capacity of 0 (this one
    /// replaces it).
    pub(super) fn new(bpe: BPE) -> Self {
        Self::with(Bpe::Crate(bpe))
    }

    /// Wraps our compact model.
    pub(super) fn compact(bpe: CompactBpe) -> Self {
        Self::with(Bpe::Compact(bpe))
    }

    fn with(bpe: Bpe) -> Self {
        WordCachedBpe {
            bpe,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Whether words of this model may be cached: BPE with dropout is not deterministic
    /// (the compact model has none).
    fn cacheable(&self, word: &str) -> bool {
        word.len() <= MAX_WORD_LEN
            && match &self.bpe {
                Bpe::Compact(_) => true,
                Bpe::Crate(b) => b.dropout.is_none_or(|p| p == 0.0),
            }
    }

    /// Whether our compact model merges (not the crate's).
    #[cfg(test)]
    pub(super) fn is_compact(&self) -> bool {
        matches!(self.bpe, Bpe::Compact(_))
    }

    /// The merged tokens of one word, uncached.
    fn merge(&self, word: &str) -> tokenizers::Result<Vec<Token>> {
        match &self.bpe {
            Bpe::Compact(b) => Ok(b.tokenize(word)),
            Bpe::Crate(b) => b.tokenize(word),
        }
    }

    /// The crate's model of this one, for the rarely used parts of `Model` (saving,
    /// training).
    fn as_crate(&self) -> std::borrow::Cow<'_, BPE> {
        match &self.bpe {
            Bpe::Compact(b) => std::borrow::Cow::Owned(b.to_crate()),
            Bpe::Crate(b) => std::borrow::Cow::Borrowed(b),
        }
    }

    /// The tokens of a cached word, rebuilt with their strings; `None` if an id has no
    /// string (never for ids the model produced).
    fn rebuild(&self, pieces: &[Piece]) -> Option<Vec<Token>> {
        pieces
            .iter()
            .map(|p| {
                let value = self.id_to_token(p.id)?;
                Some(Token::new(
                    p.id,
                    value,
                    (usize::from(p.start), usize::from(p.end)),
                ))
            })
            .collect()
    }
}

/// The compact form of `tokens`; `None` if an offset does not fit (the word is not cached).
fn pieces_of(tokens: &[Token]) -> Option<Box<[Piece]>> {
    tokens
        .iter()
        .map(|t| {
            Some(Piece {
                id: t.id,
                start: u8::try_from(t.offsets.0).ok()?,
                end: u8::try_from(t.offsets.1).ok()?,
            })
        })
        .collect()
}

impl Model for WordCachedBpe {
    type Trainer = BpeTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        if sequence.is_empty() || !self.cacheable(sequence) {
            return self.merge(sequence);
        }
        WORDS.with(|cell| {
            let mut by_model = cell.borrow_mut();
            let words = by_model.entry(self.id).or_default();
            if let Some(tokens) = words.get(sequence).and_then(|p| self.rebuild(p)) {
                return Ok(tokens);
            }
            let tokens = self.merge(sequence)?;
            if words.len() < CAPACITY {
                if let Some(pieces) = pieces_of(&tokens) {
                    words.insert(sequence.into(), pieces);
                }
            }
            Ok(tokens)
        })
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        match &self.bpe {
            Bpe::Compact(b) => b.token_to_id(token),
            Bpe::Crate(b) => b.token_to_id(token),
        }
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        match &self.bpe {
            Bpe::Compact(b) => b.id_to_token(id),
            Bpe::Crate(b) => b.id_to_token(id),
        }
    }

    fn get_vocab(&self) -> std::collections::HashMap<String, u32> {
        match &self.bpe {
            Bpe::Compact(b) => b.vocab().into_iter().collect(),
            Bpe::Crate(b) => b.get_vocab(),
        }
    }

    fn get_vocab_size(&self) -> usize {
        match &self.bpe {
            Bpe::Compact(b) => b.vocab_len(),
            Bpe::Crate(b) => b.get_vocab_size(),
        }
    }

    fn save(&self, folder: &Path, prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        self.as_crate().save(folder, prefix)
    }

    fn get_trainer(&self) -> BpeTrainer {
        self.as_crate().get_trainer()
    }
}

/// Serialized as the crate's BPE (the cache is not part of the model).
impl serde::Serialize for WordCachedBpe {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_crate().serialize(serializer)
    }
}

impl Drop for WordCachedBpe {
    /// Frees this thread's words of the model (other threads' go when those threads end).
    fn drop(&mut self) {
        // `try_with`: the thread local may already be gone when a tokenizer is dropped
        // during thread teardown.
        let _ = WORDS.try_with(|cell| {
            if let Ok(mut by_model) = cell.try_borrow_mut() {
                by_model.remove(&self.id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bpe() -> BPE {
        let vocab: tokenizers::models::bpe::Vocab =
            [("a", 0), ("b", 1), ("c", 2), ("ab", 3), ("abc", 4)]
                .into_iter()
                .map(|(t, i)| (t.to_owned(), i))
                .collect();
        let merges = vec![
            ("a".to_owned(), "b".to_owned()),
            ("ab".to_owned(), "c".to_owned()),
        ];
        BPE::builder()
            .vocab_and_merges(vocab, merges)
            .cache_capacity(0)
            .build()
            .expect("a valid BPE")
    }

    fn ids_and_offsets(tokens: &[Token]) -> Vec<(u32, (usize, usize), String)> {
        tokens
            .iter()
            .map(|t| (t.id, t.offsets, t.value.clone()))
            .collect()
    }

    #[test]
    fn cached_words_give_the_same_tokens() {
        let model = WordCachedBpe::new(bpe());
        let plain = bpe();
        for word in ["abc", "abcab", "cba", "abc", "abcab", "c"] {
            let cached = model.tokenize(word).expect("tokenizes");
            let direct = plain.tokenize(word).expect("tokenizes");
            assert_eq!(ids_and_offsets(&cached), ids_and_offsets(&direct), "{word}");
        }
        let held = WORDS.with(|c| c.borrow().get(&model.id).map_or(0, HashMap::len));
        assert_eq!(held, 4, "one entry per distinct word");
    }

    #[test]
    fn long_words_are_not_cached_and_drop_frees_the_words() {
        let model = WordCachedBpe::new(bpe());
        let long = "ab".repeat(200);
        let tokens = model.tokenize(&long).expect("tokenizes");
        assert_eq!(tokens.len(), 200);
        assert_eq!(tokens[199].offsets, (398, 400));
        model.tokenize("abc").expect("tokenizes");
        let id = model.id;
        let held = WORDS.with(|c| c.borrow().get(&id).map_or(0, HashMap::len));
        assert_eq!(held, 1);
        drop(model);
        assert!(WORDS.with(|c| !c.borrow().contains_key(&id)));
    }
}
