//! The deployment model: a set of named launches, each with its engine, the
//! words after the engine's program, its env, its P/D role, its node group
//! and replicas, and its machine. The readers (`k8s.rs`) make one; the
//! checks (`check.rs`, `rules_*.rs`) read it.

use serde::Serialize;
use std::collections::BTreeMap;

/// Most launches one deployment may hold (its own error beyond).
pub const MAX_LAUNCHES: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Vllm,
    Sglang,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
        }
    }
}

/// A launch's part in a prefill/decode deployment: vLLM's from the KV
/// connector's `kv_role` (a MultiConnector's: its NIXL child's), SGLang's
/// from `--disaggregation-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Prefill,
    Decode,
    /// `kv_both`: sends and receives.
    Both,
    /// Not part of a P/D pair (no connector, `--disaggregation-mode null`).
    Standalone,
}

/// The machine a launch runs on, from its pod: the GPU product (from the
/// node selector or affinity, as our `--gpu` name), the GPUs the container
/// asks for, and its memory limit (the RAM the pinned pools must fit in).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Machine {
    /// Our `--gpu` name (`h200`), when the product label maps to one.
    pub gpu: Option<String>,
    /// The `nvidia.com/gpu.product` label as given (`NVIDIA-H200`).
    pub gpu_product: Option<String>,
    /// `resources.limits["nvidia.com/gpu"]` of the container.
    pub gpus_per_pod: Option<u64>,
    /// `resources.limits.memory` in bytes.
    pub memory_limit_bytes: Option<u64>,
}

impl Machine {
    /// The memory limit in GiB, for the per-launch host-memory check.
    pub fn memory_gib(&self) -> Option<f64> {
        self.memory_limit_bytes
            .map(|b| b as f64 / (1u64 << 30) as f64)
    }
}

/// One launch: a container that runs `vllm serve` or `sglang serve`.
#[derive(Clone, Debug, Serialize)]
pub struct Launch {
    /// `Kind/name/container` (a LeaderWorkerSet's pods: `.../leader/c`,
    /// `.../worker-1/c`); prefixed by its source where two files share a name.
    pub name: String,
    /// `file#document` (and `.items[i]` inside a List).
    pub source: String,
    pub engine: EngineKind,
    /// `sglang serve` (a first word that is not a flag is the model).
    pub sglang_serve: bool,
    /// The words after the engine's program (`vllm serve`), model paths mapped
    /// by `--model-dir` (`argv_as_given` keeps the container's).
    pub args: Vec<String>,
    /// The words as the container execs them, after `$(VAR)` and `sh -c`.
    pub argv_as_given: Vec<String>,
    /// The container's env (and a `sh -c` command's own `NAME=value` words).
    pub env: BTreeMap<String, String>,
    pub role: Role,
    /// The workload the launch belongs to (`Kind/name`): the pods of one group are one instance.
    pub group: String,
    /// Pods this launch runs as (a Deployment's or StatefulSet's replicas; a
    /// LeaderWorkerSet's worker count per group x its replicas).
    pub replicas: u64,
    /// Pods of one instance (a LeaderWorkerSet's `size`; 1 otherwise).
    pub group_size: u64,
    pub machine: Machine,
    /// Model paths rewritten by `--model-dir` (container path -> local path).
    pub model_mapped: Vec<(String, String)>,
    /// The node it runs on, where launches share one (the deployment file's
    /// `node`, `--launch ... --node`); `None`: a node of its own (a
    /// Kubernetes pod, whose node the scheduler picks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The role the deployment file or `--role` declares (checked against
    /// the role its command gives: `launch_role_mismatch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_role: Option<Role>,
}

/// What a reader saw and did not read, listed (never silently dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotRead {
    /// `file` or `file:Kind/name[/container]`.
    pub at: String,
    pub why: String,
}

/// Every launch of the manifests given, and what was not read.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Deployment {
    pub launches: Vec<Launch>,
    pub not_read: Vec<NotRead>,
}
