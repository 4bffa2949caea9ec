"""tests/data/models/SOURCES.md and the files it lists agree: every file
shipped is listed with its checksum, every listed file is shipped, and the
checksums are the files' (issue 10: the list named configs that were missing)."""

from __future__ import annotations

import hashlib
import re

from conftest import MODELS

SOURCES = (MODELS / "SOURCES.md").read_text()


def listed_checksums() -> dict[str, str]:
    block = re.search(r"## Checksums \(sha256\)\n\n```\n(.*?)```", SOURCES, re.S)
    assert block, "SOURCES.md lost its checksum block"
    pairs = (line.split() for line in block.group(1).splitlines() if line.strip())
    return {path: digest for digest, path in pairs}


def shipped() -> set[str]:
    return {
        p.relative_to(MODELS).as_posix() for p in MODELS.rglob("*") if p.is_file() and p.name != "SOURCES.md"
    }


def test_every_shipped_file_is_listed_and_every_listed_file_is_shipped() -> None:
    listed = set(listed_checksums())
    assert shipped() - listed == set(), "shipped but not in SOURCES.md"
    assert listed - shipped() == set(), "in SOURCES.md but not shipped"


def test_checksums_are_the_files() -> None:
    for path, digest in listed_checksums().items():
        assert hashlib.sha256((MODELS / path).read_bytes()).hexdigest() == digest, path


def test_the_table_names_only_shipped_files() -> None:
    table_paths = set(re.findall(r"^\| `([^`]+)` \|", SOURCES, re.M))
    assert table_paths, "SOURCES.md lost its table"
    assert table_paths <= shipped(), table_paths - shipped()
