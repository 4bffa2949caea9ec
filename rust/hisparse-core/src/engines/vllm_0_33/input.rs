//! What resolution read from the flags before the rules run: the explicit
//! `hisparse_config` and the scalars, handed from [`super::resolve`] to
//! [`super::startup`] and [`super::validate`].

use crate::gpu::GpuSpec;
use crate::path::FieldPath;
use crate::sizes::Parallel;

/// The machine one resolution runs for: the GPU (`--gpu`) and the GPUs of
/// one node (`--gpus-per-node`, else the GPU's usual server), not vLLM flags.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hw<'a> {
    pub(crate) gpu: Option<&'a GpuSpec>,
    pub(crate) gpus_per_node: Option<u64>,
    /// The GPU's usual server, when `gpus_per_node` is its default.
    pub(crate) server: Option<&'a str>,
}

impl<'a> Hw<'a> {
    /// `gpus_per_node` as given, else the GPU's usual server's.
    pub(crate) fn new(gpu: Option<&'a GpuSpec>, gpus_per_node: Option<u64>) -> Self {
        match gpus_per_node {
            Some(n) => Hw {
                gpu,
                gpus_per_node: Some(n),
                server: None,
            },
            None => Hw {
                gpu,
                gpus_per_node: gpu.and_then(|g| g.gpus_per_node).map(u64::from),
                server: gpu.and_then(|g| g.server.as_deref()),
            },
        }
    }
}

/// The explicit `attention_config.hisparse_config`, as far as it parsed.
pub(crate) struct HiSparseInput {
    pub(crate) path: FieldPath,
    pub(crate) device_buffer_size: Option<u64>,
    pub(crate) eager_host_mirror: Option<bool>,
}

/// Scalars after their own checks; invalid ones fall back to vLLM's defaults
/// (their error is already recorded).
pub(crate) struct Scalars {
    pub(crate) parallel: Parallel,
    pub(crate) block_size: Option<u64>,
    pub(crate) max_model_len: Option<u64>,
    /// `--max-model-len auto` / -1: vLLM fits the context to memory.
    pub(crate) max_model_len_auto: bool,
    pub(crate) platform: String,
    pub(crate) kv_cache_dtype: Option<String>,
    pub(crate) v2_runner: Option<bool>,
    /// GPUs one node holds, when known ([`Hw::gpus_per_node`]).
    pub(crate) gpus_per_node: Option<u64>,
    /// The GPU's usual server, when `gpus_per_node` is its default.
    pub(crate) gpus_per_node_server: Option<String>,
}
