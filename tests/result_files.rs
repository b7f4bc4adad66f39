//! Where results go and what is read back (issue 36, items 11 and 12): a result target that
//! cannot hold the result refuses the run before it sends anything; a result that cannot be
//! written whole leaves no truncated file; every file read whole is bounded (a size cap,
//! regular files only), and so is a shard file's histogram. The memory cases run the binary
//! under an address-space limit (`RLIMIT_AS`): unbounded, they would grow to it and die.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;

use crate::e2e::{assert_refusal, mock};
use crate::util::{mock_random_args, run_command, run_in_process, Run, TempDir};

/// Address space for a child that must not grow: far above what a refusal takes (the
/// binary, its libraries and a few threads), far below what the unbounded cases took.
const AS_LIMIT: u64 = 1 << 30;

/// The binary with `args` in `cwd` under `RLIMIT_AS` = [`AS_LIMIT`] and, when given,
/// `RLIMIT_FSIZE` = `fsize` bytes (with `SIGXFSZ` ignored, so a write past it fails with
/// `EFBIG` as on a full disk instead of killing the process).
fn limited(args: &[&str], cwd: &Path, fsize: Option<u64>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vllm-bench"));
    cmd.args(args).current_dir(cwd).env("HF_HUB_OFFLINE", "1");
    // SAFETY: between fork and exec only async-signal-safe calls (setrlimit, signal) run.
    unsafe {
        cmd.pre_exec(move || {
            let set = |resource, bytes: u64| {
                let lim = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                match libc::setrlimit(resource, &lim) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            };
            set(libc::RLIMIT_AS, AS_LIMIT)?;
            if let Some(bytes) = fsize {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                set(libc::RLIMIT_FSIZE, bytes)?;
            }
            Ok(())
        });
    }
    run_command(cmd, &format!("vllm-bench {args:?} (limited)"))
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The run of `extra` against a mock, saving into `dir`; the mock must see no request.
fn refused_before_the_run(dir: &TempDir, extra: &[&str], needle: &str) {
    let server = mock(|_| {});
    let mut args = mock_random_args(&server.base_url());
    args.extend(
        [
            "--num-prompts",
            "3",
            "--save-result",
            "--result-dir",
            dir.arg(),
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_refusal(run_in_process(&argv), &argv, needle);
    assert_eq!(
        server.stats().model_requests,
        0,
        "{extra:?}: sent before refusing"
    );
}

#[test]
fn a_dangling_symlink_as_the_result_file_refuses_the_run() {
    let dir = TempDir::new("result-dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("r.json")).unwrap();
    refused_before_the_run(
        &dir,
        &["--result-filename", "r.json"],
        "is a symbolic link to nothing",
    );
}

#[test]
fn a_result_filename_naming_a_directory_refuses_the_run() {
    let dir = TempDir::new("result-subdir");
    refused_before_the_run(
        &dir,
        &["--result-filename", "sub/"],
        "it names a directory, not a file",
    );
}

#[test]
fn a_fifo_as_the_result_file_refuses_the_run_instead_of_hanging_after_it() {
    let dir = TempDir::new("result-fifo");
    mkfifo(&dir.path().join("r.json"));
    refused_before_the_run(
        &dir,
        &["--result-filename", "r.json"],
        "it is a FIFO, not a regular file",
    );
}

#[test]
fn a_label_no_file_name_can_hold_refuses_the_run_and_writes_nothing_outside_the_result_dir() {
    let root = TempDir::new("result-label");
    let dir = root.path().join("a/b/c");
    std::fs::create_dir_all(&dir).unwrap();
    let long = "x".repeat(300);
    for (label, needle) in [
        (long.as_str(), "the label is 300 bytes"),
        ("a/b", "cannot hold '/'"),
        ("../../../x", "cannot hold '/'"),
    ] {
        let sub = TempDir::new("result-label-run");
        refused_before_the_run(&sub, &["--label", label], needle);
    }
    let server = mock(|_| {});
    let mut args = mock_random_args(&server.base_url());
    let flags = [
        "--num-prompts",
        "2",
        "--save-result",
        "--label",
        "../../../x",
    ];
    args.extend(flags.map(String::from));
    args.extend(["--result-dir".to_string(), dir.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(run_in_process(&argv).code, 2);
    let outside: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "a")
        .collect();
    assert!(
        outside.is_empty(),
        "written outside --result-dir: {outside:?}"
    );
}

/// A shard result of a small `--shard 0/1` run, written into `dir` as `name`.
fn shard_file(dir: &TempDir, name: &str) -> std::path::PathBuf {
    let server = mock(|_| {});
    let mut args = mock_random_args(&server.base_url());
    let flags = [
        "--num-prompts",
        "6",
        "--disable-tqdm",
        "--save-result",
        "--shard",
        "0/1",
    ];
    args.extend(flags.map(String::from));
    args.extend(["--result-dir", dir.arg(), "--result-filename", name].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    assert_eq!(run.code, 0, "{}", run.stderr);
    dir.path().join(name)
}

/// A full disk (here: a file-size limit) leaves the old result whole and no temporary file.
#[test]
fn a_result_that_cannot_be_written_whole_leaves_the_old_file_and_no_truncated_one() {
    let dir = TempDir::new("result-full");
    let k0 = shard_file(&dir, "k0.json");
    std::fs::write(dir.path().join("m.json"), "{\"old\": 1}").unwrap();
    let args = [
        "merge",
        k0.to_str().expect("utf-8 path"),
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "m.json",
    ];
    let run = limited(&args, dir.path(), Some(4096));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot write the merged result") && run.stderr.contains("m.json"),
        "{}",
        run.stderr
    );
    let old = std::fs::read_to_string(dir.path().join("m.json")).unwrap();
    assert_eq!(old, "{\"old\": 1}", "the old result is untouched");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Without the limit the same merge writes it whole.
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(doc["completed"], 6);
}

#[test]
fn merge_refuses_to_overwrite_the_shard_it_reads() {
    let dir = TempDir::new("result-merge-input");
    let k0 = shard_file(&dir, "k0.json");
    let before = std::fs::read(&k0).unwrap();
    let args = [
        "merge",
        k0.to_str().expect("utf-8 path"),
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "k0.json",
    ];
    assert_refusal(run_in_process(&args), &args, "it is one of the files read");
    assert_eq!(std::fs::read(&k0).unwrap(), before);
}

/// `/dev/zero` grew to the memory limit, a FIFO blocked forever: each reader refuses them
/// at once, under a memory limit.
#[test]
fn files_read_whole_refuse_dev_zero_and_fifos_without_growing_or_blocking() {
    let dir = TempDir::new("result-reads");
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    let c16 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare/c16.json");
    let c16 = c16.to_str().unwrap();
    for file in ["/dev/zero", fifo] {
        let at = format!("@{file}");
        for args in [
            vec!["merge", file],
            vec!["--compare", file, c16],
            vec!["--plot-summary", file],
            vec!["--base-url", at.as_str(), "--dry-run", "--model", "m"],
        ] {
            let run = limited(&args, dir.path(), None);
            assert_refusal(run, &args, "not a regular file");
        }
    }
}

/// A file larger than the cap is refused by its size, before a byte of it is held.
#[test]
fn a_shard_file_larger_than_the_cap_is_refused_by_its_size() {
    let dir = TempDir::new("result-huge");
    let huge = dir.path().join("huge.json");
    // Sparse: 5 GiB that take no disk.
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(5 << 30)
        .unwrap();
    let args = ["merge", "huge.json"];
    let run = limited(&args, dir.path(), None);
    assert_refusal(run, &args, "larger than 4 GiB, the most vllm-bench reads");
}

/// `k0`'s first histogram replaced by `plain` (a V2 encoding) deflated.
fn with_histogram(k0: &Path, plain: &[u8], out: &Path) {
    use std::io::Write as _;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(plain).unwrap();
    let deflated = z.finish().unwrap();
    let mut bytes = 0x1c84_9314u32.to_be_bytes().to_vec();
    bytes.extend((deflated.len() as u32).to_be_bytes());
    bytes.extend(deflated);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(k0).unwrap()).unwrap();
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    doc["vllm_bench_shard"]["histograms"][0][0] = Value::from(text);
    std::fs::write(out, doc.to_string()).unwrap();
}

/// A V2 header (HdrHistogram's plain encoding): payload length, digits, bounds.
fn v2_header(payload: u32, digits: u32, low: u64, high: u64) -> Vec<u8> {
    let mut h = 0x1c84_9313u32.to_be_bytes().to_vec();
    h.extend(payload.to_be_bytes());
    h.extend(0u32.to_be_bytes());
    h.extend(digits.to_be_bytes());
    h.extend(low.to_be_bytes());
    h.extend(high.to_be_bytes());
    h.extend(1.0f64.to_be_bytes());
    h
}

/// A tampered histogram aborted allocating 2 GB; a 1.4 MB deflate bomb took 1 GB.
#[test]
fn a_tampered_histogram_or_a_deflate_bomb_in_a_shard_file_is_refused_in_bounded_memory() {
    let dir = TempDir::new("result-histograms");
    let k0 = shard_file(&dir, "k0.json");
    // Bounds of 1..2^62 ns at 5 digits: counts of gigabytes.
    with_histogram(
        &k0,
        &v2_header(0, 5, 1, 1 << 62),
        &dir.path().join("wide.json"),
    );
    // The engine's own bounds but a payload of 4 GB of zeros, deflated to a few MB.
    let mut bomb = v2_header(u32::MAX, 3, 1, 3_600_000_000_000);
    bomb.resize(bomb.len() + (64 << 20), 0);
    with_histogram(&k0, &bomb, &dir.path().join("bomb.json"));
    assert!(
        std::fs::metadata(dir.path().join("bomb.json"))
            .unwrap()
            .len()
            < 4 << 20
    );
    for (file, needle) in [
        (
            "wide.json",
            "a histogram covers 1..4611686018427387904 ns at 5 significant digits",
        ),
        ("bomb.json", "a histogram inflates to more than"),
    ] {
        let args = ["merge", file, "--result-filename", "m.json"];
        let run = limited(&args, dir.path(), None);
        assert_refusal(run, &args, needle);
    }
}
