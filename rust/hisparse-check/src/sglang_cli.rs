//! `hisparse-check` for an SGLang 0.5.23 launch (`--engine sglang`, or
//! `-- sglang serve ...` / `-- python -m sglang.launch_server ...`):
//! hisparse-check's own machine and planner flags are taken out by their
//! exact spelling, every other word is read as SGLang's argparse reads it
//! (`sglang_0_5_23::read`), then the core checks or plans the launch.

use crate::sglang_0_5_23::read;
use crate::usage::{parse_tokens, Usage};
use clap::Parser;
use hisparse_core::diagnostic::FixOp;
use hisparse_core::engines::sglang_0_5_23 as core_sglang;
use hisparse_core::engines::sglang_0_5_23::fixed_flags::flag_words;
use hisparse_core::engines::sglang_0_5_23::fixes::{apply_fix, fix_form};
use hisparse_core::engines::sglang_0_5_23::flags::quote;
use hisparse_core::engines::sglang_0_5_23::SglangArgs;
use hisparse_core::path::FieldPath;
use hisparse_core::plan::{Plan, PlanError, PlanOptions};
use hisparse_core::Report;

/// Help heading of hisparse-check's own flags.
const OWN: &str = "hisparse-check's own flags (not sglang serve flags)";

/// Check an SGLang 0.5.23 launch for HiSparse before `sglang serve` loads for minutes.
///
/// Takes `sglang serve`'s flags as SGLang's argparse reads them (every flag of
/// 0.5.23, its aliases and prefixes; flags the check does not read are listed
/// as ignored) and reports every error of every stage at once.
#[derive(Parser, Debug, Default)]
#[command(
    name = "hisparse-check --engine sglang",
    version,
    override_usage = "hisparse-check --engine sglang [OPTIONS] SGLANG_FLAGS...\n       hisparse-check [OPTIONS] -- sglang serve [MODEL] SGLANG_FLAGS...\n       hisparse-check [OPTIONS] -- python -m sglang.launch_server SGLANG_FLAGS...",
    after_help = AFTER_HELP,
    disable_help_flag = false
)]
pub(crate) struct SglangCli {
    /// Print the report (or the plan) as JSON (the same schema as vLLM's, with engine "sglang").
    #[arg(long, help_heading = OWN)]
    pub json: bool,
    /// Plan capacity: requests served with and without HiSparse, the binding
    /// limit, host RAM pinned per rank and per node.
    #[arg(long, help_heading = OWN)]
    pub plan: bool,
    /// Tokens per request to plan for (default: --context-length, else the
    /// model's; 128k = 128000, 128K = 131072). SGLang's own --context-length
    /// is the launch's and is read as such.
    #[arg(long, value_name = "TOKENS", value_parser = parse_tokens, help_heading = OWN)]
    pub plan_context_length: Option<u64>,
    /// Requests the host pool should hold (default: what the GPU holds).
    #[arg(long, value_name = "N", help_heading = OWN)]
    pub target_requests: Option<u64>,
    /// The serving node's host RAM in GiB (SGLang's budget is this minus 10 GiB,
    /// shared by the node's ranks).
    #[arg(long, value_name = "GIB", allow_negative_numbers = true, help_heading = OWN)]
    pub host_memory_gib: Option<f64>,
    /// The GPU (h100, h200, b200, ...): its compute capability picks SGLang's
    /// `auto` kv cache dtype (fp8_e4m3 on SM >= 10, bfloat16 below) and its memory the device slots.
    #[arg(long, value_name = "NAME", help_heading = OWN)]
    pub gpu: Option<String>,
    /// Memory of one GPU in GiB (overrides --gpu's figure).
    #[arg(long, value_name = "GIB", allow_negative_numbers = true, help_heading = OWN)]
    pub gpu_memory_gib: Option<f64>,
    /// GPUs one node holds, for the layout rules (a node's TP x PP ranks),
    /// the RAM check and the plan (default: the --gpu's usual server: 8 on
    /// HGX / DGX A100, H100, H200, B200, B300; 4 on a GB200 / GB300 NVL72
    /// tray; unknown for PCIe and NVL cards).
    #[arg(long, value_name = "N", help_heading = OWN)]
    pub gpus_per_node: Option<u64>,
    /// Model weights per GPU in GiB (default: estimated from config.json).
    #[arg(long, value_name = "GIB", allow_negative_numbers = true, help_heading = OWN)]
    pub weights_gib: Option<f64>,
    /// Draw the sweep to a PNG (the pip-installed hisparse-check only).
    #[arg(long, value_name = "PATH", help_heading = OWN)]
    pub plot: Option<String>,
    /// Plan from SGLang's start-up log (a file, or - for standard input): the
    /// weights and free memory of its "Load weight end" line replace the
    /// estimates, and its scheduler sizes are printed beside the plan's.
    #[arg(long, value_name = "FILE", requires = "plan", help_heading = OWN)]
    pub engine_log: Option<String>,
}

const AFTER_HELP: &str = "\
hisparse-check's own flags are matched by their exact spelling before SGLang's
argparse reads the rest (so --gpu and --json are never read as prefixes of
SGLang's --gpu-id-step or --json-model-override-args).

Exit status: 0 valid, 1 invalid launch (argparse's refusals included), 2 usage
or I/O error.";

/// hisparse-check's own flags: (spelling, takes a value).
const OWN_FLAGS: &[(&str, bool)] = &[
    ("--json", false),
    ("--plan", false),
    ("--engine-log", true),
    ("--plan-context-length", true),
    ("--target-requests", true),
    ("--host-memory-gib", true),
    ("--gpu", true),
    ("--gpu-memory-gib", true),
    ("--gpus-per-node", true),
    ("--weights-gib", true),
    ("--plot", true),
    ("--help", false),
    ("-h", false),
    ("--version", false),
    ("-V", false),
];

/// Take hisparse-check's own flags out of `words`, by exact spelling.
fn split_own(words: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut own, mut rest) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let name = w.split('=').next().unwrap_or(w);
        match OWN_FLAGS.iter().find(|(f, _)| *f == name) {
            Some((_, takes)) => {
                own.push(w.clone());
                if *takes && !w.contains('=') {
                    if let Some(v) = words.get(i + 1) {
                        own.push(v.clone());
                        i += 1;
                    }
                }
            }
            None => rest.push(w.clone()),
        }
        i += 1;
    }
    (own, rest)
}

/// What an SGLang run is: a report, or a plan with the report inside (and
/// the flag that serves its suggested ratio, [`ratio_flag`]).
pub(crate) enum Outcome {
    Report(Box<Report>),
    Plan(Box<Plan>, Option<String>),
}

/// The `--hisparse-config '{...}'` that serves the plan's suggested
/// `host_to_device_ratio` at its context (the launch's other keys kept, as a
/// check prints its fixes); None when the launch has that ratio already or
/// no ratio fits.
pub(crate) fn ratio_flag(args: &SglangArgs, plan: &Plan) -> Option<String> {
    let ratio = plan.at_context.host_to_device_ratio?;
    if plan.sglang.as_ref()?.host_to_device_ratio == ratio {
        return None;
    }
    let ops = [FixOp::Set {
        path: FieldPath::parse("hisparse_config.host_to_device_ratio").ok()?,
        value: ratio.into(),
    }];
    let fixed = apply_fix(args, &ops).ok()?;
    let now = fix_form(&fixed);
    let words = flag_words("hisparse_config", now.get("hisparse_config"));
    let quoted: Vec<String> = words.iter().skip(1).map(|w| quote(w)).collect();
    Some(format!("{} {}", words.first()?, quoted.join(" ")))
}

pub(crate) struct Parsed {
    pub cli: SglangCli,
    pub read: read::Read,
}

/// The command line -> hisparse-check's flags and the launch as SGLang reads it.
pub(crate) fn parse(words: &[String], serve: bool) -> Result<Parsed, Usage> {
    let (own, rest) = split_own(words);
    let cli = SglangCli::try_parse_from(std::iter::once("hisparse-check".to_owned()).chain(own))
        .map_err(Usage::Clap)?;
    if rest.is_empty() {
        return Err(Usage::Message(
            "nothing to check: give the sglang serve flags, e.g. hisparse-check -- sglang serve MODEL_DIR --enable-hisparse --hisparse-config '{...}' (see --engine sglang --help)".to_owned(),
        ));
    }
    let read = read::read(&rest, serve).map_err(Usage::Message)?;
    Ok(Parsed { cli, read })
}

pub(crate) fn options(cli: &SglangCli) -> PlanOptions {
    PlanOptions {
        context_length: cli.plan_context_length,
        target_requests: cli.target_requests,
        host_memory_gib: cli.host_memory_gib,
        gpu_memory_gib: cli.gpu_memory_gib,
        weights_gib: cli.weights_gib,
        gpu: cli.gpu.clone(),
        gpus_per_node: cli.gpus_per_node,
        ..PlanOptions::default()
    }
}

/// Check (or plan) the launch. Err: an option out of range or an unknown GPU.
pub(crate) fn run(parsed: Parsed) -> Result<Outcome, PlanError> {
    let options = options(&parsed.cli);
    let args = parsed.read.args.clone();
    if parsed.cli.plan && parsed.read.errors.is_empty() {
        let planned = match &parsed.cli.engine_log {
            Some(path) => {
                let log = crate::engine_log::read(path, hisparse_core::report::ENGINE_SGLANG)
                    .map_err(PlanError::Option)?;
                core_sglang::engine_log::plan(&args, &options, &log, path)
            }
            None => core_sglang::plan(&args, &options),
        };
        match planned {
            Ok(mut plan) => {
                plan.ignored_flags = parsed.read.ignored.clone();
                let flag = ratio_flag(&args, &plan);
                return Ok(Outcome::Plan(Box::new(plan), flag));
            }
            // An invalid launch has no plan: its report says why.
            Err(PlanError::Option(_)) if !core_sglang::check(&args, &options)?.valid => {}
            Err(e) => return Err(e),
        }
    }
    let mut report = core_sglang::check(&args, &options)?;
    read::finish(&mut report, parsed.read);
    Ok(Outcome::Report(Box::new(report)))
}

/// [`crate::check_sglang_argv`]'s work: the same reading and check as the CLI.
pub(crate) fn check_argv(
    words: &[String],
    serve: bool,
    options: &PlanOptions,
) -> Result<Report, PlanError> {
    let read = read::read(words, serve).map_err(PlanError::Option)?;
    let mut report = core_sglang::check(&read.args, options)?;
    read::finish(&mut report, read);
    Ok(report)
}
