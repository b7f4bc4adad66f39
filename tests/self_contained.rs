//! A clone needs nothing beside it: no file of the repository's tests, docs, scripts or
//! sources names the development checkout's neighbouring `shared` directory. The tests read
//! their data from `tests/fixtures/` (`crate::util::fixture`) or from what
//! `scripts/fetch-fixtures.sh` fetched (`crate::util::fetched`), and start real servers with
//! `scripts/servers/`.

use std::path::{Path, PathBuf};

/// The spellings of the neighbouring directory (built here so this file does not match).
fn forbidden() -> [String; 2] {
    [["..", "shared"].join("/"), ["/work", "shared"].join("/")]
}

/// Every file under `dir`, recursively (symlinks not followed).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("a directory entry");
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            files_under(&entry.path(), out);
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
}

#[test]
fn nothing_names_the_shared_directory_beside_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    for dir in ["tests", "docs", "scripts", ".ci", "src", "benches"] {
        files_under(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the walk found the repository's files");
    let forbidden = forbidden();
    let mut found = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if let Some(word) = forbidden.iter().find(|w| line.contains(w.as_str())) {
                let rel = path.strip_prefix(root).unwrap_or(path);
                found.push(format!("{}:{}: names {word}", rel.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a clone has no shared directory beside it; use tests/fixtures (crate::util::fixture), \
         scripts/fetch-fixtures.sh (crate::util::fetched) or scripts/servers/ instead:\n{}",
        found.join("\n")
    );
}
