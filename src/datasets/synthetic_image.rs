//! Synthetic JPEG images for `random-mm`, as chat content parts
//! (`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,…"}}`), built before the
//! clock and shared as [`Bytes`].
//!
//! Python draws every pixel of every image iid uniform and saves it with PIL's defaults
//! (baseline JPEG, quality 75, 4:2:0): noise, the worst case for size and decoding. Encoding
//! a thousand 1024×800 noise images that way costs seconds of CPU, so we build the same kind
//! of image differently: per size, one noise image is encoded once with a restart marker
//! after every MCU row (restart intervals are independently entropy-coded, so segments can be
//! swapped), and each image gets its own freshly drawn first MCU row (16 pixel rows) encoded
//! alone and spliced in front of the shared rest. Every image is then a valid baseline JPEG
//! of the configured size, iid noise throughout, as large and as costly to decode as
//! Python's, and unique (its bytes, hence any server-side content hash, differ in the first
//! stripe), while only one MCU row per image is encoded. Images of one size share all pixels
//! below that stripe, which a server only sees through a pixel-level cache (vLLM keys its
//! multimodal caches by content hash).
//!
//! Base64: the unique head is padded with the first 0–2 bytes of the shared tail to a
//! multiple of 3 bytes, so `b64(head) ++ b64(tail[k..])` is the base64 of the whole file;
//! the three shifted tails are encoded once per size and shared by every request.

use base64::Engine as _;
use bytes::Bytes;
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use super::media::ContentPart;

/// PIL's default JPEG quality (`Image.save(format="JPEG")`).
pub const QUALITY: u8 = 75;
/// Pixel rows of one MCU row at 4:2:0.
const MCU_ROWS: u16 = 16;
/// What every image part starts and ends with.
const PART_HEAD: &[u8] = br#"{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"#;
const PART_TAIL: &[u8] = br#""}}"#;

/// Why an image cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image size {height}x{width}: each side must be 1 to 65535 pixels")]
    Size { height: u32, width: u32 },
    #[error("JPEG encoding failed: {0}")]
    Encode(#[from] jpeg_encoder::EncodingError),
    #[error("the JPEG encoder wrote no {0}; cannot splice images")]
    Layout(&'static str),
}

fn noise(rng: &mut StdRng, width: u16, height: u16) -> Vec<u8> {
    let mut pixels = vec![0u8; usize::from(width) * usize::from(height) * 3];
    rng.fill_bytes(&mut pixels);
    pixels
}

fn encode(pixels: &[u8], width: u16, height: u16, restart: u16) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(pixels.len() / 2);
    let mut enc = Encoder::new(&mut out, QUALITY);
    enc.set_sampling_factor(SamplingFactor::F_2_2);
    enc.set_restart_interval(restart);
    enc.encode(pixels, width, height, ColorType::Rgb)?;
    Ok(out)
}

/// Where the entropy-coded data starts: just after the SOS segment.
fn scan_start(jpeg: &[u8]) -> Option<usize> {
    let sos = memchr::memmem::find(jpeg, &[0xFF, 0xDA])?;
    let len = usize::from(u16::from_be_bytes([
        *jpeg.get(sos + 2)?,
        *jpeg.get(sos + 3)?,
    ]));
    Some(sos + 2 + len)
}

fn b64(bytes: &[u8]) -> Bytes {
    Bytes::from(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The images of one `(height, width)` bucket.
#[derive(Debug)]
pub struct ImageFamily {
    width: u16,
    height: u16,
    kind: Family,
}

#[derive(Debug)]
enum Family {
    /// At most one MCU row high: every image is encoded whole.
    Small,
    Spliced {
        /// The file up to its entropy-coded data (markers, tables, frame and scan headers).
        header: Vec<u8>,
        /// From the first restart marker to the end of the file.
        tail: Vec<u8>,
        /// `b64(tail[k..])` for `k` in 0..3.
        tails_b64: [Bytes; 3],
    },
}

impl ImageFamily {
    /// Prepares the images of one size: for a size taller than one MCU row, the shared noise
    /// image encoded once (`seed` draws its pixels).
    pub fn new(height: u32, width: u32, seed: u64) -> Result<Self, ImageError> {
        let size = ImageError::Size { height, width };
        let (Ok(h), Ok(w)) = (u16::try_from(height), u16::try_from(width)) else {
            return Err(size);
        };
        if h == 0 || w == 0 {
            return Err(size);
        }
        if h <= MCU_ROWS {
            return Ok(Self {
                width: w,
                height: h,
                kind: Family::Small,
            });
        }
        let mcus_per_row = w.div_ceil(MCU_ROWS);
        let mut rng = StdRng::seed_from_u64(seed);
        let full = encode(&noise(&mut rng, w, h), w, h, mcus_per_row)?;
        let start = scan_start(&full).ok_or(ImageError::Layout("scan header"))?;
        let rst0 = memchr::memmem::find(&full[start..], &[0xFF, 0xD0])
            .ok_or(ImageError::Layout("restart marker"))?
            + start;
        let tail = full[rst0..].to_vec();
        let tails_b64 = [b64(&tail), b64(&tail[1..]), b64(&tail[2..])];
        Ok(Self {
            width: w,
            height: h,
            kind: Family::Spliced {
                header: full[..start].to_vec(),
                tail,
                tails_b64,
            },
        })
    }

    /// The image drawn from `seed` as a content part.
    pub fn image(&self, seed: u64) -> Result<ContentPart, ImageError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let (head, tail) = match &self.kind {
            Family::Small => {
                let whole = encode(
                    &noise(&mut rng, self.width, self.height),
                    self.width,
                    self.height,
                    0,
                )?;
                (b64(&whole), Bytes::new())
            }
            Family::Spliced {
                header,
                tail,
                tails_b64,
            } => {
                let stripe = noise(&mut rng, self.width, MCU_ROWS);
                let strip = encode(&stripe, self.width, MCU_ROWS, 0)?;
                let start = scan_start(&strip).ok_or(ImageError::Layout("scan header"))?;
                // The strip's only restart interval, without its EOI.
                let segment = &strip[start..strip.len() - 2];
                let mut head = Vec::with_capacity(header.len() + segment.len() + 2);
                head.extend_from_slice(header);
                head.extend_from_slice(segment);
                let k = (3 - head.len() % 3) % 3;
                head.extend_from_slice(&tail[..k]);
                (b64(&head), tails_b64[k].clone())
            }
        };
        Ok(ContentPart {
            parts: vec![
                Bytes::from_static(PART_HEAD),
                head,
                tail,
                Bytes::from_static(PART_TAIL),
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JPEG file inside a part.
    fn jpeg_of(part: &ContentPart) -> Vec<u8> {
        let json: serde_json::Value = serde_json::from_slice(&part.to_vec()).unwrap();
        assert_eq!(json["type"], "image_url");
        let url = json["image_url"]["url"].as_str().unwrap();
        let data = url.strip_prefix("data:image/jpeg;base64,").unwrap();
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap()
    }

    fn decode(jpeg: &[u8]) -> (u16, u16, Vec<u8>) {
        let mut d = jpeg_decoder::Decoder::new(jpeg);
        let pixels = d.decode().expect("decodes as JPEG");
        let info = d.info().unwrap();
        (info.width, info.height, pixels)
    }

    #[test]
    fn images_decode_as_jpeg_of_their_size_and_are_distinct() {
        for (h, w) in [(64, 48), (40, 33), (16, 16), (5, 7)] {
            let family = ImageFamily::new(h, w, 1).unwrap();
            let a = jpeg_of(&family.image(10).unwrap());
            let b = jpeg_of(&family.image(11).unwrap());
            assert_ne!(a, b, "{h}x{w}");
            for jpeg in [&a, &b] {
                assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
                let (dw, dh, pixels) = decode(jpeg);
                assert_eq!((u32::from(dh), u32::from(dw)), (h, w));
                assert_eq!(pixels.len(), (h * w * 3) as usize);
            }
            // Deterministic per seed.
            assert_eq!(jpeg_of(&family.image(10).unwrap()), a);
        }
    }

    #[test]
    fn spliced_images_differ_only_in_their_first_stripe() {
        let family = ImageFamily::new(64, 32, 3).unwrap();
        let (_, _, a) = decode(&jpeg_of(&family.image(1).unwrap()));
        let (_, _, b) = decode(&jpeg_of(&family.image(2).unwrap()));
        let row = 32 * 3;
        assert_ne!(a[..16 * row], b[..16 * row]);
        // Chroma upsampling may blend the row next to the stripe; below it all is shared.
        assert_eq!(a[18 * row..], b[18 * row..], "the rest is the shared noise");
    }

    #[test]
    fn the_tail_is_shared_not_copied() {
        let family = ImageFamily::new(48, 48, 0).unwrap();
        let parts: Vec<ContentPart> = (0..6).map(|s| family.image(s).unwrap()).collect();
        let Family::Spliced { tails_b64, .. } = &family.kind else {
            panic!("spliced");
        };
        for p in &parts {
            assert!(
                tails_b64.iter().any(|t| t.as_ptr() == p.parts[2].as_ptr()),
                "each part points into one of the family's three tails"
            );
        }
    }

    #[test]
    fn bad_sizes_are_errors() {
        assert!(ImageFamily::new(0, 5, 0).is_err());
        assert!(ImageFamily::new(70_000, 5, 0).is_err());
    }
}
