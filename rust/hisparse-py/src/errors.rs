//! The binding's errors, for both engines' fronts: `ModelLoadError` (the
//! model's config.json could not be read), the planner's errors as Python
//! exceptions, and planner options read from JSON. Its own module so that
//! `lib.rs` and `sglang.rs` both import it and neither imports the other.

use hisparse_core::engines::vllm_0_33::args::LoadError;
use hisparse_core::plan::{PlanError, PlanOptions};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    _core,
    ModelLoadError,
    PyOSError,
    "The model's config.json could not be found or read (an I/O problem, not a configuration error). `code` says why: model_not_found, model_not_cached, not_a_regular_file, file_too_large, read_failed, model_json_invalid, model_not_object."
);

/// Wraps core errors for the orphan rule; converts to a Python exception.
pub(crate) struct CoreError(pub(crate) LoadError);

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        let err = ModelLoadError::new_err(e.0.to_string());
        Python::attach(|py| {
            // Best effort: the message says it all if the attribute cannot be set.
            let _ = err.value(py).setattr("code", e.0.code());
        });
        err
    }
}

/// Planner options from their JSON text (`PlanOptions`'s fields); TypeError
/// when they do not deserialize.
pub(crate) fn parse_options(options_json: &str) -> PyResult<PlanOptions> {
    serde_json::from_str(options_json)
        .map_err(|e| PyTypeError::new_err(format!("invalid plan options: {e}")))
}

/// A planner error as Python's: ModelLoadError for config.json, ValueError
/// for an option out of range.
pub(crate) fn plan_error(e: PlanError) -> PyErr {
    match e {
        PlanError::Load(e) => CoreError(e).into(),
        PlanError::Option(msg) => PyValueError::new_err(msg),
    }
}
