//! The residency resolver: per (request, index group) hot-buffer state and the
//! per-step mapping of the indexer's top-k host rows to hot-buffer slots.
//!
//! State (HISPARSE.md §6): `slot_rows[dbs]` (the host row cached in each slot,
//! -1 empty) and the LRU order of the slots, oldest first, as a u16
//! permutation (vLLM / SGLang keep int16 LRU + int32 rows: 6 bytes per slot,
//! and so does this). For each state, a resolve step takes the union of its
//! batch rows' top-k host rows (one row normally, several with MTP) and:
//!
//! 1. entries that are -1 (padding), < -1 or >= `num_host_rows` (invalid)
//!    yield slot -1 and are neither hits nor misses. Rows resident elsewhere
//!    (§6 step 1, e.g. the newest token's GPU page) are the caller's: pass -1
//!    for them and use its own index;
//! 2. a row already in a slot is a hit and returns that slot;
//! 3. the union's misses, in union order (batch row order, then top-k column
//!    order; first occurrence), take the oldest slots that are not hits this
//!    step; each (host row, slot) goes into the miss plan, attributed to the
//!    batch row where the row first appears;
//! 4. new LRU order = untouched slots (oldest first) | just-loaded slots (in
//!    miss order) | hit slots (in their previous relative order; SGLang's
//!    `_expected_lru` in `test_hisparse_*`).
//!
//! A row repeated inside the union (a duplicate within one top-k row, or the
//! same row in two MTP rows) is loaded once; its later occurrences are hits on
//! the same slot. So hits + misses = valid entries, and misses = rows copied.
//! A padded batch row (state index -1) yields all -1 and changes nothing.
//!
//! Work per state and step is O(dbs + union) with a per-thread scratch hash of
//! the union (no per-state index: memory stays at 6 B per slot). States are
//! independent, so a batch with at least [`PARALLEL_MIN_STATES`] states is
//! resolved in parallel with rayon. A call validates everything first, then
//! mutates: an error leaves every state as it was.

use super::error::PoolError;
use super::metrics::HiSparseMetrics;
use rayon::prelude::*;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// vLLM 0.33: device_buffer_size <= iinfo(int16).max + 1 (slots are int16).
pub const MAX_DEVICE_BUFFER_SIZE: u32 = 32768;
/// Batches touching at least this many states are resolved in parallel.
pub const PARALLEL_MIN_STATES: usize = 8;

/// Integer element types accepted for top-k rows and state indices.
pub trait IndexInt: Copy + Send + Sync {
    fn to_i64(self) -> i64;
}
impl IndexInt for i32 {
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
}
impl IndexInt for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}

/// What one resolve call produced. Row-major arrays; `rows` = batch rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolveOutput {
    pub rows: usize,
    pub width: usize,
    /// `[rows, width]` hot-buffer slot of each top-k entry, -1 where invalid or padding.
    pub slots: Vec<i32>,
    /// Miss plan, ordered by batch row then top-k column: host rows to copy (int64).
    pub miss_host_rows: Vec<i64>,
    /// Miss plan: destination slot of each copied row, in the batch row's state.
    pub miss_slots: Vec<i32>,
    /// `[rows]` plan entries attributed to each batch row.
    pub miss_counts: Vec<i32>,
    /// `[rows + 1]` exclusive prefix sum of `miss_counts`: row r's plan is
    /// `[miss_offsets[r], miss_offsets[r + 1])`.
    pub miss_offsets: Vec<i32>,
    /// Valid entries found resident (including repeats of a row in the union).
    pub hits: u64,
    /// Rows loaded (= plan length).
    pub misses: u64,
}

#[derive(Clone, Debug)]
struct HotBufferState {
    slot_rows: Vec<i32>,
    lru: Vec<u16>,
}

impl HotBufferState {
    fn new(dbs: usize) -> Self {
        HotBufferState {
            slot_rows: vec![-1; dbs],
            lru: (0..dbs as u16).collect(),
        }
    }
    fn reset(&mut self) {
        self.slot_rows.fill(-1);
        for (i, s) in self.lru.iter_mut().enumerate() {
            *s = i as u16;
        }
    }
}

/// Hot-buffer residency for many (request, index group) states.
///
/// Not internally locked: methods that change state take `&mut self` (the
/// Python binding wraps it in a mutex). Send + Sync.
#[derive(Debug)]
pub struct ResidencyResolver {
    dbs: u32,
    topk: u32,
    num_host_rows: u64,
    row_bytes: u32,
    states: Vec<Option<HotBufferState>>,
    free_ids: BinaryHeap<Reverse<u32>>,
    metrics: Arc<HiSparseMetrics>,
}

impl ResidencyResolver {
    /// `device_buffer_size` (dbs) slots per state; top-k rows at most `topk`
    /// wide; host rows valid in `[0, num_host_rows)`; `row_bytes` per copied
    /// row for the bytes metric.
    ///
    /// Errors: `topk_exceeds_device_buffer` (dbs < topk, HISPARSE.md §6),
    /// `device_buffer_too_large` (dbs > 32768, §4), `invalid_size` (a zero
    /// size, or num_host_rows > 2^31: rows are kept as int32 like vLLM's, and
    /// 2^31 rows x 656 B is 1.4 TB per layer).
    pub fn new(
        device_buffer_size: u32,
        topk: u32,
        num_host_rows: u64,
        row_bytes: u32,
    ) -> Result<Self, PoolError> {
        if device_buffer_size > MAX_DEVICE_BUFFER_SIZE {
            return Err(PoolError::DeviceBufferTooLarge {
                device_buffer_size: u64::from(device_buffer_size),
                max: u64::from(MAX_DEVICE_BUFFER_SIZE),
            });
        }
        if topk == 0 {
            return Err(PoolError::invalid("topk", 0, ">= 1"));
        }
        if device_buffer_size < topk {
            return Err(PoolError::TopkExceedsDeviceBuffer {
                topk: u64::from(topk),
                device_buffer_size: u64::from(device_buffer_size),
            });
        }
        if num_host_rows == 0 || num_host_rows > 1 << 31 {
            return Err(PoolError::invalid(
                "num_host_rows",
                num_host_rows,
                "1 ..= 2^31",
            ));
        }
        Ok(ResidencyResolver {
            dbs: device_buffer_size,
            topk,
            num_host_rows,
            row_bytes,
            states: Vec::new(),
            free_ids: BinaryHeap::new(),
            metrics: Arc::new(HiSparseMetrics::new()),
        })
    }

    /// Report to `metrics` (e.g. the pool's) instead of the resolver's own.
    pub fn with_metrics(mut self, metrics: Arc<HiSparseMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Arc<HiSparseMetrics> {
        &self.metrics
    }
    pub fn device_buffer_size(&self) -> u32 {
        self.dbs
    }
    pub fn topk(&self) -> u32 {
        self.topk
    }
    pub fn num_host_rows(&self) -> u64 {
        self.num_host_rows
    }
    pub fn row_bytes(&self) -> u32 {
        self.row_bytes
    }
    /// Live states.
    pub fn num_states(&self) -> usize {
        self.states.len() - self.free_ids.len()
    }
    /// Bytes one state keeps: dbs x (4 B row + 2 B LRU entry).
    pub fn state_bytes(&self) -> u64 {
        u64::from(self.dbs) * 6
    }

    /// A new empty state (all slots empty, LRU = slot order); returns its
    /// index. Freed indices are reused, lowest first.
    pub fn new_state(&mut self) -> u32 {
        let dbs = self.dbs as usize;
        if let Some(Reverse(i)) = self.free_ids.pop() {
            self.states[i as usize] = Some(HotBufferState::new(dbs));
            return i;
        }
        self.states.push(Some(HotBufferState::new(dbs)));
        (self.states.len() - 1) as u32
    }

    /// Empty a state (e.g. a request preempted and recomputed). Error `unknown_state`.
    pub fn reset_state(&mut self, state: i64) -> Result<(), PoolError> {
        self.state_mut(state)?.reset();
        Ok(())
    }

    /// Release a state (request finished or aborted). Error `unknown_state`.
    pub fn free_state(&mut self, state: i64) -> Result<(), PoolError> {
        self.state_mut(state)?;
        self.states[state as usize] = None;
        self.free_ids.push(Reverse(state as u32));
        Ok(())
    }

    /// The host row in each slot (-1 empty), `[dbs]`. Error `unknown_state`.
    pub fn slot_rows(&self, state: i64) -> Result<&[i32], PoolError> {
        Ok(&self.state_ref(state, 0)?.slot_rows)
    }

    /// The LRU order of the slots, oldest first, `[dbs]`. Error `unknown_state`.
    pub fn lru_order(&self, state: i64) -> Result<&[u16], PoolError> {
        Ok(&self.state_ref(state, 0)?.lru)
    }

    fn state_ref(&self, state: i64, row: u64) -> Result<&HotBufferState, PoolError> {
        usize::try_from(state)
            .ok()
            .and_then(|i| self.states.get(i))
            .and_then(Option::as_ref)
            .ok_or(PoolError::UnknownState { state, row })
    }

    fn state_mut(&mut self, state: i64) -> Result<&mut HotBufferState, PoolError> {
        usize::try_from(state)
            .ok()
            .and_then(|i| self.states.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(PoolError::UnknownState { state, row: 0 })
    }

    /// Resolve one batch: `topk_rows` is `[rows, width]` row-major host rows
    /// (-1 padding), `state_index` `[rows]` (-1 = padded batch row). Rows that
    /// share a state are resolved as one union (MTP). See the module docs.
    ///
    /// Errors (nothing changes): `topk_too_wide` (width > topk),
    /// `shape_mismatch` (lengths disagree, or rows x width >= 2^31),
    /// `unknown_state`, `union_exceeds_device_buffer`.
    pub fn resolve<R: IndexInt, S: IndexInt>(
        &mut self,
        topk_rows: &[R],
        width: usize,
        state_index: &[S],
    ) -> Result<ResolveOutput, PoolError> {
        let rows = state_index.len();
        if width > self.topk as usize {
            return Err(PoolError::TopkTooWide {
                width: width as u64,
                topk: u64::from(self.topk),
            });
        }
        let entries = rows.checked_mul(width).filter(|&n| n < i32::MAX as usize);
        if entries != Some(topk_rows.len()) {
            return Err(PoolError::ShapeMismatch {
                what: format!(
                    "topk_rows has {} entries, state_index has {rows} rows of width {width} \
                     (rows x width must match and stay below 2^31)",
                    topk_rows.len()
                ),
            });
        }

        // Validate: group batch rows by state, check each union fits.
        let mut group_of_state: HashMap<u32, usize> = HashMap::new();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut group_of_row: Vec<Option<usize>> = vec![None; rows];
        for (r, s) in state_index.iter().enumerate() {
            let s = s.to_i64();
            if s == -1 {
                continue;
            }
            self.state_ref(s, r as u64)?;
            let g = *group_of_state.entry(s as u32).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(r as u32);
            group_of_row[r] = Some(g);
        }
        let limit = self.num_host_rows as i64;
        let row_of = |r: u32| &topk_rows[r as usize * width..(r as usize + 1) * width];
        for (&state, members) in group_of_state.iter().map(|(s, &g)| (s, &groups[g])) {
            let valid = members
                .iter()
                .flat_map(|&r| row_of(r))
                .filter(|v| (0..limit).contains(&v.to_i64()))
                .count();
            if valid > self.dbs as usize {
                let union = SCRATCH.with(|sc| {
                    let mut sc = sc.borrow_mut();
                    sc.count_union(members.iter().map(|&r| row_of(r)), limit, valid)
                });
                if union > self.dbs as usize {
                    return Err(PoolError::UnionExceedsDeviceBuffer {
                        state: u64::from(state),
                        union: union as u64,
                        device_buffer_size: u64::from(self.dbs),
                    });
                }
            }
        }

        // Mutate: nothing below can fail. Hand each group its state and output rows.
        let mut slots = vec![-1i32; rows * width];
        let mut jobs: Vec<Job<'_, R>> = Vec::with_capacity(groups.len());
        let mut job_of_group = vec![usize::MAX; groups.len()];
        for (i, st) in self.states.iter_mut().enumerate() {
            if let (Some(&g), Some(st)) = (group_of_state.get(&(i as u32)), st.as_mut()) {
                job_of_group[g] = jobs.len();
                jobs.push(Job {
                    state: st,
                    inputs: groups[g].iter().map(|&r| row_of(r)).collect(),
                    outputs: Vec::with_capacity(groups[g].len()),
                    loads: Vec::new(),
                    valid: 0,
                });
            }
        }
        if width > 0 {
            for (chunk, g) in slots.chunks_mut(width).zip(&group_of_row) {
                if let Some(job) = g.and_then(|g| jobs.get_mut(job_of_group[g])) {
                    job.outputs.push(chunk);
                }
            }
        }
        let run = |job: &mut Job<'_, R>| SCRATCH.with(|sc| job.run(&mut sc.borrow_mut(), limit));
        if jobs.len() >= PARALLEL_MIN_STATES {
            jobs.par_iter_mut().for_each(run);
        } else {
            jobs.iter_mut().for_each(run);
        }

        // Assemble the miss plan in batch-row order.
        let mut miss_counts = vec![0i32; rows];
        let (mut hits, mut misses) = (0u64, 0u64);
        for (g, members) in groups.iter().enumerate() {
            let Some(job) = jobs.get(job_of_group[g]) else {
                continue;
            };
            for load in &job.loads {
                miss_counts[members[load.member as usize] as usize] += 1;
            }
            misses += job.loads.len() as u64;
            hits += job.valid - job.loads.len() as u64;
        }
        let mut miss_offsets = Vec::with_capacity(rows + 1);
        let mut acc = 0i32;
        miss_offsets.push(0);
        for &c in &miss_counts {
            acc += c; // <= rows x width < 2^31
            miss_offsets.push(acc);
        }
        let n = acc as usize;
        let mut miss_host_rows = vec![0i64; n];
        let mut miss_slots = vec![0i32; n];
        let mut cursor: Vec<i32> = miss_offsets[..rows].to_vec();
        for (g, members) in groups.iter().enumerate() {
            let Some(job) = jobs.get(job_of_group[g]) else {
                continue;
            };
            for load in &job.loads {
                let r = members[load.member as usize] as usize;
                let at = cursor[r] as usize;
                cursor[r] += 1;
                miss_host_rows[at] = i64::from(load.row);
                miss_slots[at] = i32::from(load.slot);
            }
        }
        drop(jobs);
        self.metrics
            .record_resolve(hits, misses, misses * u64::from(self.row_bytes));
        Ok(ResolveOutput {
            rows,
            width,
            slots,
            miss_host_rows,
            miss_slots,
            miss_counts,
            miss_offsets,
            hits,
            misses,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Load {
    /// Index of the batch row within its group.
    member: u32,
    row: i32,
    slot: u16,
}

/// One state's share of a batch: its rows' inputs and output slices.
struct Job<'a, R> {
    state: &'a mut HotBufferState,
    inputs: Vec<&'a [R]>,
    outputs: Vec<&'a mut [i32]>,
    loads: Vec<Load>,
    valid: u64,
}

impl<R: IndexInt> Job<'_, R> {
    fn run(&mut self, sc: &mut Scratch, limit: i64) {
        let st = &mut *self.state;
        let dbs = st.slot_rows.len();
        let total: usize = self.inputs.iter().map(|r| r.len()).sum();
        sc.prepare(dbs);
        let Scratch {
            tab,
            uniq_rows,
            uniq_member,
            uniq_slot,
            entry_u,
            nonhit,
            hit,
        } = sc;
        let mut table = tab.open(total);

        // 1. The union, in batch-row then column order; each entry's union index.
        let mut valid = 0u64;
        for (m, row) in self.inputs.iter().enumerate() {
            for v in row.iter() {
                let v = v.to_i64();
                if (0..limit).contains(&v) {
                    valid += 1;
                    let (u, new) = table.insert(v as i32, uniq_rows.len() as u32);
                    if new {
                        uniq_rows.push(v as i32);
                        uniq_member.push(m as u32);
                    }
                    entry_u.push(u);
                } else {
                    entry_u.push(NONE);
                }
            }
        }
        self.valid = valid;
        let union = uniq_rows.len();
        // One spare entry absorbs the branch-free writes of non-hits.
        uniq_slot.clear();
        uniq_slot.resize(union + 1, -1);

        // 2. Hits: walk the LRU order once, splitting it into non-hits and
        // hits (both kept in LRU order). About half the slots hit,
        // unpredictably, so the common two-probe lookup and the split are
        // branch-free; only the rare longer probe branches.
        let (mut nn, mut nh) = (0usize, 0usize);
        for &s in &st.lru {
            let row = st.slot_rows[s as usize];
            let (mut u, slow) = table.find2(row);
            if slow {
                u = table.find_slow(row);
            }
            let is_hit = u != NONE;
            nonhit[nn] = s;
            hit[nh] = s;
            nn += usize::from(!is_hit);
            nh += usize::from(is_hit);
            // Non-hits write the spare entry `union`.
            let keep = 0usize.wrapping_sub(usize::from(is_hit));
            uniq_slot[(u as usize & keep) | (union & !keep)] = i32::from(s);
        }

        // 3. Misses, in union order, take the oldest non-hit slots.
        let m = union - nh;
        let mut k = 0usize;
        self.loads.clear();
        self.loads.reserve(m);
        for u in 0..union {
            if uniq_slot[u] < 0 {
                let s = nonhit[k];
                k += 1;
                uniq_slot[u] = i32::from(s);
                st.slot_rows[s as usize] = uniq_rows[u];
                self.loads.push(Load {
                    member: uniq_member[u],
                    row: uniq_rows[u],
                    slot: s,
                });
            }
        }

        // 4. New order: untouched (oldest first) | just loaded | hits.
        let lru = &mut st.lru;
        lru[..nn - m].copy_from_slice(&nonhit[m..nn]);
        lru[nn - m..nn].copy_from_slice(&nonhit[..m]);
        lru[nn..].copy_from_slice(&hit[..nh]);

        // Output slots per entry.
        let mut e = 0usize;
        for out in self.outputs.iter_mut() {
            for o in out.iter_mut() {
                let u = entry_u[e] as usize;
                *o = if u < union { uniq_slot[u] } else { -1 };
                e += 1;
            }
        }
    }
}

const NONE: u32 = u32::MAX;

/// Per-thread working memory, reused across calls.
#[derive(Default)]
struct Scratch {
    tab: TableStore,
    uniq_rows: Vec<i32>,
    uniq_member: Vec<u32>,
    uniq_slot: Vec<i32>,
    entry_u: Vec<u32>,
    nonhit: Vec<u16>,
    hit: Vec<u16>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Scratch {
    /// Empty the union buffers; size the split buffers for `dbs` slots.
    fn prepare(&mut self, dbs: usize) {
        if self.nonhit.len() < dbs {
            self.nonhit.resize(dbs, 0);
            self.hit.resize(dbs, 0);
        }
        self.uniq_rows.clear();
        self.uniq_member.clear();
        self.entry_u.clear();
    }

    /// Distinct valid rows of some top-k rows (validation only).
    fn count_union<'a, R: IndexInt + 'a>(
        &mut self,
        rows: impl Iterator<Item = &'a [R]>,
        limit: i64,
        valid: usize,
    ) -> usize {
        let mut table = self.tab.open(valid);
        let mut n = 0u32;
        for row in rows {
            for v in row {
                let v = v.to_i64();
                if (0..limit).contains(&v) && table.insert(v as i32, n).1 {
                    n += 1;
                }
            }
        }
        n as usize
    }
}

/// Backing store of [`Table`]: entries `(host row, gen << 16 | union index)`;
/// entries of older generations are empty, so opening a table is O(1).
#[derive(Default)]
struct TableStore {
    gen: u32,
    entries: Vec<(i32, u32)>,
}

impl TableStore {
    /// An empty table for up to `keys` keys.
    fn open(&mut self, keys: usize) -> Table<'_> {
        // Load factor <= 1/4, so a lookup almost always ends in the first two entries.
        let want = (4 * keys.max(1)).next_power_of_two().max(16);
        if self.entries.len() < want {
            self.entries.resize(want, (0, 0));
        }
        self.gen = (self.gen + 1) & 0xFFFF;
        if self.gen == 0 {
            // Stamps wrapped: clear once every 65535 tables.
            self.entries.fill((0, 0));
            self.gen = 1;
        }
        Table {
            slots: &mut self.entries[..want],
            bits: want.trailing_zeros(),
            tag: self.gen << 16,
        }
    }
}

/// Linear-probing hash set of host rows -> union index for one state's step.
/// Entries whose stamp (high 16 bits) is not `tag` are empty.
struct Table<'a> {
    slots: &'a mut [(i32, u32)],
    bits: u32,
    tag: u32,
}

impl Table<'_> {
    #[inline]
    fn home(&self, key: i32) -> usize {
        // Fibonacci hashing into the table's `bits` high bits.
        ((key as u32).wrapping_mul(0x9E37_79B9) >> (32 - self.bits)) as usize
    }

    /// Union index of `key`, and whether it was added (as `next`).
    #[inline]
    fn insert(&mut self, key: i32, next: u32) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let (k, t) = self.slots[i];
            if t & 0xFFFF_0000 != self.tag {
                self.slots[i] = (key, self.tag | next);
                return (next, true);
            }
            if k == key {
                return (t & 0xFFFF, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// Union index of `key` (NONE if absent) from its first two probes, and
    /// whether those were both other live keys, so that the answer needs
    /// [`Table::find_slow`] (rare at load <= 1/4). Integer arithmetic only:
    /// no branch depends on the key.
    #[inline]
    fn find2(&self, key: i32) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let i = self.home(key);
        let (k0, t0) = self.slots[i];
        let (k1, t1) = self.slots[(i + 1) & mask];
        let dead0 = (t0 & 0xFFFF_0000) ^ self.tag; // 0 iff entry 0 is live
        let dead1 = (t1 & 0xFFFF_0000) ^ self.tag;
        let diff0 = (k0 ^ key) as u32; // 0 iff entry 0 holds key
        let diff1 = (k1 ^ key) as u32;
        let hit0 = u32::from(dead0 | diff0 == 0);
        let hit1 = u32::from(dead0 == 0) & u32::from(dead1 | diff1 == 0);
        let slow = u32::from(dead0 | dead1 == 0) & u32::from(diff0 != 0) & u32::from(diff1 != 0);
        let m0 = 0u32.wrapping_sub(hit0);
        let m1 = 0u32.wrapping_sub(hit1 & (hit0 ^ 1));
        let u = (t0 & 0xFFFF & m0) | (t1 & 0xFFFF & m1) | (NONE & !(m0 | m1));
        (u, slow == 1)
    }

    /// Full linear-probe lookup: union index of `key`, or NONE.
    fn find_slow(&self, key: i32) -> u32 {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let (k, t) = self.slots[i];
            if t & 0xFFFF_0000 != self.tag {
                return NONE;
            }
            if k == key {
                return t & 0xFFFF;
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(dbs: u32, topk: u32) -> ResidencyResolver {
        ResidencyResolver::new(dbs, topk, 1 << 20, 656).unwrap()
    }

    #[test]
    fn cold_start_takes_slots_in_lru_order() {
        let mut r = resolver(8, 4);
        let s = r.new_state() as i32;
        let out = r.resolve(&[10, 11, 12, 13], 4, &[s]).unwrap();
        assert_eq!(out.slots, vec![0, 1, 2, 3]);
        assert_eq!(out.miss_host_rows, vec![10, 11, 12, 13]);
        assert_eq!(out.miss_slots, vec![0, 1, 2, 3]);
        assert_eq!((out.hits, out.misses), (0, 4));
        assert_eq!(out.miss_counts, vec![4]);
        assert_eq!(out.miss_offsets, vec![0, 4]);
        assert_eq!(r.lru_order(0).unwrap(), &[4, 5, 6, 7, 0, 1, 2, 3]);
        // Repeat: all hits, nothing changes.
        let again = r.resolve(&[10, 11, 12, 13], 4, &[s]).unwrap();
        assert_eq!(again.slots, vec![0, 1, 2, 3]);
        assert_eq!((again.hits, again.misses), (4, 0));
        assert!(again.miss_host_rows.is_empty());
        assert_eq!(r.lru_order(0).unwrap(), &[4, 5, 6, 7, 0, 1, 2, 3]);
    }

    #[test]
    fn eviction_takes_oldest_non_hit_slots() {
        let mut r = resolver(4, 2);
        let s = r.new_state() as i32;
        r.resolve(&[1, 2], 2, &[s]).unwrap(); // slots 0,1; lru 2,3,0,1
        r.resolve(&[3, 4], 2, &[s]).unwrap(); // slots 2,3; lru 0,1,2,3
        assert_eq!(r.lru_order(0).unwrap(), &[0, 1, 2, 3]);
        // 1 is a hit (slot 0); 5 takes the oldest non-hit slot: 1 (row 2).
        let out = r.resolve(&[5, 1], 2, &[s]).unwrap();
        assert_eq!(out.slots, vec![1, 0]);
        assert_eq!(r.slot_rows(0).unwrap(), &[1, 5, 3, 4]);
        assert_eq!(r.lru_order(0).unwrap(), &[2, 3, 1, 0]);
    }

    #[test]
    fn padding_invalid_and_padded_rows() {
        let mut r = ResidencyResolver::new(4, 3, 100, 656).unwrap();
        let s = r.new_state() as i64;
        let out = r
            .resolve(&[7i64, -1, 100, 8, 9, 10, -5, 7, 7], 3, &[s, -1, s])
            .unwrap();
        // Row 0: 7 miss, -1 padding, 100 invalid. Row 1 padded. Row 2: -5 invalid, 7 hit twice.
        assert_eq!(out.slots, vec![0, -1, -1, -1, -1, -1, -1, 0, 0]);
        assert_eq!((out.hits, out.misses), (2, 1));
        assert_eq!(out.miss_counts, vec![1, 0, 0]);
    }

    #[test]
    fn mtp_union_never_self_evicts() {
        let mut r = resolver(4, 2);
        let s = r.new_state() as i32;
        let out = r.resolve(&[1, 2, 3, 1], 2, &[s, s]).unwrap();
        assert_eq!(out.slots, vec![0, 1, 2, 0]);
        assert_eq!(out.miss_counts, vec![2, 1]);
        assert_eq!(out.miss_host_rows, vec![1, 2, 3]);
        let e = r.resolve(&[4, 5, 6, 7, 8, 9], 2, &[s, s, s]).unwrap_err();
        assert_eq!(e.code(), "union_exceeds_device_buffer");
        assert_eq!(r.slot_rows(0).unwrap(), &[1, 2, 3, -1]);
    }

    #[test]
    fn errors_change_nothing() {
        let mut r = resolver(4, 2);
        let a = r.new_state() as i32;
        r.resolve(&[1, 2], 2, &[a]).unwrap();
        let before = (
            r.slot_rows(0).unwrap().to_vec(),
            r.lru_order(0).unwrap().to_vec(),
        );
        for (rows, width, states, code) in [
            (vec![3, 4, 5], 3usize, vec![a], "topk_too_wide"),
            (vec![3, 4, 5], 2, vec![a], "shape_mismatch"),
            (vec![3, 4, 5, 6], 2, vec![a, 7], "unknown_state"),
            (vec![3, 4, 5, 6], 2, vec![a, -2], "unknown_state"),
        ] {
            let e = r.resolve(&rows, width, &states).unwrap_err();
            assert_eq!(e.code(), code);
            assert_eq!(
                (
                    r.slot_rows(0).unwrap().to_vec(),
                    r.lru_order(0).unwrap().to_vec()
                ),
                before
            );
        }
        assert_eq!(r.metrics().snapshot().misses, 2);
    }

    #[test]
    fn construction_rules() {
        let code = |dbs, topk, rows| {
            ResidencyResolver::new(dbs, topk, rows, 656)
                .unwrap_err()
                .code()
        };
        assert_eq!(code(2047, 2048, 10), "topk_exceeds_device_buffer");
        assert_eq!(code(32769, 2048, 10), "device_buffer_too_large");
        assert_eq!(code(4096, 0, 10), "invalid_size");
        assert_eq!(code(4096, 2048, 0), "invalid_size");
        assert_eq!(code(4096, 2048, (1 << 31) + 1), "invalid_size");
        assert!(ResidencyResolver::new(32768, 2048, 1 << 31, 656).is_ok());
    }

    #[test]
    fn states_are_reused_lowest_first() {
        let mut r = resolver(4, 2);
        assert_eq!((r.new_state(), r.new_state(), r.new_state()), (0, 1, 2));
        r.free_state(2).unwrap();
        r.free_state(0).unwrap();
        assert_eq!(r.free_state(0).unwrap_err().code(), "unknown_state");
        assert_eq!(r.num_states(), 1);
        assert_eq!((r.new_state(), r.new_state(), r.new_state()), (0, 2, 3));
    }

    #[test]
    fn parallel_matches_sequential() {
        // 16 states in one batch (parallel) vs one state per call (sequential).
        let mut a = resolver(64, 32);
        let mut b = resolver(64, 32);
        let ids: Vec<i32> = (0..16).map(|_| a.new_state() as i32).collect();
        for _ in 0..16 {
            b.new_state();
        }
        let mut x = 12345u64;
        for _step in 0..20 {
            let rows: Vec<i32> = (0..16 * 32)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 200) as i32 - 1
                })
                .collect();
            let out = a.resolve(&rows, 32, &ids).unwrap();
            for (i, &s) in ids.iter().enumerate() {
                let one = b.resolve(&rows[i * 32..(i + 1) * 32], 32, &[s]).unwrap();
                assert_eq!(&out.slots[i * 32..(i + 1) * 32], &one.slots[..]);
                let (lo, hi) = (
                    out.miss_offsets[i] as usize,
                    out.miss_offsets[i + 1] as usize,
                );
                assert_eq!(&out.miss_host_rows[lo..hi], &one.miss_host_rows[..]);
                assert_eq!(&out.miss_slots[lo..hi], &one.miss_slots[..]);
            }
        }
    }
}
