//! Python classes over the core's host pool, pool layout, residency resolver
//! and metrics. Conversions and error mapping only.
//!
//! Arrays: C-contiguous int32 / int64 ndarrays are borrowed as they are; other
//! inputs go through `numpy.ascontiguousarray` (no copy for a
//! contiguous numpy array or CPU torch tensor) and must be int32 or int64;
//! outputs are numpy arrays that own the Rust vectors (no copy). The GIL is
//! released while the resolver works. Each class keeps its core value behind a
//! mutex, so calls from several threads are serialized and each call is atomic.
//!
//! Locks and the GIL (`gil.rs`): every core call runs under the lock as a
//! closure that cannot reach Python; its error is a Rust value, turned into a
//! Python exception only after the lock is released. A caller's array is
//! read once: `resolve` copies it (one memcpy) before taking the lock, so a
//! thread writing the array meanwhile cannot make validation and update see
//! different inputs. Integers out of range name their argument (`args.rs`).

use crate::args::{Float, Int};
use crate::gil::{detach, internal_error, lock, no_panic, with_lock};
use crate::results::HiSparseSettings;
use hisparse_core::path::is_identifier;
use hisparse_core::pool::resolver::MAX_RESOLVE_ENTRIES;
use hisparse_core::pool::{
    HiSparseMetrics as CoreMetrics, HostKVPool as CorePool, IndexInt, PoolError,
    PoolLayout as CoreLayout, ResidencyResolver as CoreResolver, MAX_DEVICE_BUFFER_SIZE,
};
use hisparse_core::ResolvedHiSparse;
use numpy::{
    dtype, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyBaseException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Core error -> `hisparse_rs.exceptions.PoolError` / `HostPoolExhausted`
/// (Python classes, so they carry typed attributes). Never called under a lock.
///
/// The instance is made the way their `__init__` would make it, but without
/// running it: `BaseException.__new__(cls, message)` (which sets `args`) and
/// plain attribute sets, all C. Python bytecode run inside a Rust frame can
/// hand the GIL to another thread, and a daemon thread that waits for it
/// back while the interpreter finalizes is ended by `pthread_exit`, whose
/// unwinding through our frames aborts the process (see `gil.rs`).
///
/// The classes are handed over by `hisparse_rs.exceptions` when it is
/// imported (`register_exceptions`), not imported here on first use: an
/// import inside a call runs Python code, see [`import_eagerly`].
pub fn pool_err(py: Python<'_>, e: PoolError) -> PyErr {
    let raise = || -> PyResult<PyErr> {
        let class = match &e {
            PoolError::HostPoolExhausted(_) => EXHAUSTED.get(py),
            _ => POOL_ERROR.get(py),
        }
        .ok_or_else(|| {
            pyo3::exceptions::PyImportError::new_err(
                "hisparse_rs._core was used before hisparse_rs.exceptions was imported; import hisparse_rs",
            )
        })?
        .bind(py);
        let value = py
            .get_type::<PyBaseException>()
            .getattr("__new__")?
            .call1((class, e.to_string()))?;
        value.setattr("code", e.code())?;
        if let PoolError::HostPoolExhausted(x) = &e {
            value.setattr("needed", x.needed)?;
            value.setattr("free", x.free)?;
        }
        Ok(PyErr::from_value(value))
    };
    raise().unwrap_or_else(|err| err)
}

static POOL_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static EXHAUSTED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static NUMPY_ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static NUMPY_ASCONTIGUOUSARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `hisparse_rs.exceptions` hands its PoolError and HostPoolExhausted classes
/// over when it is imported (it imports this module, so this module cannot
/// import it during its own initialization). Private; called once.
#[pyfunction(name = "_register_exceptions")]
pub fn register_exceptions(
    pool_error: Bound<'_, PyType>,
    host_pool_exhausted: Bound<'_, PyType>,
) -> PyResult<()> {
    let py = pool_error.py();
    if !host_pool_exhausted.is_subclass(&pool_error)? {
        return Err(PyTypeError::new_err(
            "host_pool_exhausted must be a subclass of pool_error",
        ));
    }
    let _ = POOL_ERROR.set(py, pool_error.unbind());
    let _ = EXHAUSTED.set(py, host_pool_exhausted.unbind());
    Ok(())
}

/// Everything the pool classes would otherwise import on first use, imported
/// at module initialization: numpy (its `asarray` / `ascontiguousarray`),
/// rust-numpy's C API capsule and its borrow-checking capsule, the dtypes.
///
/// Why: an import inside a call runs Python bytecode, which may hand the GIL
/// to another thread. When the main thread then finalizes the interpreter,
/// CPython (3.10-3.13) ends the daemon thread that waits to get the GIL back
/// with `pthread_exit`, from inside our frames: the forced unwind through an
/// `extern "C"` boundary aborts the process (SIGABRT, "FATAL: exception not
/// rethrown"). Imported here, the first call runs only C, as every later one.
/// `py.import("numpy")` per call is no better: a package import with a
/// fromlist runs `importlib._bootstrap._handle_fromlist`.
pub fn import_eagerly(py: Python<'_>) -> PyResult<()> {
    let numpy = py.import("numpy")?;
    let _ = NUMPY_ASARRAY.set(py, numpy.getattr("asarray")?.unbind());
    let _ = NUMPY_ASCONTIGUOUSARRAY.set(py, numpy.getattr("ascontiguousarray")?.unbind());
    let _ = (dtype::<i16>(py), dtype::<i32>(py), dtype::<i64>(py));
    // The C API (PY_ARRAY_API) on the first array, the borrow-checking
    // capsule on the first borrow.
    let probe = PyArray1::<i64>::zeros(py, 1, false);
    drop(
        probe
            .try_readonly()
            .map_err(|e| PyValueError::new_err(e.to_string()))?,
    );
    drop(
        probe
            .try_readwrite()
            .map_err(|e| PyValueError::new_err(e.to_string()))?,
    );
    Ok(())
}

/// A cached numpy function (set by [`import_eagerly`] at module init).
fn numpy_fn<'py>(
    py: Python<'py>,
    f: &'static PyOnceLock<Py<PyAny>>,
) -> PyResult<&'py Bound<'py, PyAny>> {
    f.get(py).map(|f| f.bind(py)).ok_or_else(|| {
        pyo3::exceptions::PyImportError::new_err(
            "hisparse_rs._core: numpy was not imported at init",
        )
    })
}

/// A failed call: a core error, or a panic caught at the boundary.
enum Failure {
    Pool(PoolError),
    Panic(String),
}

impl Failure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Pool(e) => pool_err(py, e),
            Failure::Panic(msg) => internal_error(msg),
        }
    }
}

/// `f` with panics caught; the result stays a Rust value (no Python under a lock).
fn guarded<T>(f: impl FnOnce() -> Result<T, PoolError>) -> Result<T, Failure> {
    no_panic(f).map_err(Failure::Panic)?.map_err(Failure::Pool)
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

/// `numpy.ascontiguousarray(obj)` as int32 / int64; TypeError for other
/// dtypes; PoolError `batch_too_large` beyond `max_entries` entries, found
/// before anything is copied (a broadcast view of 2^30 entries costs nothing
/// until its contiguous copy).
fn int_array<'py>(
    obj: &Bound<'py, PyAny>,
    what: &'static str,
    max_entries: usize,
) -> PyResult<IntArray<'py>> {
    let py = obj.py();
    let borrow_err = |e| PyValueError::new_err(format!("{what}: {e}"));
    let bounded = |entries: usize| {
        if entries > max_entries {
            return Err(pool_err(
                py,
                PoolError::BatchTooLarge {
                    what,
                    entries: entries as u64,
                    max: max_entries as u64,
                },
            ));
        }
        Ok(())
    };
    // Fast path (the per-step case): a C-contiguous int32 / int64 ndarray is
    // used as it is, without the Python-level ascontiguousarray call.
    if let Ok(a) = obj.cast::<PyArrayDyn<i32>>() {
        if a.is_c_contiguous() {
            bounded(a.len())?;
            return Ok(IntArray::I32(a.try_readonly().map_err(borrow_err)?));
        }
    }
    if let Ok(a) = obj.cast::<PyArrayDyn<i64>>() {
        if a.is_c_contiguous() {
            bounded(a.len())?;
            return Ok(IntArray::I64(a.try_readonly().map_err(borrow_err)?));
        }
    }
    let arr = bounded_contiguous(obj, bounded)?;
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

/// `numpy.ascontiguousarray(obj)`, after `check(size)` on `numpy.asarray(obj)`:
/// a view for an array, a broadcast view or a CPU tensor (nothing copied yet).
fn bounded_contiguous<'py>(
    obj: &Bound<'py, PyAny>,
    check: impl FnOnce(usize) -> PyResult<()>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let view = numpy_fn(py, &NUMPY_ASARRAY)?.call1((obj,))?;
    check(view.cast::<PyUntypedArray>()?.len())?;
    numpy_fn(py, &NUMPY_ASCONTIGUOUSARRAY)?.call1((view,))
}

/// A 1-D int16 / int32 / int64 array-like of at most `max_entries` entries
/// (PoolError `shape_mismatch` beyond, before any copy) copied into a
/// `Vec<i64>`: the caller's buffer is read exactly once, before any lock is taken.
fn int_vec(obj: &Bound<'_, PyAny>, what: &str, max_entries: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let arr = bounded_contiguous(obj, |n| {
        if n > max_entries {
            return Err(pool_err(
                py,
                PoolError::ShapeMismatch {
                    what: format!(
                        "{what} has {n} entries; a resolver state has device_buffer_size (at most {max_entries})"
                    ),
                },
            ));
        }
        Ok(())
    })?;
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
    /// Counters stop at 2**64 - 1 (they never wrap). Raises ValueError for a
    /// negative count or one beyond 2**64 - 1 (nothing is added then).
    #[pyo3(
        signature = (*, hits = Int::of(0), misses = Int::of(0), host_to_device_bytes = Int::of(0)),
        text_signature = "($self, *, hits=0, misses=0, host_to_device_bytes=0)"
    )]
    fn record(
        &self,
        hits: Int<u64>,
        misses: Int<u64>,
        host_to_device_bytes: Int<u64>,
    ) -> PyResult<()> {
        let (hits, misses, bytes) = (
            hits.value("hits")?,
            misses.value("misses")?,
            host_to_device_bytes.value("host_to_device_bytes")?,
        );
        self.0.record_resolve(hits, misses, bytes);
        Ok(())
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
    /// Raises PoolError ``invalid_size`` for a zero size, a negative or
    /// oversized argument (named), ``layer_stride < rows_per_layer x
    /// row_bytes``, or byte counts beyond 2**64.
    #[new]
    #[pyo3(
        signature = (rows_per_layer, row_bytes, num_layers, first_layer = Int::of(0), layer_stride = None),
        text_signature = "(rows_per_layer, row_bytes, num_layers, first_layer=0, layer_stride=None)"
    )]
    fn new(
        py: Python<'_>,
        rows_per_layer: Int<u64>,
        row_bytes: Int<u32>,
        num_layers: Int<u32>,
        first_layer: Int<u64>,
        layer_stride: Option<Int<u64>>,
    ) -> PyResult<Self> {
        let build = || {
            let (rows, row_bytes, layers, first) = (
                rows_per_layer.pool("rows_per_layer")?,
                row_bytes.pool("row_bytes")?,
                num_layers.pool("num_layers")?,
                first_layer.pool("first_layer")?,
            );
            match &layer_stride {
                Some(stride) => CoreLayout::with_layer_stride(
                    rows,
                    row_bytes,
                    layers,
                    first,
                    stride.pool("layer_stride")?,
                ),
                None => CoreLayout::new(rows, row_bytes, layers, first),
            }
        };
        build().map(PoolLayout).map_err(|e| pool_err(py, e))
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
    fn local_layer(&self, py: Python<'_>, layer: Int<i64>) -> PyResult<u32> {
        self.0
            .local_layer(layer.saturated())
            .map_err(|e| pool_err(py, e))
    }
    /// ``(start, end)`` byte offsets of a global layer's rows in the pool tensor.
    fn layer_region(&self, py: Python<'_>, layer: Int<i64>) -> PyResult<(u64, u64)> {
        let r = self
            .0
            .layer_region(layer.saturated())
            .map_err(|e| pool_err(py, e))?;
        Ok((r.start, r.end))
    }
    /// Byte offset of host row ``row`` of a global layer.
    fn row_offset(&self, py: Python<'_>, layer: Int<i64>, row: Int<u64>) -> PyResult<u64> {
        row.pool("row")
            .and_then(|row| self.0.row_offset(layer.saturated(), row))
            .map_err(|e| pool_err(py, e))
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

    /// A core call under the lock; its error becomes a Python exception
    /// only once the lock is released.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CorePool) -> Result<T, PoolError> + Send,
    ) -> PyResult<T> {
        with_lock(py, &self.0, |p| guarded(|| f(p))).map_err(|e| e.into_py(py))
    }

    /// A read under the lock.
    fn read<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&CorePool) -> T + Send) -> T {
        with_lock(py, &self.0, |p| f(p))
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
        num_blocks: Int<u64>,
        block_size: Int<u32>,
        row_bytes: Int<u32>,
        num_layers: Int<u32>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let pool = (|| {
            CorePool::new(
                num_blocks.pool("num_blocks")?,
                block_size.pool("block_size")?,
                row_bytes.pool("row_bytes")?,
                num_layers.pool("num_layers")?,
            )
        })();
        Self::build(py, pool, metrics)
    }

    /// Sized like vLLM 0.33: floor(host_pool_gib x 2**30 / (block_size x
    /// row_bytes x num_layers)) blocks. Raises PoolError ``invalid_size``.
    #[staticmethod]
    #[pyo3(signature = (host_pool_gib, block_size, row_bytes, num_layers, *, metrics = None))]
    fn from_host_pool_gib(
        py: Python<'_>,
        host_pool_gib: Float,
        block_size: Int<u32>,
        row_bytes: Int<u32>,
        num_layers: Int<u32>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let pool = (|| {
            CorePool::from_host_pool_gib(
                host_pool_gib.pool("host_pool_gib")?,
                block_size.pool("block_size")?,
                row_bytes.pool("row_bytes")?,
                num_layers.pool("num_layers")?,
            )
        })();
        Self::build(py, pool, metrics)
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
    fn block_size(&self, py: Python<'_>) -> u32 {
        self.read(py, |p| p.block_size())
    }
    #[getter]
    fn row_bytes(&self, py: Python<'_>) -> u32 {
        self.read(py, |p| p.row_bytes())
    }
    #[getter]
    fn num_layers(&self, py: Python<'_>) -> u32 {
        self.read(py, |p| p.num_layers())
    }
    #[getter]
    fn num_blocks(&self, py: Python<'_>) -> u64 {
        self.read(py, |p| p.num_blocks())
    }
    /// Host rows per layer (num_blocks x block_size); valid host row ids are below it.
    #[getter]
    fn num_host_rows(&self, py: Python<'_>) -> u64 {
        self.read(py, |p| p.num_host_rows())
    }
    /// block_size x row_bytes x num_layers, bytes.
    #[getter]
    fn host_block_bytes(&self, py: Python<'_>) -> u64 {
        self.read(py, |p| p.host_block_bytes())
    }
    #[getter]
    fn free_blocks(&self, py: Python<'_>) -> u64 {
        self.read(py, |p| p.free_blocks())
    }
    /// The metrics this pool updates (share it with resolvers).
    #[getter]
    fn metrics(&self, py: Python<'_>) -> HiSparseMetrics {
        HiSparseMetrics(self.read(py, |p| p.metrics().clone()))
    }
    /// The pool tensor's layer-major layout for a stage starting at global layer ``first_layer``.
    #[pyo3(signature = (first_layer = Int::of(0)), text_signature = "($self, first_layer=0)")]
    fn layout(&self, py: Python<'_>, first_layer: Int<u64>) -> PyResult<PoolLayout> {
        let first = first_layer
            .pool("first_layer")
            .map_err(|e| pool_err(py, e))?;
        self.call(py, |p| p.layout(first)).map(PoolLayout)
    }
    /// ceil(num_tokens / block_size). Raises PoolError ``invalid_size`` for
    /// a negative or oversized count.
    fn blocks_for(&self, py: Python<'_>, num_tokens: Int<u64>) -> PyResult<u64> {
        let n = num_tokens.pool("num_tokens").map_err(|e| pool_err(py, e))?;
        Ok(self.read(py, |p| p.blocks_for(n)))
    }
    /// Whether a new request of ``num_tokens`` tokens fits now (PoolError
    /// ``invalid_size`` for a negative or oversized count).
    fn can_admit(&self, py: Python<'_>, num_tokens: Int<u64>) -> PyResult<bool> {
        let n = num_tokens.pool("num_tokens").map_err(|e| pool_err(py, e))?;
        Ok(self.read(py, |p| p.can_admit(n)))
    }
    /// Admit a request; returns its block table (int32). Raises
    /// HostPoolExhausted (nothing allocated) or PoolError ``duplicate_request``.
    fn admit<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        num_tokens: Int<u64>,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let n = num_tokens.pool("num_tokens").map_err(|e| pool_err(py, e))?;
        let blocks = self.call(py, |p| p.admit(request_id, n).map(<[u32]>::to_vec))?;
        Ok(blocks_array(py, &blocks))
    }
    /// Add generated tokens; returns the newly allocated block ids (int32,
    /// empty unless a block boundary is crossed). Raises HostPoolExhausted
    /// (nothing changes) or PoolError ``unknown_request``.
    fn append<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        num_new_tokens: Int<u64>,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let n = num_new_tokens
            .pool("num_new_tokens")
            .map_err(|e| pool_err(py, e))?;
        let blocks = self.call(py, |p| p.append(request_id, n))?;
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
    /// ``position_out_of_range``; more than 2^26 positions ``batch_too_large``.
    fn host_rows<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        positions: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let positions: Vec<i64> = match int_array(positions, "positions", MAX_RESOLVE_ENTRIES)? {
            IntArray::I32(a) => slice_of(&a)?.iter().map(|v| v.to_i64()).collect(),
            IntArray::I64(a) => slice_of(&a)?.to_vec(),
        };
        let rows = self.call(py, |p| p.host_rows(request_id, &positions))?;
        Ok(PyArray1::from_vec(py, rows))
    }
    fn stats(&self, py: Python<'_>) -> PoolStats {
        let s = self.read(py, |p| p.stats());
        PoolStats {
            blocks_used: s.blocks_used,
            blocks_total: s.blocks_total,
            num_requests: s.num_requests,
            usage: s.usage(),
        }
    }
    /// Admitted request ids, sorted.
    fn request_ids(&self, py: Python<'_>) -> Vec<String> {
        let mut ids: Vec<String> = self.read(py, |p| p.request_ids().map(str::to_owned).collect());
        ids.sort_unstable();
        ids
    }
    fn __contains__(&self, py: Python<'_>, request_id: &str) -> bool {
        self.read(py, |p| p.num_tokens(request_id).is_ok())
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        self.read(py, |p| {
            let s = p.stats();
            format!(
                "HostKVPool(num_blocks={}, block_size={}, row_bytes={}, num_layers={}, blocks_used={}, num_requests={})",
                p.num_blocks(), p.block_size(), p.row_bytes(), p.num_layers(), s.blocks_used, s.num_requests
            )
        })
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
    /// A core call, detached, under the lock; errors become Python
    /// exceptions after the lock is released and the GIL is back.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreResolver) -> Result<T, PoolError> + Send,
    ) -> PyResult<T> {
        detach(py, || guarded(|| f(&mut lock(&self.0)))).map_err(|e| e.into_py(py))
    }

    fn read<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&CoreResolver) -> T + Send) -> T {
        with_lock(py, &self.0, |r| f(r))
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
        device_buffer_size: Int<u32>,
        topk: Int<u32>,
        num_host_rows: Int<u64>,
        row_bytes: Int<u32>,
        metrics: Option<PyRef<'_, HiSparseMetrics>>,
    ) -> PyResult<Self> {
        let mut r = (|| {
            CoreResolver::new(
                device_buffer_size.pool("device_buffer_size")?,
                topk.pool("topk")?,
                num_host_rows.pool("num_host_rows")?,
                row_bytes.pool("row_bytes")?,
            )
        })()
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
            Int::of(h.device_buffer_size.value),
            Int::of(h.topk_buffer_width.value),
            Int::of(rows),
            Int::of(row_bytes),
            metrics,
        )
    }

    #[getter]
    fn device_buffer_size(&self, py: Python<'_>) -> u32 {
        self.read(py, |r| r.device_buffer_size())
    }
    #[getter]
    fn topk(&self, py: Python<'_>) -> u32 {
        self.read(py, |r| r.topk())
    }
    #[getter]
    fn num_host_rows(&self, py: Python<'_>) -> u64 {
        self.read(py, |r| r.num_host_rows())
    }
    #[getter]
    fn row_bytes(&self, py: Python<'_>) -> u32 {
        self.read(py, |r| r.row_bytes())
    }
    /// Live states.
    #[getter]
    fn num_states(&self, py: Python<'_>) -> usize {
        self.read(py, |r| r.num_states())
    }
    /// Bytes one state keeps: device_buffer_size x 6 (int32 row + int16 LRU
    /// entry per slot) + 2 x the row -> slot index length (the power of two
    /// >= 4 x device_buffer_size): 14 B per slot when dbs is a power of two.
    #[getter]
    fn state_bytes(&self, py: Python<'_>) -> u64 {
        self.read(py, |r| r.state_bytes())
    }
    /// The metrics this resolver updates.
    #[getter]
    fn metrics(&self, py: Python<'_>) -> HiSparseMetrics {
        HiSparseMetrics(self.read(py, |r| r.metrics().clone()))
    }
    /// A new empty state (one per request and index group); freed ids are reused lowest first.
    fn new_state(&self, py: Python<'_>) -> PyResult<u32> {
        self.call(py, |r| Ok(r.new_state()))
    }
    /// Empty a state. Raises PoolError ``unknown_state``.
    fn reset_state(&self, py: Python<'_>, state: Int<i64>) -> PyResult<()> {
        let state = state.saturated();
        self.call(py, |r| r.reset_state(state))
    }
    /// Release a state. Raises PoolError ``unknown_state``.
    fn free_state(&self, py: Python<'_>, state: Int<i64>) -> PyResult<()> {
        let state = state.saturated();
        self.call(py, |r| r.free_state(state))
    }
    /// Host row cached in each slot, int32 [device_buffer_size], -1 empty.
    fn slot_rows<'py>(
        &self,
        py: Python<'py>,
        state: Int<i64>,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let state = state.saturated();
        let v = self.call(py, |r| r.slot_rows(state).map(<[i32]>::to_vec))?;
        Ok(PyArray1::from_vec(py, v))
    }
    /// Slots oldest first, int16 [device_buffer_size] (vLLM / SGLang's LRU layout).
    fn lru_order<'py>(
        &self,
        py: Python<'py>,
        state: Int<i64>,
    ) -> PyResult<Bound<'py, PyArray1<i16>>> {
        let state = state.saturated();
        let v = self.call(py, |r| {
            r.lru_order(state)
                .map(|o| o.iter().map(|&s| s as i16).collect::<Vec<_>>())
        })?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// ``(slot_rows int32 [dbs], lru_order int16 [dbs])`` of a state, read
    /// under one lock (a consistent pair): what :meth:`import_state` and the
    /// Triton resolver's device tensors take. Raises PoolError ``unknown_state``.
    fn export_state<'py>(&self, py: Python<'py>, state: Int<i64>) -> PyResult<ExportedState<'py>> {
        let state = state.saturated();
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
        state: Int<i64>,
        slot_rows: &Bound<'_, PyAny>,
        lru_order: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let state = state.saturated();
        let max = MAX_DEVICE_BUFFER_SIZE as usize;
        let rows = int_vec(slot_rows, "slot_rows", max)?;
        let lru = int_vec(lru_order, "lru_order", max)?;
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
        let rows = int_array(topk_rows, "topk_rows", MAX_RESOLVE_ENTRIES)?;
        let states = int_array(state_index, "state_index", MAX_RESOLVE_ENTRIES)?;
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
                self.resolve_once(py, slice_of(r)?, width, slice_of(s)?)
            }
            (IntArray::I32(r), IntArray::I64(s)) => {
                self.resolve_once(py, slice_of(r)?, width, slice_of(s)?)
            }
            (IntArray::I64(r), IntArray::I32(s)) => {
                self.resolve_once(py, slice_of(r)?, width, slice_of(s)?)
            }
            (IntArray::I64(r), IntArray::I64(s)) => {
                self.resolve_once(py, slice_of(r)?, width, slice_of(s)?)
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

    fn __repr__(&self, py: Python<'_>) -> String {
        self.read(py, |r| {
            format!(
                "ResidencyResolver(device_buffer_size={}, topk={}, num_host_rows={}, num_states={})",
                r.device_buffer_size(),
                r.topk(),
                r.num_host_rows(),
                r.num_states()
            )
        })
    }
}

/// Entries above which `resolve` checks for Ctrl-C between its copy and its work.
const SIGNAL_CHECK_ENTRIES: usize = 1 << 20;
/// Largest per-thread copy buffer kept between calls (16 MiB of int32).
const KEEP_ENTRIES: usize = 1 << 22;

/// Per-thread copies of the caller's arrays, reused across calls (no page
/// faults for a fresh buffer each step).
#[derive(Default)]
struct Snapshot {
    i32s: [Vec<i32>; 2],
    i64s: [Vec<i64>; 2],
}

thread_local! {
    static SNAPSHOT: RefCell<Snapshot> = RefCell::new(Snapshot::default());
}

trait Snap: IndexInt + Copy + numpy::Element {
    fn buffers(s: &mut Snapshot) -> &mut [Vec<Self>; 2];
}
impl Snap for i32 {
    fn buffers(s: &mut Snapshot) -> &mut [Vec<i32>; 2] {
        &mut s.i32s
    }
}
impl Snap for i64 {
    fn buffers(s: &mut Snapshot) -> &mut [Vec<i64>; 2] {
        &mut s.i64s
    }
}

impl ResidencyResolver {
    /// Copy the caller's arrays once, then resolve the copy under the lock:
    /// validation and update read the same values whatever another thread
    /// writes into the arrays meanwhile.
    fn resolve_once<R: Snap, S: Snap>(
        &self,
        py: Python<'_>,
        rows: &[R],
        width: usize,
        states: &[S],
    ) -> PyResult<hisparse_core::ResolveOutput> {
        if rows.len() > MAX_RESOLVE_ENTRIES {
            return Err(pool_err(
                py,
                PoolError::BatchTooLarge {
                    what: "topk_rows (rows x width)",
                    entries: rows.len() as u64,
                    max: MAX_RESOLVE_ENTRIES as u64,
                },
            ));
        }
        let large = rows.len() >= SIGNAL_CHECK_ENTRIES;
        let work = |copy: bool| {
            SNAPSHOT.with(|snap| {
                let mut snap = snap.borrow_mut();
                if copy {
                    let r = &mut R::buffers(&mut snap)[0];
                    r.clear();
                    r.extend_from_slice(rows);
                    let s = &mut S::buffers(&mut snap)[1];
                    s.clear();
                    s.extend_from_slice(states);
                    if large {
                        return None; // copied; the caller checks for Ctrl-C, then resolves
                    }
                }
                let snap = &mut *snap;
                let r = std::mem::take(&mut R::buffers(snap)[0]);
                let s = std::mem::take(&mut S::buffers(snap)[1]);
                let out = guarded(|| lock(&self.0).resolve(&r, width, &s));
                // Keep the buffers for the next step, unless a huge batch made them huge.
                if r.capacity() <= KEEP_ENTRIES {
                    R::buffers(snap)[0] = r;
                }
                if s.capacity() <= KEEP_ENTRIES {
                    S::buffers(snap)[1] = s;
                }
                Some(out)
            })
        };
        let out = match detach(py, || work(true)) {
            Some(out) => out,
            None => {
                py.check_signals()?;
                detach(py, || work(false)).unwrap_or_else(|| {
                    Err(Failure::Panic(
                        "resolve: the copy of the inputs is gone".to_owned(),
                    ))
                })
            }
        };
        out.map_err(|e| e.into_py(py))
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
