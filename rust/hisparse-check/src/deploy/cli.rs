//! `hisparse-check deploy FILE... [--model-dir CONTAINER_PATH=LOCAL_PATH]... [--json]`.

use super::check;
use super::k8s::{self, ModelDirs};
use super::model::Deployment;
use clap::Parser;
use std::io::Write;

/// Check a whole deployment (P/D pairs, multi-node instances) from its
/// Kubernetes manifests before it is applied: each launch as hisparse-check
/// checks one, on its pod's GPUs and memory limit, then the rules between
/// launches (docs/deploy.md).
#[derive(Parser, Debug)]
#[command(name = "hisparse-check deploy", version, after_help = AFTER_HELP)]
struct DeployCli {
    /// Kubernetes manifests (multi-document YAML, kind: List; rendered, not Helm templates).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<String>,
    /// Where a container's model path is read here: CONTAINER_PATH=LOCAL_PATH
    /// (repeatable; e.g. --model-dir /models=./models).
    #[arg(long, value_name = "CONTAINER_PATH=LOCAL_PATH", value_parser = k8s::ModelDirs::parse_one)]
    model_dir: Vec<(String, String)>,
    /// Print the report as JSON (docs/deploy.md).
    #[arg(long)]
    json: bool,
}

const AFTER_HELP: &str = "\
Exit status: 0 valid, 1 invalid deployment, 2 usage or I/O error (a manifest
that cannot be read, passes a bound, or holds no engine launch).";

/// The deployment of `files`. Err: the usage message.
pub fn read(files: &[String], dirs: &ModelDirs) -> Result<Deployment, String> {
    let mut dep = Deployment::default();
    for f in files {
        k8s::read_file(f, dirs, &mut dep)?;
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
) -> Result<(bool, String), String> {
    let dep = read(files, &ModelDirs(model_dirs.to_vec()))?;
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
    let dep = match read(&cli.files, &ModelDirs(cli.model_dir)) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(stderr, "hisparse-check: error: {e}");
            return crate::output::EXIT_USAGE;
        }
    };
    let report = check::check(dep);
    let text = if cli.json {
        check::to_json(&report)
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
