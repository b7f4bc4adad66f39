//! Exact prompts for large datasets without re-encoding every prompt.
//!
//! Every random prompt's body is text of the same cyclic vocabulary walk, so the walk is
//! decoded and encoded **once** ([`WalkCorpus`]): its text, ids and each id's byte range
//! (in a fixed number of pieces on all cores, the junctions re-encoded and spliced so the
//! result equals one encode of the whole text).
//! A body of `n` tokens is then a window `ids[a..a + n]` of that encoding, its text a slice
//! of the walk text — no decode, no full encode.
//!
//! A window's text re-encodes to exactly its ids when tokenization does not reach across
//! its two ends. [`SeamFitter`] checks both ends with the real tokenizer: the end of the
//! shared prefix plus the window's first tokens, and the window's last tokens, must encode to
//! exactly the expected ids; windows that fail move on to the next start. This rests on
//! tokenization being local — pre-tokenizer regexes scan forward with bounded lookahead and
//! BPE works inside one pre-token — which holds for byte-level BPE and tiktoken. The caller
//! re-encodes a sample of the finished prompts in full and falls back to fitting every prompt
//! ([`super::token_fit`]) if any of them is off, so a tokenizer without that property costs
//! time, never exactness.

use anyhow::Result;
use rayon::prelude::*;

use super::token_fit::{Fitted, Vocabulary};
use crate::tokenizer::{TokenSpans, Tokenizer, TokenizerError};

/// Prefix tokens re-encoded together with a window's head.
const PREFIX_TAIL: usize = 8;
/// Window tokens re-encoded at each end (bodies up to twice this are checked whole).
const SEAM: usize = 8;
/// Candidate starts tried per prompt before giving up on the window path for it.
const TRIES: usize = 32;

/// The vocabulary walk, decoded once and encoded once.
pub struct WalkCorpus {
    text: String,
    ids: Vec<u32>,
    /// Byte offset where token `k` starts; `starts[ids.len()] == text.len()`.
    starts: Vec<usize>,
    /// `clean[k]`: text can be cut between tokens `k - 1` and `k` (their byte ranges meet at
    /// a character boundary).
    clean: Vec<bool>,
    /// `forbidden_before[k]`: control tokens among `ids[..k]`.
    forbidden_before: Vec<u32>,
    /// Windows start in `0..cycle`: the tokens of one full turn of the walk (the rest of the
    /// text repeats its beginning so that windows near the end do not wrap).
    cycle: usize,
    /// Pieces the encoding was stitched from (1 when it fell back to one encode).
    pieces: usize,
}

impl WalkCorpus {
    /// Builds the corpus for bodies of up to `max_body` tokens; `None` when the tokenizer
    /// cannot report token offsets (server-side tokenizers).
    pub fn build(
        tokenizer: &Tokenizer,
        vocab: &Vocabulary,
        max_body: usize,
    ) -> Result<Option<Self>> {
        // One full turn of the walk plus enough of its beginning again that a window starting
        // anywhere in the turn ends inside the text (with room for re-encodings that yield
        // more tokens than the walk had).
        let turn = vocab.walk(0, vocab.len());
        let extra = vocab.walk(0, 2 * max_body + 4 * SEAM + 64);
        let Some((text, spans, turn_bytes, pieces)) = encode_walk(tokenizer, &turn, &extra)? else {
            return Ok(None);
        };
        let n = spans.ids.len();
        let mut starts: Vec<usize> = spans.offsets.iter().map(|o| o.0).collect();
        starts.push(text.len());
        let clean = (0..=n).map(|k| is_cut(&text, &spans.offsets, k)).collect();
        let mut forbidden_before = Vec::with_capacity(n + 1);
        let mut count = 0u32;
        forbidden_before.push(0);
        for &id in &spans.ids {
            count += u32::from(vocab.is_forbidden(id));
            forbidden_before.push(count);
        }
        let cycle = starts[..n].partition_point(|&s| s < turn_bytes).max(1);
        Ok(Some(Self {
            text,
            ids: spans.ids,
            starts,
            clean,
            forbidden_before,
            cycle,
            pieces,
        }))
    }

    /// The walk's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The walk's encoding (equal to `encode(text())`, though built in pieces).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// How many pieces the encoding was stitched from (1: encoded at once).
    pub fn pieces(&self) -> usize {
        self.pieces
    }

    /// Number of window start positions (tokens in one turn of the walk).
    pub fn cycle(&self) -> usize {
        self.cycle
    }

    /// Text of tokens `a..b` (both clean cut points).
    fn slice(&self, a: usize, b: usize) -> &str {
        &self.text[self.starts[a]..self.starts[b]]
    }

    fn has_forbidden(&self, a: usize, b: usize) -> bool {
        self.forbidden_before[b] != self.forbidden_before[a]
    }

    /// The first clean cut point in `from..to`.
    fn clean_from(&self, from: usize, to: usize) -> Option<usize> {
        (from..to.min(self.ids.len() + 1)).find(|&k| self.clean[k])
    }

    /// The last clean cut point in `from..to` (exclusive end).
    fn clean_before(&self, from: usize, to: usize) -> Option<usize> {
        (from..to).rev().find(|&k| self.clean[k])
    }
}

/// Builds prompts `prefix + window` whose seams re-encode exactly.
pub struct SeamFitter<'a> {
    tokenizer: &'a Tokenizer,
    corpus: &'a WalkCorpus,
    prefix: &'a Fitted,
    /// The prefix's last few tokens as text (cut at a clean point) and their ids: what the
    /// window's head is re-encoded with.
    prefix_tail_text: &'a str,
    prefix_tail_ids: &'a [u32],
}

impl<'a> SeamFitter<'a> {
    /// A fitter for prompts starting with `prefix`.
    pub fn new(
        tokenizer: &'a Tokenizer,
        corpus: &'a WalkCorpus,
        prefix: &'a Fitted,
    ) -> Result<Self> {
        let cut = prefix_tail_cut(tokenizer, prefix)?;
        Ok(Self {
            tokenizer,
            corpus,
            prefix,
            prefix_tail_text: &prefix.text[cut.1..],
            prefix_tail_ids: &prefix.ids[cut.0..],
        })
    }

    /// Text of exactly `prefix.len() + body_len` tokens whose body is a window of the walk
    /// starting near token `start`, or `None` when no window near it has clean seams.
    pub fn fit(&self, start: usize, body_len: usize) -> Result<Option<String>> {
        let c = self.corpus;
        for attempt in 0..TRIES {
            let from = (start + attempt) % c.cycle;
            let Some(a) = c.clean_from(from, from + 4 * SEAM) else {
                continue;
            };
            let b = a + body_len;
            if b > c.ids.len() || !c.clean[b] || c.has_forbidden(a, b) {
                continue;
            }
            if self.seams_hold(a, b)? {
                let body = c.slice(a, b);
                let mut text = String::with_capacity(self.prefix.text.len() + body.len());
                text.push_str(&self.prefix.text);
                text.push_str(body);
                return Ok(Some(text));
            }
        }
        Ok(None)
    }

    /// Re-encodes the head seam (prefix tail + first window tokens) and the tail seam (last
    /// window tokens); true when both give exactly the corpus ids.
    fn seams_hold(&self, a: usize, b: usize) -> Result<bool> {
        let c = self.corpus;
        if b - a <= 2 * SEAM {
            return self.encodes_to(a, b, true);
        }
        let Some(head_end) = c.clean_from(a + SEAM, b - SEAM) else {
            return self.encodes_to(a, b, true);
        };
        let Some(tail_start) = c.clean_before(head_end + 1, b - SEAM + 1) else {
            return self.encodes_to(a, b, true);
        };
        Ok(self.encodes_to(a, head_end, true)? && self.encodes_to(tail_start, b, false)?)
    }

    /// Does the text of tokens `a..b` (after the prefix tail when `with_prefix`) encode to
    /// exactly those ids (after the prefix tail's ids)?
    fn encodes_to(&self, a: usize, b: usize, with_prefix: bool) -> Result<bool> {
        let c = self.corpus;
        let (tail_text, tail_ids) = if with_prefix {
            (self.prefix_tail_text, self.prefix_tail_ids)
        } else {
            ("", &[][..])
        };
        let mut text = String::with_capacity(tail_text.len() + c.starts[b] - c.starts[a]);
        text.push_str(tail_text);
        text.push_str(c.slice(a, b));
        let ids = self.tokenizer.encode(&text, false)?;
        Ok(ids.len() == tail_ids.len() + (b - a)
            && ids[..tail_ids.len()] == *tail_ids
            && ids[tail_ids.len()..] == c.ids[a..b])
    }
}

/// Where to cut the prefix so that its last (about) [`PREFIX_TAIL`] tokens are re-encoded
/// with each window head: (token index, byte offset), at a clean point.
fn prefix_tail_cut(tokenizer: &Tokenizer, prefix: &Fitted) -> Result<(usize, usize)> {
    let n = prefix.ids.len();
    if n <= PREFIX_TAIL {
        return Ok((0, 0));
    }
    let spans = match tokenizer.encode_with_offsets(&prefix.text)? {
        Some(s) if s.ids == prefix.ids => s,
        _ => return Ok((0, 0)),
    };
    let o = &spans.offsets;
    Ok((1..=n - PREFIX_TAIL)
        .rev()
        .find(|&k| is_cut(&prefix.text, o, k))
        .map_or((0, 0), |k| (k, o[k].0)))
}

/// Can `text` be cut before token `k` of an encoding with byte `offsets`? Only where the two
/// tokens' ranges meet at a character boundary (a token holding part of a multi-byte
/// character reports the whole character, so its neighbour overlaps it).
fn is_cut(text: &str, offsets: &[(usize, usize)], k: usize) -> bool {
    let Some(&(start, _)) = offsets.get(k) else {
        return k == offsets.len();
    };
    text.is_char_boundary(start)
        && (k == 0 || (start == offsets[k - 1].1 && start > offsets[k - 1].0))
}

/// Pieces the walk is decoded and encoded in, in parallel. Fixed, so that the corpus does not
/// depend on the thread count.
const CHUNKS: usize = 8;
/// Tokens re-encoded on each side of a junction between two pieces (first try).
const JOIN: usize = 32;
/// Tokens that must agree at each end of a re-encoded junction.
const SYNC: usize = 4;

/// The text of `turn ++ extra` and its encoding with offsets, plus the byte length of the
/// turn and the number of pieces stitched. Encoded in [`CHUNKS`] pieces in parallel whose junctions are re-encoded and spliced
/// in where the local encoding agrees with both pieces; if a junction never agrees, the
/// whole text is encoded at once instead.
fn encode_walk(
    tokenizer: &Tokenizer,
    turn: &[u32],
    extra: &[u32],
) -> Result<Option<(String, TokenSpans, usize, usize)>> {
    let piece_len = turn.len().div_ceil(CHUNKS).max(1);
    let pieces: Vec<&[u32]> = turn
        .chunks(piece_len)
        .chain(std::iter::once(extra))
        .collect();
    let texts = pieces
        .par_iter()
        .map(|ids| tokenizer.decode(ids, false))
        .collect::<Result<Vec<String>, TokenizerError>>()?;
    let turn_bytes: usize = texts[..texts.len() - 1].iter().map(String::len).sum();
    let text = texts.concat();
    let encoded = texts
        .par_iter()
        .map(|t| tokenizer.encode_with_offsets(t))
        .collect::<Result<Vec<Option<TokenSpans>>, TokenizerError>>()?;
    let Some(encoded) = encoded.into_iter().collect::<Option<Vec<TokenSpans>>>() else {
        return Ok(None);
    };
    let mut joined = TokenSpans::default();
    let mut base = 0;
    for (mut piece, piece_text) in encoded.into_iter().zip(&texts) {
        for o in &mut piece.offsets {
            *o = (o.0 + base, o.1 + base);
        }
        base += piece_text.len();
        if !stitch(tokenizer, &text, &mut joined, piece)? {
            let whole = tokenizer.encode_with_offsets(&text)?;
            return Ok(whole.map(|spans| (text, spans, turn_bytes, 1)));
        }
    }
    let pieces = texts.len();
    Ok(Some((text, joined, turn_bytes, pieces)))
}

/// Appends `right` to `left` (both encodings of adjacent parts of `text`, offsets into
/// `text`), re-encoding the tokens around the junction. False if no tried junction region
/// re-encodes in agreement with both sides.
fn stitch(
    tokenizer: &Tokenizer,
    text: &str,
    left: &mut TokenSpans,
    right: TokenSpans,
) -> Result<bool> {
    if left.ids.is_empty() || right.ids.is_empty() {
        left.ids.extend(right.ids);
        left.offsets.extend(right.offsets);
        return Ok(true);
    }
    for join in [JOIN, 4 * JOIN, 16 * JOIN] {
        let Some(x) = (left.ids.len().saturating_sub(join)..left.ids.len())
            .find(|&k| is_cut(text, &left.offsets, k))
        else {
            continue;
        };
        let y = (join.min(right.ids.len())..=right.ids.len())
            .find(|&k| is_cut(text, &right.offsets, k))
            .unwrap_or(right.ids.len());
        let from = left.offsets[x].0;
        let to = right
            .offsets
            .get(y)
            .map_or(right.offsets[right.ids.len() - 1].1, |o| o.0);
        let Some(mut local) = tokenizer.encode_with_offsets(&text[from..to])? else {
            return Ok(false);
        };
        for o in &mut local.offsets {
            *o = (o.0 + from, o.1 + from);
        }
        let head = SYNC.min(left.ids.len() - x);
        let tail = SYNC.min(y);
        let agrees = local.ids.len() >= head + tail
            && local.ids[..head] == left.ids[x..x + head]
            && local.offsets[..head] == left.offsets[x..x + head]
            && local.ids[local.ids.len() - tail..] == right.ids[y - tail..y]
            && local.offsets[local.ids.len() - tail..] == right.offsets[y - tail..y];
        if agrees {
            left.ids.truncate(x);
            left.offsets.truncate(x);
            left.ids.extend(local.ids);
            left.offsets.extend(local.offsets);
            left.ids.extend_from_slice(&right.ids[y..]);
            left.offsets.extend_from_slice(&right.offsets[y..]);
            return Ok(true);
        }
    }
    Ok(false)
}
