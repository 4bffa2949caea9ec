//! Reading a model's `config.json`: bounded ([`crate::files`]), parsed keeping
//! only the keys the resolver reads ([`super::parse_config`]), and
//! cached by content.
//!
//! The cache key is the path plus the length and a hash of the bytes, so a
//! file rewritten in place with the same size and mtime is never served
//! stale; reading a config.json (a few KB) costs microseconds, the parse it
//! saves tens of them.
//!
//! A file that had not changed for [`SETTLED`] when it was read is then
//! vouched for by one `stat` alone (device, inode, size, mtime and ctime to
//! the nanosecond), as git trusts an index entry that is not racily clean:
//! every write, truncation, rename over it or `utime` sets the ctime to the
//! time of the change, which no process sets back, so a later change gives
//! another stat. A file changed less than [`SETTLED`] before it was read is
//! read again each time (a second write in the same ctime tick could leave
//! the stat as it was), and so is anything a stat cannot vouch for (no
//! inode and ctime off Unix). The open, reads, close and hash this saves cost
//! most of a check's file work.

use super::error::LoadError;
use super::{parse_config, ModelInfo};
use crate::limits::MAX_MODEL_CONFIG_BYTES;
use serde_json::Value;
use std::collections::HashMap;
use std::fs::Metadata;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Entries kept; the cache is cleared when it fills (configs are few and small).
const CACHE_ENTRIES: usize = 64;

/// How long a file must have gone unchanged (mtime and ctime) before the
/// read whose bytes its stat then vouches for: far above any filesystem's
/// timestamp tick, and above clock differences that matter on one host.
pub(crate) const SETTLED: Duration = Duration::from_secs(2);

type Stamp = (usize, u64);

/// What a stat says of a file: device, inode, size, mtime and ctime (s, ns).
type Identity = (u64, u64, u64, (i64, i64), (i64, i64));

/// A cached config: its content stamp, the stat that vouches for it (None
/// when the file was not settled when read), and the parsed value.
struct Entry {
    stamp: Stamp,
    settled: Option<Identity>,
    value: Arc<Value>,
}

type ConfigCache = Mutex<HashMap<PathBuf, Entry>>;

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

#[cfg(unix)]
fn identity(meta: &Metadata) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    Some((
        meta.dev(),
        meta.ino(),
        meta.len(),
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    ))
}

#[cfg(not(unix))]
fn identity(_meta: &Metadata) -> Option<Identity> {
    None
}

/// The identity of a file whose mtime and ctime are both at least
/// [`SETTLED`] before `now` (read at `now`, its bytes are what that stat
/// vouches for); None for a file changed since, or in the future.
fn settled(meta: &Metadata, now: SystemTime) -> Option<Identity> {
    let id = identity(meta)?;
    let (_, _, _, mtime, ctime) = id;
    let at = |(s, ns): (i64, i64)| {
        let s = u64::try_from(s).ok()?;
        let ns = u32::try_from(ns).ok()?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(s, ns))
    };
    let limit = now.checked_sub(SETTLED)?;
    (at(mtime)? <= limit && at(ctime)? <= limit).then_some(id)
}

/// The parsed config.json at `file` (`shown` names it in errors).
pub fn load(file: &Path, shown: &str) -> Result<Arc<Value>, LoadError> {
    load_at(file, shown, None, SystemTime::now)
}

/// [`load`] of a file whose `stat` the caller just made (`meta`, symlinks
/// followed): it is the one that vouches for a settled file.
pub fn load_stat(file: &Path, shown: &str, meta: Metadata) -> Result<Arc<Value>, LoadError> {
    load_at(file, shown, Some(meta), SystemTime::now)
}

/// [`load`] with the stat (or None: made here) and the clock given (the tests move it).
fn load_at(
    file: &Path,
    shown: &str,
    meta: Option<Metadata>,
    now: impl Fn() -> SystemTime,
) -> Result<Arc<Value>, LoadError> {
    // One stat: a settled file whose stat is the one cached is not read.
    if let Some(meta) = meta.or_else(|| std::fs::metadata(file).ok()) {
        if crate::files::is_readable(&meta, MAX_MODEL_CONFIG_BYTES) {
            if let Some(hit) = identity(&meta).and_then(|id| cache_get_settled(file, id)) {
                return Ok(hit);
            }
        }
    }
    #[cfg(test)]
    tests::READS.with(|r| r.set(r.get() + 1));
    let (bytes, meta) =
        crate::files::read_regular_stat(file, MAX_MODEL_CONFIG_BYTES).map_err(|source| {
            LoadError::File {
                path: shown.to_owned(),
                source,
            }
        })?;
    let key = stamp(&bytes);
    let vouched = settled(&meta, now());
    if let Some(hit) = cache_get(file, key, vouched) {
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
    cache_put(file.to_owned(), key, vouched, Arc::clone(&value));
    Ok(value)
}

/// The value cached for `file` if `id` is the settled stat that vouches for it.
fn cache_get_settled(file: &Path, id: Identity) -> Option<Arc<Value>> {
    let guard = cache().lock().ok()?;
    let entry = guard.get(file)?;
    (entry.settled == Some(id)).then(|| Arc::clone(&entry.value))
}

/// The value cached for `file` if its bytes had the stamp `key`; the entry
/// is then vouched for by `settled` (the stat of those bytes), or no stat.
fn cache_get(file: &Path, key: Stamp, settled: Option<Identity>) -> Option<Arc<Value>> {
    let mut guard = cache().lock().ok()?;
    let entry = guard.get_mut(file)?;
    if entry.stamp != key {
        return None;
    }
    entry.settled = settled;
    Some(Arc::clone(&entry.value))
}

fn cache_put(file: PathBuf, stamp: Stamp, settled: Option<Identity>, value: Arc<Value>) {
    if let Ok(mut guard) = cache().lock() {
        if guard.len() >= CACHE_ENTRIES {
            guard.clear();
        }
        guard.insert(
            file,
            Entry {
                stamp,
                settled,
                value,
            },
        );
    }
}

/// Model facts memoized: at most this many configs' (the newest kept).
const INFO_ENTRIES: usize = 8;

type InfoMemo = Mutex<Vec<(Arc<Value>, ModelInfo)>>;

/// [`super::read`]`(cfg, None)`, memoized for a value [`load`] handed out:
/// the file cache gives one `Arc` per content, so the same config.json read
/// again is the same pointer, and the memo holds that `Arc` (no other value
/// can take its address). A value no one else holds (an inline `hf_config`,
/// a fresh one each call) is read and not kept. The facts are a function of
/// the value alone; the lock is never held while they are read.
pub fn read_shared(cfg: &Arc<Value>) -> ModelInfo {
    static MEMO: OnceLock<InfoMemo> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if Arc::strong_count(cfg) < 2 {
        return super::read(cfg, None);
    }
    if let Ok(guard) = memo.lock() {
        if let Some((_, info)) = guard.iter().find(|(v, _)| Arc::ptr_eq(v, cfg)) {
            return info.clone();
        }
    }
    let info = super::read(cfg, None);
    if let Ok(mut guard) = memo.lock() {
        if !guard.iter().any(|(v, _)| Arc::ptr_eq(v, cfg)) {
            if guard.len() >= INFO_ENTRIES {
                guard.remove(0);
            }
            guard.push((Arc::clone(cfg), info.clone()));
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// The reads of a config file's bytes on this thread (a stat alone is not one).
        pub(super) static READS: Cell<usize> = const { Cell::new(0) };
    }

    fn reads() -> usize {
        READS.with(Cell::get)
    }

    #[cfg(unix)]
    fn ctime(file: &Path) -> (i64, i64) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(file).unwrap();
        (m.ctime(), m.ctime_nsec())
    }

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
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_file_changed_just_before_it_is_read_is_read_every_time() {
        let file = temp("fresh");
        std::fs::write(&file, br#"{"index_topk": 1024}"#).unwrap();
        let before = reads();
        for _ in 0..3 {
            assert_eq!(load(&file, "x").unwrap()["index_topk"], 1024);
        }
        assert_eq!(
            reads() - before,
            3,
            "not settled: its stat vouches for nothing"
        );
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_settled_file_is_vouched_for_by_its_stat_until_it_changes() {
        let file = temp("settled");
        std::fs::write(&file, br#"{"index_topk": 1024}"#).unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        // Read an hour later, the file has long been unchanged.
        let later = || SystemTime::now() + Duration::from_secs(3600);
        let before = reads();
        assert_eq!(
            load_at(&file, "x", None, later).unwrap()["index_topk"],
            1024
        );
        assert_eq!(
            load_at(&file, "x", None, later).unwrap()["index_topk"],
            1024
        );
        assert_eq!(reads() - before, 1, "the second load is one stat");
        // A rewrite of the same size with the mtime set back changes the ctime.
        let was = ctime(&file);
        let deadline = SystemTime::now() + Duration::from_secs(5);
        loop {
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(&file, br#"{"index_topk": 2048}"#).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
            if ctime(&file) != was || SystemTime::now() > deadline {
                break;
            }
        }
        assert_ne!(ctime(&file), was, "the filesystem's ctime tick is over 5 s");
        assert_eq!(
            load_at(&file, "x", None, later).unwrap()["index_topk"],
            2048
        );
        assert_eq!(reads() - before, 2);
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
