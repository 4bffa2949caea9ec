"""hisparse_rs' vLLM plugin against the real vLLM 0.33.0 (no GPU: see conftest.py).

vLLM finds the plugin through its entry point; ``create_engine_config()``
raises the whole report before any model work on a broken HiSparse
configuration, passes a valid one through unchanged, stays silent without
HiSparse, warns or steps aside when told to; ``vllm serve`` exits with the
report within seconds.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import vllm
import vllm.plugins
import vllm_pipeline
from vllm.config import KVTransferConfig
from vllm.engine.arg_utils import EngineArgs

import hisparse_rs
from hisparse_rs import vllm_plugin

ROOT = Path(__file__).resolve().parents[2]
DSV32 = ROOT / "tests" / "data" / "models" / "deepseek-v3.2"
HISPARSE_ONLY = {"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}


def pd_decode(host_pool_gib: Any = 128) -> dict[str, Any]:
    """The DeepSeek-V3.2 decode-side P/D tree: NixlConnector + HiSparseConnector."""
    extra = {} if host_pool_gib is None else {"host_pool_gib": host_pool_gib}
    return {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                {**HISPARSE_ONLY, "kv_connector_extra_config": extra},
            ]
        },
    }


def engine_args(**kwargs: Any) -> EngineArgs:
    kv = kwargs.pop("kv_transfer_config", None)
    return EngineArgs(
        model=str(DSV32),
        skip_tokenizer_init=True,
        kv_transfer_config=None if kv is None else KVTransferConfig(**kv),
        **kwargs,
    )


@pytest.fixture(autouse=True)
def _plugin_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the plugin on, loaded by vLLM's own loader, nothing checked yet."""
    monkeypatch.delenv(vllm_plugin.ENV, raising=False)
    monkeypatch.delenv("HISPARSE_RS_PREFLIGHT_CHECKED", raising=False)
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)  # once per process in vLLM
    vllm.plugins.load_general_plugins()


def broken() -> EngineArgs:
    """Four HiSparse errors vLLM 0.33 reports one at a time, three after the model loads."""
    return engine_args(
        kv_transfer_config=pd_decode(host_pool_gib=None),
        tensor_parallel_size=8,
        block_size=16,
        attention_config={"hisparse_config": {"device_buffer_size": 1024}},
        scheduler_reserve_full_isl=False,
    )


def test_vllm_loads_the_plugin_through_its_entry_point() -> None:
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group=vllm.plugins.DEFAULT_PLUGINS_GROUP)}
    assert names["hisparse_rs"] == "hisparse_rs.vllm_plugin:register"
    wrapper = EngineArgs.create_engine_config
    assert getattr(wrapper, "__hisparse_rs_preflight__", False)
    # Loading again (vLLM may) does not wrap twice.
    vllm.plugins.plugins_loaded = False
    vllm.plugins.load_general_plugins()
    assert EngineArgs.create_engine_config is wrapper
    assert not getattr(wrapper.__wrapped__, "__hisparse_rs_preflight__", False)  # type: ignore[attr-defined]


def test_a_broken_config_raises_every_error_before_any_model_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_model_work(self: EngineArgs) -> Any:
        raise AssertionError("create_model_config ran before the report")

    monkeypatch.setattr(EngineArgs, "create_model_config", no_model_work)
    args = broken()
    node = vllm_plugin.machine(args, "cuda").options  # the 8 x H200 node (conftest.py)
    assert node["gpu"] == "h200" and node["host_memory_gib"] == 1920
    expected = hisparse_rs.check_args(vllm_plugin.serve_args_of(args), **node)
    with pytest.raises(ValueError) as raised:
        args.create_engine_config()
    text = str(raised.value)
    assert len(expected.errors) >= 4
    for d in expected.errors:
        assert f"error[{d.code}] {d.path}" in text
        assert d.hint is not None and d.hint in text
    assert {d.code for d in expected.errors} >= {
        "host_pool_gib_missing",
        "block_size_unsupported",
        "device_buffer_too_small",
        "scheduler_reserve_full_isl_disabled",
    }
    # The fixes as vllm serve flags, all at once; applied, they pass.
    assert "--block-size 64" in text and "--scheduler-reserve-full-isl" in text
    assert "--kv-transfer-config '" in text and "--attention-config '" in text
    assert "HISPARSE_RS_PREFLIGHT=0" in text


def test_the_flags_of_the_report_make_a_config_that_vllm_starts() -> None:
    node = vllm_plugin.machine(broken(), "cuda").options
    args = vllm_plugin.serve_args_of(broken())
    report = hisparse_rs.check_args(args, **node)
    flags = report.fixed_flags
    assert flags is not None
    fixed = dict(args)
    for d in report.errors:
        fixed = hisparse_rs.apply_fix(fixed, d.fix)
    assert hisparse_rs.check_args(fixed, **node).valid
    verdict = vllm_pipeline.vllm_verdict({**fixed, "model": str(DSV32)})
    assert verdict.starts and verdict.hisparse, verdict
    assert "--block-size 64" in flags


def test_the_environment_fix_has_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # Trial 2: `unset VAR` inside the flags line failed when pasted after the command.
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    with pytest.raises(ValueError) as raised:
        engine_args(kv_transfer_config=pd_decode(), tensor_parallel_size=8).create_engine_config()
    lines = str(raised.value).splitlines()
    lead = "With every fix applied, change the environment (before vllm serve):"
    assert lines[lines.index(lead) + 1].strip() == "unset VLLM_USE_V2_MODEL_RUNNER"
    assert not any("unset" in line for line in lines if line.startswith("  --"))


def test_a_misspelled_kv_connector_key_is_refused_with_the_rename() -> None:
    # Trial finding 1: the plugin was silent (HiSparse read as off) and the fix removed the entry.
    tree = pd_decode(host_pool_gib=256)
    child = tree["kv_connector_extra_config"]["connectors"][1]
    child["kv_conector"] = child.pop("kv_connector")
    with pytest.raises(ValueError) as raised:
        engine_args(kv_transfer_config=tree, tensor_parallel_size=8).create_engine_config()
    text = str(raised.value)
    assert "error[missing_kv_connector]" in text and "rename it to" in text
    assert '"kv_connector": "HiSparseConnector"}]}}' in text  # in the flags: HiSparse stays on
    assert '"host_pool_gib": 256' in text


@pytest.mark.parametrize(("key", "found"), [("conectors", True), ("children", False)])
def test_errors_of_a_config_that_means_hisparse_are_not_silent(key: str, found: bool) -> None:
    # The list under another key: "conectors" reads as connectors (its children are
    # checked, HiSparse on); under "children" the check finds no HiSparseConnector,
    # but the tree names one. Either way vLLM would crash later: refused now.
    tree = pd_decode()
    tree["kv_connector_extra_config"] = {key: tree["kv_connector_extra_config"]["connectors"]}
    args = vllm_plugin.serve_args_of(engine_args(kv_transfer_config=tree))
    assert hisparse_rs.check_args(args).hisparse_enabled is found
    with pytest.raises(ValueError, match="empty_multi_connector"):
        engine_args(kv_transfer_config=tree, tensor_parallel_size=8).create_engine_config()


def test_the_config_is_read_from_hf_config_path_first() -> None:
    llama = ROOT / "tests" / "data" / "models" / "llama-3.1-8b"
    args = vllm_plugin.serve_args_of(
        EngineArgs(model=str(llama), hf_config_path=str(DSV32), skip_tokenizer_init=True)
    )
    assert args["hf_config_path"] == str(DSV32)
    report = hisparse_rs.check_args({**args, "kv_transfer_config": pd_decode(), "tensor_parallel_size": 8})
    assert report.valid and report.model is not None
    assert report.model.architecture == "DeepseekV32ForCausalLM"


def test_a_valid_config_goes_through_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    config = engine_args(kv_transfer_config=pd_decode(), tensor_parallel_size=8, kv_cache_dtype="fp8_ds_mla")
    checked = config.create_engine_config()
    monkeypatch.setenv(vllm_plugin.ENV, "0")
    plain = engine_args(
        kv_transfer_config=pd_decode(), tensor_parallel_size=8, kv_cache_dtype="fp8_ds_mla"
    ).create_engine_config()
    assert checked.attention_config.hisparse_config == plain.attention_config.hisparse_config
    assert (
        checked.kv_transfer_config.kv_connector_extra_config
        == plain.kv_transfer_config.kv_connector_extra_config
    )
    assert checked.compute_hash() == plain.compute_hash()


def test_without_hisparse_it_is_silent(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(hisparse_rs, "check_args", lambda args, **machine: calls.append(args))
    with caplog.at_level(logging.DEBUG, logger="vllm.plugins.hisparse_rs"):
        engine_args().create_engine_config()
    assert calls == []  # nothing configured: not even checked
    assert not [r for r in caplog.records if r.name == "vllm.plugins.hisparse_rs"]


def test_a_connector_tree_without_hisparse_is_checked_but_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="vllm.plugins.hisparse_rs"):
        engine_args(
            kv_transfer_config={"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        ).create_engine_config()
    assert not [r for r in caplog.records if r.name == "vllm.plugins.hisparse_rs"]


def test_warn_mode_logs_the_report_and_lets_vllm_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(vllm_plugin.ENV, "warn")
    args = engine_args(
        kv_transfer_config={**HISPARSE_ONLY, "kv_connector_extra_config": {"host_pool_gib": 0.5}}
    )
    with caplog.at_level(logging.WARNING, logger="vllm.plugins.hisparse_rs"):
        config = args.create_engine_config()  # vLLM's own config code does not check the pool
    assert config.attention_config.hisparse_config is not None
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "vllm.plugins.hisparse_rs")
    assert "error[host_pool_too_small]" in text


def test_warnings_go_to_vllms_logger(caplog: pytest.LogCaptureFixture) -> None:
    kv = pd_decode()
    kv["kv_connector_extra_config"]["connectors"][1]["kv_role"] = "kv_consumer"
    with caplog.at_level(logging.WARNING, logger="vllm.plugins.hisparse_rs"):
        engine_args(kv_transfer_config=kv).create_engine_config()
    messages = [r.getMessage() for r in caplog.records if r.name == "vllm.plugins.hisparse_rs"]
    assert any("hisparse_role_not_kv_both" in m for m in messages), messages


def test_off_means_vllms_own_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vllm_plugin.ENV, "0")
    # vLLM 0.33.0 finds a missing host_pool_gib only once the model has loaded.
    config = engine_args(kv_transfer_config=pd_decode(host_pool_gib=None)).create_engine_config()
    assert config.attention_config.hisparse_config is not None


def test_it_checks_a_configuration_once_per_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = hisparse_rs.check_args
    monkeypatch.setattr(
        hisparse_rs, "check_args", lambda args, **machine: calls.append(args) or real(args, **machine)
    )
    engine_args(kv_transfer_config=pd_decode()).create_engine_config()
    # An API server process started by this one inherits the fingerprint.
    engine_args(kv_transfer_config=pd_decode()).create_engine_config()
    assert len(calls) == 1
    engine_args(kv_transfer_config=pd_decode(host_pool_gib=64)).create_engine_config()
    assert len(calls) == 2  # another configuration is checked


def test_a_refused_configuration_is_refused_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first check left its fingerprint before raising: the same call
    # again (a notebook cell rerun, a retry loop) skipped the check, and
    # vLLM went on to fail one error at a time, after the model loaded.
    for _ in range(2):
        with pytest.raises(ValueError, match=r"error\[host_pool_gib_missing\]"):
            broken().create_engine_config()
    monkeypatch.setenv(vllm_plugin.ENV, "warn")
    broken_pool = engine_args(
        kv_transfer_config={**HISPARSE_ONLY, "kv_connector_extra_config": {"host_pool_gib": 0.5}}
    )
    broken_pool.create_engine_config()  # warn: vLLM goes on, and its children need not check again
    assert os.environ.get("HISPARSE_RS_PREFLIGHT_CHECKED")


def test_a_model_config_that_is_not_local_is_read_from_vllms_model_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vllm_plugin, "_local_model_config", lambda engine_args: None)
    with pytest.raises(ValueError, match=r"error\[host_pool_too_small\]"):
        engine_args(kv_transfer_config=pd_decode(host_pool_gib=1)).create_engine_config()


def test_a_hub_id_is_read_from_the_local_hugging_face_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_hub: Callable[..., str]
) -> None:
    """``vllm serve org/name``: hisparse_rs reads the cached config.json at --revision, as vLLM
    does offline, before any model work; an id that is not cached waits for vLLM's model config."""
    repo = "deepseek-ai/DeepSeek-V3.2"
    hf_hub(repo, revision="v1")  # tests/conftest.py
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))

    def no_model_work(self: EngineArgs) -> Any:
        raise AssertionError("create_model_config ran before the report")

    monkeypatch.setattr(EngineArgs, "create_model_config", no_model_work)
    kv = KVTransferConfig(**pd_decode(host_pool_gib=1))
    args = EngineArgs(model=repo, revision="v1", skip_tokenizer_init=True, kv_transfer_config=kv)
    assert (vllm_plugin.serve_args_of(args)["model"], vllm_plugin.serve_args_of(args)["revision"]) == (
        repo,
        "v1",
    )
    with pytest.raises(ValueError, match=r"error\[host_pool_too_small\]"):
        args.create_engine_config()
    # Not cached at this revision: the check waits for vLLM's own model config.
    deferred: list[Any] = []
    monkeypatch.setattr(vllm_plugin, "_check_after_model_config", lambda *a: deferred.append(a))
    vllm_plugin.preflight(
        EngineArgs(model=repo, revision="v2", skip_tokenizer_init=True, kv_transfer_config=kv)
    )
    assert len(deferred) == 1


def test_an_untested_vllm_version_steps_aside_with_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    wrapper = EngineArgs.create_engine_config
    monkeypatch.setattr(EngineArgs, "create_engine_config", wrapper.__wrapped__)  # type: ignore[attr-defined]
    monkeypatch.setattr(vllm, "__version__", "0.34.0")
    with caplog.at_level(logging.INFO, logger="vllm.plugins.hisparse_rs"):
        vllm_plugin.register()
    assert EngineArgs.create_engine_config is wrapper.__wrapped__  # type: ignore[attr-defined]
    lines = [r.getMessage() for r in caplog.records if r.name == "vllm.plugins.hisparse_rs"]
    assert len(lines) == 1 and "0.34.0" in lines[0] and "0.33.0" in lines[0]


def test_serve_args_use_vllms_names() -> None:
    args = vllm_plugin.serve_args_of(
        engine_args(
            kv_transfer_config=pd_decode(),
            tensor_parallel_size=8,
            decode_context_parallel_size=2,
            prefill_context_parallel_size=1,
            block_size=128,
            max_model_len=65536,
            attention_config={"hisparse_config": {"device_buffer_size": 8192, "eager_host_mirror": False}},
            compilation_config={"cudagraph_mode": "FULL"},
            speculative_config={"method": "mtp", "num_speculative_tokens": 2},
            hf_overrides={"index_topk": 1024},
        )
    )
    assert args["model"] == str(DSV32 / "config.json")
    assert args["kv_transfer_config"] == pd_decode()
    assert args["attention_config"] == {
        "hisparse_config": {"device_buffer_size": 8192, "eager_host_mirror": False}
    }
    assert args["compilation_config"] == {"cudagraph_mode": "FULL"}
    assert args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}
    assert args["hf_overrides"] == {"index_topk": 1024}
    assert (args["tensor_parallel_size"], args["decode_context_parallel_size"], args["block_size"]) == (
        8,
        2,
        128,
    )
    assert args["platform"] == "cuda"
    # Every key is a ServeArgs key (check_args rejects others).
    assert hisparse_rs.check_args(args).hisparse_enabled


SERVE = """
import sys
sys.path.insert(0, {here!r})
import vllm_pipeline
vllm_pipeline.install_nodevice_cuda(vllm_pipeline.Path({stub!r}))
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", "serve", *sys.argv[1:]]
main()
"""


def serve(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``vllm serve ARGV`` (the console script's main) on the no-device CUDA platform.

    The timeout is a hang detector, not a speed target: importing vLLM takes
    most of a run, tens of seconds on 2 busy cores.
    """
    from conftest import STUB

    code = SERVE.format(here=str(Path(__file__).parent), stub=str(STUB))
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600, env=env
    )


def test_vllm_serve_exits_with_the_report_before_loading_weights() -> None:
    kv = json.dumps({**HISPARSE_ONLY, "kv_connector_extra_config": {}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("HISPARSE_RS_PREFLIGHT")}
    done = serve(
        [str(DSV32), "--kv-transfer-config", kv, "-tp", "8", "--block-size", "32", "--skip-tokenizer-init"],
        env,
    )
    assert done.returncode != 0
    assert "error[host_pool_gib_missing]" in done.stderr, done.stderr[-3000:]
    assert "error[block_size_unsupported]" in done.stderr
    assert "--block-size 64" in done.stderr
    assert "Loading weights" not in done.stderr + done.stdout


def _elided(shown: str, actual: str) -> bool:
    """``shown`` with its ``...`` elisions (a line of only ``...``: any lines; inside a line: any text)."""
    import re

    want = shown.splitlines()
    got = actual.splitlines()

    def line(pattern: str) -> re.Pattern[str]:
        return re.compile(".*".join(re.escape(p) for p in pattern.split("...")))

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and line(want[i]).fullmatch(got[j]) is not None and match(i + 1, j + 1)

    return match(0, 0)


def test_the_readme_shows_what_vllm_serve_prints() -> None:
    """README shows the refusal with elisions; docs/vllm-plugin.md the whole message, exactly."""
    import re
    import shlex

    readme = (ROOT / "README.md").read_text()
    match = re.search(r"## Inside `vllm serve`\n.*?```bash\n(.*?)\n```\n\n```text\n(.*?)\n```", readme, re.S)
    assert match, "README lost its vllm serve example"
    command, shown = match.groups()
    whole = re.search(
        r"```text\n(ValueError: hisparse_rs.*?)\n```", (ROOT / "docs/vllm-plugin.md").read_text(), re.S
    )
    assert whole, "docs/vllm-plugin.md lost the whole message"
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:2] == ["vllm", "serve"]
    parsed = vllm_pipeline.serve_parser().parse_args(["--model", str(ROOT / argv[2]), *argv[3:]])
    from vllm.engine.arg_utils import AsyncEngineArgs

    with pytest.raises(ValueError) as raised:
        AsyncEngineArgs.from_cli_args(parsed).create_engine_config()
    assert f"ValueError: {raised.value}" == whole.group(1)
    assert _elided(shown, f"ValueError: {raised.value}"), shown
