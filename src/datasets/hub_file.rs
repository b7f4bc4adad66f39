//! One file of a Hugging Face **dataset** repo: the local cache first (the layout Python's
//! `huggingface_hub` writes, `<cache>/datasets--org--name/snapshots/<commit>/<file>`, with
//! `refs/main` naming the commit), then a download with `hf-hub` unless `HF_HUB_OFFLINE` is
//! set. `HF_TOKEN` (or the stored login token) authenticates gated repos; `HF_ENDPOINT`
//! points at a mirror. The cache directory is resolved as for tokenizers
//! ([`crate::tokenizer::hub::cache_dir_from_env`]).

use std::path::{Path, PathBuf};

use super::error::DatasetError;
use crate::tokenizer::hub;

/// Where to look and whether the network may be used.
#[derive(Debug, Clone)]
pub struct HubAccess {
    pub cache: Option<PathBuf>,
    pub offline: bool,
}

impl HubAccess {
    /// The cache and offline setting of the environment, as Python reads them.
    pub fn from_env() -> Self {
        Self {
            cache: hub::cache_dir_from_env(),
            offline: hub::offline_from_env(),
        }
    }
}

/// `<cache>/datasets--org--name`.
fn repo_dir(cache: &Path, id: &str) -> PathBuf {
    cache.join(format!("datasets--{}", id.replace('/', "--")))
}

/// The cached copy of `file` in dataset repo `id` (revision `main`): the snapshot
/// `refs/main` names, else (a cache copied by hand) the newest snapshot holding the file.
pub fn cached(cache: &Path, id: &str, file: &str) -> Option<PathBuf> {
    let repo = repo_dir(cache, id);
    let snapshots = repo.join("snapshots");
    if let Ok(commit) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let path = snapshots.join(commit.trim()).join(file);
        return path.is_file().then_some(path);
    }
    std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(file))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// `file` of dataset repo `id`, from the cache or downloaded into it. `pass_path` tells the
/// user which flag takes a local copy instead.
pub fn dataset_file(
    access: &HubAccess,
    id: &str,
    file: &str,
    pass_path: &str,
) -> Result<PathBuf, DatasetError> {
    if let Some(p) = access.cache.as_deref().and_then(|c| cached(c, id, file)) {
        return Ok(p);
    }
    let Some(cache) = access.cache.as_deref() else {
        return Err(DatasetError::Unusable(format!(
            "{file} of the Hub dataset {id} is needed but there is no HF cache directory \
             (HOME unset); set HF_HOME or {pass_path}"
        )));
    };
    if access.offline {
        return Err(DatasetError::Unusable(format!(
            "{file} of the Hub dataset {id} is not in the HF cache {} and HF_HUB_OFFLINE is \
             set; download it once without HF_HUB_OFFLINE, or {pass_path}",
            cache.display()
        )));
    }
    download(cache, id, file).map_err(|why| {
        DatasetError::Unusable(format!(
            "downloading {file} of the Hub dataset {id} failed ({why}); check the network, \
             set HF_TOKEN for a gated dataset, or {pass_path}"
        ))
    })
}

fn download(cache: &Path, id: &str, file: &str) -> Result<PathBuf, hf_hub::api::sync::ApiError> {
    use hf_hub::{Repo, RepoType};

    let api = crate::tokenizer::hub::hub_api(cache, true)?;
    api.repo(Repo::new(id.to_owned(), RepoType::Dataset))
        .get(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vb-hubfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn finds_the_snapshot_refs_main_names() {
        let cache = temp("refs");
        let repo = cache.join("datasets--org--set");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots/abc")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc\n").unwrap();
        std::fs::write(repo.join("snapshots/abc/data.json"), "[]").unwrap();
        assert_eq!(
            cached(&cache, "org/set", "data.json"),
            Some(repo.join("snapshots/abc/data.json"))
        );
        assert_eq!(cached(&cache, "org/set", "other.json"), None);
        assert_eq!(cached(&cache, "org/none", "data.json"), None);
    }

    #[test]
    fn offline_and_missing_is_one_line_saying_what_to_do() {
        let access = HubAccess {
            cache: Some(temp("offline")),
            offline: true,
        };
        let e = dataset_file(&access, "org/set", "f.json", "pass --dataset-path FILE")
            .unwrap_err()
            .to_string();
        assert!(e.contains("HF_HUB_OFFLINE"), "{e}");
        assert!(e.ends_with("pass --dataset-path FILE"), "{e}");
        assert!(!e.contains('\n'));
    }
}
