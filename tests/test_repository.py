"""Facts about the repository as a whole: no file names a document it lacks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a document named by a path (``docs/methods.md``, ``results/streaming.md``) or by a bare
# capitalised name (``README.md``); what follows ``--out`` is a file a command will write
NAMED = re.compile(r"(?<![\w/.{-])((?:\.\./|[\w-]+/)*[\w.-]+\.md)\b")
OUTPUT = re.compile(r"--out[ =]\S*$")


def _tracked() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / f for f in listed if f.endswith((".py", ".md", ".toml", ".yaml"))]


def _missing(files: list[Path]) -> list[str]:
    names = {p.name for p in files}
    missing = []

    def where(path: Path) -> str:
        return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)

    for path in files:
        if path == Path(__file__).resolve():  # its own examples of what it catches
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.name == "pyproject.toml":  # package data: relative to the package
            continue
        for match in NAMED.finditer(text):
            name = match.group(1)
            line_before = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
            if OUTPUT.search(line_before + name) or OUTPUT.search(line_before.rstrip()):
                continue
            if "/" in name:
                if not any((base / name).exists() for base in (ROOT, path.parent)):
                    missing.append(f"{where(path)}: {name}")
            elif name[0].isupper() and name.split(".")[0].isupper() and name not in names:
                missing.append(f"{where(path)}: {name}")
    return missing


def test_no_file_names_a_document_the_repository_lacks(tmp_path):
    assert not _missing(_tracked()), _missing(_tracked())
    # the check can fail: a file naming a document nobody wrote is caught
    stray = tmp_path / "stray.md"
    stray.write_text("the layers are in docs/nowhere.md and ARCHITECTURE.md\n"
                     "written by `bench/x.py --out results/new.md`\n")
    found = _missing([stray])
    assert [f.split(": ")[1] for f in found] == ["docs/nowhere.md", "ARCHITECTURE.md"], found
