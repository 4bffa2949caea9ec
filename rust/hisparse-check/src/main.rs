fn main() {
    // Last resort: a bug that panics prints one line and exits 2, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("hisparse-check: internal error (a bug; please report it): {info}");
    }));
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
