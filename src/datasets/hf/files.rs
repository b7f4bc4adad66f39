//! Which files hold a Hugging Face dataset's split: a local file, a local directory in the
//! layout of a dataset repo, or a Hub dataset repo (the local HF cache first, the layout
//! Python's `huggingface_hub` writes; else listed and downloaded with `hf-hub` unless
//! `HF_HUB_OFFLINE` is set).
//!
//! The split and subset are found as the `datasets` library's default data-file patterns
//! find them: a subset is a top-level directory (`main/test-00000-of-00001.parquet`), a
//! split is a word of a file's path (`data/train-00000-of-00002.parquet`, `test.jsonl`,
//! `validation/part-0.json`); a repo whose files name no split has only `train`.

use std::path::{Path, PathBuf};

use super::super::error::DatasetError;
use super::super::hub_file::HubAccess;

/// The file formats read (the `datasets` library's packaged loaders for text data).
pub const EXTENSIONS: [&str; 4] = ["parquet", "jsonl", "json", "csv"];

/// The split words the `datasets` library recognises in file names.
const SPLIT_WORDS: [&str; 6] = ["train", "test", "validation", "valid", "val", "dev"];

/// Where the dataset's files are, relative paths as in the repo.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFiles {
    /// The directory the relative paths start from (a snapshot, or the local directory).
    pub root: PathBuf,
    pub files: Vec<String>,
}

fn is_data_file(rel: &str) -> bool {
    let lower = rel.to_ascii_lowercase();
    EXTENSIONS.iter().any(|e| lower.ends_with(&format!(".{e}")))
        && !rel.split('/').any(|c| c.starts_with('.'))
}

/// Every data file under `root`, relative, sorted (the repo's order).
fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            // Snapshots hold symlinks to blobs: follow them.
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                if is_data_file(&rel) {
                    out.push(rel);
                }
            }
        }
    }
    out.sort();
    out
}

/// The words of a relative path: its directories and its file stem, cut at `-`, `_`, `.`.
fn words(rel: &str) -> Vec<String> {
    rel.split(['/', '-', '_', '.'])
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The split `rel` belongs to: the first split word in it, else `train`.
fn split_of(rel: &str) -> String {
    let w = words(rel);
    SPLIT_WORDS
        .iter()
        .find(|s| w.iter().any(|x| x == *s))
        .map_or("train".to_string(), |s| (*s).to_string())
}

/// The files of `subset` (a top-level directory; `None`: every file) and `split`.
pub fn select(
    all: &[String],
    subset: Option<&str>,
    split: &str,
    what: &str,
) -> Result<Vec<String>, DatasetError> {
    let in_subset: Vec<&String> = match subset {
        None => all.iter().collect(),
        Some(s) => all
            .iter()
            .filter(|f| f.split('/').next() == Some(s))
            .collect(),
    };
    if in_subset.is_empty() {
        let mut subsets: Vec<&str> = all
            .iter()
            .filter(|f| f.contains('/'))
            .filter_map(|f| f.split('/').next())
            .collect();
        subsets.dedup();
        return Err(DatasetError::Unusable(match subset {
            Some(s) => format!(
                "{what}: no data files for --hf-subset {s} (its directories: {})",
                if subsets.is_empty() {
                    "none".to_string()
                } else {
                    subsets.join(", ")
                }
            ),
            None => format!(
                "{what}: no data files ({} files) found",
                EXTENSIONS.join(", ")
            ),
        }));
    }
    let wanted = split.to_ascii_lowercase();
    let chosen: Vec<String> = in_subset
        .iter()
        .filter(|f| split_of(f) == wanted)
        .map(|f| f.to_string())
        .collect();
    if chosen.is_empty() {
        let mut splits: Vec<String> = in_subset.iter().map(|f| split_of(f)).collect();
        splits.sort();
        splits.dedup();
        return Err(DatasetError::Unusable(format!(
            "{what}: no data files for --hf-split {split} (splits found: {}); pass one of \
             them with --hf-split",
            splits.join(", ")
        )));
    }
    Ok(chosen)
}

/// The files of a local path: the file itself, or a directory's data files.
pub fn local(path: &Path) -> Option<DataFiles> {
    if path.is_file() {
        let name = path.file_name()?.to_string_lossy().into_owned();
        return Some(DataFiles {
            root: path.parent()?.to_path_buf(),
            files: vec![name],
        });
    }
    path.is_dir().then(|| DataFiles {
        root: path.to_path_buf(),
        files: walk(path),
    })
}

/// The revisions read: the repo itself, then the Hub's parquet conversion of datasets whose
/// repo holds a loading script and archives (LongBench), as the `datasets` library falls
/// back to it.
const REVISIONS: [&str; 2] = ["main", "refs/convert/parquet"];

/// The cached snapshot of `revision` of dataset repo `id` (the one its ref names; for
/// `main` without a ref, a cache copied by hand, the newest snapshot).
fn cached_snapshot(cache: &Path, id: &str, revision: &str) -> Option<PathBuf> {
    let repo = cache.join(format!("datasets--{}", id.replace('/', "--")));
    let snapshots = repo.join("snapshots");
    let reference = repo.join("refs").join(revision.trim_start_matches("refs/"));
    if let Ok(commit) = std::fs::read_to_string(reference) {
        let dir = snapshots.join(commit.trim());
        return dir.is_dir().then_some(dir);
    }
    if revision != "main" {
        return None;
    }
    std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// The files of Hub dataset repo `id` for `subset`/`split`: from the cache, else listed and
/// downloaded (not with `HF_HUB_OFFLINE`).
pub fn hub(
    access: &HubAccess,
    id: &str,
    subset: Option<&str>,
    split: &str,
) -> Result<DataFiles, DatasetError> {
    let what = format!("the Hub dataset {id}");
    for revision in REVISIONS {
        let Some(snapshot) = access
            .cache
            .as_deref()
            .and_then(|c| cached_snapshot(c, id, revision))
        else {
            continue;
        };
        let all = walk(&snapshot);
        if !all.is_empty() {
            let files = select(&all, subset, split, &what)?;
            return Ok(DataFiles {
                root: snapshot,
                files,
            });
        }
    }
    let how = "or download it and pass its directory or file with --dataset-path";
    let Some(cache) = access.cache.as_deref() else {
        return Err(DatasetError::Unusable(format!(
            "{what} is not cached and there is no HF cache directory (HOME unset); set \
             HF_HOME, {how}"
        )));
    };
    if access.offline {
        return Err(DatasetError::Unusable(format!(
            "{what} is not in the HF cache {} and HF_HUB_OFFLINE is set; fetch it once \
             without HF_HUB_OFFLINE (`huggingface-cli download --repo-type dataset {id}`), {how}",
            cache.display()
        )));
    }
    download(cache, id, subset, split, &what).map_err(|why| {
        DatasetError::Unusable(format!(
            "{what}: {why}; check the name and the network, set HF_TOKEN (and accept its terms \
             on the Hub) for a gated dataset, {how}"
        ))
    })
}

/// Lists the repo, picks the split's files, downloads them into the cache.
fn download(
    cache: &Path,
    id: &str,
    subset: Option<&str>,
    split: &str,
    what: &str,
) -> Result<DataFiles, String> {
    use hf_hub::{Repo, RepoType};

    let api = crate::tokenizer::hub::hub_api(cache, true).map_err(|e| e.to_string())?;
    let mut listed = None;
    for revision in REVISIONS {
        let repo = api.repo(Repo::with_revision(
            id.to_owned(),
            RepoType::Dataset,
            revision.to_owned(),
        ));
        let info = repo.info().map_err(|e| e.to_string())?;
        let all: Vec<String> = info
            .siblings
            .iter()
            .map(|s| s.rfilename.clone())
            .filter(|f| is_data_file(f))
            .collect();
        if !all.is_empty() {
            listed = Some((repo, all));
            break;
        }
    }
    let (repo, all) = listed.ok_or("the repo holds no parquet, jsonl, json or csv files")?;
    let files = select(&all, subset, split, what).map_err(|e| e.to_string())?;
    let mut root = None;
    for f in &files {
        let local = repo.get(f).map_err(|e| e.to_string())?;
        // `<snapshot>/<f>`: the root is the path minus the relative name.
        let depth = f.split('/').count();
        root = local.ancestors().nth(depth).map(Path::to_path_buf);
    }
    Ok(DataFiles {
        root: root.ok_or("no data files")?,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splits_and_subsets_are_found_as_the_datasets_library_does() {
        let all = names(&[
            "main/test-00000-of-00001.parquet",
            "main/train-00000-of-00001.parquet",
            "socratic/test-00000-of-00001.parquet",
        ]);
        assert_eq!(
            select(&all, Some("main"), "test", "d").unwrap(),
            names(&["main/test-00000-of-00001.parquet"])
        );
        let e = select(&all, Some("nope"), "test", "d")
            .unwrap_err()
            .to_string();
        assert!(e.contains("main, socratic"), "{e}");
        let e = select(&all, Some("main"), "validation", "d")
            .unwrap_err()
            .to_string();
        assert!(e.contains("splits found: test, train"), "{e}");
        let flat = names(&["data.jsonl", "more/part-1.json"]);
        assert_eq!(select(&flat, None, "train", "d").unwrap(), flat);
        assert_eq!(split_of("data/validation-00000.parquet"), "validation");
        assert!(!is_data_file(".cache/x.parquet") && !is_data_file("README.md"));
    }

    #[test]
    fn a_cached_snapshot_is_found_offline() {
        let cache = std::env::temp_dir().join(format!("vb-hf-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let snap = cache.join("datasets--org--set/snapshots/abc/data");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(cache.join("datasets--org--set/refs")).unwrap();
        std::fs::write(cache.join("datasets--org--set/refs/main"), "abc").unwrap();
        std::fs::write(snap.join("train-0.jsonl"), "{}\n").unwrap();
        let access = HubAccess {
            cache: Some(cache.clone()),
            offline: true,
        };
        let files = hub(&access, "org/set", None, "train").unwrap();
        assert_eq!(files.files, names(&["data/train-0.jsonl"]));
        // A script-based repo: its parquet conversion is read.
        let lb = cache.join("datasets--org--script");
        std::fs::create_dir_all(lb.join("refs/convert")).unwrap();
        std::fs::create_dir_all(lb.join("snapshots/main1")).unwrap();
        std::fs::create_dir_all(lb.join("snapshots/pq1/narrativeqa/test")).unwrap();
        std::fs::write(lb.join("refs/main"), "main1").unwrap();
        std::fs::write(lb.join("snapshots/main1/data.zip"), "zip").unwrap();
        std::fs::write(lb.join("refs/convert/parquet"), "pq1").unwrap();
        std::fs::write(lb.join("snapshots/pq1/narrativeqa/test/0000.parquet"), "x").unwrap();
        let files = hub(&access, "org/script", Some("narrativeqa"), "test").unwrap();
        assert_eq!(files.files, names(&["narrativeqa/test/0000.parquet"]));
        let e = hub(&access, "org/other", None, "train")
            .unwrap_err()
            .to_string();
        assert!(e.contains("HF_HUB_OFFLINE") && !e.contains('\n'), "{e}");
        let _ = std::fs::remove_dir_all(cache);
    }
}
