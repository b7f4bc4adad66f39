//! The committed fuzz corpus (`fuzz/corpus/<target>/`, minimized with `cargo fuzz cmin`)
//! replayed through the fuzz targets' own bodies (`fuzz/src/lib.rs`, included here) on the
//! stable toolchain, so the normal test run catches a parser change that makes one of these
//! inputs panic or breaks a property a target asserts, without nightly or libFuzzer.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../fuzz/src/lib.rs"]
mod harness;

/// The corpus stays small enough to commit and to replay in a moment.
const MAX_FILES_PER_TARGET: usize = 48;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_through_its_target() {
    let mut broken = Vec::new();
    for (name, target) in harness::TARGETS {
        let inputs = files(&corpus_dir().join(name));
        assert!(!inputs.is_empty(), "{name}: no corpus");
        assert!(
            inputs.len() <= MAX_FILES_PER_TARGET,
            "{name}: {} corpus files; minimize with `cargo fuzz cmin {name}`",
            inputs.len()
        );
        for input in inputs {
            let data = std::fs::read(&input).expect("read a corpus file");
            if catch_unwind(AssertUnwindSafe(|| target(&data))).is_err() {
                broken.push(input.display().to_string());
            }
        }
    }
    assert!(
        broken.is_empty(),
        "inputs that fail their target:\n{}",
        broken.join("\n")
    );
}

/// Every corpus directory belongs to a target, and every target is a fuzz binary.
#[test]
fn corpus_directories_and_fuzz_binaries_match_the_targets() {
    let names: Vec<&str> = harness::TARGETS.iter().map(|(n, _)| *n).collect();
    for dir in std::fs::read_dir(corpus_dir()).expect("fuzz/corpus") {
        let dir = dir.expect("corpus dir").file_name();
        let dir = dir.to_str().expect("utf-8 name");
        assert!(names.contains(&dir), "fuzz/corpus/{dir} has no target");
    }
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
    for name in names {
        let bin =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/fuzz_targets/{name}.rs"));
        assert!(bin.is_file(), "no {}", bin.display());
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lists no {name} binary"
        );
    }
}
