use hisparse_core::*;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

fn chain(depth: usize) -> Value {
    let mut v = json!({"kv_connector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}});
    for _ in 0..depth {
        let mut extra = Map::new();
        extra.insert("connectors".into(), Value::Array(vec![v]));
        let mut m = Map::new();
        m.insert("kv_connector".into(), json!("MultiConnector"));
        m.insert("kv_role".into(), json!("kv_both"));
        m.insert("kv_connector_extra_config".into(), Value::Object(extra));
        v = Value::Object(m);
    }
    v
}
fn dismantle(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[test]
fn probe_deep() {
    for depth in [1000usize, 2000, 4000, 8000, 16000] {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let v = chain(depth);
                eprintln!("built");
                let args = ServeArgs {
                    kv_transfer_config: Some(v),
                    hf_config: Some(json!({})),
                    ..Default::default()
                };
                eprintln!("args");
                let t = Instant::now();
                let r = resolve(&args).unwrap();
                let el = t.elapsed();
                let codes: Vec<_> = r
                    .errors
                    .iter()
                    .chain(&r.warnings)
                    .map(|e| e.code.as_str())
                    .collect();
                eprintln!("resolved");
                dismantle(args.kv_transfer_config.unwrap());
                drop(r);
                tx.send((el, codes)).unwrap();
            })
            .unwrap();
        println!(
            "depth {depth}: {:?}",
            rx.recv_timeout(Duration::from_secs(60))
        );
    }
}
