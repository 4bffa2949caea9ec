use std::sync::atomic::{AtomicBool, Ordering};

/// Whether stdout was closed when the process started (`hisparse-check ...
/// >&-`). Rust's runtime opens /dev/null on a closed stdout before `main`
/// (std's `sanitize_standard_fds`), where the result would be lost with exit
/// 0; a constructor in `.init_array` runs before that, as the C runtime
/// calls it ahead of `main`.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_STDOUT: extern "C" fn() = record_stdout;

#[cfg(target_os = "linux")]
extern "C" fn record_stdout() {
    // SAFETY: F_GETFD reads the descriptor's flags; it touches no memory.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

fn main() {
    // Last resort: a bug that panics prints one line and exits 2, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("hisparse-check: internal error (a bug; please report it): {info}");
    }));
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        hisparse_check::stdout_closed_at_start();
    }
    // An argument that is not UTF-8 is a usage error naming it, never a panic.
    let args = std::env::args_os().skip(1).map(|a| match a.into_string() {
        Ok(text) => Ok(text),
        Err(raw) => Err(raw.to_string_lossy().into_owned()),
    });
    let code =
        std::panic::catch_unwind(|| hisparse_check::run_checked(args, |k| std::env::var(k).ok()).0)
            .unwrap_or(hisparse_check::EXIT_USAGE);
    std::process::exit(code);
}
