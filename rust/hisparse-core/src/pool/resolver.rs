//! The residency resolver: per (request, index group) hot-buffer state and the
//! per-step mapping of the indexer's top-k host rows to hot-buffer slots.
//!
//! State (HISPARSE.md §6): `slot_rows[dbs]` (the host row cached in each slot,
//! -1 empty) and the LRU order of the slots, oldest first, as a u16
//! permutation (vLLM / SGLang keep int16 LRU + int32 rows: 6 bytes per slot),
//! plus a host row -> slot index (u16 linear-probing table of 4 x dbs entries:
//! 8 more bytes per slot, 14 in all) kept exact across steps, so a step never
//! rebuilds it. For each state, a resolve step takes the union of its batch rows'
//! top-k host rows (one row normally, several with MTP) and:
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
//! Work per state and step: one index lookup per top-k entry, one
//! branch-free pass over the LRU order (dbs slots) and an index update per
//! miss; the per-step buffers are per thread. States are independent, so a
//! batch with at least [`PARALLEL_MIN_STATES`] states is resolved in parallel
//! with rayon. A call validates everything first, then mutates: an error
//! leaves every state as it was.
//!
//! The Triton resolver (`kernels/resolver.py`) is this function on the GPU,
//! bit for bit; its device state is `slot_rows` + the LRU order alone (6 B
//! per slot). [`ResidencyResolver::import_state`] takes such a state (and
//! rebuilds the index), `slot_rows` / `lru_order` export one, so a request
//! moves between the two and continues identically.

use super::error::PoolError;
use super::metrics::HiSparseMetrics;
use rayon::prelude::*;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// vLLM 0.33: device_buffer_size <= iinfo(int16).max + 1 (slots are int16).
pub const MAX_DEVICE_BUFFER_SIZE: u32 = 32768;
/// Batches touching at least this many states are resolved in parallel.
pub const PARALLEL_MIN_STATES: usize = 8;
/// Most top-k entries (rows x width) one resolve call takes: 8x a 4096-row
/// batch of 4096-wide rows, and about a second of work, so a call returns
/// (and Ctrl-C is seen) within about a second. Error `batch_too_large`.
pub const MAX_RESOLVE_ENTRIES: usize = 1 << 26;

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
impl IndexInt for i16 {
    fn to_i64(self) -> i64 {
        i64::from(self)
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
    /// host row -> slot: linear-probing table of slot ids ([`EMPTY`] = free
    /// entry), keyed through `slot_rows`; holds exactly the non-empty slots.
    index: Vec<u16>,
}

/// A free [`HotBufferState::index`] entry (slots are < 32768).
const EMPTY: u16 = u16::MAX;

/// Index entries per state: a power of two >= 4 x dbs, so the load stays
/// <= 1/4 and almost every lookup ends at its first probe. (At load 1/2 the
/// longer probe runs cost about 1.7x the time per step on random host rows.)
fn index_len(dbs: usize) -> usize {
    (4 * dbs).next_power_of_two()
}

impl HotBufferState {
    fn new(dbs: usize) -> Self {
        HotBufferState {
            slot_rows: vec![-1; dbs],
            lru: (0..dbs as u16).collect(),
            index: vec![EMPTY; index_len(dbs)],
        }
    }
    fn reset(&mut self) {
        self.slot_rows.fill(-1);
        for (i, s) in self.lru.iter_mut().enumerate() {
            *s = i as u16;
        }
        self.index.fill(EMPTY);
    }

    #[inline]
    fn home(&self, row: i32) -> usize {
        fib_hash(row, self.index.len().trailing_zeros())
    }

    /// Put `row` in `slot` (which must be empty), keeping the index exact.
    fn load(&mut self, slot: u16, row: i32) {
        self.slot_rows[usize::from(slot)] = row;
        let mask = self.index.len() - 1;
        let mut i = self.home(row);
        while self.index[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.index[i] = slot;
    }

    /// Empty `slot`, deleting its row from the index by backward shift (no
    /// tombstones, so lookups stay short however many rows come and go).
    fn evict(&mut self, slot: u16) {
        let row = self.slot_rows[usize::from(slot)];
        if row < 0 {
            return;
        }
        let mask = self.index.len() - 1;
        let mut hole = self.home(row);
        while self.index[hole] != slot {
            hole = (hole + 1) & mask;
        }
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let e = self.index[i];
            if e == EMPTY {
                break;
            }
            // Move e back into the hole unless its home lies cyclically in (hole, i].
            let home = self.home(self.slot_rows[usize::from(e)]);
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.index[hole] = e;
                hole = i;
            }
        }
        self.index[hole] = EMPTY;
        self.slot_rows[usize::from(slot)] = -1;
    }
}

/// The slot holding `row` in a state's `index` over `slot_rows`, or [`EMPTY`].
/// Free-standing so that a caller's loop keeps both slices in registers.
#[inline]
fn find_slot(index: &[u16], slot_rows: &[i32], row: i32) -> u16 {
    let mask = index.len() - 1;
    let mut i = fib_hash(row, index.len().trailing_zeros());
    loop {
        let e = index[i & mask];
        if e == EMPTY || slot_rows.get(usize::from(e)) == Some(&row) {
            return e;
        }
        i += 1;
    }
}

/// Fibonacci hashing of a host row into `bits` bits.
#[inline]
fn fib_hash(key: i32, bits: u32) -> usize {
    ((key as u32).wrapping_mul(0x9E37_79B9) >> (32 - bits)) as usize
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
    /// Bytes one state keeps: dbs x (4 B row + 2 B LRU entry) + the row ->
    /// slot index, 2 B per entry, a power of two >= 4 x dbs entries (14 B per
    /// slot when dbs is a power of two).
    pub fn state_bytes(&self) -> u64 {
        let dbs = self.dbs as usize;
        (dbs * 6 + index_len(dbs) * 2) as u64
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

    /// Replace a state's contents with `slot_rows` (`[dbs]`, -1 empty) and
    /// `lru_order` (`[dbs]` slots, oldest first), e.g. a state exported from
    /// the Triton resolver's device tensors, so that a request continues here
    /// exactly as it would have there. The row -> slot index is rebuilt.
    ///
    /// Errors (nothing changes): `unknown_state`; `shape_mismatch` (a length
    /// other than dbs); `invalid_resolver_state`: a row outside -1 or
    /// `[0, num_host_rows)`, a host row in two slots, or an LRU order that is
    /// not a permutation of `0..dbs`.
    pub fn import_state<R: IndexInt, L: IndexInt>(
        &mut self,
        state: i64,
        slot_rows: &[R],
        lru_order: &[L],
    ) -> Result<(), PoolError> {
        self.state_ref(state, 0)?;
        let dbs = self.dbs as usize;
        if slot_rows.len() != dbs || lru_order.len() != dbs {
            return Err(PoolError::ShapeMismatch {
                what: format!(
                    "slot_rows has {} entries and lru_order {}; both must have device_buffer_size = {dbs}",
                    slot_rows.len(),
                    lru_order.len()
                ),
            });
        }
        let bad = |what: String| PoolError::InvalidResolverState { state, what };
        let limit = self.num_host_rows as i64;
        let mut held: Vec<(i64, usize)> = Vec::with_capacity(dbs);
        for (slot, v) in slot_rows.iter().enumerate() {
            let v = v.to_i64();
            if v == -1 {
                continue;
            }
            if !(0..limit).contains(&v) {
                return Err(bad(format!(
                    "slot_rows[{slot}] = {v} is neither -1 (empty) nor a host row in [0, {limit})"
                )));
            }
            held.push((v, slot));
        }
        held.sort_unstable();
        if let Some(w) = held.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(bad(format!(
                "host row {} is in slots {} and {} (a row is cached at most once)",
                w[0].0, w[0].1, w[1].1
            )));
        }
        let mut seen = vec![false; dbs];
        for (i, s) in lru_order.iter().enumerate() {
            let s = s.to_i64();
            let ok = usize::try_from(s).ok().filter(|&s| s < dbs);
            match ok {
                Some(s) if !seen[s] => seen[s] = true,
                Some(_) => {
                    return Err(bad(format!(
                        "lru_order[{i}] = {s} repeats a slot (lru_order must be a permutation of 0..{dbs})"
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "lru_order[{i}] = {s} is not a slot in [0, {dbs})"
                    )))
                }
            }
        }

        // Mutate: nothing below can fail.
        let st = self.state_mut(state)?;
        st.reset();
        for (i, s) in lru_order.iter().enumerate() {
            st.lru[i] = s.to_i64() as u16; // < dbs <= 32768
        }
        for &(v, slot) in &held {
            st.load(slot as u16, v as i32); // < num_host_rows <= 2^31
        }
        Ok(())
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
    /// `shape_mismatch` (lengths disagree), `batch_too_large` (rows x width
    /// > [`MAX_RESOLVE_ENTRIES`]), `unknown_state`, `union_exceeds_device_buffer`.
    pub fn resolve<R: IndexInt, S: IndexInt>(
        &mut self,
        topk_rows: &[R],
        width: usize,
        state_index: &[S],
    ) -> Result<ResolveOutput, PoolError> {
        let rows = state_index.len();
        self.check_shape(topk_rows.len(), width, rows)?;

        // Validate: group batch rows by state (groups in state order, members
        // in row order), check each union fits.
        let mut keyed: Vec<(u32, u32)> = Vec::with_capacity(rows);
        for (r, s) in state_index.iter().enumerate() {
            let s = s.to_i64();
            if s != -1 {
                self.state_ref(s, r as u64)?;
                keyed.push((s as u32, r as u32));
            }
        }
        keyed.sort_unstable();
        let groups: Vec<&[(u32, u32)]> = keyed.chunk_by(|a, b| a.0 == b.0).collect();
        let limit = self.num_host_rows as i64;
        let row_of = |r: u32| &topk_rows[r as usize * width..(r as usize + 1) * width];
        self.check_unions(&groups, width, limit, row_of)?;

        // Mutate: nothing below can fail. Hand each group its state and output rows.
        let mut slots = vec![-1i32; rows * width];
        let mut jobs: Vec<Job<'_, R>> = Vec::with_capacity(groups.len());
        let mut job_of_row = vec![u32::MAX; rows];
        let mut states = self.states.iter_mut();
        let mut next = 0usize;
        for members in &groups {
            let state = members[0].0 as usize;
            // Groups are in state order: skip ahead (O(1) on a slice iterator).
            let Some(Some(st)) = states.nth(state - next) else {
                continue; // validated above
            };
            next = state + 1;
            for &(_, r) in members.iter() {
                job_of_row[r as usize] = jobs.len() as u32;
            }
            jobs.push(Job {
                state: st,
                members,
                inputs: members.iter().map(|&(_, r)| row_of(r)).collect(),
                outputs: Vec::with_capacity(members.len()),
                loads: Vec::new(),
                valid: 0,
            });
        }
        if width > 0 {
            for (chunk, &j) in slots.chunks_mut(width).zip(&job_of_row) {
                if let Some(job) = jobs.get_mut(j as usize) {
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

        let MissPlan {
            miss_counts,
            miss_offsets,
            miss_host_rows,
            miss_slots,
            hits,
            misses,
        } = miss_plan(&jobs, rows);
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

    /// `resolve`'s shape checks: the width against topk, rows x width
    /// against the entries given, and the batch bound.
    fn check_shape(&self, entries: usize, width: usize, rows: usize) -> Result<(), PoolError> {
        if width > self.topk as usize {
            return Err(PoolError::TopkTooWide {
                width: width as u64,
                topk: u64::from(self.topk),
            });
        }
        if rows.checked_mul(width) != Some(entries) {
            return Err(PoolError::ShapeMismatch {
                what: format!(
                    "topk_rows has {} entries, state_index has {rows} rows of width {width} \
                 (rows x width must match)",
                    entries
                ),
            });
        }
        if entries > MAX_RESOLVE_ENTRIES {
            return Err(PoolError::BatchTooLarge {
                what: "topk_rows (rows x width)",
                entries: entries as u64,
                max: MAX_RESOLVE_ENTRIES as u64,
            });
        }
        Ok(())
    }

    /// `resolve`'s union check: each state's rows (one group, MTP) must
    /// fit the device buffer as one union of valid host rows.
    fn check_unions<'r, R: IndexInt + 'r>(
        &self,
        groups: &[&[(u32, u32)]],
        width: usize,
        limit: i64,
        row_of: impl Fn(u32) -> &'r [R],
    ) -> Result<(), PoolError> {
        for members in groups {
            if members.len() * width <= self.dbs as usize {
                continue; // e.g. any single row: width <= topk <= dbs
            }
            let valid = members
                .iter()
                .flat_map(|&(_, r)| row_of(r))
                .filter(|v| (0..limit).contains(&v.to_i64()))
                .count();
            if valid > self.dbs as usize {
                let union = SCRATCH.with(|sc| {
                    let mut sc = sc.borrow_mut();
                    sc.count_union(members.iter().map(|&(_, r)| row_of(r)), limit, valid)
                });
                if union > self.dbs as usize {
                    return Err(PoolError::UnionExceedsDeviceBuffer {
                        state: u64::from(members[0].0),
                        union: union as u64,
                        device_buffer_size: u64::from(self.dbs),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The miss plan of a resolve, in batch-row order: counts, CSR offsets,
/// the host rows to load and their slots, and the hit/miss totals.
struct MissPlan {
    miss_counts: Vec<i32>,
    miss_offsets: Vec<i32>,
    miss_host_rows: Vec<i64>,
    miss_slots: Vec<i32>,
    hits: u64,
    misses: u64,
}

fn miss_plan<R>(jobs: &[Job<'_, R>], rows: usize) -> MissPlan {
    let mut miss_counts = vec![0i32; rows];
    let (mut hits, mut misses) = (0u64, 0u64);
    for job in jobs {
        for load in &job.loads {
            miss_counts[job.members[load.member as usize].1 as usize] += 1;
        }
        misses += job.loads.len() as u64;
        hits += job.valid - job.loads.len() as u64;
    }
    let mut miss_offsets = Vec::with_capacity(rows + 1);
    let mut acc = 0i32;
    miss_offsets.push(0);
    for &c in &miss_counts {
        acc += c; // <= rows x width <= 2^26
        miss_offsets.push(acc);
    }
    let n = acc as usize;
    let mut miss_host_rows = vec![0i64; n];
    let mut miss_slots = vec![0i32; n];
    let mut cursor: Vec<i32> = miss_offsets[..rows].to_vec();
    for job in jobs {
        for load in &job.loads {
            let r = job.members[load.member as usize].1 as usize;
            let at = cursor[r] as usize;
            cursor[r] += 1;
            miss_host_rows[at] = i64::from(load.row);
            miss_slots[at] = i32::from(load.slot);
        }
    }
    MissPlan {
        miss_counts,
        miss_offsets,
        miss_host_rows,
        miss_slots,
        hits,
        misses,
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
    /// (state, batch row) of each of the state's batch rows, in row order.
    members: &'a [(u32, u32)],
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
            miss_rows,
            miss_member,
            miss_entries,
            is_hit,
            nonhit,
            hit,
        } = sc;
        let mut misses = tab.open(total);

        // 1. Each entry: a resident row is a hit (its slot is marked); other
        // rows are the union's misses, numbered in union order.
        let mut valid = 0u64;
        let (index, slot_rows) = (&st.index[..], &st.slot_rows[..]);
        let is_hit = &mut is_hit[..dbs];
        for (m, (row, out)) in self.inputs.iter().zip(self.outputs.iter_mut()).enumerate() {
            for (c, (v, o)) in row.iter().zip(out.iter_mut()).enumerate() {
                let v = v.to_i64();
                if !(0..limit).contains(&v) {
                    *o = -1;
                    continue;
                }
                valid += 1;
                let s = find_slot(index, slot_rows, v as i32);
                if let Some(h) = is_hit.get_mut(usize::from(s)) {
                    *o = i32::from(s);
                    *h = true;
                } else {
                    let (u, new) = misses.insert(v as i32, miss_rows.len() as u32);
                    if new {
                        miss_rows.push(v as i32);
                        miss_member.push(m as u32);
                    }
                    miss_entries.push((m as u32, c as u32, u));
                }
            }
        }
        self.valid = valid;

        // 2. Split the LRU order into non-hits and hits, both kept in LRU
        // order (branch-free: about half the slots hit, unpredictably), and
        // clear the marks for the next call.
        let (mut nn, mut nh) = (0usize, 0usize);
        for &s in &st.lru {
            let h = std::mem::take(&mut is_hit[usize::from(s)]);
            nonhit[nn] = s;
            hit[nh] = s;
            nn += usize::from(!h);
            nh += usize::from(h);
        }

        // 3. Misses, in union order, take the oldest non-hit slots.
        let m = miss_rows.len();
        self.loads.clear();
        self.loads.reserve(m);
        for (u, (&row, &member)) in miss_rows.iter().zip(miss_member.iter()).enumerate() {
            let s = nonhit[u];
            st.evict(s);
            st.load(s, row);
            self.loads.push(Load {
                member,
                row,
                slot: s,
            });
        }
        for &(m, c, u) in miss_entries.iter() {
            self.outputs[m as usize][c as usize] = i32::from(nonhit[u as usize]);
        }

        // 4. New order: untouched (oldest first) | just loaded | hits.
        let lru = &mut st.lru;
        lru[..nn - m].copy_from_slice(&nonhit[m..nn]);
        lru[nn - m..nn].copy_from_slice(&nonhit[..m]);
        lru[nn..].copy_from_slice(&hit[..nh]);
    }
}

/// Per-thread working memory, reused across calls.
#[derive(Default)]
struct Scratch {
    tab: TableStore,
    /// The union's misses in union order, and the group member of each.
    miss_rows: Vec<i32>,
    miss_member: Vec<u32>,
    /// (member, column, miss number) of each entry that missed.
    miss_entries: Vec<(u32, u32, u32)>,
    /// Per slot: a hit this step (all false between calls).
    is_hit: Vec<bool>,
    nonhit: Vec<u16>,
    hit: Vec<u16>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Scratch {
    /// Empty the miss buffers; size the per-slot buffers for `dbs` slots.
    fn prepare(&mut self, dbs: usize) {
        if self.nonhit.len() < dbs {
            self.nonhit.resize(dbs, 0);
            self.hit.resize(dbs, 0);
            self.is_hit.resize(dbs, false);
        }
        self.miss_rows.clear();
        self.miss_member.clear();
        self.miss_entries.clear();
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

/// Linear-probing hash set of host rows -> their number in order of first
/// insertion, for one state's step (the union's misses; validation's union).
/// Entries whose stamp (high 16 bits) is not `tag` are empty.
struct Table<'a> {
    slots: &'a mut [(i32, u32)],
    bits: u32,
    tag: u32,
}

impl Table<'_> {
    /// Union index of `key`, and whether it was added (as `next`).
    #[inline]
    fn insert(&mut self, key: i32, next: u32) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let mut i = fib_hash(key, self.bits);
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

    /// The index holds exactly the non-empty slots, each findable from its row.
    fn assert_index_exact(r: &ResidencyResolver, state: usize) {
        let st = r.states[state].as_ref().unwrap();
        let held = st.slot_rows.iter().filter(|&&v| v >= 0).count();
        let entries = st.index.iter().filter(|&&e| e != EMPTY).count();
        assert_eq!(entries, held);
        for (slot, &row) in st.slot_rows.iter().enumerate() {
            if row >= 0 {
                assert_eq!(find_slot(&st.index, &st.slot_rows, row), slot as u16);
            }
        }
    }

    #[test]
    fn index_stays_exact_under_churn() {
        // Few host rows, heavy eviction: long probe runs that wrap around the
        // table, so backward-shift deletion is exercised; also a reset.
        let mut r = ResidencyResolver::new(24, 16, 64, 656).unwrap();
        let s = r.new_state() as i32;
        let mut x = 7u64;
        for step in 0..400 {
            let rows: Vec<i32> = (0..16)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 66) as i32 - 1
                })
                .collect();
            let out = r.resolve(&rows, 16, &[s]).unwrap();
            for (&v, &slot) in rows.iter().zip(&out.slots) {
                if (0..64).contains(&v) {
                    assert_eq!(r.slot_rows(0).unwrap()[slot as usize], v);
                }
            }
            assert_index_exact(&r, 0);
            if step == 200 {
                r.reset_state(0).unwrap();
                assert_index_exact(&r, 0);
            }
        }
    }

    #[test]
    fn an_imported_state_continues_identically() {
        // Resolver a runs a trace; halfway, its state moves to resolver b
        // (fresh, different state id); both continue and must agree.
        let mut a = ResidencyResolver::new(24, 16, 64, 656).unwrap();
        let mut b = ResidencyResolver::new(24, 16, 64, 656).unwrap();
        let sa = a.new_state() as i64;
        b.new_state();
        let sb = b.new_state() as i64;
        let mut x = 99u64;
        let step = |r: &mut ResidencyResolver, s: i64, x: &mut u64| {
            let rows: Vec<i32> = (0..16)
                .map(|_| {
                    *x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((*x >> 33) % 66) as i32 - 1
                })
                .collect();
            r.resolve(&rows, 16, &[s]).unwrap()
        };
        for _ in 0..50 {
            step(&mut a, sa, &mut x);
        }
        let rows = a.slot_rows(sa).unwrap().to_vec();
        let lru: Vec<i16> = a.lru_order(sa).unwrap().iter().map(|&v| v as i16).collect();
        b.import_state(sb, &rows, &lru).unwrap();
        assert_index_exact(&b, sb as usize);
        for _ in 0..50 {
            let (mut xa, mut xb) = (x, x);
            let oa = step(&mut a, sa, &mut xa);
            let ob = step(&mut b, sb, &mut xb);
            x = xa;
            assert_eq!(oa, ob);
            assert_eq!(a.slot_rows(sa).unwrap(), b.slot_rows(sb).unwrap());
            assert_eq!(a.lru_order(sa).unwrap(), b.lru_order(sb).unwrap());
        }
    }

    #[test]
    fn a_bad_import_changes_nothing() {
        let mut r = ResidencyResolver::new(4, 2, 100, 656).unwrap();
        let s = r.new_state() as i64;
        r.resolve(&[5, 6], 2, &[s]).unwrap();
        let before = (
            r.slot_rows(0).unwrap().to_vec(),
            r.lru_order(0).unwrap().to_vec(),
        );
        let cases: [(&[i64], &[i64], &str); 7] = [
            (&[1, 2, 3], &[0, 1, 2, 3], "shape_mismatch"),
            (&[1, 2, 3, -1], &[0, 1, 2], "shape_mismatch"),
            (&[1, 100, -1, -1], &[0, 1, 2, 3], "invalid_resolver_state"),
            (&[1, -2, -1, -1], &[0, 1, 2, 3], "invalid_resolver_state"),
            (&[7, 8, 7, -1], &[0, 1, 2, 3], "invalid_resolver_state"),
            (&[1, 2, 3, 4], &[0, 1, 1, 3], "invalid_resolver_state"),
            (&[1, 2, 3, 4], &[0, 1, 2, 4], "invalid_resolver_state"),
        ];
        for (rows, lru, code) in cases {
            assert_eq!(r.import_state(s, rows, lru).unwrap_err().code(), code);
            assert_eq!(
                (
                    r.slot_rows(0).unwrap().to_vec(),
                    r.lru_order(0).unwrap().to_vec()
                ),
                before
            );
        }
        let e = r
            .import_state(3, &[-1i64; 4], &[0i64, 1, 2, 3])
            .unwrap_err();
        assert_eq!(e.code(), "unknown_state");
        // Empty slots may sit anywhere in the LRU order; the index is rebuilt.
        r.import_state(s, &[-1i32, 9, -1, 4], &[3i16, 0, 2, 1])
            .unwrap();
        assert_index_exact(&r, 0);
        let out = r.resolve(&[4, 7], 2, &[s]).unwrap();
        assert_eq!(out.slots, vec![3, 0]);
        assert_eq!(r.lru_order(0).unwrap(), &[2, 1, 0, 3]);
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
