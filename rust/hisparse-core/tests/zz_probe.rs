use hisparse_core::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn dsv32() -> Value {
    serde_json::from_str(include_str!(
        "../../../tests/data/models/deepseek-v3.2/config.json"
    ))
    .unwrap()
}
fn hs() -> Value {
    json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}})
}
fn with_timeout(args: ServeArgs) -> Result<Report, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(|| resolve(&args).unwrap());
        let _ = tx.send(r.map_err(|e| {
            format!(
                "{:?}",
                e.downcast_ref::<String>()
                    .cloned()
                    .or(e.downcast_ref::<&str>().map(|s| s.to_string()))
            )
        }));
    });
    match rx.recv_timeout(Duration::from_secs(3)) {
        Ok(r) => r,
        Err(_) => Err("TIMEOUT".into()),
    }
}

#[test]
fn probe_min_blocks_overflow() {
    let mut cfg = dsv32();
    cfg["max_position_embeddings"] = json!(u64::MAX);
    let a = ServeArgs {
        hf_config: Some(cfg),
        block_size: Some(1),
        kv_transfer_config: Some(hs()),
        ..Default::default()
    };
    println!(
        "min_blocks overflow: {:?}",
        with_timeout(a).map(|r| r.valid)
    );
}
#[test]
fn probe_hbb_overflow() {
    let mut cfg = dsv32();
    cfg["num_hidden_layers"] = json!(u32::MAX);
    let a = ServeArgs {
        hf_config: Some(cfg),
        block_size: Some(1 << 32),
        kv_transfer_config: Some(hs()),
        ..Default::default()
    };
    println!("hbb overflow: {:?}", with_timeout(a).map(|r| r.valid));
}
#[test]
fn probe_hang() {
    for mml in [
        1_000_000_000i64,
        1_000_000_000_000,
        100_000_000_000_000,
        1_000_000_000_000_000,
        i64::MAX,
    ] {
        let a = ServeArgs {
            hf_config: Some(dsv32()),
            max_model_len: Some(mml),
            kv_transfer_config: Some(hs()),
            ..Default::default()
        };
        let t = Instant::now();
        let r = with_timeout(a);
        println!(
            "mml {mml}: {:?} in {:?}",
            r.as_ref()
                .map(|r| r.errors.iter().map(|e| e.code.as_str()).collect::<Vec<_>>()),
            t.elapsed()
        );
    }
}
#[test]
fn probe_report_null_given() {
    let a = ServeArgs {
        hf_config: Some(dsv32()),
        attention_config: Some(json!({"foo": null})),
        ..Default::default()
    };
    let r = resolve(&a).unwrap();
    let back: Result<Report, _> = serde_json::from_str(&r.to_json());
    println!(
        "report null given roundtrip equal: {:?}",
        back.map(|b| b == r)
    );
    let a = ServeArgs {
        hf_config: Some(Value::Null),
        ..Default::default()
    };
    println!(
        "serveargs null roundtrip: {:?}",
        ServeArgs::from_json(a.to_json()).map(|b| b == a)
    );
}
