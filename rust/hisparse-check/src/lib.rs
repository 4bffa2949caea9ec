//! `hisparse-check`: preflight a vLLM HiSparse serve configuration with vLLM's
//! own flag names. One entry point, [`run`], serves the Rust binary and the
//! `hisparse-check` console script that pip installs (through the PyO3 module).
//!
//! Exit codes: 0 valid, 1 invalid configuration, 2 usage or I/O error,
//! including a result that cannot be written (a closed, read-only or full
//! stdout). A reader that closed the pipe (`| head`) is quiet, and the exit
//! code is still the verdict: it had the output it asked for.

mod argv;
mod deploy;
mod dialect;
mod engine_log;
mod launch;
mod render;
mod render_parts;
mod render_plan;
mod render_plan_parts;
mod render_plan_sglang;
mod render_sglang;
mod sglang_0_5_23;
mod sglang_cli;
mod usage;
mod vllm_flags;
mod yaml;

use hisparse_core::engines::vllm_0_33::diagnostics::VllmDiagnostic;
use usage::{parse_bytes, parse_max_model_len, parse_py_float, parse_py_int, parse_tokens, Usage};

use clap::{ArgAction, CommandFactory, Parser};
use hisparse_core::check::check;
use hisparse_core::engines::vllm_0_33::args::flag_name;
use hisparse_core::engines::vllm_0_33::plan::plan;
use hisparse_core::plan::{Plan, PlanOptions};
use hisparse_core::{Code, Diagnostic, FieldPath, ServeArgs};
use serde_json::Value;
use std::io::Write;

pub const EXIT_VALID: i32 = 0;
pub const EXIT_INVALID: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Help heading of the planner's and the machine's flags (they are not `vllm serve` flags).
const PLANNER_FLAGS: &str = "Machines and capacity planning (not vllm serve flags)";

/// Check a vLLM serve configuration for HiSparse before `vllm serve` loads for minutes.
///
/// Takes `vllm serve`'s flags (JSON, dotted `--kv-transfer-config.kv_role kv_both`
/// and `--config file.yaml` forms), resolves the HiSparse settings with the
/// provenance of each, and reports every error at once.
#[derive(Parser, Debug)]
#[command(name = "hisparse-check", version, args_override_self = true, after_help = AFTER_HELP)]
struct Cli {
    /// Model: a local config.json, a directory containing one, or a Hugging Face
    /// model id in the local cache (like `vllm serve MODEL`; nothing is downloaded).
    #[arg(value_name = "MODEL")]
    model_positional: Option<String>,
    /// Model: a local config.json, a directory containing one, or a cached model id.
    #[arg(long)]
    model: Option<String>,
    /// Where the model's config.json is read from instead of MODEL (a file, a
    /// directory or a cached model id), as vLLM reads it.
    #[arg(long, value_name = "PATH")]
    hf_config_path: Option<String>,
    /// Branch, tag or commit of a model id in the Hugging Face cache (default main).
    #[arg(long, value_name = "REVISION")]
    revision: Option<String>,
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
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    tensor_parallel_size: Option<i64>,
    /// Pipeline-parallel size, also -pp (HiSparse needs 1).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    pipeline_parallel_size: Option<i64>,
    /// Data-parallel size (also -dp).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    data_parallel_size: Option<i64>,
    /// DP replicas this node runs, also -dpl (default: all of them, or an even
    /// share over --nnodes): the host-memory check counts this node's pools.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    data_parallel_size_local: Option<i64>,
    /// Decode-context-parallel size, also -dcp (HiSparse needs 1).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    decode_context_parallel_size: Option<i64>,
    /// Prefill-context-parallel size (also -pcp).
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    prefill_context_parallel_size: Option<i64>,
    /// Nodes of the deployment (also -n): TP ranks share one HiSparse host pool only when their replica is on one node.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    nnodes: Option<i64>,
    /// This node's zero-based index among --nnodes (also -r; default 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    node_rank: Option<i64>,
    /// vllm serve --headless: engines and workers without an API server (needs
    /// at least one local DP replica).
    #[arg(long, action = ArgAction::SetTrue)]
    headless: bool,
    /// This process is one external-LB DP rank (also -dpn): it runs one
    /// replica, and only its host pools are counted on the node.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    data_parallel_rank: Option<i64>,
    /// KV cache dtype: auto, bfloat16, fp8_ds_mla, fp8, ...
    #[arg(long, value_name = "DTYPE")]
    kv_cache_dtype: Option<String>,
    /// KV block size in tokens (sparse MLA: a multiple of 64; default 64).
    #[arg(long, value_name = "TOKENS", value_parser = parse_py_int, allow_negative_numbers = true)]
    block_size: Option<i64>,
    /// Context limit in tokens: 1k = 1000, 1K = 1024, -1 or auto = the model's.
    #[arg(long, value_name = "TOKENS", value_parser = parse_max_model_len, allow_negative_numbers = true)]
    max_model_len: Option<i64>,
    /// Maximum concurrent sequences per replica.
    #[arg(long, value_name = "N", value_parser = parse_py_int, allow_negative_numbers = true)]
    max_num_seqs: Option<i64>,
    /// Reserve a request's full input length when scheduling (default on; HiSparse
    /// needs it; --no-scheduler-reserve-full-isl turns it off).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_scheduler_reserve_full_isl")]
    scheduler_reserve_full_isl: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    no_scheduler_reserve_full_isl: bool,
    /// Disable the hybrid KV cache manager (HiSparse needs it on; the
    /// --no- form sets it on explicitly).
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_disable_hybrid_kv_cache_manager")]
    disable_hybrid_kv_cache_manager: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    no_disable_hybrid_kv_cache_manager: bool,
    /// Fraction of each GPU's memory vLLM may use (default 0.92); --plan reads it.
    #[arg(
        long,
        visible_alias = "device-memory-utilization",
        value_name = "FRACTION",
        value_parser = parse_py_float,
        allow_negative_numbers = true
    )]
    gpu_memory_utilization: Option<f64>,
    /// KV cache bytes per GPU (20G = 20 x 2^30, 20g = 20e9); vLLM then ignores
    /// --gpu-memory-utilization. --plan reads it.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, allow_negative_numbers = true)]
    kv_cache_memory_bytes: Option<i64>,
    /// Executor backend (mp, ray, ...): TP ranks share one HiSparse host pool only under mp.
    #[arg(long, value_name = "BACKEND")]
    distributed_executor_backend: Option<String>,
    /// Data-parallel backend, also -dpb (mp, ray): over --nnodes vLLM takes only mp.
    #[arg(long, value_name = "BACKEND")]
    data_parallel_backend: Option<String>,
    /// Expert parallelism (also -ep): --plan splits the estimated expert weights over TP x DP.
    #[arg(long, action = ArgAction::SetTrue, overrides_with = "no_enable_expert_parallel")]
    enable_expert_parallel: bool,
    #[arg(long, action = ArgAction::SetTrue, hide = true)]
    no_enable_expert_parallel: bool,
    /// Target platform (default cuda).
    #[arg(long, value_parser = ["cuda", "rocm", "cpu"])]
    platform: Option<String>,
    /// Print the report (or the plan) as JSON (stable schema, see README).
    #[arg(long)]
    json: bool,
    /// Plan capacity: concurrent requests with and without HiSparse, the binding
    /// limit, host memory to pin; a table from 8K tokens to max_model_len.
    #[arg(long, help_heading = PLANNER_FLAGS)]
    plan: bool,
    /// Tokens per request to plan for (default: max_model_len; 128k = 128000, 128K = 131072).
    #[arg(long, value_name = "TOKENS", value_parser = parse_tokens, help_heading = PLANNER_FLAGS)]
    context_length: Option<u64>,
    /// Requests the suggested host_pool_gib should hold (default: what the GPU holds).
    #[arg(
        long,
        value_name = "N",
        help_heading = PLANNER_FLAGS
    )]
    target_requests: Option<u64>,
    /// The serving node's host RAM in GiB: the check refuses pools that pin more
    /// than 95 % of it (--plan without it: this machine's MemAvailable, a warning).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    host_memory_gib: Option<f64>,
    /// The GPU (h100, h200, b200, a100, a100-40gb, l40s, mi300x): its memory for
    /// the KV room and its shared memory per block for vLLM's resolver check.
    #[arg(long, value_name = "NAME", help_heading = PLANNER_FLAGS)]
    gpu: Option<String>,
    /// Memory of one GPU in GiB (e.g. 140 for an H200), for the KV room and the
    /// host pool that lets the GPUs bind (overrides --gpu's figure).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    gpu_memory_gib: Option<f64>,
    /// Model weights per GPU in GiB (vLLM logs "Model loading took X GiB";
    /// default: estimated from config.json).
    #[arg(
        long,
        value_name = "GIB",
        allow_negative_numbers = true,
        help_heading = PLANNER_FLAGS
    )]
    weights_gib: Option<f64>,
    /// Plan from the engine's start-up log (a file, or - for standard input):
    /// the weights and the KV room it measured replace the estimates, and the
    /// pools and capacity it logged are printed beside the plan's.
    #[arg(long, value_name = "FILE", requires = "plan", help_heading = PLANNER_FLAGS)]
    engine_log: Option<String>,
    /// Draw the sweep to a PNG (the pip-installed hisparse-check only: matplotlib runs in Python).
    #[arg(
        long,
        value_name = "PATH",
        help_heading = PLANNER_FLAGS
    )]
    plot: Option<String>,
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

/// The argv vLLM 0.33 makes of a `--config` serve file
/// (`FlexibleArgumentParser.load_config_file`): the YAML read as
/// `yaml.safe_load` reads it and flattened as vLLM flattens it (a mapping
/// value as its JSON text). Err: the message hisparse-check prints, naming
/// the file. For the differential test against vLLM (tests/vllm/test_yaml_fuzz.py).
pub fn config_file_argv(file: &str) -> Result<Vec<String>, String> {
    argv::load_config_file(file).map(|(argv, _)| argv)
}

/// The table of `vllm serve` flags hisparse-check reads, as JSON
/// (`vllm_flags::table_json`), for the test that compares it with vLLM's parser.
/// Reads the engine start-up log at `path` (`-`: standard input) for
/// `engine` (`vllm`, `sglang`), as `--plan --engine-log` does; Err is the
/// message of a log that cannot be read or has none of the engine's lines.
pub fn read_engine_log(
    path: &str,
    engine: &str,
) -> Result<hisparse_core::engine_log::EngineLog, String> {
    engine_log::read(path, engine)
}

pub fn vllm_flag_table_json() -> String {
    vllm_flags::table_json()
}

/// Set by the binary when its stdout was closed at start (`hisparse-check
/// ... >&-`): Rust's runtime then opens /dev/null on it before `main`, where
/// the result would be lost with exit 0.
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// For the binary's `main`: stdout was closed when the process started, so
/// the result cannot be written (exit 2, as the console script exits).
pub fn stdout_closed_at_start() {
    STDOUT_CLOSED_AT_START.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Run `hisparse-check` on `args` (without the program name) and return the exit code.
/// `env` looks up environment variables (the process environment in the binary).
pub fn run<I, S>(args: I, env: impl Fn(&str) -> Option<String>) -> i32
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    run_with_plan(args, env).0
}

/// [`run`], also returning the plan when `--plan` made one (the Python console
/// script draws `--plot` from it).
pub fn run_with_plan<I, S>(args: I, env: impl Fn(&str) -> Option<String>) -> (i32, Option<Plan>)
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    if args.first().map(String::as_str) == Some("deploy") {
        return (deploy::cli::run(&args[1..], &mut stdout, &mut stderr), None);
    }
    let args = match launch::split(&args) {
        Ok(l) if l.engine == launch::Engine::Sglang => {
            return run_sglang(&l.args, l.sglang_serve, &mut stdout, &mut stderr)
        }
        Ok(l) => l.args,
        Err(msg) => {
            let _ = writeln!(stderr, "hisparse-check: error: {msg}");
            return (EXIT_USAGE, None);
        }
    };
    let parsed = match parse(&args) {
        Ok(p) => p,
        Err(Usage::Message(msg)) => {
            let _ = writeln!(stderr, "hisparse-check: error: {msg}");
            return (EXIT_USAGE, None);
        }
        Err(Usage::Clap(e)) if e.use_stderr() => {
            // clap's own "error: ..." under the tool's name, as every other usage error.
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            let _ = write!(stderr, "hisparse-check: error: {text}");
            return (EXIT_USAGE, None);
        }
        Err(Usage::Clap(e)) => {
            // --help, --version
            if let Err(io) = stdout_open()
                .and_then(|()| e.print())
                .and_then(|()| std::io::stdout().flush())
            {
                return write_failed(&mut stderr, &io, EXIT_VALID);
            }
            return (EXIT_VALID, None);
        }
    };
    if parsed.cli.plot.is_some() {
        let _ = writeln!(stderr, "hisparse-check: error: --plot draws with matplotlib, which runs in Python: use the hisparse-check that pip installs with the plot extra (pip install 'hisparse_rs[plot]' (from a checkout of this repository: pip install '.[plot]')), or hisparse_rs.plot_plan()");
        return (EXIT_USAGE, None);
    }
    let json_output = parsed.cli.json;
    let planning = parsed.cli.plan;
    let engine_log_path = parsed.cli.engine_log.clone();
    let options = plan_options(&parsed.cli);
    let serve = build_args(parsed.cli, &env);
    let usage = |stderr: &mut std::io::StderrLock, e: &dyn std::fmt::Display| {
        let _ = writeln!(stderr, "hisparse-check: error: {e}");
        (EXIT_USAGE, None)
    };
    let (mut report, plan) = if let Some(path) = &engine_log_path {
        let log = match engine_log::read(path, hisparse_core::report::ENGINE_VLLM) {
            Ok(log) => log,
            Err(e) => return usage(&mut stderr, &e),
        };
        match hisparse_core::engines::vllm_0_33::engine_log::plan(&serve, &options, &log, path) {
            Ok(x) => x,
            Err(e) => return usage(&mut stderr, &e),
        }
    } else if planning {
        match plan(&serve, &options) {
            Ok(x) => x,
            Err(e) => return usage(&mut stderr, &e),
        }
    } else {
        match check(&serve, &options) {
            Ok(report) => (report, None),
            Err(e) => return usage(&mut stderr, &e),
        }
    };
    report.warnings.extend(parsed.warnings.iter().cloned());
    report.ignored_flags = parsed.ignored.clone();
    let Some(mut plan) = plan else {
        let text = if json_output {
            report.to_json()
        } else {
            render::human(&report)
        };
        let verdict = if report.valid {
            EXIT_VALID
        } else {
            EXIT_INVALID
        };
        if let Err(e) = print(&mut stdout, &text) {
            return write_failed(&mut stderr, &e, verdict);
        }
        return (verdict, None);
    };
    plan.warnings.extend(parsed.warnings);
    plan.ignored_flags = parsed.ignored;
    let text = if json_output {
        plan.to_json()
    } else {
        plan_text(&plan)
    };
    let verdict = if plan.valid { EXIT_VALID } else { EXIT_INVALID };
    if let Err(e) = print(&mut stdout, &text) {
        return write_failed(&mut stderr, &e, verdict);
    }
    (verdict, Some(plan))
}

/// A plan's text, with its engine-log section when it was planned from one.
fn plan_text(plan: &Plan) -> String {
    let text = render_plan::plan(plan);
    match &plan.engine_log {
        Some(log) => engine_log::insert_before_result(&text, &engine_log::section(log)),
        None => text,
    }
}

/// Usage errors as the vLLM side prints them: ours under the tool's name,
/// clap's `--help` and `--version` on stdout.
fn usage_exit(e: Usage, stderr: &mut impl Write) -> (i32, Option<Plan>) {
    match e {
        Usage::Message(msg) => {
            let _ = writeln!(stderr, "hisparse-check: error: {msg}");
            (EXIT_USAGE, None)
        }
        Usage::Clap(e) if e.use_stderr() => {
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            let _ = write!(stderr, "hisparse-check: error: {text}");
            (EXIT_USAGE, None)
        }
        Usage::Clap(e) => {
            if let Err(io) = stdout_open()
                .and_then(|()| e.print())
                .and_then(|()| std::io::stdout().flush())
            {
                return write_failed(stderr, &io, EXIT_VALID);
            }
            (EXIT_VALID, None)
        }
    }
}

/// An SGLang 0.5.23 launch (`sglang_cli`): the report or the plan, with the
/// same exit codes and output rules as vLLM's.
fn run_sglang(
    words: &[String],
    serve: bool,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> (i32, Option<Plan>) {
    let parsed = match sglang_cli::parse(words, serve) {
        Ok(p) => p,
        Err(e) => return usage_exit(e, stderr),
    };
    if parsed.read.help {
        // `--hel` and other prefixes of SGLang's --help: hisparse-check's help.
        let help = sglang_cli::SglangCli::command().render_help().to_string();
        if let Err(e) = print(stdout, &help) {
            return write_failed(stderr, &e, EXIT_VALID);
        }
        return (EXIT_VALID, None);
    }
    if parsed.cli.plot.is_some() {
        let _ = writeln!(stderr, "hisparse-check: error: --plot draws with matplotlib, which runs in Python: use the hisparse-check that pip installs with the plot extra, or hisparse_rs.plot_plan()");
        return (EXIT_USAGE, None);
    }
    let json_output = parsed.cli.json;
    let outcome = match sglang_cli::run(parsed) {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(stderr, "hisparse-check: error: {e}");
            return (EXIT_USAGE, None);
        }
    };
    let (text, valid, plan) = match outcome {
        sglang_cli::Outcome::Report(report) => {
            let text = if json_output {
                report.to_json()
            } else {
                render_sglang::human(&report)
            };
            (text, report.valid, None)
        }
        sglang_cli::Outcome::Plan(plan) => {
            let text = if json_output {
                plan.to_json()
            } else {
                plan_text(&plan)
            };
            (text, plan.valid, Some(*plan))
        }
    };
    let verdict = if valid { EXIT_VALID } else { EXIT_INVALID };
    if let Err(e) = print(stdout, &text) {
        return write_failed(stderr, &e, verdict);
    }
    (verdict, plan)
}

/// Check an SGLang 0.5.23 launch given as its argv (the words after `sglang
/// serve` or `python -m sglang.launch_server`; a leading program is taken
/// off too), exactly as `hisparse-check --engine sglang` reads it: argparse's
/// refusals are errors at stage `argparse`, flags the check does not read are
/// in `ignored_flags`. Err: `PlanError::Option` for an option out of range,
/// an unknown GPU or words the check cannot read (the CLI's usage errors);
/// `PlanError::Load` for a model config.json that is not a regular file or is
/// over its bound (the CLI exits 2 for both, as for vLLM).
pub fn check_sglang_argv(
    argv: &[String],
    options: &PlanOptions,
) -> Result<hisparse_core::Report, hisparse_core::plan::PlanError> {
    let mut words = vec!["--engine".to_owned(), "sglang".to_owned()];
    words.extend(argv.iter().cloned());
    let launch = launch::split(&words).map_err(hisparse_core::plan::PlanError::Option)?;
    sglang_cli::check_argv(&launch.args, launch.sglang_serve, options)
}

/// `hisparse-check deploy FILES --model-dir C=L ... --json` as a function:
/// (valid, the report's JSON, docs/deploy.md). Err: a manifest that cannot
/// be read, passes a bound, or holds no engine launch (the CLI's exit 2).
pub fn check_deployment_json(
    files: &[String],
    model_dirs: &[(String, String)],
) -> Result<(bool, String), String> {
    deploy::cli::check_json(files, model_dirs)
}

/// Every `ServerArgs` attribute `sglang serve` 0.5.23 has a flag for,
/// sorted (the Python API's names for `engine="sglang"`).
pub fn sglang_server_arg_names() -> Vec<&'static str> {
    sglang_0_5_23::flags::dests()
}

/// Write the result and flush: a full disk or a closed stdout is an error,
/// not a silent exit 0 (a closed pipe is quiet: [`write_failed`]).
fn print(stdout: &mut impl Write, text: &str) -> std::io::Result<()> {
    stdout_open()?;
    writeln!(stdout, "{text}")?;
    stdout.flush()
}

/// Whether the result can be written at all. Rust's stdout takes a write to
/// a closed or read-only descriptor (EBADF) as done, so the result would be
/// lost with exit status 0: ask the descriptor itself first (closed: EBADF;
/// open for reading only, `1</dev/null`: EBADF too), and what the binary saw
/// before Rust's runtime reopened a closed stdout on /dev/null.
fn stdout_open() -> std::io::Result<()> {
    let bad = || std::io::Error::from_raw_os_error(libc::EBADF);
    if STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(bad());
    }
    #[cfg(unix)]
    {
        // SAFETY: F_GETFL reads the descriptor's status flags; it touches no memory.
        let flags = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFL) };
        if flags == -1 {
            return Err(std::io::Error::last_os_error());
        }
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(bad());
        }
    }
    Ok(())
}

/// The usage error for argument `position` (1-based) that is not UTF-8,
/// shown as `lossy`: the model path, a file or a flag value would otherwise
/// be read with replacement characters (a path then reads as "not found").
pub fn not_utf8(position: usize, lossy: &str) -> String {
    format!(
        "argument {position} ({lossy:?}) is not UTF-8 text: hisparse-check reads UTF-8 paths and \
         values; rename the file or directory, or link to it under a UTF-8 name"
    )
}

/// [`run`] on arguments that may not be UTF-8: each is its text, or `Err`
/// with its lossy form (the binary's `args_os`, the console script's
/// `sys.argv`). The first that is not UTF-8 is a usage error (exit 2).
pub fn run_checked<I>(args: I, env: impl Fn(&str) -> Option<String>) -> (i32, Option<Plan>)
where
    I: IntoIterator<Item = Result<String, String>>,
{
    let mut texts = Vec::new();
    for (i, arg) in args.into_iter().enumerate() {
        match arg {
            Ok(text) => texts.push(text),
            Err(lossy) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "hisparse-check: error: {}",
                    not_utf8(i + 1, &lossy)
                );
                return (EXIT_USAGE, None);
            }
        }
    }
    run_with_plan(texts, env)
}

/// A failed write of the result: exit 2 with a message (a full disk, a closed
/// stdout), except for a reader that closed the pipe (`| head -3`): that is
/// quiet and exit 0, as in ripgrep (crates/core/main.rs) and Unix tools that
/// die of SIGPIPE, which Rust ignores.
fn write_failed(stderr: &mut impl Write, e: &std::io::Error, verdict: i32) -> (i32, Option<Plan>) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // The reader has what it wanted (`| head`): quiet, and the exit code is
        // still the verdict, so `set -o pipefail` sees an invalid configuration.
        return (verdict, None);
    }
    let _ = writeln!(
        stderr,
        "hisparse-check: error: cannot write the result to stdout: {e}"
    );
    (EXIT_USAGE, None)
}

fn plan_options(cli: &Cli) -> PlanOptions {
    PlanOptions {
        context_length: cli.context_length,
        target_requests: cli.target_requests,
        host_memory_gib: cli.host_memory_gib,
        gpu_memory_gib: cli.gpu_memory_gib,
        weights_gib: cli.weights_gib,
        gpu: cli.gpu.clone(),
        ..PlanOptions::default()
    }
}

struct Parsed {
    cli: Cli,
    /// vLLM flags this tool does not check (`--port 8000`), as given.
    ignored: Vec<String>,
    /// Warnings about the command line itself.
    warnings: Vec<Diagnostic>,
}

/// vLLM's argv forms -> clap. Flags clap does not know are vLLM flags outside
/// HiSparse's concern (`--port`, `--trust-remote-code`): set aside and listed,
/// so a real launch command can be checked as it is.
fn parse(args: &[String]) -> Result<Parsed, Usage> {
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
fn build_args(cli: Cli, env: &impl Fn(&str) -> Option<String>) -> ServeArgs {
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
        platform: cli.platform,
    }
}

fn flag_pair(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// SGLang 0.5.23's argv as its argparse reads it, as JSON: `values` (the
/// `ServerArgs` attributes given), `problems` (argparse's refusals, each with
/// its `kind` and message). For the test that compares the reading with
/// SGLang's real parser (tests/sglang).
pub fn sglang_argv_json(argv: &[String]) -> String {
    let parsed = sglang_0_5_23::argv::parse(argv);
    let problems: Vec<Value> = parsed
        .problems
        .iter()
        .map(|p| serde_json::json!({"kind": format!("{:?}", p.kind), "message": p.message}))
        .collect();
    serde_json::json!({
        "engine_version": sglang_0_5_23::ENGINE_VERSION,
        "values": parsed.values,
        "problems": problems,
        "help": parsed.help,
    })
    .to_string()
}
