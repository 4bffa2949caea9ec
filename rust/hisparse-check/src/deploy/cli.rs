//! `hisparse-check deploy [FILE...] [--launch 'vllm serve ...' [--role R] [--node N]]...
//! [--gpu G --gpus-per-node N --host-memory-gib GIB] [--model-dir CONTAINER_PATH=LOCAL_PATH]...
//! [--plan] [--json]`.

use super::check;
use super::k8s::{self, ModelDirs};
use super::model::Deployment;
use super::own::{self, LaunchArg, MachineArg};
use clap::Parser;
use std::io::Write;

/// Check a whole deployment (P/D pairs, multi-node instances) from its
/// Kubernetes manifests, a deployment file (kind: HisparseDeployment) or
/// launches given with --launch, before it is deployed: each launch as
/// hisparse-check checks one, on its machine, then the rules between
/// launches (docs/deploy.md).
#[derive(Parser, Debug)]
#[command(name = "hisparse-check deploy", version, after_help = AFTER_HELP)]
struct DeployCli {
    /// Kubernetes manifests (multi-document YAML, kind: List; rendered, not
    /// Helm templates) or deployment files (kind: HisparseDeployment, YAML or JSON).
    #[arg(value_name = "FILE")]
    files: Vec<String>,
    /// Where a container's model path is read here: CONTAINER_PATH=LOCAL_PATH
    /// (repeatable; e.g. --model-dir /models=./models).
    #[arg(long, value_name = "CONTAINER_PATH=LOCAL_PATH", value_parser = k8s::ModelDirs::parse_one)]
    model_dir: Vec<(String, String)>,
    /// A launch's command line ('vllm serve MODEL ...' or 'sglang serve MODEL ...'),
    /// repeatable; --role and --node after it are its own.
    #[arg(long, value_name = "COMMAND")]
    launch: Vec<String>,
    /// The role the --launch before it is declared (prefill, decode, both, standalone):
    /// checked against the role its command gives.
    #[arg(long, value_name = "ROLE")]
    role: Vec<String>,
    /// The node the --launch before it runs on: launches on one node share its GPUs and RAM.
    #[arg(long, value_name = "NAME")]
    node: Vec<String>,
    /// The GPU of every --launch node (a --gpu name: h200).
    #[arg(long, value_name = "NAME")]
    gpu: Option<String>,
    /// GPUs per --launch node.
    #[arg(long, value_name = "N")]
    gpus_per_node: Option<u64>,
    /// Host RAM of every --launch node, GiB.
    #[arg(long, value_name = "GIB")]
    host_memory_gib: Option<f64>,
    /// Print the deployment's plan: per decode instance the requests served
    /// with and without HiSparse, per node the pinned RAM (the JSON always has it).
    #[arg(long)]
    plan: bool,
    /// Print the report as JSON (docs/deploy.md).
    #[arg(long)]
    json: bool,
}

/// `--launch`, `--role` and `--node` in the order given: each --role /
/// --node is the --launch's before it. Err: a --role or --node before any
/// --launch, or given twice for one.
fn launches(args: &[String]) -> Result<Vec<LaunchArg>, String> {
    let mut out: Vec<LaunchArg> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            break;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        if matches!(flag, "--launch" | "--role" | "--node") {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    match args.get(i) {
                        Some(v) => v.clone(),
                        // clap says a value is missing.
                        None => break,
                    }
                }
            };
            if flag == "--launch" {
                out.push(LaunchArg {
                    command: value,
                    ..LaunchArg::default()
                });
            } else {
                let n = out.len();
                let Some(last) = out.last_mut() else {
                    return Err(format!("{flag} {value:?} is given before any --launch: it names the role or node of the --launch before it (--launch 'vllm serve ...' {flag} {value})"));
                };
                let slot = if flag == "--role" {
                    &mut last.role
                } else {
                    &mut last.node
                };
                if slot.is_some() {
                    return Err(format!(
                        "{flag} is given twice for --launch {n}: give it once after each --launch"
                    ));
                }
                *slot = Some(value);
            }
        }
        i += 1;
    }
    Ok(out)
}

const AFTER_HELP: &str = "\
Exit status: 0 valid, 1 invalid deployment, 2 usage or I/O error (a manifest
that cannot be read, passes a bound, or holds no engine launch; a bad field
of a deployment file or --launch).";

/// The deployment of `files` and `launches`. Err: the usage message.
pub fn read(
    files: &[String],
    launches: &[LaunchArg],
    machine: &MachineArg,
    dirs: &ModelDirs,
) -> Result<Deployment, String> {
    let mut dep = Deployment::default();
    if files.is_empty() && launches.is_empty() {
        return Err("nothing to check: give manifests or deployment files (FILE...), or launches (--launch 'vllm serve MODEL ...')".to_owned());
    }
    if launches.is_empty()
        && (machine.gpu.is_some() || machine.gpus_per_node.is_some() || machine.ram_gib.is_some())
    {
        return Err("--gpu, --gpus-per-node and --host-memory-gib are the machine of the --launch launches, and none is given (a manifest's machine is its pods'; a deployment file's, its nodes')".to_owned());
    }
    for f in files {
        k8s::read_file(f, dirs, &mut dep)?;
    }
    own::read_launches(launches, machine, dirs, &mut dep)?;
    if dep.launches.len() > super::model::MAX_LAUNCHES {
        return Err(format!("the files and --launch hold more than {} engine launches together (the bound on launches)", super::model::MAX_LAUNCHES));
    }
    // Names are Kind/name/container; where two files share one, the source tells them apart.
    let names: Vec<String> = dep.launches.iter().map(|l| l.name.clone()).collect();
    for l in &mut dep.launches {
        if names.iter().filter(|n| **n == l.name).count() > 1 {
            l.name = format!("{}:{}", l.source, l.name);
        }
    }
    if dep.launches.is_empty() {
        let seen: Vec<String> = dep
            .not_read
            .iter()
            .map(|n| format!("{} ({})", n.at, n.why))
            .collect();
        return Err(format!(
            "no vllm serve / sglang serve launch in {}{}",
            files.join(", "),
            if seen.is_empty() {
                String::new()
            } else {
                format!("; not read: {}", seen.join("; "))
            }
        ));
    }
    Ok(dep)
}

/// The deployment report as JSON, for the Python binding. Err: the usage message.
pub fn check_json(
    files: &[String],
    model_dirs: &[(String, String)],
    launches: &[LaunchArg],
    machine: &MachineArg,
) -> Result<(bool, String), String> {
    let dep = read(
        files,
        launches,
        machine,
        &ModelDirs::from_pairs(model_dirs)?,
    )?;
    let report = check::check(dep);
    Ok((report.valid(), check::to_json(&report)))
}

/// `hisparse-check deploy ARGS`; the exit code.
pub fn run(args: &[String], stdout: &mut impl Write, stderr: &mut impl Write) -> i32 {
    let cli = match DeployCli::try_parse_from(
        std::iter::once("hisparse-check deploy".to_owned()).chain(args.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            let text = e.render().to_string();
            let _ = write!(
                stderr,
                "hisparse-check: error: {}",
                text.strip_prefix("error: ").unwrap_or(&text)
            );
            return crate::output::EXIT_USAGE;
        }
        Err(e) => {
            let _ = write!(stdout, "{}", e.render());
            return crate::output::EXIT_VALID;
        }
    };
    let machine = MachineArg {
        gpu: cli.gpu.clone(),
        gpus_per_node: cli.gpus_per_node,
        ram_gib: cli.host_memory_gib,
    };
    let dep = match launches(args)
        .and_then(|l| read(&cli.files, &l, &machine, &ModelDirs(cli.model_dir)))
    {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(stderr, "hisparse-check: error: {e}");
            return crate::output::EXIT_USAGE;
        }
    };
    let report = check::check(dep);
    let text = if cli.json {
        check::to_json(&report)
    } else if cli.plan {
        check::human_with_plan(&report)
    } else {
        check::human(&report)
    };
    let verdict = if !report.launch_errors.is_empty() {
        crate::output::EXIT_USAGE
    } else if report.valid() {
        crate::output::EXIT_VALID
    } else {
        crate::output::EXIT_INVALID
    };
    if let Err(e) = crate::output::print(stdout, &text) {
        return crate::output::write_failed(stderr, &e, verdict).0;
    }
    verdict
}
