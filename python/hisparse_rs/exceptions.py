"""Exceptions raised by hisparse_rs.

``ConfigError`` carries every error of a configuration at once; ``ModelLoadError``
(raised by the Rust extension) means the model's config.json could not be read.
``PoolError`` (stable ``code``) is raised by the host pool, its layout and the
residency resolver; ``HostPoolExhausted`` (``needed``, ``free`` host blocks) is
the PoolError of an allocation that does not fit. The Rust extension raises
these two classes, so they are defined here, in Python, with typed attributes.
It builds them without running ``__init__`` (``BaseException.__new__`` and
attribute sets, so no Python code runs inside a Rust call): an ``__init__``
must set nothing beyond ``args`` and the attributes documented here. The
classes are handed to the extension when this module is imported, so no
call imports them (an import inside a call can abort the process at exit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hisparse_rs import _core
from hisparse_rs._core import ModelLoadError

if TYPE_CHECKING:
    from hisparse_rs._core import Diagnostic, Report

__all__ = ["ConfigError", "HostPoolExhausted", "ModelLoadError", "PoolError", "missing_extra"]

# The optional extras (pyproject.toml [project.optional-dependencies]) and what they install.
EXTRAS = {"kernels": "torch, triton", "plot": "matplotlib", "vllm": "vllm==0.33.0"}


class ConfigError(ValueError):
    """The serve configuration is invalid (what ``vllm serve`` would refuse).

    Attributes:
        errors: every error, each with a stable ``code``, a field ``path``,
            a ``message``, what was ``given``, what is ``allowed`` and a ``hint``.
        warnings: warnings found in the same pass.
        report: the whole :class:`~hisparse_rs.Report`.
    """

    def __init__(self, report: Report) -> None:
        self.report = report
        self.errors: tuple[Diagnostic, ...] = report.errors
        self.warnings: tuple[Diagnostic, ...] = report.warnings
        lines = [f"{len(self.errors)} error(s) in the serve configuration:"]
        for d in self.errors:
            lines.append(f"  [{d.code}] {d.path}: {d.message}")
            if d.hint:
                lines.append(f"      fix: {d.hint}")
        super().__init__("\n".join(lines))


class PoolError(Exception):
    """A host pool, pool layout or residency resolver call failed; nothing changed.

    Attributes:
        code: stable snake_case code (``hisparse_rs.pool_error_codes()``), e.g.
            ``"unknown_request"``, ``"layer_out_of_range"``,
            ``"union_exceeds_device_buffer"``. Match on it, never on the message.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.code, str(self)))


class HostPoolExhausted(PoolError):
    """An allocation needs more host blocks than are free; nothing was allocated.

    Attributes:
        needed: host blocks the call needed (allocation is all or nothing).
        free: host blocks free at the time of the call.
    """

    def __init__(self, needed: int, free: int, message: str | None = None) -> None:
        super().__init__(
            "host_pool_exhausted",
            message or f"host pool exhausted: {needed} host blocks needed, {free} free",
        )
        self.needed = needed
        self.free = free

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.needed, self.free, str(self)))


def missing_extra(what: str, extra: str, err: ImportError) -> ModuleNotFoundError:
    """The error for an optional dependency that cannot be imported: which
    module, what needs it, and the extra that installs it (raise it ``from err``).

    A ModuleNotFoundError (an ImportError) with the missing module's ``name``,
    so code that catches either still does. ``extra`` is a key of :data:`EXTRAS`.
    """
    missing = err.name or "a dependency"
    cause = "is not installed" if isinstance(err, ModuleNotFoundError) else f"cannot be imported ({err})"
    return ModuleNotFoundError(
        f"{what} needs the {extra!r} extra ({EXTRAS[extra]}): {missing} {cause}. "
        f"Fix: pip install 'hisparse_rs[{extra}]' "
        f"(from a checkout of this repository: pip install '.[{extra}]')",
        name=err.name,
    )


# The extension raises these; it gets them now, not by an import on its first error.
_core._register_exceptions(PoolError, HostPoolExhausted)
