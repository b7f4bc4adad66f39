//! The mock's deterministic toy tokenizer, behind `/tokenize`, `/detokenize`, the prompt
//! token counts in `usage` and the toy prefix cache.
//!
//! It needs no vocabulary file and no state, and every server (and every run) agrees on it:
//! - a token is a whitespace-separated word (`str::split_whitespace`);
//! - a word of 1 to 6 ASCII lowercase letters gets its bijective base-26 value
//!   (`a` = 1, `z` = 26, `aa` = 27, …, `zzzzzz` = 321 272 406), so these ids turn back into
//!   their words: `detokenize(tokenize(t)) == t` for text made of such words;
//! - any other word gets a stable id in `[400 000 000, 2^31)` from its FNV-1a hash, and
//!   detokenizes as `<unk>` (the hash cannot be inverted);
//! - every id fits in an `i32`, so any client's integer type holds it.
//!
//! Counting (`usage.prompt_tokens`) follows the golden mock's rules, which are about word
//! counts, not ids: see `super::body`.

use super::hash::fnv64;

/// Largest id of a base-26 word (`zzzzzz`).
pub const MAX_WORD_ID: u32 = 321_272_406;
/// First id of the hashed range.
pub const FIRST_HASHED_ID: u32 = 400_000_000;
/// One past the last id (ids stay below `i32::MAX`).
const END_ID: u32 = 1 << 31;
/// Longest word that gets an invertible id.
const MAX_WORD_LEN: usize = 6;
/// What ids without a word detokenize to.
pub const UNKNOWN_WORD: &str = "<unk>";

/// The id of one word (the word must not contain whitespace).
pub fn word_id(word: &str) -> u32 {
    let bytes = word.as_bytes();
    if (1..=MAX_WORD_LEN).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_lowercase) {
        bytes
            .iter()
            .fold(0u32, |id, &b| id * 26 + u32::from(b - b'a' + 1))
    } else {
        FIRST_HASHED_ID + (fnv64(bytes) % u64::from(END_ID - FIRST_HASHED_ID)) as u32
    }
}

/// The ids of `text`, one per whitespace-separated word.
pub fn tokenize(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.split_whitespace().map(word_id)
}

/// Appends the word of `id` to `out` (`<unk>` when the id has no word).
pub fn push_word(id: i64, out: &mut String) {
    let Ok(mut id) = u32::try_from(id) else {
        out.push_str(UNKNOWN_WORD);
        return;
    };
    if id == 0 || id > MAX_WORD_ID {
        out.push_str(UNKNOWN_WORD);
        return;
    }
    let mut letters = [0u8; MAX_WORD_LEN];
    let mut n = 0;
    while id > 0 {
        // Bijective base 26: digits are 1..=26, so shift by one before taking the remainder.
        id -= 1;
        letters[n] = b'a' + (id % 26) as u8;
        id /= 26;
        n += 1;
    }
    letters[..n].reverse();
    out.extend(letters[..n].iter().map(|&b| b as char));
}

/// The text of `ids`: their words joined by single spaces.
pub fn detokenize(ids: &[i64]) -> String {
    let mut out = String::with_capacity(ids.len() * 5);
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_word(id, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base26_ids_are_bijective() {
        assert_eq!(word_id("a"), 1);
        assert_eq!(word_id("z"), 26);
        assert_eq!(word_id("aa"), 27);
        assert_eq!(word_id("zzzzzz"), MAX_WORD_ID);
        for id in [
            1i64,
            2,
            26,
            27,
            52,
            53,
            702,
            703,
            12_345,
            4_000_000,
            MAX_WORD_ID as i64,
        ] {
            let text = detokenize(&[id]);
            assert_eq!(i64::from(word_id(&text)), id, "{text}");
        }
    }

    #[test]
    fn round_trip_for_lowercase_words() {
        let text = "the quick brown fox jumps over tok";
        let ids: Vec<i64> = tokenize(text).map(i64::from).collect();
        assert_eq!(ids.len(), 7);
        assert_eq!(detokenize(&ids), text);
    }

    #[test]
    fn other_words_hash_into_their_own_range_and_stay_stable() {
        for w in ["Hello", "toolong", "x1", "naïve", "<unk>"] {
            let id = word_id(w);
            assert!((FIRST_HASHED_ID..END_ID).contains(&id), "{w} -> {id}");
            assert_eq!(id, word_id(w));
            assert_eq!(detokenize(&[i64::from(id)]), UNKNOWN_WORD);
        }
        assert_ne!(word_id("Hello"), word_id("hello"));
    }

    #[test]
    fn ids_without_words_are_unknown() {
        assert_eq!(
            detokenize(&[0, -1, i64::from(MAX_WORD_ID) + 1, i64::MAX]),
            "<unk> <unk> <unk> <unk>"
        );
        assert_eq!(detokenize(&[]), "");
    }
}
