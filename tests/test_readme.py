"""README.md and docs/*.md stay true: every ```bash and ```python block runs as
written, and prints what the ```text block after it shows.

How a block is run:

- ``bash``: ``bash -c`` with ``set -eo pipefail``, from a scratch copy of the
  repository root (a directory of symbolic links to its entries, so a file a
  command writes, ``--plot plan.png``, lands there and not in the tree), with
  this environment's ``bin`` (``hisparse-check``, ``python``) first on PATH.
  It must exit 0, or with the status an ``<!-- exit N -->`` line right
  before the fence names.
- ``python``: run in this process (one torch and triton import for all of
  them; TRITON_INTERPRET=1 set by conftest on a machine without a GPU), in
  fresh globals, from the same scratch directory; its stdout is captured.
- The ```text block right after a block (blank lines between allowed) is its
  expected stdout: line for line, where a line that is only ``...`` stands
  for any number of lines, and ``...`` inside a line for any text (a path
  prefix, a figure that changes with the fixes' wording).
- A block that cannot run here (it needs a GPU, ``vllm serve``, an install,
  or it is the test suite itself) has ``<!-- not run: why -->`` right before
  its fence. ``NOT_RUN`` below lists every such block, so none is skipped
  silently: marking a new one means adding it there.

The other tests hold the reference tables to the code (codes, deviations, the
``--gpu`` table) and the README to its quickstart shape.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import hisparse_rs
from conftest import HANG_S, ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

# Every block marked not run: (page, its first three words).
NOT_RUN = {
    ("README.md", "bash scripts/test.sh"),
    ("README.md", "pip install ."),
    ("README.md", "vllm serve tests/data/models/deepseek-v3.2"),
    ("README.md", "bash scripts/gpu_bundle.sh"),
    ("docs/gpu-check.md", "bash scripts/gpu_bundle.sh &&"),
    ("docs/kernels.md", "python -m hisparse_rs.kernels.aot"),
    ("docs/benchmarks.md", "python benches/bench_config.py"),
}


@dataclass
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    output: str | None  # the ```text block after it
    not_run: str | None  # the reason, from <!-- not run: ... -->
    exit_status: int

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def head(self) -> str:
        return " ".join(self.code.split("\n", 1)[0].split("#", 1)[0].split()[:3])


FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(path: Path) -> list[Block]:
    """The ```bash and ```python blocks of one page, each with its shown output and markers."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    fences: list[tuple[int, int, str]] = []  # (open, close, lang)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j] != "```":
                j += 1
            assert j < len(lines), f"{path}:{i + 1}: unclosed code fence"
            fences.append((i, j, m.group(1)))
            i = j + 1
        else:
            i += 1
    for k, (start, end, lang) in enumerate(fences):
        if lang not in ("bash", "python"):
            continue
        output = None
        if k + 1 < len(fences):
            nstart, nend, nlang = fences[k + 1]
            if nlang == "text" and all(not line.strip() for line in lines[end + 1 : nstart]):
                output = "\n".join(lines[nstart + 1 : nend]) + "\n"
        marker = lines[start - 1] if start > 0 else ""
        not_run = re.fullmatch(r"<!-- not run: (.+) -->", marker)
        exit_marker = re.fullmatch(r"<!-- exit (\d+) -->", marker)
        found.append(
            Block(
                page=str(path.relative_to(ROOT)),
                line=start + 1,
                lang=lang,
                code="\n".join(lines[start + 1 : end]) + "\n",
                output=output,
                not_run=not_run.group(1) if not_run else None,
                exit_status=int(exit_marker.group(1)) if exit_marker else 0,
            )
        )
    return found


ALL = [b for page in PAGES for b in blocks(page)]
RUN = [b for b in ALL if b.not_run is None]


def shown_matches(shown: str, actual: str) -> bool:
    """Whether ``actual`` is what ``shown`` shows, with its ``...`` elisions."""
    want = shown.rstrip("\n").split("\n")
    got = actual.rstrip("\n").split("\n")
    segments: list[list[re.Pattern[str]]] = [[]]
    for line in want:
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(re.compile(".*".join(re.escape(p) for p in line.rstrip().split("..."))))
    open_start, open_end = not segments[0], not segments[-1]
    segments = [s for s in segments if s]

    def fits(seg: list[re.Pattern[str]], at: int) -> bool:
        return at + len(seg) <= len(got) and all(p.fullmatch(got[at + n].rstrip()) for n, p in enumerate(seg))

    pos = 0
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if n == 0 and not open_start:
            if not fits(seg, 0):
                return False
            pos = len(seg)
            if last and not open_end and pos != len(got):
                return False
            continue
        if last and not open_end:
            return len(got) - len(seg) >= pos and fits(seg, len(got) - len(seg))
        starts = [at for at in range(pos, len(got) - len(seg) + 1) if fits(seg, at)]
        if not starts:
            return False
        pos = starts[0] + len(seg)
    return open_end or pos == len(got) or not segments


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository root as links: commands read the tree, and what they write stays here."""
    root = tmp_path_factory.mktemp("repo")
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (root / entry.name).symlink_to(entry)
    return root


def run_bash(block: Block, cwd: Path) -> tuple[int, str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("HISPARSE_CHECK", None)
    proc = subprocess.run(
        ["bash", "-c", "set -eo pipefail\n" + block.code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=HANG_S,
    )
    return proc.returncode, proc.stdout, proc.stderr


def run_python(block: Block, cwd: Path) -> str:
    out = io.StringIO()
    before = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"{block.page}:{block.line}", "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(before)
    return out.getvalue()


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_block_runs_and_prints_what_the_page_shows(block: Block, scratch: Path) -> None:
    if block.lang == "bash":
        status, stdout, stderr = run_bash(block, scratch)
        assert status == block.exit_status, (
            f"{block.id}: exit {status}, the page expects {block.exit_status}\n{stderr[-3000:]}"
        )
    else:
        stdout = run_python(block, scratch)
    if block.output is not None:
        assert shown_matches(block.output, stdout), (
            f"{block.id}: the page shows\n{block.output}\nthe block prints\n{stdout}"
        )


def test_every_block_not_run_is_listed() -> None:
    marked = {(b.page, b.head) for b in ALL if b.not_run is not None}
    assert marked == NOT_RUN, (
        f"not-run blocks: new {sorted(marked - NOT_RUN)}, no longer there {sorted(NOT_RUN - marked)}"
    )
    assert len(RUN) >= 13, [b.id for b in RUN]


def test_shown_matches_elisions() -> None:
    assert shown_matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert shown_matches("a\n...\n", "a\nb\n")
    assert shown_matches("...\nc x...z\n...\n", "a\nc xyz\nd\n")
    assert not shown_matches("a\nd\n", "a\nb\nd\n")  # no ... : no lines left out
    assert not shown_matches("a\n...\nd\n", "a\nb\nd\ne\n")  # it must end there
    assert not shown_matches("b\n...\n", "a\nb\n")  # and start there


# --- the README is a quickstart; the reference lives in docs/ -------------------------

README = (ROOT / "README.md").read_text()


def test_readme_is_a_quickstart_with_the_two_commands() -> None:
    # A quickstart: one example per job and engine (vLLM 0.33.0, SGLang 0.5.23); the rest is in docs/.
    # Three jobs (check, plan, deploy) for two engines; the reference is in docs/.
    assert len(README.splitlines()) <= 400
    bash_blocks = [b.code.strip() for b in blocks(ROOT / "README.md") if b.lang == "bash"]
    assert "bash examples/dsv32-decode-pd.sh" in bash_blocks
    assert "bash scripts/test.sh" in bash_blocks
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_links_every_docs_page_and_every_link_resolves() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", README))
    assert {p.name for p in DOCS.glob("*.md")} <= linked


def test_every_docs_page_opens_with_a_title_and_an_intro() -> None:
    for page in DOCS.glob("*.md"):
        if page.name == "HISPARSE.md":
            continue
        paras = page.read_text().split("\n\n")
        assert paras[0].startswith("# "), page.name
        assert not paras[1].startswith(("#", "|", "```", "-")), f"{page.name}: no intro paragraph"


def test_readme_lists_every_deviation_from_vllm() -> None:
    section = README.split("## Where we differ from vLLM 0.33.0\n", 1)[1].split("\n## ", 1)[0]
    assert "docs/deviations.md" in section
    codes = re.findall(r"^- `([a-z0-9_]+)`:", section, re.M)
    assert codes == [code for code, _ in hisparse_rs.vllm_deviations()]


def test_the_deviations_table_is_the_codes() -> None:
    text = (DOCS / "deviations.md").read_text()
    section = text.split("## The codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (.*) \|$", section, re.M)
    assert rows == hisparse_rs.vllm_deviations()


def test_the_checks_page_lists_every_code() -> None:
    """docs/checks.md lists every vLLM code, docs/sglang.md every code only SGLang's rules report."""
    sglang_only = set(hisparse_rs.sglang_codes())
    for page, codes in (
        ("checks.md", [c for c in hisparse_rs.error_codes() if c not in sglang_only]),
        ("sglang.md", hisparse_rs.sglang_codes()),
    ):
        section = (DOCS / page).read_text().split("## Checks", 1)[1]
        named = set(re.findall(r"`([a-z0-9_]+)`", section))
        missing = [code for code in codes if code not in named]
        assert not missing, f"codes docs/{page} does not list: {missing}"


def test_the_sglang_deviations_table_is_the_codes() -> None:
    text = (DOCS / "sglang.md").read_text()
    section = text.split("## The codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (.*) \|$", section, re.M)
    assert rows == hisparse_rs.sglang_deviations()


def test_readme_lists_every_deviation_from_sglang() -> None:
    section = README.split("## Where we differ from SGLang 0.5.23\n", 1)[1].split("\n## ", 1)[0]
    assert "docs/sglang.md" in section
    codes = re.findall(r"`([a-z0-9_]+)`", section)
    assert [c for c in codes if c in dict(hisparse_rs.sglang_deviations())] == [
        code for code, _ in hisparse_rs.sglang_deviations()
    ]


def test_the_gpu_table_is_hisparse_core_s() -> None:
    """Each row of the `--gpu` table: its names, the driver's names, arch, memory and shared memory."""
    rows = re.findall(
        r"^\| `([a-z0-9-]+)`(?: \(`[a-z0-9-]+`\))? \| (.*?) \| .*? \| \w+, (\w+) \| (\d+) GiB \| ([\d,]+) B",
        (DOCS / "cli.md").read_text(),
        re.M,
    )
    assert len(rows) >= 7
    for name, reported, arch, memory, shared in rows:
        spec = hisparse_rs.gpu_spec(name)
        assert (spec["arch"], spec["memory_gib"], spec["max_shared_memory_per_block"]) == (
            arch,
            float(memory),
            int(shared.replace(",", "")),
        ), name
        for device in re.findall(r"`([^`]+)`", reported):
            assert hisparse_rs.gpu_spec(device)["name"] == name, device
