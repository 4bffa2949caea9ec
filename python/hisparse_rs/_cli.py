"""Console-script entry point of ``hisparse-check`` (the same Rust code as the binary)."""

from __future__ import annotations

import os
import sys

from hisparse_rs._core import run_cli


def main() -> None:
    """Run ``hisparse-check`` with ``sys.argv`` and exit with its status (0, 1 or 2)."""
    # Arguments that are not UTF-8 reach Rust with replacement characters
    # (a path then reads as not found), never as a traceback.
    argv = [os.fsencode(a).decode("utf-8", "replace") for a in sys.argv[1:]]
    sys.exit(run_cli(argv))


if __name__ == "__main__":
    main()
