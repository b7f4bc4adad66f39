//! Prompt reconstruction: a record's token ids, and the same prompt as shared JSON parts.
//!
//! A prompt of `input_len` tokens is laid out as segments: one per hash id, `chunk` tokens
//! each, the last cut to fit; then, when the ids run out before `input_len`, a tail unique
//! to the record. Hash ids beyond `input_len` are ignored (as in Python).
//!
//! Memory: a replay must not hold every prompt. Each distinct block is serialized once as
//! the JSON fragment `,t0,t1,…,tC-1` (`bytes::Bytes`, reference counted) and a request's
//! prompt is the list of parts `[`, block fragments (the first without its leading comma,
//! a cut block as a prefix slice of its full fragment), the tail, `]`. Concatenated, the
//! parts are a JSON array of exactly `input_len` ids; sending them with vectored writes
//! costs no copy. The fragment cache (see `cache.rs`) fills lazily; a reuse plan and a byte
//! budget keep it small when prompts are assembled shortly before they are sent.

use bytes::Bytes;

use super::cache::{BlockCache, CacheStats, Fragment, Uses};
use super::record::TraceRecord;
use super::tokens::{block_seed, tail_seed, IdMap, TokenSpace};
use super::TraceError;

/// A piece of a prompt's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Segment {
    /// The first `len` tokens of block `hash_id`.
    Block { hash_id: u64, len: u32 },
    /// Tokens `start..start+len` of the record's unique tail stream.
    Tail { start: u32, len: u32 },
}

/// The segments of a record's prompt, in order.
pub(crate) fn segments(rec: &TraceRecord, chunk: u32) -> impl Iterator<Item = Segment> + '_ {
    let total = rec.input_len;
    let blocks = rec
        .hash_ids
        .iter()
        .enumerate()
        .map_while(move |(b, &hash_id)| {
            let start = u64::from(chunk) * b as u64;
            (start < u64::from(total)).then(|| Segment::Block {
                hash_id,
                len: (u64::from(total) - start).min(u64::from(chunk)) as u32,
            })
        });
    let covered = (rec.hash_ids.len() as u64 * u64::from(chunk)).min(u64::from(total)) as u32;
    let tail = (covered < total).then_some(Segment::Tail {
        start: covered,
        len: total - covered,
    });
    blocks.chain(tail)
}

/// Appends `,id` for every token (decimal, no allocation per token).
fn push_ids(out: &mut Vec<u8>, ids: impl Iterator<Item = u32>) {
    for id in ids {
        out.push(b',');
        let mut digits = [0u8; 10];
        let mut n = id;
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(&digits[i..]);
    }
}

static OPEN: Bytes = Bytes::from_static(b"[");
static CLOSE: Bytes = Bytes::from_static(b"]");

/// Rebuilds trace prompts: token ids, or shared JSON parts.
pub struct PromptBuilder {
    space: TokenSpace,
    chunk: u32,
    cache: BlockCache,
}

impl PromptBuilder {
    /// A builder for blocks of `chunk_size` tokens with an unbounded fragment cache.
    pub fn new(space: TokenSpace, chunk_size: u32) -> Result<Self, TraceError> {
        if chunk_size == 0 {
            return Err(TraceError::Option(
                "--timed-trace-chunk-hash-size 0: a block must hold at least one token \
                 (512 for Mooncake, 16 for Bailian)"
                    .into(),
            ));
        }
        Ok(Self {
            space,
            chunk: chunk_size,
            cache: BlockCache::new(),
        })
    }

    /// Bounds the fragment cache to about `bytes` (the oldest fragments are forgotten and
    /// regenerated when needed again). Fragments still referenced by assembled prompts
    /// stay alive until those are dropped.
    pub fn with_cache_budget(mut self, bytes: usize) -> Self {
        self.cache.set_budget(bytes);
        self
    }

    /// Tells the cache how often each block will be assembled for `records` (each record
    /// assembled once, in any order) and its longest use: blocks used once are never cached,
    /// a block's fragment is made once as long as its longest use, and a block is dropped
    /// from the cache after its last use. With prompts assembled shortly before
    /// sending, the cache then holds only blocks still needed later.
    pub fn with_reuse_plan(mut self, records: &[TraceRecord]) -> Self {
        let mut uses: IdMap<Uses> = IdMap::default();
        for rec in records {
            for seg in segments(rec, self.chunk) {
                if let Segment::Block { hash_id, len } = seg {
                    let u = uses.entry(hash_id).or_default();
                    u.count += 1;
                    u.longest = u.longest.max(len);
                }
            }
        }
        self.cache.set_plan(uses);
        self
    }

    /// Tokens per hash id.
    pub fn chunk_size(&self) -> u32 {
        self.chunk
    }

    /// The token ids prompts draw from.
    pub fn token_space(&self) -> &TokenSpace {
        &self.space
    }

    /// The first `len` (at most `chunk_size`) tokens of block `hash_id`.
    pub fn block_tokens(&self, hash_id: u64, len: u32) -> Vec<u32> {
        let mut out = Vec::with_capacity(len as usize);
        self.space.extend(
            block_seed(hash_id, self.chunk),
            0,
            u64::from(len.min(self.chunk)),
            &mut out,
        );
        out
    }

    /// Appends the tokens of one segment of record `index`.
    fn extend_segment(&self, seg: Segment, index: u64, out: &mut Vec<u32>) {
        match seg {
            Segment::Block { hash_id, len } => {
                self.space
                    .extend(block_seed(hash_id, self.chunk), 0, u64::from(len), out)
            }
            Segment::Tail { start, len } => {
                self.space
                    .extend(tail_seed(index), u64::from(start), u64::from(len), out)
            }
        }
    }

    /// The tokens of one segment of `rec` (used by text mode).
    pub(crate) fn segment_tokens(&self, seg: Segment, rec: &TraceRecord) -> Vec<u32> {
        let mut out = Vec::new();
        self.extend_segment(seg, rec.index, &mut out);
        out
    }

    /// The record's prompt as token ids: exactly `input_len` of them.
    pub fn prompt_ids(&self, rec: &TraceRecord) -> Vec<u32> {
        let mut out = Vec::with_capacity(rec.input_len as usize);
        for seg in segments(rec, self.chunk) {
            self.extend_segment(seg, rec.index, &mut out);
        }
        out
    }

    /// An upper bound of the bytes of a fragment of `tokens` ids (comma + widest id each).
    fn fragment_capacity(&self, tokens: u32) -> usize {
        let widest = self.space.vocab_size().max(1).ilog10() as usize + 1;
        tokens as usize * (1 + widest)
    }

    /// A fragment `,t0,…,tK-1` of block `hash_id` with at least its first `need` tokens
    /// (`need` ≤ the chunk size), from the cache: never longer than the prompts using the
    /// block need, whatever the chunk size.
    fn block_fragment(&self, hash_id: u64, need: u32) -> Fragment {
        self.cache.get_or_make(hash_id, need, |tokens| {
            let mut buf = Vec::with_capacity(self.fragment_capacity(tokens));
            let seed = block_seed(hash_id, self.chunk);
            push_ids(
                &mut buf,
                (0..u64::from(tokens)).map(|p| self.space.token(seed, p)),
            );
            // Bytes keeps the Vec's capacity: trim the upper-bound estimate.
            buf.shrink_to_fit();
            Bytes::from(buf)
        })
    }

    /// The record's prompt as parts whose concatenation is the JSON array of its
    /// `input_len` token ids (`[1,2,3]`). Block parts are shared with every other request
    /// using the block; only the unique tail is serialized per call.
    pub fn prompt_json_parts(&self, rec: &TraceRecord) -> Vec<Bytes> {
        let mut parts = Vec::with_capacity(rec.hash_ids.len().min(rec.input_len as usize) + 3);
        parts.push(OPEN.clone());
        for seg in segments(rec, self.chunk) {
            // Every fragment starts with a comma; the first part of the array drops it.
            let skip = usize::from(parts.len() == 1);
            let part = match seg {
                Segment::Block { hash_id, len } => {
                    let Fragment { bytes, tokens } = self.block_fragment(hash_id, len);
                    let end = if len == tokens {
                        bytes.len()
                    } else {
                        // The cut block ends before the comma that opens token `len`.
                        memchr::memchr_iter(b',', &bytes)
                            .nth(len as usize)
                            .unwrap_or(bytes.len())
                    };
                    bytes.slice(skip..end)
                }
                Segment::Tail { start, len } => {
                    let mut buf = Vec::with_capacity(self.fragment_capacity(len));
                    let seed = tail_seed(rec.index);
                    let positions = u64::from(start)..u64::from(start) + u64::from(len);
                    push_ids(&mut buf, positions.map(|p| self.space.token(seed, p)));
                    buf.shrink_to_fit();
                    Bytes::from(buf).slice(skip..)
                }
            };
            parts.push(part);
        }
        parts.push(CLOSE.clone());
        parts
    }

    /// Fragment cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(index: u64, input_len: u32, ids: &[u64]) -> TraceRecord {
        TraceRecord {
            index,
            line: index + 1,
            timestamp: 0.0,
            trace_time_s: 0.0,
            arrival_s: 0.0,
            input_len,
            output_len: 1,
            hash_ids: ids.into(),
            chat: None,
        }
    }

    fn builder(chunk: u32) -> PromptBuilder {
        PromptBuilder::new(TokenSpace::new(1000, &[0]).unwrap(), chunk).unwrap()
    }

    #[test]
    fn segment_layout() {
        use Segment::*;
        let seg = |r: &TraceRecord| segments(r, 4).collect::<Vec<_>>();
        assert_eq!(
            seg(&rec(0, 10, &[7, 8, 9, 10])),
            vec![
                Block { hash_id: 7, len: 4 },
                Block { hash_id: 8, len: 4 },
                Block { hash_id: 9, len: 2 }
            ]
        );
        assert_eq!(
            seg(&rec(0, 10, &[7])),
            vec![Block { hash_id: 7, len: 4 }, Tail { start: 4, len: 6 }]
        );
        assert_eq!(seg(&rec(0, 3, &[])), vec![Tail { start: 0, len: 3 }]);
        assert_eq!(seg(&rec(0, 0, &[1])), vec![]);
        assert_eq!(
            seg(&rec(0, 8, &[1, 2])),
            vec![Block { hash_id: 1, len: 4 }, Block { hash_id: 2, len: 4 }]
        );
    }

    #[test]
    fn json_parts_equal_ids() {
        let b = builder(4);
        for r in [
            rec(3, 10, &[7, 8, 9]),
            rec(4, 9, &[7]),
            rec(5, 2, &[]),
            rec(6, 0, &[]),
            rec(7, 1, &[7]),
        ] {
            let bytes: Vec<u8> = b.prompt_json_parts(&r).concat();
            let parsed: Vec<u32> = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                parsed,
                b.prompt_ids(&r),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            assert_eq!(parsed.len(), r.input_len as usize);
        }
    }

    #[test]
    fn digits_are_written_exactly() {
        let mut out = Vec::new();
        push_ids(&mut out, [0, 7, 10, 4_294_967_295].into_iter());
        assert_eq!(out, b",0,7,10,4294967295");
    }

    #[test]
    fn fragments_are_shared_and_budgeted() {
        let b = builder(4);
        let r1 = rec(0, 8, &[1, 2]);
        let r2 = rec(1, 6, &[1, 3]);
        let p1 = b.prompt_json_parts(&r1);
        let p2 = b.prompt_json_parts(&r2);
        // Same allocation for block 1 in both prompts.
        assert_eq!(p1[1].as_ptr(), p2[1].as_ptr());
        let s = b.cache_stats();
        assert_eq!((s.blocks, s.misses, s.hits), (3, 3, 1));

        // Forgotten fragments come back byte for byte.
        let ids: Vec<u64> = (0..40).collect();
        let long = rec(2, 160, &ids);
        let small = builder(4).with_cache_budget(1);
        let q1 = small.prompt_json_parts(&long);
        let q2 = small.prompt_json_parts(&long);
        assert_eq!(q1.concat(), q2.concat());
        assert_eq!(q1.concat(), b.prompt_json_parts(&long).concat());
        assert!(small.cache_stats().evictions > 0);
    }

    #[test]
    fn reuse_plan_caches_only_blocks_used_again() {
        let records = [rec(0, 8, &[1, 2]), rec(1, 8, &[1, 3]), rec(2, 6, &[1, 2])];
        let plain = builder(4);
        let b = builder(4).with_reuse_plan(&records);
        let p0 = b.prompt_json_parts(&records[0]);
        // Blocks 1 and 2 are used again, so they stay.
        assert_eq!(b.cache_stats().blocks, 2);
        let p1 = b.prompt_json_parts(&records[1]);
        assert_eq!(p0[1].as_ptr(), p1[1].as_ptr());
        assert_eq!(b.cache_stats().uncached, 1); // block 3 is used once
        let p2 = b.prompt_json_parts(&records[2]);
        let s = b.cache_stats();
        assert_eq!((s.blocks, s.bytes, s.released), (0, 0, 2));
        for (r, p) in records.iter().zip([p0, p1, p2]) {
            assert_eq!(p.concat(), plain.prompt_json_parts(r).concat());
        }
    }

    #[test]
    fn a_huge_chunk_size_serializes_only_the_tokens_prompts_use() {
        // --timed-trace-chunk-hash-size 4294967295 took 30 GB for a 16-token prompt.
        let huge = builder(u32::MAX);
        let r = rec(0, 16, &[1]);
        let bytes = huge.prompt_json_parts(&r).concat();
        let parsed: Vec<u32> = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(parsed, huge.prompt_ids(&r));
        assert!(
            huge.cache_stats().bytes <= 16 * 4,
            "{:?}",
            huge.cache_stats()
        );
        // A longer prompt on the same block still shares its first tokens.
        let longer = rec(1, 40, &[1]);
        let ids: Vec<u32> =
            serde_json::from_slice(&huge.prompt_json_parts(&longer).concat()).unwrap();
        assert_eq!(ids[..16], parsed[..]);
        assert_eq!(ids, huge.prompt_ids(&longer));
        // With a plan, each block is made once, as long as its longest use.
        let records = [rec(0, 16, &[1]), rec(1, 40, &[1])];
        let planned = builder(u32::MAX).with_reuse_plan(&records);
        for r in &records {
            assert_eq!(
                planned.prompt_json_parts(r).concat(),
                huge.prompt_json_parts(r).concat()
            );
        }
        assert_eq!(planned.cache_stats().misses, 1);
    }

    #[test]
    fn zero_chunk_is_rejected() {
        let e = PromptBuilder::new(TokenSpace::new(10, &[]).unwrap(), 0)
            .err()
            .unwrap();
        assert!(e.to_string().contains("chunk-hash-size 0"));
    }
}
