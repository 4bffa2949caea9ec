"""A pure-Python statement of the HiSparse connector-tree resolution rules.

This is the reference that ``tests/test_reference_property.py`` holds the Rust
resolver (``hisparse_rs.check_args``) to. It is written to be read, not to be
fast, and imports nothing from ``hisparse_rs``. Each rule area is one function;
its docstring names where the rule comes from:

- vLLM 0.33.0 ``vllm/config/kv_transfer.py``: ``KVTransferConfig`` fields and
  roles, ``has_connector`` / ``hisparse_host_pool_gib`` (one MultiConnector
  level deep there; any depth here, with a warning where vLLM differs);
- vLLM 0.33.0 ``vllm/config/vllm.py``: ``VllmConfig.__post_init__`` infers a
  default ``hisparse_config`` from a HiSparseConnector (PR 57041) before it
  validates, and warns on unvalidated top-level connectors;
- vLLM 0.33.0 ``vllm/v1/hisparse/runtime.py``: ``device_buffer_size`` bounds
  (``max_decode_query_len * index_topk`` .. ``iinfo(int16).max + 1``), the
  host-pool size in whole blocks;
- ``/work/shared/spec/HISPARSE.md`` section 2 (inputs), section 3 (resolution)
  and section 4 (validation).

Scope: the serve arguments ``kv_transfer_config``, ``attention_config``,
``speculative_config``, ``max_model_len`` and ``kv_cache_dtype`` (unset, "auto",
a 16-bit type, "fp8" or "fp8_ds_mla"), for a DSA model given as ``hf_config`` (a
DeepSeek-V3.2-like config with a positive ``index_topk``). Everything else
keeps vLLM's defaults (CUDA, no pipeline / decode-context parallelism,
FULL_AND_PIECEWISE graphs, hybrid KV cache manager on, Model Runner V2), so the
engine-level checks of section 4 never fire and are not restated here.

Findings are ``(code, path)`` pairs; paths print like
``kv_transfer_config.kv_connector_extra_config.connectors[1].kv_role``.
Messages, hints and fixes are not part of the reference.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# --- What vLLM 0.33.0 accepts (vllm/config/*.py field lists, connector registry) ---

KV_TRANSFER_FIELDS = frozenset(
    {
        "kv_connector",
        "engine_id",
        "kv_buffer_device",
        "kv_role",
        "kv_port",
        "kv_connector_extra_config",
        "kv_connector_module_path",
        "enable_permute_local_kv",
        "kv_load_failure_policy",
    }
)
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# KVConnectorFactory registrations (vllm/distributed/kv_transfer/kv_connector/factory.py).
KNOWN_CONNECTORS = frozenset(
    {
        "ExampleConnector",
        "ExampleHiddenStatesConnector",
        "LMCacheConnectorV1",
        "LMCacheMPConnector",
        "NixlConnector",
        "NixlPullConnector",
        "NixlPushConnector",
        "MultiConnector",
        "HiSparseConnector",
        "MoRIIOConnector",
        "OffloadingConnector",
        "DecodeBenchConnector",
        "MooncakeConnector",
        "MooncakeStoreConnector",
        "FlexKVConnectorV1",
        "SimpleCPUOffloadConnector",
        "HF3FSKVConnector",
    }
)
# vllm/config/vllm.py: other top-level connectors are a "debug/fallback path" with HiSparse.
VALIDATED_TOP_CONNECTORS = frozenset({"NixlConnector", "MooncakeStoreConnector", "MultiConnector"})
HISPARSE = "HiSparseConnector"
MULTI = "MultiConnector"

ATTENTION_FIELDS = frozenset(
    {
        "backend",
        "minimax_m3_msa_decode_backend",
        "backend_per_kind",
        "flash_attn_version",
        "flash_attn_max_num_splits_for_cuda_graph",
        "tokenspeed_mla_min_split_kv",
        "tq_max_kv_splits_for_cuda_graph",
        "use_trtllm_attention",
        "disable_flashinfer_q_quantization",
        "mla_prefill_backend",
        "use_prefill_query_quantization",
        "trtllm_ragged_backend",
        "indexer_kv_dtype",
        "indexer_sparse_logits",
        "indexer_tp_shard_min_rows",
        "minimax_m3_indexer_cp",
        "hisparse_config",
        "use_non_causal",
        "sparse_mla_force_mqa",
        "sparse_mla_prefill_workspace_factor",
        "flex_attn_block_m",
        "flex_attn_block_n",
        "flex_attn_q_block_size",
        "flex_attn_kv_block_size",
    }
)
HISPARSE_FIELDS = frozenset({"device_buffer_size", "eager_host_mirror"})
SPECULATIVE_FIELDS = frozenset(
    {
        "enforce_eager",
        "num_speculative_tokens",
        "model",
        "method",
        "draft_tensor_parallel_size",
        "tensor_parallel_size",
        "quantization",
        "moe_backend",
        "attention_backend",
        "kv_cache_dtype",
        "max_model_len",
        "revision",
        "code_revision",
        "index_share_for_mtp_iteration",
        "disable_padded_drafter_batch",
        "disable_eagle_block_drop",
        "disable_lookahead_block_hashes",
        "draft_lm_head_quantization",
        "use_local_argmax_reduction",
        "use_heterogeneous_vocab",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "parallel_drafting",
        "target_model_config",
        "target_parallel_config",
        "num_speculative_tokens_per_batch_size",
        "draft_model_config",
        "draft_parallel_config",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_max_cached_requests",
        "suffix_decoding_max_spec_factor",
        "suffix_decoding_min_token_prob",
        "draft_load_config",
        "rejection_sample_method",
        "synthetic_acceptance_rates",
        "synthetic_acceptance_length",
        "enable_adaptive_verification",
        "draft_sample_method",
        "dspark_draft_topk",
        "xpress_topc",
        "fly_window_size",
        "fly_entropy_threshold",
        "fly_entropy_top_k",
    }
)

MAX_DEPTH = 16  # deepest MultiConnector nesting walked (top-level connector = depth 0)
MAX_DEVICE_BUFFER_SIZE = 32768  # runtime.py: hot-buffer slots are int16
BLOCK_SIZE = 64  # sparse-MLA kernel block size on CUDA when --block-size is unset
FP8_DS_MLA_ROW_BYTES = 656  # 512 e4m3 + 4 fp32 scales + 64 bf16 (HISPARSE.md section 5)
GIB = 2**30


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


MISSING: Any = _Sentinel("MISSING")  # a key that is absent (not present with null)


# --- Paths ---

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """Print a path the way the diagnostics do.

    Plain keys (ASCII letters, digits, ``_``, ``-``) are dotted; any other key
    is written ``["key"]`` in JSON string syntax; list indices are ``[i]``.
    """
    out = ""
    for n, seg in enumerate(path):
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif seg and all(c.isascii() and (c.isalnum() or c in "_-") for c in seg):
            out += ("." if n else "") + seg
        else:
            out += "[" + json.dumps(seg, ensure_ascii=False) + "]"
    return out


# --- pydantic lax-mode coercions, as the Rust side spells them ---

# Rust's str::trim strips Unicode White_Space; Python's str.strip() also strips
# U+001C..U+001F, so spell the set out.
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(inf|infinity|nan|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)", re.IGNORECASE
)


def _trim(s: str) -> str:
    return s.strip(_WHITE_SPACE)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def lax_int(v: Any) -> int | None:
    """pydantic lax int: ints, integral floats, integer strings and bools (else None)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        # JSON integers outside i64 are read as u64 / f64, then refused as too large.
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) < 9.0e15 else None
    if isinstance(v, str):
        t = _trim(v)
        if _INT_TEXT.fullmatch(t) and -(2**63) <= int(t) < 2**63:
            return int(t)
    return None


def lax_bool(v: Any) -> bool | None:
    """pydantic lax bool: bools, the numbers 0 / 1 and the usual yes/no strings (else None)."""
    if isinstance(v, bool):
        return v
    if _is_number(v):
        return bool(v) if v in (0, 1) else None
    if isinstance(v, str):
        t = _trim(v).lower()
        if t in ("0", "off", "f", "false", "n", "no"):
            return False
        if t in ("1", "on", "t", "true", "y", "yes"):
            return True
    return None


def py_float(v: Any) -> float | None:
    """``float(host_pool_gib)`` as vLLM applies it (``"inf"`` and ``"nan"`` parse)."""
    if isinstance(v, bool) or _is_number(v):
        f = float(v)
    elif isinstance(v, str):
        t = _trim(v).replace("_", "")
        if not _FLOAT_TEXT.fullmatch(t):
            return None
        f = float(t)
    else:
        return None
    return f


# --- Results ---


@dataclass
class Findings:
    """Errors and warnings as ``(code, path)``."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    def error(self, code: str, path: Path) -> None:
        self.errors.append((code, format_path(path)))

    def warning(self, code: str, path: Path) -> None:
        self.warnings.append((code, format_path(path)))


@dataclass(frozen=True)
class Site:
    """A HiSparseConnector found in the tree."""

    path: Path
    depth: int
    host_pool_gib: Any  # MISSING when its kv_connector_extra_config has no host_pool_gib
    # An unknown key of the connector holds an object with host_pool_gib
    # (e.g. "kv_extra_config"): the value exists, only misplaced.
    host_pool_misplaced: bool


@dataclass
class Tree:
    sites: list[Site] = field(default_factory=list)
    top_connector: str | None = None  # the top-level kv_connector, when it is a string
    # (path, name) of every connector that is not a MultiConnector and is not
    # loaded from kv_connector_module_path
    leaves: list[tuple[Path, str]] = field(default_factory=list)
    # MultiConnectors with connectors: []: vLLM turns the hybrid KV cache manager off
    without_hma: list[Path] = field(default_factory=list)
    # (path, object) of every connector object walked, in walk order
    nodes: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)


# Registered connectors without SupportsHMA (vLLM 0.33 supports_hma_config).
CONNECTORS_WITHOUT_HMA = frozenset(
    {"ExampleConnector", "LMCacheConnectorV1", "LMCacheMPConnector", "FlexKVConnectorV1", "HF3FSKVConnector"}
)


@dataclass(frozen=True)
class Settings:
    """The resolved HiSparse settings the property test compares."""

    enabled_by: tuple[str, str]  # ("explicit", path) or ("inferred", connector path)
    connector: str
    host_pool_gib: float
    device_buffer_size: int
    device_buffer_size_source: str  # "explicit" or "derived"
    eager_host_mirror: bool
    eager_host_mirror_source: str  # "explicit" or "default"
    max_decode_query_len: int


@dataclass
class Expected:
    valid: bool
    hisparse_enabled: bool
    errors: list[tuple[str, str]]
    warnings: list[tuple[str, str]]
    settings: Settings | None


# --- Rule 0: strings that look like unexpanded shell variables ---


def _looks_like_shell_variable(s: str) -> bool:
    s = _trim(s)
    if not s.startswith("$"):
        return False
    rest = s[1:]
    name = rest[1:-1] if len(rest) >= 2 and rest[0] == "{" and rest[-1] == "}" else rest
    return (
        bool(name)
        and (name[0].isascii() and (name[0].isalpha() or name[0] == "_"))
        and all(c.isascii() and (c.isalnum() or c == "_") for c in name[1:])
    )


def scan_shell_variables(value: Any, path: Path, out: Findings) -> None:
    """Warn (``unexpanded_shell_variable``) at every string value, at any depth, that
    looks like ``$NAME`` / ``${NAME}``: a launch script quoted the JSON so the shell
    never expanded it. Keys are not scanned."""
    if isinstance(value, str) and _looks_like_shell_variable(value):
        out.warning("unexpanded_shell_variable", path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            scan_shell_variables(item, (*path, i), out)
    elif isinstance(value, dict):
        for k, item in value.items():
            scan_shell_variables(item, (*path, k), out)


# --- Rule 1: the connector tree (kv_transfer.py KVTransferConfig, MultiConnector) ---


def check_unknown_keys(obj: dict[str, Any], known: frozenset[str], path: Path, out: Findings) -> None:
    """vLLM config classes forbid unknown keys: ``unknown_key`` at ``path.key``."""
    for key in obj:
        if key not in known:
            out.error("unknown_key", (*path, key))


def check_connector_fields(obj: dict[str, Any], path: Path, depth: int, out: Findings) -> str | None:
    """Check one KVTransferConfig-shaped object's own fields; return its valid kv_role.

    - ``connectors`` beside ``kv_connector`` belongs in ``kv_connector_extra_config``:
      ``misplaced_connectors`` (not ``unknown_key``);
    - other keys outside the 0.33.0 field list: ``unknown_key``;
    - ``kv_connector`` / ``kv_connector_module_path`` must be strings or null
      (``invalid_type``); an empty module path is ``invalid_value``;
    - a connector name vLLM does not register, without a module path to load it
      from: ``unknown_connector``;
    - a child (depth > 0) without ``kv_connector``: ``missing_kv_connector``;
    - ``kv_role`` must be one of the three roles (a string that is not:
      ``invalid_value``; not a string: ``invalid_type``) and is required once
      ``kv_connector`` is set (``missing_kv_role``; vLLM raises "Please specify
      kv_role when kv_connector is set"), unless a misspelled ``kv_role`` key
      is there, whose ``unknown_key`` rename supplies it;
    - a child (depth > 0) with its own ``engine_id``: ``invalid_value`` and a
      ``vllm_0_33_crash`` warning (TypeError in vLLM's MultiConnector);
    - the scalar fields are type-checked in pydantic's lax mode.
    """
    if "connectors" in obj:
        out.error("misplaced_connectors", (*path, "connectors"))
    check_unknown_keys(obj, KV_TRANSFER_FIELDS | {"connectors"}, path, out)

    raw_connector = obj.get("kv_connector")
    connector = raw_connector if isinstance(raw_connector, str) else None
    if raw_connector is not None and connector is None:
        out.error("invalid_type", (*path, "kv_connector"))

    raw_module = obj.get("kv_connector_module_path")
    module = None
    if raw_module == "":
        out.error("invalid_value", (*path, "kv_connector_module_path"))
    elif isinstance(raw_module, str):
        module = raw_module
    elif raw_module is not None:
        out.error("invalid_type", (*path, "kv_connector_module_path"))

    if connector is not None and module is None and connector not in KNOWN_CONNECTORS:
        out.error("unknown_connector", (*path, "kv_connector"))
    if depth > 0 and raw_connector is None:
        out.error("missing_kv_connector", (*path, "kv_connector"))

    raw_role = obj.get("kv_role")
    role = raw_role if raw_role in KV_ROLES else None
    if isinstance(raw_role, str) and role is None:
        out.error("invalid_value", (*path, "kv_role"))
    elif raw_role is not None and not isinstance(raw_role, str):
        out.error("invalid_type", (*path, "kv_role"))
    # One typo, one story: a misspelled kv_role (`kv_rol: kv_consumer`) is an
    # unknown_key whose rename supplies the role, so no missing_kv_role beside it.
    # (A kv_role key that is there, null included, is not overwritten: the
    # misspelling is removed instead.)
    renamed_role = "kv_role" not in obj and any(
        difflib.get_close_matches(key, sorted(KV_TRANSFER_FIELDS), n=1, cutoff=0.8) == ["kv_role"]
        for key in obj
        if key not in KV_TRANSFER_FIELDS
    )
    if connector is not None and raw_role is None and not renamed_role:
        out.error("missing_kv_role", (*path, "kv_role"))

    # A child's own engine_id: vLLM 0.33's MultiConnector passes its engine_id
    # to every child, KVTransferConfig(**child, engine_id=...) raises TypeError.
    child_engine_id = depth > 0 and "engine_id" in obj
    if child_engine_id:
        out.error("invalid_value", (*path, "engine_id"))
        out.warning("vllm_0_33_crash", (*path, "engine_id"))
    type_ok: dict[str, Callable[[Any], bool]] = {
        "engine_id": lambda v: child_engine_id or v is None or isinstance(v, str),
        "kv_buffer_device": lambda v: isinstance(v, str),
        "kv_port": lambda v: lax_int(v) is not None,
        "enable_permute_local_kv": lambda v: lax_bool(v) is not None,
        "kv_connector_extra_config": lambda v: isinstance(v, dict),
    }
    for name, ok in type_ok.items():
        if name in obj and not ok(obj[name]):
            out.error("invalid_type", (*path, name))
    if "kv_load_failure_policy" in obj and obj["kv_load_failure_policy"] not in (
        "recompute",
        "fail",
    ):
        out.error("invalid_value", (*path, "kv_load_failure_policy"))
    return role


def _similarity(a: str, b: str) -> float:
    """1 - Levenshtein distance / longer length, case-insensitive."""
    a, b = a.lower(), b.lower()
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else 1 - prev[-1] / longest


def is_hisparse_typo(name: str) -> bool:
    """An unregistered name whose closest registered connector is HiSparseConnector,
    close enough to be a typo (similarity >= 0.8)."""
    if name in KNOWN_CONNECTORS:
        return False
    best = max(KNOWN_CONNECTORS, key=lambda known: _similarity(name, known))
    return best == HISPARSE and _similarity(name, best) >= 0.8


def hisparse_site(
    obj: dict[str, Any],
    path: Path,
    depth: int,
    role: str | None,
    under_producer: bool,
    out: Findings,
) -> Site:
    """Record a HiSparseConnector and warn where it sits oddly.

    - under a ``kv_producer`` (itself or any ancestor): ``kv_producer_role`` at the
      connector; a prefill-only instance never decodes, so the pool is unused;
    - otherwise any valid role but ``kv_both``: ``hisparse_role_not_kv_both`` at its kv_role;
    - depth >= 2: error ``hisparse_connector_too_deep`` at the connector, since vLLM 0.33.0's
      ``has_connector`` / ``hisparse_host_pool_gib`` look one MultiConnector level deep.
    """
    if under_producer:
        out.warning("kv_producer_role", path)
    elif role is not None and role != "kv_both":
        out.warning("hisparse_role_not_kv_both", (*path, "kv_role"))
    if depth >= 2:
        out.error("hisparse_connector_too_deep", path)
    extra = obj.get("kv_connector_extra_config")
    host_pool = extra.get("host_pool_gib", MISSING) if isinstance(extra, dict) else MISSING
    misplaced = any(
        k not in KV_TRANSFER_FIELDS and isinstance(v, dict) and "host_pool_gib" in v for k, v in obj.items()
    )
    return Site(path, depth, host_pool, misplaced)


def walk_connectors(root: Any, out: Findings) -> Tree:
    """Walk ``kv_transfer_config`` and find every HiSparseConnector at any depth.

    The walk is pre-order in document order (so "the first HiSparseConnector" is
    well defined) and iterative, so hostile nesting cannot exhaust the stack:

    - a top-level JSON list: ``connectors_list_at_top_level``; its items are
      walked where they are, as the children of the MultiConnector its fix wraps
      them in (depth 1);
    - a node that is not an object: ``invalid_type`` at the top,
      ``connector_not_object`` for a child (vLLM 0.33 raises AttributeError);
    - children of a MultiConnector live in ``kv_connector_extra_config.connectors``
      (or, when only the misplaced ``connectors`` key exists, or that list is
      empty beside a misplaced one, are walked there, and their errors carry that
      path); no ``kv_connector_extra_config.connectors`` (what vLLM reads):
      ``empty_multi_connector`` and a ``vllm_0_33_crash`` warning; empty (``[]``):
      warning ``empty_multi_connector`` (vLLM starts, without the hybrid KV cache
      manager); a single object: ``invalid_type`` (wrap it in a list), and when it
      names a connector it is walked where it is, as that list's one child;
      anything else: ``connectors_not_list``;
    - a non-Multi connector with a non-empty ``kv_connector_extra_config.connectors``
      list: warning ``connectors_key_ignored`` (vLLM ignores them);
    - children deeper than ``MAX_DEPTH``: ``max_depth_exceeded`` once, at the first
      such ``connectors`` list met, and they are not walked;
    - every HiSparseConnector after the first: ``multiple_hisparse_connectors``
      at its path (vLLM 0.33 allows exactly one).
    """
    top: Path = ("kv_transfer_config",)
    tree = Tree()
    # (value, path, depth, any ancestor is kv_producer)
    stack: list[tuple[Any, Path, int, bool]]
    if isinstance(root, list):
        out.error("connectors_list_at_top_level", top)
        stack = [(root[i], (*top, i), 1, False) for i in reversed(range(len(root)))]
    else:
        if isinstance(root, dict) and isinstance(root.get("kv_connector"), str):
            tree.top_connector = root["kv_connector"]
        stack = [(root, top, 0, False)]
    depth_reported = False
    while stack:
        node, path, depth, under_producer = stack.pop()
        if not isinstance(node, dict):
            out.error("invalid_type" if depth == 0 else "connector_not_object", path)
            if depth == 1:  # vLLM's has_connector calls .get on it: AttributeError
                out.warning("vllm_0_33_crash", path)
            continue
        tree.nodes.append((path, node))
        role = check_connector_fields(node, path, depth, out)
        raw_connector = node.get("kv_connector")
        connector = raw_connector if isinstance(raw_connector, str) else None
        if connector is not None and is_hisparse_typo(connector):
            # Still an unknown_connector error, but validated as HiSparse so that
            # every other error shows up in the same pass.
            connector = HISPARSE
        is_producer = under_producer or role == "kv_producer"
        module = node.get("kv_connector_module_path")
        if connector is not None and connector != MULTI and not (isinstance(module, str) and module):
            tree.leaves.append((path, connector))
        if connector == HISPARSE:
            tree.sites.append(hisparse_site(node, path, depth, role, is_producer, out))

        extra = node.get("kv_connector_extra_config")
        extra_path = (*path, "kv_connector_extra_config")
        if isinstance(extra, dict) and extra.get("connectors") == [] and "connectors" in node:
            children, children_path = node["connectors"], (*path, "connectors")
        elif isinstance(extra, dict) and "connectors" in extra:
            children, children_path = extra["connectors"], (*extra_path, "connectors")
        elif "connectors" in node:
            children, children_path = node["connectors"], (*path, "connectors")
        else:
            children, children_path = MISSING, (*extra_path, "connectors")

        if connector != MULTI:
            if connector is not None and isinstance(children, list) and children and "connectors" not in node:
                out.warning("connectors_key_ignored", children_path)
            continue
        if children == [] or children is MISSING:
            if isinstance(extra, dict) and "connectors" in extra:
                # vLLM starts with it, turning the hybrid KV cache manager off
                # (MultiConnector.all_children_support_hma is False for no children).
                out.warning("empty_multi_connector", children_path)
                tree.without_hma.append(path)
            else:  # vLLM asserts a connectors list when it creates them
                out.error("empty_multi_connector", children_path)
                out.warning("vllm_0_33_crash", children_path)
            continue
        if isinstance(children, dict):
            out.error("invalid_type", children_path)
            if isinstance(children.get("kv_connector"), str) and depth < MAX_DEPTH:
                stack.append((children, children_path, depth + 1, is_producer))
            continue
        if not isinstance(children, list):
            out.error("connectors_not_list", children_path)
            if depth == 0 and children is None:  # vLLM iterates over None: TypeError
                out.warning("vllm_0_33_crash", children_path)
            continue
        if depth + 1 > MAX_DEPTH:
            if not depth_reported:
                depth_reported = True
                out.error("max_depth_exceeded", children_path)
            continue
        for i in reversed(range(len(children))):  # reversed: pop in document order
            stack.append((children[i], (*children_path, i), depth + 1, is_producer))

    for extra_site in tree.sites[1:]:
        out.error("multiple_hisparse_connectors", extra_site.path)
    return tree


# --- Rule 1b: HiSparse settings in a wrong but recognisable place ---

HOST_POOL = "host_pool_gib"


def _jaro_winkler(a: str, b: str) -> float:
    """Jaro-Winkler similarity (prefix scale 0.1, up to 4 characters), case-insensitive."""
    a, b = a.lower(), b.lower()
    if not a and not b:
        return 1.0
    window = max(max(len(a), len(b)) // 2 - 1, 0)
    used = [False] * len(b)
    matches_a = []
    for i, ca in enumerate(a):
        for j in range(max(0, i - window), min(len(b), i + window + 1)):
            if not used[j] and b[j] == ca:
                used[j] = True
                matches_a.append(ca)
                break
    m = len(matches_a)
    if m == 0:
        return 0.0
    matches_b = [cb for j, cb in enumerate(b) if used[j]]
    transpositions = sum(x != y for x, y in zip(matches_a, matches_b, strict=True)) / 2
    jaro = (m / len(a) + m / len(b) + (m - transpositions) / m) / 3
    prefix = 0
    for x, y in zip(a[:4], b[:4], strict=False):
        if x != y:
            break
        prefix += 1
    return jaro + prefix * 0.1 * (1 - jaro)


def is_host_pool_key(key: str, typos: bool) -> bool:
    """``host_pool_gib``, or (``typos``) a key close enough to be its misspelling:
    Jaro-Winkler or Levenshtein similarity >= 0.8."""
    if key == HOST_POOL:
        return True
    return typos and max(_jaro_winkler(key, HOST_POOL), _similarity(key, HOST_POOL)) >= 0.8


@dataclass(frozen=True)
class Misplaced:
    field: str  # host_pool_gib, device_buffer_size or eager_host_mirror
    path: Path  # where the user wrote it
    rejected: bool  # vLLM rejects the key there (else it ignores it)


def find_misplaced(tree: Tree, attention: Any) -> list[Misplaced]:
    """HiSparse settings where vLLM does not read them, in document order:

    - on every connector object walked: a ``host_pool_gib`` key (on the
      HiSparseConnector also a misspelling of it), and on the HiSparseConnector a
      ``device_buffer_size`` / ``eager_host_mirror`` key (vLLM rejects all);
    - in every connector's ``kv_connector_extra_config``: ``host_pool_gib``
      except on the HiSparseConnector, where only a misspelling is misplaced
      (and on a second HiSparseConnector, whose pool is its own),
      and the two hisparse_config fields there (vLLM ignores them);
    - at the top of ``attention_config``: the two fields and a ``host_pool_gib``
      (or misspelling); in ``hisparse_config``: a ``host_pool_gib`` (or misspelling).
    """
    site = tree.sites[0].path if tree.sites else None
    found: list[Misplaced] = []
    for path, obj in tree.nodes:
        is_site = path == site
        for key in obj:
            if key in KV_TRANSFER_FIELDS or key == "connectors":
                continue
            if is_host_pool_key(key, is_site):
                found.append(Misplaced(HOST_POOL, (*path, key), True))
            elif is_site and key in HISPARSE_FIELDS:
                found.append(Misplaced(key, (*path, key), True))
        extra = obj.get("kv_connector_extra_config")
        if not isinstance(extra, dict):
            continue
        # Another HiSparseConnector's own pool is its own: the
        # multiple_hisparse_connectors error removes that connector.
        other_hisparse = not is_site and obj.get("kv_connector") == "HiSparseConnector"
        for key in extra:
            if (is_site or other_hisparse) and key == HOST_POOL:
                continue
            if is_host_pool_key(key, is_site):
                found.append(Misplaced(HOST_POOL, (*path, "kv_connector_extra_config", key), False))
            elif is_site and key in HISPARSE_FIELDS:
                found.append(Misplaced(key, (*path, "kv_connector_extra_config", key), False))
    if isinstance(attention, dict):
        for key in attention:
            if key in HISPARSE_FIELDS:
                found.append(Misplaced(key, ("attention_config", key), True))
            elif key != "hisparse_config" and is_host_pool_key(key, True):
                found.append(Misplaced(HOST_POOL, ("attention_config", key), True))
        hs = attention.get("hisparse_config")
        if isinstance(hs, dict):
            found.extend(
                Misplaced(HOST_POOL, (*HS_PATH, key), True) for key in hs if is_host_pool_key(key, True)
            )
    return found


# --- Rule 2: explicit hisparse_config (vllm/config/attention.py HiSparseConfig) ---


@dataclass(frozen=True)
class Explicit:
    """``attention_config.hisparse_config`` as far as it parsed."""

    device_buffer_size: int | None
    eager_host_mirror: bool | None


HS_PATH: Path = ("attention_config", "hisparse_config")


def parse_hisparse_config(attention: Any, out: Findings) -> Explicit | None:
    """HiSparse is *explicit* when ``attention_config.hisparse_config`` is present and
    not null. A non-object still counts as explicit (``invalid_type``; its fields
    then take defaults). ``device_buffer_size`` must be a lax int > 0 (<= 0:
    ``invalid_value``; not an int: ``invalid_type``); ``eager_host_mirror`` a lax
    bool (null included: ``invalid_type``). Unknown keys are ``unknown_key`` at
    both levels."""
    if attention is MISSING or attention is None:
        return None
    if not isinstance(attention, dict):
        out.error("invalid_type", ("attention_config",))
        return None
    check_unknown_keys(attention, ATTENTION_FIELDS, ("attention_config",), out)
    hs = attention.get("hisparse_config")
    if hs is None:
        return None
    if not isinstance(hs, dict):
        out.error("invalid_type", HS_PATH)
        return Explicit(None, None)
    check_unknown_keys(hs, HISPARSE_FIELDS, HS_PATH, out)

    dbs = None
    raw = hs.get("device_buffer_size")
    if raw is not None:
        n = lax_int(raw)
        if n is None:
            out.error("invalid_type", (*HS_PATH, "device_buffer_size"))
        elif n <= 0:
            out.error("invalid_value", (*HS_PATH, "device_buffer_size"))
        else:
            dbs = n

    mirror = None
    if "eager_host_mirror" in hs:
        mirror = lax_bool(hs["eager_host_mirror"])
        if mirror is None:
            out.error("invalid_type", (*HS_PATH, "eager_host_mirror"))
    return Explicit(dbs, mirror)


# --- Rule 3: speculative decoding widens the decode query ---

SPEC_PATH: Path = ("speculative_config",)
NO_SPEC: Any = _Sentinel("NO_SPEC")  # speculative decoding not configured


def parse_speculative(spec: Any, out: Findings) -> Any:
    """Return NO_SPEC, None (configured without num_speculative_tokens) or n > 0.

    A non-object is ``invalid_type`` and treated as not configured; an invalid
    ``num_speculative_tokens`` (not a lax int > 0) is ``invalid_value`` and
    treated as 1."""
    if spec is MISSING or spec is None:
        return NO_SPEC
    if not isinstance(spec, dict):
        out.error("invalid_type", SPEC_PATH)
        return NO_SPEC
    check_unknown_keys(spec, SPECULATIVE_FIELDS, SPEC_PATH, out)
    raw = spec.get("num_speculative_tokens")
    if raw is None:
        return None
    n = lax_int(raw)
    if n is None or n <= 0:
        out.error("invalid_value", (*SPEC_PATH, "num_speculative_tokens"))
        return 1
    return n


# Methods that draft without a separate model (vLLM 0.33 SpeculativeConfig.__post_init__);
# MTP and its model-named variants (``*_mtp``) too. No method means ``draft_model``.
DRAFTS_WITHOUT_MODEL = frozenset(
    {"dspark", "ngram", "[ngram]", "ngram_gpu", "suffix", "extract_hidden_states"}
)


def needs_draft_model(spec: dict[str, Any]) -> bool:
    """A speculative_config with a count, no ``model`` and a method that needs one."""
    method = spec.get("method")
    drafts_alone = isinstance(method, str) and (
        method == "mtp" or method.endswith("_mtp") or method in DRAFTS_WITHOUT_MODEL
    )
    return spec.get("model") is None and not drafts_alone


def max_decode_query_len(spec: Any, method: Any, nextn_layers: int, out: Findings) -> int:
    """1 without speculative decoding, else 1 + num_speculative_tokens (vLLM 0.33
    on Model Runner V2; parallel drafting does not widen it). With MTP and no
    explicit count vLLM 0.33 refuses the configuration (``speculative_tokens_missing``,
    reported by :func:`reference_check`); the checks go on as the checkpoint's
    ``num_nextn_predict_layers`` would size it for MTP, else as if the query
    were 1 wide (so that every other error is still reported)."""
    if spec is NO_SPEC:
        return 1
    if spec is None:
        is_mtp = isinstance(method, str) and (method == "mtp" or method.endswith("_mtp"))
        return nextn_layers + 1 if is_mtp and nextn_layers > 0 else 1
    return int(min(spec + 1, 2**32 - 1))


# --- Rule 4: defaults, precedence and HiSparse validation (vllm.py, runtime.py) ---


def resolve_device_buffer(explicit: Explicit | None, mdql: int, topk: int, out: Findings) -> int:
    """Explicit ``device_buffer_size`` wins; else ``(max_decode_query_len + 1) *
    index_topk`` (one top-k of LRU slack). It must hold every decode query's
    top-k (``device_buffer_too_small`` below ``mdql * topk``) and fit int16 slots
    (``device_buffer_too_large`` above 32768); an explicit value that is not a
    multiple of the block size only warns (``device_buffer_unaligned``)."""
    path = (*HS_PATH, "device_buffer_size")
    given = explicit.device_buffer_size if explicit else None
    value = given if given is not None else (mdql + 1) * topk
    if value < mdql * topk:
        out.error("device_buffer_too_small", path)
    elif value > MAX_DEVICE_BUFFER_SIZE:
        out.error("device_buffer_too_large", path)
    elif given is not None and value % BLOCK_SIZE != 0:
        out.warning("device_buffer_unaligned", path)
    return value


def report_misplaced_setting(misplaced: list[Misplaced], name: str, given: Any, out: Findings) -> None:
    """A hisparse_config field written elsewhere (and not in hisparse_config):
    ``hisparse_setting_misplaced`` where vLLM rejects the key, warning
    ``hisparse_setting_ignored`` where it ignores it (the first one only)."""
    first = next((m for m in misplaced if m.field == name), None)
    if given is None and first is not None:
        if first.rejected:
            out.error("hisparse_setting_misplaced", first.path)
        else:
            out.warning("hisparse_setting_ignored", first.path)


def host_pool_path(site: Site) -> Path:
    return (*site.path, "kv_connector_extra_config", "host_pool_gib")


def resolve_host_pool(
    site: Site, misplaced: list[Misplaced], min_blocks: int, block_bytes: int, out: Findings
) -> float | None:
    """The first HiSparseConnector's ``kv_connector_extra_config.host_pool_gib``.

    Missing: ``host_pool_gib_misplaced`` at the first ``host_pool_gib`` written
    elsewhere, else ``host_pool_gib_missing`` (unless an unknown key of the connector
    holds it: its ``unknown_key`` error already says where it belongs); not a
    number: ``invalid_type``; not finite: ``invalid_value``; a boolean: warning ``bool_as_number`` (vLLM's
    ``float()`` reads it as 0 / 1); <= 0: ``host_pool_gib_not_positive``; fewer
    than ``ceil(max_model_len / block_size) + 2`` whole blocks of
    ``int(gib * 2**30)`` bytes: ``host_pool_too_small``."""
    path = host_pool_path(site)
    if site.host_pool_gib is MISSING:
        elsewhere = next((m for m in misplaced if m.field == HOST_POOL), None)
        if site.host_pool_misplaced:
            pass
        elif elsewhere is not None:
            out.error("host_pool_gib_misplaced", elsewhere.path)
        else:
            out.error("host_pool_gib_missing", path)
        return None
    gib = py_float(site.host_pool_gib)
    if gib is None:
        out.error("invalid_type", path)
        return None
    if not math.isfinite(gib * GIB):  # vLLM crashes on int(host_pool_gib * 2**30)
        out.error("invalid_value", path)
        return None
    if isinstance(site.host_pool_gib, bool):
        out.warning("bool_as_number", path)
    if gib <= 0:
        out.error("host_pool_gib_not_positive", path)
        return None
    if int(gib * GIB) // block_bytes < min_blocks:
        out.error("host_pool_too_small", path)
    return gib


@dataclass(frozen=True)
class Model:
    """The model facts HiSparse resolution reads from ``config.json``."""

    index_topk: int
    sparse_mla_layers: int
    nextn_layers: int
    latent_values: int  # kv_lora_rank + qk_rope_head_dim

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> Model:
        def get(key: str, default: Any = None) -> Any:
            text: dict[str, Any] = cfg.get("text_config") or {}
            if not isinstance(text, dict):
                text = {}
            v = cfg.get(key)
            return v if v is not None else text.get(key, default)

        topk, layers = get("index_topk"), get("num_hidden_layers")
        assert isinstance(topk, int) and topk > 0, "the reference covers DSA models only"
        assert "layer_types" not in cfg and isinstance(layers, int) and layers > 0
        return cls(
            index_topk=topk,
            sparse_mla_layers=layers,
            nextn_layers=get("num_nextn_predict_layers", 0) or 0,
            latent_values=get("kv_lora_rank", 512) + get("qk_rope_head_dim", 64),
        )

    def row_bytes(self, kv_cache_dtype: str | None) -> int:
        """Host bytes per token per layer: 656 for fp8_ds_mla ("fp8" is its alias on
        sparse MLA); 16-bit KV ("auto" stores the model dtype, bf16 or fp16) takes
        2 bytes per latent value."""
        if kv_cache_dtype in ("fp8", "fp8_ds_mla"):
            return FP8_DS_MLA_ROW_BYTES
        assert kv_cache_dtype in (None, "auto", "bfloat16", "float16")
        return 2 * self.latent_values


def resolve_hisparse(
    tree: Tree,
    explicit: Explicit | None,
    misplaced: list[Misplaced],
    spec: Any,
    spec_method: Any,
    model: Model,
    max_model_len: int,
    kv_cache_dtype: str | None,
    out: Findings,
) -> Settings | None:
    """HiSparse is on when ``hisparse_config`` is explicit or any HiSparseConnector
    exists (vLLM PR 57041 infers a default HiSparseConfig *before* validation, so
    every check below fires on the inferred path too). The explicit config is
    never overwritten: fields the user set keep their values, the rest default,
    so ``{"hisparse_config": {}}`` plus the connector equals the connector alone.

    Every check runs in one pass (HISPARSE.md section 4: a preflight reports
    them all); only the host-pool checks need a connector to read from, so
    ``hisparse_without_connector`` replaces them when there is none.
    """
    site = tree.sites[0] if tree.sites else None
    if explicit is not None:
        enabled_by = ("explicit", format_path(HS_PATH))
    else:
        assert site is not None
        enabled_by = ("inferred", format_path(site.path))
    if tree.top_connector is not None and tree.top_connector not in VALIDATED_TOP_CONNECTORS:
        out.warning("connector_not_validated", ("kv_transfer_config", "kv_connector"))
    # A connector without hybrid-KV-cache-manager support makes vLLM turn the
    # manager off, and HiSparse needs it.
    without_hma = [leaf_path for leaf_path, name in tree.leaves if name in CONNECTORS_WITHOUT_HMA]
    for leaf_path in [*without_hma, *tree.without_hma]:
        out.error("connector_without_hma", (*leaf_path, "kv_connector"))

    mdql = max_decode_query_len(spec, spec_method, model.nextn_layers, out)
    dbs = resolve_device_buffer(explicit, mdql, model.index_topk, out)
    report_misplaced_setting(
        misplaced, "device_buffer_size", explicit.device_buffer_size if explicit else None, out
    )
    mirror = explicit.eager_host_mirror if explicit else None
    report_misplaced_setting(misplaced, "eager_host_mirror", mirror, out)

    if site is None:
        out.error("hisparse_without_connector", HS_PATH)
        return None
    min_blocks = -(-max_model_len // BLOCK_SIZE) + 2
    # With MTP, the draft layers' KV lives in the host pool too.
    is_mtp = isinstance(spec_method, str) and (spec_method == "mtp" or spec_method.endswith("_mtp"))
    layers = model.sparse_mla_layers + (model.nextn_layers if spec is not NO_SPEC and is_mtp else 0)
    block_bytes = BLOCK_SIZE * model.row_bytes(kv_cache_dtype) * layers
    gib = resolve_host_pool(site, misplaced, min_blocks, block_bytes, out)
    if gib is None:
        return None
    return Settings(
        enabled_by=enabled_by,
        connector=format_path(site.path),
        host_pool_gib=gib,
        device_buffer_size=dbs,
        device_buffer_size_source=(
            "explicit" if explicit is not None and explicit.device_buffer_size is not None else "derived"
        ),
        eager_host_mirror=True if mirror is None else mirror,
        eager_host_mirror_source="default" if mirror is None else "explicit",
        max_decode_query_len=mdql,
    )


# --- Everything together ---

SUPPORTED_ARGS = frozenset(
    {
        "hf_config",
        "kv_transfer_config",
        "attention_config",
        "speculative_config",
        "max_model_len",
        "kv_cache_dtype",
    }
)


def reference_check(args: dict[str, Any]) -> Expected:
    """What ``hisparse_rs.check_args(args)`` must report, within this module's scope."""
    assert set(args) <= SUPPORTED_ARGS, f"outside the reference's scope: {set(args) - SUPPORTED_ARGS}"
    assert "hf_config" in args and isinstance(args.get("max_model_len"), int)
    assert args["max_model_len"] > 0
    assert args.get("kv_cache_dtype") in (None, "auto", "bfloat16", "float16", "fp8", "fp8_ds_mla")
    for name in ("kv_transfer_config", "attention_config", "speculative_config"):
        # Text is parsed as JSON first; the reference takes the parsed form only.
        assert not isinstance(args.get(name), str), "give JSON flags as parsed values"

    out = Findings()
    for name in ("kv_transfer_config", "attention_config", "speculative_config"):
        if name in args:
            scan_shell_variables(args[name], (name,), out)

    kv = args.get("kv_transfer_config")
    tree = walk_connectors(kv, out) if kv is not None else Tree()
    explicit = parse_hisparse_config(args.get("attention_config", MISSING), out)
    raw_spec = args.get("speculative_config", MISSING)
    spec = parse_speculative(raw_spec, out)
    spec_method = raw_spec.get("method") if isinstance(raw_spec, dict) else None

    if spec is None:  # vLLM 0.33 SpeculativeConfig requires num_speculative_tokens
        out.error("speculative_tokens_missing", (*SPEC_PATH, "num_speculative_tokens"))
    elif spec is not NO_SPEC and needs_draft_model(raw_spec):
        # ... and a draft model for it, unless the method drafts without one
        # ("num_speculative_tokens was provided but without speculative model").
        out.error("invalid_value", SPEC_PATH)

    enabled = explicit is not None or bool(tree.sites)
    settings = None
    if enabled:
        misplaced = find_misplaced(tree, args.get("attention_config", MISSING))
        settings = resolve_hisparse(
            tree,
            explicit,
            misplaced,
            spec,
            spec_method,
            Model.from_hf_config(args["hf_config"]),
            args["max_model_len"],
            args.get("kv_cache_dtype"),
            out,
        )
        # One error per value: an unknown key whose value a misplaced-setting
        # error (or the connector hisparse_without_connector adds) takes is that error's.
        taken = {format_path(m.path) for m in misplaced if m.rejected}
        claimed = {
            path
            for code, path in out.errors
            if code in ("host_pool_gib_misplaced", "hisparse_setting_misplaced")
        }
        if ("hisparse_without_connector", format_path(HS_PATH)) in out.errors:
            first = next((m for m in misplaced if m.field == HOST_POOL), None)
            if first is not None:
                claimed.add(format_path(first.path))
        out.errors = [e for e in out.errors if not (e[0] == "unknown_key" and e[1] in claimed & taken)]
    valid = not out.errors
    return Expected(
        valid=valid,
        hisparse_enabled=enabled,
        errors=sorted(out.errors),
        warnings=sorted(out.warnings),
        settings=settings if valid else None,
    )
