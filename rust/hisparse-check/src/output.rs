//! Writing the result: the exit codes, and a result that cannot be written
//! (a closed, read-only or full stdout) is exit 2, a reader that closed the
//! pipe (`| head`) is quiet with the verdict's code. Both engines' outputs
//! and `deploy` write through here.

use hisparse_core::plan::Plan;
use std::io::Write;

pub const EXIT_VALID: i32 = 0;
pub const EXIT_INVALID: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Set by the binary when its stdout was closed at start (`hisparse-check
/// ... >&-`): Rust's runtime then opens /dev/null on it before `main`, where
/// the result would be lost with exit 0.
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// For the binary's `main`: stdout was closed when the process started, so
/// the result cannot be written (exit 2, as the console script exits).
pub fn stdout_closed_at_start() {
    STDOUT_CLOSED_AT_START.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Write the result and flush: a full disk or a closed stdout is an error,
/// not a silent exit 0 (a closed pipe is quiet: [`write_failed`]).
pub(crate) fn print(stdout: &mut impl Write, text: &str) -> std::io::Result<()> {
    stdout_open()?;
    writeln!(stdout, "{text}")?;
    stdout.flush()
}

/// Whether the result can be written at all. Rust's stdout takes a write to
/// a closed or read-only descriptor (EBADF) as done, so the result would be
/// lost with exit status 0: ask the descriptor itself first (closed: EBADF;
/// open for reading only, `1</dev/null`: EBADF too), and what the binary saw
/// before Rust's runtime reopened a closed stdout on /dev/null.
pub(crate) fn stdout_open() -> std::io::Result<()> {
    let bad = || std::io::Error::from_raw_os_error(libc::EBADF);
    if STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(bad());
    }
    #[cfg(unix)]
    {
        // SAFETY: F_GETFL reads the descriptor's status flags; it touches no memory.
        let flags = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFL) };
        if flags == -1 {
            return Err(std::io::Error::last_os_error());
        }
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(bad());
        }
    }
    Ok(())
}

/// A failed write of the result: exit 2 with a message (a full disk, a closed
/// stdout), except for a reader that closed the pipe (`| head -3`): that is
/// quiet and exit 0, as in ripgrep (crates/core/main.rs) and Unix tools that
/// die of SIGPIPE, which Rust ignores.
pub(crate) fn write_failed(
    stderr: &mut impl Write,
    e: &std::io::Error,
    verdict: i32,
) -> (i32, Option<Plan>) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // The reader has what it wanted (`| head`): quiet, and the exit code is
        // still the verdict, so `set -o pipefail` sees an invalid configuration.
        return (verdict, None);
    }
    let _ = writeln!(
        stderr,
        "hisparse-check: error: cannot write the result to stdout: {e}"
    );
    (EXIT_USAGE, None)
}
