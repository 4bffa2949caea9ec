"""SGLang 0.5.23 from Python: the ``engine="sglang"`` side of :func:`check`,
:func:`resolve` and :func:`plan`, and :func:`check_sglang_argv`.

Arguments are SGLang ``ServerArgs`` attribute names (``model_path``,
``tp_size``, ``enable_hisparse``, ``hisparse_config``, ``page_size``,
``disaggregation_mode``, ...) with values as SGLang's argparse produces them
(``hisparse_config`` is the JSON text, as ``--hisparse-config`` stores it, or a
mapping). The rules are SGLang 0.5.23's, applied in the Rust core; the results
are the same :class:`Report` and :class:`Diagnostic` types as for vLLM, with
``Report.engine == "sglang"``, ``Diagnostic.stage`` an SGLang stage
(``argparse``, ``resolve``, ``check``, ``scheduler_start``, ``after_weights_load``, ``pool_build``,
``coordinator_init``, ``first_decode``, ``request``, ``never``) and
``Report.hisparse`` a :class:`SglangHiSparseSettings`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hisparse_rs import _core
from hisparse_rs._core import Plan, Report
from hisparse_rs._options import _check_options

__all__ = ["ENGINES", "argv_words", "check_sglang_argv", "engine_name", "sglang_server_args"]

#: The engines hisparse_rs speaks (``engine=`` of check, resolve and plan).
ENGINES = ("vllm", "sglang")

_SERVER_ARG_NAMES = frozenset(_core._sglang_server_arg_names())


def engine_name(engine: object) -> str:
    """``engine`` if it is one of :data:`ENGINES`; raises ValueError (TypeError
    for a non-str) naming the allowed ones."""
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a str, one of {', '.join(ENGINES)}; got {engine!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one hisparse_rs speaks: allowed {', '.join(ENGINES)}")
    return engine


def sglang_server_args(model: str | os.PathLike[str] | None = None, **server_args: Any) -> dict[str, Any]:
    """The ``ServerArgs`` attributes of an SGLang launch as the core reads
    them: ``model`` becomes ``model_path``; None values are left out (SGLang's
    default applies). Raises TypeError on a name that is not an attribute of
    SGLang 0.5.23's ``sglang serve`` (``tp`` for ``tp_size``, a typo)."""
    unknown = sorted(set(server_args) - _SERVER_ARG_NAMES)
    if unknown:
        raise TypeError(
            f"not SGLang 0.5.23 ServerArgs attributes: {', '.join(unknown)} "
            "(use the attribute names: tp_size, dp_size, ep_size, hisparse_config, ...)"
        )
    args = {k: v for k, v in server_args.items() if v is not None}
    if model is not None:
        if "model_path" in args:
            raise TypeError("give the model once: as model or as model_path")
        args["model_path"] = os.fsdecode(model)
    elif isinstance(args.get("model_path"), os.PathLike):
        args["model_path"] = os.fsdecode(args["model_path"])
    return args


def _options(options: dict[str, Any]) -> str | None:
    given = {k: v for k, v in options.items() if v is not None}
    _check_options(given)
    return json.dumps(given) if given else None


def check(
    model: str | os.PathLike[str] | None, machine: dict[str, Any], server_args: dict[str, Any]
) -> Report:
    """:func:`hisparse_rs.check` with ``engine="sglang"`` (see there)."""
    args = sglang_server_args(model, **server_args)
    options = _options(machine)
    return _core.sglang_check_json(args, options)


def plan(
    model: str | os.PathLike[str] | None,
    options: dict[str, Any],
    server_args: dict[str, Any],
    *,
    engine_log: str | None = None,
) -> tuple[Report, Plan | None]:
    """:func:`hisparse_rs.plan` with ``engine="sglang"``: the report and the
    plan (None unless the launch is valid); ``engine_log``: SGLang's start-up log."""
    return plan_args(sglang_server_args(model, **server_args), options, engine_log=engine_log)


def plan_args(
    args: Mapping[str, Any], options: dict[str, Any], *, engine_log: str | None = None
) -> tuple[Report, Plan | None]:
    """:func:`plan` on ``ServerArgs`` attributes (``serve_args(..., engine="sglang")``)."""
    return _core.sglang_plan_json(args, _options(options) or "{}", engine_log)


def check_sglang_argv(
    argv: Sequence[str],
    *,
    gpu: str | None = None,
    host_memory_gib: float | None = None,
    gpu_memory_gib: float | None = None,
    gpus_per_node: int | None = None,
    weights_gib: float | None = None,
) -> Report:
    """Check an SGLang 0.5.23 launch given as its command line, exactly as
    ``hisparse-check --engine sglang ARGV`` reads it; never raises on a bad launch.

    Args:
        argv: the words after ``sglang serve`` (a first word that is not a
            flag is the model, as ``sglang serve MODEL``) or after ``python -m
            sglang.launch_server``; a leading ``sglang serve`` / ``python -m
            sglang.launch_server`` is taken off. Read as SGLang's argparse
            reads them (srt/server_args.py:668-720): every flag of 0.5.23
            with its aliases and unique prefixes, store_true flags, choices
            and types. Its refusals are errors at stage ``argparse``; flags
            the check does not read are in ``Report.ignored_flags``.
        gpu: the GPU by name (``"h200"``, ``"b200"``, ...): its compute
            capability picks SGLang's ``auto`` kv cache dtype (without it
            SM 9.0 is assumed, and a warning says so).
        host_memory_gib: the node's RAM in GiB, for SGLang's host-pool budget
            (``(RAM - 10 GiB) / ranks per host``, pool_host/base.py:84-107).
        gpu_memory_gib: memory of one GPU in GiB (overrides ``gpu``'s figure).
        gpus_per_node: GPUs one node holds (default: ``gpu``'s usual server, 8
            on HGX / DGX boards): a launch whose schedulers take more GPU ids
            is ``gpus_per_node_exceeded`` (model_executor/model_runner.py:455).
        weights_gib: model weights per GPU in GiB (default: estimated from
            config.json), for the checks that size the device slots.

    A report's fixes apply to the same words: ``apply_fix(argv, d.fix,
    engine="sglang")`` gives the fixed command line.

    Raises:
        TypeError: ``argv`` is not a sequence of str, or an option has the wrong type.
        ValueError: an unknown ``gpu`` or an option out of range; a word that
            is not UTF-8 text (sys.argv's surrogates); a command line beyond
            16384 words or 16 MiB; a value beyond what the check holds (an int
            beyond 64 bits, ``--mem-fraction-static nan``).
        ModelLoadError: the model's config.json is not a regular file (a
            FIFO, a device, a directory) or is over its bound, as for vLLM
            (``.code`` ``not_a_regular_file`` / ``file_too_large``).
    """
    words = argv_words(argv)
    options = _options(
        {
            "gpu": gpu,
            "host_memory_gib": host_memory_gib,
            "gpu_memory_gib": gpu_memory_gib,
            "gpus_per_node": gpus_per_node,
            "weights_gib": weights_gib,
        }
    )
    return _core.check_sglang_argv(words, options)


def argv_words(argv: Iterable[str]) -> list[str]:
    """``argv`` as a list of str, read once; TypeError for a str or a
    non-str word, ValueError naming a word that is not UTF-8 text."""
    if isinstance(argv, str | bytes):
        raise TypeError("argv must be a list of str (the words of the command line)")
    words = list(argv)  # once: an iterator read twice would be checked empty
    if not all(isinstance(a, str) for a in words):
        raise TypeError("argv must be a list of str (the words of the command line)")
    for i, word in enumerate(words):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            # sys.argv holds bytes that are not UTF-8 as lone surrogates.
            raise ValueError(
                f"argv[{i}] ({word!r}) is not UTF-8 text: hisparse_rs reads UTF-8 paths and values; "
                "rename the file or directory, or link to it under a UTF-8 name"
            ) from None
    return words
