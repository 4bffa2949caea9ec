//! The stages at which each engine refuses a configuration: their names
//! only, the vocabulary of [`crate::diagnostic::Stage`]. Which code an engine
//! raises at which stage, with the engine's file:line, is that engine's
//! table (`engines/vllm_0_33/stages.rs` for vLLM 0.33.0), and so is the
//! sentence that names the release.

use serde::{Deserialize, Serialize};

/// The `engine` of a vLLM report or plan.
pub const ENGINE_VLLM: &str = "vllm";
/// The `engine` of an SGLang report or plan.
pub const ENGINE_SGLANG: &str = "sglang";

/// When vLLM 0.33.0 refuses a configuration, in start-up order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VllmStage {
    /// `vllm serve`'s argument parser: a flag's type or choices, a JSON flag
    /// that is not JSON or that pydantic rejects (vllm/engine/arg_utils.py,
    /// vllm/config/*.py validators run while the flags are parsed).
    Argparse,
    /// `EngineArgs.create_engine_config()`: `ModelConfig`, `ParallelConfig`,
    /// `VllmConfig.__post_init__` (vllm/config/vllm.py), seconds in, before any
    /// engine process starts.
    Config,
    /// The engine core and its executor starting, before a worker loads the
    /// model: the data-parallel launch, the multiprocessing executor's layout
    /// (vllm/v1/executor/multiproc_executor.py), `vllm serve --headless`.
    EngineStart,
    /// In the workers, while the model is built and its weights loaded: the
    /// attention backend each layer selects (the KV cache dtype), the draft
    /// model, and the block size fixed for those backends right after
    /// (`update_block_size_for_backend`, multiproc_executor.py:802).
    ModelLoad,
    /// After the model has loaded, when the engine sizes the KV cache and the
    /// workers build it: the HiSparse layout and host pool
    /// (vllm/v1/hisparse/layout.py, vllm/v1/core/kv_cache_planning.py:671),
    /// the pinned host RAM, the HiSparse runtime (vllm/v1/hisparse/runtime.py),
    /// the KV connectors.
    Workers,
    /// At the first scheduled step (the first forward or decode).
    FirstStep,
    /// When a prefill and a decode instance first connect: the NIXL
    /// handshake, at the first request that crosses between them, after both
    /// have loaded their weights (distributed/kv_transfer/kv_connector/v1/nixl/).
    Handshake,
    /// vLLM accepts the configuration and starts; what is reported then
    /// breaks (a crash or wrong result later) or is silently ignored. Every
    /// warning vLLM does not refuse has it too.
    Never,
}

impl VllmStage {
    /// Every stage, in start-up order.
    pub const ALL: &'static [VllmStage] = &[
        VllmStage::Argparse,
        VllmStage::Config,
        VllmStage::EngineStart,
        VllmStage::ModelLoad,
        VllmStage::Workers,
        VllmStage::FirstStep,
        VllmStage::Handshake,
        VllmStage::Never,
    ];

    /// The stable string form, e.g. `"model_load"` (the JSON `stage`).
    pub fn as_str(self) -> &'static str {
        match self {
            VllmStage::Argparse => "argparse",
            VllmStage::Config => "config",
            VllmStage::EngineStart => "engine_start",
            VllmStage::ModelLoad => "model_load",
            VllmStage::Workers => "workers",
            VllmStage::FirstStep => "first_step",
            VllmStage::Handshake => "handshake",
            VllmStage::Never => "never",
        }
    }

    /// The stage named `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|st| st.as_str() == s)
    }

    /// When, in words, for "vLLM 0.33.0 refuses this {when}" (or, for
    /// `never`, the whole sentence's tail after "vLLM 0.33.0").
    pub fn when(self) -> &'static str {
        match self {
            VllmStage::Argparse => "at argument parsing, before anything starts",
            VllmStage::Config => "while building its config, seconds in",
            VllmStage::EngineStart => "when its engine and executor start, before the model loads",
            VllmStage::ModelLoad => "while its workers load the model, minutes in",
            VllmStage::Workers => {
                "after the model has loaded, when its workers set up the KV cache"
            }
            VllmStage::FirstStep => "at the first step, after start-up has finished",
            VllmStage::Handshake => {
                "at the NIXL handshake, when the first request crosses from prefill to decode, after both have loaded their weights"
            }
            VllmStage::Never => "",
        }
    }
}

/// SGLang 0.5.23's launch stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SglangStage {
    /// S0: `prepare_server_args` (srt/server_args.py:668-720): types, choices, unknown flags.
    Argparse,
    /// S1: `ServerArgs.resolve_once`, the resolution pipeline (srt/arg_groups/pipeline.py):
    /// defaults and most cross-checks; the first failure ends it.
    Resolve,
    /// S2: `check_server_args` (srt/arg_groups/validation_hook.py, hisparse_hook.py:87-165).
    Check,
    /// The scheduler processes start, each taking its GPU before the weights
    /// load (`torch.cuda.set_device(gpu_id)`, srt/model_executor/model_runner.py:455):
    /// a launch over the node's GPUs (issue 22).
    SchedulerStart,
    /// S3: KV sizing after the weights load, where `--hisparse-config` is first
    /// parsed (srt/model_executor/pool_configurator.py:586 -> mem_cache/sparsity/factory.py:62-117).
    AfterWeightsLoad,
    /// S4: the KV pool and the HiSparse allocator are built
    /// (srt/mem_cache/kv_cache_configurator.py, mem_cache/allocator/hisparse.py).
    PoolBuild,
    /// S5: the HiSparse coordinator starts: pinned host pool, host-RAM check,
    /// speculative checks, page multiples (srt/managers/hisparse_coordinator.py,
    /// mem_cache/pool_host/base.py).
    CoordinatorInit,
    /// S6: the first swap-in (CUDA graph capture or first decode): kernel asserts.
    FirstDecode,
    /// At the first request of a P/D pair: the decode server bootstraps
    /// with the prefill server (srt/disaggregation/common/conn.py), after
    /// both have loaded their weights.
    FirstRequest,
    /// S7: at request time (speculative verify, P/D transfer backends, srt/disaggregation/*).
    Request,
    /// SGLang never refuses it: it starts and then breaks, corrupts, or
    /// silently changes the setting. Every warning SGLang does not refuse has it.
    Never,
}

impl SglangStage {
    /// Every stage, in launch order.
    pub const ALL: &'static [SglangStage] = &[
        SglangStage::Argparse,
        SglangStage::Resolve,
        SglangStage::Check,
        SglangStage::SchedulerStart,
        SglangStage::AfterWeightsLoad,
        SglangStage::PoolBuild,
        SglangStage::CoordinatorInit,
        SglangStage::FirstDecode,
        SglangStage::FirstRequest,
        SglangStage::Request,
        SglangStage::Never,
    ];

    /// The stable string form (the JSON `stage`), e.g. `"coordinator_init"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SglangStage::Argparse => "argparse",
            SglangStage::Resolve => "resolve",
            SglangStage::Check => "check",
            SglangStage::SchedulerStart => "scheduler_start",
            SglangStage::AfterWeightsLoad => "after_weights_load",
            SglangStage::PoolBuild => "pool_build",
            SglangStage::CoordinatorInit => "coordinator_init",
            SglangStage::FirstDecode => "first_decode",
            SglangStage::FirstRequest => "first_request",
            SglangStage::Request => "request",
            SglangStage::Never => "never",
        }
    }

    /// The stage named `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|st| st.as_str() == s)
    }

    /// When, in words, for "SGLang 0.5.23 refuses this {when}".
    pub fn when(self) -> &'static str {
        match self {
            SglangStage::Argparse => "at argument parsing, before anything starts",
            SglangStage::Resolve => "while resolving its server arguments, seconds in",
            SglangStage::Check => "when it checks its server arguments, seconds in",
            SglangStage::SchedulerStart => {
                "when its scheduler processes take their GPUs, before the weights load"
            }
            SglangStage::AfterWeightsLoad => {
                "after the weights have loaded, when it sizes the KV cache, minutes in"
            }
            SglangStage::PoolBuild => "after the weights have loaded, when it builds the KV pool",
            SglangStage::CoordinatorInit => {
                "after the weights have loaded, when the HiSparse coordinator starts"
            }
            SglangStage::FirstDecode => "at the first swap-in (CUDA graph capture or first decode)",
            SglangStage::FirstRequest => {
                "at the first request, when the decode server bootstraps with the prefill server, after both have loaded their weights"
            }
            SglangStage::Request => "when a request runs, after start-up has finished",
            SglangStage::Never => "",
        }
    }
}
