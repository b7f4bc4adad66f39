//! A BPE model in flat tables: the same tokens as the `tokenizers` crate's `BPE`, in a third
//! of its memory.
//!
//! Why: the crate keeps the vocabulary twice, as `HashMap<String, u32>` and
//! `HashMap<u32, String>` (a separately allocated `String` per token in each), beside the
//! merge map. For Qwen3's 151,643 tokens that is 24.5 MB, the largest block the process holds
//! for the whole run at 10,000 streams (bench-overhead/results/HISTORY.md). Here the token strings are one
//! arena addressed by id, the string-to-id index is a table of ids (4 bytes a slot), and the
//! merges a table of 16-byte slots: 7 MB.
//!
//! The merge loop is the crate's (`Word::merge_all`): a min-heap of candidate merges ordered
//! by rank, then position, and the same test for stale entries, so the tokens are the crate's
//! for every word (a proptest below and, with the real Qwen3 and SmolLM2 files,
//! `tests/tokenizer_files.rs` check that).
//! Only the options met in practice are built here (unknown token, its fusing, byte
//! fallback, ignoring merges); a model with dropout, a continuing-subword prefix or an
//! end-of-word suffix stays the crate's.

use std::collections::BinaryHeap;

use tokenizers::models::bpe::{Merges, Vocab, BPE};
use tokenizers::Token;

/// The options of a BPE model, as `tokenizer.json` gives them.
#[derive(Debug, Clone, Default)]
pub(super) struct BpeOptions {
    pub dropout: Option<f32>,
    pub unk_token: Option<String>,
    pub continuing_subword_prefix: Option<String>,
    pub end_of_word_suffix: Option<String>,
    pub fuse_unk: bool,
    pub byte_fallback: bool,
    pub ignore_merges: bool,
}

impl BpeOptions {
    /// The crate's model with these options (and no word cache: ours replaces it).
    pub(super) fn build_crate(&self, vocab: Vocab, merges: Merges) -> tokenizers::Result<BPE> {
        let mut b = BPE::builder()
            .cache_capacity(0)
            .vocab_and_merges(vocab, merges)
            .fuse_unk(self.fuse_unk)
            .byte_fallback(self.byte_fallback)
            .ignore_merges(self.ignore_merges);
        if let Some(p) = self.dropout {
            b = b.dropout(p);
        }
        if let Some(t) = &self.unk_token {
            b = b.unk_token(t.clone());
        }
        if let Some(p) = &self.continuing_subword_prefix {
            b = b.continuing_subword_prefix(p.clone());
        }
        if let Some(s) = &self.end_of_word_suffix {
            b = b.end_of_word_suffix(s.clone());
        }
        b.build()
    }
}

/// Marks an empty slot in both tables (no id or pair takes it: see [`CompactBpe::build`]).
const EMPTY: u32 = u32::MAX;
const EMPTY_PAIR: u64 = u64::MAX;

/// One merge: the pair `(left << 32) | right`, its rank and the token it makes.
#[derive(Clone, Copy)]
struct MergeSlot {
    pair: u64,
    rank: u32,
    new_id: u32,
}

pub(super) struct CompactBpe {
    /// Every token's string, in id order.
    text: Box<str>,
    /// Token `id` is `text[starts[id]..starts[id + 1]]`; an id not in the vocabulary has an
    /// empty range (no token is empty: see [`CompactBpe::build`]).
    starts: Box<[u32]>,
    /// Ids by the hash of their string, linear probing; `EMPTY` ends a probe.
    index: Box<[u32]>,
    merges: Box<[MergeSlot]>,
    vocab_len: usize,
    /// Token of each byte for byte fallback (`<0x41>`), if the vocabulary has it.
    byte_tokens: Option<Box<[Option<u32>; 256]>>,
    unk: Option<u32>,
    /// As read, for rebuilding the crate's model ([`CompactBpe::to_crate`]).
    options: BpeOptions,
}

/// The probe start for `hash` in a table of `len` (a power of two) slots: its top bits.
fn slot_of(hash: u64, len: usize) -> usize {
    (hash >> (64 - len.trailing_zeros())) as usize
}

/// A fast, well-mixed hash of a token's bytes (FxHash's step over 8-byte words).
fn hash_str(s: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = s.len() as u64;
    let mut chunks = s.as_bytes().chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    // The table takes the top bits: fold the well-mixed high half over once more.
    (h ^ (h >> 29)).wrapping_mul(K)
}

fn hash_pair(pair: u64) -> u64 {
    (pair ^ (pair >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn pair(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// A table size with load at most 5/8, so a miss (most pair lookups) ends within a few slots.
fn table_len(entries: usize) -> usize {
    (entries * 8 / 5).max(16).next_power_of_two()
}

/// A candidate merge in the heap, ordered as the crate orders it: lowest rank first, then
/// leftmost.
#[derive(PartialEq, Eq)]
struct Candidate {
    rank: u32,
    pos: usize,
    new_id: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.rank, other.pos).cmp(&(self.rank, self.pos))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One symbol of a word being merged (the crate's `Symbol`): a token and its byte length,
/// linked to its neighbours; a merged-away symbol has length 0.
#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: isize,
    next: isize,
    len: usize,
}

impl CompactBpe {
    /// The compact model of `vocab` and `merges` with `options`, or `None` when the crate's
    /// model should be used: options not built here, an empty token, an id past twice the
    /// vocabulary, two tokens with one id, or a merge the crate would refuse (its error then
    /// explains).
    pub(super) fn build(vocab: &Vocab, merges: &Merges, options: &BpeOptions) -> Option<Self> {
        if options.dropout.is_some_and(|p| p != 0.0)
            // Empty ones (Qwen's json has both) change nothing.
            || options.continuing_subword_prefix.as_ref().is_some_and(|p| !p.is_empty())
            || options.end_of_word_suffix.as_ref().is_some_and(|s| !s.is_empty())
        {
            return None;
        }
        let max_id = *vocab.values().max()? as usize;
        if max_id >= u32::MAX as usize - 1 || max_id > 2 * vocab.len() + 1024 {
            return None;
        }
        let mut by_id: Vec<Option<&str>> = vec![None; max_id + 1];
        for (token, &id) in vocab {
            let slot = &mut by_id[id as usize];
            if token.is_empty() || slot.is_some() {
                return None;
            }
            *slot = Some(token);
        }
        let mut text = String::with_capacity(vocab.keys().map(String::len).sum());
        let mut starts = Vec::with_capacity(max_id + 2);
        for token in &by_id {
            starts.push(u32::try_from(text.len()).ok()?);
            text.push_str(token.unwrap_or(""));
        }
        starts.push(u32::try_from(text.len()).ok()?);
        let mut model = CompactBpe {
            text: text.into_boxed_str(),
            starts: starts.into_boxed_slice(),
            index: vec![EMPTY; table_len(vocab.len())].into_boxed_slice(),
            merges: Box::new([]),
            vocab_len: vocab.len(),
            byte_tokens: None,
            unk: None,
            options: options.clone(),
        };
        for &id in vocab.values() {
            model.index_insert(id);
        }
        model.merges = model.merge_table(merges)?;
        if let Some(unk) = &options.unk_token {
            // The crate fails only when an unknown character meets it: leave that to it.
            model.unk = Some(model.token_to_id(unk)?);
        }
        if options.byte_fallback {
            let mut bytes = Box::new([None; 256]);
            for (b, slot) in bytes.iter_mut().enumerate() {
                *slot = model.token_to_id(&format!("<{b:#04X}>"));
            }
            model.byte_tokens = Some(bytes);
        }
        Some(model)
    }

    fn index_insert(&mut self, id: u32) {
        let len = self.index.len();
        let mut i = slot_of(hash_str(self.token(id)), len);
        while self.index[i] != EMPTY {
            i = (i + 1) & (len - 1);
        }
        self.index[i] = id;
    }

    /// The merge table; `None` if a merge's part or result is not a token.
    fn merge_table(&self, merges: &Merges) -> Option<Box<[MergeSlot]>> {
        let empty = MergeSlot {
            pair: EMPTY_PAIR,
            rank: 0,
            new_id: 0,
        };
        let mut table = vec![empty; table_len(merges.len())].into_boxed_slice();
        let len = table.len();
        let mut joined = String::new();
        for (rank, (a, b)) in merges.iter().enumerate() {
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let key = pair(self.token_to_id(a)?, self.token_to_id(b)?);
            let slot = MergeSlot {
                pair: key,
                rank: u32::try_from(rank).ok()?,
                new_id: self.token_to_id(&joined)?,
            };
            let mut i = slot_of(hash_pair(key), len);
            // A repeated pair takes its later rank, as the crate's map does.
            while table[i].pair != EMPTY_PAIR && table[i].pair != key {
                i = (i + 1) & (len - 1);
            }
            table[i] = slot;
        }
        Some(table)
    }

    fn token(&self, id: u32) -> &str {
        let id = id as usize;
        match (self.starts.get(id), self.starts.get(id + 1)) {
            (Some(&s), Some(&e)) => &self.text[s as usize..e as usize],
            _ => "",
        }
    }

    pub(super) fn token_to_id(&self, token: &str) -> Option<u32> {
        let len = self.index.len();
        let mut i = slot_of(hash_str(token), len);
        loop {
            let id = self.index[i];
            if id == EMPTY {
                return None;
            }
            if self.token(id) == token {
                return Some(id);
            }
            i = (i + 1) & (len - 1);
        }
    }

    pub(super) fn id_to_token(&self, id: u32) -> Option<String> {
        let t = self.token(id);
        (!t.is_empty()).then(|| t.to_owned())
    }

    pub(super) fn vocab_len(&self) -> usize {
        self.vocab_len
    }

    /// The merge of `left` then `right`: its rank and the token it makes.
    fn merge_of(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = pair(left, right);
        let len = self.merges.len();
        let mut i = slot_of(hash_pair(key), len);
        loop {
            let s = self.merges[i];
            if s.pair == key {
                return Some((s.rank, s.new_id));
            }
            if s.pair == EMPTY_PAIR {
                return None;
            }
            i = (i + 1) & (len - 1);
        }
    }

    /// The vocabulary as the crate gives it.
    pub(super) fn vocab(&self) -> Vocab {
        (0..self.starts.len().saturating_sub(1) as u32)
            .filter(|&id| !self.token(id).is_empty())
            .map(|id| (self.token(id).to_owned(), id))
            .collect()
    }

    /// The merges in rank order, as `tokenizer.json` lists them.
    fn merge_list(&self) -> Merges {
        let mut by_rank: Vec<MergeSlot> = self
            .merges
            .iter()
            .copied()
            .filter(|s| s.pair != EMPTY_PAIR)
            .collect();
        by_rank.sort_unstable_by_key(|s| s.rank);
        by_rank
            .iter()
            .map(|s| {
                let left = self.token((s.pair >> 32) as u32).to_owned();
                let right = self.token(s.pair as u32).to_owned();
                (left, right)
            })
            .collect()
    }

    /// The crate's model of the same vocabulary, merges and options (for serializing and
    /// saving, never on the encode path).
    pub(super) fn to_crate(&self) -> BPE {
        self.options
            .build_crate(self.vocab(), self.merge_list())
            .expect("a model built from a valid vocabulary and merges rebuilds")
    }

    /// The tokens of one word (pre-token), exactly as the crate's `BPE::tokenize` gives them.
    pub(super) fn tokenize(&self, word: &str) -> Vec<Token> {
        if word.is_empty() {
            return Vec::new();
        }
        if self.options.ignore_merges {
            if let Some(id) = self.token_to_id(word) {
                return vec![Token::new(id, word.to_owned(), (0, word.len()))];
            }
        }
        let mut symbols = self.symbols(word);
        self.merge_all(&mut symbols);
        let mut at = 0;
        symbols
            .iter()
            .filter(|s| s.len != 0)
            .map(|s| {
                let offsets = (at, at + s.len);
                at += s.len;
                Token::new(s.id, self.token(s.id).to_owned(), offsets)
            })
            .collect()
    }

    /// The word's characters as symbols (the crate's `merge_word` before merging): a
    /// character not in the vocabulary becomes its bytes' tokens with byte fallback, else the
    /// unknown token (runs of them fused with `fuse_unk`), else is dropped.
    fn symbols(&self, word: &str) -> Vec<Symbol> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
        let mut push = |id: u32, len: usize| {
            let at = symbols.len() as isize;
            if let Some(last) = symbols.last_mut() {
                last.next = at;
            }
            symbols.push(Symbol {
                id,
                prev: at - 1,
                next: -1,
                len,
            });
        };
        let mut unk: Option<(u32, usize)> = None;
        for (i, c) in word.char_indices() {
            let s = &word[i..i + c.len_utf8()];
            if let Some(id) = self.token_to_id(s) {
                if let Some((u, len)) = unk.take() {
                    push(u, len);
                }
                push(id, s.len());
                continue;
            }
            if let Some(bytes) = &self.byte_tokens {
                let ids: Option<Vec<u32>> = s.bytes().map(|b| bytes[usize::from(b)]).collect();
                if let Some(ids) = ids {
                    // As the crate does: a pending unknown token is not emitted here.
                    for id in ids {
                        push(id, 1);
                    }
                    continue;
                }
            }
            if let Some(unk_id) = self.unk {
                unk = match unk {
                    Some((u, len)) if self.options.fuse_unk => Some((u, len + s.len())),
                    Some((u, len)) => {
                        push(u, len);
                        Some((unk_id, s.len()))
                    }
                    None => Some((unk_id, s.len())),
                };
            }
        }
        if let Some((u, len)) = unk {
            push(u, len);
        }
        symbols
    }

    /// The crate's `Word::merge_all` without dropout.
    fn merge_all(&self, symbols: &mut [Symbol]) {
        let mut queue: BinaryHeap<Candidate> = symbols
            .windows(2)
            .enumerate()
            .filter_map(|(pos, w)| {
                let (rank, new_id) = self.merge_of(w[0].id, w[1].id)?;
                Some(Candidate { rank, pos, new_id })
            })
            .collect();
        while let Some(top) = queue.pop() {
            let here = symbols[top.pos];
            if here.len == 0 || here.next == -1 {
                continue;
            }
            let next_pos = here.next as usize;
            let right = symbols[next_pos];
            // A stale entry: the pair at this position has changed since it was queued.
            if self
                .merge_of(here.id, right.id)
                .is_none_or(|(_, id)| id != top.new_id)
            {
                continue;
            }
            let current = Symbol {
                id: top.new_id,
                len: here.len + right.len,
                next: right.next,
                prev: here.prev,
            };
            symbols[top.pos] = current;
            symbols[next_pos].len = 0;
            if right.next > -1 && (right.next as usize) < symbols.len() {
                symbols[right.next as usize].prev = top.pos as isize;
            }
            if current.prev >= 0 {
                let prev = current.prev as usize;
                if let Some((rank, new_id)) = self.merge_of(symbols[prev].id, current.id) {
                    queue.push(Candidate {
                        rank,
                        pos: prev,
                        new_id,
                    });
                }
            }
            let next = current.next as usize;
            if current.next >= 0 && next < symbols.len() {
                if let Some((rank, new_id)) = self.merge_of(current.id, symbols[next].id) {
                    queue.push(Candidate {
                        rank,
                        pos: top.pos,
                        new_id,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A vocabulary with merges that compete (`ab`+`c` and `a`+`bc` both make `abc`), byte
    /// tokens for `é`'s two bytes, an unknown token, and an id hole at 9.
    fn vocab_and_merges() -> (Vocab, Merges) {
        let vocab: Vocab = [
            ("<unk>", 0),
            ("a", 1),
            ("b", 2),
            ("c", 3),
            ("ab", 4),
            ("bc", 5),
            ("abc", 6),
            ("aa", 7),
            ("aaa", 8),
            ("<0xC3>", 10),
            ("<0xA9>", 11),
            ("ca", 12),
        ]
        .into_iter()
        .map(|(t, i)| (t.to_owned(), i))
        .collect();
        let merges = [
            ("a", "b"),
            ("b", "c"),
            ("a", "a"),
            ("ab", "c"),
            ("a", "bc"),
            ("aa", "a"),
            ("c", "a"),
            ("a", "b"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
        (vocab, merges)
    }

    fn option_sets() -> Vec<BpeOptions> {
        let mut sets = Vec::new();
        for unk in [None, Some("<unk>".to_owned())] {
            for fuse_unk in [false, true] {
                for byte_fallback in [false, true] {
                    for ignore_merges in [false, true] {
                        sets.push(BpeOptions {
                            unk_token: unk.clone(),
                            fuse_unk,
                            byte_fallback,
                            ignore_merges,
                            ..BpeOptions::default()
                        });
                    }
                }
            }
        }
        sets
    }

    fn tokens(t: Vec<Token>) -> Vec<(u32, String, (usize, usize))> {
        t.into_iter().map(|t| (t.id, t.value, t.offsets)).collect()
    }

    fn both(options: &BpeOptions) -> (CompactBpe, BPE) {
        let (vocab, merges) = vocab_and_merges();
        let compact = CompactBpe::build(&vocab, &merges, options).expect("built");
        let crates = options.build_crate(vocab, merges).expect("valid");
        (compact, crates)
    }

    proptest! {
        #[test]
        fn words_merge_exactly_as_the_crate_merges_them(word in "[abcéxa]{0,24}") {
            use tokenizers::Model;
            for options in option_sets() {
                let (compact, crates) = both(&options);
                prop_assert_eq!(
                    tokens(compact.tokenize(&word)),
                    tokens(crates.tokenize(&word).unwrap()),
                    "{:?}", options
                );
            }
        }
    }

    #[test]
    fn lookups_and_rebuilt_model_match_the_crate() {
        use tokenizers::Model;
        let (compact, crates) = both(&BpeOptions {
            unk_token: Some("<unk>".into()),
            byte_fallback: true,
            ..BpeOptions::default()
        });
        for id in 0..14 {
            assert_eq!(compact.id_to_token(id), crates.id_to_token(id), "id {id}");
        }
        for t in ["a", "abc", "<0xC3>", "zz", "", "ab "] {
            assert_eq!(compact.token_to_id(t), crates.token_to_id(t), "{t:?}");
        }
        assert_eq!(compact.vocab_len(), crates.get_vocab_size());
        assert_eq!(
            compact
                .vocab()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>(),
            crates.get_vocab()
        );
        assert_eq!(
            serde_json::to_string(&compact.to_crate()).unwrap(),
            serde_json::to_string(&crates).unwrap()
        );
    }

    #[test]
    fn options_not_built_here_are_left_to_the_crate() {
        let (vocab, merges) = vocab_and_merges();
        let with = |o: BpeOptions| CompactBpe::build(&vocab, &merges, &o).is_some();
        assert!(with(BpeOptions::default()));
        assert!(with(BpeOptions {
            dropout: Some(0.0),
            ..BpeOptions::default()
        }));
        assert!(!with(BpeOptions {
            dropout: Some(0.1),
            ..BpeOptions::default()
        }));
        assert!(!with(BpeOptions {
            continuing_subword_prefix: Some("##".into()),
            ..BpeOptions::default()
        }));
        assert!(!with(BpeOptions {
            end_of_word_suffix: Some("</w>".into()),
            ..BpeOptions::default()
        }));
        assert!(with(BpeOptions {
            continuing_subword_prefix: Some(String::new()),
            end_of_word_suffix: Some(String::new()),
            ..BpeOptions::default()
        }));
        // An unknown token outside the vocabulary, a merge of a missing token.
        assert!(!with(BpeOptions {
            unk_token: Some("<nope>".into()),
            ..BpeOptions::default()
        }));
        let mut bad = merges.clone();
        bad.push(("c".into(), "z".into()));
        assert!(CompactBpe::build(&vocab, &bad, &BpeOptions::default()).is_none());
    }
}
