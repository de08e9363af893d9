"""Each bad-input case of ``tests/test_bad_input.py`` run against the command line of
several commits, one fresh folder per case, and what each did: a clean one-line error
(with its exit status), a traceback, a multi-line error, accepted (exit 0), or hung.

    python bench/bad_input_table.py --commits 036d780,HEAD --out docs/results/bad_input.md

Every commit is unpacked with ``git archive`` into a temporary folder and run as
``python -c`` with that folder first on ``PYTHONPATH``, so the installed package and the
working tree do not mix in. The inputs a case names are written by that commit's own code
(its journal format included). A case is *changed files* when it created, changed or
removed anything in its folder.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_bad_input import CASES, _snapshot  # noqa: E402  (the cases and their snapshot)

# the inputs the cases name, written by the unpacked commit's own code (its journal
# format included) through the test module's own writer
FILES = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "tests")!r})
from test_bad_input import _files
_files(Path("."))
"""

RUN = '''
import sys
from bayeval.cli import main
sys.argv = ["bayeval", *{argv!r}]
main()
'''


def unpack_commit(commit: str, into: Path) -> str:
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return sha


def run_case(tree: Path, argv: list[str], timeout: float) -> dict[str, object]:
    """One case in a fresh folder: its outcome, exit status, first stderr line, seconds."""
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu",
           "HOME": str(tree)}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        made = subprocess.run([sys.executable, "-c", FILES], cwd=folder,
                              env={**env, "JAX_ENABLE_X64": "1"}, capture_output=True,
                              text=True)
        if made.returncode:
            raise RuntimeError(f"writing the inputs failed in {tree}:\n{made.stderr}")
        before = _snapshot(folder)
        args = [a.format(tmp=folder) if "{tmp}" in a else a for a in argv]
        args += ["-q"] if args[0] == "evaluate" else []
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", RUN.format(argv=args)], cwd=folder,
                                  env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"outcome": f"hung (> {timeout:.0f} s)", "code": "", "line": "",
                    "seconds": timeout}
        seconds = time.perf_counter() - start
        changed = _snapshot(folder) != before
    err = [line for line in done.stderr.strip().splitlines() if line.strip()]
    if "Traceback (most recent call last)" in done.stderr:
        outcome = "traceback"
        line = err[-1] if err else ""
    elif done.returncode == 0:
        outcome = "accepted (exit 0)"
        line = ""
    elif len(err) == 1:
        outcome = "one-line error"
        line = err[0]
    else:
        outcome = f"{len(err)}-line error"
        line = next((x for x in err if "rror" in x), err[0] if err else "")
    if changed:
        outcome += ", changed files"
    return {"outcome": outcome, "code": done.returncode, "line": line[:110],
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", default="036d780,HEAD",
                        help="comma-separated commits, the first being 'before'")
    parser.add_argument("--out", type=Path, default=None, help="markdown table to write")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--only", default="", help="run only cases whose name has this")
    opts = parser.parse_args()

    cases = [c for c in CASES if opts.only in c[0]]
    commits = opts.commits.split(",")
    results: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as root:
        for commit in commits:
            tree = Path(root) / commit.replace("/", "_")
            tree.mkdir()
            sha = unpack_commit(commit, tree)
            rows = []
            for i, (name, argv, _) in enumerate(cases, 1):
                row = run_case(tree, argv, opts.timeout)
                print(f"[{sha} {i}/{len(cases)}] {name}: {row['outcome']} "
                      f"({row['seconds']:.1f} s)", file=sys.stderr, flush=True)
                rows.append(row)
            results[sha] = rows
    shas = list(results)
    lines = [f"| case | {' | '.join(shas)} |", "|---|" + "---|" * len(shas)]
    for i, (name, _, _) in enumerate(cases):
        cells = []
        for sha in shas:
            r = results[sha][i]
            cell = f"{r['outcome']}" + (f", exit {r['code']}" if r["code"] not in ("", 0)
                                        else "")
            cell += f", {r['seconds']:.1f} s"
            if r["line"]:
                cell += f": `{str(r['line']).replace('|', '/')}`"
            cells.append(cell)
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines.append("")
    for sha in shas:
        tally: dict[str, int] = {}
        for r in results[sha]:
            key = str(r["outcome"])
            tally[key] = tally.get(key, 0) + 1
        lines.append(f"- {sha}: " + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    text = "\n".join(lines) + "\n"
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
