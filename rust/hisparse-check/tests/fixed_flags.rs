//! "With every fix applied, change these vllm serve flags: ...": the flags
//! `hisparse-check` prints (and `--json` carries as `fixed_flags`), pasted in
//! place of the user's flags, pass the check (trial finding 2: only the
//! plugin printed them).

use std::process::Command;

mod common;
use common::{model, BIN};

const LEAD: &str = "With every fix applied, change these vllm serve flags:";

/// POSIX-shell single quoting, for the user's flags in the command line.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// Run `hisparse-check MODEL` with `flags` (flag, value) through `sh -c`,
/// with `pasted` (shell text) after them.
fn check(flags: &[(&str, Option<&str>)], pasted: &str) -> (i32, String) {
    let mut line = format!("{} {}", quote(BIN), quote(&model()));
    for (flag, value) in flags {
        line.push(' ');
        line.push_str(flag);
        if let Some(v) = value {
            line.push(' ');
            line.push_str(&quote(v));
        }
    }
    line.push(' ');
    line.push_str(pasted);
    let out = Command::new("sh").args(["-c", &line]).output().expect("sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout)
}

/// The printed flags of `flags`' report, pasted in place of the flags they
/// name: the check passes, with no warning that a flag was given twice.
fn pasting_the_printed_flags_passes(flags: &[(&str, Option<&str>)]) {
    let (code, text) = check(flags, "");
    assert_eq!(code, 1, "{text}");
    let printed = text
        .lines()
        .skip_while(|l| *l != LEAD)
        .nth(1)
        .unwrap_or_else(|| panic!("no fixed flags in:\n{text}"))
        .trim()
        .to_owned();
    let (_, json) = check(flags, "--json");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["fixed_flags"], printed.as_str());
    // The flags the printed ones name are replaced by them (`--no-x` by `--x`).
    assert!(
        !printed.contains("(remove"),
        "no removal in these cases: {printed}"
    );
    let named = |flag: &str| {
        let flag = flag.replacen("--no-", "--", 1);
        printed.split_whitespace().any(|w| w == flag)
    };
    let kept: Vec<_> = flags.iter().filter(|(f, _)| !named(f)).copied().collect();
    assert!(kept.len() < flags.len(), "{printed}");
    let pasted = printed;
    let (code, text) = check(&kept, &pasted);
    assert_eq!(code, 0, "pasted {pasted}:\n{text}");
    assert!(!text.contains("flag_replaced"), "{text}");
}

const PD: &str = r#"{"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}]}}"#;

#[test]
fn the_printed_flags_pasted_in_place_pass() {
    // The trial's launch command, with the pool misplaced into
    // attention_config (a move across flags) and a block size to fix.
    pasting_the_printed_flags_passes(&[
        ("-tp", Some("8")),
        ("--kv-cache-dtype", Some("fp8_ds_mla")),
        (
            "--speculative-config",
            Some(r#"{"method":"mtp","num_speculative_tokens":1}"#),
        ),
        ("--kv-transfer-config", Some(PD)),
        (
            "--attention-config",
            Some(r#"{"hisparse_config": {"host_pool_gib": 256}}"#),
        ),
        ("--block-size", Some("16")),
        ("--trust-remote-code", None),
        ("--port", Some("8200")),
        ("--max-model-len", Some("128k")),
        ("--gpu-memory-utilization", Some("0.9")),
        ("--max-num-seqs", Some("64")),
    ]);
    // A flag switched off that HiSparse needs on; the misspelled key of finding 1.
    pasting_the_printed_flags_passes(&[
        ("-tp", Some("8")),
        ("--no-scheduler-reserve-full-isl", None),
        (
            "--kv-transfer-config",
            Some(
                r#"{"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, {"kv_conector": "HiSparseConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 256}}]}}"#,
            ),
        ),
    ]);
}

#[test]
fn a_valid_configuration_prints_no_flags() {
    let (code, text) = check(
        &[
            ("-tp", Some("8")),
            (
                "--kv-transfer-config",
                Some(&PD.replace(
                    r#""kv_role": "kv_both"}"#,
                    r#""kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 64}}"#,
                )),
            ),
        ],
        "",
    );
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains(LEAD), "{text}");
}

/// Trial 2: an environment fix (`unset VLLM_USE_V2_MODEL_RUNNER`) was printed
/// inside the flags line, which then failed when pasted after the command.
/// The environment comes on its own line (and as `fixed_env` in `--json`):
/// run before the command, with the flags pasted in place, the check passes.
#[test]
fn the_environment_comes_apart_from_the_flags() {
    const ENV_LEAD: &str = "With every fix applied, change the environment (before vllm serve):";
    let flags = [
        ("-tp", Some("8")),
        ("--block-size", Some("16")),
        ("--kv-transfer-config", Some(PD)),
    ];
    let mut line = format!(
        "VLLM_USE_V2_MODEL_RUNNER=0; export VLLM_USE_V2_MODEL_RUNNER; {} {}",
        quote(BIN),
        quote(&model())
    );
    for (flag, value) in &flags {
        line.push_str(&format!(" {flag} {}", quote(value.unwrap())));
    }
    let run = |line: &str| {
        let out = Command::new("sh").args(["-c", line]).output().expect("sh");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run(&line);
    assert_eq!(code, 1, "{text}");
    let after = |lead: &str| {
        text.lines()
            .skip_while(|l| *l != lead)
            .nth(1)
            .unwrap_or_else(|| panic!("no {lead:?} in:\n{text}"))
            .trim()
            .to_owned()
    };
    let (printed, env) = (after(LEAD), after(ENV_LEAD));
    assert_eq!(env, "unset VLLM_USE_V2_MODEL_RUNNER");
    assert!(!printed.contains("VLLM_"), "{printed}");
    let (_, json) = run(&format!("{line} --json"));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["fixed_env"], env.as_str());
    assert_eq!(report["fixed_flags"], printed.as_str());
    // The printed flags replace --block-size and --kv-transfer-config.
    let fixed = format!(
        "VLLM_USE_V2_MODEL_RUNNER=0; export VLLM_USE_V2_MODEL_RUNNER; {env}; {} {} -tp 8 {printed}",
        quote(BIN),
        quote(&model())
    );
    let (code, text) = run(&fixed);
    assert_eq!(code, 0, "{fixed}:\n{text}");
}
