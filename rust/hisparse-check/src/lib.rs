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
mod output;
mod render;
mod render_parts;
mod render_plan;
mod render_plan_parts;
mod render_plan_sglang;
mod render_sglang;
mod sglang_0_5_23;
mod sglang_cli;
mod usage;
mod vllm_cli;
mod vllm_flag;
mod vllm_flag_table;
mod vllm_flags;
mod yaml;

pub use output::{stdout_closed_at_start, EXIT_INVALID, EXIT_USAGE, EXIT_VALID};

use clap::CommandFactory;
use hisparse_core::check::check;
use hisparse_core::engines::vllm_0_33::plan::plan;
use hisparse_core::plan::{Plan, PlanOptions};
use output::{print, stdout_open, write_failed};
use serde_json::Value;
use std::io::Write;
use usage::Usage;
use vllm_cli::{build_args, parse, plan_options};

/// The argv vLLM 0.33 makes of a `--config` serve file
/// (`FlexibleArgumentParser.load_config_file`): the YAML read as
/// `yaml.safe_load` reads it and flattened as vLLM flattens it (a mapping
/// value as its JSON text). Err: the message hisparse-check prints, naming
/// the file. For the differential test against vLLM (tests/vllm/test_yaml_fuzz.py).
pub fn config_file_argv(file: &str) -> Result<Vec<String>, String> {
    argv::load_config_file(file).map(|(argv, _)| argv)
}

/// Reads the engine start-up log at `path` (`-`: standard input) for
/// `engine` (`vllm`, `sglang`), as `--plan --engine-log` does; Err is the
/// message of a log that cannot be read or has none of the engine's lines.
pub fn read_engine_log(
    path: &str,
    engine: &str,
) -> Result<hisparse_core::engine_log::EngineLog, String> {
    engine_log::read(path, engine)
}

/// The table of `vllm serve` flags hisparse-check reads, as JSON
/// (`vllm_flags::table_json`), for the test that compares it with vLLM's parser.
pub fn vllm_flag_table_json() -> String {
    vllm_flags::table_json()
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
    plan_text_with(plan, None)
}

/// [`plan_text`] with an SGLang plan's flag to paste ([`render_plan::plan`]).
fn plan_text_with(plan: &Plan, sglang_flag: Option<&str>) -> String {
    let text = render_plan::plan(plan, sglang_flag);
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
        sglang_cli::Outcome::Plan(plan, flag) => {
            let text = if json_output {
                plan.to_json()
            } else {
                plan_text_with(&plan, flag.as_deref())
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

/// An SGLang 0.5.23 launch given as its argv (as [`check_sglang_argv`] takes
/// it) with one diagnostic's fix `ops` applied: the words of the fixed launch
/// (the program words as given, every word of an attribute the fix sets
/// replaced by its new words, the rest in place). Err: the words cannot be
/// read (the CLI's usage error) or the fix does not apply.
pub fn sglang_fixed_argv(
    argv: &[String],
    ops: &[hisparse_core::diagnostic::FixOp],
) -> Result<Vec<String>, String> {
    sglang_0_5_23::fixed_argv::fixed_argv(argv, ops)
}

/// Check a `vllm serve` launch given as its argv (the words after `vllm
/// serve`, or with it), exactly as the plain `hisparse-check ARGV` reads it:
/// `--config` files, dotted flags, every vLLM 0.33 flag form; flags the check
/// does not read are in `ignored_flags`. The machine flags in `argv` (`--gpu`,
/// `--host-memory-gib`, ...) count; `options` given here win over them. `env`
/// is the environment (`VLLM_USE_V2_MODEL_RUNNER`, `VLLM_ALLOW_LONG_MAX_MODEL_LEN`,
/// the Hugging Face cache). Err: `PlanError::Option` for what the CLI calls a
/// usage error (an unknown flag, a bad value, `--plan`), `PlanError::Load` for
/// a model config.json that cannot be read.
pub fn check_vllm_argv(
    argv: &[String],
    options: &PlanOptions,
    env: impl Fn(&str) -> Option<String>,
) -> Result<hisparse_core::Report, hisparse_core::plan::PlanError> {
    use hisparse_core::plan::PlanError;
    let parsed = parse(argv).map_err(|e| {
        PlanError::Option(match e {
            Usage::Message(m) => m,
            Usage::Clap(c) => {
                let text = c.render().to_string();
                text.strip_prefix("error: ")
                    .unwrap_or(&text)
                    .trim_end()
                    .to_owned()
            }
        })
    })?;
    if parsed.cli.plan || parsed.cli.plot.is_some() || parsed.cli.engine_log.is_some() {
        return Err(PlanError::Option(
            "check_argv checks a launch; --plan, --plot and --engine-log are hisparse_rs.plan()'s"
                .into(),
        ));
    }
    let from_argv = plan_options(&parsed.cli);
    let merged = PlanOptions {
        context_length: options.context_length.or(from_argv.context_length),
        target_requests: options.target_requests.or(from_argv.target_requests),
        host_memory_gib: options.host_memory_gib.or(from_argv.host_memory_gib),
        gpu_memory_gib: options.gpu_memory_gib.or(from_argv.gpu_memory_gib),
        weights_gib: options.weights_gib.or(from_argv.weights_gib),
        gpu: options.gpu.clone().or(from_argv.gpu),
        gpus_per_node: options.gpus_per_node.or(from_argv.gpus_per_node),
        ..options.clone()
    };
    let serve = build_args(parsed.cli, &env);
    let mut report = check(&serve, &merged)?;
    report.warnings.extend(parsed.warnings);
    report.ignored_flags = parsed.ignored;
    Ok(report)
}

/// `hisparse-check deploy FILES --model-dir C=L ... --json` as a function:
/// (valid, the report's JSON, docs/deploy.md). Err: a manifest that cannot
/// be read, passes a bound, or holds no engine launch (the CLI's exit 2).
///
/// `launches`: (command, role, node) of each `--launch`; `machine`: the
/// `--gpu`, `--gpus-per-node`, `--host-memory-gib` of their nodes.
pub fn check_deployment_json(
    files: &[String],
    model_dirs: &[(String, String)],
    launches: &[(String, Option<String>, Option<String>)],
    machine: (Option<String>, Option<u64>, Option<f64>),
) -> Result<(bool, String), String> {
    let launches: Vec<deploy::own::LaunchArg> = launches
        .iter()
        .map(|(command, role, node)| deploy::own::LaunchArg {
            command: command.clone(),
            role: role.clone(),
            node: node.clone(),
        })
        .collect();
    let machine = deploy::own::MachineArg {
        gpu: machine.0,
        gpus_per_node: machine.1,
        ram_gib: machine.2,
    };
    deploy::cli::check_json(files, model_dirs, &launches, &machine)
}

/// A report of `ServerArgs` attributes (the Python API's keywords) with
/// argparse's refusal of each value outside its option's choices first
/// (`disaggregation_mode="decoder"`, stage `argparse`), as the CLI reports them.
pub fn sglang_refuse_choices(
    report: &mut hisparse_core::Report,
    args: &hisparse_core::engines::sglang_0_5_23::SglangArgs,
) {
    let errors = sglang_0_5_23::read::attribute_choices(args);
    sglang_0_5_23::read::refuse_choices(report, errors);
}

/// Every `ServerArgs` attribute `sglang serve` 0.5.23 has a flag for,
/// sorted (the Python API's names for `engine="sglang"`).
pub fn sglang_server_arg_names() -> Vec<&'static str> {
    sglang_0_5_23::flags::dests()
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
