fn main() {
    // Lossy: a non-UTF-8 path becomes "model config not found", never a panic.
    let args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned());
    let code = hisparse_check::run(args, |k| std::env::var(k).ok());
    std::process::exit(code);
}
