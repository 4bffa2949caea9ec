//! Times the residency resolver alone (no Python): batch 64, top-k 2048,
//! dbs 4096, one call per layer, 90 % overlap between steps.
//! `cargo run --release -p hisparse-core --example resolver_timing`
//! (`LAYERS=2 SINGLE=1`: one state per call, the benchmark's one-core row).

use hisparse_core::ResidencyResolver;
use std::time::Instant;

/// Untimed steps: the hot buffers are full (evicting) from step 10 on.
const WARMUP: usize = 12;

fn main() {
    let layers: usize = std::env::var("LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(61);
    let single = std::env::var("SINGLE").is_ok_and(|v| v == "1");
    let (batch, topk, dbs, steps) = (64usize, 2048usize, 4096u32, 30usize);
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
    // Each request's top-k: distinct random rows of its own 32k-row range (as
    // the benchmark's pool rows); each step 10 % are replaced by rows not in it.
    const CONTEXT: u64 = 32768;
    let mut held: Vec<std::collections::HashSet<i32>> = vec![Default::default(); batch];
    let mut topk_rows = vec![0i32; batch * topk];
    let fresh = |b: usize,
                 held: &mut std::collections::HashSet<i32>,
                 rand: &mut dyn FnMut(u64) -> u64| loop {
        let v = (b as u64 * CONTEXT + rand(CONTEXT)) as i32;
        if held.insert(v) {
            return v;
        }
    };
    for (b, held) in held.iter_mut().enumerate() {
        for j in 0..topk {
            topk_rows[b * topk + j] = fresh(b, held, &mut rand);
        }
    }
    let mut total = 0.0;
    for step in 0..steps {
        for (b, held) in held.iter_mut().enumerate() {
            for _ in 0..topk / 10 {
                let j = b * topk + rand(topk as u64) as usize;
                let v = fresh(b, held, &mut rand);
                held.remove(&topk_rows[j]);
                topk_rows[j] = v;
            }
        }
        let t0 = Instant::now();
        for layer_states in &states {
            if single {
                for (b, s) in layer_states.iter().enumerate() {
                    let rows = &topk_rows[b * topk..(b + 1) * topk];
                    r.resolve(rows, topk, std::slice::from_ref(s)).unwrap();
                }
            } else {
                r.resolve(&topk_rows, topk, layer_states).unwrap();
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        if step >= WARMUP {
            total += dt;
        }
        println!("step {step}: {:.2} ms", dt * 1e3);
    }
    let per_step = total / (steps - WARMUP) as f64;
    println!(
        "{:.1} M top-k entries/s, {:.1} us per state and step",
        (batch * topk * layers) as f64 / per_step / 1e6,
        per_step / (batch * layers) as f64 * 1e6
    );
}
