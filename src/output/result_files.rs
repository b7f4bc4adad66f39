//! Where results go and the one place they are written: every file name vllm-bench derives
//! (a sweep point's, a repeated run's plot, an SLO probe's, a summary, a plot, a merged
//! result) comes from [`derived`], and every result document is written by
//! [`ResultFiles::save`], atomically.
//!
//! Names are derived from the file *name*, never the whole path: `runs.d/r` is `runs.d/r-run2`,
//! not `runs-run2.d/r`. The target is checked before the run ([`check_target`]): a result
//! that cannot be written must refuse the run, not lose its result after it. A save writes a
//! temporary file beside the target, syncs it and renames it over the target, so a full disk
//! or a killed process leaves the old file or none, never a truncated JSON; and a target
//! that is not a regular file (a FIFO would block the writer forever) is refused, not opened.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::output::json::{in_result_dir, result_path, RunInfo};
use crate::output::stdio::Console;

/// `path` with `suffix` put before the extension of its file name, and the extension
/// replaced by `extension` when given (Python's `Path.with_suffix` for plots):
/// `out/r.json` + `-run2` is `out/r-run2.json`; with `Some("timeline.html")`,
/// `out/r.timeline.html`. A name without an extension (or a dot file, `.json`) takes the
/// suffix at its end.
pub fn derived(path: &Path, suffix: &str, extension: Option<&str>) -> PathBuf {
    let name = path.file_name().unwrap_or_default();
    let name = Path::new(name);
    let stem = name.file_stem().unwrap_or_default().to_string_lossy();
    let ext = extension
        .map(str::to_string)
        .or_else(|| name.extension().map(|e| e.to_string_lossy().into_owned()));
    let file = match ext {
        Some(ext) => format!("{stem}{suffix}.{ext}"),
        None => format!("{stem}{suffix}"),
    };
    path.with_file_name(file)
}

/// Where the results of one invocation go: `--result-dir` and `--result-filename`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultFiles {
    pub dir: Option<PathBuf>,
    pub filename: Option<String>,
}

impl ResultFiles {
    /// A run's result: `--result-filename` (with `suffix`, a sweep point's) or Python's
    /// default name from the run's facts (with `default_suffix`, a repeated SLO probe's,
    /// whose default name would be the same), in `--result-dir`.
    pub fn result(
        &self,
        info: &RunInfo,
        suffix: Option<&str>,
        default_suffix: Option<&str>,
    ) -> PathBuf {
        let path = result_path(info, self.filename.as_deref(), self.dir.as_deref());
        let suffix = match self.filename {
            Some(_) => suffix,
            None => default_suffix,
        };
        match suffix {
            Some(s) => derived(&path, s, None),
            None => path,
        }
    }

    /// A summary of several runs (`kind`: `sweep-summary`, `runs-summary`,
    /// `slo-search-summary`): beside the results, named after `--result-filename` when
    /// given, else `{kind}-{date}.json`.
    pub fn summary(&self, kind: &str, date: &str) -> PathBuf {
        match self.filename.as_deref() {
            Some(name) => derived(
                &in_result_dir(name, self.dir.as_deref()),
                &format!("-{kind}"),
                None,
            ),
            None => in_result_dir(&format!("{kind}-{date}.json"), self.dir.as_deref()),
        }
    }

    /// Writes `text` to `path` (a path this value named) and says so on stderr
    /// (`Saved the {what} to {path}`): the one place a result document is written.
    /// `append` adds it as a line of a JSON-lines file (`--append-result`).
    pub fn save(
        &self,
        path: &Path,
        text: &str,
        append: bool,
        what: &str,
        console: &Console,
    ) -> anyhow::Result<()> {
        if let Some(dir) = &self.dir {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "--result-dir {}: cannot create the directory",
                    dir.display()
                )
            })?;
        }
        save_result(path, text, append)
            .with_context(|| format!("cannot write the result file {}", path.display()))?;
        console.err_line(format_args!("Saved the {what} to {}", path.display()));
        Ok(())
    }
}

/// Why a result file cannot go where it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "cannot save the result to {}: it names a directory, not a file; fix --result-filename",
        .0.display()
    )]
    NotAFileName(PathBuf),
    #[error(
        "cannot save the result to {}: it is a symbolic link to nothing; remove it or fix \
         --result-filename",
        .0.display()
    )]
    DanglingLink(PathBuf),
    #[error(
        "cannot save the result to {}: it is a {kind}, not a regular file; fix \
         --result-filename",
        path.display()
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "cannot save the result to {}: it is one of the files read ({input}); pick another \
         --result-filename",
        path.display()
    )]
    IsInput { path: PathBuf, input: String },
}

/// Checks a result file's path itself: it has a file name (not `sub/`, `.` or `..`), and
/// what is there, if anything, is a regular file or a link to one.
pub fn check_file(path: &Path) -> Result<(), TargetError> {
    let text = path.as_os_str().as_encoded_bytes();
    let named = !text.ends_with(b"/") && path.file_name().is_some_and(|n| n != "." && n != "..");
    if !named {
        return Err(TargetError::NotAFileName(path.to_path_buf()));
    }
    let Ok(link) = std::fs::symlink_metadata(path) else {
        return Ok(()); // nothing there yet
    };
    let meta = match link.file_type().is_symlink() {
        true => std::fs::metadata(path).map_err(|_| TargetError::DanglingLink(path.into()))?,
        false => link,
    };
    if meta.is_file() {
        return Ok(());
    }
    Err(TargetError::NotRegular {
        path: path.to_path_buf(),
        kind: crate::whole_file::kind_of(meta.file_type()),
    })
}

/// Refuses a result `path` that is one of `inputs` (the same file, by device and inode:
/// `merge ... --result-filename k0.json` would overwrite the shard it reads).
pub fn check_not_input(path: &Path, inputs: &[PathBuf]) -> Result<(), TargetError> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(target) = std::fs::metadata(path) else {
        return Ok(());
    };
    for input in inputs {
        if let Ok(m) = std::fs::metadata(input) {
            if (m.dev(), m.ino()) == (target.dev(), target.ino()) {
                return Err(TargetError::IsInput {
                    path: path.to_path_buf(),
                    input: input.display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Checks, before any request is sent, that the result can be written where it will go:
/// the result directory is created (as Python does at save time) and must be a writable
/// directory; `--result-filename`, when given, must name a file ([`check_file`]) in a
/// writable directory (and be writable, for `--append-result`). Without `--result-filename`
/// the name holds the date, known only after the run, so the directory is checked.
pub fn check_target(
    result_dir: Option<&Path>,
    result_filename: Option<&str>,
    append: bool,
) -> anyhow::Result<()> {
    if let Some(dir) = result_dir {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "--result-dir {}: cannot create the directory; pick another --result-dir",
                dir.display()
            )
        })?;
    }
    let file = result_filename.map(|name| in_result_dir(name, result_dir));
    if let Some(f) = &file {
        check_file(f)?;
    }
    let dir = match &file {
        Some(f) => f.parent().map(Path::to_path_buf).unwrap_or_default(),
        None => result_dir.map(Path::to_path_buf).unwrap_or_default(),
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "cannot save the result in {}: not a directory; fix --result-dir/--result-filename",
            dir.display()
        );
    }
    if !dir_writable(&dir) {
        anyhow::bail!(
            "cannot save the result in {}: the directory is not writable; fix \
             --result-dir/--result-filename",
            dir.display()
        );
    }
    if let Some(f) = file.filter(|f| f.exists()) {
        if append && std::fs::OpenOptions::new().append(true).open(&f).is_err() {
            anyhow::bail!(
                "cannot append the result to {}: the file is not writable",
                f.display()
            );
        }
    }
    Ok(())
}

/// Whether a new file can be created in `dir`, found by creating one: `access(W_OK)` answers
/// from the mode bits, which say "yes" on a read-only bind mount, to root on `/proc` or
/// `/sys`, or past an ACL that denies. The probe is created exclusively under a name of its
/// own (another process's file is never touched) and removed at once.
fn dir_writable(dir: &Path) -> bool {
    for attempt in 0..8u32 {
        let probe = dir.join(format!(
            ".vllm-bench-write-probe-{}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                return true;
            }
            // A left-over probe of a dead process with our pid: try the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return false,
        }
    }
    false
}

/// Writes `text` to `path` like Python (the whole file; with `append`, a new line of a
/// JSON-lines file: a `\n` first when the file is not empty, never a trailing newline),
/// but atomically: into a temporary file beside it, synced, then renamed over it. A link
/// is followed (the file it names is replaced); a target that is not a regular file is
/// refused without being opened.
fn save_result(path: &Path, text: &str, append: bool) -> anyhow::Result<()> {
    replace_atomically(path, |file, target, existing| {
        if let Some(meta) = existing {
            if append && meta.len() > 0 {
                let mut old = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(target)?;
                std::io::copy(&mut old, file)?;
                file.write_all(b"\n")?;
            }
        }
        file.write_all(text.as_bytes())
    })
}

/// A file other than a result document (`--export-requests`), written by `write` as it goes
/// (streamed, not held whole), atomically like a result ([`save_result`]).
pub fn save_streamed(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    replace_atomically(path, |file, _, _| write(file))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Checks, before the run, that a file `flag` names (not the result) can be written:
/// [`check_file`]'s rules, in a directory that exists and is writable; the error names `flag`.
pub fn check_other_target(path: &Path, flag: &str) -> anyhow::Result<()> {
    let shown = path.display();
    check_file(path).map_err(|e| {
        let why = match e {
            TargetError::NotAFileName(_) => "it names a directory, not a file".to_string(),
            TargetError::DanglingLink(_) => "it is a symbolic link to nothing".to_string(),
            TargetError::NotRegular { kind, .. } => format!("it is a {kind}, not a regular file"),
            TargetError::IsInput { input, .. } => format!("it is one of the files read ({input})"),
        };
        anyhow::anyhow!("{flag} {shown}: cannot write there: {why}; pick another file")
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {shown}: {} is not a directory; pick another file",
            dir.display()
        );
    }
    if !dir_writable(dir) {
        anyhow::bail!(
            "{flag} {shown}: the directory {} is not writable; pick another file",
            dir.display()
        );
    }
    Ok(())
}

/// Replaces `path` with what `write` puts in a temporary file beside it (with the old
/// file's permissions), synced, then renamed over it: a full disk or a killed process
/// leaves the old file or none, never a truncated one. A link is followed (the file it
/// names is replaced); a target that is not a regular file is refused without being opened.
fn replace_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File, &Path, Option<&std::fs::Metadata>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    check_file(path)?;
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let existing = std::fs::metadata(&target).ok();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let (temp, mut file) = temp_file(&dir, &name)?;
    let written = (|| -> std::io::Result<()> {
        if let Some(meta) = &existing {
            file.set_permissions(meta.permissions())?;
        }
        write(&mut file, &target, existing.as_ref())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e.into());
    }
    // The rename itself, on disk (best effort: some file systems refuse a directory sync).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new temporary file in `dir` for the result `name`, created exclusively.
fn temp_file(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut attempt = 0u32;
    loop {
        let temp = dir.join(format!(
            ".{name}.vllm-bench-{}-{attempt}.tmp",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(f) => return Ok((temp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 64 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "vllm-bench-result-files-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Saves through the one writer, as every caller does.
    fn write(path: &Path, text: &str, append: bool) -> anyhow::Result<()> {
        let (console, _) = Console::capture();
        ResultFiles::default().save(path, text, append, "result", &console)
    }

    fn d(path: &str, suffix: &str, ext: Option<&str>) -> String {
        derived(Path::new(path), suffix, ext).display().to_string()
    }

    #[test]
    fn a_sweep_points_name_takes_its_suffix_before_the_extension() {
        assert_eq!(
            d("r.json", "-max_concurrency8", None),
            "r-max_concurrency8.json"
        );
        assert_eq!(
            d("out/r.json", "-request_rate2.5", None),
            "out/r-request_rate2.5.json"
        );
    }

    #[test]
    fn a_directory_with_a_dot_keeps_its_name() {
        assert_eq!(d("runs.d/r", "-run2", None), "runs.d/r-run2");
        assert_eq!(d("runs.d/r.json", "-run2", None), "runs.d/r-run2.json");
        assert_eq!(
            d("./a.b/c", "-sweep-summary", None),
            "./a.b/c-sweep-summary"
        );
        assert_eq!(
            d("/x.y/z.json", "", Some("timeline.html")),
            "/x.y/z.timeline.html"
        );
    }

    #[test]
    fn a_repeated_runs_plot_and_a_summarys_page() {
        assert_eq!(d("r.json", "-run3", Some("html")), "r-run3.html");
        assert_eq!(
            d("out/slo-search-summary-20261203.json", "", Some("html")),
            "out/slo-search-summary-20261203.html"
        );
    }

    #[test]
    fn names_without_an_extension_and_dot_files_take_the_suffix_at_the_end() {
        assert_eq!(d("result", "-run2", None), "result-run2");
        assert_eq!(d(".json", "-run2", None), ".json-run2");
        assert_eq!(
            d("r", "", Some("dataset_stats.html")),
            "r.dataset_stats.html"
        );
    }

    #[test]
    fn summaries_and_results_are_named_in_the_result_dir() {
        let files = ResultFiles {
            dir: Some("out.d".into()),
            filename: Some("r.json".into()),
        };
        assert_eq!(
            files.summary("sweep-summary", "D"),
            PathBuf::from("out.d/r-sweep-summary.json")
        );
        let plain = ResultFiles {
            dir: Some("out.d".into()),
            filename: None,
        };
        assert_eq!(
            plain.summary("runs-summary", "20261203-101010"),
            PathBuf::from("out.d/runs-summary-20261203-101010.json")
        );
        let info = RunInfo {
            date: "20261130-084051".into(),
            backend: "vllm".into(),
            label: None,
            model_id: "org/m".into(),
            tokenizer_id: None,
            num_prompts: 3,
            metadata: vec![],
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up: None,
        };
        assert_eq!(
            plain.result(&info, Some("-x"), Some("-run2")),
            PathBuf::from("out.d/vllm-infqps-m-20261130-084051-run2.json")
        );
        assert_eq!(
            files.result(&info, Some("-max_concurrency4"), Some("-run2")),
            PathBuf::from("out.d/r-max_concurrency4.json")
        );
    }

    #[test]
    fn a_name_that_is_a_directory_or_a_dangling_link_or_a_fifo_is_refused() {
        let dir = temp_dir("targets");
        let e = check_target(Some(&dir), Some("sub/"), false).unwrap_err();
        assert!(
            format!("{e}").contains("it names a directory, not a file"),
            "{e}"
        );
        std::fs::create_dir(dir.join("sub")).unwrap();
        let e = check_target(Some(&dir), Some("sub"), false).unwrap_err();
        assert!(
            format!("{e}").contains("it is a directory, not a regular file"),
            "{e}"
        );
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
        let e = check_target(Some(&dir), Some("dangling"), false).unwrap_err();
        assert!(format!("{e}").contains("a symbolic link to nothing"), "{e}");
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a valid NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = check_target(Some(&dir), Some("fifo"), false).unwrap_err();
        assert!(
            format!("{e}").contains("it is a FIFO, not a regular file"),
            "{e}"
        );
        // The writer refuses it too, without opening it (which would block).
        let e = write(&dir.join("fifo"), "{}", false).unwrap_err();
        assert!(format!("{e:#}").contains("FIFO"), "{e}");
        check_target(Some(&dir), Some("fine.json"), false).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn save_and_append_as_json_lines_leave_no_temporary_file() {
        let dir = temp_dir("save");
        let path = dir.join("r.json");
        write(&path, "{\"a\": 1}", true).unwrap();
        write(&path, "{\"a\": 2}", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\": 1}\n{\"a\": 2}"
        );
        write(&path, "{}", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
        // Through a link: the file it names is replaced, the link kept.
        std::os::unix::fs::symlink(&path, dir.join("link.json")).unwrap();
        write(&dir.join("link.json"), "{\"b\": 1}", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"b\": 1}");
        assert!(std::fs::symlink_metadata(dir.join("link.json"))
            .unwrap()
            .file_type()
            .is_symlink());
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        let err = write(Path::new("/nonexistent-dir/x/r.json"), "{}", false).unwrap_err();
        assert!(format!("{err:#}").contains("No such file"), "{err:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_merged_result_may_not_be_one_of_its_inputs() {
        let dir = temp_dir("inputs");
        let k0 = dir.join("k0.json");
        std::fs::write(&k0, "{}").unwrap();
        let e = check_not_input(&dir.join("./k0.json"), std::slice::from_ref(&k0)).unwrap_err();
        assert!(e.to_string().contains("it is one of the files read"), "{e}");
        check_not_input(&dir.join("m.json"), &[k0]).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `access(W_OK)` says yes to root for `/proc`, where no file can be created: the
    /// check must ask the directory itself, before the run, not after it.
    #[test]
    fn a_directory_that_refuses_new_files_is_refused_before_the_run() {
        let err = check_target(Some(Path::new("/proc")), None, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot save the result in /proc: the directory is not writable; fix \
             --result-dir/--result-filename"
        );
    }

    #[test]
    fn a_writable_result_dir_passes_and_keeps_no_probe_file() {
        let dir = temp_dir("probe");
        check_target(Some(&dir), None, false).unwrap();
        std::fs::write(dir.join("r.json"), "{}").unwrap();
        check_target(Some(&dir), Some("r.json"), true).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["r.json"], "only the result file is left");
        assert_eq!(std::fs::read_to_string(dir.join("r.json")).unwrap(), "{}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
