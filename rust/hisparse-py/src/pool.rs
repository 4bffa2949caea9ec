//! Python classes over the core's host pool, pool layout, residency resolver
//! and metrics. Conversions and error mapping only.
//!
//! Arrays: C-contiguous int32 / int64 ndarrays are borrowed as they are; other
//! inputs go through `numpy.ascontiguousarray` (no copy for a
//! contiguous numpy array or CPU torch tensor) and must be int32 or int64;
//! outputs are numpy arrays that own the Rust vectors (no copy). The GIL is
//! released while the resolver works. Each class keeps its core value behind a
//! mutex, so calls from several threads are serialized and each call is atomic.

use crate::results::HiSparseSettings;
use hisparse_core::path::is_identifier;
use hisparse_core::pool::{
    HiSparseMetrics as CoreMetrics, HostKVPool as CorePool, IndexInt, PoolError,
    PoolLayout as CoreLayout, ResidencyResolver as CoreResolver,
};
use hisparse_core::ResolvedHiSparse;
use numpy::{
    dtype, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Core error -> `hisparse_rs.exceptions.PoolError` / `HostPoolExhausted`
/// (Python classes, so they carry typed attributes).
pub fn pool_err(py: Python<'_>, e: PoolError) -> PyErr {
    let raise = || -> PyResult<PyErr> {
        let module = py.import("hisparse_rs.exceptions")?;
        let value = match &e {
            PoolError::HostPoolExhausted(x) => {
                module
                    .getattr("HostPoolExhausted")?
                    .call1((x.needed, x.free, e.to_string()))?
            }
            _ => module
                .getattr("PoolError")?
                .call1((e.code(), e.to_string()))?,
        };
        Ok(PyErr::from_value(value))
    };
    raise().unwrap_or_else(|err| err)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Core calls validate before they mutate, so a panic cannot leave a half-done change.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An int32 or int64 array, borrowed read-only.
enum IntArray<'py> {
    I32(PyReadonlyArrayDyn<'py, i32>),
    I64(PyReadonlyArrayDyn<'py, i64>),
}

impl IntArray<'_> {
    fn shape(&self) -> Vec<usize> {
        match self {
            IntArray::I32(a) => a.shape().to_vec(),
            IntArray::I64(a) => a.shape().to_vec(),
        }
    }
}

/// `numpy.ascontiguousarray(obj)` as int32 / int64; TypeError for other dtypes.
fn int_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<IntArray<'py>> {
    let py = obj.py();
    let borrow_err = |e| PyValueError::new_err(format!("{what}: {e}"));
    // Fast path (the per-step case): a C-contiguous int32 / int64 ndarray is
    // used as it is, without the Python-level ascontiguousarray call.
    if let Ok(a) = obj.cast::<PyArrayDyn<i32>>() {
        if a.is_c_contiguous() {
            return Ok(IntArray::I32(a.try_readonly().map_err(borrow_err)?));
        }
    }
    if let Ok(a) = obj.cast::<PyArrayDyn<i64>>() {
        if a.is_c_contiguous() {
            return Ok(IntArray::I64(a.try_readonly().map_err(borrow_err)?));
        }
    }
    let arr = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (obj,))?;
    let untyped = arr.cast::<PyUntypedArray>()?;
    let dt = untyped.dtype();
    if dt.is_equiv_to(&dtype::<i32>(py)) {
        let a = arr.cast::<PyArrayDyn<i32>>()?;
        return Ok(IntArray::I32(a.try_readonly().map_err(borrow_err)?));
    }
    if dt.is_equiv_to(&dtype::<i64>(py)) {
        let a = arr.cast::<PyArrayDyn<i64>>()?;
        return Ok(IntArray::I64(a.try_readonly().map_err(borrow_err)?));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be an int32 or int64 array, got dtype {dt}; convert with \
         numpy.asarray(x, dtype=numpy.int32) (torch: tensor.to(torch.int32).cpu())"
    )))
}

/// A 1-D int16 / int32 / int64 array-like copied into a `Vec<i64>`: the
/// caller's buffer is read exactly once, before any lock is taken.
fn int_vec(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let arr = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (obj,))?;
    let untyped = arr.cast::<PyUntypedArray>()?;
    if untyped.ndim() != 1 {
        return Err(pool_err(
            py,
            PoolError::ShapeMismatch {
                what: format!("{what} must be 1-D, got shape {:?}", untyped.shape()),
            },
        ));
    }
    fn copy<T: numpy::Element + IndexInt>(a: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
        let a = a.cast::<PyArrayDyn<T>>()?;
        let a = a
            .try_readonly()
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
        Ok(slice_of(&a)?.iter().map(|v| v.to_i64()).collect())
    }
    let dt = untyped.dtype();
    if dt.is_equiv_to(&dtype::<i16>(py)) {
        return copy::<i16>(&arr, what);
    }
    if dt.is_equiv_to(&dtype::<i32>(py)) {
        return copy::<i32>(&arr, what);
    }
    if dt.is_equiv_to(&dtype::<i64>(py)) {
        return copy::<i64>(&arr, what);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be an int16, int32 or int64 array, got dtype {dt}; convert with \
         numpy.asarray(x, dtype=numpy.int64) (torch: tensor.cpu())"
    )))
}

fn slice_of<'a, T: numpy::Element>(a: &'a PyReadonlyArrayDyn<'_, T>) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| PyValueError::new_err(format!("array is not contiguous: {e}")))
}

fn metrics_arc(m: Option<PyRef<'_, HiSparseMetrics>>) -> Option<Arc<CoreMetrics>> {
    m.map(|m| m.0.clone())
}

/// The resolved settings in a `ResolvedConfig`, `Report` or `HiSparseSettings`.
fn settings_of(obj: &Bound<'_, PyAny>) -> PyResult<Arc<ResolvedHiSparse>> {
    if let Ok(s) = obj.cast::<HiSparseSettings>() {
        return Ok(s.get().0.clone());
    }
    let h = obj.getattr("hisparse").map_err(|_| {
        PyTypeError::new_err(
            "expected a hisparse_rs.ResolvedConfig, Report or HiSparseSettings (from hisparse_rs.resolve())",
        )
    })?;
    if h.is_none() {
        return Err(pool_err(
            obj.py(),
            PoolError::SettingsIncomplete { field: "hisparse" },
        ));
    }
    Ok(h.cast::<HiSparseSettings>()?.get().0.clone())
}

/// Counters and gauge vLLM exposes for HiSparse (HISPARSE.md §9).
///
/// A pool and its resolvers share one: pass ``metrics=pool.metrics`` when
/// building a resolver. Counters: ``hisparse_cache_hits`` (valid top-k entries
/// found resident), ``hisparse_cache_misses`` (rows copied),
/// ``hisparse_host_to_device_bytes`` (misses x row_bytes); gauge
/// ``hisparse_host_cache_usage_perc`` (pool blocks used / total, 1.0 = 100 %).
/// Lock-free; safe from any thread.
#[pyclass(frozen, module = "hisparse_rs")]
pub struct HiSparseMetrics(pub Arc<CoreMetrics>);

#[pymethods]
impl HiSparseMetrics {
    #[new]
    fn new() -> Self {
        HiSparseMetrics(Arc::new(CoreMetrics::new()))
    }
    /// Counters and gauge keyed by vLLM's metric names (without the ``vllm:``
    /// prefix), plus ``host_blocks_used`` / ``host_blocks_total``.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.0.snapshot();
        let d = PyDict::new(py);
        d.set_item("hisparse_cache_hits", s.hits)?;
        d.set_item("hisparse_cache_misses", s.misses)?;
        d.set_item("hisparse_host_to_device_bytes", s.host_to_device_bytes)?;
        d.set_item("hisparse_host_cache_usage_perc", s.host_cache_usage_perc)?;
        d.set_item("host_blocks_used", s.host_blocks_used)?;
        d.set_item("host_blocks_total", s.host_blocks_total)?;
        Ok(d)
    }
    /// Add to the counters: a caller that copies rows itself (e.g. the layers
    /// of an index group that replay the leader's miss plan) records its bytes
    /// here, as vLLM 0.33 counts misses x the row bytes of every layer in the group.
    #[pyo3(signature = (*, hits = 0, misses = 0, host_to_device_bytes = 0))]
    fn record(&self, hits: u64, misses: u64, host_to_device_bytes: u64) {
        self.0.record_resolve(hits, misses, host_to_device_bytes);
    }
    /// Prometheus text exposition (0.0.4) as vLLM's ``/metrics`` shows it:
    /// ``vllm:hisparse_cache_hits_total`` ... with ``labels`` (e.g.
    /// ``{"model_name": "glm-5"}``, written in key order). ValueError for an
    /// invalid label name.
    #[pyo3(signature = (labels = None))]
    fn prometheus_text(&self, labels: Option<BTreeMap<String, String>>) -> PyResult<String> {
        let labels = labels.unwrap_or_default();
        if let Some((bad, _)) = labels.iter().find(|(k, _)| !is_identifier(k)) {
            return Err(PyValueError::new_err(format!(
                "invalid Prometheus label name {bad:?} (allowed: [a-zA-Z_][a-zA-Z0-9_]*)"
            )));
        }
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Ok(self.0.prometheus_text(&pairs))
    }
    #[getter]
    fn hits(&self) -> u64 {
        self.0.snapshot().hits
    }
    #[getter]
    fn misses(&self) -> u64 {
        self.0.snapshot().misses
    }
    #[getter]
    fn host_to_device_bytes(&self) -> u64 {
        self.0.snapshot().host_to_device_bytes
    }
    #[getter]
    fn host_cache_usage_perc(&self) -> f64 {
        self.0.snapshot().host_cache_usage_perc
    }
    fn __repr__(&self) -> String {
        let s = self.0.snapshot();
        format!(
            "HiSparseMetrics(hits={}, misses={}, host_to_device_bytes={}, host_cache_usage_perc={})",
            s.hits, s.misses, s.host_to_device_bytes, s.host_cache_usage_perc
        )
    }
}

/// Byte layout of a pool tensor holding several layers (layer-major).
///
/// Layer ``g`` (a *global* layer id this pipeline stage owns, ``first_layer <=
/// g < end_layer``) occupies bytes ``[local x layer_stride, + layer_bytes)``
/// with ``layer_bytes = rows_per_layer x row_bytes``; regions are disjoint and
/// inside ``total_bytes``. A layer id outside the stage raises PoolError
/// ``layer_out_of_range`` (HISPARSE.md §10). All offsets are Python ints (64-bit math).
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct PoolLayout(CoreLayout);

#[pymethods]
impl PoolLayout {
    /// Raises PoolError ``invalid_size`` for a zero size, ``layer_stride <
    /// rows_per_layer x row_bytes``, or byte counts beyond 2**64.
    #[new]
    #[pyo3(signature = (rows_per_layer, row_bytes, num_layers, first_layer = 0, layer_stride = None))]
    fn new(
        py: Python<'_>,
        rows_per_layer: u64,
        row_bytes: u32,
        num_layers: u32,
        first_layer: u64,
        layer_stride: Option<u64>,
    ) -> PyResult<Self> {
        let layout = match layer_stride {
            Some(stride) => CoreLayout::with_layer_stride(
                rows_per_layer,
                row_bytes,
                num_layers,
                first_layer,
                stride,
            ),
            None => CoreLayout::new(rows_per_layer, row_bytes, num_layers, first_layer),
        };
        layout.map(PoolLayout).map_err(|e| pool_err(py, e))
    }
    #[getter]
    fn first_layer(&self) -> u64 {
        self.0.layers().start
    }
    /// One past the stage's last global layer.
    #[getter]
    fn end_layer(&self) -> u64 {
        self.0.layers().end
    }
    #[getter]
    fn num_layers(&self) -> u32 {
        self.0.num_layers()
    }
    #[getter]
    fn rows_per_layer(&self) -> u64 {
        self.0.rows_per_layer()
    }
    #[getter]
    fn row_bytes(&self) -> u32 {
        self.0.row_bytes()
    }
    #[getter]
    fn layer_stride(&self) -> u64 {
        self.0.layer_stride()
    }
    #[getter]
    fn layer_bytes(&self) -> u64 {
        self.0.layer_bytes()
    }
    #[getter]
    fn total_bytes(&self) -> u64 {
        self.0.total_bytes()
    }
    /// Global layer id -> index within the stage.
    fn local_layer(&self, py: Python<'_>, layer: i64) -> PyResult<u32> {
        self.0.local_layer(layer).map_err(|e| pool_err(py, e))
    }
    /// ``(start, end)`` byte offsets of a global layer's rows in the pool tensor.
    fn layer_region(&self, py: Python<'_>, layer: i64) -> PyResult<(u64, u64)> {
        let r = self.0.layer_region(layer).map_err(|e| pool_err(py, e))?;
        Ok((r.start, r.end))
    }
    /// Byte offset of host row ``row`` of a global layer.
    fn row_offset(&self, py: Python<'_>, layer: i64, row: u64) -> PyResult<u64> {
        self.0.row_offset(layer, row).map_err(|e| pool_err(py, e))
    }
    fn __repr__(&self) -> String {
        let l = &self.0;
        format!(
            "PoolLayout(layers={}..{}, rows_per_layer={}, row_bytes={}, layer_stride={}, total_bytes={})",
            l.layers().start,
            l.layers().end,
            l.rows_per_layer(),
            l.row_bytes(),
            l.layer_stride(),
            l.total_bytes()
        )
    }
}

/// Host pool occupancy.
#[pyclass(frozen, eq, get_all, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct PoolStats {
    blocks_used: u64,
    blocks_total: u64,
    num_requests: u64,
    /// blocks_used / blocks_total (1.0 = 100 %).
    usage: f64,
}

#[pymethods]
impl PoolStats {
    fn __repr__(&self) -> String {
        format!(
            "PoolStats(blocks_used={}, blocks_total={}, num_requests={}, usage={})",
            self.blocks_used, self.blocks_total, self.num_requests, self.usage
        )
    }
}

/// Host KV pool metadata: per-request host block tables (see the Rust docs of
/// ``hisparse_core::HostKVPool``). Thread-safe: calls are serialized.
#[pyclass(frozen, module = "hisparse_rs")]
pub struct HostKVPool(Mutex<CorePool>);

impl HostKVPool {
    fn build(
        py: Python<'_>,
        pool: Result<CorePool, PoolError>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let mut pool = pool.map_err(|e| pool_err(py, e))?;
        if let Some(m) = metrics_arc(metrics) {
            pool = pool.with_metrics(m);
        }
        Ok(HostKVPool(Mutex::new(pool)))
    }

    fn call<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CorePool) -> Result<T, PoolError>,
    ) -> PyResult<T> {
        f(&mut lock(&self.0)).map_err(|e| pool_err(py, e))
    }
}

fn blocks_array<'py>(py: Python<'py>, blocks: &[u32]) -> Bound<'py, PyArray1<i32>> {
    // Block ids are < 2^31 (HostKVPool::new).
    PyArray1::from_vec(py, blocks.iter().map(|&b| b as i32).collect())
}

#[pymethods]
impl HostKVPool {
    /// ``num_blocks`` host blocks of ``block_size`` tokens; ``row_bytes`` per
    /// token per layer (656 fp8_ds_mla, 1152 bf16); ``num_layers`` layers in
    /// the pool. Raises PoolError ``invalid_size``.
    #[new]
    #[pyo3(signature = (num_blocks, block_size, row_bytes, num_layers, *, metrics = None))]
    fn new(
        py: Python<'_>,
        num_blocks: u64,
        block_size: u32,
        row_bytes: u32,
        num_layers: u32,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            CorePool::new(num_blocks, block_size, row_bytes, num_layers),
            metrics,
        )
    }

    /// Sized like vLLM 0.33: floor(host_pool_gib x 2**30 / (block_size x
    /// row_bytes x num_layers)) blocks. Raises PoolError ``invalid_size``.
    #[staticmethod]
    #[pyo3(signature = (host_pool_gib, block_size, row_bytes, num_layers, *, metrics = None))]
    fn from_host_pool_gib(
        py: Python<'_>,
        host_pool_gib: f64,
        block_size: u32,
        row_bytes: u32,
        num_layers: u32,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        Self::build(
            py,
            CorePool::from_host_pool_gib(host_pool_gib, block_size, row_bytes, num_layers),
            metrics,
        )
    }

    /// The pool of a resolved configuration (``hisparse_rs.resolve(...)``, a
    /// Report or HiSparseSettings): host_blocks, block_size, row_bytes,
    /// sparse_mla_layers. Raises PoolError ``settings_incomplete`` when
    /// HiSparse is off or the row size is unknown.
    #[staticmethod]
    #[pyo3(signature = (resolved, *, metrics = None))]
    fn from_config(
        py: Python<'_>,
        resolved: &Bound<'_, PyAny>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let h = settings_of(resolved)?;
        Self::build(py, CorePool::from_resolved(&h), metrics)
    }

    #[getter]
    fn block_size(&self) -> u32 {
        lock(&self.0).block_size()
    }
    #[getter]
    fn row_bytes(&self) -> u32 {
        lock(&self.0).row_bytes()
    }
    #[getter]
    fn num_layers(&self) -> u32 {
        lock(&self.0).num_layers()
    }
    #[getter]
    fn num_blocks(&self) -> u64 {
        lock(&self.0).num_blocks()
    }
    /// Host rows per layer (num_blocks x block_size); valid host row ids are below it.
    #[getter]
    fn num_host_rows(&self) -> u64 {
        lock(&self.0).num_host_rows()
    }
    /// block_size x row_bytes x num_layers, bytes.
    #[getter]
    fn host_block_bytes(&self) -> u64 {
        lock(&self.0).host_block_bytes()
    }
    #[getter]
    fn free_blocks(&self) -> u64 {
        lock(&self.0).free_blocks()
    }
    /// The metrics this pool updates (share it with resolvers).
    #[getter]
    fn metrics(&self) -> HiSparseMetrics {
        HiSparseMetrics(lock(&self.0).metrics().clone())
    }
    /// The pool tensor's layer-major layout for a stage starting at global layer ``first_layer``.
    #[pyo3(signature = (first_layer = 0))]
    fn layout(&self, py: Python<'_>, first_layer: u64) -> PyResult<PoolLayout> {
        self.call(py, |p| p.layout(first_layer)).map(PoolLayout)
    }
    /// ceil(num_tokens / block_size).
    fn blocks_for(&self, num_tokens: u64) -> u64 {
        lock(&self.0).blocks_for(num_tokens)
    }
    /// Whether a new request of ``num_tokens`` tokens fits now.
    fn can_admit(&self, num_tokens: u64) -> bool {
        lock(&self.0).can_admit(num_tokens)
    }
    /// Admit a request; returns its block table (int32). Raises
    /// HostPoolExhausted (nothing allocated) or PoolError ``duplicate_request``.
    fn admit<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        num_tokens: u64,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let blocks = self.call(py, |p| p.admit(request_id, num_tokens).map(<[u32]>::to_vec))?;
        Ok(blocks_array(py, &blocks))
    }
    /// Add generated tokens; returns the newly allocated block ids (int32,
    /// empty unless a block boundary is crossed). Raises HostPoolExhausted
    /// (nothing changes) or PoolError ``unknown_request``.
    fn append<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        num_new_tokens: u64,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let blocks = self.call(py, |p| p.append(request_id, num_new_tokens))?;
        Ok(blocks_array(py, &blocks))
    }
    /// Free a finished or aborted request; returns the blocks freed.
    fn free(&self, py: Python<'_>, request_id: &str) -> PyResult<u64> {
        self.call(py, |p| p.free(request_id))
    }
    /// The request's block ids in token order (int32).
    fn block_table<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let blocks = self.call(py, |p| p.block_table(request_id).map(<[u32]>::to_vec))?;
        Ok(blocks_array(py, &blocks))
    }
    fn num_tokens(&self, py: Python<'_>, request_id: &str) -> PyResult<u64> {
        self.call(py, |p| p.num_tokens(request_id))
    }
    /// Host row ids (int64) of token positions (int32/int64 array-like):
    /// block_table[p // block_size] x block_size + p % block_size. -1 gives -1;
    /// any other position outside [0, num_tokens) raises PoolError
    /// ``position_out_of_range``.
    fn host_rows<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        positions: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let positions: Vec<i64> = match int_array(positions, "positions")? {
            IntArray::I32(a) => slice_of(&a)?.iter().map(|v| v.to_i64()).collect(),
            IntArray::I64(a) => slice_of(&a)?.to_vec(),
        };
        let rows = self.call(py, |p| p.host_rows(request_id, &positions))?;
        Ok(PyArray1::from_vec(py, rows))
    }
    fn stats(&self) -> PoolStats {
        let s = lock(&self.0).stats();
        PoolStats {
            blocks_used: s.blocks_used,
            blocks_total: s.blocks_total,
            num_requests: s.num_requests,
            usage: s.usage(),
        }
    }
    /// Admitted request ids, sorted.
    fn request_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.0).request_ids().map(str::to_owned).collect();
        ids.sort_unstable();
        ids
    }
    fn __contains__(&self, request_id: &str) -> bool {
        lock(&self.0).num_tokens(request_id).is_ok()
    }
    fn __repr__(&self) -> String {
        let p = lock(&self.0);
        let s = p.stats();
        format!(
            "HostKVPool(num_blocks={}, block_size={}, row_bytes={}, num_layers={}, blocks_used={}, num_requests={})",
            p.num_blocks(), p.block_size(), p.row_bytes(), p.num_layers(), s.blocks_used, s.num_requests
        )
    }
}

/// One resolve call's result: numpy arrays the caller owns.
///
/// ``slots`` int32 [rows, width]: hot-buffer slot per top-k entry, -1 where
/// invalid or padding. Miss plan, ordered by batch row then top-k column:
/// ``miss_host_rows`` int64 [n], ``miss_slots`` int32 [n] (slot in that batch
/// row's state), ``miss_counts`` int32 [rows], ``miss_offsets`` int32
/// [rows + 1] (row r's plan is ``miss_offsets[r]:miss_offsets[r + 1]``).
/// ``hits`` + ``misses`` = valid entries; ``misses`` = n rows to copy.
#[pyclass(frozen, get_all, module = "hisparse_rs")]
pub struct ResolveResult {
    slots: Py<PyArray2<i32>>,
    miss_host_rows: Py<PyArray1<i64>>,
    miss_slots: Py<PyArray1<i32>>,
    miss_counts: Py<PyArray1<i32>>,
    miss_offsets: Py<PyArray1<i32>>,
    hits: u64,
    misses: u64,
}

#[pymethods]
impl ResolveResult {
    fn __repr__(&self, py: Python<'_>) -> String {
        let shape = self.slots.bind(py).shape().to_vec();
        format!(
            "ResolveResult(rows={}, width={}, hits={}, misses={})",
            shape[0], shape[1], self.hits, self.misses
        )
    }
}

/// ``(slot_rows int32 [dbs], lru_order int16 [dbs])`` of one resolver state.
type ExportedState<'py> = (Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<i16>>);

/// Hot-buffer residency for (request, index group) states (HISPARSE.md §6).
/// Thread-safe: calls are serialized; ``resolve`` releases the GIL and runs
/// independent states in parallel.
#[pyclass(frozen, module = "hisparse_rs")]
pub struct ResidencyResolver(Mutex<CoreResolver>);

impl ResidencyResolver {
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreResolver) -> Result<T, PoolError> + Send,
    ) -> PyResult<T> {
        py.detach(|| f(&mut lock(&self.0)))
            .map_err(|e| pool_err(py, e))
    }
}

#[pymethods]
impl ResidencyResolver {
    /// ``device_buffer_size`` slots per state, top-k rows at most ``topk``
    /// wide, host rows valid in ``[0, num_host_rows)``, ``row_bytes`` per
    /// copied row (for the bytes counter). Raises PoolError
    /// ``topk_exceeds_device_buffer`` (dbs < topk), ``device_buffer_too_large``
    /// (dbs > 32768) or ``invalid_size`` (zero sizes, num_host_rows > 2**31).
    #[new]
    #[pyo3(signature = (device_buffer_size, topk, num_host_rows, row_bytes, *, metrics = None))]
    fn new(
        py: Python<'_>,
        device_buffer_size: u32,
        topk: u32,
        num_host_rows: u64,
        row_bytes: u32,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let mut r = CoreResolver::new(device_buffer_size, topk, num_host_rows, row_bytes)
            .map_err(|e| pool_err(py, e))?;
        if let Some(m) = metrics_arc(metrics) {
            r = r.with_metrics(m);
        }
        Ok(ResidencyResolver(Mutex::new(r)))
    }

    /// From a resolved configuration: device_buffer_size, topk =
    /// topk_buffer_width, num_host_rows = host_blocks x block_size, row_bytes.
    #[staticmethod]
    #[pyo3(signature = (resolved, *, metrics = None))]
    fn from_config(
        py: Python<'_>,
        resolved: &Bound<'_, PyAny>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let h = settings_of(resolved)?;
        let missing = |field| pool_err(py, PoolError::SettingsIncomplete { field });
        let row_bytes = h
            .row_bytes
            .as_ref()
            .ok_or_else(|| missing("row_bytes"))?
            .value;
        let blocks = h
            .host_blocks
            .as_ref()
            .ok_or_else(|| missing("host_blocks"))?
            .value;
        let rows = blocks.saturating_mul(u64::from(h.block_size.value));
        Self::new(
            py,
            h.device_buffer_size.value,
            h.topk_buffer_width.value,
            rows,
            row_bytes,
            metrics,
        )
    }

    #[getter]
    fn device_buffer_size(&self) -> u32 {
        lock(&self.0).device_buffer_size()
    }
    #[getter]
    fn topk(&self) -> u32 {
        lock(&self.0).topk()
    }
    #[getter]
    fn num_host_rows(&self) -> u64 {
        lock(&self.0).num_host_rows()
    }
    #[getter]
    fn row_bytes(&self) -> u32 {
        lock(&self.0).row_bytes()
    }
    /// Live states.
    #[getter]
    fn num_states(&self) -> usize {
        lock(&self.0).num_states()
    }
    /// Bytes one state keeps: device_buffer_size x 6 (int32 row + int16 LRU
    /// entry per slot) + 2 x the row -> slot index length (the power of two
    /// >= 4 x device_buffer_size): 14 B per slot when dbs is a power of two.
    #[getter]
    fn state_bytes(&self) -> u64 {
        lock(&self.0).state_bytes()
    }
    /// The metrics this resolver updates.
    #[getter]
    fn metrics(&self) -> HiSparseMetrics {
        HiSparseMetrics(lock(&self.0).metrics().clone())
    }
    /// A new empty state (one per request and index group); freed ids are reused lowest first.
    fn new_state(&self, py: Python<'_>) -> u32 {
        py.detach(|| lock(&self.0).new_state())
    }
    /// Empty a state. Raises PoolError ``unknown_state``.
    fn reset_state(&self, py: Python<'_>, state: i64) -> PyResult<()> {
        self.call(py, |r| r.reset_state(state))
    }
    /// Release a state. Raises PoolError ``unknown_state``.
    fn free_state(&self, py: Python<'_>, state: i64) -> PyResult<()> {
        self.call(py, |r| r.free_state(state))
    }
    /// Host row cached in each slot, int32 [device_buffer_size], -1 empty.
    fn slot_rows<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let v = self.call(py, |r| r.slot_rows(state).map(<[i32]>::to_vec))?;
        Ok(PyArray1::from_vec(py, v))
    }
    /// Slots oldest first, int16 [device_buffer_size] (vLLM / SGLang's LRU layout).
    fn lru_order<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i16>>> {
        let v = self.call(py, |r| {
            r.lru_order(state)
                .map(|o| o.iter().map(|&s| s as i16).collect::<Vec<_>>())
        })?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// ``(slot_rows int32 [dbs], lru_order int16 [dbs])`` of a state, read
    /// under one lock (a consistent pair): what :meth:`import_state` and the
    /// Triton resolver's device tensors take. Raises PoolError ``unknown_state``.
    fn export_state<'py>(&self, py: Python<'py>, state: i64) -> PyResult<ExportedState<'py>> {
        let (rows, lru) = self.call(py, |r| {
            let rows = r.slot_rows(state)?.to_vec();
            let lru = r
                .lru_order(state)?
                .iter()
                .map(|&s| s as i16)
                .collect::<Vec<_>>();
            Ok((rows, lru))
        })?;
        Ok((PyArray1::from_vec(py, rows), PyArray1::from_vec(py, lru)))
    }

    /// Replace a state's contents (e.g. one exported from the Triton
    /// resolver's device tensors); the row -> slot index is rebuilt, and the
    /// request continues exactly as it would have there. ``slot_rows``:
    /// int16/int32/int64 [device_buffer_size], -1 empty; ``lru_order``: the
    /// slots oldest first, a permutation of ``0..device_buffer_size``. Both
    /// are copied once. Raises PoolError ``unknown_state``, ``shape_mismatch``
    /// or ``invalid_resolver_state`` (a row outside -1 or [0, num_host_rows),
    /// a row in two slots, an LRU that is not a permutation); nothing changes then.
    fn import_state(
        &self,
        py: Python<'_>,
        state: i64,
        slot_rows: &Bound<'_, PyAny>,
        lru_order: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let rows = int_vec(slot_rows, "slot_rows")?;
        let lru = int_vec(lru_order, "lru_order")?;
        self.call(py, |r| r.import_state(state, &rows, &lru))
    }

    /// Resolve a batch. ``topk_rows``: int32/int64 [rows, width] host rows (-1
    /// padding; < -1 or >= num_host_rows invalid: slot -1, not counted);
    /// ``state_index``: int32/int64 [rows] (-1 = padded row: all -1, no
    /// change). Rows sharing a state are resolved as one union (MTP).
    /// Raises PoolError ``topk_too_wide``, ``shape_mismatch``,
    /// ``unknown_state`` or ``union_exceeds_device_buffer``; nothing changes then.
    fn resolve(
        &self,
        py: Python<'_>,
        topk_rows: &Bound<'_, PyAny>,
        state_index: &Bound<'_, PyAny>,
    ) -> PyResult<ResolveResult> {
        let rows = int_array(topk_rows, "topk_rows")?;
        let states = int_array(state_index, "state_index")?;
        let shape = rows.shape();
        let sshape = states.shape();
        if shape.len() != 2 || sshape.len() != 1 || sshape[0] != shape[0] {
            return Err(pool_err(
                py,
                PoolError::ShapeMismatch {
                    what: format!(
                        "topk_rows must be [rows, width] and state_index [rows]; got {shape:?} and {sshape:?}"
                    ),
                },
            ));
        }
        let width = shape[1];
        let out = match (&rows, &states) {
            (IntArray::I32(r), IntArray::I32(s)) => {
                let (r, s) = (slice_of(r)?, slice_of(s)?);
                self.call(py, |c| c.resolve(r, width, s))
            }
            (IntArray::I32(r), IntArray::I64(s)) => {
                let (r, s) = (slice_of(r)?, slice_of(s)?);
                self.call(py, |c| c.resolve(r, width, s))
            }
            (IntArray::I64(r), IntArray::I32(s)) => {
                let (r, s) = (slice_of(r)?, slice_of(s)?);
                self.call(py, |c| c.resolve(r, width, s))
            }
            (IntArray::I64(r), IntArray::I64(s)) => {
                let (r, s) = (slice_of(r)?, slice_of(s)?);
                self.call(py, |c| c.resolve(r, width, s))
            }
        }?;
        let slots = PyArray1::from_vec(py, out.slots).reshape([out.rows, out.width])?;
        Ok(ResolveResult {
            slots: slots.unbind(),
            miss_host_rows: PyArray1::from_vec(py, out.miss_host_rows).unbind(),
            miss_slots: PyArray1::from_vec(py, out.miss_slots).unbind(),
            miss_counts: PyArray1::from_vec(py, out.miss_counts).unbind(),
            miss_offsets: PyArray1::from_vec(py, out.miss_offsets).unbind(),
            hits: out.hits,
            misses: out.misses,
        })
    }

    fn __repr__(&self) -> String {
        let r = lock(&self.0);
        format!(
            "ResidencyResolver(device_buffer_size={}, topk={}, num_host_rows={}, num_states={})",
            r.device_buffer_size(),
            r.topk(),
            r.num_host_rows(),
            r.num_states()
        )
    }
}

/// Every stable pool / resolver error code.
#[pyfunction]
pub fn pool_error_codes() -> Vec<&'static str> {
    PoolError::CODES.to_vec()
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<HostKVPool>();
    check::<ResidencyResolver>();
    check::<HiSparseMetrics>();
    check::<PoolLayout>();
}
