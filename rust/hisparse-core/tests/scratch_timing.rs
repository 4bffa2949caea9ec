mod common;
use common::*;
use hisparse_core::resolve;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
#[test]
fn slowest() {
    let mut runner = TestRunner::new(config(1024));
    let strat = arb_args();
    let mut worst = (0u128, String::new());
    for _ in 0..1024 {
        let args = strat.new_tree(&mut runner).unwrap().current();
        let t = std::time::Instant::now();
        let _ = resolve(&args);
        let ms = t.elapsed().as_millis();
        if ms > worst.0 {
            worst = (ms, serde_json::to_string(&args.to_json()).unwrap());
        }
    }
    println!("worst {} ms", worst.0);
    std::fs::write("/tmp/advice/slow.json", &worst.1).unwrap();
}
