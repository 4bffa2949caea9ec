//! A launch made from its words, for every reader (the Kubernetes manifests'
//! k8s.rs, the deployment file's and `--launch`'s own.rs): a `sh -c` string
//! split, the engine and role found, model paths mapped by `--model-dir`;
//! and the `--gpu` name of a GPU product label.

use super::model::{Launch, Machine};
use super::{role, shell};
use std::collections::BTreeMap;

/// `--model-dir CONTAINER_PATH=LOCAL_PATH`: where a container's model path is read here.
#[derive(Clone, Debug, Default)]
pub struct ModelDirs(pub Vec<(String, String)>);

impl ModelDirs {
    /// Parse `C=L` (both non-empty). Err: the usage message.
    pub fn parse_one(text: &str) -> Result<(String, String), String> {
        text.split_once('=')
            .and_then(|(c, l)| Self::pair(c, l))
            .ok_or_else(|| {
                format!(
                    "--model-dir {text:?}: give CONTAINER_PATH=LOCAL_PATH (e.g. /models=./models)"
                )
            })
    }

    /// The mapping of `container` to `local` (both non-empty; a trailing
    /// `/` dropped), as `--model-dir` and Python's `model_dirs` give it.
    pub fn pair(container: &str, local: &str) -> Option<(String, String)> {
        (!container.is_empty() && !local.is_empty()).then(|| {
            (
                container.trim_end_matches('/').to_owned(),
                local.trim_end_matches('/').to_owned(),
            )
        })
    }

    /// The mappings of `pairs` (Python's `model_dirs`); Err names the first
    /// empty path, as `--model-dir` refuses it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Self, String> {
        pairs
            .iter()
            .map(|(c, l)| {
                Self::pair(c, l).ok_or_else(|| {
                    format!("model_dirs {{{c:?}: {l:?}}}: give a container path and a local path, both non-empty (e.g. {{\"/models\": \"./models\"}})")
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(ModelDirs)
    }

    /// `word` with a mapped prefix replaced (also after `--flag=`), and the mapping used.
    fn map(&self, word: &str) -> Option<(String, (String, String))> {
        let (head, value) = match word.split_once('=') {
            Some((h, v)) if h.starts_with("--") => (format!("{h}="), v),
            _ => (String::new(), word),
        };
        self.0.iter().find_map(|(c, l)| {
            let rest = value.strip_prefix(c.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            let local = format!("{l}{rest}");
            Some((format!("{head}{local}"), (value.to_owned(), local)))
        })
    }
}

/// Our `--gpu` name for a product label (`NVIDIA-H200` -> `h200`).
pub fn gpu_name(label: &str) -> Option<String> {
    let spaced = label.replace('-', " ");
    hisparse_core::gpu::lookup(&spaced)
        .or_else(|_| hisparse_core::gpu::lookup(label))
        .ok()
        .map(|g| g.name)
}

/// The launch an argv runs (a `sh -c` string split first, its `NAME=value`
/// words added to `env`), model paths mapped by `dirs`; `None` when it runs
/// no engine. Err: a `sh -c` string we cannot read. The Kubernetes reader
/// and the deployment file's (`own.rs`) both make their launches here.
pub fn launch_of(
    mut argv: Vec<String>,
    mut env: BTreeMap<String, String>,
    dirs: &ModelDirs,
) -> Result<Option<Launch>, String> {
    if let Some(i) = shell::script_index(&argv) {
        let cmd = shell::split(&argv[i], &env)?;
        env.extend(cmd.env);
        argv = cmd.argv;
    }
    let argv = role::engine_argv(argv);
    let Some((engine, serve, args)) = role::split_engine(&argv) else {
        return Ok(None);
    };
    let mut mapped = Vec::new();
    let args: Vec<String> = args
        .into_iter()
        .map(|w| match dirs.map(&w) {
            Some((local, pair)) => {
                mapped.push(pair);
                local
            }
            None => w,
        })
        .collect();
    let role = role::role(engine, &args, serve);
    Ok(Some(Launch {
        name: String::new(),
        source: String::new(),
        engine,
        sglang_serve: serve,
        args,
        argv_as_given: argv,
        env,
        role,
        group: String::new(),
        replicas: 1,
        group_size: 1,
        machine: Machine::default(),
        model_mapped: mapped,
        node: None,
        declared_role: None,
    }))
}
