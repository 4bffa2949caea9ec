//! `hisparse-check deploy` from Python: the manifests' paths and the model
//! directories in, the deployment report's JSON out (docs/deploy.md).
//! Conversions only: the reading and the rules are `hisparse_check`'s.

use crate::gil;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Check a deployment (Kubernetes manifests at `paths`; `model_dirs`:
/// (container path, local path) pairs) as `hisparse-check deploy` does:
/// the report's JSON. Raises ValueError where the CLI exits 2 (a manifest
/// that cannot be read, passes a bound, or holds no engine launch).
#[pyfunction]
#[pyo3(signature = (paths, model_dirs = Vec::new()))]
pub fn check_deployment_json(
    py: Python<'_>,
    paths: Vec<String>,
    model_dirs: Vec<(String, String)>,
) -> PyResult<String> {
    gil::detach(py, || {
        gil::no_panic(|| hisparse_check::check_deployment_json(&paths, &model_dirs))
    })
    .map_err(gil::internal_error)?
    .map(|(_, json)| json)
    .map_err(PyValueError::new_err)
}

/// The codes of the rules between launches (hisparse_core deploy_codes.rs).
#[pyfunction]
pub fn deployment_codes() -> Vec<&'static str> {
    hisparse_core::deploy_codes::DEPLOY_CODES
        .iter()
        .map(|d| d.code.as_str())
        .collect()
}
