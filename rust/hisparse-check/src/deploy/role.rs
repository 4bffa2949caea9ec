//! Which engine a container's argv runs, and its P/D role: vLLM's from the
//! KV connector's `kv_role` (`kv_producer` prefill, `kv_consumer` decode,
//! `kv_both`), a MultiConnector's from its transfer child (the child that is
//! not HiSparseConnector: NixlConnector); SGLang's from
//! `--disaggregation-mode` (`prefill`, `decode`, `null`).

use super::model::{EngineKind, Role};
use crate::launch::{self, Engine};
use serde_json::Value;

/// `python -m vllm.entrypoints.openai.api_server ARGS` is `vllm serve ARGS`
/// (the API server takes `--model`, as `vllm serve` does).
pub fn engine_argv(argv: Vec<String>) -> Vec<String> {
    let is_py = argv
        .first()
        .and_then(|w| w.rsplit('/').next())
        .is_some_and(|b| b.starts_with("python"));
    if is_py
        && argv.get(1).map(String::as_str) == Some("-m")
        && argv.get(2).map(String::as_str) == Some("vllm.entrypoints.openai.api_server")
    {
        let mut out = vec!["vllm".to_owned(), "serve".to_owned()];
        out.extend(argv.into_iter().skip(3));
        return out;
    }
    argv
}

/// The engine, whether it is `sglang serve` (a leading model word), and the
/// words after the program; `None` when the argv runs no engine.
pub fn split_engine(argv: &[String]) -> Option<(EngineKind, bool, Vec<String>)> {
    launch::program(argv)?;
    let l = launch::split(argv).ok()?;
    let engine = match l.engine {
        Engine::Vllm => EngineKind::Vllm,
        Engine::Sglang => EngineKind::Sglang,
    };
    Some((engine, l.sglang_serve, l.args))
}

/// The value of `--flag V` / `--flag=V` (the last one given, as argparse keeps).
pub fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut found = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == flag {
            found = args.get(i + 1).map(String::as_str);
            i += 1;
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found = Some(v);
        }
        i += 1;
    }
    found
}

fn kv_role_of(role: Option<&str>) -> Role {
    match role {
        Some("kv_producer") => Role::Prefill,
        Some("kv_consumer") => Role::Decode,
        Some("kv_both") => Role::Both,
        _ => Role::Standalone,
    }
}

/// vLLM's transfer connector in a `--kv-transfer-config` value: the
/// top-level one, or a MultiConnector's first child that is not
/// HiSparseConnector. (name, kv_role, JSON path of kv_role).
pub fn transfer_connector(ktc: &Value) -> Option<(String, Option<String>, String)> {
    let name = ktc.get("kv_connector").and_then(Value::as_str)?;
    let role = |v: &Value| v.get("kv_role").and_then(Value::as_str).map(str::to_owned);
    if name == "MultiConnector" {
        let children = ktc
            .pointer("/kv_connector_extra_config/connectors")?
            .as_array()?;
        return children.iter().enumerate().find_map(|(i, c)| {
            let n = c.get("kv_connector").and_then(Value::as_str)?;
            (n != "HiSparseConnector").then(|| {
                (
                    n.to_owned(),
                    role(c),
                    format!("kv_transfer_config.kv_connector_extra_config.connectors[{i}].kv_role"),
                )
            })
        });
    }
    (name != "HiSparseConnector").then(|| {
        (
            name.to_owned(),
            role(ktc),
            "kv_transfer_config.kv_role".to_owned(),
        )
    })
}

/// A launch's role from its words.
pub fn role(engine: EngineKind, args: &[String], _serve: bool) -> Role {
    match engine {
        EngineKind::Vllm => {
            let ktc = flag_value(args, "--kv-transfer-config")
                .and_then(|t| serde_json::from_str::<Value>(t).ok());
            let dotted = flag_value(args, "--kv-transfer-config.kv_role");
            match ktc.as_ref().and_then(transfer_connector) {
                Some((_, r, _)) => kv_role_of(r.as_deref()),
                None => kv_role_of(dotted),
            }
        }
        EngineKind::Sglang => match flag_value(args, "--disaggregation-mode") {
            Some("prefill") => Role::Prefill,
            Some("decode") => Role::Decode,
            _ => Role::Standalone,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn roles() {
        let multi = r#"{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"HiSparseConnector","kv_role":"kv_both"},{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}]}}"#;
        assert_eq!(
            role(
                EngineKind::Vllm,
                &v(&["m", "--kv-transfer-config", multi]),
                false
            ),
            Role::Decode
        );
        let p = r#"--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_producer"}"#;
        assert_eq!(role(EngineKind::Vllm, &v(&["m", p]), false), Role::Prefill);
        assert_eq!(role(EngineKind::Vllm, &v(&["m"]), false), Role::Standalone);
        assert_eq!(
            role(
                EngineKind::Sglang,
                &v(&["--disaggregation-mode", "decode"]),
                true
            ),
            Role::Decode
        );
        let a = engine_argv(v(&[
            "python3",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
        ]));
        assert_eq!(
            split_engine(&a),
            Some((EngineKind::Vllm, false, v(&["--model", "m"])))
        );
        assert_eq!(split_engine(&v(&["envoy", "-c", "x"])), None);
    }
}
