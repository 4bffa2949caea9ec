"""docs/sglang.md lists SGLang 0.5.23's resolve_once hooks and check_server_args
calls as the installed wheel has them (issue 23, item 3): the list is generated
from SGLang's source by scripts/gen_sglang_hooks.py, and this test fails while
the committed list differs from what the script reads from the wheel."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_doc_lists_the_wheels_hooks() -> None:
    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.submodule_search_locations, "SGLang is not installed in this venv"
    pkg = next(iter(spec.submodule_search_locations))
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_sglang_hooks.py"), "--check", pkg],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_list_is_the_pipelines_order() -> None:
    """The first hook is the one SGLang runs first (pipeline.py:45), and the
    HiSparse validation pass is among check_server_args' calls."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_sglang_hooks as gen

    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.submodule_search_locations
    hooks = gen.hooks(Path(next(iter(spec.submodule_search_locations))))
    assert hooks[0].name == "handle_deprecated_dp_attention"
    assert ("check", "_hisparse_validation") in [(h.stage, h.name) for h in hooks]
    names = [h.name for h in hooks]
    assert len(names) == len(set(names))
    # Every hook PORTED names is one of the wheel's.
    assert not set(gen.PORTED) - set(names), set(gen.PORTED) - set(names)
