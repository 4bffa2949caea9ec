//! Reading the files a user names (a model's `config.json`, a `--config`
//! YAML): regular files only, and at most a given number of bytes.
//!
//! A FIFO would block the open (or the read) forever and `/dev/zero` never
//! ends, so both are refused before anything is read: the path is checked
//! with `stat`, opened non-blocking (a path swapped for a FIFO after the check
//! cannot block the open), checked again on the open file, and read with a
//! cap one byte past the bound (a file that grows meanwhile is still refused).

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read. [`FileError::code`] is stable.
#[derive(Debug)]
pub enum FileError {
    NotFound,
    /// A directory, FIFO, socket or device: `kind` says which.
    NotRegular {
        kind: &'static str,
    },
    /// Larger than the bound the caller gave (`size` as far as it was seen).
    TooLarge {
        size: u64,
        max: u64,
    },
    Io(io::Error),
}

impl FileError {
    /// `not_found`, `not_a_regular_file`, `file_too_large` or `read_failed`.
    pub fn code(&self) -> &'static str {
        match self {
            FileError::NotFound => "not_found",
            FileError::NotRegular { .. } => "not_a_regular_file",
            FileError::TooLarge { .. } => "file_too_large",
            FileError::Io(_) => "read_failed",
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::NotFound => f.write_str("no such file"),
            FileError::NotRegular {
                kind: kind @ "a directory",
            } => {
                write!(f, "it is {kind}, not a regular file (refused: only a file is read; give the file itself)")
            }
            FileError::NotRegular { kind } => {
                write!(f, "it is {kind}, not a regular file (refused: reading it could block or never end)")
            }
            FileError::TooLarge { size, max } => write!(
                f,
                "it is {} bytes, more than the {max} bytes read at most (see README \"Limits\")",
                if *size > *max {
                    size.to_string()
                } else {
                    format!("over {max}")
                }
            ),
            FileError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn kind_of(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
    }
    Some("not a regular file")
}

fn check(meta: &Metadata, max: u64) -> Result<(), FileError> {
    if let Some(kind) = kind_of(meta) {
        return Err(FileError::NotRegular { kind });
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    Ok(())
}

fn open_nonblocking(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Regular files ignore O_NONBLOCK; a FIFO then opens at once, and is refused below.
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// The bytes of the regular file at `path` (symlinks followed), at most `max`.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    read_regular_stat(path, max).map(|(bytes, _)| bytes)
}

/// [`read_regular`], also returning the open file's metadata as it was
/// before the read (for a cache key: a change during the read changes the
/// file's ctime after it).
pub fn read_regular_stat(path: &Path, max: u64) -> Result<(Vec<u8>, Metadata), FileError> {
    let io_err = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => FileError::NotFound,
        _ => FileError::Io(e),
    };
    check(&std::fs::metadata(path).map_err(io_err)?, max)?;
    let file = open_nonblocking(path).map_err(io_err)?;
    let meta = file.metadata().map_err(FileError::Io)?;
    check(&meta, max)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge {
            size: bytes.len() as u64,
            max,
        });
    }
    Ok((bytes, meta))
}

/// Whether `meta` is of a regular file of at most `max` bytes (what
/// [`read_regular`] reads; anything else it refuses with an error).
pub fn is_readable(meta: &Metadata, max: u64) -> bool {
    check(meta, max).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_devices_directories_and_large_files() {
        let code = |p: &str, max| read_regular(Path::new(p), max).unwrap_err().code();
        assert_eq!(code("/dev/zero", 1 << 20), "not_a_regular_file");
        assert_eq!(code("/dev/null", 1 << 20), "not_a_regular_file");
        assert_eq!(code("/", 1 << 20), "not_a_regular_file");
        assert_eq!(code("/nonexistent/x.json", 1 << 20), "not_found");
        let here = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert_eq!(code(here, 8), "file_too_large");
        assert!(read_regular(Path::new(here), 1 << 20).unwrap().len() > 8);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("hisparse-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("config.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 1 << 20).unwrap_err();
        assert_eq!(e.code(), "not_a_regular_file");
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(open_nonblocking(&fifo).is_ok()); // and the open itself does not block
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn proc_files_of_size_zero_are_capped() {
        // /proc files report size 0 but have content: the read cap still holds.
        if Path::new("/proc/self/status").exists() {
            let e = read_regular(Path::new("/proc/self/status"), 16).unwrap_err();
            assert_eq!(e.code(), "file_too_large");
        }
    }
}
