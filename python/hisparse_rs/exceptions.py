"""Exceptions raised by hisparse_rs.

``ConfigError`` carries every error of a configuration at once; ``ModelLoadError``
(raised by the Rust extension) means the model's config.json could not be read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hisparse_rs._core import ModelLoadError

if TYPE_CHECKING:
    from hisparse_rs._core import Diagnostic, Report

__all__ = ["ConfigError", "ModelLoadError"]


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
