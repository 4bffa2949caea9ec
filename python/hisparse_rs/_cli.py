"""Console-script entry point of ``hisparse-check`` (the same Rust code as the binary).

One addition the Rust binary cannot make: ``--plot PATH`` draws the ``--plan``
sweep with matplotlib (``pip install 'hisparse_rs[plot]'``; from a checkout,
``pip install '.[plot]'``).
"""

from __future__ import annotations

import sys

from hisparse_rs._core import run_cli, run_cli_plan


def _take_plot(argv: list[str]) -> tuple[list[str], str | None]:
    """Remove ``--plot PATH`` / ``--plot=PATH`` from argv; return the rest and the path."""
    rest: list[str] = []
    path: str | None = None
    it = iter(argv)
    for arg in it:
        if arg == "--plot":
            path = next(it, "")
        elif arg.startswith("--plot="):
            path = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return rest, path


def main() -> None:
    """Run ``hisparse-check`` with ``sys.argv`` and exit with its status (0, 1 or 2)."""
    # An argument that is not UTF-8 (a lone surrogate here) is a usage error
    # that names it, from Rust; never a traceback, never "not found".
    argv, plot = _take_plot(sys.argv[1:])
    if plot is None:
        sys.exit(run_cli(argv))
    if not plot:
        print("hisparse-check: error: --plot expects a file path (e.g. --plot plan.png)", file=sys.stderr)
        sys.exit(2)
    try:
        import matplotlib  # noqa: F401  (fail before printing the plan)
    except ImportError:
        from hisparse_rs.planning import PLOT_INSTALL

        print(f"hisparse-check: error: --plot needs matplotlib: {PLOT_INSTALL}", file=sys.stderr)
        sys.exit(2)
    from hisparse_rs.planning import plot_plan

    code, plan = run_cli_plan(argv if "--plan" in argv else [*argv, "--plan"])
    if plan is not None:
        try:
            out = plot_plan(plan, plot)
        except (ValueError, OSError) as e:
            print(f"hisparse-check: error: --plot: {e}", file=sys.stderr)
            sys.exit(2)
        print(f"hisparse-check: plot written to {out}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
