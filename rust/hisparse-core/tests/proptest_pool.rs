//! Property tests of the host pool and the residency resolver: random call
//! sequences, invariants checked after every call (the Python stateful test
//! compares the same calls with the NumPy reference).

use hisparse_core::{HostKVPool, PoolError, ResidencyResolver};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashSet};

#[derive(Clone, Debug)]
enum PoolOp {
    Admit(u64),
    Append(usize, u64),
    Free(usize),
}

fn pool_op() -> impl Strategy<Value = PoolOp> {
    prop_oneof![
        (0u64..60).prop_map(PoolOp::Admit),
        (0usize..8, 0u64..20).prop_map(|(i, n)| PoolOp::Append(i, n)),
        (0usize..8).prop_map(PoolOp::Free),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Blocks are conserved, tables are disjoint, lowest free ids go first,
    /// and a failed allocation changes nothing.
    #[test]
    fn pool_invariants(ops in prop::collection::vec(pool_op(), 1..60)) {
        let (blocks, bs) = (20u64, 4u32);
        let mut pool = HostKVPool::new(blocks, bs, 656, 3).unwrap();
        let mut free: BTreeSet<u32> = (0..blocks as u32).collect();
        let mut live: Vec<String> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            let before: Vec<(String, Vec<u32>)> = live
                .iter()
                .map(|id| (id.clone(), pool.block_table(id).unwrap().to_vec()))
                .collect();
            let result = match op {
                PoolOp::Admit(tokens) => {
                    let id = format!("r{n}");
                    let want: Vec<u32> = free.iter().copied().take(pool.blocks_for(tokens) as usize).collect();
                    let r = pool.admit(&id, tokens).map(<[u32]>::to_vec);
                    if let Ok(got) = &r {
                        prop_assert_eq!(got, &want);
                        live.push(id);
                    }
                    r.map(|got| (got, Vec::new()))
                }
                PoolOp::Append(i, tokens) if !live.is_empty() => {
                    let id = live[i % live.len()].clone();
                    pool.append(&id, tokens).map(|got| (got, Vec::new()))
                }
                PoolOp::Free(i) if !live.is_empty() => {
                    let id = live.remove(i % live.len());
                    let table = pool.block_table(&id).unwrap().to_vec();
                    pool.free(&id).map(|_| (Vec::new(), table))
                }
                _ => continue,
            };
            match result {
                Ok((taken, released)) => {
                    for b in &taken {
                        prop_assert!(free.remove(b));
                    }
                    free.extend(released);
                }
                Err(PoolError::HostPoolExhausted(e)) => {
                    prop_assert_eq!(e.free, free.len() as u64);
                    prop_assert!(e.needed > e.free);
                    let after: Vec<(String, Vec<u32>)> = live
                        .iter()
                        .map(|id| (id.clone(), pool.block_table(id).unwrap().to_vec()))
                        .collect();
                    prop_assert_eq!(after, before);
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
            let mut held = HashSet::new();
            for id in &live {
                let table = pool.block_table(id).unwrap();
                prop_assert_eq!(table.len() as u64, pool.blocks_for(pool.num_tokens(id).unwrap()));
                for &b in table {
                    prop_assert!(held.insert(b), "block {} in two tables", b);
                    prop_assert!(!free.contains(&b));
                }
            }
            prop_assert_eq!(held.len() as u64 + free.len() as u64, blocks);
            prop_assert_eq!(pool.stats().blocks_used, held.len() as u64);
            prop_assert_eq!(pool.free_blocks(), free.len() as u64);
        }
    }

    /// The resolver's invariants over random batches (with padding, invalid
    /// rows, duplicates, padded batch rows and MTP rows sharing a state).
    #[test]
    fn resolver_invariants(
        steps in prop::collection::vec(
            (prop::collection::vec(-2i32..5, 0..5), 0usize..=6, prop::collection::vec(-3i64..60, 30)),
            1..25,
        )
    ) {
        let (dbs, topk, rows_limit) = (10u32, 6u32, 50u64);
        let mut r = ResidencyResolver::new(dbs, topk, rows_limit, 656).unwrap();
        for _ in 0..4 {
            r.new_state();
        }
        let (mut hits, mut misses) = (0u64, 0u64);
        for (states, width, pool) in steps {
            let n = states.len();
            let topk_rows: Vec<i64> = pool.iter().copied().cycle().take(n * width).collect();
            let states: Vec<i32> = states;
            let before: Vec<(Vec<i32>, Vec<u16>)> = (0..4)
                .map(|s| (r.slot_rows(s).unwrap().to_vec(), r.lru_order(s).unwrap().to_vec()))
                .collect();
            let valid = |v: i64| (0..rows_limit as i64).contains(&v);
            match r.resolve(&topk_rows, width, &states) {
                Ok(out) => {
                    let mut valid_entries = 0u64;
                    for (b, &s) in states.iter().enumerate() {
                        for c in 0..width {
                            let (v, slot) = (topk_rows[b * width + c], out.slots[b * width + c]);
                            if s >= 0 && valid(v) {
                                valid_entries += 1;
                                // The slot now holds the entry's row.
                                prop_assert_eq!(i64::from(r.slot_rows(s.into()).unwrap()[slot as usize]), v);
                            } else {
                                prop_assert_eq!(slot, -1);
                            }
                        }
                    }
                    prop_assert_eq!(out.hits + out.misses, valid_entries);
                    prop_assert_eq!(out.misses as usize, out.miss_host_rows.len());
                    prop_assert_eq!(*out.miss_offsets.last().unwrap() as u64, out.misses);
                    // The plan is exactly the distinct rows each state did not hold.
                    for s in 0..4i32 {
                        let union: BTreeSet<i64> = states
                            .iter()
                            .enumerate()
                            .filter(|(_, &st)| st == s)
                            .flat_map(|(b, _)| topk_rows[b * width..(b + 1) * width].iter().copied())
                            .filter(|&v| valid(v))
                            .collect();
                        let held: BTreeSet<i64> =
                            before[s as usize].0.iter().map(|&v| i64::from(v)).collect();
                        let expect: BTreeSet<i64> = union.difference(&held).copied().collect();
                        let mut got = Vec::new();
                        for (b, &st) in states.iter().enumerate() {
                            if st == s {
                                let (lo, hi) = (out.miss_offsets[b] as usize, out.miss_offsets[b + 1] as usize);
                                got.extend_from_slice(&out.miss_host_rows[lo..hi]);
                                for &slot in &out.miss_slots[lo..hi] {
                                    // A loaded slot held no row the union hit.
                                    let old = i64::from(before[s as usize].0[slot as usize]);
                                    prop_assert!(old < 0 || !union.contains(&old));
                                }
                            }
                        }
                        prop_assert_eq!(got.len(), expect.len());
                        prop_assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expect);
                    }
                    hits += out.hits;
                    misses += out.misses;
                }
                Err(e) => {
                    prop_assert!(
                        ["unknown_state", "union_exceeds_device_buffer"].contains(&e.code()),
                        "unexpected error {e}"
                    );
                    let after: Vec<(Vec<i32>, Vec<u16>)> = (0..4)
                        .map(|s| (r.slot_rows(s).unwrap().to_vec(), r.lru_order(s).unwrap().to_vec()))
                        .collect();
                    prop_assert_eq!(after, before);
                }
            }
            for s in 0..4 {
                let rows = r.slot_rows(s).unwrap();
                let held: Vec<i32> = rows.iter().copied().filter(|&v| v >= 0).collect();
                let distinct: HashSet<i32> = held.iter().copied().collect();
                prop_assert_eq!(distinct.len(), held.len(), "a row in two slots");
                let mut lru = r.lru_order(s).unwrap().to_vec();
                lru.sort_unstable();
                prop_assert_eq!(lru, (0..dbs as u16).collect::<Vec<_>>());
            }
            let m = r.metrics().snapshot();
            prop_assert_eq!((m.hits, m.misses, m.host_to_device_bytes), (hits, misses, misses * 656));
        }
    }
}
