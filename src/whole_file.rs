//! Reading a file a user names whole into memory, bounded: the one reader for the files a
//! command takes whole (`merge`'s shard results, `--compare`'s and `--plot-summary`'s
//! result files, `--base-url @FILE`).
//!
//! `std::fs::read` trusts the file: on `/dev/zero` it grows until the memory limit kills
//! the process, and on a FIFO nobody writes to it blocks forever. Here the file is opened
//! without blocking (`O_NONBLOCK`: opening a FIFO for reading waits for a writer otherwise),
//! must be a regular file, and is read up to a size cap the caller chooses for what the file
//! holds; a larger file is refused with one line naming it and the cap, before its bytes are
//! held.
//!
//! At the bottom floor, beside `types`: the config (`--base-url @FILE`), the output (result
//! files) and the app (`--plot-summary`) all read files this way.

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Why a file was not read. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum WholeFileError {
    /// (The OS error is part of the message, not a `source`: it would be printed twice.)
    #[error("{}: cannot read it: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a regular file (a {kind}); give a file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{}: larger than {}, the most vllm-bench reads from such a file; is it the right file?",
        path.display(),
        size_text(*limit)
    )]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{}: not UTF-8 text (at byte {at})", path.display())]
    NotText { path: PathBuf, at: usize },
}

/// `bytes` for a reader: `1 MiB`, `1 GiB`, else bytes.
fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b => format!("{b} bytes"),
    }
}

/// What a file that is not regular is, for a message (`directory`, `FIFO`, ...).
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The bytes of the regular file at `path`, at most `limit` of them.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, WholeFileError> {
    let failed = |error| WholeFileError::Read {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(WholeFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    let too_large = || WholeFileError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    // The file may grow while it is read: never more than the cap and one byte.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, WholeFileError> {
    String::from_utf8(read(path, limit)?).map_err(|e| WholeFileError::NotText {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vllm-bench-whole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn a_file_within_the_cap_is_read_and_a_larger_one_refused_naming_both() {
        let path = temp("small.txt");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read(&path, 10).unwrap(), b"0123456789");
        assert_eq!(read_to_string(&path, 64).unwrap(), "0123456789");
        let e = read(&path, 9).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: larger than 9 bytes, the most vllm-bench reads from such a file; is it \
                 the right file?",
                path.display()
            )
        );
        std::fs::write(&path, b"\xff").unwrap();
        let e = read_to_string(&path, 9).unwrap_err().to_string();
        assert!(e.ends_with("not UTF-8 text (at byte 0)"), "{e}");
    }

    #[test]
    fn dev_zero_and_a_directory_are_refused_at_once() {
        let e = read(Path::new("/dev/zero"), 1 << 30)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/dev/zero: not a regular file (a character device); give a file"
        );
        let e = read(&std::env::temp_dir(), 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("not a regular file (a directory); give a file"),
            "{e}"
        );
    }

    /// Opening a FIFO for reading blocks until a writer comes; nobody will.
    #[test]
    fn a_fifo_without_a_writer_is_refused_without_blocking() {
        let path = temp("fifo");
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(read(&p, 1 << 20).map(drop)));
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("read a FIFO without blocking");
        let e = got.unwrap_err().to_string();
        assert!(
            e.ends_with("not a regular file (a FIFO); give a file"),
            "{e}"
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn sizes_are_said_in_the_unit_they_were_chosen_in() {
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(64 << 20), "64 MiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }
}
