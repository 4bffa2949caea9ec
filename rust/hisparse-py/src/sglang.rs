//! The SGLang 0.5.23 side of the binding: `ServerArgs` attributes (a mapping)
//! or an `sglang serve` argv in, the same `Report` / `Plan` pyclasses out (a
//! report's `hisparse` is results.rs's `SglangHiSparseSettings`). Conversions only: the
//! rules are `hisparse_core::engines::sglang_0_5_23`'s, the argv reading
//! `hisparse_check`'s (the CLI's own).

use crate::errors::{parse_options, plan_error};
use crate::results::{Plan, Report};
use crate::{gil, pyjson};
use hisparse_core::engines::sglang_0_5_23 as core_sglang;
use hisparse_core::engines::sglang_0_5_23::args::ArgsError;
use hisparse_core::engines::sglang_0_5_23::SglangArgs;
use hisparse_core::report::ENGINE_SGLANG;
use hisparse_core::Diagnostic;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

/// A report of input problems only, as an SGLang report.
fn problems_report(problems: Vec<Diagnostic>) -> Report {
    Report::from(hisparse_core::Report::from_diagnostics(
        ENGINE_SGLANG,
        core_sglang::VERSION,
        problems,
    ))
}

/// `ServerArgs` attributes from a mapping (converted with bounds) or JSON
/// text; the input problems to report instead (too deep, too large, ...).
fn parse_args(args: &Bound<'_, PyAny>) -> PyResult<Result<SglangArgs, Vec<Diagnostic>>> {
    let value = if let Ok(text) = args.cast::<PyString>() {
        serde_json::from_str(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("server args are not valid JSON: {e}")))?
    } else {
        let (value, problems) = pyjson::to_json(args)?;
        if !problems.is_empty() {
            return Ok(Err(problems));
        }
        value
    };
    SglangArgs::from_json_explained(value)
        .map(Ok)
        .map_err(|e| match e {
            ArgsError::Type(m) => PyTypeError::new_err(m),
            ArgsError::Bound(m) => PyValueError::new_err(m),
        })
}

/// Check an SGLang 0.5.23 launch given as `ServerArgs` attributes (a mapping
/// or its JSON text; values as SGLang's argparse produces them). With
/// `options_json` (`gpu`, `gpu_memory_gib`, `host_memory_gib`, `weights_gib`)
/// the machine checks run. The GIL is released while Rust works.
///
/// Raises ValueError for an option out of range or an unknown GPU, TypeError
/// when an attribute the check reads has the wrong type, ModelLoadError for a
/// model config.json that is not a regular file or is over its bound.
#[pyfunction]
#[pyo3(signature = (args, options_json = None))]
pub fn sglang_check_json(
    py: Python<'_>,
    args: &Bound<'_, PyAny>,
    options_json: Option<&str>,
) -> PyResult<Report> {
    let args = parse_args(args)?;
    let options = options_json
        .map(parse_options)
        .transpose()?
        .unwrap_or_default();
    let args = match args {
        Ok(a) => a,
        Err(problems) => return Ok(problems_report(problems)),
    };
    match gil::detach(py, || {
        gil::no_panic(|| {
            core_sglang::check(&args, &options).map(|mut r| {
                hisparse_check::sglang_refuse_choices(&mut r, &args);
                r
            })
        })
    })
    .map_err(gil::internal_error)?
    {
        Ok(report) => Ok(Report::from(report)),
        Err(e) => Err(plan_error(e)),
    }
}

/// Plan an SGLang 0.5.23 launch (as `sglang_check_json` takes it) with the
/// planner options as JSON. Returns the check report and the plan (None
/// unless the launch is valid with HiSparse on).
///
/// Raises ValueError when an option is out of range, TypeError on ill-typed
/// input. With `engine_log` (a path, or `-` for standard input), planned from
/// SGLang's start-up log; ValueError when it cannot be read or has none of
/// SGLang's start-up lines.
#[pyfunction]
#[pyo3(signature = (args, options_json, engine_log = None))]
pub fn sglang_plan_json(
    py: Python<'_>,
    args: &Bound<'_, PyAny>,
    options_json: &str,
    engine_log: Option<&str>,
) -> PyResult<(Report, Option<Plan>)> {
    let args = parse_args(args)?;
    let options = parse_options(options_json)?;
    let args = match args {
        Ok(a) => a,
        Err(problems) => return Ok((problems_report(problems), None)),
    };
    let result = gil::detach(py, || {
        gil::no_panic(|| {
            let mut report = core_sglang::check(&args, &options)?;
            hisparse_check::sglang_refuse_choices(&mut report, &args);
            if !report.valid {
                return Ok((report, None));
            }
            let plan = match engine_log {
                Some(path) => {
                    let log =
                        hisparse_check::read_engine_log(path, hisparse_core::report::ENGINE_SGLANG)
                            .map_err(hisparse_core::plan::PlanError::Option)?;
                    core_sglang::engine_log::plan(&args, &options, &log, path)
                }
                None => core_sglang::plan(&args, &options),
            };
            plan.map(|p| (report, Some(p)))
        })
    })
    .map_err(gil::internal_error)?;
    match result {
        Ok((report, p)) => Ok((Report::from(report), p.map(Plan::from))),
        Err(e) => Err(plan_error(e)),
    }
}

/// Check an `sglang serve` argv (the words after `sglang serve` or `python -m
/// sglang.launch_server`; a leading program is taken off) exactly as
/// `hisparse-check --engine sglang` reads it, with `options_json` as for
/// `sglang_check_json`. Raises ValueError for an option out of range or an
/// unknown GPU, ModelLoadError for a model config.json that is not a regular
/// file (a FIFO, device or directory) or is over its bound (as for vLLM).
#[pyfunction]
#[pyo3(signature = (argv, options_json = None))]
pub fn check_sglang_argv(
    py: Python<'_>,
    argv: Vec<String>,
    options_json: Option<&str>,
) -> PyResult<Report> {
    let options = options_json
        .map(parse_options)
        .transpose()?
        .unwrap_or_default();
    gil::detach(py, || {
        gil::no_panic(|| hisparse_check::check_sglang_argv(&argv, &options))
    })
    .map_err(gil::internal_error)?
    .map(Report::from)
    .map_err(plan_error)
}

/// Check a `vllm serve` launch given as its argv, as the plain
/// `hisparse-check ARGV` reads it ([`hisparse_check::check_vllm_argv`]), with
/// this process's environment. Raises ValueError for a usage error (an
/// unknown flag, a bad value) or an option out of range, ModelLoadError for a
/// model config.json that cannot be read.
#[pyfunction]
#[pyo3(signature = (argv, options_json = None))]
pub fn check_vllm_argv(
    py: Python<'_>,
    argv: Vec<String>,
    options_json: Option<&str>,
) -> PyResult<Report> {
    let options = options_json
        .map(parse_options)
        .transpose()?
        .unwrap_or_default();
    gil::detach(py, || {
        gil::no_panic(|| {
            hisparse_check::check_vllm_argv(&argv, &options, |k| std::env::var(k).ok())
        })
    })
    .map_err(gil::internal_error)?
    .map(Report::from)
    .map_err(plan_error)
}

/// Apply one diagnostic's fix (as `apply_fix_json` takes it) to `ServerArgs`
/// attributes (as `sglang_check_json` takes them); returns the fixed
/// attributes as JSON text, `hisparse_config` in the form given (JSON text
/// stays text). All or nothing. Raises ValueError if the fix does not apply
/// or the attributes cannot be read, TypeError for an attribute of the wrong type.
#[pyfunction]
pub fn sglang_apply_fix_json(args: &Bound<'_, PyAny>, fix: &Bound<'_, PyAny>) -> PyResult<String> {
    let args = match parse_args(args)? {
        Ok(a) => a,
        Err(problems) => {
            return Err(PyValueError::new_err(format!(
                "the server args cannot be edited: {}",
                problems.first().map_or("", |p| p.message.as_str())
            )))
        }
    };
    let ops = pyjson::fix_ops(fix)?;
    let fixed = gil::no_panic(|| core_sglang::fixes::apply_fix(&args, &ops))
        .map_err(gil::internal_error)?
        .map_err(PyValueError::new_err)?;
    Ok(fixed.to_json().to_string())
}

/// Apply one diagnostic's fix to an `sglang serve` argv (as
/// `check_sglang_argv` takes it): the words of the fixed launch
/// ([`hisparse_check::sglang_fixed_argv`]). Raises ValueError if the words
/// cannot be read or the fix does not apply.
#[pyfunction]
pub fn sglang_fixed_argv(argv: Vec<String>, fix: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let ops = pyjson::fix_ops(fix)?;
    gil::no_panic(|| hisparse_check::sglang_fixed_argv(&argv, &ops))
        .map_err(gil::internal_error)?
        .map_err(PyValueError::new_err)
}

/// Every `ServerArgs` attribute `sglang serve` 0.5.23 has a flag for (sorted).
#[pyfunction(name = "_sglang_server_arg_names")]
pub fn sglang_server_arg_names() -> Vec<&'static str> {
    hisparse_check::sglang_server_arg_names()
}

/// SGLang 0.5.23's argparse reading of `argv` as JSON (`values`: the
/// `ServerArgs` attributes given; `problems`: argparse's refusals, each with
/// `kind` and `message`), for tests/sglang/test_argv_reading.py, which holds
/// it to SGLang's real parser.
#[pyfunction(name = "_sglang_argv_json")]
pub fn sglang_argv_json(argv: Vec<String>) -> PyResult<String> {
    gil::no_panic(|| hisparse_check::sglang_argv_json(&argv)).map_err(gil::internal_error)
}
