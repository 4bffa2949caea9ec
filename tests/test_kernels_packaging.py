"""How the kernels ship: top-level kernels/*.py, one relative symlink each in
python/hisparse_rs/kernels/, the wheel carries them all, torch stays optional."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import hisparse_rs.kernels
from conftest import ROOT

SOURCES = ROOT / "kernels"
LINKS = ROOT / "python" / "hisparse_rs" / "kernels"
PUBLIC = {
    "sparse_mla_decode",
    "sparse_mla_decode_reference",
    "fp8_ds_mla_quantize",
    "fp8_ds_mla_quantize_reference",
    "fp8_ds_mla_dequantize",
    "fp8_ds_mla_dequantize_reference",
    "gather_rows",
    "gather_rows_reference",
}


def source_modules() -> set[str]:
    return {p.name for p in SOURCES.glob("*.py")}


def test_every_kernel_module_has_one_relative_symlink() -> None:
    links = {p.name for p in LINKS.iterdir() if p.name != "__pycache__"}
    assert links == source_modules(), (
        "add a link: ln -s ../../../kernels/<file> python/hisparse_rs/kernels/<file>"
    )
    for name in links:
        link = LINKS / name
        assert link.is_symlink(), f"{link} must be a symlink (maturin follows file symlinks, not directories)"
        assert os.readlink(link) == f"../../../kernels/{name}", f"{link} must be relative"
        assert link.resolve() == (SOURCES / name).resolve()


def test_installed_package_ships_every_module() -> None:
    installed = Path(hisparse_rs.kernels.__file__).parent
    for name in source_modules():
        shipped = installed / name
        assert shipped.is_file(), f"{name} is missing from the installed wheel"
        assert shipped.read_bytes() == (SOURCES / name).read_bytes(), f"{name} is stale: pip install ."
        importlib.import_module(f"hisparse_rs.kernels.{name.removesuffix('.py')}")


def test_public_names() -> None:
    assert set(hisparse_rs.kernels.__all__) >= PUBLIC
    for name in PUBLIC:
        assert callable(getattr(hisparse_rs.kernels, name))


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT / "tests",
        check=False,
    )


def test_import_hisparse_rs_does_not_import_torch() -> None:
    proc = run_python(
        "import sys, hisparse_rs\n"
        "heavy = sorted(m for m in ('torch', 'triton') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    assert proc.returncode == 0, proc.stderr


def test_missing_torch_names_the_extra() -> None:
    proc = run_python(
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "try:\n"
        "    import hisparse_rs.kernels\n"
        "except ImportError as err:\n"
        "    print(err)\n"
        "else:\n"
        "    raise SystemExit('imported without torch')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'hisparse_rs[kernels]'" in proc.stdout and "torch" in proc.stdout


# Imports of these top-level modules fail as if they were not installed (a
# meta-path finder ahead of every other: the installed ones are not found).
BLOCK = """
import sys
BLOCKED = {blocked!r}
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""

EXPECT_EXTRA = """
def expect(extra, missing, call):
    try:
        call()
    except ModuleNotFoundError as err:
        assert f"pip install 'hisparse_rs[{{extra}}]'" in str(err), str(err)
        assert missing in str(err) and err.name == missing, (str(err), err.name)
        print("named:", err)
    else:
        raise SystemExit(f"{{call}} ran without {{missing}}")
"""


def run_without(blocked: set[str], body: str) -> subprocess.CompletedProcess[str]:
    proc = run_python(BLOCK.format(blocked=blocked) + EXPECT_EXTRA.format() + body)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_every_missing_optional_dependency_names_its_extra() -> None:
    # Issue 14: hisparse_rs.DecodeRuntime without torch raised a bare
    # ModuleNotFoundError where hisparse_rs.kernels named the extra.
    proc = run_without(
        {"torch", "triton"},
        "import hisparse_rs, importlib\n"
        "expect('kernels', 'torch', lambda: hisparse_rs.DecodeRuntime)\n"
        "expect('kernels', 'torch', lambda: hisparse_rs.LayerResult)\n"
        "expect('kernels', 'torch', lambda: importlib.import_module('hisparse_rs.runtime'))\n"
        "expect('kernels', 'torch', lambda: importlib.import_module('hisparse_rs.kernels'))\n"
        "layout = hisparse_rs.HostKVPool(4, 4, 656, 1).layout()\n"
        "expect('kernels', 'torch', lambda: hisparse_rs.allocate_pool_buffer(layout, backend='torch'))\n"
        "assert type(hisparse_rs.allocate_pool_buffer(layout)).__module__ == 'numpy'  # auto: numpy\n",
    )
    assert proc.stdout.count("named:") == 5
    run_without(
        {"triton"},
        "import hisparse_rs, importlib\n"
        "expect('kernels', 'triton', lambda: hisparse_rs.DecodeRuntime)\n"
        "expect('kernels', 'triton', lambda: importlib.import_module('hisparse_rs.kernels'))\n",
    )
    # plot_plan (planning.py) imports matplotlib before it reads the plan.
    proc = run_without(
        {"matplotlib"},
        "import hisparse_rs\n"
        "try:\n"
        "    hisparse_rs.plot_plan(None, 'never.png')\n"
        "except ImportError as err:\n"
        "    print(err)\n",
    )
    assert "matplotlib" in proc.stdout and "pip install 'hisparse_rs[plot]'" in proc.stdout


def test_cpu_tensors_without_the_interpreter_get_a_fix() -> None:
    proc = run_python(
        "import torch\n"
        "from hisparse_rs import kernels as K\n"
        "assert not K.INTERPRET\n"
        "try:\n"
        "    K.fp8_ds_mla_quantize(torch.zeros(1, 576, dtype=torch.bfloat16))\n"
        "except ValueError as err:\n"
        "    print(err)\n",
        TRITON_INTERPRET="0",
    )
    assert proc.returncode == 0, proc.stderr
    assert "needs CUDA tensors" in proc.stdout and "fp8_ds_mla_quantize_reference" in proc.stdout
