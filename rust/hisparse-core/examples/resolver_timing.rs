//! Times the residency resolver alone (no Python): batch 64, top-k 2048,
//! dbs 4096, one call per layer, 90 % overlap between steps.
//! `cargo run --release -p hisparse-core --example resolver_timing`

use hisparse_core::ResidencyResolver;
use std::time::Instant;

fn main() {
    let layers: usize = std::env::var("LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(61);
    let (batch, topk, dbs, steps) = (64usize, 2048usize, 4096u32, 10usize);
    let mut r = ResidencyResolver::new(dbs, topk as u32, 1 << 31, 656).unwrap();
    let states: Vec<Vec<i32>> = (0..layers)
        .map(|_| (0..batch).map(|_| r.new_state() as i32).collect())
        .collect();
    let mut x = 1u64;
    let mut rand = move |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    // Each (request) top-k: 90 % kept, 10 % replaced by new rows each step.
    let mut topk_rows: Vec<i32> = (0..batch * topk).map(|i| i as i32).collect();
    let mut next = (batch * topk) as i32;
    let mut total = 0.0;
    for step in 0..steps {
        for b in 0..batch {
            for _ in 0..topk / 10 {
                let j = rand(topk as u64) as usize;
                topk_rows[b * topk + j] = next;
                next += 1;
            }
        }
        let t0 = Instant::now();
        for layer_states in &states {
            r.resolve(&topk_rows, topk, layer_states).unwrap();
        }
        let dt = t0.elapsed().as_secs_f64();
        if step > 0 {
            total += dt;
        }
        println!("step {step}: {:.2} ms", dt * 1e3);
    }
    let per_step = total / (steps - 1) as f64;
    println!(
        "{:.1} M top-k entries/s",
        (batch * topk * layers) as f64 / per_step / 1e6
    );
}
