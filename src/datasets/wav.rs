//! WAV files for `custom_audio`: read once before the clock, checked, and rewritten the way
//! Python's `openai-audio` sends them. Python decodes the file with soundfile and re-encodes
//! it as a 16-bit PCM WAV (`soundfile.write(buf, y, sr, format="WAV")`), so what reaches the
//! server is a canonical 44-byte-header PCM16 file whatever the source's header held; the
//! audio's duration (`soundfile.info(f).duration`) feeds `rtfx`. 16-bit PCM sources only:
//! their samples survive that round trip unchanged, so we send them as they are.

use bytes::Bytes;

/// Why a file is not a usable WAV.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WavError {
    #[error("not a RIFF/WAVE file")]
    NotWav,
    #[error("no {0} chunk")]
    Missing(&'static str),
    #[error(
        "{format} with {bits} bits per sample: only 16-bit PCM WAV is supported (convert it, \
         e.g. `ffmpeg -i in.wav -c:a pcm_s16le out.wav`)"
    )]
    Unsupported { format: u16, bits: u16 },
    #[error("malformed fmt chunk (channels {channels}, rate {rate})")]
    BadFormat { channels: u16, rate: u32 },
}

/// One audio clip as sent: the canonical WAV bytes (shared by every request that sends it)
/// and its duration.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioClip {
    pub wav: Bytes,
    pub duration_s: f64,
}

/// Why one of `custom_audio`'s files cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    #[error("custom_audio: {file}")]
    Read {
        file: String,
        #[source]
        error: std::io::Error,
    },
    #[error("custom_audio: {file}")]
    Parse {
        file: String,
        #[source]
        error: WavError,
    },
}

/// The clip of each of `files` (one per request, in order): every distinct file read and
/// checked once, in parallel (Python reads them before the run too).
pub fn clips(files: &[&str]) -> Result<Vec<AudioClip>, ClipError> {
    use rayon::prelude::*;
    let mut distinct = files.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let read: std::collections::HashMap<&str, AudioClip> = distinct
        .par_iter()
        .map(|&f| {
            let file = || f.to_owned();
            let bytes = std::fs::read(f).map_err(|error| ClipError::Read {
                file: file(),
                error,
            })?;
            let clip = parse(&bytes).map_err(|error| ClipError::Parse {
                file: file(),
                error,
            })?;
            Ok((f, clip))
        })
        .collect::<Result<_, ClipError>>()?;
    Ok(files.iter().map(|f| read[f].clone()).collect())
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A canonical PCM16 WAV of `pcm` (little-endian samples, interleaved).
pub fn pcm16_wav(channels: u16, rate: u32, pcm: &[u8]) -> Vec<u8> {
    let block = channels * 2;
    let mut out = Vec::with_capacity(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * u32::from(block)).to_le_bytes());
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

/// Reads a WAV file's bytes into the clip Python would send.
pub fn parse(file: &[u8]) -> Result<AudioClip, WavError> {
    if file.get(..4) != Some(b"RIFF") || file.get(8..12) != Some(b"WAVE") {
        return Err(WavError::NotWav);
    }
    let (mut fmt, mut data) = (None, None);
    let mut at = 12;
    while let (Some(id), Some(len)) = (file.get(at..at + 4), u32_at(file, at + 4)) {
        let body = at + 8;
        let end = body.saturating_add(len as usize).min(file.len());
        match id {
            b"fmt " => fmt = Some(body),
            b"data" => data = Some(&file[body..end]),
            _ => {}
        }
        // Chunks are padded to an even size.
        at = body.saturating_add(len as usize + (len as usize & 1));
    }
    let fmt = fmt.ok_or(WavError::Missing("fmt "))?;
    let data = data.ok_or(WavError::Missing("data"))?;
    let field = |off| u16_at(file, fmt + off).ok_or(WavError::Missing("complete fmt "));
    let mut format = field(0)?;
    let channels = field(2)?;
    let rate = u32_at(file, fmt + 4).ok_or(WavError::Missing("complete fmt "))?;
    let bits = field(14)?;
    if format == 0xFFFE {
        // WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes name the codec.
        format = field(24)?;
    }
    if format != 1 || bits != 16 {
        return Err(WavError::Unsupported { format, bits });
    }
    if channels == 0 || rate == 0 {
        return Err(WavError::BadFormat { channels, rate });
    }
    let frame = usize::from(channels) * 2;
    let pcm = &data[..data.len() - data.len() % frame];
    Ok(AudioClip {
        duration_s: (pcm.len() / frame) as f64 / f64::from(rate),
        wav: Bytes::from(pcm16_wav(channels, rate, pcm)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_gets_its_files_clip_and_a_bad_file_is_named() {
        let dir = std::env::temp_dir().join(format!("vllm-bench-clips-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.wav"), dir.join("b.wav"));
        // One second of mono 16-bit silence at 8 kHz, and half a second.
        std::fs::write(&a, pcm16_wav(1, 8000, &[0; 16000])).unwrap();
        std::fs::write(&b, pcm16_wav(1, 8000, &[0; 8000])).unwrap();
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        let got = clips(&[a, b, a]).unwrap();
        let secs: Vec<f64> = got.iter().map(|c| c.duration_s).collect();
        assert_eq!(secs, [1.0, 0.5, 1.0]);
        let missing = dir.join("missing.wav");
        let e = clips(&[a, missing.to_str().unwrap()]).unwrap_err();
        assert!(matches!(e, ClipError::Read { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("custom_audio: {}", missing.display())
        );
        std::fs::write(dir.join("bad.wav"), b"not a wav").unwrap();
        let bad = dir.join("bad.wav");
        let e = clips(&[bad.to_str().unwrap()]).unwrap_err();
        assert!(
            matches!(
                e,
                ClipError::Parse {
                    error: WavError::NotWav,
                    ..
                }
            ),
            "{e:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `frames` mono PCM16 samples of a saw wave.
    fn tone(frames: usize) -> Vec<u8> {
        (0..frames)
            .flat_map(|i| (((i % 100) as i16 - 50) * 300).to_le_bytes())
            .collect()
    }

    #[test]
    fn a_pcm16_file_round_trips_with_its_duration() {
        let pcm = tone(8_000);
        let file = pcm16_wav(1, 16_000, &pcm);
        let clip = parse(&file).unwrap();
        assert_eq!(clip.duration_s, 0.5);
        assert_eq!(&clip.wav[..], &file[..], "already canonical");
    }

    #[test]
    fn extra_chunks_are_dropped_and_stereo_counts_frames() {
        let pcm = tone(4_000);
        let canonical = pcm16_wav(2, 8_000, &pcm);
        // The same file with a LIST chunk (odd length, padded) before the data.
        let mut file = canonical[..36].to_vec();
        file.extend_from_slice(b"LIST\x03\x00\x00\x00abc\x00");
        file.extend_from_slice(&canonical[36..]);
        let clip = parse(&file).unwrap();
        assert_eq!(&clip.wav[..], &canonical[..]);
        assert_eq!(
            clip.duration_s, 0.25,
            "8000 bytes of stereo PCM16: 2000 frames at 8 kHz"
        );
    }

    #[test]
    fn other_files_are_refused_with_the_reason() {
        assert_eq!(parse(b"hello world!").unwrap_err(), WavError::NotWav);
        let mut float = pcm16_wav(1, 8_000, &[0; 8]);
        float[20] = 3; // IEEE float
        float[34] = 32;
        let e = parse(&float).unwrap_err();
        assert!(e.to_string().contains("only 16-bit PCM"), "{e}");
        let no_data = &pcm16_wav(1, 8_000, &[])[..36];
        assert_eq!(parse(no_data).unwrap_err(), WavError::Missing("data"));
    }
}
