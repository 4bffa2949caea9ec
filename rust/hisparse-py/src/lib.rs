//! `hisparse_rs._core`: the PyO3 binding. Conversions and error mapping only;
//! every rule lives in `hisparse-core`, every flag in `hisparse-check`.
//!
//! The host pool, its layout, the residency resolver and the metrics are in
//! `pool.rs` (numpy arrays in and out, GIL released while the resolver works).
//!
//! Serve args come in as JSON text (the `ServeArgs` form); results go out as
//! frozen pyclasses over the core's report, converted field by field only
//! when Python reads them. `Report.to_json()` is the `hisparse-check --json` schema.

mod pool;
mod results;

use hisparse_core::config::args::LoadError;
use hisparse_core::diagnostic::{apply_fix as apply_ops, FixOp};
use hisparse_core::plan::{plan, PlanError, PlanOptions};
use hisparse_core::{resolve, Code, ServeArgs};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use results::{
    Diagnostic, GpuPlan, HiSparseSettings, HostPlan, ModelSummary, Plan, PlanPoint, PlanSizes,
    Provenance, Report,
};

pyo3::create_exception!(
    _core,
    ModelLoadError,
    PyOSError,
    "The model's config.json could not be found or read (an I/O problem, not a configuration error)."
);

/// Wraps core errors for the orphan rule; converts to a Python exception.
struct CoreError(LoadError);

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        ModelLoadError::new_err(e.0.to_string())
    }
}

fn parse_args(args_json: &str) -> PyResult<ServeArgs> {
    serde_json::from_str(args_json).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            PyTypeError::new_err(format!("invalid serve arguments: {e}"))
        }
        _ => PyValueError::new_err(format!("serve args are not valid JSON: {e}")),
    })
}

/// Resolve and validate serve args given as JSON (the `ServeArgs` form: vLLM
/// EngineArgs field names). The GIL is released while Rust works.
///
/// Raises ModelLoadError when the model's config.json cannot be read,
/// TypeError when an argument has the wrong type.
#[pyfunction]
fn check_json(py: Python<'_>, args_json: &str) -> PyResult<Report> {
    let args = parse_args(args_json)?;
    let report = py.detach(|| resolve(&args)).map_err(CoreError)?;
    Ok(Report::from(report))
}

/// Plan capacity for serve args given as JSON (the `ServeArgs` form) with
/// planner options as JSON (`context_length`, `target_requests`,
/// `host_memory_gib`, `gpu_memory_gib`, `weights_gib`). Returns the check
/// report and the plan (None unless the configuration is valid with HiSparse on).
///
/// Raises ModelLoadError when the model's config.json cannot be read,
/// ValueError when an option is out of range, TypeError on ill-typed input.
#[pyfunction]
fn plan_json(
    py: Python<'_>,
    args_json: &str,
    options_json: &str,
) -> PyResult<(Report, Option<Plan>)> {
    let args = parse_args(args_json)?;
    let options: PlanOptions = serde_json::from_str(options_json)
        .map_err(|e| PyTypeError::new_err(format!("invalid plan options: {e}")))?;
    match py.detach(|| plan(&args, &options)) {
        Ok((report, p)) => Ok((Report::from(report), p.map(Plan::from))),
        Err(PlanError::Load(e)) => Err(CoreError(e).into()),
        Err(PlanError::Option(msg)) => Err(PyValueError::new_err(msg)),
    }
}

/// Apply fix operations (a JSON list of `{"op": "set"|"remove"|"move", ...}`)
/// to serve args given as JSON; returns the edited serve args as JSON.
#[pyfunction]
fn apply_fix_json(args_json: &str, fix_json: &str) -> PyResult<String> {
    let args = parse_args(args_json)?;
    let ops: Vec<FixOp> = serde_json::from_str(fix_json)
        .map_err(|e| PyValueError::new_err(format!("not a list of fix operations: {e}")))?;
    let mut doc = args.normalized().0.into_owned().to_json();
    apply_ops(&mut doc, &ops).map_err(PyValueError::new_err)?;
    let edited = ServeArgs::from_json(doc)
        .map_err(|e| PyValueError::new_err(format!("the fix leaves invalid serve args: {e}")))?;
    Ok(edited.to_json().to_string())
}

/// Run `hisparse-check` with `argv` (without the program name); returns the exit code.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| hisparse_check::run(argv, |k| std::env::var(k).ok()))
}

/// `run_cli`, also returning the plan that `--plan` made (for `--plot`).
#[pyfunction]
fn run_cli_plan(py: Python<'_>, argv: Vec<String>) -> (i32, Option<Plan>) {
    let (code, p) = py.detach(|| hisparse_check::run_with_plan(argv, |k| std::env::var(k).ok()));
    (code, p.map(Plan::from))
}

/// Every stable diagnostic code.
#[pyfunction]
fn error_codes() -> Vec<&'static str> {
    Code::ALL.iter().map(|c| c.as_str()).collect()
}

/// Where the verdict knowingly differs from vLLM 0.33.0: (code, what vLLM does).
#[pyfunction]
fn vllm_deviations() -> Vec<(&'static str, &'static str)> {
    hisparse_core::config::deviations::VLLM_DEVIATIONS
        .iter()
        .map(|d| (d.code.as_str(), d.vllm))
        .collect()
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("VLLM_VERSION", hisparse_core::VLLM_VERSION)?;
    m.add("ModelLoadError", m.py().get_type::<ModelLoadError>())?;
    m.add_class::<Report>()?;
    m.add_class::<Diagnostic>()?;
    m.add_class::<HiSparseSettings>()?;
    m.add_class::<Provenance>()?;
    m.add_class::<ModelSummary>()?;
    m.add_class::<Plan>()?;
    m.add_class::<PlanSizes>()?;
    m.add_class::<HostPlan>()?;
    m.add_class::<GpuPlan>()?;
    m.add_class::<PlanPoint>()?;
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli_plan, m)?)?;
    m.add_function(wrap_pyfunction!(check_json, m)?)?;
    m.add_function(wrap_pyfunction!(apply_fix_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(vllm_deviations, m)?)?;
    m.add_class::<pool::HostKVPool>()?;
    m.add_class::<pool::PoolLayout>()?;
    m.add_class::<pool::PoolStats>()?;
    m.add_class::<pool::ResidencyResolver>()?;
    m.add_class::<pool::ResolveResult>()?;
    m.add_class::<pool::HiSparseMetrics>()?;
    m.add_function(wrap_pyfunction!(pool::pool_error_codes, m)?)?;
    Ok(())
}
