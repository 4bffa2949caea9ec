"""hisparse-check as a user runs it: the pip console script (same Rust entry point
as the cargo binary). Exit codes 0/1/2, the three flag forms, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hisparse_rs
from conftest import HANG_S, MODELS, ROOT

EXE = shutil.which("hisparse-check") or str(Path(sys.executable).parent / "hisparse-check")
DSV32 = str(MODELS / "deepseek-v3.2")
PD = {
    "kv_connector": "MultiConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {
        "connectors": [
            {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
            {
                "kv_connector": "HiSparseConnector",
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"host_pool_gib": 128},
            },
        ]
    },
}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}
    full_env.update(env or {})
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, cwd=ROOT, env=full_env, timeout=HANG_S
    )


def as_json(*args: str) -> dict[str, Any]:
    proc = run(*args, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_readme_main_command_bundled_example() -> None:
    proc = subprocess.run(
        ["bash", "examples/dsv32-decode-pd.sh"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HISPARSE_CHECK": EXE},
        timeout=HANG_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "inferred from the HiSparseConnector at kv_transfer_config.kv_connector_extra_config.connectors[1]"
        in proc.stdout
    )
    assert "device_buffer_size     4096 rows" in proc.stdout
    assert "result: valid" in proc.stdout


@pytest.mark.parametrize("prefix", [["vllm", "serve"], ["--", "vllm", "serve"]])
def test_a_pasted_vllm_serve_launch_is_read_as_its_flags(prefix: list[str]) -> None:
    """`hisparse-check vllm serve MODEL ...`: the launch pasted whole reads as
    the same flags (a new user's first try; it was "unexpected argument 'serve'")."""
    flags = [DSV32, "-tp", "8", "--kv-transfer-config", json.dumps(PD)]
    assert as_json(*prefix, *flags) == as_json(*flags)


def test_json_schema_is_stable() -> None:
    out = as_json(DSV32, "--kv-transfer-config", json.dumps(PD))
    assert set(out) == {
        "schema_version",
        "engine",
        "engine_version",
        "vllm_version",
        "valid",
        "hisparse_enabled",
        "model",
        "hisparse",
        "errors",
        "warnings",
    }
    assert out["schema_version"] == 2 and out["vllm_version"] == "0.33.0"
    hs = out["hisparse"]
    assert hs["device_buffer_size"] == {
        "value": 4096,
        "source": "derived",
        "from": ["max_decode_query_len", "index_topk"],
        "rule": hs["device_buffer_size"]["rule"],
    }
    assert hs["enabled"]["source"] == "inferred"
    assert hs["enabled"]["connector"] == "kv_transfer_config.kv_connector_extra_config.connectors[1]"


def test_json_dotted_and_yaml_forms_agree(tmp_path: Path) -> None:
    json_form = as_json("--model", DSV32, "--kv-transfer-config", json.dumps(PD), "-tp", "8")
    hs_child = "--kv-transfer-config.kv_connector_extra_config.connectors"
    dotted = as_json(
        "--model",
        DSV32,
        "--kv-transfer-config.kv_connector",
        "MultiConnector",
        "--kv-transfer-config.kv_role",
        "kv_consumer",
        hs_child,
        json.dumps(PD["kv_connector_extra_config"]["connectors"]),  # type: ignore[index]
        "-tp",
        "8",
    )
    yaml_file = tmp_path / "serve.yaml"
    yaml_file.write_text(
        f"model: {DSV32}\n"
        "tensor-parallel-size: 8\n"
        "kv-transfer-config:\n"
        "  kv_connector: MultiConnector\n"
        "  kv_role: kv_consumer\n"
        "  kv_connector_extra_config:\n"
        "    connectors:\n"
        "      - {kv_connector: NixlConnector, kv_role: kv_consumer}\n"
        "      - kv_connector: HiSparseConnector\n"
        "        kv_role: kv_both\n"
        "        kv_connector_extra_config: {host_pool_gib: 128}\n"
    )
    yaml_form = as_json("--config", str(yaml_file))
    assert json_form["valid"] and dotted["valid"] and yaml_form["valid"]
    assert json_form["hisparse"] == dotted["hisparse"] == yaml_form["hisparse"]


def test_flags_after_config_file_win(tmp_path: Path) -> None:
    yaml_file = tmp_path / "serve.yaml"
    yaml_file.write_text(f"model: {DSV32}\nkv-transfer-config: {json.dumps(PD)}\nblock-size: 16\n")
    assert as_json("--config", str(yaml_file))["valid"] is False
    assert (
        as_json("--config", str(yaml_file), "--block-size", "128")["hisparse"]["block_size"]["value"] == 128
    )


def test_bundled_yaml_example() -> None:
    out = as_json("--config", "examples/dsv32-decode-pd.yaml")
    assert out["valid"] and out["hisparse"]["kv_cache_dtype"]["value"] == "fp8_ds_mla"


def test_human_output_lists_every_error_with_its_fix() -> None:
    proc = run(
        DSV32,
        "--kv-transfer-config",
        '{"kv_connector": "HiSparseConnector", "kv_extra_config": {"host_pool_gib": 96}}',
        "--block-size",
        "16",
        "--pipeline-parallel-size",
        "2",
    )
    assert proc.returncode == 1
    for code in ("missing_kv_role", "unknown_key", "block_size_unsupported", "pipeline_parallel_unsupported"):
        assert f"error[{code}]" in proc.stdout
    assert 'did you mean "kv_connector_extra_config"' in proc.stdout
    assert '"kv_producer", "kv_consumer", "kv_both"' in proc.stdout
    assert "result: INVALID (4 errors" in proc.stdout


def test_environment_variable_is_read() -> None:
    out = run(DSV32, "--kv-transfer-config", json.dumps(PD), "--json", env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert out.returncode == 1
    assert [e["code"] for e in json.loads(out.stdout)["errors"]] == ["model_runner_v2_disabled"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kv-transfer-confg", "{}"], "did you mean --kv-transfer-config?"),
        (["--model"], "value is required"),
        (["--model", "no/such/model"], "model config not found"),
        (["--config", "missing.yaml"], "cannot read --config"),
        (["--config", "serve.json"], "must be .yaml or .yml"),
        (["--max-model-len", "1.5K"], "is not a token count"),
        (["--config=examples/dsv32-decode-pd.yaml"], "vllm serve ignores --config=FILE"),
        (["--platform", "tpu"], "invalid value"),
    ],
)
def test_usage_and_io_errors_exit_2(args: list[str], needle: str) -> None:
    proc = run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert "panicked" not in proc.stderr and "Traceback" not in proc.stderr


def test_invalid_json_flag_is_a_configuration_error() -> None:
    proc = run(DSV32, "--kv-transfer-config", "{kv_connector: HiSparseConnector}", "--json")
    assert proc.returncode == 1
    errors = json.loads(proc.stdout)["errors"]
    assert [(e["code"], e["path"]) for e in errors] == [("invalid_json", "kv_transfer_config")]


def test_invalid_json_flag_keeps_the_model_in_the_header() -> None:
    # Trial finding 6: the header said "no model" and "HiSparse: not configured".
    proc = run(DSV32, "--kv-transfer-config", "{bad")
    assert proc.returncode == 1
    head = proc.stdout.splitlines()[:3]
    assert "DeepseekV32ForCausalLM" in head[0] and "no model" not in head[0], head
    unknown = "HiSparse: unknown: --kv-transfer-config could not be read (not valid JSON, see the errors)"
    assert head[2] == unknown
    report = as_json(DSV32, "--kv-transfer-config", "{bad")
    assert report["model"]["architecture"] == "DeepseekV32ForCausalLM"


def test_hf_config_path_is_read_as_vllm_reads_it() -> None:
    # Trial finding 7: it was listed as ignored, so another config was checked than vLLM's.
    llama = str(MODELS / "llama-3.1-8b")
    report = as_json(llama, "--hf-config-path", DSV32, "-tp", "8", "--kv-transfer-config", json.dumps(PD))
    assert report["valid"] and report["model"]["architecture"] == "DeepseekV32ForCausalLM"
    assert "--hf-config-path" not in report.get("ignored_flags", [])
    python = hisparse_rs.check(llama, hf_config_path=DSV32, tensor_parallel_size=8, kv_transfer_config=PD)
    assert python.valid and python.model is not None and python.model.architecture == "DeepseekV32ForCausalLM"


MULTI_OPEN = (
    '{"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": '
)


@pytest.mark.parametrize(
    "hostile",
    [
        "[" * 5000 + "]" * 5000,
        MULTI_OPEN + ("[" + MULTI_OPEN) * 100 + "[]" + "}}]" * 100 + "}}",
        '{"kv_connector": 1e999}',
        '"\\ud800"',
        "null",
    ],
)
def test_hostile_input_never_panics(hostile: str) -> None:
    proc = run(DSV32, "--kv-transfer-config", hostile, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    assert "panicked" not in proc.stderr
    json.loads(proc.stdout)


def test_help_and_version_exit_0() -> None:
    assert run("--help").returncode == 0
    assert "0.1.0" in run("--version").stdout


def test_broken_pipe_is_quiet() -> None:
    proc = subprocess.run(
        f"'{EXE}' '{DSV32}' --kv-transfer-config '{json.dumps(PD)}' | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_S,
    )
    assert "panicked" not in proc.stderr


def test_a_real_launch_command_checks_as_it_is() -> None:
    proc = run(
        DSV32,
        "--port", "8000",
        "--trust-remote-code",
        "--served-model-name", "dsv32",
        "--gpu-memory-utilization", "0.9",
        "-tp", "8",
        "--kv-transfer-config", json.dumps(PD),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # --gpu-memory-utilization is read (the planner uses it), so it is not listed.
    assert (
        "ignored (vllm serve flags hisparse-check does not read): --port 8000 --trust-remote-code "
        "--served-model-name dsv32\n"
    ) in proc.stdout


def test_positional_model_wins_like_vllm_serve() -> None:
    out = as_json(str(MODELS / "glm-5"), "--model", DSV32, "--kv-transfer-config", json.dumps(PD))
    assert out["model"]["architecture"] == "GlmMoeDsaForCausalLM"


def test_repeated_json_flag_warns() -> None:
    out = as_json(DSV32, "--kv-transfer-config", json.dumps(PD), "--kv-transfer-config.kv_role", "kv_both")
    assert [w["code"] for w in out["warnings"]] == ["flag_replaced"]
    assert out["hisparse_enabled"] is False  # the dotted flag replaced the whole JSON, as in vLLM


def test_yaml_11_booleans_are_booleans(tmp_path: Path) -> None:
    yaml_file = tmp_path / "serve.yaml"
    yaml_file.write_text(
        f"model: {DSV32}\nkv-transfer-config: {json.dumps(PD)}\nscheduler-reserve-full-isl: off\n"
    )
    out = as_json("--config", str(yaml_file))
    assert [e["code"] for e in out["errors"]] == ["scheduler_reserve_full_isl_disabled"]


def test_bare_run_is_a_usage_error() -> None:
    proc = run()
    assert proc.returncode == 2 and "nothing to check" in proc.stderr


def test_non_utf8_argument_never_tracebacks() -> None:
    proc = subprocess.run(
        [EXE, os.fsdecode(b"tests/data/models/\xff")], capture_output=True, cwd=ROOT, timeout=HANG_S
    )
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr and b"panicked" not in proc.stderr


# ---------------------------------------------------------------------------
# --plan (the capacity planner) and --plot (the console script draws it).

PLAN_ARGS = ["--config", "examples/dsv32-decode-pd.yaml", "--plan", "--host-memory-gib", "2048"]


def test_plan_on_the_bundled_example() -> None:
    proc = run(*PLAN_ARGS, "--gpu-memory-gib", "140")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "656 B/token/layer (fp8_ds_mla) x 61 sparse-MLA layers = 40,016 B/token" in out
    assert "host pool: shared mode" in out
    assert "(estimated)" in out
    assert "sweep (requests per DP replica" in out
    assert "result: plan fits" in out


def test_plan_json_and_flags() -> None:
    proc = run(*PLAN_ARGS, "--kv-cache-memory-bytes", "40G", "--context-length", "64K", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["schema_version"] == 2 and plan["valid"]
    assert plan["gpu"]["kv_bytes_per_gpu"] == 40 * 2**30
    assert plan["context_length"] == 65536 == plan["at_context"]["context_length"]
    assert [p["context_length"] for p in plan["sweep"]] == [8192, 16384, 32768, 65536, 131072, 163840]
    assert plan["at_context"]["hisparse_limit"] in {"gpu", "host", "max_num_seqs", "baseline"}


def test_plan_exit_codes() -> None:
    # Pools that do not fit in host RAM: an invalid plan (1) with the error and its fix.
    proc = run(*PLAN_ARGS[:-1], "64")
    assert proc.returncode == 1
    assert (
        "error[host_memory_exceeded] kv_transfer_config.kv_connector_extra_config.connectors[1]"
        in proc.stdout
    )
    # A model that cannot use HiSparse has nothing to plan, and options out of range: usage errors (2).
    not_dsa = run(str(MODELS / "llama-3.1-8b"), "--plan", "--host-memory-gib", "64")
    assert not_dsa.returncode == 2 and "model_not_dsa" in not_dsa.stderr
    too_long = run(*PLAN_ARGS, "--context-length", "1M")
    assert too_long.returncode == 2 and "longer than max_model_len" in too_long.stderr
    assert "Traceback" not in not_dsa.stderr + too_long.stderr


def test_plot_from_the_console_script(tmp_path: Path) -> None:
    out = tmp_path / "plan.png"
    proc = run(*PLAN_ARGS, "--gpu-memory-gib", "140", "--json", "--plot", str(out))
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # the plot note goes to stderr, so stdout stays JSON
    assert f"plot written to {out}" in proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --plot implies --plan; without GPU figures there is nothing to draw.
    bare = run("--config", "examples/dsv32-decode-pd.yaml", "--host-memory-gib", "2048", "--plot", str(out))
    assert bare.returncode == 2 and "--gpu-memory-gib" in bare.stderr


def test_context_parallel_and_node_flags_are_checked() -> None:
    # -pcp and -n are vLLM's short forms; DCP 2 with a NixlConnector must be 1 or max(TP, PCP).
    nixl = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    out = as_json(DSV32, "-tp", "4", "-pcp", "2", "-dcp", "2", "-n", "2", "--kv-transfer-config", nixl)
    assert {(e["code"], e["path"]) for e in out["errors"]} == {
        ("decode_context_parallel_invalid", "decode_context_parallel_size")
    }
    [err] = out["errors"]
    assert "max(tensor_parallel_size, prefill_context_parallel_size) = 4" in err["message"]
    assert as_json(DSV32, "-tp", "4", "-dcp", "4", "-n", "2", "--kv-transfer-config", nixl)["valid"]


# ---------------------------------------------------------------------------
# First contact (issue 10 items 7-11) and --gpu (issue 9 item 5).

HS_NO_POOL = {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}


def test_clap_errors_carry_the_tool_prefix() -> None:
    proc = run(DSV32, "-tp", "abc")
    assert proc.returncode == 2
    assert proc.stderr.startswith("hisparse-check: error: invalid value 'abc'"), proc.stderr


def test_a_yaml_key_typo_names_the_file_and_line(tmp_path: Path) -> None:
    yaml_file = tmp_path / "serve.yaml"
    yaml_file.write_text(f"model: {DSV32}\n# P/D decode\nkv-transfer-confg: {json.dumps(PD)}\n")
    proc = run("--config", str(yaml_file))
    assert proc.returncode == 2
    assert f"--kv-transfer-confg in {yaml_file} line 3" in proc.stderr, proc.stderr
    assert "did you mean --kv-transfer-config?" in proc.stderr


def test_model_ids_are_read_from_the_hugging_face_cache(tmp_path: Path, hf_hub: Callable[..., str]) -> None:
    repo = "deepseek-ai/DeepSeek-V3.2"
    commit = hf_hub(repo)
    for env in ({"HF_HUB_CACHE": str(tmp_path / "hub")}, {"HF_HOME": str(tmp_path)}):
        proc = run(repo, "--kv-transfer-config", json.dumps(PD), "--json", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        source = json.loads(proc.stdout)["model"]["source"]
        assert source.endswith(f"models--deepseek-ai--DeepSeek-V3.2/snapshots/{commit}/config.json")
    # A revision is a ref or a commit; one that is not cached says where it looked.
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    assert run(repo, "--revision", commit, "--kv-transfer-config", json.dumps(PD), env=env).returncode == 0
    missing = run(repo, "--revision", "v2", env=env)
    assert missing.returncode == 2
    assert "refs/v2: none" in missing.stderr and "--revision v2" in missing.stderr
    absent = run("zai-org/GLM-5", env=env)
    assert absent.returncode == 2
    assert "models--zai-org--GLM-5: no such directory (cache from HF_HUB_CACHE)" in absent.stderr
    assert "hf download zai-org/GLM-5 config.json" in absent.stderr
    assert "huggingface-cli" not in absent.stderr
    assert "Traceback" not in missing.stderr + absent.stderr


def test_misplaced_host_pool_is_moved_not_replaced_by_the_minimum() -> None:
    kv = {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {
            "host_pool_gib": 256,
            "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, HS_NO_POOL],
        },
    }
    (err,) = as_json(DSV32, "--kv-transfer-config", json.dumps(kv))["errors"]
    assert err["code"] == "host_pool_gib_misplaced"
    top = "kv_transfer_config.kv_connector_extra_config"
    assert err["fix"] == [
        {
            "op": "move",
            "from": f"{top}.host_pool_gib",
            "to": f"{top}.connectors[1].kv_connector_extra_config.host_pool_gib",
        }
    ]


def test_the_suggested_pool_says_what_it_holds() -> None:
    args = [
        DSV32,
        "--kv-transfer-config",
        json.dumps(HS_NO_POOL),
        "-tp",
        "8",
        "--kv-cache-dtype",
        "fp8_ds_mla",
    ]
    (bare,) = as_json(*args)["errors"]
    assert bare["fix"][0]["value"] == 6.12
    assert "start-up minimum: it holds one 163840-token request" in bare["hint"] and "--plan" in bare["hint"]
    # With the GPU known: the pool that lets the GPUs bind, and how many requests it holds.
    (gpu,) = as_json(*args, "--gpu", "h200", "--host-memory-gib", "2048")["errors"]
    assert gpu["fix"][0]["value"] > 100
    assert "requests of 163840 tokens per DP replica, what the GPUs hold" in gpu["hint"]
    fixed = {**HS_NO_POOL, "kv_connector_extra_config": {"host_pool_gib": gpu["fix"][0]["value"]}}
    plan = json.loads(run(*args[:2], json.dumps(fixed), *args[3:], "--plan", "--gpu", "h200",
                          "--host-memory-gib", "2048", "--json").stdout)  # fmt: skip
    assert plan["at_context"]["hisparse_limit"] == "gpu"


def test_the_plain_check_checks_the_given_host_ram() -> None:
    args = ["--config", "examples/dsv32-decode-pd.yaml", "-dp", "8"]
    assert run(*args).returncode == 0
    proc = run(*args, "--host-memory-gib", "512", "--json")
    assert proc.returncode == 1
    (err,) = json.loads(proc.stdout)["errors"]
    assert err["code"] == "host_memory_exceeded" and err["fix"]


def test_gpu_shared_memory_check_and_its_fix() -> None:
    spec = {"method": "mtp", "num_speculative_tokens": 14}
    pool = {**HS_NO_POOL, "kv_connector_extra_config": {"host_pool_gib": 512}}
    # TP 16: the weights leave KV room on an 80 GiB H100 (no_gpu_kv_room otherwise).
    spec_json = json.dumps(spec)
    args = [DSV32, "-tp", "16", "--kv-transfer-config", json.dumps(pool), "--speculative-config", spec_json]
    assert run(*args).returncode == 0  # without the GPU, nothing to check
    # --gpus-per-node 16: TP 16 on one node (an HGX H100 holds 8: gpus_per_node_exceeded).
    report = as_json(*args, "--gpu", "h100", "--gpus-per-node", "16")
    (err,) = report["errors"]
    assert err["code"] == "residency_shared_memory_exceeded"
    assert "needs 323620 B of shared memory per block" in err["message"]
    assert "Lower device_buffer_size or num_speculative_tokens." in err["message"]
    assert report["gpu"]["max_shared_memory_per_block"] == 232448
    fixed = hisparse_rs.apply_fix(
        hisparse_rs.serve_args(
            DSV32, tensor_parallel_size=16, kv_transfer_config=pool, speculative_config=spec
        ),
        err["fix"],
    )
    after = hisparse_rs.check_args(fixed, gpu="h100", gpus_per_node=16)
    assert after.valid, after.errors
    assert after.hisparse is not None and (after.hisparse.residency_shared_memory_bytes or 0) <= 232448
    # A GPU the table does not know is a usage error naming the ones it does.
    unknown = run(*args, "--gpu", "h300")
    assert unknown.returncode == 2 and "known:" in unknown.stderr and "h200" in unknown.stderr


def test_plan_without_hisparse_shows_what_it_would_give() -> None:
    proc = run(
        DSV32,
        "-tp",
        "8",
        "--kv-cache-dtype",
        "fp8_ds_mla",
        "--plan",
        "--gpu",
        "h200",
        "--host-memory-gib",
        "2048",
    )
    assert proc.returncode == 0, proc.stderr
    assert "HiSparse is NOT configured: this plans what it would give, ASSUMING" in proc.stdout
    assert "To serve this: --kv-transfer-config '" in proc.stdout
    assert "result: plan of the assumed HiSparse configuration fits" in proc.stdout


def test_a_plan_serving_no_request_does_not_fit() -> None:
    proc = run(*PLAN_ARGS, "--kv-cache-memory-bytes", "1G")
    assert proc.returncode == 1
    assert "error[plan_serves_no_requests] max_model_len" in proc.stdout and "the GPUs bind" in proc.stdout
    assert "result: plan SERVES NO REQUESTS" in proc.stdout and "plan fits" not in proc.stdout


def test_plan_on_this_machines_ram_warns_and_words_pools_plainly() -> None:
    given = run(
        "--config", "examples/dsv32-decode-pd.yaml", "--plan", "-dp", "8", "--host-memory-gib", "2048"
    )
    assert "GiB = 8 pools x 128.00 GiB; host RAM 2048.00 GiB (given with --host-memory-gib)" in given.stdout
    assert given.returncode == 0
    # Without --host-memory-gib: this machine's RAM, named, and pools that outgrow it only warn.
    local = run("--config", "examples/dsv32-decode-pd.yaml", "--plan", "-dp", "100000", "--json")
    plan = json.loads(local.stdout)
    assert local.returncode == 0 and plan["valid"] and not plan["host"]["host_memory_given"]
    assert [w["code"] for w in plan["warnings"]] == ["host_memory_not_given"]


def test_sweep_tokens_and_columns() -> None:
    proc = run(*PLAN_ARGS, "--gpu", "h200", "--max-model-len", "128k", "--max-num-seqs", "8")
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("sweep (", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert table[-1].split()[0] == "128k"  # 128000 tokens, not "125K"
    assert any("(max_num_seqs)" in row for row in table)
    assert len({len(row) for row in table}) == 1, table  # every row as wide as the header


def test_the_example_says_it_builds_on_first_run(tmp_path: Path) -> None:
    # A copy of the repository's layout without a built binary, and a cargo that only reports.
    (tmp_path / "examples").mkdir()
    script = tmp_path / "examples" / "dsv32-decode-pd.sh"
    script.write_text((ROOT / "examples" / "dsv32-decode-pd.sh").read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cargo").write_text("#!/bin/sh\necho cargo-ran\n")
    (bin_dir / "cargo").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=HANG_S)
    assert proc.returncode == 0 and "cargo-ran" in proc.stdout
    assert "building hisparse-check with cargo (first run only, about a minute" in proc.stderr


def test_every_vllm_flag_form_is_read(tmp_path: Path) -> None:
    # Issue 17: nargs lists (vLLM's nargs="+"), store_true, the
    # EnableDisableAction inverse, abbreviations, -O3; and the YAML list form.
    kv = json.dumps(PD)
    for extra in (
        ["--served-model-name", "a", "b"],
        ["--api-key", "k1", "k2", "--headless", "--disable-prefix-caching", "-O3"],
        ["--max-model", "4096", "--dtype", "bfloat16"],
    ):
        proc = run(DSV32, "--kv-transfer-config", kv, *extra)
        assert proc.returncode == 0, (extra, proc.stderr)
    serve = tmp_path / "serve.yaml"
    serve.write_text(f"served-model-name:\n  - a\n  - b\nkv-transfer-config: '{kv}'\n")
    report = as_json(DSV32, "--config", str(serve))
    assert report["valid"] and report["ignored_flags"] == ["--served-model-name", "a", "b"]
    for extra, needle in (
        (["--served-model-name"], "expected at least one argument"),
        (["--dtype", "float7"], "invalid choice"),
        (["--no-headless"], "unrecognized flag --no-headless"),
    ):
        proc = run(DSV32, "--kv-transfer-config", kv, *extra)
        assert proc.returncode == 2 and needle in proc.stderr, (extra, proc.stderr)


def test_json_flags_read_pythons_numbers() -> None:
    # vLLM's json.loads and pydantic read NaN, Infinity and 1e400 (inf).
    text = json.dumps(PD).replace('"host_pool_gib": 128', '"host_pool_gib": 128, "x": 1e400, "y": NaN')
    assert "NaN" in text
    proc = run(DSV32, "--kv-transfer-config", text, "--hf-overrides", '{"rope_theta": Infinity}', "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_v2_runner_variable_is_read_with_pythons_int() -> None:
    kv = json.dumps(PD)
    for value, code in (("1_0", 0), (" 1 ", 0), ("9" * 23, 0), ("0_0", 1), ("1.0", 1)):
        out = run(DSV32, "--kv-transfer-config", kv, "--json", env={"VLLM_USE_V2_MODEL_RUNNER": value})
        assert out.returncode == code, (value, out.stdout)


def test_issue_22_a_fix_sets_a_path_once_and_a_revealed_error_says_so_in_json() -> None:
    pool = {**HS_NO_POOL, "kv_connector_extra_config": {"host_pool_gib": 512}}
    # --kv-cache-dtype int8: one set of kv_cache_dtype, to the value HiSparse takes,
    # in the JSON fix and on the per-error line.
    args = [DSV32, "-tp", "8", "--kv-cache-dtype", "int8", "--kv-transfer-config", json.dumps(pool)]
    (err,) = as_json(*args)["errors"]
    assert err["fix"] == [{"op": "set", "path": "kv_cache_dtype", "value": "fp8_ds_mla"}]
    text = run(*args).stdout
    assert 'fix:     set kv_cache_dtype to "fp8_ds_mla"' in text, text
    # -dp 8, host_pool_gib 512, --block-size 16 on 2 TiB: two errors, the RAM one revealed.
    args = [DSV32, "-dp", "8", "--block-size", "16", "--kv-transfer-config", json.dumps(pool)]
    report = as_json(*args, "--host-memory-gib", "2048")
    codes = [(e["code"], e.get("revealed", False)) for e in report["errors"]]
    assert codes == [("block_size_unsupported", False), ("host_memory_exceeded", True)]
    assert "host_pool_gib" not in report["errors"][0]["hint"]


def test_issue_22_a_valid_check_says_the_ram_headroom_it_checked_in_both_engines() -> None:
    pool = {**HS_NO_POOL, "kv_connector_extra_config": {"host_pool_gib": 128}}
    vllm = [DSV32, "-tp", "8", "--kv-transfer-config", json.dumps(pool), "--host-memory-gib", "2048"]
    sglang = ["--engine", "sglang", "--model-path", DSV32, "--tp", "8", "--enable-hisparse",
              "--disable-radix-cache", "--gpu", "h200", "--host-memory-gib", "2048"]  # fmt: skip
    for args, pools in ((vllm, "the 1 pool pins 128.00 GiB"), (sglang, "the 8 pools pin")):
        text = run(*args).stdout
        assert "\nhost RAM: 2048 GiB (given with --host-memory-gib): " + pools in text, text
        m = as_json(*args)["host_memory"]
        assert m["left_bytes"] == m["usable_bytes"] - m["pinned_bytes"] > 0, m
        assert f"{m['left_bytes'] / 2**30:.2f} GiB left" in text
    # Without the node's RAM the text says it was not checked, and has no figures.
    text = run(*vllm[:-2]).stdout
    assert "host RAM:" not in text and "host_memory_not_given" in text
    assert "host_memory" not in as_json(*vllm[:-2])


def test_plan_marks_each_figure_exact_measured_or_estimated() -> None:
    """Issue 21 item 3: the text says what each figure is, the JSON too; without GPU memory
    the plan does not say "plan fits" over "?" figures."""
    estimated = run(*PLAN_ARGS, "--gpu-memory-gib", "140")
    assert estimated.returncode == 0, estimated.stderr
    assert (
        "figures: exact (the engine's arithmetic on known inputs): sizes, host pool, host limit; "
        "estimated (our model of what the engine profiles): weights, KV room, GPU blocks, requests"
    ) in estimated.stdout
    measured = run(*PLAN_ARGS, "--kv-cache-memory-bytes", "50G", "--json")
    figures = json.loads(measured.stdout)["figures"]
    assert figures == {
        "sizes": "exact",
        "host_pool": "exact",
        "weights": None,
        "kv_room": "measured",
        "gpu_blocks": "measured",
        "host_limit": "exact",
        "requests": "measured",
    }
    unknown = run(*PLAN_ARGS)
    assert unknown.returncode == 0, unknown.stderr
    assert "unknown (no GPU memory given): KV room, GPU blocks, requests" in unknown.stdout
    assert "plan fits" not in unknown.stdout
    assert "result: plan INCOMPLETE: the host pools fit, the GPU figures are unknown" in unknown.stdout
    assert json.loads(run(*PLAN_ARGS, "--json").stdout)["figures"]["requests"] == "unknown"


def test_plan_says_why_the_concurrency_is_what_it_is() -> None:
    """Issue 21 item 4: the concurrency line (vllm#51041)."""
    proc = run(*PLAN_ARGS, "--gpu-memory-gib", "140")
    assert (
        "  concurrency       a request holds 2,560 indexer blocks that grow with its context and 396 fixed "
        "(6 hot groups x (64 hot + 2 tail)): 13 % of it here, more at a shorter max_model_len"
    ) in proc.stdout
