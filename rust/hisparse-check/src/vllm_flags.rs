//! vLLM 0.33.0's `vllm serve` options as its argparse parser declares them
//! (`vllm/entrypoints/common/cli_args.py` `make_arg_parser`, `FrontendArgs`
//! and `AsyncEngineArgs.add_cli_args` in `vllm/engine/arg_utils.py`): one row
//! per option, its long name, its other spellings, how it takes values and
//! its choices. `hisparse-check` reads every `vllm serve` flag with this table
//! (and lists those it does not check); any other flag is an error, as in
//! vLLM. tests/vllm/test_flag_table.py compares [`table_json`] with vLLM's
//! real parser, so the table cannot drift: adding a flag is adding a row.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// How an option takes values, as argparse reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// One value (`nargs=None`): `--port 8000`, `--port=8000`.
    One,
    /// One or more values (`nargs="+"`): `--served-model-name a b`.
    OneOrMore,
    /// An optional value (`nargs="?"`): alone, or with one value.
    Optional,
    /// No value, and no `--no-` form (`action="store_true"`).
    StoreTrue,
    /// No value, with a `--no-NAME` form (`argparse.BooleanOptionalAction`,
    /// which vLLM's `EnableDisableAction` also spells `--disable-X` for
    /// `--enable-X` and the other way round: `vllm/utils/argparse_utils.py`).
    Bool,
    /// `-h` / `--help` (clap's own).
    Help,
}

/// One `vllm serve` option.
#[derive(Debug)]
pub struct Flag {
    /// The long name without dashes.
    pub name: &'static str,
    /// Its other spellings, with their dashes (`-tp`).
    pub aliases: &'static [&'static str],
    pub takes: Takes,
    /// The values argparse accepts (empty: any), as typed on the command
    /// line; "None" stands for the `None` that vLLM's `optional_type` adds
    /// (given as `None` or an empty string).
    pub choices: &'static [&'static str],
    /// Whether the choices are ints (`int(value)` is compared, as argparse
    /// compares the converted value).
    pub int_choices: bool,
}

const fn flag(
    name: &'static str,
    aliases: &'static [&'static str],
    takes: Takes,
    choices: &'static [&'static str],
) -> Flag {
    Flag {
        name,
        aliases,
        takes,
        choices,
        int_choices: false,
    }
}

const fn int_choice_flag(
    name: &'static str,
    aliases: &'static [&'static str],
    takes: Takes,
    choices: &'static [&'static str],
) -> Flag {
    Flag {
        name,
        aliases,
        takes,
        choices,
        int_choices: true,
    }
}

use Takes::{Bool, Help, One, OneOrMore, Optional, StoreTrue};

/// Every `vllm serve` option, by long name (one row each; generated from
/// vLLM's parser by the failure message of tests/vllm/test_flag_table.py).
#[rustfmt::skip]
pub const VLLM_FLAGS: &[Flag] = &[
    flag("additional-config", &[], One, &[]),
    flag("aggregate-engine-logging", &[], StoreTrue, &[]),
    flag("all2all-backend", &[], One, &["allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency", "deepep_v2", "flashinfer_all2allv", "flashinfer_nvlink_one_sided", "flashinfer_nvlink_two_sided", "moonep", "mori_high_throughput", "mori_low_latency", "naive", "nixl_ep", "pplx"]),
    flag("allow-credentials", &[], Bool, &[]),
    flag("allow-deprecated-quantization", &[], Bool, &[]),
    flag("allowed-headers", &[], One, &[]),
    flag("allowed-local-media-path", &[], One, &[]),
    flag("allowed-media-domains", &[], OneOrMore, &[]),
    flag("allowed-methods", &[], One, &[]),
    flag("allowed-origins", &[], One, &[]),
    flag("anthropic-disabled-thinking-effort", &[], One, &["auto", "high", "low", "max", "medium", "none", "xhigh"]),
    flag("api-key", &[], OneOrMore, &[]),
    flag("api-server-count", &["-asc"], One, &[]),
    flag("async-scheduling", &[], Bool, &[]),
    flag("attention-backend", &[], One, &[]),
    flag("attention-config", &["-ac"], One, &[]),
    flag("aux-output-config", &[], One, &[]),
    flag("block-size", &[], One, &[]),
    flag("chat-template", &[], One, &[]),
    flag("chat-template-content-format", &[], One, &["auto", "openai", "string"]),
    flag("code-revision", &[], One, &[]),
    flag("cohere-format", &[], One, &[]),
    flag("cohere-is-reasoning-model", &[], Bool, &[]),
    flag("collect-detailed-traces", &[], OneOrMore, &["None", "all", "model", "worker"]),
    flag("compilation-config", &["-cc"], One, &[]),
    flag("config", &[], One, &[]),
    flag("config-format", &[], One, &[]),
    flag("convert", &[], One, &["auto", "classify", "embed", "none"]),
    flag("cp-kv-cache-interleave-size", &[], One, &[]),
    flag("cpu-distributed-timeout-seconds", &[], One, &[]),
    flag("cpu-offload-gb", &[], One, &[]),
    flag("cpu-offload-params", &[], OneOrMore, &[]),
    flag("cudagraph-capture-sizes", &[], OneOrMore, &[]),
    flag("cudagraph-metrics", &[], Bool, &[]),
    flag("custom-histogram-buckets", &[], One, &[]),
    flag("data-parallel-address", &["-dpa"], One, &[]),
    flag("data-parallel-backend", &["-dpb"], One, &[]),
    flag("data-parallel-external-lb", &["-dpe"], Bool, &[]),
    flag("data-parallel-hybrid-lb", &["-dph"], Bool, &[]),
    flag("data-parallel-multi-port-external-lb", &["-dpm"], StoreTrue, &[]),
    flag("data-parallel-rank", &["-dpn"], One, &[]),
    flag("data-parallel-rpc-port", &["-dpp"], One, &[]),
    flag("data-parallel-size", &["-dp"], One, &[]),
    flag("data-parallel-size-local", &["-dpl"], One, &[]),
    flag("data-parallel-start-rank", &["-dpr"], One, &[]),
    flag("data-parallel-supervisor-port", &[], One, &[]),
    flag("dbo-decode-token-threshold", &[], One, &[]),
    flag("dbo-prefill-token-threshold", &[], One, &[]),
    flag("dcp-comm-backend", &[], One, &["None", "a2a", "ag_rs"]),
    flag("dcp-kv-cache-interleave-size", &[], One, &[]),
    flag("dcp-q-replicate", &[], Bool, &[]),
    flag("decode-context-parallel-size", &["-dcp"], One, &[]),
    flag("default-chat-template-kwargs", &[], One, &[]),
    flag("default-mm-loras", &[], One, &[]),
    flag("device-ids", &[], One, &[]),
    flag("diffusion-config", &["-dc"], One, &[]),
    flag("disable-access-log-for-endpoints", &[], One, &[]),
    flag("disable-cascade-attn", &[], Bool, &[]),
    flag("disable-chunked-mm-input", &[], Bool, &[]),
    flag("disable-custom-all-reduce", &[], Bool, &[]),
    flag("disable-fastapi-docs", &[], Bool, &[]),
    flag("disable-hybrid-kv-cache-manager", &[], Bool, &[]),
    flag("disable-log-stats", &[], StoreTrue, &[]),
    flag("disable-nccl-for-dp-synchronization", &[], Bool, &[]),
    flag("disable-sliding-window", &[], Bool, &[]),
    flag("disable-uvicorn-access-log", &[], Bool, &[]),
    flag("distributed-executor-backend", &[], One, &[]),
    flag("distributed-timeout-seconds", &[], One, &[]),
    flag("download-dir", &[], One, &[]),
    flag("dp-supervisor-probe-failure-threshold", &[], One, &[]),
    flag("dp-supervisor-probe-interval-s", &[], One, &[]),
    flag("dp-supervisor-probe-timeout-s", &[], One, &[]),
    flag("dp-sync-interval", &[], One, &[]),
    flag("dtype", &[], One, &["auto", "bfloat16", "float", "float16", "float32", "half"]),
    flag("ec-manager-config", &[], One, &[]),
    flag("ec-transfer-config", &[], One, &[]),
    flag("elastic-ep-max-dp-size", &[], One, &[]),
    flag("enable-auto-tool-choice", &[], Bool, &[]),
    flag("enable-batch-sharded-sampling", &[], Bool, &[]),
    flag("enable-chunked-prefill", &[], Bool, &[]),
    flag("enable-cumem-allocator", &[], Bool, &[]),
    flag("enable-dbo", &[], Bool, &[]),
    flag("enable-elastic-ep", &[], Bool, &[]),
    flag("enable-ep-weight-filter", &[], Bool, &[]),
    flag("enable-eplb", &[], Bool, &[]),
    flag("enable-expert-parallel", &["-ep"], Bool, &[]),
    flag("enable-fault-tolerance", &[], Bool, &[]),
    flag("enable-flash-late-interaction", &[], Bool, &[]),
    flag("enable-flashinfer-autotune", &[], Bool, &[]),
    flag("enable-force-include-usage", &[], Bool, &[]),
    flag("enable-hc-sp", &[], Bool, &[]),
    flag("enable-layerwise-nvtx-tracing", &[], Bool, &[]),
    flag("enable-log-deltas", &[], Bool, &[]),
    flag("enable-log-outputs", &[], Bool, &[]),
    flag("enable-log-requests", &[], Bool, &[]),
    flag("enable-logging-iteration-details", &[], Bool, &[]),
    flag("enable-lora", &[], Bool, &[]),
    flag("enable-mamba-cache-stochastic-rounding", &[], Bool, &[]),
    flag("enable-mamba-shared-prefix-checkpoint", &[], Bool, &[]),
    flag("enable-mfu-metrics", &[], Bool, &[]),
    flag("enable-mixed-moe-lora-format", &[], Bool, &[]),
    flag("enable-mm-embeds", &[], Bool, &[]),
    flag("enable-moe-shared-loras", &[], Bool, &[]),
    flag("enable-nccl-comm-suspend", &[], Bool, &[]),
    flag("enable-offline-docs", &[], Bool, &[]),
    flag("enable-per-request-metrics", &[], Bool, &[]),
    flag("enable-prefix-caching", &[], Bool, &[]),
    flag("enable-prompt-embeds", &[], Bool, &[]),
    flag("enable-prompt-tokens-details", &[], Bool, &[]),
    flag("enable-request-id-headers", &[], Bool, &[]),
    flag("enable-return-routed-experts", &[], Bool, &[]),
    flag("enable-scale-out", &[], Bool, &[]),
    flag("enable-server-load-tracking", &[], Bool, &[]),
    flag("enable-shm-tensor-arena", &[], Bool, &[]),
    flag("enable-sleep-mode", &[], Bool, &[]),
    flag("enable-ssl-refresh", &[], Bool, &[]),
    flag("enable-tokenizer-info-endpoint", &[], Bool, &[]),
    flag("enable-tower-connector-lora", &[], Bool, &[]),
    flag("enable-trace-replay", &[], Bool, &[]),
    flag("enforce-eager", &[], Bool, &[]),
    flag("engram-config", &[], One, &[]),
    flag("eplb-config", &[], One, &[]),
    flag("exclude-tools-when-tool-choice-none", &[], Bool, &[]),
    flag("expert-placement-strategy", &[], One, &["linear", "round_robin"]),
    flag("fail-on-environ-validation", &[], Bool, &[]),
    flag("fault-tolerance-config", &[], One, &[]),
    flag("fingerprint-mode", &[], One, &["custom", "full", "hash", "none"]),
    flag("fingerprint-value", &[], One, &[]),
    flag("fully-sharded-loras", &[], Bool, &[]),
    flag("gdn-prefill-backend", &[], One, &["aiter_flydsl", "cutedsl", "flashinfer", "sycl", "triton"]),
    flag("generation-config", &[], One, &[]),
    flag("gpu-memory-utilization", &["--device-memory-utilization"], One, &[]),
    flag("grpc", &[], StoreTrue, &[]),
    flag("grpc-port", &[], One, &[]),
    flag("h11-max-header-count", &[], One, &[]),
    flag("h11-max-incomplete-event-size", &[], One, &[]),
    flag("headless", &[], StoreTrue, &[]),
    flag("help", &["-h"], Help, &[]),
    flag("hf-config-path", &[], One, &[]),
    flag("hf-overrides", &[], One, &[]),
    flag("hf-token", &[], Optional, &[]),
    flag("host", &[], One, &[]),
    flag("ignore-patterns", &[], OneOrMore, &[]),
    flag("interleave-mm-strings", &[], Bool, &[]),
    flag("io-processor-plugin", &[], One, &[]),
    flag("ir-op-priority", &[], One, &[]),
    flag("jit-monitor-mode", &[], One, &["error", "warn"]),
    flag("jit-monitor-verbose", &[], Bool, &[]),
    flag("kda-decode-backend", &[], One, &["auto", "flashinfer", "native", "triton"]),
    flag("kda-prefill-backend", &[], One, &["auto", "flashinfer", "flashkda", "fused", "triton"]),
    flag("kernel-config", &[], One, &[]),
    flag("kv-cache-dtype", &[], One, &[]),
    flag("kv-cache-dtype-skip-layers", &[], OneOrMore, &[]),
    flag("kv-cache-memory-bytes", &[], One, &[]),
    flag("kv-cache-metrics", &[], Bool, &[]),
    flag("kv-cache-metrics-sample", &[], One, &[]),
    flag("kv-events-config", &[], One, &[]),
    flag("kv-offloading-backend", &[], One, &["lmcache", "native"]),
    flag("kv-offloading-size", &[], One, &[]),
    flag("kv-sharing-fast-prefill", &[], Bool, &[]),
    flag("kv-transfer-config", &[], One, &[]),
    flag("language-model-only", &[], Bool, &[]),
    flag("limit-mm-per-prompt", &[], One, &[]),
    flag("linear-backend", &[], One, &["aiter", "auto", "b12x", "conch", "cutlass", "deep_gemm", "emulation", "exllama", "fbgemm", "flashinfer_b12x", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm", "humming", "machete", "marlin", "torch", "triton", "xpu", "xpu_woq"]),
    flag("load-format", &[], One, &[]),
    flag("log-config-file", &[], One, &[]),
    flag("log-error-stack", &[], Bool, &[]),
    flag("log-level", &[], One, &["CRITICAL", "DEBUG", "ERROR", "INFO", "NOTSET", "WARNING"]),
    flag("logging-config", &[], One, &[]),
    flag("logits-processors", &[], OneOrMore, &[]),
    flag("logprobs-mode", &[], One, &["processed_logits", "processed_logprobs", "raw_logits", "raw_logprobs"]),
    flag("long-prefill-token-threshold", &[], One, &[]),
    flag("long-prefill-token-threshold-adaptive", &[], Bool, &[]),
    flag("lora-dtype", &[], One, &["auto", "bfloat16", "float16"]),
    flag("lora-modules", &[], OneOrMore, &[]),
    flag("lora-target-modules", &[], OneOrMore, &[]),
    flag("mamba-backend", &[], One, &[]),
    flag("mamba-block-size", &[], One, &[]),
    flag("mamba-cache-dtype", &[], One, &["auto", "bfloat16", "float16", "float32"]),
    flag("mamba-cache-mode", &[], One, &["align", "none"]),
    flag("mamba-cache-philox-rounds", &[], One, &[]),
    flag("mamba-ssm-cache-dtype", &[], One, &["auto", "bfloat16", "float16", "float32"]),
    flag("mamba-ssu-algorithm", &[], One, &["None", "auto", "horizontal", "simple", "vertical"]),
    flag("master-addr", &[], One, &[]),
    flag("master-port", &[], One, &[]),
    flag("max-cpu-loras", &[], One, &[]),
    flag("max-cudagraph-capture-size", &[], One, &[]),
    flag("max-log-len", &[], One, &[]),
    flag("max-logprobs", &[], One, &[]),
    flag("max-lora-cls-labels", &[], One, &[]),
    int_choice_flag("max-lora-rank", &[], One, &["1", "128", "16", "256", "32", "320", "512", "64", "8"]),
    flag("max-loras", &[], One, &[]),
    flag("max-model-len", &[], One, &[]),
    flag("max-num-active-seqs", &[], One, &[]),
    flag("max-num-batched-tokens", &[], One, &[]),
    flag("max-num-queued-reqs", &[], One, &[]),
    flag("max-num-queued-tokens", &[], One, &[]),
    flag("max-num-scheduled-tokens", &[], One, &[]),
    flag("max-num-seqs", &[], One, &[]),
    flag("max-parallel-loading-workers", &[], One, &[]),
    flag("media-io-kwargs", &[], One, &[]),
    flag("middleware", &[], One, &[]),
    flag("mm-device-do-normalize", &[], Bool, &[]),
    flag("mm-encoder-attn-backend", &[], One, &[]),
    flag("mm-encoder-attn-dtype", &[], One, &["None", "fp8"]),
    flag("mm-encoder-fp8-scale-path", &[], One, &[]),
    flag("mm-encoder-fp8-scale-save-margin", &[], One, &[]),
    flag("mm-encoder-fp8-scale-save-path", &[], One, &[]),
    flag("mm-encoder-only", &[], Bool, &[]),
    flag("mm-encoder-tp-mode", &[], One, &["data", "weights"]),
    flag("mm-hasher-algorithm", &[], One, &["blake3", "sha256", "sha512"]),
    flag("mm-ipc-gpu-memory-gb", &[], One, &[]),
    flag("mm-processor-cache-gb", &[], One, &[]),
    flag("mm-processor-cache-type", &[], One, &["lru", "shm"]),
    // vLLM adds current_platform.device_type (arg_utils.py:1569): cuda on the GPUs HiSparse runs on.
    flag("mm-processor-device", &[], One, &["auto", "cpu", "cuda"]),
    flag("mm-processor-kwargs", &[], One, &[]),
    flag("mm-shm-cache-max-object-size-mb", &[], One, &[]),
    flag("mm-tensor-ipc", &[], One, &["direct_rpc", "torch_shm"]),
    flag("model", &[], One, &[]),
    flag("model-class-overrides", &[], One, &[]),
    flag("model-impl", &[], One, &[]),
    flag("model-loader-extra-config", &[], One, &[]),
    flag("moe-backend", &[], One, &["aiter", "aiter_mega_moe", "aiter_triton_mxfp4_bf16", "aiter_triton_mxfp4_mxfp4", "auto", "b12x", "batched_triton", "cutlass", "deep_gemm", "deep_gemm_mega_moe", "emulation", "flashinfer_b12x", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_moe_ep_cutedsl", "flashinfer_moe_ep_mega_deep_gemm", "flashinfer_trtllm", "flydsl", "hpc", "humming", "marlin", "rdna3", "triton", "triton_unfused"]),
    flag("monokernel", &[], Bool, &[]),
    flag("nnodes", &["-n"], One, &[]),
    flag("node-rank", &["-r"], One, &[]),
    flag("num-gpu-blocks-override", &[], One, &[]),
    flag("numa-bind", &[], Bool, &[]),
    flag("numa-bind-cpus", &[], OneOrMore, &[]),
    flag("numa-bind-nodes", &[], OneOrMore, &[]),
    flag("offload-backend", &[], One, &["auto", "prefetch", "uva"]),
    flag("offload-group-size", &[], One, &[]),
    flag("offload-num-in-group", &[], One, &[]),
    flag("offload-params", &[], OneOrMore, &[]),
    flag("offload-prefetch-step", &[], One, &[]),
    flag("optimization-level", &[], One, &[]),
    flag("otlp-traces-endpoint", &[], One, &[]),
    flag("override-generation-config", &[], One, &[]),
    flag("per-request-spec-decode-metrics", &[], One, &["detailed", "none", "summary"]),
    flag("performance-mode", &[], One, &["balanced", "interactivity", "throughput"]),
    flag("pipeline-parallel-size", &["-pp"], One, &[]),
    flag("pooler-config", &[], One, &[]),
    flag("port", &[], One, &[]),
    flag("prefill-context-parallel-size", &["-pcp"], One, &[]),
    flag("prefill-schedule-interval", &[], One, &[]),
    flag("prefix-cache-retention-interval", &[], One, &[]),
    flag("prefix-caching-hash-algo", &[], One, &["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]),
    flag("prefix-match-unit", &[], One, &[]),
    flag("profiler-config", &[], One, &[]),
    flag("pt-load-map-location", &[], One, &[]),
    flag("quantization", &["-q"], One, &[]),
    flag("quantization-config", &[], One, &[]),
    flag("ray-workers-use-nsight", &[], Bool, &[]),
    flag("reasoning-config", &[], One, &[]),
    flag("reasoning-effort-map", &[], One, &[]),
    flag("reasoning-parser", &[], One, &[]),
    flag("reasoning-parser-plugin", &[], One, &[]),
    flag("renderer-num-workers", &[], One, &[]),
    flag("replayssm-buffer-len", &[], One, &[]),
    flag("response-role", &[], One, &[]),
    flag("return-sampling-mask", &[], Bool, &[]),
    flag("return-tokens-as-token-ids", &[], Bool, &[]),
    flag("revision", &[], One, &[]),
    flag("root-path", &[], One, &[]),
    flag("runner", &[], One, &["auto", "draft", "generate", "pooling"]),
    flag("safetensors-load-strategy", &[], One, &["None", "eager", "lazy", "prefetch", "torchao"]),
    flag("safetensors-prefetch-block-size", &[], One, &[]),
    flag("safetensors-prefetch-num-threads", &[], One, &[]),
    flag("scheduler-cls", &[], One, &[]),
    flag("scheduler-reserve-full-isl", &[], Bool, &[]),
    flag("scheduling-policy", &[], One, &["fcfs", "priority"]),
    flag("seed", &[], One, &[]),
    flag("served-model-name", &[], OneOrMore, &[]),
    flag("show-hidden-metrics-for-version", &[], One, &[]),
    flag("shutdown-timeout", &[], One, &[]),
    flag("skip-mm-profiling", &[], Bool, &[]),
    flag("skip-tokenizer-init", &[], Bool, &[]),
    flag("sleep-mode-backend", &[], One, &[]),
    flag("sleep-mode-offload-cudagraph", &[], Bool, &[]),
    flag("sleep-preserve-parameter-names", &[], OneOrMore, &[]),
    flag("sparse-indexer-topk-backend", &[], One, &["aiter", "auto", "cooperative", "deep_select", "flashinfer", "per_row", "persistent", "torch"]),
    flag("spec-method", &[], One, &["None", "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "custom_class", "deepseek_mtp", "dflash", "dots3_note_mtp", "draft_model", "dspark", "eagle", "eagle3", "ernie_mtp", "exaone4_5_mtp", "exaone_moe_mtp", "extract_hidden_states", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp", "glm5_next_mtp", "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp", "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp", "mtp", "nemotron_h_mtp", "ngram", "ngram_gpu", "pangu_ultra_moe_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp", "step5_mtp", "suffix"]),
    flag("spec-model", &[], One, &[]),
    flag("spec-tokens", &[], One, &[]),
    flag("specialize-active-lora", &[], Bool, &[]),
    flag("speculative-config", &["-sc"], One, &[]),
    flag("sse-keep-alive-interval", &[], One, &[]),
    flag("ssl-ca-certs", &[], One, &[]),
    flag("ssl-cert-reqs", &[], One, &[]),
    flag("ssl-certfile", &[], One, &[]),
    flag("ssl-ciphers", &[], One, &[]),
    flag("ssl-keyfile", &[], One, &[]),
    flag("stream-interval", &[], One, &[]),
    flag("structured-outputs-config", &[], One, &[]),
    flag("swa-bounded-replay", &[], Bool, &[]),
    flag("tensor-parallel-size", &["-tp"], One, &[]),
    flag("tokenizer", &[], One, &[]),
    flag("tokenizer-mode", &[], One, &[]),
    flag("tokenizer-revision", &[], One, &[]),
    flag("tokens-only", &[], Bool, &[]),
    flag("tool-call-parser", &[], One, &[]),
    flag("tool-parser-plugin", &[], One, &[]),
    flag("tool-server", &[], One, &[]),
    flag("tool-strict-level", &[], One, &["None", "auto", "function", "parameter"]),
    flag("trust-remote-code", &[], Bool, &[]),
    flag("trust-request-chat-template", &[], Bool, &[]),
    flag("trust-request-mm-kwargs", &[], Bool, &[]),
    flag("ubatch-size", &[], One, &[]),
    flag("uds", &[], One, &[]),
    flag("use-fp64-gumbel", &[], Bool, &[]),
    flag("use-replayssm", &[], Bool, &[]),
    flag("use-tqdm-on-load", &[], Bool, &[]),
    flag("uvicorn-log-level", &[], One, &["critical", "debug", "error", "info", "trace", "warning"]),
    flag("video-pruning-method", &[], One, &["evs", "vidcom2"]),
    flag("video-pruning-rate", &[], One, &[]),
    flag("watchdog-config", &[], One, &[]),
    flag("watermark", &[], One, &[]),
    flag("watermark-config", &[], One, &[]),
    flag("weight-transfer-config", &[], One, &[]),
    flag("worker-cls", &[], One, &[]),
    flag("worker-extension-cls", &[], One, &[]),
];

impl Flag {
    /// Every spelling argparse registers for this option, with dashes, and
    /// whether it turns the option off (`--no-X`; `--disable-X` for an
    /// `--enable-X` row and the other way round).
    pub fn option_strings(&self) -> Vec<(String, bool)> {
        let long = format!("--{}", self.name);
        let given: Vec<String> = std::iter::once(long)
            .chain(self.aliases.iter().map(|a| (*a).to_owned()))
            .collect();
        let mut out = Vec::new();
        for option in &given {
            out.push((option.clone(), false));
            // argparse.BooleanOptionalAction: --no- for every long spelling.
            if self.takes == Bool {
                if let Some(rest) = option.strip_prefix("--") {
                    out.push((format!("--no-{rest}"), true));
                }
            }
        }
        if self.takes == Bool {
            // EnableDisableAction: the inverse of each --enable-/--disable- spelling.
            for option in &given {
                if let Some(rest) = option.strip_prefix("--enable-") {
                    out.push((format!("--disable-{rest}"), true));
                } else if let Some(rest) = option.strip_prefix("--disable-") {
                    out.push((format!("--enable-{rest}"), true));
                }
            }
        }
        out
    }

    /// argparse's `nargs` for this option (JSON: null, "+", "?" or 0).
    fn nargs(&self) -> Value {
        match self.takes {
            One => Value::Null,
            OneOrMore => json!("+"),
            Optional => json!("?"),
            StoreTrue | Bool | Help => json!(0),
        }
    }

    /// Whether argparse accepts `value` for this option (its choices).
    pub fn accepts(&self, value: &str) -> bool {
        if self.choices.is_empty() {
            return true;
        }
        // vLLM's optional_type: "" and "None" are None, which it adds to the choices.
        if (value.is_empty() || value == "None") && self.choices.contains(&"None") {
            return true;
        }
        if self.int_choices {
            let given = hisparse_core::pytext::py_int(value).and_then(|n| n.to_i64());
            return given.is_some_and(|n| {
                self.choices
                    .iter()
                    .any(|c| c.parse::<i64>().ok() == Some(n))
            });
        }
        self.choices.contains(&value)
    }
}

/// Every option string of [`VLLM_FLAGS`] -> (its row, whether it turns it off).
fn index() -> &'static HashMap<String, (&'static Flag, bool)> {
    static INDEX: OnceLock<HashMap<String, (&'static Flag, bool)>> = OnceLock::new();
    INDEX.get_or_init(|| {
        VLLM_FLAGS
            .iter()
            .flat_map(|f| {
                f.option_strings()
                    .into_iter()
                    .map(move |(s, neg)| (s, (f, neg)))
            })
            .collect()
    })
}

/// The row of the option spelled `option` (with its dashes: `--port`, `-tp`,
/// `--no-enable-prefix-caching`) and whether that spelling turns it off.
pub fn lookup(option: &str) -> Option<(&'static Flag, bool)> {
    index().get(option).copied()
}

/// Every option string of `vllm serve`, with dashes.
pub fn option_strings() -> impl Iterator<Item = &'static str> {
    index().keys().map(String::as_str)
}

/// Whether `--no-NAME` is a `vllm serve` option (`name` without dashes): what
/// `load_config_file` writes for `NAME: false`.
pub fn negatable(name: &str) -> bool {
    lookup(&format!("--no-{name}")).is_some()
}

/// The table as JSON, for tests/vllm/test_flag_table.py: one object per row
/// with its option strings (those that turn it off apart), nargs, whether it
/// takes a value, and its choices.
pub fn table_json() -> String {
    let rows: Vec<Value> = VLLM_FLAGS
        .iter()
        .map(|f| {
            let (off, on): (Vec<_>, Vec<_>) =
                f.option_strings().into_iter().partition(|(_, neg)| *neg);
            json!({
                "name": f.name,
                "option_strings": on.into_iter().map(|(s, _)| s).collect::<Vec<_>>(),
                "negative_option_strings": off.into_iter().map(|(s, _)| s).collect::<Vec<_>>(),
                "nargs": f.nargs(),
                "takes_value": matches!(f.takes, One | OneOrMore | Optional),
                "choices": f.choices,
                "int_choices": f.int_choices,
            })
        })
        .collect();
    json!({"vllm": hisparse_core::VLLM_VERSION, "flags": rows}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_string_names_one_row() {
        let mut seen = std::collections::HashSet::new();
        for f in VLLM_FLAGS {
            for (s, _) in f.option_strings() {
                assert!(seen.insert(s.clone()), "{s} is in two rows");
            }
        }
        assert_eq!(seen.len(), index().len());
    }

    #[test]
    fn boolean_spellings_are_argparses() {
        let (f, off) = lookup("--no-enable-prefix-caching").unwrap();
        assert_eq!((f.name, off), ("enable-prefix-caching", true));
        assert!(lookup("--disable-prefix-caching").unwrap().1);
        assert!(!lookup("--enable-prefix-caching").unwrap().1);
        assert!(
            lookup("--no-headless").is_none(),
            "store_true has no --no- form"
        );
        assert!(negatable("trust-remote-code"));
        assert!(!negatable("disable-log-stats"));
        assert_eq!(lookup("-tp").unwrap().0.name, "tensor-parallel-size");
    }

    #[test]
    fn choices_compare_as_argparse_converts_them() {
        let (f, _) = lookup("--optimization-level").unwrap();
        if f.int_choices {
            assert!(f.accepts("3") && f.accepts(" 3") && f.accepts("0_3"));
            assert!(!f.accepts("9") && !f.accepts("x"));
        }
        assert!(lookup("--port").unwrap().0.accepts("anything"));
    }
}
