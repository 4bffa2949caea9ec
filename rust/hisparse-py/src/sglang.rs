//! The SGLang 0.5.23 side of the binding: `ServerArgs` attributes (a mapping)
//! or an `sglang serve` argv in, the same `Report` / `Plan` pyclasses out, and
//! `SglangHiSparseSettings` for a report's `hisparse`. Conversions only: the
//! rules are `hisparse_core::engines::sglang_0_5_23`'s, the argv reading
//! `hisparse_check`'s (the CLI's own).

use crate::results::{Plan, Provenance, Report};
use crate::{gil, parse_options, plan_error, pyjson};
use hisparse_core::engines::sglang_0_5_23 as core_sglang;
use hisparse_core::engines::sglang_0_5_23::args::ArgsError;
use hisparse_core::engines::sglang_0_5_23::{SglangArgs, SglangHiSparse};
use hisparse_core::report::{Resolved, ENGINE_SGLANG};
use hisparse_core::Diagnostic;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::sync::Arc;

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
    #[getter]
    fn top_k(&self) -> i64 {
        self.0.top_k.value
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
            h.top_k.value,
            h.index_topk.value,
            h.host_to_device_ratio.value,
            h.page_size.value,
            h.kv_cache_dtype.value
        )
    }
}

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
    match gil::detach(py, || gil::no_panic(|| core_sglang::check(&args, &options)))
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
            let report = core_sglang::check(&args, &options)?;
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
