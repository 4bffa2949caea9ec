//! Time `resolve` on the bundled DeepSeek-V3.2 decode P/D example:
//! `cargo run --release -p hisparse-core --example resolve_timing`.
use hisparse_core::{resolve, ServeArgs};
use std::time::Instant;

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
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(resolve(&args).expect("loads"));
    }
    let resolve_us = t.elapsed().as_secs_f64() / n as f64 * 1e6;
    let report = resolve(&args).expect("loads");
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(report.to_json_compact());
    }
    let json_us = t.elapsed().as_secs_f64() / n as f64 * 1e6;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(args.load_hf_config().expect("loads"));
    }
    let load_us = t.elapsed().as_secs_f64() / n as f64 * 1e6;
    println!("load_hf_config: {load_us:.2} us/call");
    println!("resolve: {resolve_us:.2} us/call, report to JSON: {json_us:.2} us/call");
}
