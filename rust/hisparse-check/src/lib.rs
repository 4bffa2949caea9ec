//! `hisparse-check`: preflight a vLLM HiSparse serve configuration with vLLM's
//! own flag names. One entry point, [`run`], serves the Rust binary and the
//! `hisparse-check` console script that pip installs (through the PyO3 module).
//!
//! Exit codes: 0 valid, 1 invalid configuration, 2 usage or I/O error.

mod argv;
mod render;

pub use argv::human_readable_int;

use clap::{ArgAction, Parser};
use hisparse_core::{resolve, ServeArgs};
use serde_json::Value;
use std::io::Write;

pub const EXIT_VALID: i32 = 0;
pub const EXIT_INVALID: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Check a vLLM serve configuration for HiSparse before `vllm serve` loads for minutes.
///
/// Takes `vllm serve`'s flags (JSON, dotted `--kv-transfer-config.kv_role kv_both`
/// and `--config file.yaml` forms), resolves the HiSparse settings with the
/// provenance of each, and reports every error at once.
#[derive(Parser, Debug)]
#[command(name = "hisparse-check", version, args_override_self = true, after_help = AFTER_HELP)]
struct Cli {
    /// Model: a local config.json, or a directory containing one (like `vllm serve MODEL`).
    #[arg(value_name = "MODEL")]
    model_positional: Option<String>,
    /// Model: a local config.json, or a directory containing one.
    #[arg(long)]
    model: Option<String>,
    /// KVTransferConfig JSON (kv_connector, kv_role, kv_connector_extra_config, ...).
    #[arg(long, value_name = "JSON")]
    kv_transfer_config: Option<String>,
    /// AttentionConfig JSON; its hisparse_config holds device_buffer_size and eager_host_mirror.
    #[arg(long, value_name = "JSON")]
    attention_config: Option<String>,
    /// SpeculativeConfig JSON (num_speculative_tokens widens each decode query).
    #[arg(long, value_name = "JSON")]
    speculative_config: Option<String>,
    /// CompilationConfig JSON (cudagraph_mode); also -cc.
    #[arg(long, value_name = "JSON")]
    compilation_config: Option<String>,
    /// JSON deep-merged over the model's config.json.
    #[arg(long, value_name = "JSON")]
    hf_overrides: Option<String>,
    /// Tensor-parallel size (also -tp).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    tensor_parallel_size: Option<i64>,
    /// Pipeline-parallel size, also -pp (HiSparse needs 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pipeline_parallel_size: Option<i64>,
    /// Data-parallel size (also -dp).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    data_parallel_size: Option<i64>,
    /// Decode-context-parallel size, also -dcp (HiSparse needs 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    decode_context_parallel_size: Option<i64>,
    /// KV cache dtype: auto, bfloat16, fp8_ds_mla, fp8, ...
    #[arg(long, value_name = "DTYPE")]
    kv_cache_dtype: Option<String>,
    /// KV block size in tokens (sparse MLA: a multiple of 64; default 64).
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true)]
    block_size: Option<i64>,
    /// Context limit in tokens: 1k = 1000, 1K = 1024, -1 or auto = the model's.
    #[arg(long, value_name = "TOKENS", value_parser = parse_max_model_len, allow_negative_numbers = true)]
    max_model_len: Option<i64>,
    /// Maximum concurrent sequences per replica.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    max_num_seqs: Option<i64>,
    /// Reserve a request's full input length when scheduling (default on; HiSparse needs it).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_scheduler_reserve_full_isl")]
    scheduler_reserve_full_isl: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    no_scheduler_reserve_full_isl: bool,
    /// Disable the hybrid KV cache manager (HiSparse needs it on).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_disable_hybrid_kv_cache_manager")]
    disable_hybrid_kv_cache_manager: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    no_disable_hybrid_kv_cache_manager: bool,
    /// Target platform.
    #[arg(long, value_parser = ["cuda", "rocm", "cpu"], default_value = "cuda")]
    platform: String,
    /// Print the report as JSON (stable schema, see README).
    #[arg(long)]
    json: bool,
}

const AFTER_HELP: &str = "\
Also reads: --config FILE.yaml (vLLM serve-config file; command-line flags win),
dotted flags such as --kv-transfer-config.kv_role kv_both, and the
VLLM_USE_V2_MODEL_RUNNER environment variable.

Exit status: 0 valid, 1 invalid configuration, 2 usage or I/O error.";

fn parse_max_model_len(text: &str) -> Result<i64, String> {
    if text.trim().eq_ignore_ascii_case("auto") || text.trim() == "-1" {
        return Ok(-1);
    }
    human_readable_int(text).ok_or_else(|| {
        format!("{text:?} is not a token count (examples: 131072, 128k, 128K, auto)")
    })
}

/// Run `hisparse-check` on `args` (without the program name) and return the exit code.
/// `env` looks up environment variables (the process environment in the binary).
pub fn run<I, S>(args: I, env: impl Fn(&str) -> Option<String>) -> i32
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let processed = match argv::preprocess(&args) {
        Ok(p) => p,
        Err(msg) => {
            let _ = writeln!(stderr, "hisparse-check: error: {msg}");
            return EXIT_USAGE;
        }
    };
    let cli =
        match Cli::try_parse_from(std::iter::once("hisparse-check".to_owned()).chain(processed)) {
            Ok(cli) => cli,
            Err(e) => {
                let code = if e.use_stderr() {
                    EXIT_USAGE
                } else {
                    EXIT_VALID
                };
                let _ = e.print();
                return code;
            }
        };
    let json_output = cli.json;
    let report = match resolve(&build_args(cli, &env)) {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(stderr, "hisparse-check: error: {e}");
            return EXIT_USAGE;
        }
    };
    let text = if json_output {
        report.to_json()
    } else {
        render::human(&report)
    };
    let _ = writeln!(stdout, "{text}");
    if report.valid {
        EXIT_VALID
    } else {
        EXIT_INVALID
    }
}

/// Turn parsed flags into [`ServeArgs`]; JSON flags stay text for the core to parse.
fn build_args(cli: Cli, env: &impl Fn(&str) -> Option<String>) -> ServeArgs {
    ServeArgs {
        kv_transfer_config: cli.kv_transfer_config.map(Value::String),
        attention_config: cli.attention_config.map(Value::String),
        speculative_config: cli.speculative_config.map(Value::String),
        compilation_config: cli.compilation_config.map(Value::String),
        hf_overrides: cli.hf_overrides.map(Value::String),
        model: cli.model.or(cli.model_positional),
        hf_config: None,
        tensor_parallel_size: cli.tensor_parallel_size,
        pipeline_parallel_size: cli.pipeline_parallel_size,
        data_parallel_size: cli.data_parallel_size,
        decode_context_parallel_size: cli.decode_context_parallel_size,
        kv_cache_dtype: cli.kv_cache_dtype,
        block_size: cli.block_size,
        max_model_len: cli.max_model_len,
        max_num_seqs: cli.max_num_seqs,
        scheduler_reserve_full_isl: flag_pair(
            cli.scheduler_reserve_full_isl,
            cli.no_scheduler_reserve_full_isl,
        ),
        disable_hybrid_kv_cache_manager: flag_pair(
            cli.disable_hybrid_kv_cache_manager,
            cli.no_disable_hybrid_kv_cache_manager,
        ),
        vllm_use_v2_model_runner: env("VLLM_USE_V2_MODEL_RUNNER"),
        platform: Some(cli.platform),
    }
}

fn flag_pair(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// Parse `hisparse-check` flags into [`ServeArgs`] without resolving (for tests
/// that compare the JSON, dotted and YAML forms).
pub fn parse_serve_args<I, S>(
    args: I,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ServeArgs, String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    let processed = argv::preprocess(&args)?;
    let cli = Cli::try_parse_from(std::iter::once("hisparse-check".to_owned()).chain(processed))
        .map_err(|e| e.to_string())?;
    Ok(build_args(cli, &env).normalized().0.into_owned())
}
