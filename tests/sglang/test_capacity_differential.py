"""hisparse_rs's SGLang plan sizes the pools as SGLang 0.5.23's own code does, or names a deviation.

Hypothesis draws valid SGLang HiSparse launches (the DSA models of
tests/data/models SGLang's HiSparse takes: DeepSeek-V3.2, GLM-5, GLM-5-FP8,
GLM-5.1, GLM-5.2 with IndexShare; `--hisparse-config` device_buffer_size and
host_to_device_ratio, page size, kv cache dtype, P/D decode or not, TP, DP
attention, EAGLE/NEXTN MTP with its draft tokens, `--max-running-requests`,
`--max-total-tokens`, `--context-length`) and, for each, several KV budgets
(bytes of KV room per GPU, what SGLang's `_profile_available_bytes` returns).
Each launch runs through SGLang's own sizing (`sglang_capacity`: the real
`KVCacheConfigurator`, `DefaultPoolConfigurator.calculate_pool_sizes`,
`resolve_max_num_reqs`, the coordinator's `MLATokenToKVPoolHost`), with
HiSparse and without it (the baseline: the same launch, `--enable-hisparse`
and `--hisparse-config` left out), and through
`hisparse_rs._core.sglang_plan_json` told the same room
(`available_kv_cache_gib`, the option an engine log's "Load weight end" line
fills). Compared:

- `max_total_num_tokens` with HiSparse = `plan.sglang.device_slots`;
- its cell = `plan.sglang.device_cell_bytes`;
- `max_running_requests` = `plan.sglang.max_running_requests`;
- the host pool's tokens = `plan.sglang.host_tokens`, its bytes = `plan.host.pool_bytes`;
- `max_total_num_tokens` without HiSparse = `plan.sglang.baseline_device_slots`;
- the baseline's requests at the context (`min(tokens // context, max_running_requests)`)
  = `plan.at_context.baseline_requests`;
- the model's `context_len` = `plan.max_model_len`.

Equal, or a named deviation (`DEVIATIONS`). The figures are printed at the
end of the session (conftest.py).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_capacity import NotSized, sglang_capacity
from sglang_oracle import model_dir

GIB = 2**30

#: Named deviations: figure -> why the plan's differs from SGLang's.
DEVIATIONS: dict[str, str] = {}

#: What the session saw; conftest.py prints it.
CAPACITY_FIGURES: Counter[str] = Counter()

#: The DSA models SGLang's HiSparse takes (tests/data/models).
MODELS = ["deepseek-v3.2", "deepseek-v3.2", "glm-5", "glm-5-fp8", "glm-5.1", "glm-5.2"]


@st.composite
def launches(draw: st.DrawFn) -> list[str]:
    """A valid SGLang HiSparse launch (argv after `sglang serve`)."""
    name = draw(st.sampled_from(MODELS))
    argv = ["--model-path", model_dir(name), "--device", "cuda", "--enable-hisparse", "--disable-radix-cache"]
    config: dict[str, Any] = {}
    buffer = draw(st.sampled_from([None, 2048, 4096, 6144, 8192]))
    if buffer is not None:
        config["device_buffer_size"] = buffer
    ratio = draw(st.sampled_from([None, 1, 2, 4, 8]))
    if ratio is not None:
        config["host_to_device_ratio"] = ratio
    if config or draw(st.booleans()):
        argv += ["--hisparse-config", json.dumps(config)]
    if draw(st.booleans()):
        argv += ["--disaggregation-mode", "decode"]
    tp = draw(st.sampled_from([1, 2, 4, 8, 8]))
    argv += ["--tp-size", str(tp)]
    if tp >= 2 and draw(st.integers(0, 4)) == 0:
        argv += ["--dp-size", "2", "--enable-dp-attention"]
    dtype = draw(st.sampled_from([None, None, "bf16", "fp8_e4m3"]))
    if dtype is not None:
        argv += ["--kv-cache-dtype", dtype]
    mrr = draw(st.sampled_from([None, None, 16, 64, 256, 4096]))
    if mrr is not None:
        argv += ["--max-running-requests", str(mrr)]
    if draw(st.integers(0, 5)) == 0:
        argv += ["--max-total-tokens", str(draw(st.sampled_from([100_000, 400_000, 1_000_000])))]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--context-length", str(draw(st.sampled_from([4096, 32768, 131072])))]
    if draw(st.integers(0, 3)) == 0:
        steps = draw(st.sampled_from([1, 2, 3]))
        argv += [
            "--speculative-algorithm", draw(st.sampled_from(["EAGLE", "NEXTN"])),
            "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1),
        ]  # fmt: skip
    return argv


def baseline_argv(argv: list[str]) -> list[str]:
    """The same launch without HiSparse (`--enable-hisparse` and its config left out)."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--hisparse-config":
            skip = True
            continue
        if word != "--enable-hisparse":
            out.append(word)
    return out


class RefusedByCheck(Exception):
    """hisparse_rs's check refuses the launch (test_differential.py compares the verdicts)."""


def our_plan(argv: list[str], room: int) -> dict[str, Any]:
    """hisparse_rs's SGLang plan of `argv` with `room` bytes of KV room per GPU, as JSON."""
    from hisparse_rs import _core

    read = json.loads(_core._sglang_argv_json(argv))
    assert not read.get("problems"), read
    options = {"gpu": "h200", "host_memory_gib": 16384.0, "available_kv_cache_gib": room / GIB}
    report, plan = _core.sglang_plan_json(read["values"], json.dumps(options))
    if not report.valid or plan is None:
        raise RefusedByCheck(", ".join(e.code for e in report.errors))
    return json.loads(plan.to_json())


def compare(argv: list[str], rooms: list[int]) -> list[list[str]]:
    """For each room, the figures that differ: `name: SGLang X, plan Y`."""
    plans = [our_plan(argv, room) for room in rooms]
    theirs = sglang_capacity(argv, rooms)
    bases = sglang_capacity(baseline_argv(argv), rooms)
    out = []
    for ours, cap, base in zip(plans, theirs, bases, strict=True):
        s = ours["sglang"]
        at = ours["at_context"]
        tokens = math.ceil(at["context_length"] / base.page_size) * base.page_size
        found = {
            "max_total_num_tokens": (cap.max_total_num_tokens, s["device_slots"]),
            "cell_size": (cap.cell_size, s["device_cell_bytes"]),
            "max_running_requests": (cap.max_running_requests, s["max_running_requests"]),
            "host_tokens": (cap.host_tokens, s["host_tokens"]),
            "host_pool_bytes": (cap.host_pool_bytes, ours["host"]["pool_bytes"]),
            "baseline_max_total_num_tokens": (base.max_total_num_tokens, s["baseline_device_slots"]),
            "baseline_requests": (
                min(base.max_total_num_tokens // tokens, base.max_running_requests),
                at["baseline_requests"],
            ),
        }
        out.append([f"{k}: SGLang {v[0]}, plan {v[1]}" for k, v in found.items() if v[0] != v[1]])
    return out


rooms = st.lists(st.integers(GIB, 100 * GIB), min_size=5, max_size=5)

DSV32 = ["--model-path", model_dir("deepseek-v3.2"), "--device", "cuda"]
HISPARSE = ["--enable-hisparse", "--disable-radix-cache"]


@settings(max_examples=120, deadline=None, database=None)
@example(argv=[*DSV32, *HISPARSE, "--tp-size", "8"], memories=[52 * GIB, GIB, 10 * GIB, 80 * GIB, 3 * GIB])
@given(argv=launches(), memories=rooms)
def test_plan_capacity_equals_sglang(argv: list[str], memories: list[int]) -> None:
    CAPACITY_FIGURES["configurations drawn"] += 1
    try:
        per_room = compare(argv, memories)
    except NotSized:
        CAPACITY_FIGURES["not sized by SGLang (skipped)"] += 1
        return
    except RefusedByCheck as e:
        CAPACITY_FIGURES[f"not sized: refused by hisparse_rs's check ({e}; skipped)"] += 1
        return
    for room, diffs in zip(memories, per_room, strict=True):
        CAPACITY_FIGURES["launches"] += 1
        if not diffs:
            CAPACITY_FIGURES["agree"] += 1
            continue
        unnamed = [d for d in diffs if d.split(":")[0] not in DEVIATIONS]
        assert not unnamed, f"sglang serve {' '.join(argv)} at {room} bytes: {unnamed}"
        for d in diffs:
            CAPACITY_FIGURES[f"deviation {d.split(':')[0]}"] += 1


#: issue 21: at least this many launches compared per CI run.
MIN_LAUNCHES = 500


def test_enough_launches_were_compared() -> None:
    """Runs after the differential above (pytest keeps a module's order): a
    generator or a gate that skips most launches must not pass quietly."""
    assert CAPACITY_FIGURES["launches"] >= MIN_LAUNCHES, dict(CAPACITY_FIGURES)
