//! The `vllm serve` command line as hisparse-check reads it: the flags it
//! checks (clap, with vLLM's value types), the planner's and the machine's
//! own flags, vLLM's argv forms ([`crate::argv`]) and the [`ServeArgs`] they
//! make. Flags it does not check are set aside and listed.

use crate::argv;
use crate::usage::{
    parse_bytes, parse_max_model_len, parse_py_float, parse_py_int, parse_tokens, Usage,
};
use clap::{ArgAction, CommandFactory, Parser};
use hisparse_core::engines::vllm_0_33::args::flag_name;
use hisparse_core::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use hisparse_core::plan::PlanOptions;
use hisparse_core::{Code, Diagnostic, FieldPath, ServeArgs};
use serde_json::Value;

/// Help heading of the planner's and the machine's flags (they are not `vllm serve` flags).
pub(crate) const PLANNER_FLAGS: &str = "Machines and capacity planning (not vllm serve flags)";

/// Check a vLLM serve configuration for HiSparse before `vllm serve` loads for minutes.
///
/// Takes `vllm serve`'s flags (JSON, dotted `--kv-transfer-config.kv_role kv_both`
/// and `--config file.yaml` forms), resolves the HiSparse settings with the
/// provenance of each, and reports every error at once.
#[derive(Parser, Debug)]
#[command(name = "hisparse-check", version, args_override_self = true, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Model: a local config.json, a directory containing one, or a Hugging Face
    /// model id in the local cache (like `vllm serve MODEL`; nothing is downloaded).
    #[arg(value_name = "MODEL")]
    pub(crate) model_positional: Option<String>,
    /// Model: a local config.json, a directory containing one, or a cached model id.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Where the model's config.json is read from instead of MODEL (a file, a
    /// directory or a cached model id), as vLLM reads it.
    #[arg(long, value_name = "PATH")]
    pub(crate) hf_config_path: Option<String>,
    /// Branch, tag or commit of a model id in the Hugging Face cache (default main).
    #[arg(long, value_name = "REVISION")]
    pub(crate) revision: Option<String>,
    /// KVTransferConfig JSON (kv_connector, kv_role, kv_connector_extra_config, ...).
    #[arg(long, value_name = "JSON")]
    pub(crate) kv_transfer_config: Option<String>,
    /// AttentionConfig JSON; its hisparse_config holds device_buffer_size and eager_host_mirror.
    #[arg(long, value_name = "JSON")]
    pub(crate) attention_config: Option<String>,
    /// SpeculativeConfig JSON (num_speculative_tokens widens each decode query).
    #[arg(long, value_name = "JSON")]
    pub(crate) speculative_config: Option<String>,
    /// CompilationConfig JSON (cudagraph_mode); also -cc.
    #[arg(long, value_name = "JSON")]
    pub(crate) compilation_config: Option<String>,
    /// JSON deep-merged over the model's config.json.
    #[arg(long, value_name = "JSON")]
    pub(crate) hf_overrides: Option<String>,
    /// Tensor-parallel size (also -tp).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) tensor_parallel_size: Option<i64>,
    /// Pipeline-parallel size, also -pp (HiSparse needs 1).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) pipeline_parallel_size: Option<i64>,
    /// Data-parallel size (also -dp).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) data_parallel_size: Option<i64>,
    /// DP replicas this node runs, also -dpl (default: all of them, or an even
    /// share over --nnodes): the host-memory check counts this node's pools.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) data_parallel_size_local: Option<i64>,
    /// Decode-context-parallel size, also -dcp (HiSparse needs 1).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) decode_context_parallel_size: Option<i64>,
    /// Prefill-context-parallel size (also -pcp).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) prefill_context_parallel_size: Option<i64>,
    /// Nodes of the deployment (also -n): TP ranks share one HiSparse host pool only when their replica is on one node.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) nnodes: Option<i64>,
    /// This node's zero-based index among --nnodes (also -r; default 0).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) node_rank: Option<i64>,
    /// vllm serve --headless: engines and workers without an API server (needs
    /// at least one local DP replica).
    #[arg(long, action = ArgAction::SetTrue)]
    pub(crate) headless: bool,
    /// This process is one external-LB DP rank (also -dpn): it runs one
    /// replica, and only its host pools are counted on the node.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) data_parallel_rank: Option<i64>,
    /// KV cache dtype: auto, bfloat16, fp8_ds_mla, fp8, ...
    #[arg(long, value_name = "DTYPE")]
    pub(crate) kv_cache_dtype: Option<String>,
    /// KV block size in tokens (sparse MLA: a multiple of 64; default 64).
    #[arg(long, value_name = "TOKENS", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) block_size: Option<i64>,
    /// Context limit in tokens: 1k = 1000, 1K = 1024, -1 or auto = the model's.
    #[arg(long, value_name = "TOKENS", value_parser = parse_max_model_len, allow_negative_numbers = true)]
    pub(crate) max_model_len: Option<i64>,
    /// Maximum concurrent sequences per replica.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pub(crate) max_num_seqs: Option<i64>,
    /// Reserve a request's full input length when scheduling (default on; HiSparse
    /// needs it; --no-scheduler-reserve-full-isl turns it off).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_scheduler_reserve_full_isl")]
    pub(crate) scheduler_reserve_full_isl: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    pub(crate) no_scheduler_reserve_full_isl: bool,
    /// Disable the hybrid KV cache manager (HiSparse needs it on; the
    /// --no- form sets it on explicitly).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_disable_hybrid_kv_cache_manager")]
    pub(crate) disable_hybrid_kv_cache_manager: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    pub(crate) no_disable_hybrid_kv_cache_manager: bool,
    /// Fraction of each GPU's memory vLLM may use (default 0.92); --plan reads it.
    #[arg(
        long,
        visible_alias = "device-memory-utilization",
        value_name = "FRACTION",
        value_parser = parse_py_float,
        allow_negative_numbers = true
    )]
    pub(crate) gpu_memory_utilization: Option<f64>,
    /// KV cache bytes per GPU (20G = 20 x 2^30, 20g = 20e9); vLLM then ignores
    /// --gpu-memory-utilization. --plan reads it.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, allow_negative_numbers = true)]
    pub(crate) kv_cache_memory_bytes: Option<i64>,
    /// Executor backend (mp, ray, ...): TP ranks share one HiSparse host pool only under mp.
    #[arg(long, value_name = "BACKEND")]
    pub(crate) distributed_executor_backend: Option<String>,
    /// Data-parallel backend, also -dpb (mp, ray): over --nnodes vLLM takes only mp.
    #[arg(long, value_name = "BACKEND")]
    pub(crate) data_parallel_backend: Option<String>,
    /// Expert parallelism (also -ep): --plan splits the estimated expert weights over TP x DP.
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_enable_expert_parallel")]
    pub(crate) enable_expert_parallel: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    pub(crate) no_enable_expert_parallel: bool,
    /// Target platform (default cuda).
    #[arg(long, value_parser = ["cuda", "rocm", "cpu"])]
    pub(crate) platform: Option<String>,
    /// Print the report (or the plan) as JSON (stable schema, see README).
    #[arg(long)]
    pub(crate) json: bool,
    /// Plan capacity: concurrent requests with and without HiSparse, the binding
    /// limit, host memory to pin; a table from 8K tokens to max_model_len.
    #[arg(long, help_heading = PLANNER_FLAGS)]
    pub(crate) plan: bool,
    /// Tokens per request to plan for (default: max_model_len; 128k = 128000, 128K = 131072).
    #[arg(long, value_name = "TOKENS", value_parser = parse_tokens, help_heading = PLANNER_FLAGS)]
    pub(crate) context_length: Option<u64>,
    /// Requests the suggested host_pool_gib should hold (default: what the GPU holds).
    #[arg(
        long,
        value_name = "N",
        help_heading = PLANNER_FLAGS
    )]
    pub(crate) target_requests: Option<u64>,
    /// The serving node's host RAM in GiB: the check refuses pools that pin more
    /// than 95 % of it (--plan without it: this machine's MemAvailable, a warning).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    pub(crate) host_memory_gib: Option<f64>,
    /// The GPU (h100, h200, b200, a100, a100-40gb, l40s, mi300x): its memory for
    /// the KV room and its shared memory per block for vLLM's resolver check.
    #[arg(long, value_name = "NAME", help_heading = PLANNER_FLAGS)]
    pub(crate) gpu: Option<String>,
    /// Memory of one GPU in GiB (e.g. 140 for an H200), for the KV room and the
    /// host pool that lets the GPUs bind (overrides --gpu's figure).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    pub(crate) gpu_memory_gib: Option<f64>,
    /// GPUs one node holds, for the layout rules (tensor x pipeline x local
    /// DP replicas on one node), the RAM check and the plan (default: the
    /// --gpu's usual server: 8 on HGX / DGX A100, H100, H200, B200, B300; 4 on
    /// a GB200 / GB300 NVL72 tray; unknown for PCIe and NVL cards).
    #[arg(long, value_name = "N", help_heading = PLANNER_FLAGS)]
    pub(crate) gpus_per_node: Option<u64>,
    /// Model weights per GPU in GiB (vLLM logs "Model loading took X GiB";
    /// default: estimated from config.json).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    pub(crate) weights_gib: Option<f64>,
    /// Plan from the engine's start-up log (a file, or - for standard input):
    /// the weights and the KV room it measured replace the estimates, and the
    /// pools and capacity it logged are printed beside the plan's.
    #[arg(long, value_name = "FILE", requires = "plan", help_heading = PLANNER_FLAGS)]
    pub(crate) engine_log: Option<String>,
    /// Draw the sweep to a PNG (the pip-installed hisparse-check only: matplotlib runs in Python).
    #[arg(
        long,
        value_name = "PATH",
        help_heading = PLANNER_FLAGS
    )]
    pub(crate) plot: Option<String>,
}

const AFTER_HELP: &str = "\
Also reads: --config FILE.yaml (vLLM serve-config file; command-line flags win),
dotted flags such as --kv-transfer-config.kv_role kv_both, the
VLLM_USE_V2_MODEL_RUNNER environment variable, and HF_HUB_CACHE / HF_HOME for
model ids. Other vllm serve flags (--port, --trust-remote-code, ...) are
accepted and listed as ignored.

SGLang 0.5.23: hisparse-check --engine sglang SGLANG_FLAGS, or the launch
pasted whole: hisparse-check -- sglang serve MODEL ... (also
-- python -m sglang.launch_server ...); see hisparse-check --engine sglang --help.

--plan example (8 x H200, the bundled DeepSeek-V3.2 decode instance):
  bash examples/dsv32-decode-pd.sh --plan --gpu h200 --context-length 128K

Exit status: 0 valid, 1 invalid configuration, 2 usage or I/O error (also a
result that cannot be written: a closed, read-only or full stdout); a reader
that closed the pipe, as in `| head`, is quiet and the status is the verdict.";

pub(crate) fn plan_options(cli: &Cli) -> PlanOptions {
    PlanOptions {
        context_length: cli.context_length,
        target_requests: cli.target_requests,
        host_memory_gib: cli.host_memory_gib,
        gpu_memory_gib: cli.gpu_memory_gib,
        weights_gib: cli.weights_gib,
        gpu: cli.gpu.clone(),
        gpus_per_node: cli.gpus_per_node,
        ..PlanOptions::default()
    }
}

pub(crate) struct Parsed {
    pub(crate) cli: Cli,
    /// vLLM flags this tool does not check (`--port 8000`), as given.
    pub(crate) ignored: Vec<String>,
    /// Warnings about the command line itself.
    pub(crate) warnings: Vec<Diagnostic>,
}

/// vLLM's argv forms -> clap. Flags clap does not know are vLLM flags outside
/// HiSparse's concern (`--port`, `--trust-remote-code`): set aside and listed,
/// so a real launch command can be checked as it is.
pub(crate) fn parse(args: &[String]) -> Result<Parsed, Usage> {
    // A whole launch pasted after the tool's name (`hisparse-check vllm serve
    // MODEL ...`, or after `--`): `vllm serve` is the program, not a model.
    let args = match args {
        [a, b, rest @ ..] if a == "vllm" && b == "serve" => rest,
        [dd, a, b, rest @ ..] if dd == "--" && a == "vllm" && b == "serve" => rest,
        _ => args,
    };
    let (processed, origins) = argv::preprocess(args).map_err(Usage::Message)?;
    let command = Cli::command();
    let known: Vec<String> = command
        .get_arguments()
        .flat_map(|a| a.get_long_and_visible_aliases().unwrap_or_default())
        .map(str::to_owned)
        .chain(["help".to_owned(), "version".to_owned()])
        .collect();
    let (kept, ignored) =
        argv::set_aside_unknown(processed, &known, &origins).map_err(Usage::Message)?;
    let warnings = argv::replaced_json_flags(&kept)
        .into_iter()
        .map(|(field, count)| {
            Diagnostic::warning(
                Code::FlagReplaced,
                FieldPath::root(&field),
                format!(
                    "{} is given {count} times (dotted flags count as one more); as in vLLM, only the last one counts, the earlier ones are dropped whole",
                    flag_name(&field)
                ),
            )
            .hint("merge them into one JSON value, or use only dotted flags for this config")
        })
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("hisparse-check".to_owned()).chain(kept))
        .map_err(Usage::Clap)?;
    let nothing = cli.model.is_none()
        && cli.model_positional.is_none()
        && cli.hf_config_path.is_none()
        && cli.kv_transfer_config.is_none()
        && cli.attention_config.is_none();
    if nothing {
        return Err(Usage::Message(
            "nothing to check: give the model and the vllm serve flags, e.g. hisparse-check MODEL_DIR --kv-transfer-config '{...}' (see --help)".to_owned(),
        ));
    }
    Ok(Parsed {
        cli,
        ignored,
        warnings,
    })
}

/// Turn parsed flags into [`ServeArgs`]; JSON flags stay text for the core to parse.
pub(crate) fn build_args(cli: Cli, env: &impl Fn(&str) -> Option<String>) -> ServeArgs {
    ServeArgs {
        kv_transfer_config: cli.kv_transfer_config.map(Value::String),
        attention_config: cli.attention_config.map(Value::String),
        speculative_config: cli.speculative_config.map(Value::String),
        compilation_config: cli.compilation_config.map(Value::String),
        hf_overrides: cli.hf_overrides.map(Value::String),
        // As in `vllm serve MODEL --model X`, the positional model wins.
        model: cli.model_positional.or(cli.model),
        revision: cli.revision,
        hf_config_path: cli.hf_config_path,
        hf_config: None,
        tensor_parallel_size: cli.tensor_parallel_size,
        pipeline_parallel_size: cli.pipeline_parallel_size,
        data_parallel_size: cli.data_parallel_size,
        data_parallel_size_local: cli.data_parallel_size_local,
        decode_context_parallel_size: cli.decode_context_parallel_size,
        prefill_context_parallel_size: cli.prefill_context_parallel_size,
        nnodes: cli.nnodes,
        node_rank: cli.node_rank,
        headless: cli.headless.then_some(true),
        data_parallel_rank: cli.data_parallel_rank,
        kv_cache_dtype: cli.kv_cache_dtype,
        block_size: cli.block_size,
        max_model_len: cli.max_model_len,
        max_num_seqs: cli.max_num_seqs,
        gpu_memory_utilization: cli.gpu_memory_utilization,
        kv_cache_memory_bytes: cli.kv_cache_memory_bytes,
        distributed_executor_backend: cli.distributed_executor_backend,
        data_parallel_backend: cli.data_parallel_backend,
        enable_expert_parallel: flag_pair(
            cli.enable_expert_parallel,
            cli.no_enable_expert_parallel,
        ),
        scheduler_reserve_full_isl: flag_pair(
            cli.scheduler_reserve_full_isl,
            cli.no_scheduler_reserve_full_isl,
        ),
        disable_hybrid_kv_cache_manager: flag_pair(
            cli.disable_hybrid_kv_cache_manager,
            cli.no_disable_hybrid_kv_cache_manager,
        ),
        vllm_use_v2_model_runner: env("VLLM_USE_V2_MODEL_RUNNER"),
        vllm_allow_long_max_model_len: env("VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
        platform: cli.platform,
    }
}

pub(crate) fn flag_pair(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}
