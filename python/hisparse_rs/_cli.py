"""Console-script entry point of ``hisparse-check`` (the same Rust code as the binary)."""

from __future__ import annotations

import sys

from hisparse_rs._core import run_cli


def main() -> None:
    """Run ``hisparse-check`` with ``sys.argv`` and exit with its status (0, 1 or 2)."""
    sys.exit(run_cli(sys.argv[1:]))


if __name__ == "__main__":
    main()
