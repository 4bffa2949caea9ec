//! `hisparse-check --plan -- sglang serve ...`: the table says SGLang 0.5.23's
//! figures in SGLang's terms (device slots, D + 64, the host pool sized from
//! N_dev x R, the RAM budget per rank) and none of vLLM's (95 % usable, the
//! start-up minimum, hot groups and tail pages, max_num_seqs).

use std::process::Command;

mod common;
use common::{model, text, BIN};

fn plan_text(extra: &[&str]) -> String {
    let m = model();
    let mut args = vec![
        "--plan",
        "--gpu",
        "h200",
        "--host-memory-gib",
        "2048",
        "--weights-gib",
        "78",
        "--",
        "sglang",
        "serve",
        &m,
        "--tp",
        "8",
        "--enable-hisparse",
        "--disaggregation-mode",
        "decode",
        "--hisparse-config",
        r#"{"device_buffer_size": 4096}"#,
    ];
    args.extend_from_slice(extra);
    let out = Command::new(BIN).args(&args).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_sglang_plan_speaks_sglang() {
    let t = plan_text(&[]);
    for vllm_only in [
        "95 % usable",
        "start-up minimum",
        "hot groups",
        "tail",
        "max_num_seqs",
        "(0 here: no cap)",
        "x 0.85",
    ] {
        assert!(!t.contains(vllm_only), "{vllm_only:?} in\n{t}");
    }
    // Figures worked out in rust/hisparse-core/tests/sglang_plan.rs.
    for line in [
        "  mem_fraction_static 0.929 (not given: SGLang's default round((144384 MiB - 10240 MiB reserved) / 144384 MiB, 3)",
        "  device cell       86,376 B per device KV slot = 61 x 1152 + 61 x 132 x host_to_device_ratio 2",
        "  per request       4,160 device slots = device_buffer_size 4096 + 64",
        "  device KV slots   N_dev = (KV room // 86,376 B) // 64 x 64 = 658,688",
        "  max_running_requests 2058 per attention-DP worker (not given: min(max(min(int(N_dev 658688 / context_len 163840 x 512) = 2058, 4096), 2048), N_dev // 2)",
        "  host tokens       N_host = (int(N_dev 658,688 x R 2) // 64 + 1) x 64 = 1,317,440 (pool_host/base.py:221-229)",
        "  host_pool_gib     86.22 GiB per rank = 1,317,440 tokens x 70,272 B",
        "budget per rank (2,048.00 GiB - 10 GiB) / 8 ranks per host = 254.75 GiB (pool_host/base.py:84-107): fits",
        "  limits            device 158 (N_dev // 4,160), host 8 (N_host // 163,840), max_running_requests 2058",
        // SGLang's budget pins ~96% of the node's RAM: said plainly (246.92 x 8 = 1,975.36).
        "  host_to_device_ratio 10 is the largest the RAM budget per rank allows: it holds 23 of the 90 requests the device holds at that ratio (a 246.92 GiB pool per rank, x 8 ranks per node): that pins 1,975.36 GiB of the node's 2,048.00 GiB RAM (96%), leaving 72.64 GiB for the OS, the transfer engine's memory registration and everything else",
        // P/D decode: the prompt is received into the host pool.
        "  prefill           none here (P/D decode): the prompt's KV arrives into the host pool, only logical ids are allocated (disaggregation/decode.py:2321-2330); admission charges the 4,160 slots above per request (:1418-1430)",
    ] {
        assert!(t.contains(line), "{line:?} not in\n{t}");
    }
    let sweep = t.split("\nsweep").nth(1).unwrap();
    assert!(sweep.contains("ratio  host_pool_gib"), "{sweep}");
    assert!(!sweep.contains(" ? "), "{sweep}");
    assert!(!t.contains("SGLANG.md"), "{t}");
}

#[test]
fn mtp_and_aggregated_prefill_in_the_text() {
    let t = plan_text(&["--speculative-algorithm", "EAGLE"]);
    let line = "  device cell       88,944 B per device KV slot = 61 x 1152 + 61 x 132 x host_to_device_ratio 2 + 1 MTP draft layer x (1152 + 132) x 2 (the draft pool is indexed by the host-expanded ids; pool_configurator.py:260-311)";
    assert!(t.contains(line), "{line:?} not in\n{t}");
    let t = plan_text(&[
        "--disaggregation-mode",
        "null",
        "--disable-radix-cache",
        "--plan-context-length",
        "8192",
    ]);
    let line = "  prefill           a whole prompt sits in device slots while it is prefilled, then is backed up to the host (managers/hisparse_coordinator.py:838-876)";
    assert!(t.contains(line), "{line:?} not in\n{t}");
}

#[test]
fn a_cap_binds_under_sglangs_name() {
    let t = plan_text(&[
        "--max-running-requests",
        "4",
        "--plan-context-length",
        "8192",
    ]);
    assert!(t.contains("4 (max_running_requests)"), "{t}");
}

#[test]
fn the_sglang_plan_names_its_ignored_flags_as_sglang_serve_flags() {
    // Issue 22 item 4: the plan said "ignored (vllm serve flags ...)".
    let t = plan_text(&["--port", "30000"]);
    assert!(
        t.contains("\nignored (sglang serve flags hisparse-check does not read): --port 30000\n"),
        "{t}"
    );
    assert!(!t.contains("vllm serve"), "{t}");
}

#[test]
fn the_suggested_ratio_is_a_flag_to_paste() {
    // Issue 22: the plan's ratio as the --hisparse-config to paste, the launch's keys kept.
    let t = plan_text(&[]);
    let line = "  to serve it       --hisparse-config '{\"device_buffer_size\": 4096, \"host_to_device_ratio\": 10}' (in place of the launch's --hisparse-config; the launch has host_to_device_ratio 2)";
    assert!(t.contains(line), "{line:?} not in\n{t}");
}
