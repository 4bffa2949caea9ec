//! Time `resolve` and `check` (what Python's `hisparse_rs.resolve()` runs:
//! the machine-aware check, no machine options) on the bundled DeepSeek-V3.2
//! decode P/D example, and their parts:
//! `cargo run --release -p hisparse-core --example resolve_timing`.
use hisparse_core::plan::{host_memory_available, PlanOptions};
use hisparse_core::{check::check, resolve, ServeArgs};

/// This thread's CPU time in seconds: on a loaded machine it reads close to a
/// quiet one's wall time (the time the thread waits for a core is left out).
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Microseconds of CPU per call of `f`: the least of 5 batches of `n / 5` calls.
fn per_call_us<T>(n: usize, mut f: impl FnMut() -> T) -> f64 {
    let batch = (n / 5).max(1);
    (0..5)
        .map(|_| {
            let t = thread_cpu_s();
            for _ in 0..batch {
                std::hint::black_box(f());
            }
            (thread_cpu_s() - t) / batch as f64 * 1e6
        })
        .fold(f64::INFINITY, f64::min)
}

/// A part's name, what it times, and its timing.
type Row<'a> = (&'a str, &'a str, Box<dyn Fn() -> f64 + 'a>);

fn main() {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/models/deepseek-v3.2"
    );
    let args: ServeArgs = serde_json::from_value(serde_json::json!({
        "model": root,
        "tensor_parallel_size": 8,
        "kv_cache_dtype": "fp8_ds_mla",
        "kv_transfer_config": {"kv_connector": "MultiConnector", "kv_role": "kv_consumer",
            "kv_connector_extra_config": {"connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                {"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
                 "kv_connector_extra_config": {"host_pool_gib": 128}}]}}
    }))
    .expect("valid args");
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // `resolve_timing PART` times one part alone (for a profiler): check,
    // resolve, json, load or meminfo.
    let only = std::env::args().nth(1);
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let options = PlanOptions::default();
    let report = resolve(&args).expect("loads");
    let rows: [Row<'_>; 5] = [
        (
            "check",
            "check (no machine options)",
            Box::new(|| per_call_us(n, || check(&args, &options).expect("loads"))),
        ),
        (
            "resolve",
            "resolve",
            Box::new(|| per_call_us(n, || resolve(&args).expect("loads"))),
        ),
        (
            "json",
            "report to JSON",
            Box::new(|| per_call_us(n, || report.to_json_compact())),
        ),
        (
            "load",
            "load_hf_config",
            Box::new(|| per_call_us(n, || args.load_hf_config().expect("loads"))),
        ),
        (
            "meminfo",
            "host_memory_available (/proc/meminfo)",
            Box::new(|| per_call_us(n, host_memory_available)),
        ),
    ];
    for (name, what, time) in &rows {
        if part(name) {
            println!("{what}: {:.2} us/call (CPU)", time());
        }
    }
}
