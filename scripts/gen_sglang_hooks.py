"""Write the list of SGLang 0.5.23's resolve_once hooks and check_server_args
calls into docs/sglang.md, generated from SGLang's own source.

The hooks are read with `ast` from the installed SGLang (or the directory given
as the first argument, the package directory `.../sglang`): every
`run_hook(F, server_args)` and `run_post_process_pass(server_args, F)` of
`run_resolution_pipeline` (srt/arg_groups/pipeline.py), in pipeline order, and
every call `check_server_args` makes (srt/arg_groups/validation_hook.py), each
with the file:line of its definition, the `raise` statements in its body and
the first line of its docstring. Which of them hisparse_rs ports (and under
which codes) is this script's `PORTED` table, the one hand-kept column.

`python scripts/gen_sglang_hooks.py [SGLANG_PACKAGE_DIR]` rewrites the block
between the markers; `--check` exits 1 when the committed block differs
(tests/sglang/test_hooks_doc.py runs it against the SGLang of `.venv-sglang`).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "sglang.md"
BEGIN = "<!-- sglang-hooks:begin (scripts/gen_sglang_hooks.py writes this block) -->"
END = "<!-- sglang-hooks:end -->"

#: Plumbing check_server_args calls that check nothing themselves.
PLUMBING = {"resolving_view", "run_post_process_pass"}

#: What hisparse_rs does with each hook: the codes that port its rules (all
#: or in part), or why it is not ported. A hook not named here is "not ported".
PORTED: dict[str, str] = {
    "handle_deprecated_dp_attention": "read: `--dp-size N --enable-dp-attention` is the attention-DP width",
    "handle_cache_compatibility": "in part: `host_receive_off_decode`, `host_receive_with_dcp` (the "
    "host_pool backup decode host receive declares); `hierarchical_cache_without_radix_cache`",
    "handle_pd_disaggregation": "`host_receive_threshold_out_of_range`, `host_receive_with_hisparse`, "
    "`decode_radix_cache_with_hisparse`, "
    "`prefill_complete_with_hisparse`, `prefill_complete_policy_unsupported`; "
    "`attn_dp_size_not_positive`, `decode_dp_size_zero` (its ZeroDivisionErrors)",
    "handle_gpu_memory_settings": "read: the default `chunked_prefill_size` and `mem_fraction_static` by GPU",
    "handle_model_specific_adjustments": "`dsa_dcp_unsupported`, `dsa_kv_cache_dtype_unsupported`, "
    "`triton_dsa_backend_on_cuda`, `tilelang_fp8_with_hisparse`, `tilelang_fp8_backends_mixed`, "
    "DeepSeek-V4's page and dtype, "
    "`speculative_algorithm_not_for_model`; the DSA page 64 and backends (read)",
    "handle_mxfp8_kv_cache_compatibility": "`kv_cache_dtype_needs_blackwell`",
    "validate_prefill_only_disable_kv_cache_args": "`prefill_only_disable_kv_cache_needs_embedding`, "
    "`prefill_only_disable_kv_cache_with_hisparse`, `prefill_only_disable_kv_cache_preconditions` "
    "(chunked prefill -1, radix cache off); in part: CP and FP4/MXFP8 dtypes are not ported",
    "handle_hicache": "`hierarchical_cache_without_radix_cache`",
    "handle_data_parallelism": "`attn_dp_size_not_positive`, `dp_replicas_with_attn_dp`, "
    "`data_parallel_layout_invalid`; the chunked-prefill division (read)",
    "handle_kv_cache_sharding": "`kv_cache_sharding_off_prefill`, `kv_cache_sharding_with_hisparse`; "
    "in part: its rules for a prefill worker (backends, CP, speculation) are not ported",
    "handle_speculative_decoding": "`speculative_algorithm_unknown`, `ngram_bfs_breadth_zero`, "
    "`speculative_num_steps_missing`, "
    "`speculative_eagle_topk_missing`, `eagle_topk_needs_tree_backend`, `ngram_topk_with_pages`, "
    "`ngram_with_dp_attention`, `speculative_adaptive_steps_not_candidate`; EAGLE's defaults (read)",
    "check_server_args": "`chunked_prefill_not_page_multiple`, `tp_pp_not_divisible_by_nnodes`, "
    "`dp_replicas_over_nodes`, `base_gpu_id_negative`, `gpu_id_step_not_positive`, "
    "`moe_dense_tp_size_unsupported`, `served_model_name_colon`; "
    "`ep_size_zero` (the publish after it, entrypoints/engine.py:1175)",
    "check_pipeline_parallel_compat": "`pipeline_speculation_off_prefill`, `pipeline_speculation_not_eagle`",
    "handle_decode_context_parallelism": "`dcp_size_not_positive`; its backend rules are not ported",
    "_hisparse_validation": "`hisparse_model_not_dsa`, `radix_cache_enabled`, `mixed_chunk_with_hisparse`, "
    "`speculative_eagle_topk_not_one`, `speculative_adaptive_with_hisparse`, `dsa_backend_not_allowed`",
}


@dataclass
class Hook:
    stage: str
    name: str
    where: str
    raises: int
    doc: str


def sglang_dir(argv: list[str]) -> Path:
    if argv:
        return Path(argv[0])
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("SGLang is not installed here: give its package directory")
    return Path(next(iter(spec.submodule_search_locations)))


def imports(tree: ast.AST) -> dict[str, str]:
    """Every `from M import N` in the file, function-level ones too: N -> M."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = node.module
    return out


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def calls_in_order(fn: ast.FunctionDef) -> list[ast.Call]:
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def describe(stage: str, name: str, module: str, pkg: Path) -> Hook:
    path = pkg.parent / (module.replace(".", "/") + ".py")
    rel = path.relative_to(pkg.parent / "sglang" / "srt")
    tree = ast.parse(path.read_text())
    fn = function(tree, name)
    if fn is None:
        return Hook(stage, name, f"{rel}", 0, "")
    raises = sum(isinstance(n, ast.Raise) for n in ast.walk(fn))
    doc = (ast.get_docstring(fn) or "").strip().split("\n\n")[0].replace("\n", " ")
    doc = doc.replace("|", "\\|")
    return Hook(stage, name, f"{rel}:{fn.lineno}", raises, doc)


def hooks(pkg: Path) -> list[Hook]:
    srt = pkg / "srt" / "arg_groups"
    pipe = ast.parse((srt / "pipeline.py").read_text())
    where = imports(pipe)
    run = function(pipe, "run_resolution_pipeline")
    assert run is not None, "run_resolution_pipeline not found in pipeline.py"
    out: list[Hook] = []
    seen: set[str] = set()
    for call in calls_in_order(run):
        func = call.func
        if not isinstance(func, ast.Name):
            continue
        arg = None
        if func.id == "run_hook" and call.args and isinstance(call.args[0], ast.Name):
            arg = call.args[0].id
        elif func.id == "run_post_process_pass" and len(call.args) > 1 and isinstance(call.args[1], ast.Name):
            arg = call.args[1].id
        if arg is None or arg in seen:
            continue
        seen.add(arg)
        out.append(describe("resolve", arg, where.get(arg, "sglang.srt.arg_groups.pipeline"), pkg))
    val = ast.parse((srt / "validation_hook.py").read_text())
    vwhere = imports(val)
    check = function(val, "check_server_args")
    assert check is not None, "check_server_args not found in validation_hook.py"
    out.append(describe("check", "check_server_args", "sglang.srt.arg_groups.validation_hook", pkg))
    defined = {n.name for n in ast.walk(val) if isinstance(n, ast.FunctionDef)}
    for call in calls_in_order(check):
        names = [a.id for a in call.args if isinstance(a, ast.Name)]
        if isinstance(call.func, ast.Name):
            names.insert(0, call.func.id)
        for name in names:
            module = vwhere.get(name) or (
                "sglang.srt.arg_groups.validation_hook" if name in defined else None
            )
            skip = module is None or not module.startswith("sglang")
            if skip or name in seen or name in PLUMBING or name == "check_server_args":
                continue
            seen.add(name)
            out.append(describe("check", name, module, pkg))
    return out


def table(pkg: Path) -> str:
    rows = [
        BEGIN,
        "",
        "| # | stage | hook | defined at (srt/) | raises | what it does (its docstring) | hisparse_rs |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, h in enumerate(hooks(pkg), 1):
        ours = PORTED.get(h.name, "not ported")
        rows.append(f"| {i} | {h.stage} | `{h.name}` | `{h.where}` | {h.raises} | {h.doc} | {ours} |")
    rows += ["", END]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    block = table(sglang_dir(args))
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    new = text[:start] + block + text[end:]
    if check:
        if new != text:
            print("docs/sglang.md's hook list differs from SGLang's source: run scripts/gen_sglang_hooks.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
