//! Model ids (`deepseek-ai/DeepSeek-V3.2`) read from the local Hugging Face
//! cache, the way vLLM 0.33 reads them offline: `file_or_path_exists` and
//! `get_config` (`vllm/transformers_utils/repo_utils.py:262-283`,
//! `config.py:351`) go through huggingface_hub's `try_to_load_from_cache`,
//! whose rules are followed here. Nothing is ever downloaded.
//!
//! - The cache: `HF_HUB_CACHE`, else the legacy `HUGGINGFACE_HUB_CACHE`, else
//!   `HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
//!   `~/.cache/huggingface/hub` (huggingface_hub `constants.py`; `~` expanded).
//! - A repo's folder: `models--{org}--{name}` (`/` becomes `--`).
//! - A revision (default `main`) names a file under `refs/` holding a commit
//!   hash, read as is; a revision without one is taken as the hash itself.
//! - The file: `snapshots/<hash>/config.json`; `.no_exist/<hash>/config.json`
//!   records that the repo has none.

use super::error::LoadError;
use std::path::PathBuf;

/// The file vLLM reads a model's config from.
const CONFIG_NAME: &str = "config.json";
/// huggingface_hub `validate_repo_id`: ids are at most 96 characters.
const MAX_REPO_ID_LEN: usize = 96;
/// A ref file holds a 40-character commit hash (and maybe a newline); anything
/// much longer is not a ref.
const REF_FILE_MAX_BYTES: u64 = 256;

/// The Hugging Face hub cache directory and which setting chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubCache {
    pub dir: PathBuf,
    /// `HF_HUB_CACHE`, `HF_HOME/hub`, ... (for messages).
    pub source: String,
}

impl HubCache {
    /// The cache huggingface_hub would use, from environment variables looked
    /// up with `env` (the process environment in the CLI and from Python).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        let set = |k: &str| env(k).filter(|v| !v.is_empty());
        let home = || set("HOME").map(PathBuf::from);
        let expand = |v: String| match v.strip_prefix("~/") {
            Some(rest) => home().map_or_else(|| PathBuf::from(&v), |h| h.join(rest)),
            None => PathBuf::from(v),
        };
        if let Some(v) = set("HF_HUB_CACHE") {
            return HubCache {
                dir: expand(v),
                source: "HF_HUB_CACHE".into(),
            };
        }
        if let Some(v) = set("HUGGINGFACE_HUB_CACHE") {
            return HubCache {
                dir: expand(v),
                source: "HUGGINGFACE_HUB_CACHE".into(),
            };
        }
        if let Some(v) = set("HF_HOME") {
            return HubCache {
                dir: expand(v).join("hub"),
                source: "HF_HOME/hub".into(),
            };
        }
        if let Some(v) = set("XDG_CACHE_HOME") {
            return HubCache {
                dir: expand(v).join("huggingface").join("hub"),
                source: "XDG_CACHE_HOME/huggingface/hub".into(),
            };
        }
        HubCache {
            dir: home()
                .unwrap_or_else(|| PathBuf::from("~"))
                .join(".cache")
                .join("huggingface")
                .join("hub"),
            source: "the default ~/.cache/huggingface/hub (HF_HUB_CACHE and HF_HOME unset)".into(),
        }
    }
}

/// A Hugging Face repo id: `name` or `org/name`, letters, digits, `-`, `_`,
/// `.`, no `--` or `..`, not starting or ending with `-` or `.`, at most 96
/// characters (huggingface_hub `validate_repo_id`).
pub fn is_repo_id(text: &str) -> bool {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !p.starts_with(['-', '.'])
            && !p.ends_with(['-', '.'])
    };
    let parts: Vec<&str> = text.split('/').collect();
    text.len() <= MAX_REPO_ID_LEN
        && !text.contains("--")
        && !text.contains("..")
        && (1..=2).contains(&parts.len())
        && parts.iter().all(|p| part_ok(p))
}

/// A revision names a file under `refs/` or a snapshot folder: no `..`
/// parts, not absolute (it must not lead out of the repo's cache).
fn is_safe_revision(revision: &str) -> bool {
    !revision.is_empty()
        && !revision.starts_with('/')
        && revision
            .split('/')
            .all(|p| !p.is_empty() && p != ".." && p != ".")
}

/// The `config.json` of `model` (not a local path) in `cache` at `revision`
/// (default `main`), or why not: every place looked at, and how to fetch it.
pub fn locate(model: &str, revision: Option<&str>, cache: &HubCache) -> Result<PathBuf, LoadError> {
    let rev = revision.unwrap_or("main");
    let mut looked = vec![format!("{model}: not a local file or directory")];
    let not_cached = |looked: Vec<String>| {
        LoadError::ModelNotCached {
            model: model.to_owned(),
            looked,
            fetch: format!(
            "hf download {model} {CONFIG_NAME}{} (huggingface_hub >= 1.0; or put a local config.json path)",
            revision.map(|r| format!(" --revision {r}")).unwrap_or_default()
        ),
        }
    };
    if !is_repo_id(model) {
        return Err(LoadError::ModelNotFound {
            path: model.to_owned(),
        });
    }
    if !is_safe_revision(rev) {
        looked.push(format!(
            "revision {rev:?}: not a branch, tag or commit name"
        ));
        return Err(not_cached(looked));
    }
    let repo = cache
        .dir
        .join(format!("models--{}", model.replace('/', "--")));
    if !repo.is_dir() {
        looked.push(format!(
            "{}: no such directory (cache from {})",
            repo.display(),
            cache.source
        ));
        return Err(not_cached(looked));
    }
    let ref_file = repo.join("refs").join(rev);
    // A ref holds one commit hash: a bounded read of a regular file (never a FIFO).
    let read_ref = crate::files::read_regular(&ref_file, REF_FILE_MAX_BYTES)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok());
    let commit = match read_ref {
        // huggingface_hub reads a ref as written, without stripping it
        // (file_download.py try_to_load_from_cache), so vLLM misses the
        // snapshot of a ref written by `echo`: said, not printed across lines.
        Some(hash) if hash.trim_end() != hash && !hash.trim_end().is_empty() => {
            looked.push(format!(
                "{}: {hash:?} ends with whitespace (a newline from echo?); huggingface_hub reads a ref as written, so vLLM would not find the snapshot either: write it without one, e.g. printf %s {} > {}",
                ref_file.display(),
                hash.trim_end(),
                ref_file.display()
            ));
            return Err(not_cached(looked));
        }
        Some(hash) => {
            looked.push(format!("{}: {hash}", ref_file.display()));
            hash
        }
        None => {
            looked.push(format!(
                "{}: none, so {rev} is taken as a commit hash",
                ref_file.display()
            ));
            rev.to_owned()
        }
    };
    if !is_safe_revision(&commit) {
        looked.push(format!(
            "{}: {commit:?} is not a commit hash",
            ref_file.display()
        ));
        return Err(not_cached(looked));
    }
    if repo
        .join(".no_exist")
        .join(&commit)
        .join(CONFIG_NAME)
        .is_file()
    {
        looked.push(format!(
            "{}: the cache records that the repo has no {CONFIG_NAME} at this revision",
            repo.join(".no_exist")
                .join(&commit)
                .join(CONFIG_NAME)
                .display()
        ));
        return Err(not_cached(looked));
    }
    let file = repo.join("snapshots").join(&commit).join(CONFIG_NAME);
    // Anything there (a FIFO, a device link, a directory, a symlink loop) is
    // read, so that its own error names it; only an absent file is "not there".
    if file.symlink_metadata().is_ok() {
        return Ok(file);
    }
    looked.push(format!("{}: not there", file.display()));
    Err(not_cached(looked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_follow_huggingface_hub() {
        for ok in [
            "deepseek-ai/DeepSeek-V3.2",
            "gpt2",
            "zai-org/GLM-5",
            "a_b/c.d",
        ] {
            assert!(is_repo_id(ok), "{ok}");
        }
        for bad in [
            "",
            "a/b/c",
            "a--b/c",
            "a/../b",
            "-a/b",
            "a/b.",
            "/a",
            "a b",
            &"x".repeat(97),
        ] {
            assert!(!is_repo_id(bad), "{bad}");
        }
    }

    #[test]
    fn the_cache_dir_follows_huggingface_hub() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = HubCache::from_env(env(&[("HF_HUB_CACHE", "/c"), ("HF_HOME", "/h")]));
        assert_eq!(c.dir, PathBuf::from("/c"));
        let c = HubCache::from_env(env(&[("HF_HOME", "~/h"), ("HOME", "/home/u")]));
        assert_eq!(c.dir, PathBuf::from("/home/u/h/hub"));
        let c = HubCache::from_env(env(&[("XDG_CACHE_HOME", "/x")]));
        assert_eq!(c.dir, PathBuf::from("/x/huggingface/hub"));
        let c = HubCache::from_env(env(&[("HOME", "/home/u")]));
        assert_eq!(c.dir, PathBuf::from("/home/u/.cache/huggingface/hub"));
    }

    #[test]
    fn a_ref_with_a_trailing_newline_is_named() {
        let dir = std::env::temp_dir().join(format!("hisparse-hub-nl-{}", std::process::id()));
        let repo = dir.join("hub").join("models--org--m");
        let hash = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots").join(hash)).unwrap();
        std::fs::write(repo.join("snapshots").join(hash).join(CONFIG_NAME), "{}").unwrap();
        std::fs::write(repo.join("refs").join("main"), format!("{hash}\n")).unwrap();
        let cache = HubCache {
            dir: dir.join("hub"),
            source: "test".into(),
        };
        let err = locate("org/m", None, &cache).unwrap_err().to_string();
        assert!(err.contains("ends with whitespace"), "{err}");
        assert!(err.contains(&format!("printf %s {hash} >")), "{err}");
        std::fs::write(repo.join("refs").join("main"), hash).unwrap();
        assert!(locate("org/m", None, &cache).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn refs_snapshots_and_what_was_looked_at() {
        let root = std::env::temp_dir().join(format!("hisparse-hub-{}", std::process::id()));
        let repo = root.join("models--org--m");
        let hash = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots").join(hash)).unwrap();
        std::fs::write(repo.join("refs").join("main"), hash).unwrap();
        std::fs::write(repo.join("snapshots").join(hash).join("config.json"), "{}").unwrap();
        let cache = HubCache {
            dir: root.clone(),
            source: "test".into(),
        };
        let want = repo.join("snapshots").join(hash).join("config.json");
        assert_eq!(locate("org/m", None, &cache).unwrap(), want);
        assert_eq!(locate("org/m", Some(hash), &cache).unwrap(), want);
        let err = locate("org/m", Some("v2"), &cache).unwrap_err().to_string();
        assert!(
            err.contains("refs/v2: none") && err.contains("--revision v2"),
            "{err}"
        );
        let err = locate("org/other", None, &cache).unwrap_err().to_string();
        assert!(
            err.contains("models--org--other: no such directory"),
            "{err}"
        );
        assert!(err.contains("hf download org/other config.json"), "{err}");
        assert!(locate("org/m", Some("../../etc"), &cache).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }
}
