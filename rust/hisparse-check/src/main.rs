fn main() {
    // Last resort: a bug that panics prints one line and exits 2, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("hisparse-check: internal error (a bug; please report it): {info}");
    }));
    // Lossy: a non-UTF-8 path becomes "model config not found", never a panic.
    let args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned());
    let code = std::panic::catch_unwind(|| hisparse_check::run(args, |k| std::env::var(k).ok()))
        .unwrap_or(hisparse_check::EXIT_USAGE);
    std::process::exit(code);
}
