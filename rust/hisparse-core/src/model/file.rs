//! Reading a model's `config.json`: bounded ([`crate::files`]), parsed keeping
//! only the keys the resolver reads ([`super::parse_config`]), and
//! cached by content.
//!
//! The cache key is the path plus the length and a hash of the bytes, so a
//! file rewritten in place with the same size and mtime is never served
//! stale; reading a config.json (a few KB) costs microseconds, the parse it
//! saves tens of them.

use super::error::LoadError;
use super::parse_config;
use crate::limits::MAX_MODEL_CONFIG_BYTES;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Entries kept; the cache is cleared when it fills (configs are few and small).
const CACHE_ENTRIES: usize = 64;

type Stamp = (usize, u64);
type ConfigCache = Mutex<HashMap<PathBuf, (Stamp, Arc<Value>)>>;

fn cache() -> &'static ConfigCache {
    static CACHE: OnceLock<ConfigCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn stamp(bytes: &[u8]) -> Stamp {
    // DefaultHasher::new() is deterministic within a process, which is all a cache key needs.
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    (bytes.len(), h.finish())
}

/// The parsed config.json at `file` (`shown` names it in errors).
pub fn load(file: &Path, shown: &str) -> Result<Arc<Value>, LoadError> {
    let bytes = crate::files::read_regular(file, MAX_MODEL_CONFIG_BYTES).map_err(|source| {
        LoadError::File {
            path: shown.to_owned(),
            source,
        }
    })?;
    let key = stamp(&bytes);
    if let Some(hit) = cache_get(file, key) {
        return Ok(hit);
    }
    let value = parse_config(&bytes).map_err(|source| LoadError::ModelJson {
        path: shown.to_owned(),
        source,
    })?;
    if !value.is_object() {
        return Err(LoadError::ModelNotObject {
            path: shown.to_owned(),
            kind: crate::words::kind(&value),
        });
    }
    let value = Arc::new(value);
    cache_put(file.to_owned(), key, Arc::clone(&value));
    Ok(value)
}

fn cache_get(file: &Path, key: Stamp) -> Option<Arc<Value>> {
    let guard = cache().lock().ok()?;
    let (seen, value) = guard.get(file)?;
    (*seen == key).then(|| Arc::clone(value))
}

fn cache_put(file: PathBuf, key: Stamp, value: Arc<Value>) {
    if let Ok(mut guard) = cache().lock() {
        if guard.len() >= CACHE_ENTRIES {
            guard.clear();
        }
        guard.insert(file, (key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hisparse-model-file-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("config.json")
    }

    #[test]
    fn a_rewrite_with_the_same_size_and_mtime_is_read_again() {
        let file = temp("stale");
        std::fs::write(&file, br#"{"index_topk": 1024}"#).unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let first = load(&file, "x").unwrap();
        assert_eq!(first["index_topk"], 1024);
        std::fs::write(&file, br#"{"index_topk": 2048}"#).unwrap(); // same length
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        assert_eq!(load(&file, "x").unwrap()["index_topk"], 2048);
        let _ = SystemTime::now();
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }

    #[test]
    fn only_the_keys_read_are_kept() {
        let file = temp("keys");
        let big: Vec<u32> = (0..100_000).collect();
        let doc = serde_json::json!({"index_topk": 2048, "id2label": big,
            "text_config": {"num_hidden_layers": 4, "huge": big}});
        std::fs::write(&file, doc.to_string()).unwrap();
        let v = load(&file, "x").unwrap();
        assert_eq!(
            *v,
            serde_json::json!({"index_topk": 2048, "text_config": {"num_hidden_layers": 4}})
        );
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(load(&file, "x").unwrap_err().code(), "model_not_object");
        std::fs::write(&file, "{\"a\": ").unwrap();
        assert_eq!(load(&file, "x").unwrap_err().code(), "model_json_invalid");
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }
}
