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
