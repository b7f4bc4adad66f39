//! Hub ids (`org/name`): the local Hugging Face cache first, then a one-time download.
//!
//! The cache is the one Python uses (`huggingface_hub` layout), so a model Python already
//! downloaded costs nothing here and what we download Python reuses:
//! `<cache>/models--org--name/refs/<revision>` holds a commit hash and
//! `<cache>/models--org--name/snapshots/<hash>/tokenizer.json` the file. The cache directory
//! is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
//! `~/.cache/huggingface/hub`.
//!
//! Not cached and `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) unset: the repo's file list is
//! fetched and `tokenizer.json` (or a tiktoken rank file plus the Python file that carries its
//! `pat_str`) downloaded with `hf-hub`, together with `tokenizer_config.json` and
//! `special_tokens_map.json` when the repo has them. `HF_TOKEN` (or the token `huggingface-cli
//! login` stored) authenticates gated repos; `HF_ENDPOINT` points at a mirror.

use std::path::{Path, PathBuf};

use super::{find_in_dir, Located, Result, TokenizerError, TokenizerOptions};

/// True when `HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE` is set to a true value
/// (`1`, `true`, `yes`, `on`, any case), as `huggingface_hub` reads them.
pub fn offline_from_env() -> bool {
    ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"]
        .iter()
        .any(|key| {
            std::env::var(key)
                .map(|v| {
                    matches!(
                        v.trim().to_ascii_lowercase().as_str(),
                        "1" | "true" | "yes" | "on"
                    )
                })
                .unwrap_or(false)
        })
}

/// The hub cache directory, resolved like `huggingface_hub.constants.HF_HUB_CACHE`.
pub fn cache_dir_from_env() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("HF_HUB_CACHE").or_else(|| var("HUGGINGFACE_HUB_CACHE")) {
        return Some(dir);
    }
    if let Some(home) = var("HF_HOME") {
        return Some(home.join("hub"));
    }
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("huggingface").join("hub"))
}

/// The directory of repo `id` inside the cache (`models--org--name`).
pub fn repo_dir(cache: &Path, id: &str) -> PathBuf {
    cache.join(format!("models--{}", id.replace('/', "--")))
}

/// Resolves a Hub id from the cache, downloading when allowed.
pub(super) fn locate(opts: &TokenizerOptions) -> Result<Located> {
    let id = opts.id.as_str();
    let revision = opts.revision.as_deref().unwrap_or("main");
    let cache = opts.hub_cache.as_deref();
    if let Some(dir) = cache.and_then(|c| cached_snapshot(c, id, revision)) {
        if let Some(located) = find_in_dir(&dir)? {
            return Ok(located);
        }
    }
    let where_ = cache.map_or_else(
        || "no HF cache directory (HOME unset)".to_owned(),
        |c| format!("not in the HF cache {}", c.display()),
    );
    if opts.offline {
        return Err(TokenizerError::NotFound(format!(
            "tokenizer {id} not found: {where_} and HF_HUB_OFFLINE is set; download it once \
             without HF_HUB_OFFLINE, or pass --tokenizer <directory with tokenizer.json>"
        )));
    }
    let cache = cache.ok_or_else(|| {
        TokenizerError::NotFound(format!(
            "tokenizer {id} not found: {where_}; set HF_HOME or pass --tokenizer <directory with tokenizer.json>"
        ))
    })?;
    download(cache, id, revision)
}

/// The snapshot directory the cache holds for `revision` (a ref name or a commit hash).
///
/// When the default `main` has no `refs/main` (a cache copied by hand) the newest snapshot
/// that has a tokenizer file is used; an explicit revision must be cached under its name.
pub fn cached_snapshot(cache: &Path, id: &str, revision: &str) -> Option<PathBuf> {
    let repo = repo_dir(cache, id);
    let snapshots = repo.join("snapshots");
    let reference = std::fs::read_to_string(repo.join("refs").join(revision));
    let commit = reference.as_deref().map_or(revision, str::trim);
    let direct = snapshots.join(commit);
    if direct.is_dir() {
        return Some(direct);
    }
    if reference.is_err() && revision == "main" {
        return newest_snapshot_with_tokenizer(&snapshots);
    }
    None
}

fn newest_snapshot_with_tokenizer(snapshots: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(snapshots).ok()?;
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| matches!(find_in_dir(p), Ok(Some(_))))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// The Hub client as Python's `huggingface_hub` is configured: the cache at `cache`,
/// `HF_TOKEN` (else the cache's saved token), `HF_ENDPOINT`; a progress bar on stderr when
/// `progress`. Shared by the tokenizer and the dataset downloads.
pub fn hub_api(
    cache: &Path,
    progress: bool,
) -> Result<hf_hub::api::sync::Api, hf_hub::api::sync::ApiError> {
    use hf_hub::api::sync::ApiBuilder;
    use hf_hub::Cache;

    let hf_cache = Cache::new(cache.to_owned());
    let token = std::env::var("HF_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .or_else(|| hf_cache.token());
    let mut builder = ApiBuilder::from_cache(hf_cache)
        .with_progress(progress)
        .with_token(token);
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT") {
        builder = builder.with_endpoint(endpoint);
    }
    builder.build()
}

/// Downloads the tokenizer files of `id` into `cache` and locates the result.
fn download(cache: &Path, id: &str, revision: &str) -> Result<Located> {
    use hf_hub::{Repo, RepoType};

    let api = hub_api(cache, false).map_err(|e| TokenizerError::HubSetup(e.to_string()))?;
    let repo = api.repo(Repo::with_revision(
        id.to_owned(),
        RepoType::Model,
        revision.to_owned(),
    ));
    // An unreachable Hub counts as "not found" so a caller may fall back to the server.
    let info = repo.info().map_err(|e| {
        TokenizerError::NotFound(format!(
            "tokenizer {id} not found locally and the Hub lookup failed ({e}); check the id, \
             set HF_TOKEN for gated repos, or pass --tokenizer <directory with tokenizer.json>"
        ))
    })?;
    let files: Vec<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
    let wanted = files_to_fetch(&files).ok_or_else(|| {
        TokenizerError::NotFound(format!(
            "Hub repo {id} has no tokenizer.json and no tiktoken file; pass --tokenizer \
             <directory with tokenizer.json> or a repo that ships one"
        ))
    })?;
    let mut main_path = None;
    for (i, name) in wanted.iter().enumerate() {
        let path = repo.get(name).map_err(|e| TokenizerError::HubDownload {
            name: (*name).to_owned(),
            id: id.to_owned(),
            reason: e.to_string(),
        })?;
        if i == 0 {
            main_path = Some(path);
        }
    }
    let main = main_path.ok_or_else(|| TokenizerError::NothingToDownload { id: id.to_owned() })?;
    let dir = main.parent().unwrap_or(cache);
    find_in_dir(dir)?.ok_or_else(|| TokenizerError::NoTokenizerInDownload { path: main.clone() })
}

/// Which repo files make a tokenizer, main file first: `tokenizer.json`, else a tiktoken
/// rank file plus the Python sources that define its `pat_str`; then the config files.
fn files_to_fetch<'a>(files: &[&'a str]) -> Option<Vec<&'a str>> {
    let has = |name: &str| files.contains(&name);
    let mut out = Vec::new();
    if has("tokenizer.json") {
        out.push("tokenizer.json");
    } else {
        let rank = files
            .iter()
            .copied()
            .filter(|f| !f.contains('/'))
            .find(|f| f.ends_with(".tiktoken") || *f == "tiktoken.model")?;
        out.push(rank);
        out.extend(
            files.iter().copied().filter(|f| {
                !f.contains('/') && f.starts_with("tokenization") && f.ends_with(".py")
            }),
        );
    }
    out.extend(
        ["tokenizer_config.json", "special_tokens_map.json"]
            .into_iter()
            .filter(|f| has(f)),
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_dir_uses_the_python_layout() {
        let p = repo_dir(Path::new("/c"), "Qwen/Qwen3-8B");
        assert_eq!(p, Path::new("/c/models--Qwen--Qwen3-8B"));
    }

    #[test]
    fn fetch_list_prefers_tokenizer_json_then_tiktoken() {
        let hf =
            files_to_fetch(&["config.json", "tokenizer.json", "tokenizer_config.json"]).unwrap();
        assert_eq!(hf, vec!["tokenizer.json", "tokenizer_config.json"]);
        let tk = files_to_fetch(&[
            "tiktoken.model",
            "tokenization_kimi.py",
            "tokenizer_config.json",
            "x/tokenization_y.py",
        ])
        .unwrap();
        assert_eq!(
            tk,
            vec![
                "tiktoken.model",
                "tokenization_kimi.py",
                "tokenizer_config.json"
            ]
        );
        assert!(files_to_fetch(&["model.safetensors"]).is_none());
    }
}
