//! `hisparse-check deploy` from Python: the manifests' paths and the model
//! directories in, the deployment report's JSON out (docs/deploy.md).
//! Conversions only: the reading and the rules are `hisparse_check`'s.

use crate::gil;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Check a deployment (Kubernetes manifests or deployment files at
/// `paths`; `model_dirs`: (container path, local path) pairs; `launches`:
/// (command, role, node) of each `--launch`, on nodes of `gpu`,
/// `gpus_per_node` GPUs and `host_memory_gib` GiB of RAM) as
/// `hisparse-check deploy` does: the report's JSON. Raises ValueError where
/// the CLI exits 2 (a manifest that cannot be read, passes a bound, holds no
/// engine launch, or a bad field of a deployment file or launch).
#[pyfunction]
#[pyo3(signature = (paths, model_dirs = Vec::new(), launches = Vec::new(), gpu = None, gpus_per_node = None, host_memory_gib = None))]
pub fn check_deployment_json(
    py: Python<'_>,
    paths: Vec<String>,
    model_dirs: Vec<(String, String)>,
    launches: Vec<(String, Option<String>, Option<String>)>,
    gpu: Option<String>,
    gpus_per_node: Option<u64>,
    host_memory_gib: Option<f64>,
) -> PyResult<String> {
    gil::detach(py, || {
        gil::no_panic(|| {
            hisparse_check::check_deployment_json(
                &paths,
                &model_dirs,
                &launches,
                (gpu, gpus_per_node, host_memory_gib),
            )
        })
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
