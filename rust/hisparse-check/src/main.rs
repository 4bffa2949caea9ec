fn main() {
    let code = hisparse_check::run(std::env::args().skip(1), |k| std::env::var(k).ok());
    std::process::exit(code);
}
