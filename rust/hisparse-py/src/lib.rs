//! `hisparse_rs._core`: the PyO3 binding. Conversions and error mapping only;
//! every rule lives in `hisparse-core`, every flag in `hisparse-check`.
//!
//! The host pool, its layout, the residency resolver and the metrics are in
//! `pool.rs` (numpy arrays in and out, GIL released while the resolver works).
//!
//! Serve args come in as Python objects (the `ServeArgs` form), converted
//! with bounds by `pyjson.rs` (or as JSON text); results go out as frozen
//! pyclasses over the core's report, converted field by field only when
//! Python reads them. `Report.to_json()` is the `hisparse-check --json`
//! schema. Locks and the GIL: `gil.rs`; numeric arguments: `args.rs`.

mod args;
mod deploy;
mod errors;
mod gil;
mod pool;
mod pyjson;
mod results;
mod sglang;

use errors::{parse_options, plan_error, ModelLoadError};
use hisparse_core::check::check;
use hisparse_core::diagnostic::apply_fix as apply_ops;
use hisparse_core::engines::vllm_0_33::plan::plan;
use hisparse_core::{Code, Diagnostic, ServeArgs};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use results::{
    Diagnostic as PyDiagnostic, GpuPlan, HiSparseSettings, HostPlan, ModelSummary, Plan, PlanPoint,
    PlanSizes, Provenance, Report,
};

/// Serve args from a mapping (converted with bounds) or JSON text, and the
/// problems to report instead of resolving (input that is too deep, too
/// large, not UTF-8, or a number a field cannot hold).
fn parse_args(args: &Bound<'_, PyAny>) -> PyResult<(ServeArgs, Vec<Diagnostic>)> {
    let value = if let Ok(text) = args.cast::<PyString>() {
        serde_json::from_str(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("serve args are not valid JSON: {e}")))?
    } else {
        let (value, problems) = pyjson::to_json(args)?;
        if !problems.is_empty() {
            return Ok((ServeArgs::default(), problems));
        }
        value
    };
    ServeArgs::from_json_reporting(&value).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            PyTypeError::new_err(format!("invalid serve arguments: {e}"))
        }
        _ => PyValueError::new_err(format!("serve args are not valid JSON: {e}")),
    })
}

/// Resolve and validate serve args: a mapping in the `ServeArgs` form (vLLM
/// EngineArgs field names) or its JSON text. With `options_json` (`gpu`,
/// `gpu_memory_gib`, `host_memory_gib`, `host_memory_source`, `weights_gib`,
/// `context_length`, `target_requests`) the checks that need the machines run too. The GIL is
/// released while Rust works. Input problems (nesting deeper than 128 levels,
/// a cycle, over 16 MiB, text that is not UTF-8, a number no field holds) are
/// reported as errors.
///
/// Raises ModelLoadError when the model's config.json cannot be read,
/// ValueError for an option out of range or an unknown GPU, TypeError when an
/// argument has the wrong type.
#[pyfunction]
#[pyo3(signature = (args, options_json = None))]
fn check_json(
    py: Python<'_>,
    args: &Bound<'_, PyAny>,
    options_json: Option<&str>,
) -> PyResult<Report> {
    let (args, problems) = parse_args(args)?;
    let options = options_json.map(parse_options).transpose()?;
    if !problems.is_empty() {
        return Ok(Report::from(hisparse_core::Report::from_diagnostics(
            hisparse_core::report::ENGINE_VLLM,
            hisparse_core::VLLM_VERSION,
            problems,
        )));
    }
    // No machine options: still the machine-aware check (as the CLI runs it),
    // so the report says the host RAM was not checked.
    let options = options.unwrap_or_default();
    match gil::detach(py, || gil::no_panic(|| check(&args, &options)))
        .map_err(gil::internal_error)?
    {
        Ok(report) => Ok(Report::from(report)),
        Err(e) => Err(plan_error(e)),
    }
}

/// Plan capacity for serve args (as `check_json` takes them) with planner
/// options as JSON (`context_length`, `target_requests`, `host_memory_gib`,
/// `gpu_memory_gib`, `weights_gib`, `gpu`). Returns the check report and the
/// plan (None unless the configuration is valid; without HiSparse, the plan of
/// the HiSparseConnector it would take: `Plan.assumed`).
///
/// Raises ModelLoadError when the model's config.json cannot be read,
/// ValueError when an option is out of range, TypeError on ill-typed input.
///
/// With `engine_log` (a path, or `-` for standard input), the plan is made
/// from vLLM's start-up log (`--plan --engine-log`): ValueError when it cannot
/// be read or has none of vLLM's start-up lines.
#[pyfunction]
#[pyo3(signature = (args, options_json, engine_log = None))]
fn plan_json(
    py: Python<'_>,
    args: &Bound<'_, PyAny>,
    options_json: &str,
    engine_log: Option<&str>,
) -> PyResult<(Report, Option<Plan>)> {
    let (args, problems) = parse_args(args)?;
    let options = parse_options(options_json)?;
    if !problems.is_empty() {
        return Ok((
            Report::from(hisparse_core::Report::from_diagnostics(
                hisparse_core::report::ENGINE_VLLM,
                hisparse_core::VLLM_VERSION,
                problems,
            )),
            None,
        ));
    }
    let planned = gil::detach(py, || {
        gil::no_panic(|| match engine_log {
            Some(path) => hisparse_check::read_engine_log(path, hisparse_core::report::ENGINE_VLLM)
                .map_err(hisparse_core::plan::PlanError::Option)
                .and_then(|log| {
                    hisparse_core::engines::vllm_0_33::engine_log::plan(&args, &options, &log, path)
                }),
            None => plan(&args, &options),
        })
    })
    .map_err(gil::internal_error)?;
    match planned {
        Ok((report, p)) => Ok((Report::from(report), p.map(Plan::from))),
        Err(e) => Err(plan_error(e)),
    }
}

/// Apply fix operations (a list of `{"op": "set"|"remove"|"move", ...}`, or
/// its JSON text) to serve args (as `check_json` takes them); returns the
/// edited serve args as JSON text. All or nothing; paths and the result
/// nest at most 128 levels. Raises ValueError if the fix does not apply.
#[pyfunction]
fn apply_fix_json(args: &Bound<'_, PyAny>, fix: &Bound<'_, PyAny>) -> PyResult<String> {
    let (args, problems) = parse_args(args)?;
    if let Some(p) = problems.first() {
        return Err(PyValueError::new_err(format!(
            "the serve args cannot be edited: {}",
            p.message
        )));
    }
    let ops = pyjson::fix_ops(fix)?;
    let mut doc = args.normalized().0.into_owned().to_json();
    gil::no_panic(|| apply_ops(&mut doc, &ops))
        .map_err(gil::internal_error)?
        .map_err(PyValueError::new_err)?;
    let edited = ServeArgs::from_json(doc)
        .map_err(|e| PyValueError::new_err(format!("the fix leaves invalid serve args: {e}")))?;
    Ok(edited.to_json().to_string())
}

/// `argv` as the CLI takes it: each argument's text, or its lossy form when
/// it holds a lone surrogate (`sys.argv` of a name that is not UTF-8), which
/// the CLI reports as a usage error naming it.
fn cli_args(argv: &[Bound<'_, PyString>]) -> Vec<Result<String, String>> {
    argv.iter()
        .map(|a| match a.to_str() {
            Ok(text) => Ok(text.to_owned()),
            Err(_) => Err(a.to_string_lossy().into_owned()),
        })
        .collect()
}

/// Run `hisparse-check` with `argv` (without the program name); returns the exit code.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<Bound<'_, PyString>>) -> PyResult<i32> {
    run_cli_plan(py, argv).map(|(code, _)| code)
}

/// `run_cli`, also returning the plan that `--plan` made (for `--plot`).
#[pyfunction]
fn run_cli_plan(py: Python<'_>, argv: Vec<Bound<'_, PyString>>) -> PyResult<(i32, Option<Plan>)> {
    let args = cli_args(&argv);
    let (code, p) = gil::detach(py, || {
        gil::no_panic(|| hisparse_check::run_checked(args, |k| std::env::var(k).ok()))
    })
    .map_err(gil::internal_error)?;
    Ok((code, p.map(Plan::from)))
}

/// The argv vLLM 0.33 makes of a `--config` serve file (hisparse-check's
/// reader; a mapping value as its JSON text). Raises ValueError with
/// hisparse-check's message. Private: for tests/vllm/test_yaml_fuzz.py.
#[pyfunction(name = "_config_file_argv")]
fn config_file_argv(py: Python<'_>, path: &str) -> PyResult<Vec<String>> {
    let path = path.to_owned();
    gil::detach(py, || {
        gil::no_panic(|| hisparse_check::config_file_argv(&path))
    })
    .map_err(gil::internal_error)?
    .map_err(PyValueError::new_err)
}

/// hisparse-check's table of `vllm serve` flags as JSON: one object per
/// option (name, option_strings, negative_option_strings, nargs, takes_value,
/// choices, int_choices). Private: for tests/vllm/test_flag_table.py, which
/// compares it with vLLM's parser.
#[pyfunction(name = "_vllm_flag_table")]
fn vllm_flag_table() -> String {
    hisparse_check::vllm_flag_table_json()
}

/// The GPU `--gpu NAME` means: a `--gpu` name (`h200`) or the name the driver
/// reports (`NVIDIA H200`), as a dict (name, description, platform, arch,
/// memory_gib, max_shared_memory_per_block and the source of each figure).
/// Raises ValueError for a GPU not in the table (the message names the known ones).
#[pyfunction]
fn gpu_spec<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let spec = hisparse_core::gpu::lookup(name).map_err(PyValueError::new_err)?;
    let value = serde_json::to_value(spec)
        .map_err(|e| PyValueError::new_err(format!("GPU {name:?}: {e}")))?;
    results::to_py(py, &value)
}

/// Every stable diagnostic code.
#[pyfunction]
fn error_codes() -> Vec<&'static str> {
    Code::ALL.iter().map(|c| c.as_str()).collect()
}

/// The codes only SGLang 0.5.23's rules report (the rest are vLLM's or shared).
#[pyfunction]
fn sglang_codes() -> Vec<&'static str> {
    hisparse_core::engines::sglang_0_5_23::codes::SGLANG_CODES
        .iter()
        .map(|c| c.as_str())
        .collect()
}

/// Where the verdict knowingly differs from vLLM 0.33.0: (code, what vLLM does).
#[pyfunction]
fn vllm_deviations() -> Vec<(&'static str, &'static str)> {
    hisparse_core::engines::vllm_0_33::deviations::VLLM_DEVIATIONS
        .iter()
        .map(|d| (d.code.as_str(), d.vllm))
        .collect()
}

/// Where the verdict knowingly differs from SGLang 0.5.23: (code, what SGLang does).
#[pyfunction]
fn sglang_deviations() -> Vec<(&'static str, &'static str)> {
    hisparse_core::engines::sglang_0_5_23::deviations::SGLANG_DEVIATIONS
        .iter()
        .map(|d| (d.code.as_str(), d.sglang))
        .collect()
}

/// When vLLM 0.33.0 refuses each code: (code, stage, where vLLM raises it),
/// from `rust/hisparse-core/src/engines/vllm_0_33/stages.rs`. A report's
/// `Diagnostic.stage` is the code's stage unless its rule sets another.
#[pyfunction]
fn vllm_stages() -> Vec<(&'static str, &'static str, &'static str)> {
    hisparse_core::engines::vllm_0_33::stages::VLLM_0_33_STAGES
        .iter()
        .map(|r| (r.code.as_str(), r.stage.as_str(), r.source))
        .collect()
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("VLLM_VERSION", hisparse_core::VLLM_VERSION)?;
    m.add(
        "MAX_RESOLVE_ENTRIES",
        hisparse_core::pool::resolver::MAX_RESOLVE_ENTRIES,
    )?;
    let load_error = py.get_type::<ModelLoadError>();
    load_error.setattr("code", "model_load_error")?;
    m.add("ModelLoadError", load_error)?;
    m.add_class::<Report>()?;
    m.add_class::<PyDiagnostic>()?;
    m.add_class::<HiSparseSettings>()?;
    m.add_class::<results::SglangHiSparseSettings>()?;
    m.add(
        "SGLANG_VERSION",
        hisparse_core::engines::sglang_0_5_23::VERSION,
    )?;
    m.add_class::<Provenance>()?;
    m.add_class::<ModelSummary>()?;
    m.add_class::<Plan>()?;
    m.add_class::<PlanSizes>()?;
    m.add_class::<HostPlan>()?;
    m.add_class::<GpuPlan>()?;
    m.add_class::<PlanPoint>()?;
    m.add_class::<results::SglangSizing>()?;
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_check_json, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::check_sglang_argv, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::check_vllm_argv, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_server_arg_names, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_apply_fix_json, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_fixed_argv, m)?)?;
    m.add_function(wrap_pyfunction!(sglang::sglang_argv_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli_plan, m)?)?;
    m.add_function(wrap_pyfunction!(check_json, m)?)?;
    m.add_function(wrap_pyfunction!(apply_fix_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(config_file_argv, m)?)?;
    m.add_function(wrap_pyfunction!(vllm_flag_table, m)?)?;
    m.add_function(wrap_pyfunction!(error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(vllm_deviations, m)?)?;
    m.add_function(wrap_pyfunction!(sglang_deviations, m)?)?;
    m.add_function(wrap_pyfunction!(vllm_stages, m)?)?;
    m.add_function(wrap_pyfunction!(sglang_codes, m)?)?;
    m.add_function(wrap_pyfunction!(deploy::check_deployment_json, m)?)?;
    m.add_function(wrap_pyfunction!(deploy::deployment_codes, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_spec, m)?)?;
    m.add_class::<pool::HostKVPool>()?;
    m.add_class::<pool::PoolLayout>()?;
    m.add_class::<pool::PoolStats>()?;
    m.add_class::<pool::ResidencyResolver>()?;
    m.add_class::<pool::ResolveResult>()?;
    m.add_class::<pool::HiSparseMetrics>()?;
    m.add_function(wrap_pyfunction!(pool::pool_error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(pool::register_exceptions, m)?)?;
    // Nothing is imported inside a call, where exit could end the thread (pool.rs).
    pool::import_eagerly(py)?;
    // Detached calls finish before the interpreter finalizes (gil.rs).
    py.import("atexit")?.call_method1(
        "register",
        (wrap_pyfunction!(gil::drain_detached_calls, m)?,),
    )?;
    Ok(())
}
