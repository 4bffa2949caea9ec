//! Which engine a command line is for, and the engine's own words: the
//! `--engine` flag (default vllm), or the launch command pasted after the
//! tool's name (`hisparse-check -- sglang serve ...`, `-- python -m
//! sglang.launch_server ...`, `-- vllm serve ...`, with or without the `--`).

/// The engines hisparse-check speaks.
pub const ENGINES: &[&str] = &["vllm", "sglang"];

#[derive(Debug, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
}

/// The command line split by engine.
#[derive(Debug, PartialEq, Eq)]
pub struct Launch {
    pub engine: Engine,
    /// Everything but `--engine X` and the launch command's program words.
    pub args: Vec<String>,
    /// The launch was `sglang serve` (or `--engine sglang`): a first word that
    /// is not a flag is the model (cli/serve.py:62-66), and `--model-type` is
    /// the serve front end's (cli/serve.py:30-59), not `ServerArgs`'.
    pub sglang_serve: bool,
}

/// `python`, `python3`, `python3.11`, `/usr/bin/python3`, `.venv/bin/python`.
fn is_python(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    base.strip_prefix("python")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// `sglang` or a path to it (`.venv/bin/sglang`).
fn is_program(word: &str, name: &str) -> bool {
    word.rsplit('/').next() == Some(name)
}

/// The engine of a launch command at the start of `words`, and how many
/// words the program takes (`sglang serve`: 2; `python -m
/// sglang.launch_server`: 3; `python path/to/sglang/launch_server.py`: 2).
pub(crate) fn program(words: &[String]) -> Option<(Engine, usize, bool)> {
    let w = |i: usize| words.get(i).map(String::as_str);
    match (w(0), w(1), w(2)) {
        (Some(a), Some("serve"), _) if is_program(a, "vllm") => Some((Engine::Vllm, 2, false)),
        (Some(a), Some("serve"), _) if is_program(a, "sglang") => Some((Engine::Sglang, 2, true)),
        (Some(py), Some("-m"), Some("sglang.launch_server")) if is_python(py) => {
            Some((Engine::Sglang, 3, false))
        }
        (Some(py), Some(script), _)
            if is_python(py) && script.ends_with("sglang/launch_server.py") =>
        {
            Some((Engine::Sglang, 2, false))
        }
        _ => None,
    }
}

/// Split `args` (without the program name) by engine. Err: the usage error.
pub fn split(args: &[String]) -> Result<Launch, String> {
    let mut rest: Vec<String> = Vec::with_capacity(args.len());
    let mut flag: Option<Engine> = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        // The launch command, after `--` or not (`--json sglang serve M`).
        if a == "--" || program(&args[i..]).is_some() {
            break;
        }
        let value = if a == "--engine" {
            i += 1;
            Some(
                args.get(i)
                    .cloned()
                    .ok_or("--engine takes a value: vllm or sglang")?,
            )
        } else {
            a.strip_prefix("--engine=").map(str::to_owned)
        };
        match value {
            Some(v) => {
                let engine = match v.as_str() {
                    "vllm" => Engine::Vllm,
                    "sglang" => Engine::Sglang,
                    _ => {
                        return Err(format!(
                            "--engine: {v:?} is not an engine hisparse-check speaks (allowed: {})",
                            ENGINES.join(", ")
                        ))
                    }
                };
                flag = Some(engine);
            }
            None => rest.push(a.clone()),
        }
        i += 1;
    }
    let tail = &args[i..];
    let after = match tail.first().map(String::as_str) {
        Some("--") => &tail[1..],
        _ => tail,
    };
    let (engine, sglang_serve, words) = match program(after) {
        Some((engine, n, serve)) => {
            if let Some(given) = &flag {
                if *given != engine {
                    return Err(format!(
                        "--engine {} does not match the launch command {:?}",
                        if *given == Engine::Vllm {
                            "vllm"
                        } else {
                            "sglang"
                        },
                        after[..n].join(" ")
                    ));
                }
            }
            (engine, serve, &after[n..])
        }
        None => {
            let engine = flag.unwrap_or(Engine::Vllm);
            let serve = engine == Engine::Sglang;
            // `--engine sglang -- ARGS`: the `--` ends hisparse-check's flags;
            // for vLLM it is passed on as given, as before engines.
            (engine, serve, if serve { after } else { tail })
        }
    };
    rest.extend(words.iter().cloned());
    Ok(Launch {
        engine,
        args: rest,
        sglang_serve,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn engine_from_flag_or_command() {
        let l = split(&s(&["--engine", "sglang", "--model", "m"])).unwrap();
        assert_eq!(
            (l.engine, l.args, l.sglang_serve),
            (Engine::Sglang, s(&["--model", "m"]), true)
        );
        let l = split(&s(&[
            "--json",
            "--",
            "python3",
            "-m",
            "sglang.launch_server",
            "--tp",
            "8",
        ]))
        .unwrap();
        assert_eq!(
            (l.engine, l.args, l.sglang_serve),
            (Engine::Sglang, s(&["--json", "--tp", "8"]), false)
        );
        let l = split(&s(&["--", ".venv/bin/sglang", "serve", "m"])).unwrap();
        assert_eq!((l.engine, l.args), (Engine::Sglang, s(&["m"])));
        let l = split(&s(&["sglang", "serve", "m"])).unwrap();
        assert_eq!((l.engine, l.args), (Engine::Sglang, s(&["m"])));
        let l = split(&s(&[
            "/usr/bin/python3.11",
            "sglang/launch_server.py",
            "--model",
            "m",
        ]))
        .unwrap();
        assert_eq!(l.engine, Engine::Sglang);
        let l = split(&s(&["--", "vllm", "serve", "m"])).unwrap();
        assert_eq!((l.engine, l.args), (Engine::Vllm, s(&["m"])));
        let l = split(&s(&["m", "--kv-transfer-config", "{}"])).unwrap();
        assert_eq!(
            (l.engine, l.args),
            (Engine::Vllm, s(&["m", "--kv-transfer-config", "{}"]))
        );
        let l = split(&s(&["--engine=vllm", "m"])).unwrap();
        assert_eq!((l.engine, l.args), (Engine::Vllm, s(&["m"])));
    }

    #[test]
    fn engine_errors() {
        assert!(split(&s(&["--engine", "trt"]))
            .unwrap_err()
            .contains("allowed: vllm, sglang"));
        assert!(split(&s(&["--engine"])).is_err());
        assert!(
            split(&s(&["--engine", "vllm", "--", "sglang", "serve", "m"]))
                .unwrap_err()
                .contains("does not match")
        );
    }
}
