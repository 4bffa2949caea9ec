//! Frozen pyclasses over the core's report types. Each holds the Rust value and
//! converts a field to Python only when it is read, so building a result costs
//! one allocation, not a tree of Python objects.

use hisparse_core::report::{ModelSummary as CoreModel, ResolvedHiSparse};
use hisparse_core::{
    Diagnostic as CoreDiagnostic, Provenance as CoreProvenance, Report as CoreReport, Resolved,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::Value;
use std::sync::Arc;

/// JSON value -> Python object (dict/list/str/int/float/bool/None).
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// The JSON form of a core value as Python objects (None stays None).
fn optional_dict<'py>(
    py: Python<'py>,
    value: Option<Value>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    value.map(|v| to_py(py, &v)).transpose()
}

/// Everything a check found; the `hisparse-check --json` report as an object.
///
/// `hisparse` is set only when the configuration is valid and HiSparse is on.
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct Report(Arc<CoreReport>);

impl From<CoreReport> for Report {
    fn from(r: CoreReport) -> Self {
        Report(Arc::new(r))
    }
}

fn diagnostics<'py>(py: Python<'py>, list: &[CoreDiagnostic]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, list.iter().map(|d| Diagnostic(Arc::new(d.clone()))))
}

#[pymethods]
impl Report {
    /// True when there are no errors.
    #[getter]
    fn valid(&self) -> bool {
        self.0.valid
    }
    /// True when HiSparse is configured (explicitly or through a connector), valid or not.
    #[getter]
    fn hisparse_enabled(&self) -> bool {
        self.0.hisparse_enabled
    }
    /// The model checked against, if any.
    #[getter]
    fn model(&self) -> Option<ModelSummary> {
        self.0.model.clone().map(ModelSummary)
    }
    /// The resolved settings, in the engine's terms (HiSparseSettings for
    /// vLLM, SglangHiSparseSettings for SGLang); None unless valid with HiSparse on.
    #[getter]
    fn hisparse<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        use hisparse_core::report::HiSparseSettings as Core;
        Ok(match &self.0.hisparse {
            Some(Core::Vllm(h)) => {
                Some(Bound::new(py, HiSparseSettings(Arc::new(h.clone())))?.into_any())
            }
            Some(Core::Sglang(h)) => {
                Some(Bound::new(py, SglangHiSparseSettings(Arc::new(h.clone())))?.into_any())
            }
            None => None,
        })
    }
    /// The engine whose rules were applied: "vllm" or "sglang".
    #[getter]
    fn engine(&self) -> &str {
        &self.0.engine
    }
    /// That engine's release, e.g. "0.33.0" or "0.5.23".
    #[getter]
    fn engine_version(&self) -> &str {
        &self.0.engine_version
    }
    /// Every error, as a tuple of Diagnostic.
    #[getter]
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        diagnostics(py, &self.0.errors)
    }
    /// Every warning, as a tuple of Diagnostic.
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        diagnostics(py, &self.0.warnings)
    }
    /// The GPU the check was for (`gpu=`), as a dict: name, description,
    /// platform, arch, memory_gib, max_shared_memory_per_block (bytes) and the
    /// source of each figure; None when no GPU was named.
    #[getter]
    fn gpu<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(
            py,
            self.0
                .gpu
                .as_ref()
                .and_then(|g| serde_json::to_value(g).ok()),
        )
    }
    /// On a valid report with HiSparse, when the node's RAM is known
    /// (`host_memory_gib=`, or the machine's in the vLLM plugin): what the
    /// pinned host pools take of it, as a dict: host_memory_gib, source,
    /// pools_per_node, pool_bytes, pinned_bytes, usable_bytes, left_bytes,
    /// rule. None otherwise.
    #[getter]
    fn host_memory<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(
            py,
            self.0
                .host_memory
                .as_ref()
                .and_then(|m| serde_json::to_value(m).ok()),
        )
    }
    /// The `vllm serve` flags to change with every fix of this report applied,
    /// as shell text (`--block-size 64 --kv-transfer-config '{...}'`;
    /// `(remove --flag)`): given in place of those flags (with `fixed_env`
    /// applied), they pass. JSON flags are given whole (vLLM's dotted flags
    /// replace a JSON flag instead of editing it). None when no fix changes a flag.
    #[getter]
    fn fixed_flags(&self) -> Option<&str> {
        self.0.fixed_flags.as_deref()
    }
    /// The flags given that the check does not read, as given (`--port 30000`):
    /// a CLI run's, or `check_sglang_argv`'s; empty for mapping arguments.
    #[getter]
    fn ignored_flags(&self) -> Vec<String> {
        self.0.ignored_flags.clone()
    }
    /// The environment variables the fixes change, as shell text run before
    /// `vllm serve` (`unset VAR`, `VAR=value`). None when no fix changes one.
    #[getter]
    fn fixed_env(&self) -> Option<&str> {
        self.0.fixed_env.as_deref()
    }
    /// Version of the JSON schema.
    #[getter]
    fn schema_version(&self) -> u32 {
        self.0.schema_version
    }
    /// The vLLM release whose rules were applied.
    #[getter]
    fn vllm_version(&self) -> Option<&str> {
        self.0.vllm_version.as_deref()
    }
    /// The report as JSON text (the `hisparse-check --json` schema).
    fn to_json(&self) -> String {
        self.0.to_json()
    }
    fn __repr__(&self) -> String {
        format!(
            "Report(valid={}, hisparse_enabled={}, errors={}, warnings={})",
            py_bool(self.0.valid),
            py_bool(self.0.hisparse_enabled),
            self.0.errors.len(),
            self.0.warnings.len()
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// One error or warning. Match on `code` (stable), never on `message`.
///
/// `path` is the field path, e.g.
/// `kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role`;
/// `fix` is a tuple of edit operations (`{"op": "set"|"remove"|"move", ...}`)
/// that `hisparse_rs.apply_fix` applies and that make this diagnostic go away.
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct Diagnostic(Arc<CoreDiagnostic>);

#[pymethods]
impl Diagnostic {
    /// Stable code, e.g. "missing_kv_role".
    #[getter]
    fn code(&self) -> &'static str {
        self.0.code.as_str()
    }
    /// "error" or "warning".
    #[getter]
    fn severity(&self) -> &'static str {
        if self.0.is_error() {
            "error"
        } else {
            "warning"
        }
    }
    /// Field path in the serve configuration.
    #[getter]
    fn path(&self) -> String {
        self.0.path.to_string()
    }
    /// One sentence a user can read without the source.
    #[getter]
    fn message(&self) -> &str {
        &self.0.message
    }
    /// When vLLM 0.33.0 would have refused this: "argparse", "config",
    /// "engine_start", "model_load", "workers", "first_step", or "never" (it
    /// accepts it, then breaks on it or ignores it). See `vllm_stages()`.
    #[getter]
    fn stage(&self) -> &'static str {
        self.0.stage.as_str()
    }
    /// The stage in words, as `hisparse-check` prints it, e.g. "vLLM 0.33.0
    /// refuses this after the model has loaded, when its workers set up the
    /// KV cache"; for `never`, "vLLM 0.33.0 accepts this ...".
    #[getter]
    fn stage_sentence(&self) -> String {
        hisparse_core::engines::stage_sentence(self.0.stage, self.0.is_error())
    }
    /// The value that was given (JSON types), or None.
    #[getter]
    fn given<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.0.given {
            Some(v) => to_py(py, v),
            None => Ok(py.None().into_bound(py)),
        }
    }
    /// What is allowed, in words.
    #[getter]
    fn allowed(&self) -> Option<&str> {
        self.0.allowed.as_deref()
    }
    /// What to do, in words.
    #[getter]
    fn hint(&self) -> Option<&str> {
        self.0.hint.as_deref()
    }
    /// True for an error the configuration as given does not have, that only
    /// the report's other fixes reveal; its fix applies after theirs.
    #[getter]
    fn revealed(&self) -> bool {
        self.0.revealed
    }
    /// The fix as a tuple of edit operations (dicts); empty when there is none.
    #[getter]
    fn fix<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let ops = self
            .0
            .fix
            .iter()
            .map(|op| to_py(py, &serde_json::to_value(op).unwrap_or(Value::Null)))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, ops)
    }
    fn __repr__(&self) -> String {
        format!(
            "Diagnostic({}[{}] {}: {})",
            self.severity(),
            self.code(),
            self.0.path,
            self.0.message
        )
    }
}

/// Where a resolved value came from.
///
/// `source` is "explicit" (the user set it at `path`), "inferred" (from the
/// HiSparseConnector at `connector`), "default" (vLLM's default, see `rule`)
/// or "derived" (computed by `rule` from the inputs in `from_`).
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct Provenance(pub(crate) CoreProvenance);

#[pymethods]
impl Provenance {
    #[getter]
    fn source(&self) -> &'static str {
        match &self.0 {
            CoreProvenance::Explicit { .. } => "explicit",
            CoreProvenance::Inferred { .. } => "inferred",
            CoreProvenance::Default { .. } => "default",
            CoreProvenance::Derived { .. } => "derived",
        }
    }
    /// For "explicit": the path the value came from.
    #[getter]
    fn path(&self) -> Option<&str> {
        match &self.0 {
            CoreProvenance::Explicit { path } => Some(path),
            _ => None,
        }
    }
    /// For "inferred": the HiSparseConnector's path.
    #[getter]
    fn connector(&self) -> Option<&str> {
        match &self.0 {
            CoreProvenance::Inferred { connector } => Some(connector),
            _ => None,
        }
    }
    /// For "default" and "derived": the rule, with its source.
    #[getter]
    fn rule(&self) -> Option<&str> {
        match &self.0 {
            CoreProvenance::Default { rule } | CoreProvenance::Derived { rule, .. } => Some(rule),
            _ => None,
        }
    }
    /// For "derived": the inputs.
    #[getter]
    fn from_<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.0 {
            CoreProvenance::Derived { from, .. } => PyTuple::new(py, from),
            _ => Ok(PyTuple::empty(py)),
        }
    }
    fn __repr__(&self) -> String {
        let detail = self
            .path()
            .or(self.connector())
            .or(self.rule())
            .unwrap_or("");
        format!("Provenance({}: {detail})", self.source())
    }
}

/// HiSparse as vLLM 0.33.0 would run it; `provenance[name]` says where each field came from.
///
/// Units: `host_pool_gib` GiB (2**30 B) per data-parallel replica;
/// `device_buffer_size` hot-buffer rows per request (incl. the newest-token
/// slot); `row_bytes` bytes per token per layer (656 fp8_ds_mla, 1152 bf16 on
/// DeepSeek-V3.2; None if unknown); `block_size`, `max_model_len` tokens;
/// `topk_buffer_width` rows per query the hot buffer holds (index_topk, or
/// wider for a pooled indexer); `host_block_bytes` = block_size x row_bytes x
/// sparse_mla_layers; `host_block_stride` = host_block_bytes rounded up to 4 KiB
/// when TP ranks share the pool; `host_blocks` = floor(host_pool_gib x 2**30 /
/// host_block_stride);
/// `min_host_blocks` = ceil(max_model_len / block_size) + 2.
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct HiSparseSettings(pub(crate) Arc<ResolvedHiSparse>);

fn value<T: Clone>(r: &Option<Resolved<T>>) -> Option<T> {
    r.as_ref().map(|r| r.value.clone())
}

#[pymethods]
impl HiSparseSettings {
    /// Why HiSparse is on: explicit hisparse_config, or inferred from the connector.
    #[getter]
    fn enabled_by(&self) -> Provenance {
        Provenance(self.0.enabled.provenance.clone())
    }
    /// Path of the HiSparseConnector.
    #[getter]
    fn connector(&self) -> &str {
        &self.0.connector
    }
    #[getter]
    fn host_pool_gib(&self) -> f64 {
        self.0.host_pool_gib.value
    }
    #[getter]
    fn device_buffer_size(&self) -> u32 {
        self.0.device_buffer_size.value
    }
    #[getter]
    fn eager_host_mirror(&self) -> bool {
        self.0.eager_host_mirror.value
    }
    #[getter]
    fn index_topk(&self) -> u32 {
        self.0.index_topk.value
    }
    #[getter]
    fn topk_buffer_width(&self) -> u32 {
        self.0.topk_buffer_width.value
    }
    #[getter]
    fn max_decode_query_len(&self) -> u32 {
        self.0.max_decode_query_len.value
    }
    #[getter]
    fn kv_cache_dtype(&self) -> &str {
        &self.0.kv_cache_dtype.value
    }
    #[getter]
    fn row_bytes(&self) -> Option<u32> {
        value(&self.0.row_bytes)
    }
    #[getter]
    fn block_size(&self) -> u32 {
        self.0.block_size.value
    }
    #[getter]
    fn max_model_len(&self) -> u64 {
        self.0.max_model_len.value
    }
    #[getter]
    fn sparse_mla_layers(&self) -> u32 {
        self.0.sparse_mla_layers.value
    }
    #[getter]
    fn host_block_bytes(&self) -> Option<u64> {
        value(&self.0.host_block_bytes)
    }
    #[getter]
    fn host_block_stride(&self) -> Option<u64> {
        value(&self.0.host_block_stride)
    }
    #[getter]
    fn host_blocks(&self) -> Option<u64> {
        value(&self.0.host_blocks)
    }
    #[getter]
    fn min_host_blocks(&self) -> u64 {
        self.0.min_host_blocks.value
    }
    /// Bytes of shared memory per CUDA block vLLM's residency resolver needs
    /// for this hot buffer and query length (vLLM 0.33 `_check_residency_shared_memory`).
    #[getter]
    fn residency_shared_memory_bytes(&self) -> Option<u64> {
        value(&self.0.residency_shared_memory_bytes)
    }
    /// The same per program for hisparse_rs's Triton resolver (bytes; its compiled cubins' figure).
    #[getter]
    fn triton_resolver_shared_memory_bytes(&self) -> Option<u64> {
        self.0.triton_resolver_shared_memory_bytes
    }
    /// Index group of each host-pool layer (sparse-MLA, then MTP draft layers):
    /// layers that reuse an earlier layer's top-k (GLM-5.2 IndexShare) share a
    /// group. A new list each call; empty for implausibly many layers.
    #[getter]
    fn index_groups(&self) -> Vec<u32> {
        self.0.index_groups.clone()
    }
    /// Field name -> Provenance for every resolved field (a new dict each call).
    #[getter]
    fn provenance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = &*self.0;
        let dict = PyDict::new(py);
        let put = |name: &str, p: Option<&CoreProvenance>| -> PyResult<()> {
            match p {
                Some(p) => dict.set_item(name, Provenance(p.clone())),
                None => Ok(()),
            }
        };
        put("host_pool_gib", Some(&h.host_pool_gib.provenance))?;
        put("device_buffer_size", Some(&h.device_buffer_size.provenance))?;
        put("eager_host_mirror", Some(&h.eager_host_mirror.provenance))?;
        put("index_topk", Some(&h.index_topk.provenance))?;
        put("topk_buffer_width", Some(&h.topk_buffer_width.provenance))?;
        put(
            "max_decode_query_len",
            Some(&h.max_decode_query_len.provenance),
        )?;
        put("kv_cache_dtype", Some(&h.kv_cache_dtype.provenance))?;
        put("row_bytes", h.row_bytes.as_ref().map(|r| &r.provenance))?;
        put("block_size", Some(&h.block_size.provenance))?;
        put("max_model_len", Some(&h.max_model_len.provenance))?;
        put("sparse_mla_layers", Some(&h.sparse_mla_layers.provenance))?;
        put(
            "host_block_bytes",
            h.host_block_bytes.as_ref().map(|r| &r.provenance),
        )?;
        put(
            "host_block_stride",
            h.host_block_stride.as_ref().map(|r| &r.provenance),
        )?;
        put("host_blocks", h.host_blocks.as_ref().map(|r| &r.provenance))?;
        put("min_host_blocks", Some(&h.min_host_blocks.provenance))?;
        put(
            "residency_shared_memory_bytes",
            h.residency_shared_memory_bytes
                .as_ref()
                .map(|r| &r.provenance),
        )?;
        Ok(dict)
    }
    fn __repr__(&self) -> String {
        let h = &*self.0;
        format!(
            "HiSparseSettings(connector={:?}, host_pool_gib={}, device_buffer_size={}, index_topk={}, kv_cache_dtype={:?}, block_size={})",
            h.connector, h.host_pool_gib.value, h.device_buffer_size.value, h.index_topk.value, h.kv_cache_dtype.value, h.block_size.value
        )
    }
}

/// The model checked against: `source` is the config path (or "hf_config").
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct ModelSummary(CoreModel);

#[pymethods]
impl ModelSummary {
    #[getter]
    fn source(&self) -> &str {
        &self.0.source
    }
    #[getter]
    fn architecture(&self) -> Option<&str> {
        self.0.architecture.as_deref()
    }
    #[getter]
    fn model_type(&self) -> Option<&str> {
        self.0.model_type.as_deref()
    }
    fn __repr__(&self) -> String {
        format!(
            "ModelSummary(architecture={:?}, source={:?})",
            self.0.architecture, self.0.source
        )
    }
}

// ---------------------------------------------------------------------------
// The capacity plan. Sections are small frozen value objects (copied from the
// core's structs when read); `Plan.to_json()` is the `--plan --json` schema.

use hisparse_core::plan::{
    GpuPlan as CoreGpu, HostPlan as CoreHost, Limit, Plan as CorePlan, PlanPoint as CorePoint,
    PoolMode, SglangSizing as CoreSglangSizing, Sizes as CoreSizes,
};

fn limit(l: Option<Limit>) -> Option<&'static str> {
    l.map(Limit::as_str)
}

/// Per-token and per-block sizes of a plan, bytes (HISPARSE.md §5; vLLM 0.33 layout).
///
/// `mla_row_bytes` per token per layer (656 fp8_ds_mla, 1152 bf16);
/// `indexer_row_bytes` per token per layer (132); `hot_groups` groups of hot
/// layers in the GPU pool; `baseline_block_bytes` / `hisparse_block_bytes` one
/// GPU block without / with HiSparse.
#[pyclass(frozen, get_all, eq, skip_from_py_object, module = "hisparse_rs")]
#[derive(Clone, PartialEq)]
pub struct PlanSizes {
    kv_cache_dtype: String,
    mla_row_bytes: u32,
    indexer_row_bytes: u32,
    sparse_mla_layers: u32,
    indexer_layers: u32,
    draft_layers: u32,
    mla_bytes_per_token: u64,
    indexer_bytes_per_token: u64,
    block_size: u32,
    device_buffer_size: u32,
    hot_buffer_bytes: u64,
    hot_groups: u64,
    baseline_block_bytes: u64,
    hisparse_block_bytes: u64,
}

impl From<&CoreSizes> for PlanSizes {
    fn from(s: &CoreSizes) -> Self {
        PlanSizes {
            kv_cache_dtype: s.kv_cache_dtype.clone(),
            mla_row_bytes: s.mla_row_bytes,
            indexer_row_bytes: s.indexer_row_bytes,
            sparse_mla_layers: s.sparse_mla_layers,
            indexer_layers: s.indexer_layers,
            draft_layers: s.draft_layers,
            mla_bytes_per_token: s.mla_bytes_per_token,
            indexer_bytes_per_token: s.indexer_bytes_per_token,
            block_size: s.block_size,
            device_buffer_size: s.device_buffer_size,
            hot_buffer_bytes: s.hot_buffer_bytes,
            hot_groups: s.hot_groups,
            baseline_block_bytes: s.baseline_block_bytes,
            hisparse_block_bytes: s.hisparse_block_bytes,
        }
    }
}

/// The host pools of one node: `mode` "shared" (one pool per DP replica) or
/// "private" (one per rank); bytes unless named GiB; `host_memory_bytes` null
/// when the node's RAM is unknown; `usable_host_memory_bytes` is 95 % of it;
/// `host_memory_given` False when it is this machine's (then a pool that does
/// not fit is a warning, not an error).
#[pyclass(frozen, get_all, eq, skip_from_py_object, module = "hisparse_rs")]
#[derive(Clone, PartialEq)]
pub struct HostPlan {
    mode: &'static str,
    mode_rule: String,
    host_pool_gib: f64,
    host_block_bytes: u64,
    host_block_stride: u64,
    host_blocks: u64,
    min_host_blocks: u64,
    min_host_pool_gib: f64,
    pool_bytes: u64,
    pools_per_node: u64,
    pinned_bytes_per_node: u64,
    host_memory_bytes: Option<u64>,
    host_memory_source: String,
    usable_host_memory_bytes: Option<u64>,
    host_memory_given: bool,
    draft_model: Option<String>,
}

impl From<&CoreHost> for HostPlan {
    fn from(h: &CoreHost) -> Self {
        HostPlan {
            mode: match h.mode {
                PoolMode::Shared => "shared",
                PoolMode::Private => "private",
            },
            mode_rule: h.mode_rule.clone(),
            host_pool_gib: h.host_pool_gib,
            host_block_bytes: h.host_block_bytes,
            host_block_stride: h.host_block_stride,
            host_blocks: h.host_blocks,
            min_host_blocks: h.min_host_blocks,
            min_host_pool_gib: h.min_host_pool_gib,
            pool_bytes: h.pool_bytes,
            pools_per_node: h.pools_per_node,
            pinned_bytes_per_node: h.pinned_bytes_per_node,
            host_memory_bytes: h.host_memory_bytes,
            host_memory_source: h.host_memory_source.clone(),
            usable_host_memory_bytes: h.usable_host_memory_bytes,
            host_memory_given: h.host_memory_given,
            draft_model: h.draft_model.clone(),
        }
    }
}

/// GPU memory of each GPU of a replica, bytes; `kv_bytes_per_gpu` null when
/// neither kv_cache_memory_bytes nor gpu_memory_gib was given; `gpu_name` the
/// GPU named with `gpu=` (whose memory fills gpu_memory_gib when not given).
#[pyclass(frozen, get_all, eq, skip_from_py_object, module = "hisparse_rs")]
#[derive(Clone, PartialEq)]
pub struct GpuPlan {
    tensor_parallel_size: u64,
    data_parallel_size: u64,
    kv_bytes_per_gpu: Option<u64>,
    kv_source: String,
    gpu_memory_gib: Option<f64>,
    gpu_memory_utilization: f64,
    weights_bytes_per_gpu: Option<u64>,
    weights_source: Option<String>,
    weights_estimated: bool,
    max_num_seqs: u64,
    max_num_seqs_source: String,
    baseline_blocks: Option<u64>,
    hisparse_blocks: Option<u64>,
    gpu_name: Option<String>,
}

impl From<&CoreGpu> for GpuPlan {
    fn from(g: &CoreGpu) -> Self {
        GpuPlan {
            tensor_parallel_size: g.tensor_parallel_size,
            data_parallel_size: g.data_parallel_size,
            kv_bytes_per_gpu: g.kv_bytes_per_gpu,
            kv_source: g.kv_source.clone(),
            gpu_memory_gib: g.gpu_memory_gib,
            gpu_memory_utilization: g.gpu_memory_utilization,
            weights_bytes_per_gpu: g.weights_bytes_per_gpu,
            weights_source: g.weights_source.clone(),
            weights_estimated: g.weights_estimated,
            max_num_seqs: g.max_num_seqs,
            max_num_seqs_source: g.max_num_seqs_source.clone(),
            baseline_blocks: g.baseline_blocks,
            hisparse_blocks: g.hisparse_blocks,
            gpu_name: g.spec.as_ref().map(|s| s.name.clone()),
        }
    }
}

/// Capacity at one context length (tokens), per DP replica. Limits are
/// "gpu", "host", "max_num_seqs" or "baseline"; request counts are None when
/// the GPU KV room is unknown.
#[pyclass(frozen, get_all, eq, skip_from_py_object, module = "hisparse_rs")]
#[derive(Clone, PartialEq)]
pub struct PlanPoint {
    context_length: u64,
    host_kv_bytes_per_request: u64,
    indexer_bytes_per_request: u64,
    baseline_gpu_bytes_per_request: u64,
    hisparse_gpu_blocks_per_request: u64,
    hisparse_gpu_bytes_per_request: u64,
    host_blocks_per_request: u64,
    baseline_requests: Option<u64>,
    baseline_limit: Option<&'static str>,
    gpu_limit: Option<u64>,
    host_limit: u64,
    hisparse_requests: Option<u64>,
    hisparse_limit: Option<&'static str>,
    target_requests: Option<u64>,
    min_host_pool_gib: Option<f64>,
    min_host_pool_requests: Option<u64>,
    /// SGLang plans only (None for vLLM): the smallest `host_to_device_ratio`
    /// whose host pool holds `min_host_pool_requests` requests of this context.
    host_to_device_ratio: Option<u64>,
}

impl From<&CorePoint> for PlanPoint {
    fn from(p: &CorePoint) -> Self {
        PlanPoint {
            context_length: p.context_length,
            host_kv_bytes_per_request: p.host_kv_bytes_per_request,
            indexer_bytes_per_request: p.indexer_bytes_per_request,
            baseline_gpu_bytes_per_request: p.baseline_gpu_bytes_per_request,
            hisparse_gpu_blocks_per_request: p.hisparse_gpu_blocks_per_request,
            hisparse_gpu_bytes_per_request: p.hisparse_gpu_bytes_per_request,
            host_blocks_per_request: p.host_blocks_per_request,
            baseline_requests: p.baseline_requests,
            baseline_limit: limit(p.baseline_limit),
            gpu_limit: p.gpu_limit,
            host_limit: p.host_limit,
            hisparse_requests: p.hisparse_requests,
            hisparse_limit: limit(p.hisparse_limit),
            target_requests: p.target_requests,
            min_host_pool_gib: p.min_host_pool_gib,
            min_host_pool_requests: p.min_host_pool_requests,
            host_to_device_ratio: p.host_to_device_ratio,
        }
    }
}

#[pymethods]
impl PlanPoint {
    fn __repr__(&self) -> String {
        let show = |n: Option<u64>, l: Option<&str>| match (n, l) {
            (Some(n), Some(l)) => format!("{n} ({l})"),
            _ => "None".to_owned(),
        };
        format!(
            "PlanPoint(context_length={}, baseline={}, hisparse={})",
            self.context_length,
            show(self.baseline_requests, self.baseline_limit),
            show(self.hisparse_requests, self.hisparse_limit)
        )
    }
}

/// How SGLang 0.5.23 sizes one GPU's pools for a HiSparse launch (`Plan.sglang`,
/// the JSON's `sglang`): `host_to_device_ratio` R, `device_cell_bytes`,
/// `device_slots` (N_dev), `host_tokens` (N_host), `request_device_slots`
/// (D + 64 + scratch), `speculative_scratch_slots`, `mem_fraction_static_rule`,
/// `max_running_requests` (per attention-DP worker) and its rule,
/// `ranks_per_host`, `host_budget_per_rank_bytes` (None without the node's
/// RAM), `baseline_device_slots` (without HiSparse), `prompt_on_device`.
#[pyclass(frozen, get_all, eq, skip_from_py_object, module = "hisparse_rs")]
#[derive(Clone, PartialEq)]
pub struct SglangSizing {
    host_to_device_ratio: u64,
    device_cell_bytes: u64,
    device_slots: u64,
    host_tokens: u64,
    request_device_slots: u64,
    speculative_scratch_slots: u64,
    mem_fraction_static_rule: String,
    max_running_requests: u64,
    max_running_requests_rule: String,
    ranks_per_host: u64,
    host_budget_per_rank_bytes: Option<u64>,
    baseline_device_slots: u64,
    prompt_on_device: bool,
}

impl From<&CoreSglangSizing> for SglangSizing {
    fn from(s: &CoreSglangSizing) -> Self {
        SglangSizing {
            host_to_device_ratio: s.host_to_device_ratio,
            device_cell_bytes: s.device_cell_bytes,
            device_slots: s.device_slots,
            host_tokens: s.host_tokens,
            request_device_slots: s.request_device_slots,
            speculative_scratch_slots: s.speculative_scratch_slots,
            mem_fraction_static_rule: s.mem_fraction_static_rule.clone(),
            max_running_requests: s.max_running_requests,
            max_running_requests_rule: s.max_running_requests_rule.clone(),
            ranks_per_host: s.ranks_per_host,
            host_budget_per_rank_bytes: s.host_budget_per_rank_bytes,
            baseline_device_slots: s.baseline_device_slots,
            prompt_on_device: s.prompt_on_device,
        }
    }
}

#[pymethods]
impl SglangSizing {
    fn __repr__(&self) -> String {
        format!(
            "SglangSizing(host_to_device_ratio={}, device_slots={}, host_tokens={}, max_running_requests={})",
            self.host_to_device_ratio, self.device_slots, self.host_tokens, self.max_running_requests
        )
    }
}

/// The capacity plan of a valid HiSparse configuration (`hisparse-check --plan`).
///
/// `valid` is False when the pinned host pools do not fit in 95 % of the node's
/// RAM (see `errors`, code "host_memory_exceeded"). `at_context` is the plan at
/// `context_length` tokens; `sweep` covers 8K, 16K, ... up to `max_model_len`.
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct Plan(Arc<CorePlan>);

impl From<CorePlan> for Plan {
    fn from(p: CorePlan) -> Self {
        Plan(Arc::new(p))
    }
}

#[pymethods]
impl Plan {
    #[getter]
    fn valid(&self) -> bool {
        self.0.valid
    }
    #[getter]
    fn schema_version(&self) -> u32 {
        self.0.schema_version
    }
    /// The engine planned for: "vllm" or "sglang".
    #[getter]
    fn engine(&self) -> &str {
        &self.0.engine
    }
    /// That engine's release ("0.33.0", "0.5.23").
    #[getter]
    fn engine_version(&self) -> &str {
        &self.0.engine_version
    }
    /// The vLLM release of a vLLM plan; None for SGLang (as `Report.vllm_version`).
    #[getter]
    fn vllm_version(&self) -> Option<&str> {
        Some(self.0.vllm_version.as_str()).filter(|v| !v.is_empty())
    }
    /// SGLang plans only (None for vLLM): how SGLang sizes the pools.
    #[getter]
    fn sglang(&self) -> Option<SglangSizing> {
        self.0.sglang.as_ref().map(SglangSizing::from)
    }
    #[getter]
    fn model(&self) -> Option<ModelSummary> {
        self.0.model.clone().map(ModelSummary)
    }
    /// Tokens per request the plan is for: `plan(context_length=)` (the CLI's
    /// `--context-length` for vLLM, `--plan-context-length` for SGLang), else
    /// the longest the launch serves (vLLM's max_model_len, SGLang's
    /// `--context-length` or the model's).
    #[getter]
    fn context_length(&self) -> u64 {
        self.0.context_length
    }
    #[getter]
    fn max_model_len(&self) -> u64 {
        self.0.max_model_len
    }
    #[getter]
    fn sizes(&self) -> PlanSizes {
        PlanSizes::from(&self.0.sizes)
    }
    #[getter]
    fn host(&self) -> HostPlan {
        HostPlan::from(&self.0.host)
    }
    #[getter]
    fn gpu(&self) -> GpuPlan {
        GpuPlan::from(&self.0.gpu)
    }
    #[getter]
    fn at_context(&self) -> PlanPoint {
        PlanPoint::from(&self.0.at_context)
    }
    /// Plan points from 8K tokens, doubling, to max_model_len (a tuple).
    #[getter]
    fn sweep<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.sweep.iter().map(PlanPoint::from))
    }
    #[getter]
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        diagnostics(py, &self.0.errors)
    }
    /// The check's warnings, then the planner's.
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        diagnostics(py, &self.0.warnings)
    }
    /// None, or, for a configuration without HiSparse, the HiSparse settings
    /// this plan assumed: a dict with kv_transfer_config (the flag to serve
    /// it), host_pool_gib, host_pool_rule and rule.
    #[getter]
    fn assumed<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(
            py,
            self.0
                .assumed
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        )
    }
    /// None, or, for a plan made from an engine's start-up log
    /// (`engine_log=`), a dict: path, engine, lines, logged_hisparse,
    /// measured (the log's figures the plan used: input, value, rule,
    /// figure) and compared (each logged figure beside the plan's: figure,
    /// unit, logged, computed, difference, why, line, source).
    #[getter]
    fn engine_log<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(
            py,
            self.0
                .engine_log
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        )
    }
    /// What each group of figures is: a dict of sizes, host_pool, weights
    /// (None when the plan did not use them), kv_room, gpu_blocks, host_limit,
    /// requests, each "exact", "measured", "estimated" or "unknown" (the JSON's
    /// `figures`).
    #[getter]
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(
            py,
            &serde_json::to_value(&self.0.figures).unwrap_or_default(),
        )
    }
    /// Why the GPU concurrency at context_length is what it is: None, or a
    /// dict of unit ("blocks" for vLLM, "slots" for SGLang), gpu_units,
    /// per_token_units (one request's units that grow with its context),
    /// fixed_units (those it holds whatever its length), fixed_rule,
    /// fixed_share (0 to 1) and why (the JSON's `concurrency`).
    #[getter]
    fn concurrency<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(
            py,
            self.0
                .concurrency
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok()),
        )
    }
    /// The plan as JSON text (the `hisparse-check --plan --json` schema).
    fn to_json(&self) -> String {
        self.0.to_json()
    }
    fn __repr__(&self) -> String {
        let a = &self.0.at_context;
        let int = |n: Option<u64>| n.map_or_else(|| "None".to_owned(), |n| n.to_string());
        format!(
            "Plan(valid={}, context_length={}, baseline_requests={}, hisparse_requests={}, hisparse_limit={})",
            py_bool(self.0.valid),
            self.0.context_length,
            int(a.baseline_requests),
            int(a.hisparse_requests),
            limit(a.hisparse_limit).map_or_else(|| "None".to_owned(), |l| format!("'{l}'"))
        )
    }
}

// ---------------------------------------------------------------------------
// SGLang's resolved settings (`Report.hisparse` of an SGLang launch), beside
// vLLM's `HiSparseSettings`: the report reads both, and sglang.rs reads the
// report, so they live here and no module imports its importer back.

use hisparse_core::engines::sglang_0_5_23::SglangHiSparse;

/// HiSparse as SGLang 0.5.23 would run it, with SGLang's own names (tokens,
/// slots, bytes): `Report.hisparse` of a valid SGLang launch with
/// `--enable-hisparse`. Each value's provenance is in `provenance`.
#[pyclass(frozen, eq, module = "hisparse_rs")]
#[derive(PartialEq)]
pub struct SglangHiSparseSettings(pub(crate) Arc<SglangHiSparse>);

#[pymethods]
impl SglangHiSparseSettings {
    /// `hisparse_config.top_k` (default 2048): only the default buffer and the
    /// `device_buffer_size >= top_k` check read it (mem_cache/sparsity/factory.py:85-90).
    /// Python's value as SGLang holds it: an int (any size), or a float
    /// (`2048.5`, NaN and infinities pass SGLang's checks when a buffer is given).
    #[getter]
    fn top_k<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.0.top_k.value {
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Ok(i.into_pyobject(py)?.into_any()),
                (None, Some(u), _) => Ok(u.into_pyobject(py)?.into_any()),
                (_, _, f) => Ok(f.unwrap_or(f64::NAN).into_pyobject(py)?.into_any()),
            },
            // "nan", "inf", "-inf", or the digits of an integer beyond 64 bits.
            serde_json::Value::String(s) if s.ends_with("nan") || s.ends_with("inf") => {
                py.get_type::<pyo3::types::PyFloat>().call1((s.as_str(),))
            }
            other => py
                .get_type::<pyo3::types::PyInt>()
                .call1((other.to_string().trim_matches('"'),)),
        }
    }
    /// The model's `index_topk`, which replaces `top_k` at run time (model_runner.py:1039-1041).
    #[getter]
    fn index_topk(&self) -> i64 {
        self.0.index_topk.value
    }
    /// Device slots per request and layer (default 2 x top_k).
    #[getter]
    fn device_buffer_size(&self) -> i64 {
        self.0.device_buffer_size.value
    }
    /// Host pool tokens per device KV slot (default 2).
    #[getter]
    fn host_to_device_ratio(&self) -> i64 {
        self.0.host_to_device_ratio.value
    }
    /// Tokens per swap-in block (default 960, 1 ..= 1024).
    #[getter]
    fn swap_in_block_size(&self) -> i64 {
        self.0.swap_in_block_size.value
    }
    /// Tokens per page: 64 x index_kpool for DSA, overriding `--page-size`.
    #[getter]
    fn page_size(&self) -> i64 {
        self.0.page_size.value
    }
    /// The KV cache dtype after `auto` (fp8_e4m3 on SM >= 10, bfloat16 below).
    #[getter]
    fn kv_cache_dtype(&self) -> &str {
        &self.0.kv_cache_dtype.value
    }
    /// The compute capability the dtype was resolved for, e.g. "9.0".
    #[getter]
    fn compute_capability(&self) -> &str {
        &self.0.compute_capability.value
    }
    /// The DSA prefill backend; None for a model without DSA (DeepSeek-V4, MiniMax-M3).
    #[getter]
    fn dsa_prefill_backend(&self) -> Option<&str> {
        self.0
            .dsa_prefill_backend
            .as_ref()
            .map(|r| r.value.as_str())
    }
    /// The DSA decode backend; None for a model without DSA.
    #[getter]
    fn dsa_decode_backend(&self) -> Option<&str> {
        self.0.dsa_decode_backend.as_ref().map(|r| r.value.as_str())
    }
    /// The radix cache is off (HiSparse requires it).
    #[getter]
    fn disable_radix_cache(&self) -> bool {
        self.0.disable_radix_cache.value
    }
    /// "null", "prefill" or "decode".
    #[getter]
    fn disaggregation_mode(&self) -> &str {
        &self.0.disaggregation_mode.value
    }
    /// Draft tokens per verify step; None without speculation.
    #[getter]
    fn speculative_num_draft_tokens(&self) -> Option<i64> {
        self.0
            .speculative_num_draft_tokens
            .as_ref()
            .map(|r| r.value)
    }
    /// Bytes of one token's MLA latent in one layer (1152 bfloat16, 656 fp8_e4m3); None if unknown.
    #[getter]
    fn kv_row_bytes(&self) -> Option<u64> {
        self.0.kv_row_bytes.as_ref().map(|r| r.value)
    }
    /// Field name -> Provenance for every resolved field (a new dict each call).
    #[getter]
    fn provenance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = &*self.0;
        let dict = PyDict::new(py);
        fn put<T>(d: &Bound<'_, PyDict>, name: &str, r: Option<&Resolved<T>>) -> PyResult<()> {
            match r {
                Some(r) => d.set_item(name, Provenance(r.provenance.clone())),
                None => Ok(()),
            }
        }
        put(&dict, "enable_hisparse", Some(&h.enable_hisparse))?;
        put(&dict, "top_k", Some(&h.top_k))?;
        put(&dict, "index_topk", Some(&h.index_topk))?;
        put(&dict, "device_buffer_size", Some(&h.device_buffer_size))?;
        put(&dict, "host_to_device_ratio", Some(&h.host_to_device_ratio))?;
        put(&dict, "swap_in_block_size", Some(&h.swap_in_block_size))?;
        put(&dict, "page_size", Some(&h.page_size))?;
        put(&dict, "kv_cache_dtype", Some(&h.kv_cache_dtype))?;
        put(&dict, "compute_capability", Some(&h.compute_capability))?;
        put(&dict, "dsa_prefill_backend", h.dsa_prefill_backend.as_ref())?;
        put(&dict, "dsa_decode_backend", h.dsa_decode_backend.as_ref())?;
        put(&dict, "disable_radix_cache", Some(&h.disable_radix_cache))?;
        put(&dict, "disaggregation_mode", Some(&h.disaggregation_mode))?;
        put(
            &dict,
            "speculative_num_draft_tokens",
            h.speculative_num_draft_tokens.as_ref(),
        )?;
        put(&dict, "kv_row_bytes", h.kv_row_bytes.as_ref())?;
        Ok(dict)
    }
    fn __repr__(&self) -> String {
        let h = &*self.0;
        format!(
            "SglangHiSparseSettings(device_buffer_size={}, top_k={}, index_topk={}, host_to_device_ratio={}, page_size={}, kv_cache_dtype={:?})",
            h.device_buffer_size.value,
            // Python's repr: 2048, 2048.5, nan (a JSON string only where JSON has no number).
            h.top_k.value.as_str().map_or_else(|| h.top_k.value.to_string(), str::to_owned),
            h.index_topk.value,
            h.host_to_device_ratio.value,
            h.page_size.value,
            h.kv_cache_dtype.value
        )
    }
}
